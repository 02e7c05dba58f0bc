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

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sseguard.record import Record, id_prefix

#: Headers that carry ground truth (what the chaos server injected), not evidence.
GROUND_TRUTH_HEADERS = frozenset({"x-sseguard-fault"})
#: More distinct values than this and a header is an id or a timing, not a route.
MAX_CATEGORIES = 50
#: A header whose distinct values reach this share of its records is per-request (x-request-id, trace ids).
UNIQUE_SHARE = 0.5
ABSENT = "(absent)"
_NICE_WIDTHS = (0.5, 1, 2, 3, 4, 5, 10, 15, 20, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600,
                43200, 86400)


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
    """One attribute: a label per record (None = not observed) and its values in display order."""

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
PRIORITY = ("api", "id_prefix", "concurrency", "time_window", "arm", "workload", "prompt_size",
            "reuse_index")


def columns(records: Sequence[Record]) -> list[Column]:
    """Every attribute with at least two observed values; constant ones explain nothing."""
    offsets, width = time_offsets(records)
    built = [
        _id_prefix(records),
        _concurrency(records),
        _time_window(offsets, width),
        _categorical("api", [r.api for r in records],
                     Words("came over {}", "{} streams", "without an api", item=str)),
        _categorical("arm", [r.arm for r in records],
                     Words("ran on arm {}", "streams on arm {}", "without an arm")),
        _categorical("workload", [r.workload for r in records],
                     Words("ran workload {}", "streams of workload {}", "without a workload")),
        _prompt_size(records),
        _reuse_index(records),
        *_headers(records),
    ]
    rank = {key: i for i, key in enumerate(PRIORITY)}
    out = []
    for col in built:
        if col is not None and len(col.order) >= 2:
            out.append(Column(col.key, col.ordered, col.labels, col.order, col.words,
                              rank.get(col.key, len(PRIORITY))))
    return out


def time_offsets(records: Sequence[Record]) -> tuple[list[float | None], float | None]:
    """Seconds since the start of each record's run, and the time-window width that suits the run."""
    first: dict[str, float] = {}
    for r in records:
        if r.started_at > 0:
            first[r.run_id] = min(first.get(r.run_id, r.started_at), r.started_at)
    offsets = [r.started_at - first[r.run_id] if r.started_at > 0 else None for r in records]
    span = max((o for o in offsets if o is not None), default=0.0)
    return offsets, bucket_width(span)


def bucket_width(span: float) -> float | None:
    """Minute windows; finer for a short run, wider for a long one: at most 24 windows either way.

    Faults that come in bursts last seconds in a demo and minutes in production; a window much wider
    than the burst dilutes it, and then a finer proxy of time (the connection reuse index grows with
    it) would explain the failures better than time itself.
    """
    if span <= 0:
        return None
    if span < 180:
        return float(next(w for w in _NICE_WIDTHS if span / w <= 24))
    if span <= 24 * 60:
        return 60.0
    return float(next((w for w in _NICE_WIDTHS if w >= 60 and span / w <= 24), _NICE_WIDTHS[-1]))


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


def _by_count(labels: Sequence[str | None]) -> list[str]:
    counts = Counter(v for v in labels if v is not None)
    return sorted(counts, key=lambda v: (-counts[v], v))


def _categorical(key: str, labels: list[str | None], words: Words) -> Column:
    return Column(key, False, labels, _by_count(labels), words)


def _id_prefix(records: Sequence[Record]) -> Column:
    labels: list[str | None] = []
    shown: dict[str, str] = {}
    for r in records:
        prefix = r.id_prefix or id_prefix(r.response_id)
        labels.append(prefix)
        rid = r.response_id or ""
        if prefix and prefix not in shown and rid.startswith(prefix) and len(rid) > len(prefix):
            shown[prefix] = rid[: len(prefix) + 1]  # keep the separator: `gw-`, `resp_`

    def item(value: str) -> str:
        if value == "numeric":
            return "numeric response ids"
        return f"response ids starting `{shown.get(value, value)}`"

    words = Words("had {}", "{}", "without a response id", item,
                  short=lambda v: v if v == "numeric" else shown.get(v, v))
    return _categorical("id_prefix", labels, words)


def _concurrency(records: Sequence[Record]) -> Column:
    labels: list[str | None] = [str(r.concurrency) for r in records]
    order = sorted({v for v in labels if v is not None}, key=int)
    words = Words("ran at concurrency {}", "streams at concurrency {}", "without a concurrency level",
                  item=str)
    return Column("concurrency", True, labels, order, words)


