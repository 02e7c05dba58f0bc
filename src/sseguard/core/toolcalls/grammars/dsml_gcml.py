"""GigaChat 3.5 tool calls (``gigachat35``): the DSML grammar with the marker ``｜GCML｜``
(docs/design/markup.md class G; SGLang ``gigachat35_detector.py``).

```
text\\n\\n<｜GCML｜tool_calls>
<｜GCML｜invoke name="get_weather">
<｜GCML｜parameter name="city" string="true">Paris</｜GCML｜parameter>
</｜GCML｜invoke>
</｜GCML｜tool_calls>
```

Every decision is ``dsml-v4``'s (docs/design/markup.md §1): ``string="true"`` values byte-exact,
``string="false"`` strict JSON, a flag other than ``true``/``false`` is ``invalid_string_flag``, the marker is
reserved inside values, ``\\n\\n`` before a block is the separator. The parser is DSML's with the marker's
search and tag reading bound to ``｜GCML｜``; ``｜DSML｜`` markup is text here, as ``｜GCML｜`` is to
the DSML families. The ``<|message_sep|>``/``</s>`` an engine may leave after the block are the
server's end tokens, not this grammar's.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from sseguard.core.toolcalls.family import CallLike
from sseguard.core.toolcalls.grammars.dsml import MARK, SEPARATOR, DSMLParser, Tag, classify
from sseguard.core.toolcalls.schema import ToolSpec

GCML = "｜GCML｜"
OPEN = "<" + GCML
CLOSE = "</" + GCML
BLOCK = "tool_calls"


def find_marker(data: str, pos: int) -> tuple[int, str]:
    """(start, "") of the first complete ``<｜GCML｜`` or ``</｜GCML｜`` at or after ``pos``, or
    (-1, "")."""
    i = data.find(GCML, pos)
    while i != -1:
        if i - 1 >= pos and data[i - 1] == "<":
            return i - 1, ""
        if i - 2 >= pos and data[i - 2] == "<" and data[i - 1] == "/":
            return i - 2, ""
        i = data.find(GCML, i + 1)
    return -1, ""


def hold_start(data: str, pos: int) -> int:
    """Where a suffix that could still become a GCML marker starts (``len(data)`` if none)."""
    n = len(data)
    j = data.rfind("<", max(pos, n - len(CLOSE)))
    if j != -1:
        tail = data[j:]
        if OPEN.startswith(tail) or CLOSE.startswith(tail):
            return j
    return n


def classify_gcml(tag: str) -> Tag | None:
    """A GCML tag read as the DSML tag it spells (the marker is the only difference; it stands at
    the tag's start, so the first occurrence is the one swapped)."""
    if not tag.startswith((OPEN, CLOSE)):
        return None
    return classify(tag.replace(GCML, MARK, 1))


class GigaChat35Parser(DSMLParser):
    """``dsml-v4``'s parser reading the ``｜GCML｜`` marker."""

    def __init__(self, tools: ToolSpec | None = None) -> None:
        super().__init__("dsml-v4", tools)
        self.family = "gigachat35"
        self._find, self._hold = find_marker, hold_start
        self._classify = classify_gcml


def _value(value: object) -> tuple[str, str]:
    if isinstance(value, str):
        return "true", value
    return "false", json.dumps(value, ensure_ascii=False)


def render(calls: Sequence[CallLike], malformed: bool) -> str:
    """The block as the template writes it, after its ``\\n\\n``; ``malformed`` misspells the first
    string parameter's closer, else the first invoke's."""
    target = next(((i, k) for i, c in enumerate(calls) for k, v in c.values.items()
                   if isinstance(v, str)), None)
    out = [f"{SEPARATOR}{OPEN}{BLOCK}>\n"]
    for i, call in enumerate(calls):
        out.append(f'{OPEN}invoke name="{call.name}">\n')
        for key, value in call.values.items():
            flag, text = _value(value)
            closer = "parametr" if malformed and target == (i, key) else "parameter"
            out.append(f'{OPEN}parameter name="{key}" string="{flag}">{text}{CLOSE}{closer}>\n')
        bad = malformed and target is None and i == 0
        out.append(f"{CLOSE}{'invok' if bad else 'invoke'}>\n")
    out.append(f"{CLOSE}{BLOCK}>")
    return "".join(out)
