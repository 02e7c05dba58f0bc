"""``sseguard analyze``: what the failing streams of a run have in common.

Count the records where they are (``analyze_sources``: DuckDB over JSONL and Parquet, the SQLite or
PostgreSQL store itself, or Spark), judge the counts under a policy and rank the attributes that
separate failing from healthy streams, then show the result (``print_summary``, ``write_html``,
``write_pngs``). The names load lazily: ``sseguard.analyze.rates`` (the Wilson interval the live board
shows) costs no numpy, scipy or DuckDB import, and matplotlib loads only when a plot is drawn. The
analysis itself is the ``[analyze]`` extra: a name that needs it, asked for without it, raises
``sseguard.extras.MissingExtra`` (one line naming the extra), not numpy's ``ModuleNotFoundError``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the same names, eagerly, for the type checker only
    from sseguard.analyze.facts import Filter
    from sseguard.analyze.load import load_records
    from sseguard.analyze.model import (
        Analysis,
        ArmComparison,
        AttributeResult,
        GroupRow,
        Split,
        ValueRow,
    )
    from sseguard.analyze.report import print_summary, write_html, write_pngs
    from sseguard.analyze.summary import analyze, analyze_sources, failure_reason

_WHERE = {
    "Analysis": "model", "ArmComparison": "model", "AttributeResult": "model", "GroupRow": "model",
    "Split": "model", "ValueRow": "model", "analyze": "summary", "analyze_sources": "summary",
    "failure_reason": "summary", "load_records": "load", "print_summary": "report",
    "write_html": "report", "write_pngs": "report", "Filter": "facts",
}
#: The modules behind those names that import the statistics stack (numpy, scipy) when loaded.
_NEEDS_EXTRA = ("model", "summary", "report")
__all__ = ["Analysis", "ArmComparison", "AttributeResult", "Filter", "GroupRow", "Split", "ValueRow",
           "analyze", "analyze_sources", "failure_reason", "load_records", "print_summary",
           "write_html", "write_pngs"]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'sseguard.analyze' has no attribute {name!r}")
    if module in _NEEDS_EXTRA:
        from sseguard.extras import require

        require("analyze", f"sseguard.analyze.{name}")
    return getattr(importlib.import_module(f"sseguard.analyze.{module}"), name)
