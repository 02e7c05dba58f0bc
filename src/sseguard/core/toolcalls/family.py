"""``Family``: every fact about one markup family, in one descriptor.

A family module builds one ``Family`` and the registry (``sseguard.core.toolcalls.families()``) lists it
through the ``sseguard.families`` entry point, built-ins and plugins alike. Everything that needs to
know a family reads it from here: the parser factory, the marker texts its tokenizer writes, the
substrings that mean its markup leaked into visible text (and the shape its calls leave when a server
strips its special tokens, decision 2.11), the openers that end reasoning, how ``auto`` tells
it from the others, and how the chaos upstream writes calls in it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol

from sseguard.core.errors import ConfigError, UsageError
from sseguard.core.toolcalls.events import Parser
from sseguard.core.toolcalls.schema import ToolSpec


class UnknownFamily(UsageError, ConfigError):
    """A family name that is not registered: the caller's mistake (``UsageError``), and for a command
    line a bad option value (``ConfigError``: one line, exit 2). The message lists the known names."""


class Claim(Enum):
    """What a family says about markup ``auto`` holds: mine, not mine, or too early to tell."""

    NO = 0
    YES = 1
    MORE = 2  # more input (or the end of the stream) decides


class CallLike(Protocol):
    """A call to render: its tool name, its argument values, and the arguments JSON as sent (a chaos
    fault may have broken it, so it need not be ``json.dumps(values)``)."""

    @property
    def name(self) -> str: ...

    @property
    def values(self) -> dict[str, Any]: ...

    @property
    def arguments(self) -> str: ...


#: ``render(calls, malformed)``: the markup a model of the family writes for ``calls``, including the
#: separator before it; ``malformed`` misspells one closer the way a model under load does.
Render = Callable[[Sequence[CallLike], bool], str]


#: What a stripped-token shape holds by default (decision 2.11: Kimi's and Harmony's): the
#: leak scan runs a family's ``leak_shape`` only where its ``leak_hint`` occurs, from at most
#: ``len("to=")`` characters before it, so a shape must match starting right at the hint (after an
#: optional look-behind of at most that many characters).
LEAK_SHAPE_HINT = "functions."
#: How much of the start of an answer ``leak_start`` is matched against (no shape is longer).
LEAK_START_SPAN = 128


def claim_openers(openers: tuple[str, ...]) -> Callable[[str, bool], Claim]:
    """The plain claim: markup that starts with one of ``openers`` is the family's."""

    def claim(held: str, final: bool) -> Claim:
        return Claim.YES if held.startswith(openers) else Claim.NO

    return claim


