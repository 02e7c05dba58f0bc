"""A Locust user that checks every stream it sends: sseguard's probe, spread over Locust's workers.

Load tools count a stream that delivered one token as a success. ``StreamGuardUser`` feeds each body,
as its bytes arrive on Locust's own gevent HTTP client (geventhttpclient, via ``FastHttpUser``), to the
same sans-IO checker the asyncio probe uses (``checker_for`` the arm's ``api``), and then:

- fires one Locust request event per stream, named by workload, timed to the last byte, and failed
  with a :class:`StreamFailure` whose text is the ``Ending`` (and first untolerated finding), so
  Locust's statistics, web UI and CSV count failures per ending;
- writes the probe's ``Record`` (``source="locust"``, worker id in ``worker``) to
  ``OUT/results-<worker>.jsonl`` and a redacted evidence file per bad stream under ``OUT/evidence/``,
  so ``sseguard analyze OUT`` merges every worker's file.

Settings (arms, workload, policy, stall timeout, output directory) come from ``sseguard locust`` (or
``SSEGUARD_LOCUST_CONFIG=file.toml``); the key is read from the arm's ``key_env`` in each worker and
never written anywhere. Nothing here may import aiohttp or asyncio code: this module runs under gevent.

Subclass it through the module (``from sseguard import locust as sg``; ``class Mine(sg.StreamGuardUser)``)
so Locust does not also find the base class in your locustfile.
"""

from __future__ import annotations

import itertools
import os
import re
import socket
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.client import HTTPException
from pathlib import Path
from typing import Any, ClassVar, NoReturn

import gevent
from geventhttpclient.client import HTTPClient
from geventhttpclient.response import HTTPSocketPoolResponse
from geventhttpclient.url import URL
from locust.env import Environment
from locust.runners import MasterRunner, WorkerRunner

from locust import FastHttpUser, constant, events, task
from sseguard.core.errors import ConfigError
from sseguard.core.policy import Policy
from sseguard.core.record import Record
from sseguard.core.redact import Redactor
from sseguard.core.verdict import Ending, Verdict
from sseguard.locust.launch import DEFAULT_OUT_ROOT, LaunchSettings
from sseguard.probe.config import ProbeConfig
from sseguard.probe.measure import StreamWatch, evidence_document, request_summary
from sseguard.probe.sink import EVIDENCE_DIR, JsonlSink
from sseguard.probe.target import ConnectionTracker, Target
from sseguard.probe.workloads import Conversation, Workload, arm_workloads, encode_body

#: How much of a non-2xx body is kept (the verdict and the evidence cut it to 2 KiB).
ERROR_BODY_LIMIT = 64 * 1024
#: Bytes asked of one ``recv()``: large enough that a burst of events is one read.
RECV_SIZE = 64 * 1024
_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


# ── what Locust shows ────────────────────────────────────────────────────────────────────────────
class StreamFailure(Exception):
    """A stream the policy fails. ``repr`` is what Locust keys its failure table on, so it is the
    stable reason only (``truncated``, ``complete: markup_leak``), never a per-request detail."""

    ending: ClassVar[Ending]

    def __init__(self, reason: str, record: Record) -> None:
        super().__init__(reason)
        self.reason = reason
        self.record = record

    def __repr__(self) -> str:
        return self.reason

    def __str__(self) -> str:
        return self.reason


def _class_name(ending: Ending) -> str:
    return "".join(part.capitalize() for part in str(ending).split("_"))


#: One ``StreamFailure`` subclass per ending (``Truncated``, ``CutMidFrame``, …) for ``except`` clauses.
FAILURES: dict[Ending, type[StreamFailure]] = {
    ending: type(_class_name(ending), (StreamFailure,), {"ending": ending, "__module__": __name__})
    for ending in Ending
}


def failure_reason(verdict: Verdict, policy: Policy) -> str | None:
    """The ending, plus the first finding the policy does not tolerate; None when the stream passes."""
    if policy.passes(verdict):
        return None
    ending = str(verdict.ending)
    finding = next((str(f.kind) for f in verdict.findings if f.kind not in policy.tolerate), None)
    return ending if finding is None else f"{ending}: {finding}"


