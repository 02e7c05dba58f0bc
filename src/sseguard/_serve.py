"""The asyncio plumbing the adapters share: serving an app, on one core or many, the event loop, memory.

The chaos upstream and the proxy serve in the caller's event loop with the same runner settings
(``handler_cancellation`` so a client that leaves cancels its handler at once, no access log on the hot
path, no signal handling of their own) and report where they listen the same way. The probe, the proxy
and the chaos server all run on uvloop when it is installed and raise their open-files limit, because a
thousand streams need a thousand sockets (two each for the proxy).

``serve_workers`` is how either server uses every core: one Python process runs one event loop on one
core, so ``--workers N`` starts N processes that each accept on the same port (``SO_REUSEPORT``: the
kernel spreads new connections over them) and share nothing but the port, the store and a metrics
directory (prometheus-client's multiprocess mode, so ``/metrics`` on any worker sums all of them).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import gc
import logging
import multiprocessing
import os
import resource
import signal
import socket
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from types import FrameType
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from sseguard.core.errors import ConfigError, SSEGuardError

log = logging.getLogger("sseguard.serve")


class _ClientsFault(logging.Filter):
    """A request whose head or framing does not parse (a bad request line, a header line too long, a
    broken chunked body, a body its ``Content-Encoding`` does not decode) is the client's fault:
    aiohttp answers it ``400`` and would log a traceback at ERROR for each one, which lets any client
    fill the log. So would a client that leaves while its answer is written. Such a record becomes
    one WARNING line naming the problem."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        while exc is not None and not isinstance(exc, HttpProcessingError | ConnectionResetError):
            exc = exc.__cause__ or exc.__context__
        if isinstance(exc, HttpProcessingError | ConnectionResetError):
            if isinstance(exc, HttpProcessingError):
                first = (exc.message or type(exc).__name__).strip().splitlines()[0]
                why = f"{first} ({exc.code})"
            else:  # the client left while its answer was being written
                why = f"the client left: {exc}"
            record.msg, record.args = "%s: %s", (record.getMessage(), why)
            record.levelno, record.levelname = logging.WARNING, "WARNING"
            record.exc_info = record.exc_text = None
        return True


#: The servers' own logger (aiohttp's ``aiohttp.server`` otherwise): the client's faults in one line.
http_log = logging.getLogger("sseguard.serve.http")
http_log.addFilter(_ClientsFault())

#: Where prometheus-client's multiprocess mode keeps each worker's values (read when it is imported).
METRICS_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"
#: How long a worker may take to import, open its store and listen (a busy machine is slow to spawn).
START_TIMEOUT_S = 120.0
#: How long a stopped worker may take to drain its streams and records before it is killed.
STOP_TIMEOUT_S = 120.0


@dataclass(slots=True)
class Listening:
    """Where a server listens: ``url`` is the OpenAI base URL (``http://127.0.0.1:PORT/v1``)."""

    host: str
    port: int

    @property
    def root(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.root}/v1"


@contextlib.asynccontextmanager
async def serve_app(app: web.Application, host: str, port: int, *, backlog: int = 4096,
                    shutdown_timeout: float = 1.0, reuse_port: bool = False,
                    auto_decompress: bool = True) -> AsyncIterator[int]:
    """Serve ``app`` on ``host:port`` (0 = a free port) for the block; yields the bound port.

    ``reuse_port`` lets several processes listen on one port (``serve_workers``);
    ``auto_decompress=False`` leaves request bodies in the content coding the client sent."""
    runner = web.AppRunner(app, handle_signals=False, access_log=None, handler_cancellation=True,
                           shutdown_timeout=shutdown_timeout, auto_decompress=auto_decompress,
                           logger=http_log)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port, backlog=backlog, reuse_address=True,
                           reuse_port=reuse_port or None)
        await site.start()
        yield int(runner.addresses[0][1])
    finally:
        await runner.cleanup()


