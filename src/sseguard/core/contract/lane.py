"""A stream's steady frame, learned once: every byte of its text deltas but the text (and the number).

Nearly every event of a long answer is the same frame with another few characters of text: the
same id, model, index and field names, byte for byte (``data: {"id":"chatcmpl-1",…,"delta":
{"content":"⟨text⟩"},…}``; Responses also counts ``"sequence_number":⟨n⟩``). Decoding each one as
SSE and then as JSON, to fold the same fields again, is most of what the checker costs per event
(issue 29: the probe and the proxy pay it on every event of every stream). A lane is that frame as a
template with a hole for the text (and one for the number): a frame that matches it is the learned
event with another text, so the checker folds the text alone.

Why that is exact, not a guess: what fills the hole must be one whole JSON string's content — plain
text (no ``"``, ``\\`` or control character; valid UTF-8), or else escaped text that msgspec decodes
as exactly one string (an unescaped quote leaves trailing bytes, a raw newline or control character
is an error). Such content cannot end the token early nor span a frame boundary (that needs a
newline), so a matching frame tokenizes exactly as the template did, with one string value changed.
``learn`` (from a plain text only) proves the hole is that token and sits at the protocol's path by
substitution: the template with another text in the hole (and another number) must decode to the
learned object with only that value (those values) changed. Anything else — a varying field
(OpenAI's ``obfuscation``), another shape, a cut or merged read — fails to match, and the event takes
the checker's general way, which is always right.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import msgspec

from sseguard.core.sse import SSEDecoder, SSEEvent, single_frame

#: What a plain hole may not hold: the JSON string's delimiter and escape, and control characters
#: (JSON forbids them raw; CR and LF would also end the SSE line).
_UNPLAIN = re.compile(rb'["\\\x00-\x1f]')
_decode_string = msgspec.json.Decoder(str).decode
_UNPLAIN_TEXT = re.compile('["\\\\\x00-\x1f]')

Path = tuple[str | int, ...]


def plain(text: str) -> bool:
    """Whether ``text`` can fill a lane's hole: it needs no escape in JSON."""
    try:
        return _UNPLAIN.search(text.encode()) is None
    except UnicodeEncodeError:  # a lone surrogate: JSON can only have sent it escaped
        return False


def _get(obj: Any, path: Path) -> Any:
    for step in path:
        if isinstance(step, int):
            if not isinstance(obj, list) or len(obj) <= step:
                return None
        elif not isinstance(obj, dict):
            return None
        obj = obj[step] if isinstance(step, int) else obj.get(step)
    return obj


def _set(obj: Any, path: Path, value: Any) -> None:
    for step in path[:-1]:
        obj = obj[step]
    obj[path[-1]] = value


