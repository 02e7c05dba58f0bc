"""vLLM's own OpenAI server, in process, with only the engine's ``generate()`` replaced.

The app is what ``vllm serve`` builds: its argument parser (``make_arg_parser``, which loads the
general plugins, ours among them), ``validate_api_server_args``, ``EngineArgs.create_engine_config``,
the renderer from that config, ``build_app`` and ``init_app_state`` (router, serving classes,
renderer, the parser managers). The engine client below hands the serving code what a real engine
hands it: ``RequestOutput`` deltas (``output_kind=DELTA``) whose text is the next piece of a given
completion, with its token ids from the real tokenizer. Requests go through httpx's ASGI transport:
no socket is needed to exercise the serving code, and none is opened.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")  # no GPU here: device inference would fail

import httpx
from tokenizers import Tokenizer
from vllm.engine.arg_utils import AsyncEngineArgs
from vllm.entrypoints.common.cli_args import make_arg_parser, validate_api_server_args
from vllm.entrypoints.launchers.api_server.app_state import init_app_state
from vllm.entrypoints.launchers.app import build_app
from vllm.outputs import CompletionOutput, RequestOutput
from vllm.renderers import renderer_from_config
from vllm.utils.argparse_utils import FlexibleArgumentParser

from support.engines_model import token_pieces

#: the completion the next request generates, how it is cut into deltas (a size in characters, or
#: the length of each delta in turn, the rest in one), and its finish reason
Script = tuple[str, int | Sequence[int], str]


class ScriptedEngine:
    """An ``EngineClient`` whose ``generate()`` streams a scripted completion; the rest of vLLM runs
    as it would. ``seen`` keeps the sampling parameters of each request (what the parsers adjusted)."""

    def __init__(self, vllm_config: Any, renderer: Any) -> None:
        self.vllm_config = vllm_config
        self.model_config = vllm_config.model_config
        self.renderer = renderer
        self.input_processor = None
        self.script: Script = ("", 4, "stop")
        self.seen: list[Any] = []
        self._tokenizer = renderer.tokenizer
        #: cut deltas at token boundaries, as a real engine does (a special-token marker is never
        #: split); otherwise at every ``size`` characters, which is what tests of chunking want
        self.aligned = False
        self._raw = Tokenizer.from_file(str(Path(vllm_config.model_config.tokenizer) / "tokenizer.json"))

    def token_pieces(self, text: str, size: int) -> list[str]:
        """``text`` in deltas of whole tokens, each at least ``size`` characters where it can be."""
        return token_pieces(self._raw, text, size)

    is_running = True
    is_stopped = False
    errored = False
    dead_error = RuntimeError("no engine")
    should_keep_api_server_alive = False

    def check_admission(self, n: int = 1, request_id: str | None = None) -> None:
        return None

    async def get_supported_tasks(self) -> tuple[str, ...]:
        return ("generate",)

    async def is_tracing_enabled(self) -> bool:
        return False

    async def do_log_stats(self) -> None:
        return None

    async def abort(self, request_id: Any) -> None:
        return None

    async def generate(self, prompt: Any, sampling_params: Any, request_id: str,
                       **kwargs: Any) -> AsyncIterator[Any]:
        self.seen.append(sampling_params)
        text, size, finish = self.script
        prompt_ids = list(prompt.get("prompt_token_ids", []) if isinstance(prompt, dict) else
                          getattr(prompt, "prompt_token_ids", None) or [])
        if not isinstance(size, int):
            pieces = cut(text, size)
        elif self.aligned:
            pieces = self.token_pieces(text, size)
        else:
            pieces = [text[i:i + size] for i in range(0, len(text), size)]
        pieces = pieces or [""]
        kind = getattr(getattr(sampling_params, "output_kind", None), "name", "DELTA")
        if kind == "FINAL_ONLY":  # a non-streaming request: one output with the whole text
            pieces = [text]
        done = ""
        for n, piece in enumerate(pieces):
            last = n == len(pieces) - 1
            done += piece
            if kind == "CUMULATIVE":
                piece = done
            ids = self._tokenizer.encode(piece, add_special_tokens=False) if piece else []
            out = CompletionOutput(index=0, text=piece, token_ids=ids, cumulative_logprob=None,
                                   logprobs=None, finish_reason=finish if last else None)
            yield RequestOutput(request_id=request_id, prompt=None, prompt_token_ids=prompt_ids,
                                prompt_logprobs=None, outputs=[out], finished=last)


def cut(text: str, lengths: Sequence[int]) -> list[str]:
    """``text`` in deltas of the given lengths (empty ones skipped), the rest as the last."""
    pieces: list[str] = []
    at = 0
    for n in lengths:
        if n > 0 and at < len(text):
            pieces.append(text[at:at + n])
            at += n
    if at < len(text):
        pieces.append(text[at:])
    return pieces


def server_args(model_dir: Path, tool_parser: str | None, reasoning_parser: str | None = None,
                extra: tuple[str, ...] = ()) -> Any:
    """The parsed arguments of ``vllm serve MODEL_DIR --enable-auto-tool-choice …``, validated the
    way ``vllm serve`` validates them before binding its port."""
    argv = [str(model_dir), "--served-model-name", "m", "--max-model-len", str(1 << 21), *extra]
    if tool_parser is not None:
        argv += ["--enable-auto-tool-choice", "--tool-call-parser", tool_parser]
    if reasoning_parser is not None:
        argv += ["--reasoning-parser", reasoning_parser]
    parser = make_arg_parser(FlexibleArgumentParser())
    args = parser.parse_args(["--model", *argv[:1], *argv[1:]])
    validate_api_server_args(args)
    return args


class Server:
    """vLLM's app for one parser configuration, and a client for it."""

    def __init__(self, model_dir: Path, tool_parser: str | None, reasoning_parser: str | None = None,
                 extra: tuple[str, ...] = ()) -> None:
        self.args = server_args(model_dir, tool_parser, reasoning_parser, extra)
        engine_args = AsyncEngineArgs.from_cli_args(self.args)
        vllm_config = engine_args.create_engine_config()
        self.engine = ScriptedEngine(vllm_config, renderer_from_config(vllm_config))
        self.app = build_app(self.args, ("generate",), vllm_config.model_config)

    async def start(self) -> None:
        await init_app_state(self.engine, self.app.state, self.args, ("generate",))

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.ASGITransport(app=self.app), base_url="http://vllm",
                                 timeout=None)


