"""The attributes a failing stream may share, one value per record, and how to say a set of values in words.

An operator's question is "what do the broken streams have in common?", so every fact a record holds
that could route, time or load a request differently becomes a column: the response-id prefix (the
backend of a gateway that splices several), each response header (``server``, ``via``, ``x-backend``),
the time window of the run, how many requests the connection had carried before, the prompt size, the
concurrency level, the protocol (``api``: chat, responses, messages — a gateway serving an OpenAI and
an Anthropic path may break on one only), the arm and the workload. ``injected`` (and its header
``x-sseguard-fault``) is the chaos server's ground truth, never evidence, so it is not a column:
ranking on it would "find" every fault trivially.

A value of ``None`` means "not observed for this record" (no response id on an HTTP 503, no headers after
a refused connection). Such records are left out of that attribute's comparison, because the missing
value is a consequence of the failure, not a cause: without this, "all 20 failures had no response id"
would top every ranking.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sseguard.analyze.counts import Cell, CellSet
from sseguard.analyze.facts import PROMPT_BUCKETS, REUSE_BUCKETS, log_bucket

ABSENT = "(absent)"


@dataclass(frozen=True, slots=True)
class Words:
    """Plain-words templates for a set of values: ``had`` a verb phrase, ``noun`` the streams themselves.

    ``item`` renders one value; ``spans`` (for bucketed values) lets neighbouring buckets merge into one
    range, so "2:00–3:00, 3:00–4:00" reads "2:00–4:00".
    """

    had: str
    noun: str
    missing: str
    item: Callable[[str], str] = lambda v: f"`{v}`"
    short: Callable[[str], str] = str
    spans: dict[str, tuple[float, float | None]] | None = None
    fmt_span: Callable[[float, float | None], str] | None = None

    def phrase(self, labels: Sequence[str], order: Sequence[str], *, short: bool = False) -> str | None:
        """The values as one phrase ("32 or 60", "2:00–4:00"), or None when too many to read."""
        parts: list[str] = []
        if self.spans is not None and self.fmt_span is not None:
            position = {label: i for i, label in enumerate(order)}
            ordered = sorted(labels, key=lambda v: position[v])
            run: list[str] = []
            for label in ordered:
                if run and position[label] != position[run[-1]] + 1:
                    parts.append(self._merge(run))
                    run = []
                run.append(label)
            if run:
                parts.append(self._merge(run))
        else:
            parts = [(self.short if short else self.item)(v) for v in labels]
        if short:
            return ", ".join(parts)
        if len(parts) > 4:
            return None
        return join_or(parts)

    def _merge(self, run: list[str]) -> str:
        assert self.spans is not None and self.fmt_span is not None
        return self.fmt_span(self.spans[run[0]][0], self.spans[run[-1]][1])


@dataclass(frozen=True, slots=True)
class Column:
    """One attribute: a label per cell (None = not observed) and its values in display order."""

    key: str
    ordered: bool  # values have an order (time, load, size): contiguous ranges are searched
    labels: list[str | None]
    order: list[str]
    words: Words
    priority: int = field(default=99)  # breaks exact ties: the more direct explanation first

    def label(self, labels: Sequence[str]) -> str:
        """The values in short, for a table cell: "2:00–4:00", "`gw-`", "32 or 60"."""
        return self.words.phrase(labels, self.order, short=True) or ", ".join(labels)

    def had(self, labels: Sequence[str]) -> str:
        phrase = self.words.phrase(labels, self.order)
        if phrase is None:  # too many to read: name the first few, count the rest
            shown = [self.words.item(v) for v in labels[:3]]
            phrase = f"{', '.join(shown)} or {len(labels) - 3} other values"
        return self.words.had.format(phrase)

    def noun(self, labels: Sequence[str]) -> str | None:
        phrase = self.words.phrase(labels, self.order)
        return None if phrase is None else self.words.noun.format(phrase)


# ``api`` first: each protocol has its own response-id prefix (``chatcmpl-``, ``resp_``, ``msg_``) and
# often its own arm, so when one protocol's path fails the three pick the same streams — and "came over
# messages" is the cause, the prefix and the arm only follow from it.
PRIORITY = ("api", "id_prefix", "concurrency", "cache", "time_window", "arm", "workload", "prompt_size",
            "reuse_index")


def columns(cs: CellSet) -> list[Column]:
    """Every attribute with at least two observed values; constant ones explain nothing."""
    cells = cs.cells
    weights = [c.weight for c in cells]
    built = [
        _id_prefix(cells),
        _concurrency(cells),
        _time_window(cells, cs.width),
        _categorical("api", [c.api for c in cells], weights,
                     Words("came over {}", "{} streams", "without an api", item=str)),
        _categorical("arm", [c.arm for c in cells], weights,
                     Words("ran on arm {}", "streams on arm {}", "without an arm")),
        _categorical("workload", [c.workload for c in cells], weights,
                     Words("ran workload {}", "streams of workload {}", "without a workload")),
        _prompt_size(cells),
        _cache(cells),
        _reuse_index(cells),
        *_headers(cs),
    ]
    rank = {key: i for i, key in enumerate(PRIORITY)}
    out = []
    for col in built:
        if col is not None and len(col.order) >= 2:
            out.append(Column(col.key, col.ordered, col.labels, col.order, col.words,
                              rank.get(col.key, len(PRIORITY))))
    return out


def clock(seconds: float) -> str:
    """``m:ss`` (or ``h:mm:ss``, or ``m:ss.s`` for half-second windows) since the start of the run."""
    tenths = round(seconds * 10)
    h, rem = divmod(tenths, 36000)
    m, sec = divmod(rem, 600)
    text = f"{sec // 10:02d}" if sec % 10 == 0 else f"{sec / 10:04.1f}"
    return f"{h}:{m:02d}:{text}" if h else f"{m}:{text}"


def size(n: float) -> str:
    for unit, factor in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= factor:
            value = n / factor
            return f"{value:g} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{n:g} B"


def join_or(parts: Sequence[str]) -> str:
    if len(parts) <= 1:
        return "".join(parts)
    return f"{', '.join(parts[:-1])} or {parts[-1]}"


def _by_count(labels: Sequence[str | None], weights: Sequence[int]) -> list[str]:
    counts: Counter[str] = Counter()
    for v, w in zip(labels, weights, strict=True):
        if v is not None:
            counts[v] += w
    return sorted(counts, key=lambda v: (-counts[v], v))


def _categorical(key: str, labels: list[str | None], weights: Sequence[int], words: Words) -> Column:
    return Column(key, False, labels, _by_count(labels, weights), words)


def _id_prefix(cells: Sequence[Cell]) -> Column:
    labels: list[str | None] = [c.pfx for c in cells]
    shown: dict[str, str] = {}
    for c in cells:
        if c.pfx and c.sep and c.pfx not in shown:
            shown[c.pfx] = c.pfx + c.sep  # keep the separator: `gw-`, `resp_`

    def item(value: str) -> str:
        if value == "numeric":
            return "numeric response ids"
        return f"response ids starting `{shown.get(value, value)}`"

    words = Words("had {}", "{}", "without a response id", item,
                  short=lambda v: v if v == "numeric" else shown.get(v, v))
    return _categorical("id_prefix", labels, [c.weight for c in cells], words)


#: More distinct values than this in an ordered numeric attribute and its ranges are searched in powers
#: of two: the range search tries every (first, last) pair of values, so its cost grows with their square.
MANY_VALUES = 12


def int_range(lo: float, hi: float | None) -> str:
    """A bucket's values in words: ``8–15``, or ``1`` alone."""
    return f"{lo:g}" if lo == hi else f"{lo:g}–{hi:g}"


