"""A loopback SSE server for the client tests: serves named bodies, in frames or in small pieces.

``{base}/{mode}/{name}/v1/chat/completions`` answers with the body ``name`` (a file of
``examples/bodies`` or one of ``EXTRA``), written frame by frame (``mode`` = ``frames``), in 7-byte
pieces (``bytes``) or gzip-compressed (``gzip``). ``…/v1/responses`` and ``…/v1/messages`` answer with
``support.proxy_bodies``' stream of that protocol ending as ``name`` says; ``…/v1/events`` with the chat
body. Two names behave instead of being bodies: ``stall`` sends two frames and then nothing for a
long time; ``reset`` sends two frames and resets the connection.
The server runs on its own event loop in a thread, so the sync SDK can call it too.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import threading
from collections.abc import Iterator
from pathlib import Path

from aiohttp import web

from support.proxy_bodies import messages_body, responses_body
from support.streams import DONE, chunk, frame, text_stream

BODIES = Path(__file__).parents[2] / "examples" / "bodies"

_tool_call_start = chunk({"role": "assistant", "tool_calls": [
    {"index": 0, "id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": ""}}]})

EXTRA: dict[str, bytes] = {
    # Tool-call arguments cut off: the stream stops inside the JSON, with no finish and no [DONE].
    "tool_args_cut": _tool_call_start + chunk({"tool_calls": [
        {"index": 0, "function": {"arguments": '{"location": "Hang'}}]}),
    # A call to a function the request never offered (see examples/request_tools.json).
    "undefined_tool": chunk({"role": "assistant", "tool_calls": [
        {"index": 0, "id": "call_1", "type": "function",
         "function": {"name": "delete_everything", "arguments": "{}"}}]})
    + chunk({}, "tool_calls") + DONE,
    "healthy_long": text_stream([f" w{i}" for i in range(300)], usage=True),
    "error_after_done_sentinel": text_stream(["a"]) + frame({"error": {"message": "late"}}),
}
STALL_S = 20.0


#: The words of every Responses and Messages body the server sends.
WORDS = ["The ", "weather ", "is ", "fine."]


def body(name: str, api: str = "chat") -> bytes:
    if api == "responses":
        return responses_body(WORDS, name)
    if api == "messages":
        return messages_body(WORDS, name)
    if name in EXTRA:
        return EXTRA[name]
    return (BODIES / f"{name}.sse").read_bytes()


def _frames(data: bytes) -> list[bytes]:
    parts = data.split(b"\n\n")
    out = [p + b"\n\n" for p in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


async def _serve(request: web.Request) -> web.StreamResponse:
    mode, name = request.match_info["mode"], request.match_info["name"]
    await request.read()
    if name == "http_error":
        return web.json_response({"error": {"message": "overloaded", "type": "server_error"}},
                                 status=503)
    if name == "not_a_stream":
        return web.json_response({"id": "x", "object": "chat.completion", "choices": []})
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8",
                                       "Cache-Control": "no-cache"})
    api = request.path.rsplit("/", 1)[-1]
    data = body("complete" if name in ("stall", "reset") else name,
                api if api in ("responses", "messages") else "chat")
    if mode == "gzip":
        resp.headers["Content-Encoding"] = "gzip"
        await resp.prepare(request)
        packed = gzip.compress(data)
        for i in range(0, len(packed), 64):
            await resp.write(packed[i:i + 64])
        await resp.write_eof()
        return resp
    await resp.prepare(request)
    if name in ("stall", "reset"):
        for piece in _frames(data)[:2]:
            await resp.write(piece)
        if name == "reset":
            assert request.transport is not None
            await asyncio.sleep(0.05)
            request.transport.abort()
            return resp
        await asyncio.sleep(STALL_S)  # cancelled as soon as the client gives up
        return resp
    pieces = _frames(data) if mode == "frames" else [data[i:i + 7] for i in range(0, len(data), 7)]
    for piece in pieces:
        await resp.write(piece)
    await resp.write_eof()
    return resp


def make_app() -> web.Application:
    app = web.Application()
    app.router.add_post("/{mode}/{name}/v1/chat/completions", _serve)
    app.router.add_post("/{mode}/{name}/v1/responses", _serve)
    app.router.add_post("/{mode}/{name}/v1/messages", _serve)
    app.router.add_post("/{mode}/{name}/v1/events", _serve)  # an event stream of no known protocol
    return app


@contextlib.contextmanager
def sse_server() -> Iterator[str]:
    """Run the server in a thread; yields its base URL (``http://127.0.0.1:PORT``)."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    box: dict[str, object] = {}

    async def start() -> web.AppRunner:
        runner = web.AppRunner(make_app(), shutdown_timeout=1.0)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert isinstance(server, asyncio.base_events.Server)
        box["port"] = server.sockets[0].getsockname()[1]
        return runner

    def target() -> None:
        asyncio.set_event_loop(loop)
        box["runner"] = loop.run_until_complete(start())
        ready.set()
        loop.run_forever()

    thread = threading.Thread(target=target, name="sse-test-server", daemon=True)
    thread.start()
    assert ready.wait(10), "the test SSE server did not start"
    try:
        yield f"http://127.0.0.1:{box['port']}"
    finally:
        runner = box["runner"]
        assert isinstance(runner, web.AppRunner)

        async def stop() -> None:
            await runner.cleanup()
            # Handlers still sleeping in a stall are cancelled here, not destroyed with the loop.
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
