"""``docs/protocols.md`` holds each protocol's reason table in its three classes, and it is the
descriptors' table (issue 41: "the table is the one place; … the docs read it"): a reason classified in
code and not on the page, or the reverse, fails here naming it. The page's table is checked against
the registry, and against the classes written out here by hand."""

from __future__ import annotations

import re
from pathlib import Path

from sseguard.core.contract.registry import protocol
from sseguard.core.contract.vocabulary import ReasonClass

DOC = Path(__file__).resolve().parents[2] / "docs" / "protocols.md"
_ROW = re.compile(r"^\| (chat|responses|messages|gemini) \(`([A-Za-z_.]+)`[^|]*"
                  r"\|([^|]*)\|([^|]*)\|([^|]*)\|$")


def doc_tables() -> dict[tuple[str, bool], dict[str, set[str]]]:
    """The page's reason rows: (api, a blocked-prompt row) → class → names."""
    section = DOC.read_text(encoding="utf-8").split("## Reasons are classified, not listed", 1)[1]
    section = section.split("\n## ", 1)[0]
    out: dict[tuple[str, bool], dict[str, set[str]]] = {}
    for line in section.splitlines():
        m = _ROW.match(line.strip())
        if m:
            api, field, *cells = m.groups()
            out[(api, field == "promptFeedback.blockReason")] = {
                cls: set(re.findall(r"`([^`]+)`", cell))
                for cls, cell in zip(("finished", "policy", "failed"), cells, strict=True)}
    return out


def test_the_page_shows_every_protocols_reason_table_in_its_three_classes() -> None:
    tables = doc_tables()
    assert set(tables) == {("chat", False), ("responses", False), ("messages", False),
                           ("gemini", False), ("gemini", True)}
    for (api, blocked), classes in tables.items():
        reasons = protocol(api).reasons
        table = reasons.blocked if blocked else reasons.table
        for cls in ReasonClass:
            named = {name for name, c in table.items() if c is cls}
            assert classes[str(cls)] == named, f"{api} {cls}: page {classes[str(cls)]}, table {named}"


def test_the_page_says_what_a_reader_of_the_issue_expects() -> None:
    """Written out by hand: the reasons the issue named, each in its class on the page."""
    tables = doc_tables()
    assert {"MALFORMED_RESPONSE", "TOO_MANY_TOOL_CALLS", "MISSING_THOUGHT_SIGNATURE", "IMAGE_OTHER",
            "NO_IMAGE", "MALFORMED_FUNCTION_CALL"} <= tables[("gemini", False)]["failed"]
    assert {"IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION", "ESCALATION", "MODEL_ARMOR"} \
        <= tables[("gemini", False)]["policy"]
    assert "CONTINUATION" in tables[("gemini", False)]["finished"]
    assert {"model_context_window_exceeded", "compaction"} <= tables[("messages", False)]["finished"]
    assert {"max_messages", "steered"} <= tables[("responses", False)]["finished"]
    assert tables[("chat", False)] == {"finished": {"stop", "length", "tool_calls", "function_call"},
                                       "policy": {"content_filter"}, "failed": set()}
