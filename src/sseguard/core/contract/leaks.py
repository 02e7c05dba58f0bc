"""Tool-call markup that leaked into visible text: what to look for, per family, and the scanner.

The tables are the registry's (``sseguard.core.toolcalls.families()``): each family's leak markers (a plain
substring search; the incremental parsers in ``sseguard.core.toolcalls`` do the real parsing) and the shape
its calls leave when a server strips its special tokens (docs/design/markup.md decision 2.11:
``functions.x:0{…}``, ``…commentary to=functions.f json{…}``; only the server can fix it, so it is a leak). A
plugin family is looked for exactly as a built-in is.
"""

from __future__ import annotations

import functools
import re
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ParamSpec

from sseguard.core.toolcalls import canonical, families
from sseguard.core.toolcalls.family import LEAK_START_SPAN, unknown

#: The markup values that are no family name: every family (``all``, ``auto``, or ``None``), or none.
ALL, AUTO, NONE = "all", "auto", "none"

_SHAPE_SPAN = 96  # no shape is longer
_BACK = len("to=")  # the longest look-behind a shape may have before its hint
_NEVER = re.compile(r"(?!)")  # the leads of no marker at all
_BLANK = re.compile(r"\s")
_LITERAL_BEHIND = re.compile(r"\(\?<=([^()\[\]\\]{1,3})\)")


@dataclass(frozen=True, slots=True, eq=False)
class Shapes:
    """The stripped-token shapes of a set of families (decision 2.11), as the scan reads
    them: ``pattern`` (every family's ``leak_shape``, searched only where one of ``hints`` occurs),
    ``prefixes`` (what the end of a delta holds when a shape's start, its literal look-behind
    included, spans the boundary; ``ends`` their last characters, tested first), ``keep`` (the
    characters kept then), and ``start`` (every family's ``leak_start``, matched on the start of a
    text field only)."""

    pattern: re.Pattern[str] | None
    hints: tuple[str, ...]
    prefixes: tuple[str, ...]
    ends: frozenset[str]
    keep: int
    start: re.Pattern[str] | None


def _shapes(pairs: list[tuple[str, str]], starts: list[str]) -> Shapes | None:
    """The ``Shapes`` of (shape, hint) pairs and start shapes; ``None`` when there are none."""
    if not pairs and not starts:
        return None
    hints = tuple(dict.fromkeys(hint for _, hint in pairs))
    words = set(hints)
    for shape, hint in pairs:
        behind = _LITERAL_BEHIND.match(shape)  # Harmony's "to=" before "functions."
        if behind is not None:
            words.add(behind.group(1) + hint)
    prefixes = tuple(sorted({w[:k] for w in words for k in range(1, len(w))}))
    return Shapes(
        pattern=re.compile("|".join(dict.fromkeys(s for s, _ in pairs))) if pairs else None,
        hints=hints, prefixes=prefixes, ends=frozenset(p[-1] for p in prefixes),
        keep=max((len(w) for w in words), default=1) - 1,
        start=re.compile("|".join(dict.fromkeys(starts))) if starts else None)


class _LeakTable(Mapping[str, tuple[str, ...]]):
    """Family name → its leak markers, read from the registry when first used."""

    def __getitem__(self, name: str) -> tuple[str, ...]:
        return families()[name].leak_markers

    def __iter__(self) -> Iterator[str]:
        return iter(families())

    def __len__(self) -> int:
        return len(families())


#: Markers whose presence in visible content or reasoning means tool-call markup leaked, per family.
LEAK_MARKERS: Mapping[str, tuple[str, ...]] = _LeakTable()


def family_names(markup: str | Iterable[str] | None) -> list[str]:
    """The families ``markup`` names: ``all``/``auto``/None every one, ``none`` (or an empty list)
    none, else family names or the engines' aliases for them. An unknown name is the caller's
    mistake: ``UsageError`` listing them."""
    if markup is None or markup in (ALL, AUTO):
        return list(families())
    if markup == NONE:
        return []
    names = [markup] if isinstance(markup, str) else list(markup)
    known = families()
    out: list[str] = []
    for name in names:
        if name in (ALL, AUTO):
            out.extend(known)
        elif canonical(name) in known:  # a family, or an engine's alias for one
            out.append(canonical(name))
        else:
            raise unknown("markup family", name, [*known, ALL, AUTO, NONE])
    return list(dict.fromkeys(out))


