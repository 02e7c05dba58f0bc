"""Deterministic answers: text, reasoning and tool calls from a seed and the request, no model involved.

The same seed and request give the same answer, byte for byte, so a failing run can be replayed. Tool
calls come out either structured (``tool_calls`` deltas) or, in raw-markup mode, as the markup a model
writes (``docs/design/markup.md`` §1 formats, exactly), left in ``content`` as a server without a tool parser
does. Content faults (``markup_leak``, broken arguments, a misspelled closer, …) are applied here.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from dataclasses import dataclass, field, replace
from typing import Any

from sseguard.chaos.config import MALFORMABLE, ChaosConfig
from sseguard.chaos.faults import NEEDS_TEXT, NEEDS_TOOL_CALL, Fault
from sseguard.chaos.request import ChatRequest, Tool
from sseguard.core._renamed import renamed
from sseguard.core.toolcalls import family as registered

_WORDS_TEXT = """
stream token chunk answer model server client request response event frame delta content reason
careful quiet bright steady simple plain honest small large early late open close first final
river mountain harbor garden window lantern compass ledger signal bridge engine market orchard
measure check count carry follow return gather shape build keep write read send hold turn
"""
WORDS = tuple(_WORDS_TEXT.split())
_REASONING_TEXT = """
first consider the question then check each step again because the user asked for details
so weigh options compare results and settle on a short clear reply
"""
REASONING_WORDS = tuple(_REASONING_TEXT.split())
CITIES = ("Paris", "Hangzhou", "Lisbon", "Nairobi", "Montréal", "Kyoto", "Oslo", "Lima")
HALLUCINATED = ("search_web", "run_shell", "lookup_record", "fetch_url")

#: The tool a fault uses when the request offers none (so a broken call can still be shown).
BUILTIN_TOOL = Tool("get_weather", {
    "type": "object",
    "properties": {"location": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["location"],
})
#: The family a content fault writes its markup in when the server is not in raw-markup mode.
DEFAULT_FAMILY = "dsml-v32"


@dataclass(slots=True)
class GeneratedCall:
    """One tool call: ``arguments`` is the JSON text as sent (a fault may have broken it)."""

    id: str
    name: str
    values: dict[str, Any]
    arguments: str
    pieces: list[str] = field(default_factory=list)  # arguments split as streamed


@dataclass(slots=True)
class GeneratedAnswer:
    """One choice's answer, split into the pieces that become chunks."""

    reasoning: list[str]
    content: list[str]
    calls: list[GeneratedCall]
    finish_reason: str

    @property
    def completion_tokens(self) -> int:
        return len(self.reasoning) + len(self.content) + sum(len(c.pieces) for c in self.calls)


#: Mixed into the seed of an answer's reasoning words, which are drawn apart from its text.
_REASONING_SALT = 0x5EA5_0A11


def answer_rng(config: ChaosConfig, req: ChatRequest, choice: int) -> random.Random:
    """Text depends on (seed, request, choice index) only, never on arrival order."""
    digest = hashlib.blake2b(req.fingerprint + f":{config.seed}:{choice}".encode(),
                             digest_size=8).digest()
    return random.Random(int.from_bytes(digest, "big"))


def make_answer(config: ChaosConfig, req: ChatRequest, fault: Fault | None,
                choice: int = 0) -> GeneratedAnswer:
    """The answer for one choice of ``req`` with ``fault`` applied (content faults only).

    A continuation request (``req.continued``) whose text is a prefix of the answer's content gets the
    rest of that answer (no reasoning again); any other prefix gets the answer as it is: a different,
    still valid continuation.
    """
    prefix = req.continued
    if prefix is None:
        return _answer(config, req, fault, choice)
    # As a real engine counts it (vLLM, measured): the continuation's max_tokens are new tokens,
    # after the continued text, so the answer it continues is the one without that limit.
    answer = _answer(config, replace(req, max_tokens=None), fault, choice)
    if not "".join(answer.content).startswith(prefix):
        return _answer(config, req, fault, choice)
    rest: list[str] = []
    for piece in answer.content:
        if len(prefix) >= len(piece):
            prefix = prefix[len(piece):]
        else:
            rest.append(piece[len(prefix):])
            prefix = ""
    finish = answer.finish_reason
    if req.max_tokens is not None and len(rest) > req.max_tokens and not answer.calls:
        rest, finish = rest[:req.max_tokens], "length"
    return GeneratedAnswer([], rest, answer.calls, finish)


