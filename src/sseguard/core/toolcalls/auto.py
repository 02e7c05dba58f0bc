"""``auto``: pick the family from the first marker seen, then parse with that family's parser.

Text before the first marker goes out as it comes; from the first marker (and the newlines that may be
its separator) the input is held until the family is certain — at most one tag's worth — and then
replayed into a fresh parser of that family. Whitespace at the very start is held too: for the
families of docs/design/markup.md §2 it frames the answer and is not text (decision 2.2), which only the
family can say. Markers of other families after that point are text for the chosen family, as they would be
had it been named.
"""

from __future__ import annotations

from collections.abc import Iterable

from sseguard.core.errors import UsageError
from sseguard.core.toolcalls.events import Event, Parser, Text
from sseguard.core.toolcalls.family import Claim, Family
from sseguard.core.toolcalls.grammars.base import BaseParser
from sseguard.core.toolcalls.grammars.markers import TAG_CAP, Markers
from sseguard.core.toolcalls.grammars.strict_json import ASCII_WS
from sseguard.core.toolcalls.schema import ToolSpec

#: A partial marker at end of stream that no family owns is judged as DSML judges one (any parser
#: reports it the same way; this one is the oldest family, as before families had claims).
FALLBACK = "dsml-v4"

#: ``auto``'s order over the built-in families, one place: (rank, the families of that rank, why they
#: stand there). ``auto`` asks the families' claims in this order (a family of a later rank only gets
#: markup no earlier family claims or waits for) and, where none claims it, gives a marker to the first
#: family that has it; so the order decides only between families that share a marker (decision 3.3:
#: markers that are prefixes of each other are decided by what follows). Families of one rank are
#: asked by name. Each built-in family module takes its ``Family.rank`` from here (``builtin_rank``);
#: the registry sorts by ``rank``, then name. A plugin family declares its own ``rank`` (default 100:
#: after every built-in); a rank between two rows puts it between them, a rank equal to a row's among
#: that row's families by name (docs/markup.md "Adding a family").
AUTO_ORDER: tuple[tuple[int, tuple[str, ...], str], ...] = (
    (10, ("dsml-v32", "dsml-v4", "dsml-v41"),
     "DSML's markers are no other family's; first as the oldest family (a partial marker no family "
     "owns is judged as dsml-v4 judges it: FALLBACK); the versions are told apart by their claims"),
    (20, ("deepseek-v3", "deepseek-v31"),
     "DeepSeek's own markers; V3 and V3.1 are told apart by their claims (what follows the "
     "separator token)"),
    (30, ("hermes",),
     "the first of the families that open with <tool_call> (GLM, Qwen3-Coder, Granite 3.1, "
     "ERNIE 4.5, xLAM, Hunyuan): Hermes claims it only when a JSON object follows, and owns a stray "
     "</tool_call>"),
    (40, ("glm45", "glm47"),
     "<tool_call> then a bare name; before Qwen3-Coder, as both write a tag after <tool_call> and "
     "GLM's arg tags are the narrower claim; glm45 and glm47 are told apart by their spacing"),
    (50, ("qwen3-coder",), "<tool_call> then any tag (its <function=…>)"),
    (60, ("kimi-k2",),
     "its own special tokens; before lfm2, which shares <|tool_call_end|>: a stray one is Kimi's"),
    (70, ("harmony",), "its own special tokens; text before its first marker may be its header "
     "(auto_prefix)"),
    (80, ("minimax-m2",), "its own block tokens"),
    # from here to 94 the families of docs/design/markup.md §3 classes A, A′, B and B′, in the order
    # they were added; only the shared markers named below constrain it
    (81, ("llama3-json",), "its own <|python_tag|>"),
    (82, ("granite",),
     "<tool_call> then [ (Granite 3.1): after the <tool_call> families above, none of which claims "
     "an array"),
    (83, ("granite-20b-fc",), "its own <function_call>"),
    (84, ("internlm",), "its own tokens"),
    (85, ("jamba",), "<tool_calls> then [: the first of the <tool_calls> families"),
    (86, ("hunyuan-a13b",),
     "Jamba's tags and grammar: auto reads its markup as jamba's, with the same calls"),
    (87, ("minimax-m1",), "<tool_calls> then one object per line: after the array families"),
    (88, ("phi4-mini",), "its own functools["),
    (89, ("apertus",), "its own tokens"),
    (90, ("cohere-command",), "its own tokens"),
    (91, ("gigachat3",), "its own tokens"),
    (92, ("longcat",), "its own tags"),
    (93, ("ernie45",),
     "Hermes' tags and grammar: auto reads its markup as hermes', with the same calls"),
    (94, ("inkling",), "its own tokens"),
    (95, ("functiongemma", "gemma4", "lfm2", "mistral", "olmo3", "plamo3", "pythonic", "xlam"),
     "classes C, D and E, each on markers of its own, and xlam, every marker of which is an earlier "
     "family's (Hermes' <tool_call>, Mistral's [TOOL_CALLS]): auto never picks it"),
    (96, ("dots", "gigachat35", "hunyuan", "iquest-q1", "k2-horizon", "kimi-k3", "minicpm5",
          "minimax-m3", "muse", "seed-oss", "step3", "zaya"),
     "classes F, G and H, last: other markers on the grammars above; Hunyuan's <tool_calls> then "
     "<tool_call> is claimed after Jamba and MiniMax-M1 (which need [ or {) said no, and Seed-OSS's "
     "and ZAYA's <function=…> body tags are owned by Qwen3-Coder when stray"),
)