def leak_markers(markup: str | Iterable[str] | None = ALL) -> tuple[str, ...]:
    """The marker strings to look for (each once); ``"all"`` (or None) means every family."""
    known = families()
    return tuple(dict.fromkeys(m for name in family_names(markup) for m in known[name].leak_markers))


def leak_shapes(markup: str | Iterable[str] | None = ALL) -> Shapes | None:
    """The stripped-token shapes of the families, anywhere and at an answer's start (``None``:
    none applies)."""
    known = families()
    fams = [known[name] for name in family_names(markup)]
    return _shapes([(f.leak_shape, f.leak_hint) for f in fams if f.leak_shape is not None],
                   [f.leak_start for f in fams if f.leak_start is not None])


#: ``leak_tables`` answers, per markup value, with the registry they were read from.
_TABLES: dict[object, tuple[Mapping[str, object], tuple[str, ...], Shapes | None]] = {}


def leak_tables(markup: str | Iterable[str] | None = ALL,
                ) -> tuple[tuple[str, ...], Shapes | None]:
    """``leak_markers`` and ``leak_shapes`` of ``markup`` together, worked out once per markup value
    and registry: every checker asks for them, one per stream, and the answer never changes."""
    key: object = markup if markup is None or isinstance(markup, str) else tuple(markup)
    known = families()
    hit = _TABLES.get(key)
    if hit is not None and hit[0] is known:
        return hit[1], hit[2]
    names = key if isinstance(key, tuple) else markup
    assert not isinstance(names, Iterator)  # a one-shot iterable was made a tuple above
    markers, shapes = leak_markers(names), leak_shapes(names)
    _TABLES[key] = (known, markers, shapes)
    return markers, shapes


@functools.lru_cache(maxsize=64)
def _scan_table(markers: tuple[str, ...]) -> tuple[str, str, re.Pattern[str] | None, int]:
    """What a scanner of ``markers`` tests first, once per marker set: the characters the markers
    start with (the built-ins: "<" and DSML's "｜") — a delta holding neither is done after two
    ``in`` tests; more than two go through one regex (and none, one that never matches) — and how
    much text to carry between deltas."""
    leads = sorted({m[0] for m in markers})
    lead1, lead2 = (leads[0], leads[-1]) if leads else ("", "")
    regex = (re.compile(f"[{re.escape(''.join(leads))}]") if len(leads) > 2
             else _NEVER if not leads else None)
    return lead1, lead2, regex, max((len(m) for m in markers), default=1) - 1


Report = Callable[[str, int, str, int], None]
P = ParamSpec("P")


def weakly(method: Callable[P, None]) -> Callable[P, None]:
    """A bound method as the scanner's ``report`` without keeping its object alive.

    The owner holds its scanner; a bound method would tie both in a reference cycle, and every
    stream's checker (or repair engine) would then be freed only by the cyclic garbage collector,
    whose passes held a proxy's event loop for 7-11 ms of CPU at 100 streams
    (docs/benchmarks.md#guard-proxy, issue 29's second pass). Without the cycle, reference counting
    frees it at once.
    """
    ref = weakref.WeakMethod(method)

    def report(*args: P.args, **kwargs: P.kwargs) -> None:
        bound = ref()
        if bound is not None:
            bound(*args, **kwargs)

    return report