def _time_window(offsets: list[float | None], width: float | None) -> Column | None:
    if width is None:
        return None
    labels: list[str | None] = []
    spans: dict[str, tuple[float, float | None]] = {}
    index: dict[str, int] = {}
    by_bucket: dict[int, str] = {}
    for offset in offsets:
        if offset is None:
            labels.append(None)
            continue
        b = int(offset // width)
        label = by_bucket.get(b)
        if label is None:
            lo, hi = b * width, (b + 1) * width
            label = by_bucket[b] = f"{clock(lo)}–{clock(hi)}"
            spans[label] = (lo, hi)
            index[label] = b
        labels.append(label)
    order = sorted(spans, key=lambda v: index[v])

    def fmt(lo: float, hi: float | None) -> str:
        return f"{clock(lo)}–{clock(hi if hi is not None else lo)}"

    words = Words("started {} into the run", "streams started {} into the run", "without a start time",
                  spans=spans, fmt_span=fmt)
    return Column("time_window", True, labels, order, words)


def _log_buckets(values: Sequence[int | None], base: int, start: int, key: str,
                 fmt: Callable[[float, float | None], str], words: tuple[str, str, str]) -> Column:
    """Buckets growing by ``base`` from ``start`` up: a 2x change matters at 3 requests, not at 3,000."""
    labels: list[str | None] = []
    spans: dict[str, tuple[float, float | None]] = {}
    index: dict[str, int] = {}
    seen: dict[int, str] = {}
    for value in values:
        if value is None:
            labels.append(None)
            continue
        if value in seen:
            labels.append(seen[value])
            continue
        if value < start:
            b, lo, hi = 0, 0, start - 1
        else:
            b = math.floor(math.log(value / start, base) + 1e-9) + 1
            lo = start * base ** (b - 1)
            hi = start * base**b - 1
        label = seen[value] = fmt(lo, hi)
        spans[label] = (lo, hi)
        index[label] = b
        labels.append(label)
    order = sorted(spans, key=lambda v: index[v])
    return Column(key, True, labels, order, Words(*words, spans=spans, fmt_span=fmt))


def _reuse_index(records: Sequence[Record]) -> Column:
    def fmt(lo: float, hi: float | None) -> str:
        if hi is None:
            return f"≥{lo:g}"
        return f"{lo:g}" if lo == hi else f"{lo:g}–{hi:g}"

    return _log_buckets([r.reuse_index for r in records], 2, 1, "reuse_index", fmt,
                        ("had connection reuse index {}", "streams with connection reuse index {}",
                         "without a reuse index"))


def _prompt_size(records: Sequence[Record]) -> Column:
    def fmt(lo: float, hi: float | None) -> str:
        if lo == 0:
            return f"<{size((hi or 0) + 1)}"
        return f"{size(lo)}–{size((hi or lo) + 1)}"

    return _log_buckets([r.prompt_bytes or None for r in records], 4, 1024, "prompt_size", fmt,
                        ("had prompts of {}", "streams with prompts of {}", "without a prompt size"))


def _headers(records: Sequence[Record]) -> list[Column]:
    names = sorted({name for r in records for name in r.headers} - GROUND_TRUTH_HEADERS)
    out: list[Column] = []
    for name in names:
        labels: list[str | None] = [(r.headers.get(name, ABSENT) if r.headers else None) for r in records]
        present = [v for v in labels if v is not None and v != ABSENT]
        distinct = len(set(present))
        if distinct > MAX_CATEGORIES or (distinct > 3 and distinct >= UNIQUE_SHARE * len(present)):
            continue  # per-request ids and timings: every value unique, nothing to share

        numeric = _numeric_header(name, labels, present)
        if numeric is not None:
            out.append(numeric)
            continue

        def item(value: str, name: str = name) -> str:
            return f"no `{name}` header" if value == ABSENT else f"`{name}: {value}`"

        words = Words("had {}", "streams with {}", "without response headers", item)
        out.append(_categorical(f"header:{name}", labels, words))
    return out


def _numeric_header(name: str, labels: list[str | None], present: list[str]) -> Column | None:
    """A header whose values are all whole numbers (a queue depth, requests in flight) is ordered:
    its ranges are searched like concurrency levels, in powers of two when it has many values."""
    if not present or not all(v.isdigit() for v in present):
        return None
    key = f"header:{name}"
    texts = (f"had `{name}` {{}}", f"streams with `{name}` {{}}", "without response headers")
    values: list[int | None] = [int(v) if v is not None and v.isdigit() else None for v in labels]
    if len(set(present)) > 12:
        def fmt(lo: float, hi: float | None) -> str:
            return f"{lo:g}" if lo == hi else f"{lo:g}–{hi:g}"

        return _log_buckets(values, 2, 1, key, fmt, texts)
    shown: list[str | None] = [str(v) if v is not None else None for v in values]
    order = sorted({v for v in shown if v is not None}, key=int)
    return Column(key, True, shown, order, Words(*texts, item=str))