def _concurrency(cells: Sequence[Cell]) -> Column:
    """A sweep's levels, each its own value. A proxy's records carry the streams in flight at the proxy
    when each started instead: at 10,000 streams over seven workers that is ~1,400 distinct values, whose
    ~10⁶ ranges took the search minutes (docs/benchmarks.md), so many values go in powers of two."""
    texts = ("ran at concurrency {}", "streams at concurrency {}", "without a concurrency level")
    levels = [c.concurrency for c in cells]
    if len(set(levels)) > MANY_VALUES:
        return _log_buckets([log_bucket(v, 2, 1) for v in levels], 2, 1, "concurrency", int_range, texts)
    labels: list[str | None] = [str(v) for v in levels]
    order = sorted({v for v in labels if v is not None}, key=int)
    return Column("concurrency", True, labels, order, Words(*texts, item=str))


def _time_window(cells: Sequence[Cell], width: float | None) -> Column | None:
    if width is None:
        return None
    labels: list[str | None] = []
    spans: dict[str, tuple[float, float | None]] = {}
    index: dict[str, int] = {}
    for c in cells:
        if c.win is None:
            labels.append(None)
            continue
        lo, hi = c.win * width, (c.win + 1) * width
        label = f"{clock(lo)}–{clock(hi)}"
        spans[label] = (lo, hi)
        index[label] = c.win
        labels.append(label)
    order = sorted(spans, key=lambda v: index[v])

    def fmt(lo: float, hi: float | None) -> str:
        return f"{clock(lo)}–{clock(hi if hi is not None else lo)}"

    words = Words("started {} into the run", "streams started {} into the run", "without a start time",
                  spans=spans, fmt_span=fmt)
    return Column("time_window", True, labels, order, words)


