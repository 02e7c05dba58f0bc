"""Request bodies for each workload, and the conversations that carry multi-turn ones forward.

Pure Python with no I/O library: the asyncio runner and a Locust user build bodies the same way.
A ``Conversation`` belongs to one worker; it hands out the next body and is shown each verdict, so a
multi-turn workload only grows after a whole answer (a cut answer would poison the next turn).

- ``small``: a short prompt; ``big``: a large prompt made unique at its *start*, so no prefix cache can
  serve it (prefix caches match from the first token); ``reuse``: one growing conversation per worker
  on one kept-alive connection; ``tools``: a dozen tools attached, tool calls answered with a tool
  result; ``body``: the user's own request file.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

import msgspec

from sseguard.errors import ConfigError
from sseguard.probe.config import WorkloadSpec
from sseguard.verdict import Ending, Verdict

DEFAULT_MODEL = "sseguard-probe"
#: Endings after which the assistant's answer is whole (the dialect endings lose only a terminator).
WHOLE_ANSWER = frozenset({Ending.COMPLETE, Ending.NO_DONE, Ending.NO_FINISH})

_TOPICS = ("tide pools", "bridge cables", "sourdough", "compilers", "glaciers", "lighthouses",
           "ant colonies", "printing presses", "volcanic soil", "jazz harmony", "orbital mechanics",
           "bee dances", "railway signals", "coral reefs", "paper folding", "clock escapements")
_WORDS = ("the", "river", "engine", "quietly", "measured", "signal", "harbor", "amber", "lattice",
          "report", "vector", "meadow", "ledger", "copper", "window", "forecast", "thread", "granite",
          "protocol", "lantern", "cipher", "orchard", "boundary", "current", "archive", "falcon",
          "density", "mosaic", "tunnel", "quorum", "beacon", "spindle", "tundra", "kernel", "prism")
_FOLLOW_UPS = ("Go on.", "Give one more example.", "Summarise that in one sentence.",
               "What is the most common mistake here?", "Explain it to a child.",
               "Name a related idea.", "Which part is least understood?")

# A dozen tools of the shapes agents attach, with typed parameters (schema mismatches are detectable).
TOOLS: tuple[dict[str, Any], ...] = tuple(
    {"type": "function", "function": {"name": name, "description": desc, "parameters": {
        "type": "object", "properties": props, "required": list(required)}}}
    for name, desc, props, required in (
        ("get_weather", "Current weather for a city.",
         {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}}, ("city",)),
        ("search_web", "Search the web.",
         {"query": {"type": "string"}, "max_results": {"type": "integer"}}, ("query",)),
        ("read_file", "Read a text file.", {"path": {"type": "string"}}, ("path",)),
        ("write_file", "Write a text file.",
         {"path": {"type": "string"}, "content": {"type": "string"}}, ("path", "content")),
        ("run_shell", "Run a shell command.",
         {"command": {"type": "string"}, "timeout_s": {"type": "number"}}, ("command",)),
        ("get_time", "Current time in a time zone.", {"timezone": {"type": "string"}}, ("timezone",)),
        ("convert_currency", "Convert an amount between currencies.",
         {"amount": {"type": "number"}, "from_currency": {"type": "string"},
          "to_currency": {"type": "string"}}, ("amount", "from_currency", "to_currency")),
        ("create_event", "Create a calendar event.",
         {"title": {"type": "string"}, "start": {"type": "string"}, "end": {"type": "string"}},
         ("title", "start")),
        ("send_email", "Send an email.",
         {"to": {"type": "string"}, "subject": {"type": "string"}, "body": {"type": "string"}},
         ("to", "subject")),
        ("query_database", "Run a read-only SQL query.", {"sql": {"type": "string"}}, ("sql",)),
        ("translate_text", "Translate text.",
         {"text": {"type": "string"}, "target_language": {"type": "string"}},
         ("text", "target_language")),
        ("get_stock_price", "Latest price of a stock.", {"symbol": {"type": "string"}}, ("symbol",)),
    )
)
_TOOL_TASKS = ("What is the weather in Lisbon right now? Use get_weather.",
               "Find three recent articles about solid-state batteries with search_web.",
               "Read ./notes.txt with read_file and tell me what it says.",
               "Convert 250 EUR to JPY with convert_currency.",
               "What time is it in Tokyo? Use get_time.",
               "Look up the latest price of ACME with get_stock_price.",
               "Count the users table with query_database.",
               "Translate 'good morning' into Finnish with translate_text.")

_encoder = msgspec.json.Encoder()


def encode_body(body: Mapping[str, Any]) -> bytes:
    """The request body as JSON bytes (msgspec: a 1.7 MB prompt encodes in about a millisecond)."""
    return _encoder.encode(body)


def answer_of(verdict: Verdict) -> dict[str, Any] | None:
    """The first choice's assistant message, when the answer is whole; else None."""
    if verdict.ending not in WHOLE_ANSWER:
        return None
    choices = verdict.message.get("choices") or []
    if not choices or not isinstance(choices[0], dict):
        return None
    message = choices[0].get("message")
    return message if isinstance(message, dict) else None


