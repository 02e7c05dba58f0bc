"""``auto``: pick the family from the first marker seen, then parse with that family's parser.

Text before the first marker goes out as it comes; from the first marker (and the newlines that may be
its separator) the input is held until the family is certain — at most one tag's worth — and then
replayed into a fresh parser of that family. Whitespace at the very start is held too: for the
families of MARKUP2.md it frames the answer and is not text (decision 2), which only the family can
say. Markers of other families after that point are text for the chosen family, as they would be had
it been named.
"""

from __future__ import annotations

from sseguard.errors import UsageError
from sseguard.toolcalls import (
    _dsml,
    deepseek_v3,
    glm,
    harmony,
    hermes,
    kimi_k2,
    minimax_m2,
    qwen3_coder,
)
from sseguard.toolcalls._base import (
    ASCII_WS,
    TAG_CAP,
    BaseParser,
    Event,
    Markers,
    Parser,
    Text,
    ToolSpec,
    first_non_ws,
)

_GLM_ARGS = glm.FAMILY_MARKERS[2:]  # <arg_key> and the other arg tags: GLM's alone
MARKERS = Markers((_dsml.OPEN, _dsml.CLOSE, *deepseek_v3.FAMILY_MARKERS,
                   *qwen3_coder.FAMILY_MARKERS, *kimi_k2.FAMILY_MARKERS, *harmony.FAMILY_MARKERS,
                   *_GLM_ARGS, *minimax_m2.FAMILY_MARKERS))
REASONING_EXITS = (_dsml.OPEN, *deepseek_v3.REASONING_EXITS, *qwen3_coder.REASONING_EXITS,
                   *kimi_k2.REASONING_EXITS, *minimax_m2.REASONING_EXITS)

_V3_HEAD = "function" + deepseek_v3.SEP
#: For a partial marker at end of stream: which family each marker belongs to, DSML first.
_OWNERS = ((_dsml.OPEN, "dsml-v4"), (_dsml.CLOSE, "dsml-v4"),
           *((lit, "deepseek-v3") for lit in deepseek_v3.FAMILY_MARKERS),
           *((lit, "hermes") for lit in hermes.FAMILY_MARKERS),
           *((lit, "qwen3-coder") for lit in qwen3_coder.FAMILY_MARKERS),
           *((lit, "kimi-k2") for lit in kimi_k2.FAMILY_MARKERS),
           *((lit, "harmony") for lit in harmony.FAMILY_MARKERS),
           *((lit, "glm45") for lit in _GLM_ARGS),
           *((lit, "minimax-m2") for lit in minimax_m2.FAMILY_MARKERS))
_KIMI_OPENERS = (kimi_k2.SECTION_BEGIN, kimi_k2.SECTION_BEGIN_1, kimi_k2.CALL_BEGIN)
_HARMONY_HEADS = (harmony.START, harmony.CHANNEL)


def _tool_call_family(held: str, final: bool) -> str | None:
    """Whose ``<tool_call>`` starts ``held``: Hermes writes a JSON object after it (``{``, maybe
    after whitespace), Qwen3-Coder ``<function=``, GLM a bare name — ended by a newline in GLM-4.5
    and by the next tag in GLM-4.7."""
    q = first_non_ws(held, len(hermes.TOOL_CALL), len(held))
    if q == -1:
        return "hermes" if final else None
    if held[q] == "{":
        return "hermes"
    if held[q] == "<":  # a tag right away: a GLM call without a name, or Qwen3-Coder's function
        after = held[q:]
        if not any(after.startswith(t) or t.startswith(after) for t in _GLM_ARGS):
            return "qwen3-coder"
        if not final and not after.startswith(_GLM_ARGS):
            return None
        return "glm45" if "\n" in held[len(hermes.TOOL_CALL):q] else "glm47"
    end = len(held)
    for stop in ("\n", "<"):
        k = held.find(stop, q)
        if k != -1:
            end = min(end, k)
    if end == len(held):
        return "glm45" if final else None
    return "glm45" if held[end] == "\n" else "glm47"


def detect(held: str, final: bool) -> str | None:
    """The family of the markup starting at ``held[0]``; ``None`` while more input could change it.

    ``final`` (end of stream) forces an answer; so does a hold longer than a tag can be.
    """
    final = final or len(held) > TAG_CAP
    if held.startswith((_dsml.OPEN, _dsml.CLOSE)):
        gt = held.find(">")
        if held.find("<", 1, gt if gt != -1 else len(held)) != -1 or (gt == -1 and final):
            return "dsml-v4"  # not a tag; any DSML family reports it the same way
        if gt == -1:
            return None
        tag = _dsml.classify(held[:gt + 1])
        if tag is not None and tag.spaced:
            return "dsml-v41"
        return "dsml-v32" if tag is not None and tag.word == "function_calls" else "dsml-v4"
    if held.startswith((deepseek_v3.CALLS_BEGIN, deepseek_v3.CALL_BEGIN)):
        begin = held.find(deepseek_v3.CALL_BEGIN)
        if begin == -1:
            return "deepseek-v3" if final else None
        after = held[begin + len(deepseek_v3.CALL_BEGIN):]
        if after.startswith(_V3_HEAD):
            rest = after[len(_V3_HEAD):]
            if rest:  # V3.1 writes JSON right after the separator; V3 a name and a newline
                return "deepseek-v31" if rest[0] == "{" else "deepseek-v3"
            return "deepseek-v3" if final else None
        if _V3_HEAD.startswith(after):
            return "deepseek-v3" if final else None
        return "deepseek-v31"
    if held.startswith(_KIMI_OPENERS):
        return "kimi-k2"
    if held.startswith(_HARMONY_HEADS):
        return "harmony"
    if held.startswith(hermes.TOOL_CALL):
        return _tool_call_family(held, final)
    for lit, family in _OWNERS:
        if held.startswith(lit) or (final and lit.startswith(held)):
            return family
    return "dsml-v4" if final else None


class AutoParser:
    """A parser that becomes the parser of the first family whose marker it sees."""

    family = "auto"

    def __init__(self, tools: ToolSpec | None = None) -> None:
        self._tools = tools
        self._inner: Parser | None = None
        self._pend = ""
        self._closed = False
        self.detected: str | None = None  # the family chosen, once a marker was seen
        self._spoke = False  # text went out before the family was known

    def _become(self, family: str) -> Parser:
        from sseguard.toolcalls import FAMILIES  # the registry imports this module

        self.detected = family
        self._inner = inner = FAMILIES[family].make(self._tools)
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
        m, _ = MARKERS.find(data, 0)
        cut = m if m != -1 else MARKERS.hold(data, 0)
        start = cut
        while start > 0 and cut - start < 2 and data[start - 1] == "\n":
            start -= 1  # newlines right before a marker may be its separator: the family decides
        if start and not self._spoke and harmony.may_open_header(data[:start].lstrip(ASCII_WS)):
            start = 0  # framing whitespace, or Harmony's first recipient: the family decides
        if start:
            out.append(Text(data[:start]))
            self._spoke = True
        if m == -1:
            self._pend = data[start:]
            return out
        family = detect(data[m:], final=False)
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
            j = held.find("<")
            if j == -1:
                return [Text(held)] if held else []
            inner = self._become(detect(held[j:], final=True) or "dsml-v4")
            out.extend(inner.feed(held))
            out.extend(inner.close())
            return out
        assert self._inner is not None
        out.extend(self._inner.close())
        return out