async def chat(server: Server, script: Script, tools: list[Any] | None, *, stream: bool = True,
               extra: dict[str, Any] | None = None,
               on_chunk: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """One chat request; returns what a client assembles: content, reasoning, calls (id, name,
    arguments by index), finish reason, and the raw chunks."""
    server.engine.script = script
    body: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}],
                            "stream": stream, **(extra or {})}
    if tools is not None:
        body["tools"] = tools
    async with server.client() as client:
        if not stream:
            resp = await client.post("/v1/chat/completions", json=body)
            assert resp.status_code == 200, resp.text
            choice = resp.json()["choices"][0]
            msg = choice["message"]
            return {"content": msg.get("content") or "", "reasoning": msg.get("reasoning") or "",
                    "calls": [[c["id"], c["function"]["name"], c["function"]["arguments"]]
                              for c in msg.get("tool_calls") or []],
                    "finish": choice["finish_reason"], "chunks": []}
        chunks: list[dict[str, Any]] = []
        async with client.stream("POST", "/v1/chat/completions", json=body) as resp:
            assert resp.status_code == 200, await resp.aread()
            # lines end at "\n" only (httpx's line iterator also splits at U+2028 and the like,
            # which vLLM writes raw inside its JSON)
            held = ""
            async for text in resp.aiter_text():
                held += text
                *lines, held = held.split("\n")
                for line in lines:
                    if not line.startswith("data: ") or line == "data: [DONE]":
                        continue
                    chunk = json.loads(line[len("data: "):])
                    chunks.append(chunk)
                    if on_chunk is not None:
                        on_chunk(chunk)
    return assemble(chunks)


def assemble(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """Fold chat.completion.chunk deltas as a client does (content, reasoning, calls by index)."""
    content: list[str] = []
    reasoning: list[str] = []
    #: (id, name, argument fragments) by index; the fragments are joined once at the end (``+=`` on
    #: a string held in a list copies it every time: quadratic in a long streamed call)
    calls: dict[int, list[Any]] = {}
    finish = None
    for chunk in chunks:
        for choice in chunk.get("choices", []):
            delta = choice.get("delta") or {}
            content.append(delta.get("content") or "")
            reasoning.append(delta.get("reasoning") or delta.get("reasoning_content") or "")
            for tc in delta.get("tool_calls") or []:
                slot = calls.setdefault(tc["index"], [None, None, []])
                fn = tc.get("function") or {}
                if tc.get("id"):
                    slot[0] = tc["id"]
                if fn.get("name"):
                    slot[1] = fn["name"]
                slot[2].append(fn.get("arguments") or "")
            finish = choice.get("finish_reason") or finish
    return {"content": "".join(content), "reasoning": "".join(reasoning),
            "calls": [[c[0], c[1], "".join(c[2])] for c in (calls[i] for i in sorted(calls))],
            "finish": finish, "chunks": chunks}
