"""``BlockParser``: the "between calls" and "void call" steps of the families whose calls stand in
blocks, and the JSON-valued parameters and whole-object arguments they share."""

from __future__ import annotations

from abc import abstractmethod

from sseguard.core.toolcalls.events import MarkupErrorKind
from sseguard.core.toolcalls.grammars.base import CONTENT, BaseParser, Call
from sseguard.core.toolcalls.grammars.strict_json import JSONProblem, strict_json
from sseguard.core.toolcalls.schema import STRICT_JSON, ToolSpec, ValueTyping

#: What a block family does at a marker while swallowing a void call (``BlockParser._skip``).
RESUME, SWALLOW, END = range(3)  # leave it to the next state / swallow it / swallow it and stop


class BlockParser(BaseParser):
    """A family whose calls stand in blocks: the "between calls" and "void call" steps they share.

    Inside a block only whitespace, the next call and the block's closer may stand (docs/design/markup.md
    decision 1.5); junk there, like a broken call, becomes a void unit swallowed up to the next place parsing
    can resume. A family says, in ``_block_marker`` and ``_skip_marker``, what its markers mean in those two
    states.
    """

    def __init__(self, tools: ToolSpec | None = None) -> None:
        super().__init__(tools)
        self._spaced = False  # dialect of the open block (only DSML has two)

    def _after_call(self, in_block: bool) -> None:
        """Back to where the call stood: between calls of its block, or in content."""
        self._state = self._BLOCK if in_block else CONTENT

    def _void(self, kind: MarkupErrorKind) -> None:
        """The current call is not a call (its first error counts); swallow it up to a resume point."""
        assert self._call is not None
        self._call.error = self._call.error or kind
        self._state = self._SKIP

    def _close_block(self, closer: str, end: int) -> int:
        """The block's closer (ending at ``end``) is read: back to content."""
        self._markup(closer)
        self._state = CONTENT
        return end

    def _junk(self, pos: int) -> int:
        """Something in a block that is neither a call nor the closer: a void unit from ``pos``."""
        self._void_unit(True, self._spaced)
        self._state = self._SKIP
        return pos

    def _between_calls(self, data: str, pos: int) -> int:
        """State ``_BLOCK``: whitespace is markup; a marker is the family's to read."""
        r, lit = self._gather_ws(data, pos, self._markup)
        if lit is None:  # junk between calls: not text, not a call
            return self._junk(r)
        if r != pos:
            return r
        end = self._block_marker(data, pos, lit)
        return self._junk(pos) if end is None else end

    def _call_opener(self, data: str, m: int, tend: int, name: str | None,
                     state: int) -> int | None:
        """The call-opening tag at ``m``, read up to ``tend`` (-1 while incomplete) with its ``name``
        (None: malformed), between calls: the call starts in ``state``. Returns what
        ``_block_marker`` does."""
        if tend < 0:
            return ~m
        if name is None:
            return None
        self._start_call(name, data[m:tend], in_block=True)
        self._state = state
        return tend

    def _add_key(self, key: str) -> bool:
        """A parameter's name is read: a repeated one voids the call (``duplicate_parameter``).
        Returns whether the name is new."""
        call = self._call
        assert call is not None
        if key in call.keys:
            self._void(MarkupErrorKind.DUPLICATE_PARAMETER)
            return False
        call.keys.add(key)
        return True

    def _tag_in_call(self, data: str, pos: int) -> tuple[int, str | None]:
        """Inside a call, between its tags: whitespace joins the call's raw text; other text voids
        the call (only whitespace may stand between tags). Returns (where to go on, None), or
        (``pos``, the marker there) for the family to judge."""
        call = self._call
        assert call is not None
        r, lit = self._gather_ws(data, pos, call.raw.append)
        if lit is None:
            self._void(MarkupErrorKind.MALFORMED_TAG)
            return r, None
        return (r, None) if r != pos else (pos, lit)

    @abstractmethod
    def _block_marker(self, data: str, m: int, lit: str) -> int | None:
        """At the marker ``lit`` at ``m``, between calls: open the next call or close the block and
        return the new position (``~m`` while the tag is incomplete), or ``None``: it is junk."""

    def _skip(self, data: str, pos: int) -> int:
        """State ``_SKIP``: a void call or void markup, swallowed up to where parsing can resume."""
        call = self._call
        assert call is not None
        r, lit = self._gather(data, pos)
        if r != pos:
            return r
        tend, action = self._skip_marker(data, pos, lit, call)
        if tend < 0:
            return ~pos
        if action == RESUME:  # the tag is the next state's to read
            self._fail_call()
            self._after_call(call.in_block)
            return pos
        call.raw.append(data[pos:tend])
        if action == END:
            self._fail_call()
            self._after_call(call.in_block)
        return tend

    @abstractmethod
    def _skip_marker(self, data: str, m: int, lit: str, call: Call) -> tuple[int, int]:
        """At the marker ``lit`` at ``m`` inside a void call: (end of its tag, -1 while incomplete;
        ``RESUME``, ``SWALLOW`` or ``END``)."""

    def _json_param(self, key: str, buf: list[str], then: int,
                    typing: ValueTyping | None = None) -> None:
        """A buffered parameter's value is complete: by default trimmed of ASCII whitespace, strict
        JSON of any type (decision 1.2), else as ``typing`` says; it goes into the arguments and parsing
        goes on in state ``then``. A value that fails voids the call."""
        try:
            value = (typing or STRICT_JSON).encode("".join(buf))
        except JSONProblem:  # any failure of a value, duplicate keys included
            self._void(MarkupErrorKind.BAD_PARAM_JSON)
            return
        assert self._call is not None
        self._delta(self._call.key_prefix(key) + value)
        self._state = then

    def _end_object_call(self, args: str, emit: bool, well_formed: bool = True) -> None:
        """The call's whole arguments are ``args`` (already streamed unless ``emit``): one strict JSON
        object ends the call, anything else (or ``well_formed`` False) makes it void (decision 1.4)."""
        call = self._call
        assert call is not None
        try:
            if not well_formed:
                raise JSONProblem(MarkupErrorKind.BAD_PARAM_JSON)
            value = strict_json(args)
            if not isinstance(value, dict):
                raise JSONProblem(MarkupErrorKind.BAD_PARAM_JSON)
        except JSONProblem as problem:  # duplicate keys are duplicate parameters (decision 1.3)
            self._void(problem.kind)
            self._fail_call()
        else:
            if emit:
                self._delta(args)
            self._end_call(close_object=False)
        self._after_call(call.in_block)
