"""Run as a script (in its own process: it imports Locust, hence gevent's monkey-patching).

A raw gevent TCP server misbehaves in one way per URL path; ``sseguard.locust.stream_once`` is sent
at each over a real loopback socket with Locust's own HTTP client, and the verdicts are printed as
JSON: {"streams": {mode: [ending, ttft_ms, duration_ms] or ["RAISED", repr] if a peer failure
escaped}, "reasons": {sample body: [Locust error under strict, under no-done-ok, [class, repr]]}}.
"""

from __future__ import annotations

import json
import socket
import struct
from typing import Any

import gevent
from gevent.server import StreamServer
from geventhttpclient.client import HTTPClient

import sseguard.locust.user as sl
from sseguard.probe.config import make_arm

FIRST = (b'data: {"id":"x-1","object":"chat.completion.chunk","choices":[{"index":0,'
         b'"delta":{"content":"hi"},"finish_reason":null}]}\n\n')
REST = (b'data: {"id":"x-1","object":"chat.completion.chunk","choices":[{"index":0,'
        b'"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n')
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
END = b"0\r\n\r\n"


#: The client's stall timeout; a slow stream pauses for half of it, a stalled one for far longer, so
#: neither outcome depends on how a busy machine schedules the two processes.
STALL_S = 3.0
SLOW_S = STALL_S / 2
SILENT_S = 20.0


def chunk(data: bytes) -> bytes:
    return b"%x\r\n" % len(data) + data + b"\r\n"


def reset(sock: socket.socket) -> None:
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def handler(sock: socket.socket, _addr: Any) -> None:
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    mode = data.split(b" ")[1].decode().split("/")[2]
    if mode == "complete":
        sock.sendall(HEAD + chunk(FIRST) + chunk(REST) + END)
    elif mode == "slow":  # the first event must be seen while the rest is still on its way
        sock.sendall(HEAD + chunk(FIRST))
        gevent.sleep(SLOW_S)
        sock.sendall(chunk(REST) + END)
    elif mode == "close_delimited":
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
                     + FIRST + REST)
        sock.close()
        return
    elif mode == "clean_eof":  # a properly ended body that stops after content: truncated
        sock.sendall(HEAD + chunk(FIRST) + END)
    elif mode == "cut_mid_frame":
        sock.sendall(HEAD + chunk(FIRST + REST[:40]) + END)
    elif mode == "chunked_fin":
        sock.sendall(HEAD + chunk(FIRST))
        gevent.sleep(0.01)
        sock.close()
        return
    elif mode == "length_fin":
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: 5000\r\n\r\n"
                     + FIRST)
        gevent.sleep(0.01)
        sock.close()
        return
    elif mode == "rst":
        sock.sendall(HEAD + chunk(FIRST))
        gevent.sleep(0.01)
        reset(sock)
        return
    elif mode == "stall_body":
        sock.sendall(HEAD + chunk(FIRST))
        gevent.sleep(SILENT_S)
    elif mode == "stall_head":
        gevent.sleep(SILENT_S)
    elif mode == "http500":
        body = b'{"error":{"message":"boom"}}'
        sock.sendall(b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n" % len(body) + body)
    elif mode == "garbage":
        sock.sendall(HEAD + b"zz\r\nnot chunked\r\n")
    gevent.sleep(0.05)
    sock.close()


MODES = ("complete", "slow", "close_delimited", "clean_eof", "cut_mid_frame", "chunked_fin",
         "length_fin", "rst", "stall_body", "stall_head", "http500", "garbage", "refused")


def reasons() -> dict[str, Any]:
    """What Locust would show for sample bodies: (reason under strict, under no-done-ok, class)."""
    from pathlib import Path

    from sseguard.core.contract import StreamChecker
    from sseguard.core.policy import Policy

    bodies = Path(__file__).parents[2] / "examples" / "bodies"
    tools = json.loads((bodies.parent / "request_tools.json").read_text())
    out: dict[str, Any] = {}
    for name in ("complete", "markup_leak", "no_done", "cut_mid_frame", "tool_args_invalid_json"):
        checker = StreamChecker(tools)
        checker.feed((bodies / f"{name}.sse").read_bytes())
        verdict = checker.close()
        strict = sl.failure_reason(verdict, Policy.from_spec("strict"))
        lenient = sl.failure_reason(verdict, Policy.from_spec("no-done-ok", "missing_usage"))
        exc = None if strict is None else sl.FAILURES[verdict.ending](strict, None)
        out[name] = [strict, lenient, None if exc is None else [type(exc).__name__, repr(exc)]]
    return out


def main() -> None:
    server = StreamServer(("127.0.0.1", 0), handler)
    server.start()
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        closed_port = s.getsockname()[1]
    out: dict[str, list[Any]] = {}
    for mode in MODES:
        port = closed_port if mode == "refused" else server.server_port
        target = sl.Target.of(make_arm("t", f"http://127.0.0.1:{port}/v1/{mode}"))
        http = HTTPClient.from_url(target.url, network_timeout=STALL_S, connection_timeout=5.0,
                                   concurrency=1)
        try:
            ex = sl.stream_once(http, target, {"messages": []}, stall_timeout=STALL_S, timeout=60,
                                connections=sl.ConnectionTracker())
            timings = ex.watch.timings()
            out[mode] = [str(ex.verdict.ending), timings["ttft_ms"], timings["duration_ms"]]
        except Exception as exc:  # what the test exists to catch
            out[mode] = ["RAISED", repr(exc)]
        finally:
            http.close()
    server.stop()
    print(json.dumps({"streams": out, "reasons": reasons()}))


if __name__ == "__main__":
    main()
