"""The verbatim relay: every request the guard does not check, copied both ways as it streams.

Everything under ``/v1/`` but the guarded streams (model lists, embeddings, non-streaming calls, files…)
goes to the configured upstream only and comes back exactly as the upstream sent it: both bodies
streamed, never held whole, length and content coding kept. An upstream that goes silent for
``--stall-timeout`` or breaks off is cut, the only honest signal once headers are out.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
from aiohttp import web
from yarl import URL

from sseguard.proxy.forward import error_response, request_headers, response_headers, unreachable
from sseguard.proxy.retry import retry_after, retryable_status, wait_before_retry
from sseguard.proxy.stall import Stalled, StallWatch
from sseguard.proxy.state import ProxyState


class _Upload:
    """The client's request body, streamed to the upstream as it arrives (never held whole).

    Silence longer than ``--stall-timeout`` ends it; once it is all sent, ``--timeout`` starts again for
    the upstream's answer, so a long upload does not eat the time the upstream has to respond.
    """

    def __init__(self, request: web.Request, stall_timeout: float, deadline: asyncio.Timeout,
                 timeout: float) -> None:
        self._content = request.content
        self._stall = stall_timeout
        self._deadline = deadline
        self._timeout = timeout
        self.failure: str | None = None
        self.waiting = True  # for the upstream's headers: the deadline is still running

    async def chunks(self) -> AsyncIterator[bytes]:
        loop = asyncio.get_running_loop()
        while True:
            try:
                async with asyncio.timeout(self._stall):
                    chunk = await self._content.readany()
            except TimeoutError:
                self.failure = f"the client sent no request body byte for {self._stall:g} s"
                raise
            except (aiohttp.ClientError, OSError) as exc:
                self.failure = f"the client's request body broke off: {type(exc).__name__}"
                raise
            if not chunk:
                break
            yield chunk
        if self.waiting:  # an upstream may answer before the upload ends; then nothing is waited on
            self._deadline.reschedule(loop.time() + self._timeout)


async def _ask_with_retries(state: ProxyState, request: web.Request, target: URL, body: bytes,
                            headers: Any, skip: Any) -> aiohttp.ClientResponse:
    """A guarded endpoint's non-streaming call, asked again (``--retry``) on a connect error, a reset
    before the answer, ``429`` or ``5xx``: nothing has reached the client yet. The last attempt's
    answer, or one whose ``Retry-After`` exceeds ``--retry-max-wait``, is the client's."""
    config = state.config
    assert state.session is not None
    for attempt in range(config.retry + 1):
        last = attempt == config.retry
        try:
            upstream = await state.session.request(
                request.method, target, data=body, allow_redirects=False, headers=headers,
                skip_auto_headers=skip)
        except aiohttp.ClientError:
            if last:
                raise
            state.metrics.upstream_errors.labels("connect").inc()
            wait: float | None = wait_before_retry(attempt, None, config.retry_max_wait, state.rng)
        else:
            if last or not retryable_status(upstream.status):
                return upstream
            asked = retry_after(upstream.headers, time.time())
            wait = wait_before_retry(attempt, asked, config.retry_max_wait, state.rng)
            if wait is None:
                return upstream
            state.metrics.upstream_errors.labels(f"http_{upstream.status}").inc()
            upstream.close()
        state.metrics.heal_attempts.labels("non_stream", "retried").inc()
        assert wait is not None
        await state.sleep(wait)
    raise AssertionError("unreachable: the last attempt returns or raises")


async def relay_as_is(state: ProxyState, request: web.Request, target: URL, body: bytes | None,
                      anthropic: bool) -> web.StreamResponse:
    """Copy a request to the upstream and its answer back, both bodies streamed as they come.

    ``body`` is a request body already read (the guarded endpoints' non-streaming calls); otherwise
    the client's body is streamed. Only hop-by-hop headers stay behind; length and content coding
    are kept, so the answer arrives exactly as the upstream sent it (compressed bodies included).
    """
    config = state.config
    assert state.session is not None
    headers = request_headers(request.headers, identity=False)
    deadline = asyncio.timeout(config.timeout)
    upload: _Upload | None = None
    data: Any = body or None
    if body is None and request.body_exists:
        upload = _Upload(request, config.stall_timeout, deadline, config.timeout)
        data = upload.chunks()
        if request.content_length is not None:
            # Sent with the length the client declared, not re-framed as chunked: some upstreams
            # refuse chunked uploads.
            headers["Content-Length"] = str(request.content_length)
    # aiohttp would add its own Content-Type to a body that has none: the upstream sees the client's.
    skip = () if "Content-Type" in request.headers else ("Content-Type",)
    try:
        async with deadline:
            if body is not None and config.retry:
                upstream = await _ask_with_retries(state, request, target, body, headers, skip)
            else:
                upstream = await state.session.request(
                    request.method, target, data=data, allow_redirects=False, headers=headers,
                    skip_auto_headers=skip)
    except (TimeoutError, aiohttp.ClientError) as exc:
        if upload is not None:
            upload.waiting = False
        if upload is not None and upload.failure is not None:
            state.metrics.requests.labels("rejected_408").inc()
            return error_response(408, upload.failure, type_="invalid_request_error",
                                  code="request_body_incomplete", anthropic=anthropic,
                                  headers=[("Connection", "close")])
        if isinstance(exc, TimeoutError):
            state.metrics.upstream_errors.labels("timeout").inc()
            return error_response(504, f"the upstream sent no response within {config.timeout:g} s "
                                       "(--timeout)", type_="upstream_timeout",
                                  code="upstream_timeout", anthropic=anthropic)
        state.metrics.upstream_errors.labels("connect").inc()
        return error_response(502, unreachable(config.upstream, exc, state.redactor),
                              type_="upstream_unreachable", code="upstream_unreachable",
                              anthropic=anthropic)
    if upload is not None:
        upload.waiting = False
    watch = StallWatch(asyncio.get_running_loop(), config.stall_timeout, upstream.content)
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