async def serve_until_signalled(server: contextlib.AbstractAsyncContextManager[Any],
                                on_ready: Callable[[Any], None]) -> None:
    """Enter ``server``, call ``on_ready`` with what it yields, and leave it on SIGTERM or SIGINT.

    Both signals end the block the same way (stop accepting, let streams finish, drain records), in
    one process or in each worker of many: a terminal's Ctrl-C reaches every worker of the group."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)
    async with server as running:
        on_ready(running)
        await stop.wait()


def serve_in_worker(serving: Callable[[], contextlib.AbstractAsyncContextManager[Listening]],
                    ready: Callable[[int], None]) -> None:
    """One worker's server (``serve_workers``' ``serve_one``) until SIGTERM or SIGINT, on uvloop
    where installed, in a process made ready to hold many connections (open files, GC); ``ready``
    gets the port once it listens. A Ctrl-C before the signal handlers are in place ends it quietly."""
    raise_open_files_limit()
    settle_gc()

    def listening(server: Listening) -> None:
        ready(server.port)

    with asyncio.Runner(loop_factory=loop_factory()) as runner, contextlib.suppress(KeyboardInterrupt):
        runner.run(serve_until_signalled(serving(), listening))


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop factory when installed (for ``asyncio.Runner``), else None: asyncio's own loop."""
    try:
        import uvloop
    except ImportError:  # optional (not on Windows); asyncio's loop is fine below a few hundred streams
        return None
    return uvloop.new_event_loop


def raise_open_files_limit() -> tuple[int, int]:
    """Soft ``RLIMIT_NOFILE`` up to the hard limit (a common soft default of 1,024 caps a relay near 500
    streams); returns the limits now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


# ── memory ───────────────────────────────────────────────────────────────────────────────────────


def settle_gc(threshold: int = 20_000) -> None:
    """For a server about to run for long: collect once, freeze what exists, collect young objects
    less often.

    A relay allocates a few short-lived objects per event (the decoded chunk, its events), which
    reference counting frees anyway; with the default threshold (700) the cyclic collector ran every
    few hundred events and each full pass walked every imported module's objects. Frozen objects are
    never walked again (the probe does the same for its runs, ``probe.runner.quiet_gc``).
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(threshold, 20, 20)


def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
        libc.malloc_trim.argtypes = [ctypes.c_size_t]
        libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    except (OSError, AttributeError):  # not glibc (musl, macOS): its allocator behaves otherwise
        return None
    return libc


_LIBC = _libc()
_M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter number


def release_free_memory() -> bool:
    """Give the heap's free pages back to the OS (glibc ``malloc_trim``); False where there is none.

    Why: a relay's buffers are 16-256 KiB blocks (uvloop hands over up to 256 KiB per socket read);
    glibc serves them from its heap once its dynamic mmap threshold has risen past them and keeps the
    freed pages, so a proxy that had held a thousand slow readers' buffers stayed at ~1 GB RSS with
    ~1 MB of live Python objects (tracemalloc; docs/benchmarks.md). ``malloc_trim(0)`` returns those
    pages; it walks the heap, so call it when a server goes idle, not per request.
    """
    if _LIBC is None:
        return False
    _LIBC.malloc_trim(0)
    return True


def map_large_blocks(threshold: int = 64 * 1024) -> bool:
    """Have glibc map blocks of ``threshold`` bytes and more on their own (returned to the OS when
    freed) instead of carving them from the heap; False where there is no glibc.

    glibc raises its mmap threshold to the largest mapped block freed (up to 32 MiB), after which a
    relay's 64-256 KiB socket reads interleave on the heap with small objects that outlive them, and
    the heap can only grow: with a thousand paused readers the proxy's RSS peaked far above the bare
    relay's for the same bytes in flight. A fixed threshold stops that; the cost, a map and unmap per
    large block, is paid only by large reads (a stream with a backlog), never by token-sized events.
    """
    if _LIBC is None:
        return False
    return bool(_LIBC.mallopt(_M_MMAP_THRESHOLD, threshold))


