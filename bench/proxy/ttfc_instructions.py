"""The proxy's own work on the way to a stream's first chunk, in instructions: stable on a busy machine.

``trace_proxy_ttfc.py`` times the proxy's steps before the first chunk (~0.3 ms at p50), but on a
shared machine wall time swings more than the cuts being judged. This counts instructions instead:
the server (``sseguard proxy`` as ``serve_proxy`` runs it, or the bare aiohttp relay of
``docs/design/http.md``) runs under ``valgrind --tool=callgrind`` with collection off, and a callgrind client
request (a few-line C helper compiled here, loaded with ctypes) turns collection on when the handler starts
and off when the first body write has returned. Requests go one at a time, so each collected span is one
request's path: the handler, reading and decoding the body, building what the stream needs, sending
the upstream request, reading its answer and first event, the client's headers and first write (the
event loop's own work in between included; waiting costs no instructions). The HTTP parsing before
the handler is aiohttp's and the same for both. No store (``--store`` none): with requests one at a
time the record is never on that path. ``--span pre`` stops at the upstream request instead
(``ClientSession.post`` called): the handler's own work before anything goes out.

Run: .venv/bin/python -m bench.proxy.ttfc_instructions [--apis chat,responses,messages,gemini] [--requests 20]
     [--span all|pre] [--proxy-only] [--keep DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import aiohttp

from bench.harness import build_callgrind_helper, callgrind_control, dumped_instructions, machine, server
from bench.proxy import bench_proxy as bp  # the bench's requests and bare relay

HELPER = r"""
#include <valgrind/callgrind.h>
void cg_toggle(void) { CALLGRIND_TOGGLE_COLLECT; }
"""
#: Only requests carrying this header are counted (the warm-up requests are not).
COUNT = "x-callgrind-count"
#: The upstream's silence before its first chunk and between chunks: long against valgrind's pace,
#: so the response headers and the first chunk always arrive in reads of their own and the first
#: chunk alone (as from a real model's prefill); what one read holds does not vary between runs.
GAP_MS = 200


def serve(kind: str, upstream: str, lib: str, span: str) -> None:
    """The server, its counted requests' spans collected (``kind``: proxy or bare)."""
    from aiohttp import web

    toggle = ctypes.CDLL(lib).cg_toggle
    collecting: dict[int, bool] = {}  # id(request) → collection is on for it
    posting: list[web.BaseRequest] = []  # span pre: the request whose upstream request ends it

    def start(request: web.BaseRequest) -> None:
        if COUNT in request.headers and not collecting:
            collecting[id(request)] = True
            toggle()
            if span == "pre":
                posting.append(request)

    def stop(request: web.BaseRequest | None) -> None:
        if request is not None and collecting.pop(id(request), False):
            toggle()

    add_route = web.UrlDispatcher.add_route

    def counted_route(self: web.UrlDispatcher, method: str, path: str, handler: Any,
                      **kw: Any) -> Any:
        async def counted(request: web.Request) -> web.StreamResponse:
            start(request)
            try:
                resp: web.StreamResponse = await handler(request)
                return resp
            finally:
                stop(request)  # a request that never wrote a body byte (an error answer)

        return add_route(self, method, path, counted, **kw)

    web.UrlDispatcher.add_route = counted_route  # type: ignore[method-assign]

    if span == "all":
        # The first write to the response's body writer (``prepare``'s; ``StreamResponse.write``
        # wraps it, the proxy's relay writes to it directly). The upstream request's body goes
        # through the same class but is never prepared.
        from aiohttp.http_writer import StreamWriter

        prepare = web.StreamResponse.prepare
        write = StreamWriter.write
        writers: dict[int, web.BaseRequest] = {}

        async def prepared(self: web.StreamResponse, request: web.BaseRequest) -> Any:
            writer = await prepare(self, request)
            writers[id(writer)] = request
            return writer

        async def first_write(self: StreamWriter, chunk: Any, **kw: Any) -> None:
            await write(self, chunk, **kw)
            stop(writers.pop(id(self), None))

        web.StreamResponse.prepare = prepared  # type: ignore[method-assign]
        StreamWriter.write = first_write  # type: ignore[method-assign]
    else:
        post = aiohttp.ClientSession.post

        def posted(self: aiohttp.ClientSession, url: Any, **kw: Any) -> Any:
            if posting:
                stop(posting.pop())
            return post(self, url, **kw)

        aiohttp.ClientSession.post = posted  # type: ignore[method-assign]

    import uvloop

    if kind == "bare":
        uvloop.run(bp.bare_relay(upstream))
        return
    from sseguard._serve import map_large_blocks, settle_gc
    from sseguard.proxy import ProxyConfig
    from sseguard.proxy.driver.app import serve_proxy

    map_large_blocks()
    settle_gc()
    config = ProxyConfig.from_options(upstream=upstream, listen="127.0.0.1:0")
    uvloop.run(serve_proxy(config, lambda p: print(f"proxy listening on {p.url}", flush=True)))