@dataclass(frozen=True, slots=True)
class Family:
    """One markup family.

    ``make(tools)`` returns a fresh parser for one stream. ``markers``: the literals as its template
    writes them (what ``sseguard tokenizer`` looks up). ``leak_markers``: substrings whose presence in
    visible text or reasoning means its markup leaked; ``leak_shape``: a regular expression for what a
    call leaves when a server strips special tokens, anywhere in the text (searched only where its
    ``leak_hint`` occurs: ``functions.`` for Kimi and Harmony, ``call:`` for Gemma's); ``leak_start``:
    one for what a call leaves at the start of an answer, where a shape with no literal of its own
    (Mistral's ``NAME{"k": …``) is told from prose (matched on the first ``LEAK_START_SPAN``
    characters of each text field only, and only while they hold no blank after the first non-blank
    character: such a shape must match before one). ``reasoning_exits``: openers that end
    reasoning implicitly. ``reasoning_spans``: the (opener, closer) pairs of the reasoning spans
    its parser reads itself (``<seed:think>``…``</seed:think>``, ``[THINK]``…``[/THINK]``): a
    stream that starts inside reasoning (the prompt opened it) ends it at such a closer too.
    ``auto_markers``: what ``auto`` searches for to notice the family; ``claim(held, final)`` then says
    whether markup starting at one of them is the family's (``final``: the stream ended, answer YES or
    NO). ``render`` writes calls for the chaos upstream; ``malformable``: its ``malformed`` rendering
    breaks the family's own format (the others have none to offer). Two facets only a family whose
    whole completion is markup needs (Harmony): ``auto_prefix(text)``, whether text at stream start
    before any marker may still belong to its first markup (``auto`` then holds it), and
    ``render_answer(reasoning, preface, markup)``, the whole content a server without its parser sends.
    ``rank`` orders the registry (then the name): ``auto`` asks claims in that order and a shared
    marker belongs to the first family that has it. Built-ins rank below 100, each as its row of
    ``auto.AUTO_ORDER`` says (with the reason for its place); plugins default to 100.
    ``aliases``: the other names the serving engines register for the same grammar (vLLM's
    ``qwen3_xml``, SGLang's ``poolside_v1``, …), accepted wherever a family name is, so an operator
    can type the name their engine uses (docs/design/markup.md §3.1). ``grammar``: its grammar class
    (docs/design/markup.md §3.2: ``A``, ``B``, ``G (DSML)``, …), as ``sseguard parse --list`` shows it.
    """

    name: str
    make: Callable[[ToolSpec | None], Parser]
    markers: tuple[str, ...]
    leak_markers: tuple[str, ...]
    reasoning_exits: tuple[str, ...]
    auto_markers: tuple[str, ...]
    claim: Callable[[str, bool], Claim]
    render: Render
    leak_shape: str | None = None
    leak_hint: str = LEAK_SHAPE_HINT
    leak_start: str | None = None
    malformable: bool = False
    auto_prefix: Callable[[str], bool] | None = None
    render_answer: Callable[[str, str, str], str] | None = None
    rank: int = 100
    aliases: tuple[str, ...] = ()
    grammar: str = ""
    reasoning_spans: tuple[tuple[str, str], ...] = ()
    leads: frozenset[str] = field(init=False, compare=False)

    def __post_init__(self) -> None:
        if not self.name or not self.auto_markers or not all(self.auto_markers):
            raise UsageError("a family needs a name and at least one non-empty auto marker")
        if not all(self.leak_markers) or not all(self.reasoning_exits) or not all(
                all(pair) and len(pair) == 2 for pair in self.reasoning_spans):
            raise UsageError(f"family {self.name!r}: empty leak marker or reasoning exit")
        if self.leak_shape is not None:
            _check_leak_shape(self.name, self.leak_shape, self.leak_hint)
        if self.leak_start is not None:
            try:
                re.compile(self.leak_start)
            except re.error as exc:
                raise UsageError(f"family {self.name!r}: leak_start is no regular expression: "
                                 f"{exc}") from None
        # The first characters of the markers: the only places a marker can start, which is what
        # keeps the parsers' hot paths cheap (every built-in marker starts with "<").
        object.__setattr__(self, "leads", frozenset(m[0] for m in (*self.auto_markers,
                                                                   *self.reasoning_exits)))


def _check_leak_shape(name: str, shape: str, hint: str) -> None:
    """A ``leak_shape`` the leak scan would never search is a mistake in the family, said at once:
    the scan looks for it only where its ``hint`` occurs (``contract/leaks.py``), so the pattern
    must start with that text (a look-behind of at most three characters before it is allowed) and
    compile."""
    try:
        re.compile(shape)
    except re.error as exc:
        raise UsageError(f"family {name!r}: leak_shape is no regular expression: {exc}") from None
    start = re.compile(r"(?:\(\?<[=!](?:[^()\[\]\\]{0,3}|\[[^\]]*\])\))?"
                       + re.escape(re.escape(hint)))
    if not hint or start.match(shape) is None:
        raise UsageError(f"family {name!r}: leak_shape {shape!r} is never searched: the leak scan "
                         f"runs it only where {hint!r} occurs, so it must start with "
                         f"{re.escape(hint)!r} (after an optional look-behind)")


def unknown(kind: str, name: str, known: Mapping[str, object] | Sequence[str]) -> UnknownFamily:
    """The one-line error for an unknown name, listing the known ones."""
    return UnknownFamily(f"unknown {kind} {name!r}; known: {', '.join(known)}")
