"""Tool-call markup that leaked into visible text: what to look for, per family, and the scanner.

The tables are the registry's (``sseguard.toolcalls.families()``): each family's leak markers (a plain
substring search; the incremental parsers in ``sseguard.toolcalls`` do the real parsing) and the shape
its calls leave when a server strips its special tokens (MARKUP2.md decision 11: ``functions.x:0{…}``,
``…commentary to=functions.f json{…}``; only the server can fix it, so it is a leak). A plugin family
is looked for exactly as a built-in is.
"""

from __future__ import annotations

import functools
import re
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, ParamSpec

from sseguard.toolcalls import canonical, families
from sseguard.toolcalls.family import LEAK_SHAPE_HINT, unknown

#: The markup values that are no family name: every family (``all``, ``auto``, or ``None``), or none.
ALL, AUTO, NONE = "all", "auto", "none"

_SHAPE_HINT = LEAK_SHAPE_HINT  # what every shape holds (``Family`` checks it); the regex runs only there
_SHAPE_SPAN = 96  # no shape is longer
_SHAPE_START = len("to=" + _SHAPE_HINT) - 1
# What the end of a delta holds when a shape's start spans the boundary.
_SHAPE_PREFIXES = tuple(sorted({w[:k] for w in ("to=" + _SHAPE_HINT, _SHAPE_HINT)
                                 for k in range(1, len(w))}))
_NEVER = re.compile(r"(?!)")  # the leads of no marker at all
_SHAPE_ENDS = frozenset(p[-1] for p in _SHAPE_PREFIXES)  # a delta ending otherwise starts no shape


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


def leak_shapes(markup: str | Iterable[str] | None = ALL) -> re.Pattern[str] | None:
    """One pattern for the stripped-token shapes of the families (``None``: none applies)."""
    known = families()
    shapes = [s for name in family_names(markup) if (s := known[name].leak_shape) is not None]
    return re.compile("|".join(dict.fromkeys(shapes))) if shapes else None


#: ``leak_tables`` answers, per markup value, with the registry they were read from.
_TABLES: dict[object, tuple[Mapping[str, object], tuple[str, ...], re.Pattern[str] | None]] = {}


def leak_tables(markup: str | Iterable[str] | None = ALL,
                ) -> tuple[tuple[str, ...], re.Pattern[str] | None]:
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
    (``bench/trace_proxy_ttfc.py``). Without the cycle, reference counting frees it at once.
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
    evidence. The stripped-token shapes (``shapes``) need a regex, run only on text that holds
    ``functions.``; from there on at most one shape's length is carried.
    """

    __slots__ = ("_keep", "_lead1", "_lead2", "_leads", "_markers", "_report", "_shapes", "_state")

    def __init__(self, markers: tuple[str, ...], report: Callable[[str, int, str, int], None],
                 shapes: re.Pattern[str] | None = None) -> None:
        self._markers = markers
        self._lead1, self._lead2, self._leads, self._keep = _scan_table(markers)
        self._shapes = shapes
        self._report = report
        # Per (index, field): [the tail kept, its offset in the text]; the tail is None once a
        # leak was reported there (one finding per stream and field).
        self._state: dict[tuple[int, str], list[Any]] = {}

    def scan(self, index: int, where: str, text: str) -> None:
        key = (index, where)
        state = self._state.get(key)
        if state is None:
            if not (self._markers or self._shapes):
                return
            state = self._state[key] = ["", 0]
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
                     or (_SHAPE_HINT not in text and (text[-1:] not in _SHAPE_ENDS
                                                      or not text.endswith(_SHAPE_PREFIXES))))):
            state[1] += len(text)
            return
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
            first = window.find(_SHAPE_HINT)
            if first == -1:
                if window.endswith(_SHAPE_PREFIXES):  # "to=functions." may span the boundary
                    cut = min(cut, max(0, n - _SHAPE_START))
            else:
                shape = self._shapes.search(window, max(0, first - 3))
                if shape is not None:
                    state[0] = None
                    self._report(shape.group(), index, where, start + shape.start())
                    return
                hint = window.rfind(_SHAPE_HINT)
                # a shape may still complete: keep it and its "to=", and what may start the next
                cut = min(cut, max(0, hint - 3 if n - hint < _SHAPE_SPAN else n - _SHAPE_START))
        state[0] = window[cut:]
        state[1] = start + cut