def tool_result(call: Mapping[str, Any]) -> dict[str, Any]:
    """A plausible, deterministic result for one tool call, as the ``tool`` message that answers it."""
    fn = call.get("function") or {}
    name = str(fn.get("name") or "unknown")
    try:
        args = json.loads(fn.get("arguments") or "{}")
    except ValueError:
        args = {}
    result = {"tool": name, "ok": True, "arguments_seen": args if isinstance(args, dict) else {},
              "result": f"{name} finished; {len(str(args))} characters of arguments processed."}
    return {"role": "tool", "tool_call_id": str(call.get("id") or f"call_{name}"),
            "content": json.dumps(result)}


class Conversation(Protocol):
    """One worker's source of request bodies."""

    def next_body(self) -> dict[str, Any]:
        """The next request body (without ``model``: the arm sets it)."""
        ...

    def observe(self, verdict: Verdict) -> None:
        """The verdict of the request made from the last body."""
        ...


class Workload:
    """Makes conversations for one run's workload spec; holds only read-only shared data."""

    def __init__(self, spec: WorkloadSpec, *, seed: int = 0) -> None:
        self.spec = spec
        self.seed = seed
        self._filler: str | None = None
        self._user_body: dict[str, Any] | None = None
        if spec.body_file is not None:
            self._user_body = load_body_file(spec.body_file)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def pinned_connection(self) -> bool:
        """Each worker keeps one kept-alive connection for its whole conversation."""
        return self.spec.name == "reuse"

    def conversation(self, worker: int | str) -> Conversation:
        """A conversation for one worker; ``worker`` seeds its wording (runs are reproducible)."""
        rng = random.Random(f"{self.seed}:{self.spec.name}:{worker}")
        if self.spec.name == "reuse":
            return _ReuseConversation(self, rng)
        if self.spec.name == "tools":
            return _ToolsConversation(self, rng)
        return _SingleShot(self, rng)

    def finish(self, body: dict[str, Any], *, model: str | None) -> dict[str, Any]:
        """Apply the run-wide settings: model, streaming, usage, max_tokens, reasoning_effort."""
        spec = self.spec
        body["model"] = model or body.get("model") or DEFAULT_MODEL
        body["stream"] = True
        if spec.include_usage:
            opts = body.get("stream_options")
            body["stream_options"] = {**(opts if isinstance(opts, dict) else {}), "include_usage": True}
        if spec.max_tokens is not None:
            body["max_tokens"] = spec.max_tokens
        if spec.reasoning_effort is not None:
            body["reasoning_effort"] = spec.reasoning_effort
        return body

    def filler(self) -> str:
        """The shared body of the big prompt (built once, ``big_bytes`` characters of plain words)."""
        if self._filler is None:
            rng = random.Random(f"{self.seed}:filler")
            words = rng.choices(_WORDS, k=4096)
            block = " ".join(words) + ".\n"
            reps = self.spec.big_bytes // len(block) + 1
            self._filler = (block * reps)[: self.spec.big_bytes]
        return self._filler

    def single_body(self, rng: random.Random) -> dict[str, Any]:
        nonce = f"{rng.getrandbits(64):016x}"
        if self._user_body is not None:
            return copy.deepcopy(self._user_body)
        if self.spec.name == "big":
            text = (f"Request {nonce}. Summarise the following document in three sentences.\n\n"
                    + self.filler())
        else:
            text = f"Request {nonce}. Write a short note about {rng.choice(_TOPICS)}."
        return {"messages": [{"role": "system", "content": "You are a concise assistant."},
                             {"role": "user", "content": text}]}


