"""Forced answers through a real vLLM: what each family's markup looks like (written out here, in
the tests' own words, not by sseguard's renderers), the cases, the requests that force them with
vLLM's structured outputs (``choice``: exactly this text, then end of sequence), and how a client's
stream is judged.

A random-weight model writes whatever the constraint allows, token by token from the real
vocabulary: the detokenizer cuts the markup wherever the sampled tokens fall (``"L"``, ``"e"``,
``"t"``, ``" me"`` …), the scheduler batches the streams, and the server's parser (ours or vLLM's
own, ``support.real_switch``) turns the text into ``content``, ``reasoning`` and ``tool_calls``.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from support.real_server import Config

Call = tuple[str, dict[str, Any]]

TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {"name": "get_weather", "description": "Weather forecast.",
     "parameters": {"type": "object", "properties": {"location": {"type": "string"},
                                                     "days": {"type": "integer"}},
                    "required": ["location"]}}},
    {"type": "function", "function": {"name": "get_time", "description": "Local time.",
     "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "write_file", "description": "Write a file.",
     "parameters": {"type": "object", "properties": {"path": {"type": "string"},
                                                     "content": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "set_config", "description": "Set options.",
     "parameters": {"type": "object", "properties": {"settings": {"type": "object"}}}}},
]

WEATHER: Call = ("get_weather", {"location": "Paris", "days": 2})
TIME: Call = ("get_time", {"tz": "Asia/Tokyo"})
QUOTED: Call = ("write_file", {"path": "notes/été.md",
                               "content": 'He said "hi"\nnaïve — 東京 ✓ \\ done'})
NESTED: Call = ("set_config", {"settings": {"retries": 3, "tags": ["a", "b"], "mode": {"on": True}}})


@dataclass(frozen=True)
class Case:
    """One forced answer: text before the calls, reasoning first (or not), the calls."""

    name: str
    calls: tuple[Call, ...]
    text: str = ""
    thinking: str = ""


CASES = (
    Case("one_call", (WEATHER,)),
    Case("two_calls", (WEATHER, TIME)),
    Case("quoted_string", (QUOTED,)),
    Case("nested_object", (NESTED,)),
    Case("text_before", (WEATHER,), text="Let me check the weather."),
    Case("thinking_first", (WEATHER,), thinking="The user wants the weather in Paris."),
)


def _value(v: Any) -> str:
    """A parameter value as the XML-like families write it: strings raw, the rest as JSON."""
    return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)


def _jargs(args: dict[str, Any]) -> str:
    return json.dumps(args, ensure_ascii=False)


def _py(v: Any) -> str:
    """A Python literal, as the pythonic format writes arguments."""
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)  # a double-quoted literal Python reads the same
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_py(k)}: {_py(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(_py(x) for x in v) + "]"
    return json.dumps(v)


def hermes(calls: Sequence[Call]) -> str:
    return "\n".join(f'<tool_call>\n{{"name": "{n}", "arguments": {_jargs(a)}}}\n</tool_call>'
                     for n, a in calls)


def qwen3_coder(calls: Sequence[Call]) -> str:
    return "\n".join("<tool_call>\n<function=" + n + ">\n"
                     + "".join(f"<parameter={k}>\n{_value(v)}\n</parameter>\n" for k, v in a.items())
                     + "</function>\n</tool_call>" for n, a in calls)


def glm45(calls: Sequence[Call]) -> str:
    return "\n".join(f"<tool_call>{n}\n"
                     + "".join(f"<arg_key>{k}</arg_key>\n<arg_value>{_value(v)}</arg_value>\n"
                               for k, v in a.items()) + "</tool_call>" for n, a in calls)


def glm47(calls: Sequence[Call]) -> str:
    return "".join(f"<tool_call>{n}"
                   + "".join(f"<arg_key>{k}</arg_key><arg_value>{_value(v)}</arg_value>"
                             for k, v in a.items()) + "</tool_call>" for n, a in calls)


def kimi_k2(calls: Sequence[Call]) -> str:
    return ("<|tool_calls_section_begin|>"
            + "".join(f"<|tool_call_begin|>functions.{n}:{i}<|tool_call_argument_begin|>{_jargs(a)}"
                      "<|tool_call_end|>" for i, (n, a) in enumerate(calls))
            + "<|tool_calls_section_end|>")


def minimax_m2(calls: Sequence[Call]) -> str:
    return ("<minimax:tool_call>\n"
            + "".join(f'<invoke name="{n}">\n'
                      + "".join(f'<parameter name="{k}">{_value(v)}</parameter>\n' for k, v in a.items())
                      + "</invoke>\n" for n, a in calls) + "</minimax:tool_call>")


def harmony(calls: Sequence[Call]) -> str:
    return "<|start|>assistant".join(
        f"<|channel|>commentary to=functions.{n} <|constrain|>json<|message|>{_jargs(a)}<|call|>"
        for n, a in calls)


def llama3_json(calls: Sequence[Call]) -> str:
    return "<|python_tag|>" + "; ".join(f'{{"name": "{n}", "parameters": {_jargs(a)}}}' for n, a in calls)


def mistral(calls: Sequence[Call]) -> str:
    return "".join(f"[TOOL_CALLS]{n}[ARGS]{_jargs(a)}" for n, a in calls)


def pythonic(calls: Sequence[Call]) -> str:
    return "[" + ", ".join(f"{n}(" + ", ".join(f"{k}={_py(v)}" for k, v in a.items()) + ")"
                           for n, a in calls) + "]"


def _dsml(block: str, sep: str) -> Callable[[Sequence[Call]], str]:
    d = "｜DSML｜" + sep

    def render(calls: Sequence[Call]) -> str:
        body = "".join(
            f'<{d}invoke name="{n}">\n'
            + "".join(f'<{d}parameter name="{k}" string="{"true" if isinstance(v, str) else "false"}">'
                      f"{_value(v)}</{d}parameter>\n" for k, v in a.items())
            + f"</{d}invoke>\n" for n, a in calls)
        return f"<{d}{block}>\n{body}</{d}{block}>"
    return render


@dataclass(frozen=True)
class Family:
    """One markup family as the tests force it: its writer, where it is served, both parsers."""

    name: str  # sseguard's family name: our parser is ``sseguard-<name>``
    render: Callable[[Sequence[Call]], str]
    vllm_tool: str  # vLLM's own parser of the same format
    leaks: tuple[str, ...]  # substrings that must never reach ``content``
    model: str = "qwen2"  # support.real_models.MODELS
    template: str | None = None  # llama.cpp's template the request renders with
    think: tuple[str, str] | None = ("<think>", "</think>")  # how the family writes reasoning
    vllm_reasoning: str | None = None
    ours_reasoning: bool = True  # ``sseguard-<name>`` is also a reasoning parser
    text_sep: str = "\n"
    skip: tuple[str, ...] = ()  # cases the format cannot write
    #: the template ends every prompt inside reasoning (GLM-4.7, MiniMax-M2): every answer closes it
    opens: bool = False
    #: ``chat_template_kwargs`` that make the prompt open reasoning, sent with the thinking case
    #: (DeepSeek's toggle: without it the prompt ends with ``</think>``)
    think_kwargs: dict[str, Any] | None = None

    def prompt_opens(self, case: Case) -> bool:
        """Whether the prompt of ``case`` ends inside reasoning (the model then writes no opener)."""
        return self.opens or bool(case.thinking and self.think_kwargs)

    def answer(self, case: Case) -> str:
        """The whole forced completion for ``case``, as the real model writes it after its prompt."""
        head = ""
        if self.think and self.prompt_opens(case):
            head = f"{case.thinking}{self.think[1]}"
        elif case.thinking and self.think:
            head = f"{self.think[0]}{case.thinking}{self.think[1]}"
        return head + self.visible(case)

    def visible(self, case: Case) -> str:
        """The part of the answer after any reasoning: the text, then the calls' markup."""
        return (case.text + self.text_sep if case.text else "") + self.render(case.calls)

    def cases(self) -> tuple[Case, ...]:
        return tuple(c for c in CASES if c.name not in self.skip and (self.think or not c.thinking))


