"""Request bodies for each workload, and the conversations that carry multi-turn ones forward.

Pure Python with no I/O library: the asyncio runner and a Locust user build bodies the same way.
A ``Conversation`` belongs to one worker; it hands out the next body and is shown each verdict, so a
multi-turn workload only grows after a whole answer (a cut answer would poison the next turn).

- ``small``: a short prompt; ``big``: a large prompt made unique at its *start*, so no prefix cache can
  serve it (prefix caches match from the first token); ``reuse``: one growing conversation per worker
  on one kept-alive connection; ``tools``: a dozen tools attached, tool calls answered with a tool
  result; ``body``: the user's own request file (in the arm's own format); ``consistency``: fixed
  prompts with deterministic sampling, each answer compared with its reference (``consistency``).

Every workload is written once, as neutral turns, and rendered into each protocol's request by
``formats`` (chat completions, responses, messages): tools in each API's tool format, tool results
answered each API's way, so ``reuse`` and ``tools`` hold a real multi-turn conversation in each.
"""

from __future__ import annotations

import copy
import json
import random
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any, Protocol

import msgspec

from sseguard.core.verdict import Api, Ending, Verdict
from sseguard.probe import consistency
from sseguard.probe.config import Arm, WorkloadSpec
from sseguard.probe.formats import (
    DEFAULT_MODEL,
    AssistantAnswer,
    BodySettings,
    Call,
    Format,
    Tool,
    Turn,
    format_for,
    load_body_file,
)

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
TOOL_SPECS: tuple[Tool, ...] = tuple(
    Tool(name, desc, {"type": "object", "properties": props, "required": list(required)})
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
#: The same tools in the Chat Completions format.
TOOLS: tuple[dict[str, Any], ...] = tuple(
    {"type": "function", "function": {"name": t.name, "description": t.description,
                                      "parameters": dict(t.parameters)}} for t in TOOL_SPECS)
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


def tool_result(call: Call) -> str:
    """A plausible, deterministic result for one tool call (the text that answers it)."""
    try:
        args = json.loads(call.arguments or "{}")
    except ValueError:
        args = {}
    result = {"tool": call.name, "ok": True, "arguments_seen": args if isinstance(args, dict) else {},
              "result": f"{call.name} finished; {len(str(args))} characters of arguments processed."}
    return json.dumps(result)


def whole_answer(fmt: Format, verdict: Verdict) -> AssistantAnswer | None:
    """The assistant's answer when it is whole (a cut answer must not become history); else None."""
    if verdict.ending not in WHOLE_ANSWER:
        return None
    return fmt.answer_of(verdict)


class Conversation(Protocol):
    """One worker's source of request bodies."""

    def next_body(self) -> dict[str, Any]:
        """The next request body (without ``model``: the arm sets it)."""
        ...

    def observe(self, verdict: Verdict) -> None:
        """The verdict of the request made from the last body."""
        ...


class Workload:
    """Makes conversations for one run's workload spec; holds only read-only shared data.

    Conversations are kept as neutral turns and rendered into the request of the arm's protocol
    (``api``), so the same workload means the same conversation on chat, responses and messages.
    """

    def __init__(self, spec: WorkloadSpec, *, seed: int = 0) -> None:
        self.spec = spec
        self.seed = seed
        self._filler: str | None = None
        self._user_body: dict[str, Any] | None = None
        self._settings = BodySettings(max_tokens=spec.max_tokens, reasoning_effort=spec.reasoning_effort,
                                  include_usage=spec.include_usage,
                                  seed=consistency.SEED if spec.name == "consistency" else None)
        if spec.body_file is not None:
            self._user_body = load_body_file(spec.body_file)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def pinned_connection(self) -> bool:
        """Each worker keeps one kept-alive connection for its whole conversation."""
        return self.spec.name == "reuse"

    def conversation(self, worker: int | str, api: str | Api = Api.CHAT) -> Conversation:
        """A conversation for one worker in protocol ``api``; ``worker`` seeds its wording (runs are
        reproducible, and the same worker key gives the same conversation in every protocol)."""
        fmt = format_for(api)
        rng = random.Random(f"{self.seed}:{self.spec.name}:{worker}")
        if self.spec.name == "reuse":
            return _ReuseConversation(self, rng, fmt)
        if self.spec.name == "tools":
            return _ToolsConversation(self, rng, fmt)
        if self.spec.name == "consistency":
            return FixedPrompts(fmt, rng.randrange(consistency.PROMPTS))
        return _SingleShot(self, rng, fmt)

    @property
    def compares(self) -> bool:
        """Each answer is compared with its prompt's reference (``probe.consistency``)."""
        return self.spec.name == "consistency"

    def finish(self, body: dict[str, Any], *, model: str | None,
               api: str | Api = Api.CHAT) -> dict[str, Any]:
        """Apply the run-wide settings in the protocol's own words: model, streaming, usage,
        ``max_tokens``/``max_output_tokens``, reasoning effort or a thinking budget."""
        chosen = model or body.get("model") or DEFAULT_MODEL
        return format_for(api).finish(body, model=str(chosen), settings=self._settings)

    def filler(self) -> str:
        """The shared body of the big prompt (built once, ``big_bytes`` characters of plain words)."""
        if self._filler is None:
            rng = random.Random(f"{self.seed}:filler")
            words = rng.choices(_WORDS, k=4096)
            block = " ".join(words) + ".\n"
            reps = self.spec.big_bytes // len(block) + 1
            self._filler = (block * reps)[: self.spec.big_bytes]
        return self._filler

    def single_body(self, rng: random.Random, fmt: Format | None = None) -> dict[str, Any]:
        nonce = f"{rng.getrandbits(64):016x}"
        if self._user_body is not None:
            return copy.deepcopy(self._user_body)
        if self.spec.name == "big":
            text = (f"Request {nonce}. Summarise the following document in three sentences.\n\n"
                    + self.filler())
        else:
            text = f"Request {nonce}. Write a short note about {rng.choice(_TOPICS)}."
        return (fmt or format_for(Api.CHAT)).render("You are a concise assistant.",
                                                    [Turn("user", text)], ())


def arm_workloads(workload: Workload, arms: Iterable[Arm]) -> dict[str, Workload]:
    """The workload of each arm: the run's, or a ``body`` workload for an arm with its own body file
    (arms of several protocols side by side each need a body in their own format)."""
    out: dict[str, Workload] = {}
    for arm in arms:
        if arm.body_file is None:
            out[arm.name] = workload
        else:
            spec = replace(workload.spec, name="body", body_file=arm.body_file)
            out[arm.name] = Workload(spec, seed=workload.seed)
    return out


class FixedPrompts:
    """``consistency``: the fixed prompts in turn from ``start``; ``prompt`` is the last one sent."""

    def __init__(self, fmt: Format, start: int = 0) -> None:
        self._fmt = fmt
        self._next = start
        self.prompt = start

    def next_body(self) -> dict[str, Any]:
        self.prompt = self._next % consistency.PROMPTS
        self._next += 1
        return consistency.prompt_body(self._fmt, self.prompt)

    def observe(self, verdict: Verdict) -> None:
        return None


class _SingleShot:
    """``small``, ``big`` and ``body``: every request stands alone."""

    def __init__(self, workload: Workload, rng: random.Random, fmt: Format) -> None:
        self._workload = workload
        self._rng = rng
        self._fmt = fmt

    def next_body(self) -> dict[str, Any]:
        return self._workload.single_body(self._rng, self._fmt)

    def observe(self, verdict: Verdict) -> None:
        return None


class _GrowingConversation(ABC):
    """A conversation that grows by the turns each whole answer brings, and starts over after
    ``max_turns`` answers or when an answer ends it: ``reuse`` and ``tools`` differ only in their
    first turn, what follows an answer and what ends one (a cut answer is never history: the same
    turn is asked again)."""

    SYSTEM = ""
    TOOLS: tuple[Tool, ...] = ()

    def __init__(self, workload: Workload, rng: random.Random, fmt: Format) -> None:
        self._workload = workload
        self._rng = rng
        self._fmt = fmt
        self._turns: list[Turn] = []
        self.turns = 0
        self._restart()

    def _restart(self) -> None:
        self._turns = [self._first_turn()]
        self.turns = 0

    @abstractmethod
    def _first_turn(self) -> Turn:
        """The user's opening turn (fresh words, so no two conversations share a prefix)."""

    def _ends(self, answer: AssistantAnswer) -> bool:
        """Whether this whole answer closes the conversation before ``max_turns``."""
        return False

    @abstractmethod
    def _after(self, answer: AssistantAnswer) -> tuple[Turn, ...]:
        """The turns a whole answer adds: the answer itself, then what answers it."""

    def next_body(self) -> dict[str, Any]:
        return self._fmt.render(self.SYSTEM, self._turns, self.TOOLS)

    def observe(self, verdict: Verdict) -> None:
        answer = whole_answer(self._fmt, verdict)
        if answer is None:
            return  # retry the same turn: a cut answer must not become history
        self.turns += 1
        if self.turns >= self._workload.spec.max_turns or self._ends(answer):
            self._restart()
            return
        self._turns.extend(self._after(answer))


class _ReuseConversation(_GrowingConversation):
    """A conversation that grows by one turn per whole answer, then starts over after ``max_turns``."""

    SYSTEM = "You are a patient tutor."

    def _first_turn(self) -> Turn:
        topic = self._rng.choice(_TOPICS)
        nonce = f"{self._rng.getrandbits(64):016x}"
        return Turn("user", f"Conversation {nonce}. Teach me about {topic}.")

    def _after(self, answer: AssistantAnswer) -> tuple[Turn, ...]:
        return Turn("assistant", answer.text), Turn("user", self._rng.choice(_FOLLOW_UPS))


class _ToolsConversation(_GrowingConversation):
    """Tools attached; a tool call is answered with a tool result and the conversation goes on."""

    SYSTEM = "You are an agent. Use the tools when they help."
    TOOLS = TOOL_SPECS

    def _first_turn(self) -> Turn:
        nonce = f"{self._rng.getrandbits(64):016x}"
        return Turn("user", f"Task {nonce}. {self._rng.choice(_TOOL_TASKS)}")

    def _ends(self, answer: AssistantAnswer) -> bool:
        return not answer.calls  # a text answer closes the task; the next request starts the next

    def _after(self, answer: AssistantAnswer) -> tuple[Turn, ...]:
        return (Turn("assistant", answer.text or None, answer.calls),
                Turn("tool", results=tuple((c, tool_result(c)) for c in answer.calls)))