class LeakScanner:
    """Finds tool-call markers in text deltas as they arrive, also across delta boundaries.

    Scanning in flight (not the assembled text at the end) says in which frame markup leaked and lets a
    relay drop the text itself. Only the last ``longest marker - 1`` characters are carried between
    deltas, so the cost is linear; one finding per stream (choice, item or block) and field is enough
    evidence. The stripped-token shapes (``shapes``) need a regex, run only on text that holds one of
    their hints (``functions.``, ``call:``); from there on at most one shape's length is carried. A
    field's first ``LEAK_START_SPAN`` characters are kept whole while start shapes apply (Mistral's
    stripped ``NAME{"k": …`` is a leak only where the answer starts).
    """

    __slots__ = (
        "_ends",
        "_hint1",
        "_hint2",
        "_hints",
        "_keep",
        "_kshape",
        "_lead1",
        "_lead2",
        "_leads",
        "_markers",
        "_prefixes",
        "_report",
        "_shapes",
        "_start",
        "_state",
    )

    def __init__(self, markers: tuple[str, ...], report: Callable[[str, int, str, int], None],
                 shapes: Shapes | None = None) -> None:
        self._markers = markers
        self._lead1, self._lead2, self._leads, self._keep = _scan_table(markers)
        self._shapes = shapes.pattern if shapes is not None else None
        self._start = shapes.start if shapes is not None else None
        hints = shapes.hints if shapes is not None and shapes.hints else ("\0",)
        # Two hints are two ``in`` tests (every built-in set); more go through one regex.
        self._hint1, self._hint2 = hints[0], hints[-1]
        self._hints = re.compile("|".join(map(re.escape, hints))) if len(hints) > 2 else None
        self._prefixes = shapes.prefixes if shapes is not None else ()
        self._ends = shapes.ends if shapes is not None else frozenset()
        self._kshape = shapes.keep if shapes is not None else 0
        self._report = report
        # Per (index, field): [the tail kept, its offset in the text]; the tail is None once a
        # leak was reported there (one finding per stream and field).
        self._state: dict[tuple[int, str], list[Any]] = {}

    def scan(self, index: int, where: str, text: str) -> None:
        key = (index, where)
        state = self._state.get(key)
        if state is None:
            if not (self._markers or self._shapes or self._start) or not text:
                return
            state = self._state[key] = ["", 0]
            if self._start is not None:  # the field's start: its start shapes are matched
                self._general(state, index, where, text, "")
                return
        carry = state[0]
        if carry is None:
            return
        leads = self._leads
        # The common delta: nothing carried, no marker's lead, no shape's hint nor a start of one
        # at its end; only its length is kept (what the general way below would conclude).
        if (not carry
                and ((self._lead1 not in text and self._lead2 not in text) if leads is None
                     else leads.search(text) is None)
                and (self._shapes is None
                     or (((self._hint1 not in text and self._hint2 not in text)
                          if self._hints is None else self._hints.search(text) is None)
                         and (text[-1:] not in self._ends or not text.endswith(self._prefixes))))):
            state[1] += len(text)
            return
        self._general(state, index, where, text, carry)

    def _general(self, state: list[Any], index: int, where: str, text: str, carry: str) -> None:
        """The general way: markers, shapes and the answer's start searched in the carried text
        and ``text``; what may still complete across the next boundary is carried."""
        leads = self._leads
        start = state[1]
        window = carry + text if carry else text
        if (self._lead1 in window or self._lead2 in window) if leads is None else leads.search(window):
            for marker in self._markers:
                pos = window.find(marker)
                if pos != -1:
                    state[0] = None
                    self._report(marker, index, where, start + pos)
                    return
        n = len(window)
        cut = n
        tail = window[-self._keep:] if self._keep else ""
        # A marker that spans the boundary starts in the tail, with its lead.
        if (self._lead1 in tail or self._lead2 in tail) if leads is None else leads.search(tail):
            cut = n - len(tail)
        if self._shapes is not None:
            first = self._first_hint(window)
            if first == -1:
                if window.endswith(self._prefixes):  # "to=functions." may span the boundary
                    cut = min(cut, max(0, n - self._kshape))
            else:
                shape = self._shapes.search(window, max(0, first - _BACK))
                if shape is not None:
                    state[0] = None
                    self._report(shape.group(), index, where, start + shape.start())
                    return
                hint = self._last_hint(window)
                # a shape may still complete: keep it and its "to=", and what may start the next
                cut = min(cut, max(0, hint - _BACK if n - hint < _SHAPE_SPAN
                                   else n - self._kshape))
        if start == 0 and self._start is not None:
            head = self._start.match(window)
            if head is not None:
                lead = len(head.group()) - len(head.group().lstrip())
                state[0] = None
                self._report(head.group()[lead:], index, where, lead)
                return
            # the start may still complete (a start shape has no blank after its first character):
            # keep it whole
            if n < LEAK_START_SPAN and _BLANK.search(window.lstrip()) is None:
                cut = 0
        state[0] = window[cut:]
        state[1] = start + cut

    def _first_hint(self, window: str) -> int:
        found = [p for h in (self._hint1, self._hint2) if (p := window.find(h)) != -1]
        if self._hints is not None:
            hit = self._hints.search(window)
            found = [hit.start()] if hit is not None else []
        return min(found, default=-1)

    def _last_hint(self, window: str) -> int:
        if self._hints is not None:
            return max(m.start() for m in self._hints.finditer(window))
        return max(window.rfind(self._hint1), window.rfind(self._hint2))