_XML = ("<tool_call", "</tool_call")
_THINK = ("<think>", "</think>")
FAMILIES: dict[str, Family] = {f.name: f for f in (
    Family("hermes", hermes, "hermes", _XML + _THINK, template="Qwen-Qwen3-0.6B", vllm_reasoning="qwen3"),
    Family("qwen3-coder", qwen3_coder, "qwen3_coder", (*_XML, "<function=", "<parameter=", *_THINK),
           template="Qwen3-Coder", vllm_reasoning="qwen3"),
    Family("glm45", glm45, "glm45", (*_XML, "<arg_key", "<arg_value", *_THINK), template="GLM-4.6",
           vllm_reasoning="glm45"),
    Family("glm47", glm47, "glm47", (*_XML, "<arg_key", "<arg_value", *_THINK),
           template="GLM-4.7-Flash", vllm_reasoning="glm47", text_sep="", opens=True),
    Family("kimi-k2", kimi_k2, "kimi_k2", ("<|tool_call", "functions.get", *_THINK),
           template="Kimi-K2-Thinking", vllm_reasoning="kimi_k2", text_sep=""),
    Family("minimax-m2", minimax_m2, "minimax_m2", ("<minimax:tool_call", "<invoke", "<parameter", *_THINK),
           template="MiniMax-M2", vllm_reasoning="minimax_m2", opens=True),
    Family("harmony", harmony, "openai",
           ("<|channel|>", "<|message|>", "<|call|>", "<|start|>", "<|constrain|>", "to=functions"),
           template="openai-gpt-oss-120b", ours_reasoning=False,
           think=("<|channel|>analysis<|message|>", "<|end|><|start|>assistant"), text_sep=""),
    Family("llama3-json", llama3_json, "llama3_json", ("<|python_tag|>", '"parameters"'),
           template="meta-llama-Llama-3.1-8B-Instruct", think=None, text_sep=""),
    Family("mistral", mistral, "mistral", ("[TOOL_CALLS]", "[ARGS]", "[THINK]", "[/THINK]"),
           template="Mistral-Small-3.2-24B-Instruct-2506", think=("[THINK]", "[/THINK]"),
           ours_reasoning=False, text_sep=""),
    Family("pythonic", pythonic, "pythonic",
           ("get_weather(", "get_time(", "write_file(", "set_config("),
           template="meta-llama-Llama-3.2-3B-Instruct", think=None, skip=("text_before",)),
    Family("dsml-v32", _dsml("function_calls", ""), "deepseek_v32", ("DSML", *_THINK),
           model="deepseek-v4", template="deepseek-ai-DeepSeek-V3.2", vllm_reasoning="deepseek_v3",
           text_sep="\n\n", think_kwargs={"thinking": True}),
    Family("dsml-v4", _dsml("tool_calls", ""), "deepseek_v4", ("DSML", *_THINK),
           model="deepseek-v4", template="deepseek-ai-DeepSeek-V4", vllm_reasoning="deepseek_v4",
           text_sep="\n\n", think_kwargs={"thinking": True}),
    Family("dsml-v41", _dsml("calls", " "), "deepseek_v41", ("DSML", *_THINK),
           model="deepseek-v4", template="deepseek-ai-DeepSeek-V4", vllm_reasoning="deepseek_v41",
           text_sep="\n\n", think_kwargs={"thinking": True}),
)}


