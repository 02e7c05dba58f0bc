"""``auto``'s order over the built-in families is one table (``toolcalls.auto.AUTO_ORDER``): it lists
every built-in family of ``pyproject.toml`` once, the registry follows it, and the ``pyproject.toml``
comment points at it rather than restating it."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from sseguard.core.toolcalls import families, family
from sseguard.core.toolcalls.auto import AUTO_ORDER

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"
GROUP_HEADER = '[project.entry-points."sseguard.families"]'


def _entry_point_names() -> list[str]:
    data = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))
    return list(data["project"]["entry-points"]["sseguard.families"])


def _comment_above_the_group() -> str:
    lines = PYPROJECT.read_text(encoding="utf-8").splitlines()
    at = lines.index(GROUP_HEADER)
    comment: list[str] = []
    for line in reversed(lines[:at]):
        if not line.startswith("#"):
            break
        comment.insert(0, line)
    return "\n".join(comment)


def test_the_table_lists_every_built_in_family_once() -> None:
    listed = [name for _, names, _ in AUTO_ORDER for name in names]
    assert len(listed) == len(set(listed)) == 46
    assert sorted(listed) == sorted(_entry_point_names())


def test_each_row_has_a_reason_and_the_ranks_rise() -> None:
    ranks = [rank for rank, _, _ in AUTO_ORDER]
    assert ranks == sorted(set(ranks))
    assert all(why.strip() for _, _, why in AUTO_ORDER)
    assert all(rank < 100 for rank in ranks)  # a plugin's default rank (100) comes after them all


def test_every_built_in_takes_its_rank_from_the_table() -> None:
    for rank, names, _ in AUTO_ORDER:
        for name in names:
            assert family(name).rank == rank, name


def test_the_adjacencies_the_table_explains_hold_in_the_registry() -> None:
    order = list(families())
    # <tool_call>: Hermes (a JSON object follows) before GLM (a name) before Qwen3-Coder (any tag),
    # all of them before Granite 3.1 (an array) and the later families on that tag
    assert order.index("hermes") < order.index("glm45") < order.index("qwen3-coder")
    assert order.index("qwen3-coder") < order.index("granite") < order.index("ernie45")
    assert order.index("ernie45") < order.index("xlam") < order.index("hunyuan")
    # <tool_calls>: Jamba's array before MiniMax-M1's objects before Hunyuan's call tags
    assert order.index("jamba") < order.index("minimax-m1") < order.index("hunyuan")
    # Kimi K2 owns a stray <|tool_call_end|>, which LFM2 writes too
    assert order.index("kimi-k2") < order.index("lfm2")
    assert order[0] == "dsml-v32" and order[-1] == "zaya"


def test_the_pyproject_comment_points_at_the_table_and_restates_no_rank() -> None:
    comment = _comment_above_the_group()
    assert "AUTO_ORDER" in comment and "src/sseguard/core/toolcalls/auto.py" in comment
    assert re.search(r"\(\d+\)|\brank \d+", comment) is None, comment
