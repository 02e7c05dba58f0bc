"""gpt-oss Harmony (``harmony``, docs/design/markup.md §2): a completion of channel messages
(``grammars.channel_messages``).
"""

from __future__ import annotations

from sseguard.core.toolcalls.auto import builtin_rank
from sseguard.core.toolcalls.family import Family, claim_openers
from sseguard.core.toolcalls.grammars.channel_messages import (
    CALL,
    CHANNEL,
    CONSTRAIN,
    FAMILY_MARKERS,
    MESSAGE,
    MESSAGE_END,
    REASONING_EXITS,
    RETURN,
    START,
    HarmonyParser,
    may_open_header,
    render,
    render_answer,
)

FAMILY = Family(
    name="harmony", make=HarmonyParser, markers=FAMILY_MARKERS,
    leak_markers=(START, CHANNEL, MESSAGE, CONSTRAIN, MESSAGE_END, CALL, RETURN),
    reasoning_exits=REASONING_EXITS, auto_markers=FAMILY_MARKERS,
    claim=claim_openers((START, CHANNEL)), render=render, malformable=True,
    # decision 2.11: stripped special tokens leave ``…commentary to=functions.f json{…}``
    leak_shape=r"(?<=to=)functions\.[^\s{}]{1,64}?\s{0,4}(?:json)?\s{0,4}\{",
    auto_prefix=may_open_header, render_answer=render_answer, rank=builtin_rank("harmony"),
    aliases=("openai", "gpt-oss", "gpt_oss"), grammar="I")