@dataclass
class Stream:
    """What a client assembled from one streamed answer."""

    status: int = 0
    content: str = ""
    reasoning: str = ""
    calls: dict[int, dict[str, str]] = field(default_factory=dict)  # index → id, name, arguments
    order: list[int] = field(default_factory=list)  # tool-call indexes in order of first sight
    finish: str | None = None
    done: bool = False
    error: str = ""


async def stream_once(client: httpx.AsyncClient, body: dict[str, Any]) -> Stream:
    """POST one streamed chat completion and assemble it the way a client does."""
    got = Stream()
    async with client.stream("POST", "/v1/chat/completions", json=body) as resp:
        got.status = resp.status_code
        if resp.status_code != 200:
            got.error = (await resp.aread()).decode("utf-8", "replace")[:500]
            return got
        async for line in resp.aiter_lines():
            if not line.startswith("data: "):
                continue
            if line == "data: [DONE]":
                got.done = True
                continue
            chunk = json.loads(line[6:])
            for choice in chunk.get("choices") or []:
                delta = choice.get("delta") or {}
                got.content += delta.get("content") or ""
                got.reasoning += delta.get("reasoning") or delta.get("reasoning_content") or ""
                for tc in delta.get("tool_calls") or []:
                    idx = tc["index"]
                    if idx not in got.calls:
                        got.calls[idx] = {"id": "", "name": "", "arguments": ""}
                        got.order.append(idx)
                    slot = got.calls[idx]
                    slot["id"] = slot["id"] or tc.get("id") or ""
                    fn = tc.get("function") or {}
                    slot["name"] += fn.get("name") or ""
                    slot["arguments"] += fn.get("arguments") or ""
                if choice.get("finish_reason"):
                    got.finish = choice["finish_reason"]
    return got