# ── one worker process ───────────────────────────────────────────────────────────────────────────
class WorkerSink(JsonlSink):
    """The probe's JSONL sink, writing ``results-<worker>.jsonl`` so workers sharing ``OUT`` (a
    network directory, or one machine) never interleave lines in one file."""

    def __init__(self, out_dir: str | os.PathLike[str], worker: str) -> None:
        self.out = Path(out_dir)
        self.results_name = f"results-{_SAFE.sub('_', worker)}.jsonl"
        try:
            (self.out / EVIDENCE_DIR).mkdir(parents=True, exist_ok=True)
            self._file = (self.out / self.results_name).open("ab")
        except OSError as exc:
            raise ConfigError(f"cannot write to {self.out}: {exc.strerror or exc}") from None
        self.written = 0

    @property
    def results_path(self) -> Path:
        return self.out / self.results_name


def worker_id() -> str:
    """Host and process id: unique per worker process, readable in file names and records."""
    return _SAFE.sub("_", f"{socket.gethostname()}-{os.getpid()}")


@dataclass(slots=True)
class WorkerState:
    """Everything the users of one Locust process share: settings, targets, the sink, counters."""

    config: ProbeConfig
    targets: tuple[Target, ...]
    workloads: dict[str, Workload]  # per arm: the run's, or the arm's own body
    redactor: Redactor
    explicit_out: bool = True
    worker: str = field(default_factory=worker_id)
    run_id: str = ""
    sink: WorkerSink | None = None
    requests: itertools.count[int] = field(default_factory=itertools.count)
    users: itertools.count[int] = field(default_factory=itertools.count)
    connections: ConnectionTracker = field(default_factory=ConnectionTracker)

    @classmethod
    def load(cls, settings: LaunchSettings) -> WorkerState:
        config = settings.resolve()
        targets = tuple(Target.of(arm) for arm in config.arms)
        secrets = [s for t in targets for s in t.secrets]
        workloads = arm_workloads(Workload(config.workload, seed=config.seed), config.arms)
        return cls(config=config, targets=targets, workloads=workloads,
                   redactor=Redactor(secrets), explicit_out=settings.explicit_out)

    @property
    def out(self) -> str:
        if self.explicit_out:
            return self.config.out
        return f"{DEFAULT_OUT_ROOT}/{_SAFE.sub('_', self.run_id or 'local')}"

    def open_sink(self) -> WorkerSink:
        if self.sink is None:
            self.sink = WorkerSink(self.out, self.worker)
        return self.sink

    def close(self) -> None:
        if self.sink is not None:
            self.sink.close()
            self.sink = None


_state: WorkerState | None = None


def _fail_startup(message: str) -> NoReturn:
    sys.stderr.write(f"error: {message}\n")
    sys.stderr.flush()
    raise SystemExit(2)


def _add_arguments(parser: Any) -> None:
    parser.add_argument("--sseguard-run-id", default="", env_var="SSEGUARD_RUN_ID",
                        include_in_web_ui=False,
                        help="Run id written into every record (the master's is sent to its workers).")


def _on_init(environment: Environment, **_: Any) -> None:
    """Load the settings in every process that runs users; the master only sets the run id."""
    global _state
    options = environment.parsed_options
    if options is not None and not isinstance(environment.runner, WorkerRunner) \
            and not getattr(options, "sseguard_run_id", ""):
        options.sseguard_run_id = time.strftime("locust-%Y%m%dT%H%M%S", time.gmtime()) \
            + f"-{os.getpid() % 10000:04d}"
    if isinstance(environment.runner, MasterRunner):
        return
    try:
        _state = WorkerState.load(LaunchSettings.from_env())
        if _state.explicit_out:
            _state.open_sink()  # an unwritable directory is reported now, not after the first stream
    except ConfigError as exc:
        _fail_startup(str(exc))


def _on_test_start(environment: Environment, **_: Any) -> None:
    if _state is None:
        return
    options = environment.parsed_options
    _state.run_id = str(getattr(options, "sseguard_run_id", "") or "") if options is not None else ""
    try:
        _state.open_sink()
    except ConfigError as exc:
        _fail_startup(str(exc))


def _on_quitting(environment: Environment, **_: Any) -> None:
    if _state is not None:
        _state.close()


def _listen(hook: Any, handler: Callable[..., None]) -> None:
    """``hook.add_listener`` (untyped in Locust, hence no decorator syntax here)."""
    hook.add_listener(handler)


_listen(events.init_command_line_parser, _add_arguments)
_listen(events.init, _on_init)
_listen(events.test_start, _on_test_start)
_listen(events.quitting, _on_quitting)