def _answer(config: ChaosConfig, req: ChatRequest, fault: Fault | None, choice: int) -> GeneratedAnswer:
    rng = answer_rng(config, req, choice)
    reasoning: list[str] = []
    if req.reasoning > 0:
        # Drawn apart: the answer's text is the same with thinking on or off, as a continuation
        # asked without thinking (``--resume anthropic`` drops it) expects of one model.
        count = max(1, round(config.pacing.reasoning_tokens * req.reasoning))
        reasoning = _words(random.Random(rng.getrandbits(64) ^ _REASONING_SALT), count,
                           REASONING_WORDS)
        rng = answer_rng(config, req, choice)
    tool_shape = fault in NEEDS_TOOL_CALL or (req.wants_tool_call and fault not in NEEDS_TEXT)
    if not tool_shape:
        count, finish = config.pacing.tokens, "stop"
        if req.max_tokens is not None and req.max_tokens < count:
            count, finish = req.max_tokens, "length"
        content = _words(rng, count, WORDS)
        if finish == "length" and content:
            # Cut by the limit, as an engine's answer is: mid-sentence, no full stop.
            content[-1] = content[-1].removesuffix(".")
        if fault is Fault.MARKUP_LEAK:
            family = config.raw_markup or DEFAULT_FAMILY
            leaked = _calls(rng, req, fault)
            content.extend(_split(rng, render_markup(family, leaked)))
        if fault is Fault.FINISH_REASON_MISMATCH:
            finish = "tool_calls"
        if fault is Fault.GARBLED:
            content = garble(rng, content)
        return GeneratedAnswer(reasoning, content, [], finish)
    calls = _calls(rng, req, fault)
    preface = _words(rng, rng.randint(2, 5), WORDS) if config.raw_markup or rng.random() < 0.3 else []
    if fault is Fault.MALFORMED_CLOSING_TAG:
        raw = config.raw_markup
        family = raw if raw is not None and raw in MALFORMABLE else DEFAULT_FAMILY
        markup = render_markup(family, calls, malformed=True)
        return _raw_answer(rng, family, reasoning, preface, markup)
    if config.raw_markup and fault not in NEEDS_TOOL_CALL:
        markup = render_markup(config.raw_markup, calls)
        return _raw_answer(rng, config.raw_markup, reasoning, preface, markup)
    for call in calls:
        call.pieces = _split(rng, call.arguments, minimum=2)
    return GeneratedAnswer(reasoning, preface, calls, "tool_calls")


def garble(rng: random.Random, content: list[str]) -> list[str]:
    """The words of ``content`` with a span early in the answer shuffled, or (when shuffling would
    change nothing) replaced: what a decode step reading another request's cached positions writes.
    The pieces keep their count, so the stream's shape and usage stay those of a healthy answer."""
    out = list(content)
    if len(out) < 2:
        return [*out[:-1], "".join(reversed(out[-1]))] if out else out
    start = rng.randrange(max(1, len(out) // 4))
    end = min(len(out), start + rng.randint(4, 8))
    span = out[start:end]
    rng.shuffle(span)
    if span == out[start:end]:
        span[0] = " " + rng.choice([w for w in WORDS if w.strip() != span[0].strip()] or ["lattice"])
    out[start:end] = span
    return out


def _raw_answer(rng: random.Random, family: str, reasoning: list[str], preface: list[str],
                markup: str) -> GeneratedAnswer:
    """An answer whose calls are left as markup in the content, after the preface.

    A family whose completion is nothing but messages (Harmony) writes the whole content itself: a
    server without its parser sends the reasoning and the preface as messages too, markers and all.
    """
    whole = registered(family).render_answer
    if whole is None:
        return GeneratedAnswer(reasoning, preface + _split(rng, markup), [], "stop")
    return GeneratedAnswer([], _split(rng, whole("".join(reasoning), "".join(preface), markup)), [], "stop")


def _words(rng: random.Random, count: int, vocabulary: tuple[str, ...]) -> list[str]:
    out = []
    for i in range(count):
        word = rng.choice(vocabulary)
        if i == 0:
            out.append(word.capitalize())
        else:
            out.append(" " + word)
    if out:
        out[-1] += "."
    return out


def _split(rng: random.Random, text: str, *, minimum: int = 1) -> list[str]:
    """Pieces of 3–8 characters, as a tokenizer would stream markup or JSON."""
    pieces, i = [], 0
    while i < len(text):
        step = rng.randint(3, 8)
        pieces.append(text[i:i + step])
        i += step
    if len(pieces) < minimum and len(text) >= minimum:
        cut = max(1, len(text) // 2)
        pieces = [text[:cut], text[cut:]]
    return pieces


def _calls(rng: random.Random, req: ChatRequest, fault: Fault | None) -> list[GeneratedCall]:
    offered = list(req.tools) or [BUILTIN_TOOL]
    forced = req.forced_tool()
    if fault is Fault.TOOL_ARGS_SCHEMA_MISMATCH:
        chosen = [next(t for t in offered if t.typed)] if any(t.typed for t in offered) else [
            BUILTIN_TOOL]
    elif forced is not None:
        chosen = [t for t in offered if t.name == forced]
    else:
        mentioned = sorted((req.last_text.find(t.name), i, t) for i, t in enumerate(offered)
                           if t.name in req.last_text)
        chosen = [t for _, _, t in mentioned] or [rng.choice(offered)]
        if not req.parallel_tool_calls:
            chosen = chosen[:1]
    calls = []
    for tool in chosen:
        values = schema_value(rng, tool.parameters, 0)
        if not isinstance(values, dict):
            values = {}
        calls.append(GeneratedCall(f"call_{rng.getrandbits(96):024x}", tool.name, values,
                          json.dumps(values, ensure_ascii=False)))
    first = calls[0]
    if fault is Fault.TOOL_ARGS_INVALID_JSON:
        # A trailing comma: the commonest way a hand-rolled JSON re-serializer breaks arguments.
        first.arguments = first.arguments[:-1].rstrip() + ",}"
    elif fault is Fault.TOOL_UNDEFINED_FUNCTION:
        names = {t.name for t in req.tools}
        first.name = next((n for n in HALLUCINATED if n not in names), first.name + "_unknown")
    elif fault is Fault.TOOL_ARGS_SCHEMA_MISMATCH:
        _break_schema(first, next(t for t in [*offered, BUILTIN_TOOL] if t.name == first.name))
    return calls


def _break_schema(call: GeneratedCall, tool: Tool) -> None:
    props = tool.parameters.get("properties") or {}
    for name, schema in props.items():
        kind = schema.get("type") if isinstance(schema, dict) else None
        if isinstance(kind, str):
            call.values[name] = 12345 if kind != "integer" and kind != "number" else "many"
            call.arguments = json.dumps(call.values, ensure_ascii=False)
            return


#: How deep ``schema_value`` fills nested objects and arrays. Agents' tools nest deeper than one
#: would guess: Codex CLI 0.171's ``request_user_input`` asks for objects (``label`` required)
#: inside an array inside objects inside an array — five levels; a shallower limit sent ``{}``
#: there, and the proxy rightly failed the call (``tool_args_schema_mismatch``).
SCHEMA_DEPTH = 8


def schema_value(rng: random.Random, schema: Any, depth: int, name: str = "") -> Any:
    """A value that satisfies a (simple) JSON schema: what a well-behaved model would send."""
    if not isinstance(schema, dict):
        return rng.choice(WORDS)
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return rng.choice(schema["enum"])
    if "const" in schema:
        return schema["const"]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "object" or (kind is None and "properties" in schema):
        props = schema.get("properties")
        if not isinstance(props, dict) or depth > SCHEMA_DEPTH:
            return {}
        return {k: schema_value(rng, v, depth + 1, k) for k, v in props.items()}
    if kind == "array":
        if depth > SCHEMA_DEPTH:
            return []
        return [schema_value(rng, schema.get("items"), depth + 1, name)
                for _ in range(rng.randint(1, 2))]
    if kind in ("integer", "number"):
        return _number(rng, schema, integer=kind == "integer")
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "null":
        return None
    if any(hint in name.lower() for hint in ("location", "city", "place")):
        return rng.choice(CITIES)
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 3)))


