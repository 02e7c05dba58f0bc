"""The probe's TOML file: read, its tables checked for unknown keys and wrong types, one line per problem.

Kept apart from ``config`` (which merges these tables with flags and defaults) so that the file's
vocabulary, the keys a user may write, is in one place.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Set
from pathlib import Path
from typing import Any

from sseguard.core.errors import ConfigError


def read_toml(path: str) -> dict[str, Any]:
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read config {path}: {exc.strerror or exc}") from None
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"config {path} is not valid TOML: {exc}") from None


def _known_keys_only(table: Mapping[str, Any], known: Set[str], where: str, within: str = "") -> None:
    """A ``ConfigError`` naming the first unknown key of ``table`` (a typo would otherwise be ignored)
    and every known one; ``within`` says which table when ``where`` does not."""
    unknown = set(table) - known
    if unknown:
        raise ConfigError(f"{where}: unknown key {sorted(unknown)[0]!r}{within} "
                          f"(known: {', '.join(sorted(known))})")


def _typed(table: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    value = table.get(key)
    if value is None:
        return None
    if isinstance(value, bool) and kind is not bool:
        raise ConfigError(f"{where}: {key} must be {_kind_name(kind)}, not a boolean")
    if not isinstance(value, kind):
        raise ConfigError(f"{where}: {key} must be {_kind_name(kind)}")
    return value


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join({str: "a string", int: "a whole number", float: "a number", bool: "true/false",
                        dict: "a table", list: "a list"}.get(k, k.__name__) for k in kinds)


_ARM_KEYS = {"name", "base_url", "url", "model", "headers", "key_env", "key_header", "api", "body"}
_PROBE_KEYS = {"api", "workload", "big_bytes", "body", "body_file", "max_tokens", "reasoning_effort",
               "include_usage", "max_turns", "count", "duration", "concurrency", "rate", "ramp",
               "stall_timeout", "timeout", "connect_timeout", "policy", "tolerate", "out", "seed",
               "model"}


def arm_tables(doc: Mapping[str, Any], path: str) -> list[dict[str, Any]]:
    """The ``[[arm]]`` (or ``[arm.NAME]``) tables, checked and typed: keyword arguments of ``make_arm``."""
    raw_arms = doc.get("arm", doc.get("arms"))
    if raw_arms is None:
        return []
    if isinstance(raw_arms, Mapping):  # [arm.NAME] tables
        raw_arms = [{"name": k, **v} if isinstance(v, Mapping) else v for k, v in raw_arms.items()]
    if not isinstance(raw_arms, list):
        raise ConfigError(f"{path}: [[arm]] must be a list of tables")
    arms: list[dict[str, Any]] = []
    for i, table in enumerate(raw_arms, 1):
        where = f"{path}: arm {i}"
        if not isinstance(table, Mapping):
            raise ConfigError(f"{where} must be a table")
        _known_keys_only(table, _ARM_KEYS, where)
        name = _typed(table, "name", str, where) or f"arm{i}"
        url = _typed(table, "base_url", str, where) or _typed(table, "url", str, where)
        if not url:
            raise ConfigError(f"{where} ({name}): base_url is missing")
        headers = _typed(table, "headers", dict, where) or {}
        arms.append(dict(
            name=name, base_url=url, model=_typed(table, "model", str, where), headers=headers,
            key_env=_typed(table, "key_env", str, where),
            key_header=_typed(table, "key_header", str, where),
            api=_typed(table, "api", str, where), body_file=_typed(table, "body", str, where)))
    return arms


def probe_table(doc: Mapping[str, Any], path: str) -> dict[str, Any]:
    """The ``[probe]`` table, checked for unknown keys."""
    table = doc.get("probe", {})
    if not isinstance(table, Mapping):
        raise ConfigError(f"{path}: [probe] must be a table")
    _known_keys_only(table, _PROBE_KEYS, path, " in [probe]")
    extra = set(doc) - {"probe", "arm", "arms"}
    if extra:
        raise ConfigError(f"{path}: unknown table {sorted(extra)[0]!r} (use [probe] and [[arm]])")
    return dict(table)