class Lane:
    """One stream's template: ``prefix ⟨text⟩ suffix``, or with the number ``prefix ⟨text⟩ mid
    ⟨n⟩ suffix`` (``numbered_after``) or ``prefix ⟨n⟩ mid ⟨text⟩ suffix``; ``head`` is where the SSE
    data starts, ``sep`` the blank line's length, ``name`` the event's type."""

    __slots__ = ("_lm", "_lp", "_ls", "decoder", "head", "id", "mid", "name", "numbered_after",
                 "prefix", "retry", "sep", "suffix")

    def __init__(self, prefix: bytes, suffix: bytes, *, head: int, sep: int, name: str,
                 decoder: SSEDecoder, mid: bytes | None = None,
                 numbered_after: bool = True) -> None:
        self.decoder = decoder  # the stream's: the lane reads frames only where it is at a boundary
        # The id and retry in force, as the decoder had them when the lane was last found ready
        # (``ready``): only the decoder's own reading changes them, and it has not run since.
        self.id: str | None = None
        self.retry: int | None = None
        self.prefix = prefix
        self.suffix = suffix
        self.mid = mid
        self.numbered_after = numbered_after
        self.head = head
        self.sep = sep
        self.name = name
        self._lp = len(prefix)
        self._ls = len(suffix)
        self._lm = len(mid) if mid is not None else 0

    def text(self, data: bytes, number: int | None = None) -> str | None:
        """The text in the hole when ``data`` is the learned frame with another (plain) text and,
        for a numbered lane, the number ``number``; else None.

        Written with slices and ``in`` rather than ``startswith`` or a regex: this runs for every
        event of every stream, and their calls cost more than the comparisons themselves."""
        start = self._lp
        if data[:start] != self.prefix or data[-self._ls:] != self.suffix:
            return None
        end = len(data) - self._ls
        mid = self.mid
        if mid is not None:
            if number is None:
                return None
            if self.numbered_after:
                tail = mid + b"%d" % number
                end -= len(tail)
                if end < start or data[end:end + len(tail)] != tail:
                    return None
            else:
                head = b"%d" % number + mid
                if data[start:start + len(head)] != head:
                    return None
                start += len(head)
        if end < start:
            return None
        hole = data[start:end]
        try:
            text = hole.decode()
        except UnicodeDecodeError:
            return None
        if '"' in text or "\\" in text or (not text.isprintable()
                                             and _UNPLAIN_TEXT.search(text) is not None):
            # Escapes (a newline, a quote, ``\u00e9`` from an ASCII-only server): the hole is the
            # lane's string token only if it is one whole JSON string's content, which msgspec
            # decides (an unescaped quote leaves trailing bytes; a raw control character or an
            # escape cut short is an error).
            try:
                return _decode_string(b'"' + hole + b'"')
            except msgspec.DecodeError:
                return None
        return text

    def ready(self) -> bool:
        """Whether the stream's decoder is at a frame boundary (the lane reads whole frames only
        there); takes the id and retry in force for the events the lane gives."""
        decoder = self.decoder
        self.id, self.retry = decoder.last_id, decoder.retry
        return decoder.at_boundary

    def event(self, frame: bytes) -> SSEEvent:
        """The event of a frame that matched, as the decoder would have dispatched it (its data
        all valid UTF-8, as ``text`` found)."""
        return SSEEvent(frame[self.head:len(frame) - self.sep].decode(), self.name, self.id,
                        self.retry, frame)

    @classmethod
    def learn(cls, raw: bytes, text: str, path: Path, decode: Callable[[str], Any],
              decoder: SSEDecoder, *,
              number: int | None = None, number_key: str = "",
              number_path: Path = ()) -> Lane | None:
        """The lane of ``raw``, one whole frame whose JSON holds ``text`` at ``path`` (and the
        integer ``number`` under ``number_key``, at ``number_path``), or None when it cannot be
        one: the frame is of another shape, the text is not plain or not found once, the
        substitution changes more than the hole."""
        event = single_frame(raw)
        if event is None or event.id is not None:
            return None
        if not plain(text):
            return None
        encoded = text.encode()
        literal = b'"' + encoded + b'"'
        if raw.count(literal) != 1:
            return None
        sep = 4 if raw.endswith(b"\r\n\r\n") else 2
        payload = event.data.encode()
        head = len(raw) - sep - len(payload)
        if head < 0 or raw[head:len(raw) - sep] != payload:
            return None
        at = raw.find(literal)
        if at < head or not raw[head:at].rstrip(b" \t\r\n").endswith(b":"):
            return None
        start, end = at + 1, at + 1 + len(encoded)  # the hole: inside the quotes
        lane: Lane
        if number is None:
            lane = cls(raw[:start], raw[end:], head=head, sep=sep, name=event.event,
                       decoder=decoder)
        else:
            found = list(re.finditer(rb'"' + re.escape(number_key.encode()) + rb'"\s*:\s*(\d+)',
                                     raw))
            if len(found) != 1 or found[0].group(1) != b"%d" % number:
                return None
            n_start, n_end = found[0].span(1)
            if n_start >= end:
                lane = cls(raw[:start], raw[n_end:], head=head, sep=sep, name=event.event,
                           decoder=decoder, mid=raw[end:n_start], numbered_after=True)
            elif n_end <= start and n_start >= head:
                lane = cls(raw[:n_start], raw[end:], head=head, sep=sep, name=event.event,
                           decoder=decoder, mid=raw[n_end:start], numbered_after=False)
            else:
                return None
        if not lane._proves(raw, text, path, decode, number, number_path):
            return None
        return lane

    def _proves(self, raw: bytes, text: str, path: Path, decode: Callable[[str], Any],
                number: int | None, number_path: Path) -> bool:
        """Another text (and number) in the holes decodes to the learned object with exactly
        those values changed, and the frame matches its own template."""
        other_text = text + "x"
        other_number = None if number is None else number + 1
        if self.text(raw, number) != text:
            return False
        sample = self._build(other_text, other_number)
        if self.text(sample, other_number) != other_text:
            return False
        try:
            learned, swapped = decode(self.event(raw).data), decode(self.event(sample).data)
        except (ValueError, RecursionError):  # msgspec's DecodeError is a ValueError
            return False
        if _get(swapped, path) != other_text or _get(learned, path) != text:
            return False
        if number is not None and _get(swapped, number_path) != other_number:
            return False
        _set(swapped, path, text)
        if number is not None:
            _set(swapped, number_path, number)
        return bool(swapped == learned)

    def _build(self, text: str, number: int | None) -> bytes:
        hole = text.encode()
        if self.mid is None:
            return self.prefix + hole + self.suffix
        digits = b"%d" % (number or 0)
        if self.numbered_after:
            return self.prefix + hole + self.mid + digits + self.suffix
        return self.prefix + digits + self.mid + hole + self.suffix
