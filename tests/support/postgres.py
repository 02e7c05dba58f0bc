"""A throw-away PostgreSQL server for tests: initdb into a temp dir, start on a free loopback port.

PostgreSQL refuses to run as root, so as root the binaries run as the ``postgres`` OS user (which
Debian's package creates) through ``runuser``, with the temp dir handed to that user.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest


def find_bindir() -> Path | None:
    """The directory holding initdb, pg_ctl and postgres, or None when PostgreSQL is not installed."""
    candidates: list[str] = []
    pg_config = shutil.which("pg_config")
    if pg_config:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, timeout=10)
            candidates.append(out.stdout.strip())
    # Debian installs server binaries per major version, outside PATH; newest first.
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"),
                         key=lambda p: int(Path(p).parent.name) if Path(p).parent.name.isdigit() else 0,
                         reverse=True)
    for cand in candidates:
        if cand and all((Path(cand) / tool).is_file() for tool in ("initdb", "pg_ctl", "postgres")):
            return Path(cand)
    return None


MISSING = ("no PostgreSQL server binaries (initdb, pg_ctl, postgres) found via `pg_config --bindir` "
           "or /usr/lib/postgresql/*/bin; install Debian's `postgresql` package")


def require_bindir(environ: Mapping[str, str], bindir: Path | None) -> Path:
    """The server binaries, or the test's end: a skip on a developer's machine, a failure under
    ``CI=true``, where a skip would let the PostgreSQL tests vanish unnoticed."""
    if bindir is not None:
        return bindir
    if environ.get("CI", "").lower() in ("true", "1", "yes"):
        pytest.fail(f"CI=true and {MISSING}")
    pytest.skip(MISSING)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextlib.contextmanager
def postgres_server(bindir: Path) -> Iterator[str]:
    """Run a PostgreSQL server for the duration of the block; yields the DSN of a fresh database."""
    as_root = os.geteuid() == 0
    prefix: list[str] = []
    root = Path(tempfile.mkdtemp(prefix="sseguard-pg-"))
    if as_root:
        try:
            user = pwd.getpwnam("postgres")
        except KeyError as exc:
            raise RuntimeError("running as root needs a 'postgres' OS user to run PostgreSQL") from exc
        os.chown(root, user.pw_uid, user.pw_gid)
        prefix = ["runuser", "-u", "postgres", "--"]
    data, sockets, logfile = root / "data", root / "sock", root / "server.log"
    port = _free_port()

    def run(*args: str) -> None:
        result = subprocess.run([*prefix, *args], capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            log = logfile.read_text(errors="replace")[-2000:] if logfile.exists() else ""
            raise RuntimeError(f"{Path(args[0]).name} failed ({result.returncode}): "
                               f"{result.stderr.strip()[-2000:]}\n{log}")

    try:
        run(str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust", "-E", "UTF8",
            "--locale=C", "--no-sync", "--no-instructions")
        sockets.mkdir()
        if as_root:
            shutil.chown(sockets, "postgres", "postgres")
        options = (f"-p {port} -k {sockets} -c listen_addresses=127.0.0.1 -c fsync=off "
                   "-c synchronous_commit=off -c full_page_writes=off -c max_connections=50")
        run(str(bindir / "pg_ctl"), "-D", str(data), "-l", str(logfile), "-o", options, "-w",
            "-t", "60", "start")
        try:
            import psycopg

            admin = f"postgresql://postgres@127.0.0.1:{port}/postgres"
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute("CREATE DATABASE sseguard_test")
            yield f"postgresql://postgres@127.0.0.1:{port}/sseguard_test"
        finally:
            run(str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop")
    finally:
        shutil.rmtree(root, ignore_errors=True)
