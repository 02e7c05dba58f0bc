"""What the renderers of the tag-per-value families (GLM, MiniMax) share: how a value is written and
which closer it gets when a chaos fault breaks one."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from sseguard.core.toolcalls.family import CallLike


def typed_text(value: Any) -> str:
    """A GLM/MiniMax value: strings raw (the tool's schema types them), anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def tag_values(call: CallLike, broken: bool, closer: str,
               misspelt: str) -> Iterator[tuple[str, str, str]]:
    """(key, value text, closer) per value of a tag-per-value family; ``broken`` misspells the last
    value's closer, so that the value runs on into the call's closer (docs/design/markup.md decision 2.6)."""
    for j, (key, value) in enumerate(call.values.items(), 1):
        yield key, typed_text(value), misspelt if broken and j == len(call.values) else closer