async def ask(url: str, api: str, n: int, *, counted: bool) -> None:
    path, body = bp.REQUESTS[api]
    headers = {**bp.HEADERS, **({COUNT: "1"} if counted else {})}
    timeout = aiohttp.ClientTimeout(total=600)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        for _ in range(n):
            async with session.post(f"{url}/{path}", data=body, headers=headers) as resp:
                async for _chunk in resp.content.iter_any():
                    pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--apis", default="chat,responses,messages,gemini")
    parser.add_argument("--requests", type=int, default=20, help="Counted requests per protocol.")
    parser.add_argument("--span", choices=("all", "pre"), default="all",
                        help="all: handler → first write; pre: handler → upstream request.")
    parser.add_argument("--proxy-only", action="store_true", help="Skip the bare relay.")
    parser.add_argument("--keep", metavar="DIR", help="Keep the callgrind dumps in DIR "
                        "(read them with callgrind_annotate).")
    parser.add_argument("--serve", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(*args.serve)
        return
    print(machine(), flush=True)
    apis = args.apis.split(",")
    with tempfile.TemporaryDirectory() as tmp, server(
            ["chaos", "--listen", "127.0.0.1:0", "--json", "--tokens", "2", "--ttft-ms",
             str(GAP_MS), "--inter-token-ms", str(GAP_MS)], None) as (_, chaos_line):
        out_dir = Path(args.keep or tmp)
        out_dir.mkdir(parents=True, exist_ok=True)
        lib = build_callgrind_helper(out_dir, HELPER)
        upstream = json.loads(chaos_line)["url"]
        valgrind = ["valgrind", "--tool=callgrind", "--collect-atstart=no",
                    f"--callgrind-out-file={out_dir}/cg.%p"]
        kinds = ["proxy"] if args.proxy_only else ["bare", "proxy"]
        results: dict[str, dict[str, float]] = {}
        for kind in kinds:
            command = [*valgrind, sys.executable, "-m", "bench.proxy.ttfc_instructions", "--serve", kind,
                       upstream, str(lib), args.span]
            with server(command, None, raw=True) as (proc, line):
                url = line.split()[-1]
                for api in apis:
                    asyncio.run(ask(url, api, 10, counted=False))  # first-use paths, imports, quickening
                    before = set(out_dir.glob(f"cg.{proc.pid}.*"))
                    callgrind_control(proc.pid, "-z")
                    asyncio.run(ask(url, api, args.requests, counted=True))
                    callgrind_control(proc.pid, "-d")
                    ir = dumped_instructions(out_dir, proc.pid, before) / args.requests
                    results.setdefault(api, {})[kind] = ir
                    print(f"  {api:10} {kind:6} {ir:12,.0f} instructions per request "
                          f"(handler → {'first write' if args.span == 'all' else 'upstream request'})",
                          flush=True)
        print(f"\n| protocol | bare relay | sseguard proxy | proxy − bare | (span {args.span}) |")
        print("|---|---|---|---|---|")
        for api in apis:
            bare, ours = results[api].get("bare", float("nan")), results[api]["proxy"]
            print(f"| {api} | {bare:,.0f} | {ours:,.0f} | {ours - bare:+,.0f} | |")


if __name__ == "__main__":
    main()
