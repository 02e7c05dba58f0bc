"""An ASGI middleware loaded into the real vLLM server (``--middleware support.real_switch.ParserSwitch``)
that lets the tests change the server's tool and reasoning parser between runs.

Why: vLLM takes one ``--tool-call-parser`` per server and a start costs 30–100 s on two cores, so
one server per parser (ours and vLLM's own, a dozen families) would not fit the suite's budget.
``POST /sseguard-test/parsers {"tool": NAME, "reasoning": NAME}`` composes the parser class exactly as
vLLM does at start-up for ``--enable-auto-tool-choice --tool-call-parser NAME --reasoning-parser
NAME`` (``ParserManager.get_parser`` with the server's own model, tokenizer and strict level) and puts
it where start-up put it: the renderer (which lets the parser adjust the request) and the chat
serving objects (which build one parser per request). Everything after that is vLLM's own path; the
names resolve through vLLM's registry, so ours still arrive through sseguard's entry point.

Two limits, both checked or documented by the tests: a switch is refused (409) while any request
is in flight, so one run never mixes parsers; and the engine core keeps the reasoning parser it
started with (the servers start with none, so structured outputs constrain from the first token).
"""

from __future__ import annotations

import json
from typing import Any

PATH = "/sseguard-test/parsers"

Scope = dict[str, Any]


class ParserSwitch:
    """The middleware: the switch route, and a count of requests in flight."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.in_flight = 0

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["path"] == PATH and scope["method"] == "POST":
            body = b""
            while True:
                message = await receive()
                body += message.get("body", b"")
                if not message.get("more_body"):
                    break
            status, answer = self._switch(scope["app"].state, json.loads(body or b"{}"))
            await send({"type": "http.response.start", "status": status,
                        "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": json.dumps(answer).encode()})
            return
        self.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight -= 1

    def _switch(self, state: Any, want: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if self.in_flight:
            return 409, {"error": f"{self.in_flight} request(s) in flight"}
        from vllm.parser import ParserManager

        renderer = state.online_renderer
        try:
            parser_cls = ParserManager.get_parser(
                tool_parser_name=want.get("tool"), reasoning_parser_name=want.get("reasoning"),
                enable_auto_tools=True, tool_strict_level=want.get("strict", "auto"),
                model_name=renderer.model_config.model, is_harmony=renderer.use_harmony,
                tokenizer=renderer.renderer.tokenizer)
        except Exception as exc:  # an unknown name: vLLM's own refusal, passed on
            return 400, {"error": f"{type(exc).__name__}: {exc}"}
        holders = [renderer, getattr(state, "online_derenderer", None),
                   getattr(state, "openai_serving_chat", None),
                   getattr(state, "openai_serving_chat_batch", None)]
        for holder in filter(None, holders):
            for attr in ("parser", "parser_cls"):
                if attr in vars(holder):
                    setattr(holder, attr, parser_cls)
            if "_include_reasoning_tokens_details" in vars(holder):
                holder._include_reasoning_tokens_details = bool(want.get("reasoning"))
        return 200, {"tool": want.get("tool"), "reasoning": want.get("reasoning"),
                     "class": getattr(parser_cls, "__name__", None)}
