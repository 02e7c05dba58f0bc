"""How many of sseguard's files and functions one proxied streamed request passes through, and the
proxy's largest module and function: one tree or several, side by side (issue 46, before and after).

Not speed: the count of distinct ``src/sseguard`` files and functions (``co_qualname``) that Python's
profiler sees called while one chat-completions stream goes client → ``sseguard proxy`` (the
default flags: ``--retry 2``, the guard policy, a SQLite store in a temporary folder) → a bare aiohttp
upstream in the same process and back, after one warm-up stream (imports and first-use paths are not
the request's). The upstream serves ``examples/bodies/complete.sse`` frame by frame. Each tree runs in
a child process of its own with that tree's ``src`` first on ``PYTHONPATH``.

Run: python -m bench.proxy.request_path [--tree BEFORE_TREE] [--tree .] [--list]
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent.parent
BODY = ROOT / "examples" / "bodies" / "complete.sse"
REQUEST = json.dumps({"model": "deepseek-v4", "stream": True,
                      "messages": [{"role": "user", "content": "What colour is the sky?"}]}).encode()


async def _measure() -> dict[str, Any]:
    """In the child: one warm-up stream, then one profiled stream; what the profiler saw."""
    import aiohttp
    from aiohttp import web

    import sseguard
    from sseguard.proxy import ProxyConfig, run_proxy

    package = str(Path(sseguard.__file__).resolve().parent) + os.sep
    frames = [f + b"\n\n" for f in BODY.read_bytes().split(b"\n\n") if f.strip()]

    async def upstream(request: web.Request) -> web.StreamResponse:
        await request.read()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for frame in frames:
            await resp.write(frame)
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_post("/v1/chat/completions", upstream)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    seen: set[tuple[str, str]] = set()

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event == "call":
            code = frame.f_code
            if code.co_filename.startswith(package):
                seen.add((code.co_filename[len(package):], code.co_qualname))

    with tempfile.TemporaryDirectory() as tmp:
        config = ProxyConfig.from_options(upstream=f"http://127.0.0.1:{port}/v1",
                                          listen="127.0.0.1:0", store=f"{tmp}/records.db")
        async with run_proxy(config) as proxy, aiohttp.ClientSession() as session:
            for profiled in (False, True):
                if profiled:
                    sys.setprofile(profile)
                async with session.post(f"{proxy.url}/chat/completions", data=REQUEST,
                                        headers={"Content-Type": "application/json"}) as resp:
                    body = await resp.read()
                await asyncio.sleep(0.5)  # the handler's last steps after the body's end (record)
                sys.setprofile(None)
                assert resp.status == 200 and body.endswith(b"data: [DONE]\n\n"), body[-200:]
    await runner.cleanup()
    return {"files": sorted({f for f, _ in seen}), "functions": sorted(f"{f}:{q}" for f, q in seen)}


def _sizes(tree: Path) -> dict[str, Any]:
    """The proxy's largest module (lines) and function (lines, decorators excluded)."""
    proxy = tree / "src" / "sseguard" / "proxy"
    modules = {str(p.relative_to(proxy)): len(p.read_text(encoding="utf-8").splitlines())
               for p in proxy.rglob("*.py")}
    functions: dict[str, int] = {}
    for path in proxy.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                assert node.end_lineno is not None
                functions[f"{path.relative_to(proxy)}:{node.name}"] = node.end_lineno - node.lineno + 1
    module = max(modules, key=lambda m: modules[m])
    function = max(functions, key=lambda f: functions[f])
    return {"proxy_files": len(modules), "largest_module": (module, modules[module]),
            "largest_function": (function, functions[function])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", action="append", help="A source tree (default: this one).")
    parser.add_argument("--list", action="store_true", help="Print every function seen.")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(_measure())))
        return
    print("| tree | src files (proxy/) | functions (proxy/) | proxy files | largest proxy module "
          "| largest proxy function |")
    print("|---|---|---|---|---|---|")
    listed: dict[str, list[str]] = {}
    for tree in [Path(t).resolve() for t in (args.tree or ["."])]:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree / "src"), str(ROOT)])}
        out = subprocess.run([sys.executable, "-W", "ignore", "-m", "bench.proxy.request_path",
                              "--child"], env=env, capture_output=True, text=True, check=True,
                             timeout=300)
        seen = json.loads(out.stdout.strip().splitlines()[-1])
        sizes = _sizes(tree)
        module, function = sizes["largest_module"], sizes["largest_function"]
        in_proxy = [f for f in seen["functions"] if f.startswith("proxy/")]
        proxy_files = {f.partition(":")[0] for f in in_proxy}
        print(f"| {tree} | {len(seen['files'])} ({len(proxy_files)}) | {len(seen['functions'])} "
              f"({len(in_proxy)}) | {sizes['proxy_files']} "
              f"| `{module[0]}` ({module[1]} lines) | `{function[0]}` ({function[1]} lines) |")
        listed[str(tree)] = seen["functions"]
    if args.list:
        for tree, functions in listed.items():
            print(f"\n{tree}:")
            for name in functions:
                print(f"  {name}")


if __name__ == "__main__":
    main()
