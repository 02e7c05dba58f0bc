"""The verbatim relay: every request the guard does not check, copied both ways as it streams.

Everything under ``/v1/`` but the guarded streams (model lists, embeddings, non-streaming calls, files…)
goes to the configured upstream only and comes back exactly as the upstream sent it: both bodies
streamed, never held whole, length and content coding kept. An upstream that goes silent for
``--stall-timeout`` or breaks off is cut, the only honest signal once headers are out. The one
exception is a guarded endpoint's non-streamed answer (``_answer_whole``): it is read whole under the
stall timer first, so that its stall or break reaches the client as an error it can read; whether
its failures are asked again, and what the client is told about retrying, is decided by the
attempts' machine (``attempts.py``), as for a stream.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any

import aiohttp
from aiohttp import web
from yarl import URL

from sseguard.core.contract import Protocol
from sseguard.proxy.driver.attempt_loop import run_attempts
from sseguard.proxy.driver.forward import error_response, request_headers, response_headers, unreachable
from sseguard.proxy.driver.stall import Stalled, StallWatch, TimerHandle, Timers, broke_off
from sseguard.proxy.driver.state import ProxyState
from sseguard.proxy.machines.attempts import (
    AttemptFailure,
    Attempts,
    ErrorAnswer,
    HttpError,
    RetryAfter,
    StartAttempt,
    Unreachable,
)


class _Deadline:
    """How long the upstream may take to send its headers: an ``asyncio.timeout`` that expires when
    the stall timers' clock says (``stall.Timers``: the loop, or a test's virtual clock), so that no
    test waits a real ``--timeout``. ``expire_in`` moves it (the upload ended: ``--timeout`` again)."""

    def __init__(self, timers: Timers, seconds: float) -> None:
        self._timers = timers
        self._seconds = seconds
        self.timeout = asyncio.timeout(None)
        self._handle: TimerHandle | None = None

    async def __aenter__(self) -> _Deadline:
        await self.timeout.__aenter__()
        self.expire_in(self._seconds)
        return self

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        await self.timeout.__aexit__(kind, exc, tb)  # raises TimeoutError if it expired

    def expire_in(self, seconds: float) -> None:
        """The deadline is ``seconds`` from now."""
        if self._handle is not None:
            self._handle.cancel()
        self._handle = self._timers.call_at(self._timers.time() + seconds, self._expire)

    def _expire(self) -> None:
        self._handle = None
        self.timeout.reschedule(asyncio.get_running_loop().time())  # expires at once


class _Upload:
    """The client's request body, streamed to the upstream as it arrives (never held whole).

    Silence longer than ``--stall-timeout`` ends it; once it is all sent, ``--timeout`` starts again for
    the upstream's answer, so a long upload does not eat the time the upstream has to respond.
    """

    def __init__(self, request: web.Request, stall_timeout: float, deadline: _Deadline,
                 timeout: float, timers: Timers) -> None:
        self._content = request.content
        self._stall = stall_timeout
        self._deadline = deadline
        self._timeout = timeout
        self._timers = timers
        self.failure: str | None = None
        self.waiting = True  # for the upstream's headers: the deadline is still running

    async def chunks(self) -> AsyncIterator[bytes]:
        # The client's body is read under the same stall timer as an upstream's.
        watch = StallWatch(self._timers, self._stall, self._content)
        try:
            while True:
                try:
                    chunk = await watch.read()
                except Stalled:
                    self.failure = f"the client sent no request body byte for {self._stall:g} s"
                    raise TimeoutError(self.failure) from None
                except (aiohttp.ClientError, OSError) as exc:
                    self.failure = f"the client's request body broke off: {type(exc).__name__}"
                    raise
                if not chunk:
                    break
                yield chunk
        finally:
            watch.close()
        if self.waiting:  # an upstream may answer before the upload ends; then nothing is waited on
            self._deadline.expire_in(self._timeout)


async def _ask_guarded(state: ProxyState, request: web.Request, target: URL, body: bytes,
                       headers: Any, skip: Any, api: str,
                       machine: Attempts) -> tuple[aiohttp.ClientResponse | None, ErrorAnswer | None]:
    """A guarded endpoint's non-streaming call: nothing has reached the client yet, so ``machine``
    (``attempts.Attempts``) decides whether a connect error, ``429`` or ``5xx`` is asked again,
    after how long, within the retry budget. The upstream's answer, with the error ``ErrorAnswer`` the
    machine decided when it is one (its status ≥ 400); or no answer and the machine's ``ErrorAnswer``
    when the upstream could not be reached."""
    config = state.config
    #: The last attempt's answer (None: it could not connect), kept for the client's error answer.
    last: list[aiohttp.ClientResponse | None] = [None]

    async def attempt(start: StartAttempt) -> aiohttp.ClientResponse | AttemptFailure:
        assert state.session is not None
        last[0] = None
        try:
            upstream = last[0] = await state.session.request(
                request.method, target, data=body, allow_redirects=False, headers=headers,
                skip_auto_headers=skip)
        except aiohttp.ClientError as exc:
            state.metrics.upstream_errors.labels("connect").inc()
            return Unreachable(unreachable(config.upstream, exc, state.redactor))
        if upstream.status < 400:
            return upstream
        return HttpError(upstream.status, upstream.headers)

    def retrying(retry: RetryAfter) -> None:
        upstream = last[0]
        if upstream is not None:
            state.metrics.upstream_errors.labels(f"http_{upstream.status}").inc()
            upstream.close()
        state.metrics.heal_attempts.labels("non_stream", "retried").inc()

    got = await run_attempts(state, machine, attempt, label=api, retrying=retrying)
    if isinstance(got, ErrorAnswer):
        return last[0], got  # the client's: the upstream's answer as it is, or a 502
    return got, None


async def relay_as_is(state: ProxyState, request: web.Request, target: URL, body: bytes | None,
                      proto: Protocol, *, guarded: bool = False) -> web.StreamResponse:
    """Copy a request to the upstream and its answer back, both bodies streamed as they come.

    ``body`` is a request body already read (``guarded``: a guarded endpoint's non-streaming call);
    otherwise the client's body is streamed. ``proto``: the protocol whose shape the proxy's own
    errors take (``forward.client_protocol``). Only hop-by-hop headers stay behind;
    length and content coding are kept, so the answer arrives exactly as the upstream sent it
    (compressed bodies included).

    A guarded endpoint's non-streamed answer is stall-timed from the request on (``--stall-timeout``,
    headers included: such an upstream is silent until its whole answer is ready, and an agent's
    non-streaming fallback must not wait for ever) and read whole before the client gets anything, so
    that a stall or a break is a ``504``/``502`` in the protocol's error shape, not a cut body.

    Why this is not a sans-IO machine like the guarded stream's (``machines/stream.py``): nothing
    here depends on what the bytes say. No checker reads them and no frame is rewritten, held or
    ended early, so the copy has one state and no decision; after the headers the only one left,
    on a stall or a break, is to cut the client's connection. The decisions before the headers are
    already pure: whether a guarded call is asked again is the attempts machine's
    (``machines/attempts.py``), which error answer a failure gets is ``_failed_before_headers``.
    What remains is I/O: the upload (``_Upload``), the deadline, and the copy (``_copy``).
    """
    config = state.config
    assert state.session is not None
    guarded = guarded and body is not None
    headers = request_headers(request.headers, identity=False, body_read=body is not None)
    wait = min(config.timeout, config.stall_timeout) if guarded else config.timeout
    timers = state.stall_timers()
    deadline = _Deadline(timers, wait)
    upload: _Upload | None = None
    data: Any = body or None
    if body is None and request.body_exists:
        upload = _Upload(request, config.stall_timeout, deadline, config.timeout, timers)
        data = upload.chunks()
        if request.content_length is not None:
            # Sent with the length the client declared, not re-framed as chunked: some upstreams
            # refuse chunked uploads.
            headers["Content-Length"] = str(request.content_length)
    # aiohttp would add its own Content-Type to a body that has none: the upstream sees the client's.
    skip = () if "Content-Type" in request.headers else ("Content-Type",)
    api = str(proto.api)
    answer: ErrorAnswer | None = None
    machine: Attempts | None = None
    if guarded:
        machine = Attempts(retry=config.retry, max_wait=config.retry_max_wait,
                           budget=state.budget(str(target.origin())), rng=state.rng,
                           retry_off=config.retries_off,
                           healing=False)
    retried = False
    # The proxy retries only a guarded endpoint's calls; on any other path a client retry is the one.
    retry_off = config.retries_off if guarded else True
    try:
        async with deadline:
            if machine is not None:
                assert body is not None
                got, answer = await _ask_guarded(state, request, target, body, headers, skip, api,
                                                 machine)
                retried = machine.retried
                if got is None:
                    assert answer is not None
                    return state.answered(error_response(proto, 502, answer.message,
                                                         type_=answer.type_, code=answer.code),
                                          answer, api)
                upstream = got
            else:
                upstream = await state.session.request(
                    request.method, target, data=data, allow_redirects=False, headers=headers,
                    skip_auto_headers=skip)
    except (TimeoutError, aiohttp.ClientError) as exc:
        if upload is not None:
            upload.waiting = False
        return _failed_before_headers(state, proto, exc, upload, guarded=guarded,
                                      retried=machine is not None and machine.retried,
                                      retry_off=retry_off)
    if upload is not None:
        upload.waiting = False
    if guarded:
        return await _answer_whole(state, request, upstream, proto, retried=retried, answer=answer)
    return await _copy(state, request, upstream)


def _failed_before_headers(state: ProxyState, proto: Protocol, exc: BaseException,
                           upload: _Upload | None, *, guarded: bool, retried: bool,
                           retry_off: bool) -> web.StreamResponse:
    """The client's answer when the upstream's headers never came: the client's own upload failed
    (``408``), the upstream was silent (``504``) or could not be reached (``502``)."""
    config = state.config
    api = str(proto.api)
    if upload is not None and upload.failure is not None:
        state.metrics.requested("rejected_408")
        return state.tell_retry(
            error_response(proto, 408, upload.failure, type_="invalid_request_error",
                           code="request_body_incomplete", headers=[("Connection", "close")]),
            api, "request_body_incomplete", "bad_request", retried=False)
    if isinstance(exc, TimeoutError):
        if guarded and config.stall_timeout < config.timeout:
            state.metrics.upstream_errors.labels("stalled").inc()
            return state.tell_retry(_protocol_error(proto, 504, _silent(config.stall_timeout)),
                                    api, "stalled", "timeout", retried=retried,
                                    retry_off=retry_off)
        state.metrics.upstream_errors.labels("timeout").inc()
        return state.tell_retry(
            error_response(proto, 504, f"the upstream sent no response within "
                                       f"{config.timeout:g} s (--timeout)",
                           type_="upstream_timeout", code="upstream_timeout"),
            api, "timeout", "timeout", retried=retried, retry_off=retry_off)
    state.metrics.upstream_errors.labels("connect").inc()
    return state.tell_retry(
        error_response(proto, 502, unreachable(config.upstream, exc, state.redactor),
                       type_="upstream_unreachable", code="upstream_unreachable"),
        api, "connect", "upstream", retried=False, retry_off=retry_off)


async def _copy(state: ProxyState, request: web.Request,
                upstream: aiohttp.ClientResponse) -> web.StreamResponse:
    """The upstream's answer to the client as it streams, byte for byte; a stall or a break once the
    headers are out cuts the client's connection (the only honest signal left)."""
    watch = StallWatch(state.stall_timers(), state.config.stall_timeout, upstream.content)
    complete = False
    try:
        resp = web.StreamResponse(status=upstream.status, reason=upstream.reason,
                                  headers=response_headers(upstream.headers, keep_framing=True))
        try:
            await resp.prepare(request)
            while chunk := await watch.read():
                await resp.write(chunk)
        except ConnectionResetError:
            return resp  # the client left; closing the upstream response below is all there is
        except (Stalled, aiohttp.ClientError, OSError) as exc:
            # Headers are out: the only honest signal left is an incomplete body.
            state.metrics.upstream_errors.labels(
                "stalled" if isinstance(exc, Stalled) else "transport").inc()
            if request.transport is not None:
                request.transport.abort()
            return resp
        await resp.write_eof()
        complete = True
        return resp
    finally:
        watch.close()
        if complete:
            upstream.release()  # the connection goes back to the pool
        else:
            upstream.close()