# ── reading a body as it arrives ─────────────────────────────────────────────────────────────────
class _BodyEnded(Exception):
    """The connection closed before the HTTP body was complete."""


def read_some(response: HTTPSocketPoolResponse) -> bytes:
    """The next body bytes as they arrive; ``b""`` at the end of the body.

    geventhttpclient's public ``read(n)`` waits until ``n`` bytes are buffered, which would hold small
    SSE events back; this takes what one ``recv()`` brought, decoded by the response's own parser.
    """
    buffer = response._body_buffer
    while not buffer:
        sock = response._sock
        if response.message_complete or sock is None:
            return b""
        data = sock.recv(RECV_SIZE)
        response.feed(data)
        if not data and not response.message_complete:
            raise _BodyEnded("connection closed before the end of the HTTP body")
    out = bytes(buffer)
    del buffer[:]
    return out


class _SocketWatch:
    """Remembers the socket a client's pool handed out last.

    geventhttpclient returns a socket to its pool while it parses the headers when the whole (short)
    body came with them, so ``response._sock`` is then already None; the socket the request went out
    on, seen here before any response byte, names the connection whatever the body's length. A user
    has one request in flight on its client, so "last handed out" is "this request's".
    """

    __slots__ = ("_get", "last")

    def __init__(self, get: Callable[[], Any]) -> None:
        self._get = get
        self.last: object | None = None

    def __call__(self) -> Any:
        sock = self._get()
        self.last = sock
        return sock


def _socket_watch(http: HTTPClient) -> _SocketWatch:
    pool = http._connection_pool
    watch = pool.__dict__.get("get_socket")
    if not isinstance(watch, _SocketWatch):
        watch = _SocketWatch(pool.get_socket)
        pool.get_socket = watch  # type: ignore[method-assign]  # an instance hook, this pool only
    return watch


def _describe(exc: BaseException) -> str:
    text = str(exc)
    name = type(exc).__name__
    return f"{name}: {text}" if text else name


@dataclass(slots=True)
class Exchange:
    """One stream's outcome, before it becomes a record."""

    watch: StreamWatch
    verdict: Verdict
    prompt_bytes: int
    connection: str | None
    reuse_index: int | None


def stream_once(http: HTTPClient, target: Target, body: dict[str, Any], *, stall_timeout: float,
                timeout: float, connections: ConnectionTracker) -> Exchange:
    """Send one streamed request and check it as it arrives. Peer failures are never raised.

    The pool's sockets time out after ``stall_timeout`` of silence (Locust's ``network_timeout``), so a
    ``TimeoutError`` after headers, or one reached only after the stall timeout, is a stall; an earlier
    one is the connect timeout, a transport error.
    """
    payload = encode_body(body)
    clock = time.perf_counter
    sent = clock()
    watch = StreamWatch(body, sent_at=sent, started_at=time.time(), api=target.arm.protocol)
    transport_error: str | None = None
    stalled = False
    error_body: bytes | None = None
    label: str | None = None
    reuse: int | None = None
    response: HTTPSocketPoolResponse | None = None
    sockets = _socket_watch(http)
    sockets.last = None
    deadline = gevent.Timeout(timeout)
    deadline.start()
    try:
        try:
            response = http.request("POST", URL(target.url).request_uri, body=payload,
                                    headers=dict(target.headers))
        except TimeoutError as exc:
            if clock() - sent >= stall_timeout * 0.99:
                stalled = True
            else:
                transport_error = _describe(exc)
        if response is not None:
            watch.response(response.status_code, list(response.items()), clock())
            label, reuse = connections.use(sockets.last or response._sock)
            if 200 <= response.status_code < 300:
                feed = watch.feed
                while chunk := read_some(response):
                    feed(chunk, clock())
            else:
                parts: list[bytes] = []
                size = 0
                while size < ERROR_BODY_LIMIT and (chunk := read_some(response)):
                    parts.append(chunk)
                    size += len(chunk)
                error_body = b"".join(parts)[:ERROR_BODY_LIMIT]
    except gevent.Timeout as exc:
        if exc is not deadline:
            raise
        transport_error = f"timeout: no complete response within {timeout:g} s"
    except TimeoutError:
        stalled = True
    except (OSError, HTTPException, _BodyEnded) as exc:
        # OSError: resets, refusals; HTTPException: geventhttpclient's HTTPParseError, raised for a
        # body cut short at the HTTP level (FIN inside a chunk or before Content-Length) or garbage.
        transport_error = _describe(exc)
    finally:
        deadline.cancel()
        if response is not None:
            response.release()  # returns a finished connection to the pool, closes a broken one
    if error_body is None and response is not None and not 200 <= response.status_code < 300:
        error_body = b""
    verdict = watch.finish(clock(), transport_error=transport_error, stalled=stalled,
                           error_body=error_body)
    return Exchange(watch=watch, verdict=verdict, prompt_bytes=len(payload), connection=label,
                    reuse_index=reuse)