def request(family: Family, case: Case, *, shape: str = "auto", max_tokens: int = 700,
            template: bool = True) -> dict[str, Any]:
    """The request that forces ``case`` in ``family``'s markup, in one of the request shapes:
    ``auto``, ``none`` (tool_choice none), ``no_tools``, ``serial`` (parallel_tool_calls false)."""
    body: dict[str, Any] = {
        "model": "m", "stream": True, "temperature": 0, "max_tokens": max_tokens,
        "messages": [{"role": "user", "content": "What is the weather in Paris?"}],
        "structured_outputs": {"choice": [family.answer(case)]},
    }
    if shape != "no_tools":
        body["tools"] = TOOLS
        body["tool_choice"] = "none" if shape == "none" else "auto"
    if shape == "serial":
        body["parallel_tool_calls"] = False
    if case.thinking and family.think_kwargs:
        body["chat_template_kwargs"] = family.think_kwargs
    bias = marker_bias(family.model, family.answer(case))
    if bias:
        body["logit_bias"] = bias
    if template and family.template:
        from support.real_models import template as load_template

        body["chat_template"] = load_template(family.template)
    return body


@functools.cache
def _single_tokens(model: str) -> dict[str, int]:
    """The added tokens of ``model``'s vocabulary (markers, think tags, roles) → their ids."""
    from support.real_models import build

    data = json.loads((build(model) / "tokenizer.json").read_text(encoding="utf-8"))
    return {t["content"]: t["id"] for t in data.get("added_tokens", []) if len(t["content"]) > 1}


def marker_bias(model: str, answer: str) -> dict[str, int]:
    """``logit_bias`` that makes the model write each marker of ``answer`` that its vocabulary
    holds as one token as that token, as a real checkpoint does: the constraint alone lets a
    random model spell ``</think>`` in pieces, which parsers that look for the marker's token id
    (vLLM's reasoning parsers) never see in a real model's output. The text around the markers
    is still cut wherever the sampled tokens fall."""
    return {str(tid): 100 for text, tid in _single_tokens(model).items() if text in answer}


@dataclass(frozen=True)
class Judged:
    """One stream's verdict: the three counts of the side-by-side."""

    right: bool
    leaked: bool
    reasoning_right: bool
    why: str = ""


def judge(family: Family, case: Case, got: Stream, *, shape: str = "auto") -> Judged:
    """Right: the calls equal what was forced (names, arguments as JSON values), indexes dense from
    0, ids present, ``finish_reason`` ``tool_calls``, the text before them as the content. For the
    shapes without tool parsing (``none``, ``no_tools``) right is the answer after its reasoning,
    markup and all, as content and no call. Leaked: a marker of the family in ``content``."""
    leaked = any(marker in got.content for marker in family.leaks)
    want_reasoning = case.thinking if family.think else ""
    if got.status != 200 or not got.done:
        return Judged(False, leaked, False, f"status {got.status}, [DONE] {got.done}: {got.error}")
    if shape in ("none", "no_tools"):
        whole = family.visible(case)
        ok = not got.calls and got.content.strip() == whole
        return Judged(ok and got.finish == "stop", False, True,
                      "" if ok else f"content {got.content!r}, reasoning {got.reasoning!r}, calls "
                      f"{got.calls}, finish {got.finish}")
    problems: list[str] = []
    calls = [got.calls[i] for i in sorted(got.calls)]
    if got.order != list(range(len(case.calls))):
        problems.append(f"indexes {got.order}")
    try:
        seen = [(c["name"], json.loads(c["arguments"])) for c in calls]
    except ValueError:
        seen = []
        problems.append("arguments not JSON")
    if seen != [(n, a) for n, a in case.calls]:
        problems.append(f"calls {[(c['name'], c['arguments']) for c in calls]}")
    if not all(c["id"] for c in calls):
        problems.append("a call without id")
    if got.finish != "tool_calls":
        problems.append(f"finish_reason {got.finish}")
    if got.content.strip() != case.text:
        problems.append(f"content {got.content!r}")
    reasoning_ok = got.reasoning.strip() == want_reasoning
    if not reasoning_ok:
        problems.append(f"reasoning {got.reasoning!r}")
    return Judged(not problems, leaked, reasoning_ok, "; ".join(problems))