# ── many processes on one port ───────────────────────────────────────────────────────────────────


def parse_workers(value: str | int, flag: str = "--workers") -> int:
    """``"4"`` → 4, ``"auto"`` → the machine's cores; anything else is a ``ConfigError``."""
    text = str(value).strip().lower()
    if text == "auto":
        return os.cpu_count() or 1
    if isinstance(value, bool) or not (text.isascii() and text.isdigit()) or int(text) < 1:
        raise ConfigError(f"{flag} {value!r}: use a number of processes (1 or more) or auto")
    return int(text)


@dataclass(frozen=True, slots=True)
class Worker:
    """One serving process: its place among ``count`` and where it listens."""

    index: int
    count: int
    host: str
    port: int

    @property
    def reuse_port(self) -> bool:
        """Whether this worker shares its port with others (``SO_REUSEPORT``)."""
        return self.count > 1


#: Runs one server until SIGTERM/SIGINT; calls ``ready(port)`` once it listens. Must be picklable
#: (a module-level function, or a ``functools.partial`` of one) to reach a worker process.
ServeOne = Callable[[Worker, Callable[[int], None]], None]


def serve_workers(count: int, host: str, port: int, serve_one: ServeOne,
                  on_ready: Callable[[Listening], None]) -> int:
    """Run ``serve_one`` in ``count`` processes on one port until SIGTERM or SIGINT; returns 0, or 1 when
    a worker died on its own.

    One worker runs here, in this process. Several are spawned (fresh interpreters: nothing of this
    process's state leaks in); this process only holds the port, forwards stop signals and waits for
    every worker to drain. A worker that cannot start stops the others and raises ``ConfigError`` with
    its one-line reason; so does an OS without ``SO_REUSEPORT``.
    """
    if count == 1:
        serve_one(Worker(0, 1, host, port), lambda bound: on_ready(Listening(host, bound)))
        return 0
    with _reserved_port(host, port) as bound, _metrics_dir():
        return _Supervisor(count, host, bound, serve_one).run(on_ready)


@contextlib.contextmanager
def _reserved_port(host: str, port: int) -> Iterator[int]:
    """Bind (without listening) a ``SO_REUSEPORT`` socket: it fixes the port the workers share (port 0
    picks a free one) and tells at once whether the OS has ``SO_REUSEPORT``. Only listening sockets get
    connections, so this one never takes any."""
    option = getattr(socket, "SO_REUSEPORT", None)
    if option is None:
        raise ConfigError("--workers above 1 needs SO_REUSEPORT, which this OS does not have; "
                          "use --workers 1")
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                         flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(family, kind, proto)
    try:
        try:
            sock.setsockopt(socket.SOL_SOCKET, option, 1)
        except OSError:
            raise ConfigError("--workers above 1 needs SO_REUSEPORT, which this OS refuses; "
                              "use --workers 1") from None
        sock.bind(address)
        yield int(sock.getsockname()[1])
    finally:
        sock.close()


@contextlib.contextmanager
def _metrics_dir() -> Iterator[str]:
    """A temporary prometheus multiprocess directory, in the environment the workers inherit."""
    before = os.environ.get(METRICS_DIR_ENV)
    with tempfile.TemporaryDirectory(prefix="sseguard-metrics-") as path:
        os.environ[METRICS_DIR_ENV] = path
        try:
            yield path
        finally:
            if before is None:
                os.environ.pop(METRICS_DIR_ENV, None)
            else:
                os.environ[METRICS_DIR_ENV] = before