# ── the user ─────────────────────────────────────────────────────────────────────────────────────
class StreamGuardUser(FastHttpUser):
    """Streams back to back in its arm's protocol (chat completions, responses or messages; a closed
    loop, like the probe) and checks each stream with that protocol's checker."""

    abstract = False
    wait_time = constant(0)
    #: Locust's per-user pool size; a user has one stream in flight, so one connection is reused.
    concurrency = 1

    def __init__(self, environment: Environment) -> None:
        state = _state
        if state is None:
            state = _load_for_embedding()
        self.state = state
        config = state.config
        self.network_timeout = config.stall_timeout
        self.connection_timeout = config.connect_timeout
        self.user_index = next(state.users)
        self.target = state.targets[self.user_index % len(state.targets)]
        url = URL(self.target.url)
        if self.host is None:
            self.host = f"{url.scheme}://{url.netloc}"
        super().__init__(environment)
        arm_name = self.target.arm.name
        self.workload = state.workloads[arm_name]
        self.conversation: Conversation = self.workload.conversation(
            f"{state.worker}:{self.user_index}", self.target.arm.protocol)
        self.http: HTTPClient = self.client.client.clientpool.get_client(url)
        self.request_name = (self.workload.name if len(state.targets) == 1
                             else f"{arm_name}:{self.workload.name}")

    @task
    def stream(self) -> None:
        """One request: send, check as it arrives, record, report to Locust."""
        state = self.state
        config = state.config
        target = self.target
        body = self.workload.finish(self.conversation.next_body(), model=target.arm.model,
                                    api=target.arm.protocol)
        started = time.time()
        exchange = stream_once(self.http, target, body, stall_timeout=config.stall_timeout,
                               timeout=config.timeout, connections=state.connections)
        verdict = exchange.verdict
        self.conversation.observe(verdict)
        record = self.make_record(exchange, body)
        reason = failure_reason(verdict, config.policy)
        if reason is not None or verdict.ending is not Ending.COMPLETE:
            document = evidence_document(
                record, verdict, exchange.watch.headers, state.redactor,
                request_summary=request_summary(body, url_path=target.arm.path,
                                                prompt_bytes=exchange.prompt_bytes,
                                                api=target.arm.protocol))
            sink = state.open_sink()
            record.evidence = sink.write_evidence(f"{state.worker}-{record.index:06d}", document)
        state.open_sink().write(record)
        exception = None if reason is None else FAILURES[verdict.ending](reason, record)
        self.environment.events.request.fire(
            request_type="POST", name=self.request_name,
            response_time=record.duration_ms or 0.0, response_length=verdict.bytes,
            response=None, context={"arm": target.arm.name, "api": record.api,
                                    "ending": record.ending},
            exception=exception, start_time=started, url=target.arm.url)

    def make_record(self, exchange: Exchange, body: Mapping[str, Any]) -> Record:
        state = self.state
        runner = self.environment.runner
        users = runner.user_count if runner is not None else 1
        return exchange.watch.record(
            exchange.verdict, policy=state.config.policy, redactor=state.redactor,
            model=body.get("model"), source="locust", run_id=state.run_id, arm=self.target.arm.name,
            index=next(state.requests), worker=state.worker, workload=self.workload.name,
            path=self.target.arm.path, prompt_bytes=exchange.prompt_bytes, concurrency=users,
            reuse_index=exchange.reuse_index, connection=exchange.connection,
            extra={"user": self.user_index})


def _load_for_embedding() -> WorkerState:
    """Settings for a user created without Locust's init event (a test, ``run_single_user``)."""
    global _state
    try:
        _state = WorkerState.load(LaunchSettings.from_env())
    except ConfigError as exc:
        _fail_startup(str(exc))
    return _state


__all__ = ["FAILURES", "StreamFailure", "StreamGuardUser", "WorkerSink",
           "WorkerState", "failure_reason", "read_some", "stream_once"]