def load_body_file(path: str) -> dict[str, Any]:
    """A user's own request body: a JSON object with ``messages``."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read body file {path}: {exc.strerror or exc}") from None
    try:
        body = json.loads(raw)
    except ValueError as exc:
        raise ConfigError(f"body file {path} is not JSON: {exc}") from None
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        raise ConfigError(f"body file {path} must be a JSON object with a 'messages' list")
    return body


class _SingleShot:
    """``small``, ``big`` and ``body``: every request stands alone."""

    def __init__(self, workload: Workload, rng: random.Random) -> None:
        self._workload = workload
        self._rng = rng

    def next_body(self) -> dict[str, Any]:
        return self._workload.single_body(self._rng)

    def observe(self, verdict: Verdict) -> None:
        return None


class _ReuseConversation:
    """A conversation that grows by one turn per whole answer, then starts over after ``max_turns``."""

    def __init__(self, workload: Workload, rng: random.Random) -> None:
        self._workload = workload
        self._rng = rng
        self._messages: list[dict[str, Any]] = []
        self.turns = 0
        self._restart()

    def _restart(self) -> None:
        topic = self._rng.choice(_TOPICS)
        nonce = f"{self._rng.getrandbits(64):016x}"
        self._messages = [
            {"role": "system", "content": "You are a patient tutor."},
            {"role": "user", "content": f"Conversation {nonce}. Teach me about {topic}."}]
        self.turns = 0

    def next_body(self) -> dict[str, Any]:
        return {"messages": [dict(m) for m in self._messages]}

    def observe(self, verdict: Verdict) -> None:
        answer = answer_of(verdict)
        if answer is None:
            return  # retry the same turn: a cut answer must not become history
        self.turns += 1
        if self.turns >= self._workload.spec.max_turns:
            self._restart()
            return
        self._messages.append({"role": "assistant", "content": answer.get("content") or ""})
        self._messages.append({"role": "user", "content": self._rng.choice(_FOLLOW_UPS)})


class _ToolsConversation:
    """Tools attached; a tool call is answered with a tool result and the conversation goes on."""

    def __init__(self, workload: Workload, rng: random.Random) -> None:
        self._workload = workload
        self._rng = rng
        self._messages: list[dict[str, Any]] = []
        self.turns = 0
        self._restart()

    def _restart(self) -> None:
        nonce = f"{self._rng.getrandbits(64):016x}"
        self._messages = [
            {"role": "system", "content": "You are an agent. Use the tools when they help."},
            {"role": "user", "content": f"Task {nonce}. {self._rng.choice(_TOOL_TASKS)}"}]
        self.turns = 0

    def next_body(self) -> dict[str, Any]:
        return {"messages": [dict(m) for m in self._messages], "tools": [dict(t) for t in TOOLS],
                "tool_choice": "auto"}

    def observe(self, verdict: Verdict) -> None:
        answer = answer_of(verdict)
        if answer is None:
            return
        self.turns += 1
        calls = answer.get("tool_calls") or []
        if self.turns >= self._workload.spec.max_turns or not isinstance(calls, list):
            self._restart()
            return
        if calls:
            self._messages.append({"role": "assistant", "content": answer.get("content"),
                                   "tool_calls": calls})
            self._messages.extend(tool_result(c) for c in calls if isinstance(c, dict))
        else:
            # A text answer closes the task; the next request starts the next task.
            self._restart()