def bucket_span(b: int, base: int, start: int) -> tuple[int, int]:
    """The smallest and the largest value of bucket ``b`` (``facts.log_bucket``)."""
    return (0, start - 1) if b == 0 else (start * base ** (b - 1), start * base**b - 1)


def _log_buckets(buckets: Sequence[int | None], base: int, start: int, key: str,
                 fmt: Callable[[float, float | None], str], words: tuple[str, str, str]) -> Column:
    """Buckets growing by ``base`` from ``start`` up: a 2x change matters at 3 requests, not at 3,000.

    ``buckets`` are bucket numbers (``facts.log_bucket``), counted by the backend."""
    labels: list[str | None] = []
    spans: dict[str, tuple[float, float | None]] = {}
    index: dict[str, int] = {}
    for b in buckets:
        if b is None:
            labels.append(None)
            continue
        lo, hi = bucket_span(b, base, start)
        label = fmt(lo, hi)
        spans[label] = (lo, hi)
        index[label] = b
        labels.append(label)
    order = sorted(spans, key=lambda v: index[v])
    return Column(key, True, labels, order, Words(*words, spans=spans, fmt_span=fmt))


#: How much of the prompt the server served from its cache, in order (``facts.CACHE_LABEL``).
CACHE_ORDER = ("none", "partial", "most")


def _cache(cells: Sequence[Cell]) -> Column:
    """Served from cache: a corrupting prefix cache damages only the answers built on cached tokens."""
    labels: list[str | None] = [c.cache for c in cells]
    present = {v for v in labels if v is not None}
    order = [v for v in CACHE_ORDER if v in present]
    words = Words("had {} of the prompt served from cache", "streams with {} of the prompt from cache",
                  "without cache facts", item=str,
                  short=str)
    return Column("cache", True, labels, order, words)


def _reuse_index(cells: Sequence[Cell]) -> Column:
    def fmt(lo: float, hi: float | None) -> str:
        if hi is None:
            return f"≥{lo:g}"
        return f"{lo:g}" if lo == hi else f"{lo:g}–{hi:g}"

    return _log_buckets([c.reuse for c in cells], *REUSE_BUCKETS, "reuse_index", fmt,
                        ("had connection reuse index {}", "streams with connection reuse index {}",
                         "without a reuse index"))


def _prompt_size(cells: Sequence[Cell]) -> Column:
    def fmt(lo: float, hi: float | None) -> str:
        if lo == 0:
            return f"<{size((hi or 0) + 1)}"
        return f"{size(lo)}–{size((hi or lo) + 1)}"

    return _log_buckets([c.prompt for c in cells], *PROMPT_BUCKETS, "prompt_size", fmt,
                        ("had prompts of {}", "streams with prompts of {}", "without a prompt size"))


def _headers(cs: CellSet) -> list[Column]:
    """The headers the backend kept (see ``counts``): few values, shared by many streams."""
    out: list[Column] = []
    weights = [c.weight for c in cs.cells]
    for i, name in enumerate(cs.header_names):
        labels: list[str | None] = [c.headers[i] for c in cs.cells]
        present = [v for v in labels if v is not None and v != ABSENT]
        numeric = _numeric_header(name, labels, present)
        if numeric is not None:
            out.append(numeric)
            continue

        def item(value: str, name: str = name) -> str:
            return f"no `{name}` header" if value == ABSENT else f"`{name}: {value}`"

        words = Words("had {}", "streams with {}", "without response headers", item)
        out.append(_categorical(f"header:{name}", labels, weights, words))
    return out


def _numeric_header(name: str, labels: list[str | None], present: list[str]) -> Column | None:
    """A header whose values are all whole numbers (a queue depth, requests in flight) is ordered:
    its ranges are searched like concurrency levels, in powers of two when it has many values."""
    if not present or not all(v.isdigit() for v in present):
        return None
    key = f"header:{name}"
    texts = (f"had `{name}` {{}}", f"streams with `{name}` {{}}", "without response headers")
    values: list[int | None] = [int(v) if v is not None and v.isdigit() else None for v in labels]
    if len(set(present)) > MANY_VALUES:
        return _log_buckets([None if v is None else log_bucket(v, 2, 1) for v in values], 2, 1, key,
                            int_range, texts)
    shown: list[str | None] = [str(v) if v is not None else None for v in values]
    order = sorted({v for v in shown if v is not None}, key=int)
    return Column(key, True, shown, order, Words(*texts, item=str))
