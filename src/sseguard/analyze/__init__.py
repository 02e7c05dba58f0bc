"""``sseguard analyze``: what the failing streams of a run have in common.

Load records (``load_records``), judge them under a policy and rank the attributes that separate failing
from healthy streams (``analyze``), then show the result (``print_summary``, ``write_html``,
``write_pngs``). matplotlib loads only when a plot is drawn.
"""

from sseguard.analyze.load import load_records
from sseguard.analyze.model import Analysis, ArmComparison, AttributeResult, GroupRow, Split, ValueRow
from sseguard.analyze.report import print_summary, write_html, write_pngs
from sseguard.analyze.summary import analyze, failure_reason

__all__ = ["Analysis", "ArmComparison", "AttributeResult", "GroupRow", "Split", "ValueRow", "analyze",
           "failure_reason", "load_records", "print_summary", "write_html", "write_pngs"]