@dataclass
class Tally:
    """Counts for one family, parser and concurrency."""

    streams: int = 0
    right: int = 0
    leaks: int = 0
    reasoning_right: int = 0
    failures: list[str] = field(default_factory=list)
    #: ``case/shape`` → [streams right and without leak, streams]
    by_case: dict[str, list[int]] = field(default_factory=dict)

    def add(self, case: str, label: str, verdict: Judged) -> None:
        good = verdict.right and not verdict.leaked
        self.streams += 1
        self.right += verdict.right
        self.leaks += verdict.leaked
        self.reasoning_right += verdict.reasoning_right
        counts = self.by_case.setdefault(case, [0, 0])
        counts[0] += good
        counts[1] += 1
        if not good:
            self.failures.append(f"{label}: {verdict.why}" + (" [leak]" if verdict.leaked else ""))


async def run_wave(root_url: str, family: Family, items: Sequence[tuple[Case, str]],
                   timeout_s: float = 600.0) -> list[tuple[Case, str, Stream]]:
    """All ``items`` (case, shape) as concurrent streams; bounded by ``timeout_s``."""
    limits = httpx.Limits(max_connections=len(items) + 1)
    async with httpx.AsyncClient(base_url=root_url, timeout=timeout_s, limits=limits) as client:
        got = await asyncio.wait_for(asyncio.gather(
            *(stream_once(client, request(family, case, shape=shape)) for case, shape in items)),
            timeout_s)
    return [(case, shape, stream) for (case, shape), stream in zip(items, got, strict=True)]


PARSERS = ("ours", "vllm")
LEVELS = (1, 8, 32)
#: Streams per family and parser. On two cores one stream alone advances a few tokens a second,
#: 32 together twenty times as many, so the level 1 runs two cases one after the other, and the
#: waves of 8 and 32 carry every case and request shape (cycled) as concurrent streams.
AT_1 = ("two_calls", "quoted_string")
SHAPES = ("auto", "none", "no_tools", "serial")


def side_by_side_config(model: Path) -> Config:
    """The server the side-by-side runs on: auto tool choice on, started with one of our parsers
    (it needs no token of the vocabulary, so it starts with any model), switched per run."""
    return Config(model, tool_parser="sseguard-hermes")


def parser_names(family: Family, which: str) -> tuple[str, str | None]:
    """The tool and reasoning parser a server runs for ``which`` (``ours`` or ``vllm``)."""
    if which == "ours":
        ours = f"sseguard-{family.name}"
        return ours, ours if family.ours_reasoning and family.think else None
    return family.vllm_tool, family.vllm_reasoning


def plan(family: Family, level: int) -> list[list[tuple[Case, str]]]:
    """The waves of streams run at ``level``: at 1, ``AT_1`` one by one; else one wave of ``level``
    streams cycling through every case in ``auto`` and the other shapes with the first case."""
    if level == 1:
        return [[(case, "auto")] for case in family.cases() if case.name in AT_1]
    first = family.cases()[0]
    pool = [(case, "auto") for case in family.cases()] + [(first, shape) for shape in SHAPES[1:]]
    return [[pool[i % len(pool)] for i in range(level)]]


async def side_by_side(root_url: str, family: Family, levels: Sequence[int] = LEVELS) -> dict[int, Tally]:
    """Every case of ``family`` through the server's current parsers, at each concurrency."""
    tallies: dict[int, Tally] = {}
    for level in levels:
        tally = tallies[level] = Tally()
        for wave in plan(family, level):
            for case, shape, got in await run_wave(root_url, family, wave):
                tally.add(f"{case.name}/{shape}", f"{case.name}/{shape}@{level}",
                          judge(family, case, got, shape=shape))
    return tallies