def _worker_main(serve_one: ServeOne, worker: Worker, conn: Connection) -> None:
    """A worker process's entry: serve, telling the supervisor when it listens or why it could not."""
    listening = False

    def ready(port: int) -> None:
        nonlocal listening
        listening = True
        conn.send(("ready", worker.index, os.getpid()))

    try:
        serve_one(worker, ready)
    except (SSEGuardError, OSError) as exc:
        if listening:
            raise
        reason = (str(exc) if isinstance(exc, SSEGuardError)
                  else f"cannot listen on {worker.host}:{worker.port}: {exc.strerror or exc}")
        conn.send(("failed", worker.index, reason))
        raise SystemExit(2) from None
    except KeyboardInterrupt:  # a Ctrl-C that arrived before the server's own handler was in place
        pass
    finally:
        conn.close()


class _Supervisor:
    """Starts the workers, forwards SIGTERM/SIGINT to them and waits for every one to finish."""

    def __init__(self, count: int, host: str, port: int, serve_one: ServeOne) -> None:
        self.count = count
        self.host = host
        self.port = port
        self.serve_one = serve_one
        self.procs: list[Any] = []
        self.stopping = False

    def _stop(self, signum: int = signal.SIGTERM, frame: FrameType | None = None) -> None:
        self.stopping = True
        for proc in self.procs:
            if proc.is_alive() and proc.pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGTERM)

    def run(self, on_ready: Callable[[Listening], None]) -> int:
        context = multiprocessing.get_context("spawn")
        previous = {sig: signal.signal(sig, self._stop) for sig in (signal.SIGTERM, signal.SIGINT)}
        conns: list[Connection] = []
        try:
            for index in range(self.count):
                receive, send = context.Pipe(duplex=False)
                proc = context.Process(target=_worker_main, name=f"sseguard-worker-{index}",
                                       args=(self.serve_one, Worker(index, self.count, self.host,
                                                                    self.port), send))
                proc.start()
                send.close()
                self.procs.append(proc)
                conns.append(receive)
            failure = self._await_ready(conns)
            if failure is not None:
                self._stop()
                self._join()
                raise ConfigError(failure)
            if not self.stopping:
                on_ready(Listening(self.host, self.port))
            return self._supervise()
        finally:
            self._stop()
            self._join()
            for conn in conns:
                conn.close()
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _await_ready(self, conns: list[Connection]) -> str | None:
        waiting = dict(enumerate(conns))
        deadline = time.monotonic() + START_TIMEOUT_S
        while waiting and not self.stopping:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return f"{len(waiting)} worker(s) did not start within {START_TIMEOUT_S:g} s"
            sentinels = {self.procs[i].sentinel: i for i in waiting}
            for ready in wait([*waiting.values(), *sentinels], remaining):
                if isinstance(ready, int):
                    index = sentinels[ready]
                    if index in waiting and not waiting[index].poll():
                        code = self.procs[index].exitcode
                        return f"worker {index} exited with code {code} before it listened"
                    continue
                if not isinstance(ready, Connection):
                    continue
                try:
                    message = ready.recv()
                except EOFError:
                    continue
                if message[0] == "failed":
                    return str(message[2])
                waiting.pop(int(message[1]), None)
        return None

    def _supervise(self) -> int:
        """Wait until every worker has ended; one that ends on its own stops the rest."""
        status = 0
        alive = {proc.sentinel: proc for proc in self.procs}
        while alive:
            for sentinel in wait(list(alive)):
                if not isinstance(sentinel, int):
                    continue
                proc = alive.pop(sentinel)
                proc.join()
                if not self.stopping:
                    log.error("worker %s (pid %s) exited with code %s; stopping the others",
                              proc.name, proc.pid, proc.exitcode)
                    status = 1
                    self._stop()
                elif proc.exitcode not in (0, None):
                    status = 1
        return status

    def _join(self) -> None:
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for proc in self.procs:
            proc.join(max(0.0, deadline - time.monotonic()))
            if proc.is_alive():
                log.error("worker %s (pid %s) did not stop within %g s: killed", proc.name, proc.pid,
                          STOP_TIMEOUT_S)
                proc.kill()
                proc.join()