def _silent(stall_timeout: float) -> str:
    return f"the upstream sent nothing for {stall_timeout:g} s (--stall-timeout); the answer was cut"


def _protocol_error(proto: Protocol, status: int, message: str) -> web.Response:
    """An error in the protocol's own shape for ``status`` (``Protocol.status_error``), which the
    client's SDK raises as that status."""
    return web.json_response(proto.status_error(status, message), status=status)


async def _answer_whole(state: ProxyState, request: web.Request, upstream: aiohttp.ClientResponse,
                        proto: Protocol, *, retried: bool,
                        answer: ErrorAnswer | None) -> web.StreamResponse:
    """A guarded endpoint's non-streamed answer, read whole under the stall timer, then sent; an
    error answer carries what the attempts' machine decided (``answer``: ``x-should-retry``), a stall
    or a break says whether a client retry can help (``retried``: the proxy did)."""
    config = state.config
    api = str(proto.api)
    retry_off = config.retries_off
    watch = StallWatch(state.stall_timers(), config.stall_timeout, upstream.content)
    parts: list[bytes] = []
    received = 0
    complete = False
    try:
        while chunk := await watch.read():
            parts.append(chunk)
            received += len(chunk)
        complete = True
    except Stalled:
        state.metrics.upstream_errors.labels("stalled").inc()
        return state.tell_retry(_protocol_error(proto, 504, _silent(config.stall_timeout)), api,
                                "stalled", "timeout", retried=retried, retry_off=retry_off)
    except (aiohttp.ClientError, OSError) as exc:
        state.metrics.upstream_errors.labels("transport").inc()
        return state.tell_retry(
            _protocol_error(proto, 502, f"the upstream's answer broke off: "
                                        f"{broke_off(exc, received)}"),
            api, "transport_error", "timeout", retried=retried, retry_off=retry_off)
    finally:
        watch.close()
        if complete:
            upstream.release()
        else:
            upstream.close()
    headers = response_headers(upstream.headers, keep_framing=True)
    resp = web.StreamResponse(status=upstream.status, reason=upstream.reason, headers=headers)
    if answer is not None:
        state.answered(resp, answer, api)
    if "Content-Length" not in headers:
        resp.content_length = received  # read whole: no need to re-frame it as chunked
    try:
        await resp.prepare(request)
        for part in parts:
            await resp.write(part)
        await resp.write_eof()
    except ConnectionResetError:
        pass  # the client left; its answer was read whole all the same
    return resp