#: A family's rank by name, from ``AUTO_ORDER``.
_RANKS = {name: rank for rank, names, _ in AUTO_ORDER for name in names}


def builtin_rank(name: str) -> int:
    """The rank of the built-in family ``name`` (``AUTO_ORDER``); a name it does not list is a bug
    in the family module that asks."""
    return _RANKS[name]


class Detector:
    """What ``auto`` knows about the registered families: the markers that reveal them, the
    openers that end reasoning in any of them, and their claims, asked in registry order."""

    def __init__(self, families: Iterable[Family]) -> None:
        self.families = tuple(families)
        self.by_name = {f.name: f for f in self.families}
        self.markers = Markers(tuple(dict.fromkeys(m for f in self.families for m in f.auto_markers)))
        self.reasoning_exits = tuple(dict.fromkeys(
            e for f in self.families for e in f.reasoning_exits))
        self._prefixes = tuple(f.auto_prefix for f in self.families if f.auto_prefix is not None)

    def may_open(self, text: str) -> bool:
        """Whether text at stream start, before any marker, may still belong to a family's first
        markup (Harmony's leading recipient): held for the family to decide."""
        return any(prefix(text) for prefix in self._prefixes)

    def detect(self, held: str, final: bool) -> str | None:
        """The family of the markup starting at ``held[0]``; ``None`` while more input could change
        it. ``final`` (end of stream) forces an answer; so does a hold longer than a tag can be.

        The families' claims are asked in registry order: the first YES wins unless a family before
        it still waits for more (GLM and Qwen3-Coder both follow ``<tool_call>`` with a tag). When
        none claims it, the first family that owns the marker (or, at the end, the partial marker)
        it starts with takes it.
        """
        final = final or len(held) > TAG_CAP
        waiting = False
        for fam in self.families:
            claim = fam.claim(held, final)
            if claim is Claim.YES and not waiting:
                return fam.name
            waiting = waiting or (claim is Claim.MORE and not final)
        if waiting:
            return None
        for fam in self.families:
            for lit in fam.auto_markers:
                if held.startswith(lit) or (final and lit.startswith(held)):
                    return fam.name
        return FALLBACK if final else None


class AutoParser:
    """A parser that becomes the parser of the first family whose marker it sees."""

    family = "auto"

    def __init__(self, tools: ToolSpec | None = None, *, detector: Detector) -> None:
        self._tools = tools
        self._detector = detector
        self._inner: Parser | None = None
        self._pend = ""
        self._closed = False
        self.detected: str | None = None  # the family chosen, once a marker was seen
        self._spoke = False  # text went out before the family was known

    def _become(self, family: str) -> Parser:
        self.detected = family
        self._inner = inner = self._detector.by_name[family].make(self._tools)
        if self._spoke and isinstance(inner, BaseParser):
            inner.mid_stream()
        return inner

    def feed(self, text: str) -> list[Event]:
        """Parse more text; return the events it completes."""
        if self._closed:
            raise UsageError("feed() after close()")
        if self._inner is not None:
            return self._inner.feed(text)
        data = self._pend + text
        out: list[Event] = []
        detector = self._detector
        m, _ = detector.markers.find(data, 0)
        cut = m if m != -1 else detector.markers.hold(data, 0)
        start = cut
        while start > 0 and cut - start < 2 and data[start - 1] == "\n":
            start -= 1  # newlines right before a marker may be its separator: the family decides
        if start and not self._spoke and detector.may_open(data[:start].lstrip(ASCII_WS)):
            start = 0  # framing whitespace, or Harmony's first recipient: the family decides
        if start:
            out.append(Text(data[:start]))
            self._spoke = True
        if m == -1:
            self._pend = data[start:]
            return out
        family = detector.detect(data[m:], final=False)
        if family is None:
            self._pend = data[start:]
            return out
        self._pend = ""
        out.extend(self._become(family).feed(data[start:]))
        return out

    def close(self) -> list[Event]:
        """End of stream: a held partial marker is judged by the family it most resembles."""
        if self._closed:
            raise UsageError("close() called twice")
        self._closed = True
        out: list[Event] = []
        if self._inner is None:
            held, self._pend = self._pend, ""
            leads = [k for k in map(held.find, self._detector.markers.leads) if k != -1]
            if not leads:
                return [Text(held)] if held else []
            j = min(leads)
            inner = self._become(self._detector.detect(held[j:], final=True) or FALLBACK)
            out.extend(inner.feed(held))
            out.extend(inner.close())
            return out
        assert self._inner is not None
        out.extend(self._inner.close())
        return out