def _number(rng: random.Random, schema: dict[str, Any], *, integer: bool) -> int | float:
    """A number within the bounds, exclusive ones included (zod's ``positive()`` is
    ``exclusiveMinimum: 0`` beside ``minimum: -2**53+1``): a bound ignored fails a healthy call."""
    def num(key: str) -> float | None:
        value = schema.get(key)
        return value if isinstance(value, int | float) and not isinstance(value, bool) else None
    low, high = num("minimum"), num("maximum")
    above, below = num("exclusiveMinimum"), num("exclusiveMaximum")
    if integer:
        low_i = math.ceil(low) if low is not None else 1
        if above is not None:
            low_i = max(low_i, math.floor(above) + 1)
        high_i = math.floor(high) if high is not None else low_i + 9
        if below is not None:
            high_i = min(high_i, math.ceil(below) - 1)
        if high_i < low_i and low is None and above is None:
            low_i = high_i - 9
        return rng.randint(low_i, max(low_i, high_i))
    lo = max(x for x in (low, above, 0.0 if low is None and above is None else None) if x is not None)
    hi = min((x for x in (high, below) if x is not None), default=lo + 100)
    value = round(rng.uniform(lo, max(lo, hi)), 2)
    if (above is not None and value <= above) or (below is not None and value >= below):
        return (lo + hi) / 2
    return value


# ── markup ───────────────────────────────────────────────────────────────────────────────────────


def render_markup(family: str, calls: list[GeneratedCall], *, malformed: bool = False) -> str:
    """The markup a model of ``family`` writes for ``calls``, including the separator before it: the
    family's own ``render`` (``sseguard.core.toolcalls``, plugins included).

    ``malformed`` (``MALFORMABLE`` families) misspells one closing tag (Harmony: the first call's
    channel), the way a model under load or a re-serializing gateway does.
    """
    return registered(family).render(calls, malformed)

#: Old names → new (docs/design/vocabulary.md "Names").
__getattr__ = renamed(__name__, {"Answer": "GeneratedAnswer", "Call": "GeneratedCall"})
