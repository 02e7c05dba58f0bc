"""The layers of DESIGN.md hold: the sans-IO core imports no I/O library and nothing from the adapters."""

from __future__ import annotations

import subprocess
import sys

CORE = ["sseguard", "sseguard.sse", "sseguard.contract", "sseguard.contract.chat_assembler",
        "sseguard.verdict", "sseguard.policy", "sseguard.record", "sseguard.redact", "sseguard.errors",
        "sseguard.toolcalls", "sseguard.reasoning"]
FORBIDDEN = ["aiohttp", "httpx", "httpx2", "asyncio", "sqlite3", "psycopg", "urllib.request",
             "locust", "gevent", "sseguard.chaos", "sseguard.probe", "sseguard.proxy", "sseguard.store",
             "sseguard.analyze", "sseguard.client", "sseguard.cli", "rich", "typer"]


def test_core_modules_import_no_io_library() -> None:
    code = (
        "import sys\n"
        f"for name in {CORE!r}: __import__(name)\n"
        f"bad = sorted(m for m in {FORBIDDEN!r} if m in sys.modules)\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"the core pulled in: {out.stdout.strip()}"
