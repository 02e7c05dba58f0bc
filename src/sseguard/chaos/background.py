"""Background (Responses) streams on the chaos server: kept when made (``store_stream``), read
again from an event (``retrieve``, ``GET …/responses/{id}``), cancelled (``cancel``, ``POST
…/responses/{id}/cancel``), as OpenAI's own endpoints do. A stored stream is made again exactly from
what was kept (``chaos.state.StoredStream``); a reading draws a fault of its own.
"""

from __future__ import annotations

import msgspec
from aiohttp import web

from sseguard.chaos.decide import decide
from sseguard.chaos.faults import Decision, Fault
from sseguard.chaos.responding import (
    HTTP_ERROR_MESSAGES,
    SERVER_HEADER,
    SSE_HEADERS,
    json_response,
    play,
    response_headers,
)
from sseguard.chaos.state import STATE, ChaosState, StoredStream
from sseguard.core.contract import protocol

#: Background streams one chaos process keeps; the oldest goes first (a bounded test upstream).
STORED_MAX = 4096
#: The faults a read of a stored stream can carry: the ways a stream ends, not what it holds (that
#: was fixed when the answer was made).
RESUME_FAULTS = frozenset({Fault.TRUNCATED, Fault.CUT_MID_FRAME, Fault.TRANSPORT_ERROR,
                           Fault.ERROR_EVENT, Fault.STALLED, Fault.HTTP_ERROR})


def store_stream(state: ChaosState, stream: StoredStream) -> None:
    """Keep a background stream for reading again; past ``STORED_MAX`` the oldest goes."""
    stored = state.stored
    stored[stream.ids.response_id] = stream
    while len(stored) > STORED_MAX:
        oldest = next(iter(stored))
        del stored[oldest]
        state.cancelled.discard(oldest)


async def retrieve(request: web.Request) -> web.StreamResponse:
    """``GET …/responses/{id}?stream=true&starting_after=N``: a background response's stream again,
    from the event after N (OpenAI's own way to resume a broken stream). The read draws a fault of
    its own, as any request does, but only one that ends a stream (``RESUME_FAULTS``)."""
    state = request.app[STATE]
    config, stats = state.config, state.stats
    counter = state.counter
    state.counter += state.step
    stats.requests += 1
    stats.retrievals += 1
    stored = state.stored.get(request.match_info["response_id"])
    query = request.query
    if stored is None:
        stats.statuses[404] += 1
        return json_response(404, {"error": {"message": "No response found with id "
                                     f"'{request.match_info['response_id']}'.",
                                     "type": "invalid_request_error", "param": None,
                                     "code": "not_found"}})
    try:
        after = int(query.get("starting_after", "-1"))
    except ValueError:
        stats.statuses[400] += 1
        return json_response(400, {"error": {"message": "Invalid value for 'starting_after': expected an "
                                     "integer.", "type": "invalid_request_error",
                                     "param": "starting_after", "code": None}})
    if query.get("stream", "false").lower() != "true":
        stats.statuses[200] += 1
        return web.Response(body=_stored_body(state, stored), content_type="application/json")
    stats.inflight += 1
    try:
        # Under ``first_answer`` a reading is a later request of the conversation: whole.
        drawn = decide(config, counter, inflight=state.load_of(stats.inflight),
                       elapsed_s=state.clock() - state.started, forced=None,
                       force=config.first_answer is not None, api=str(stored.writer.api))
        reading = drawn if drawn.fault in RESUME_FAULTS else Decision(None)
        if reading.fault is None and drawn.fault is not None:
            stats.skipped[str(drawn.fault)] += 1
        stats.faults[reading.header] += 1
        headers = response_headers(stored.ids, reading, stats.inflight)
        if reading.fault is Fault.HTTP_ERROR:
            status = config.options.http_statuses[reading.variant % len(config.options.http_statuses)]
            stats.statuses[status] += 1
            message = HTTP_ERROR_MESSAGES.get(status, f"upstream error {status}")
            return json_response(status, protocol(stored.writer.api).status_error(status, message), headers)
        stats.statuses[200] += 1
        stats.streams += 1
        assert stored.writer.resume is not None
        plan = stored.writer.resume(config, stored.req, stored.decision, reading, stored.ids,
                                    stored.answers, after)
        response = web.StreamResponse(status=200, headers={**headers, **SSE_HEADERS})
        await response.prepare(request)
        return await play(request, response, plan, state)
    finally:
        stats.inflight -= 1


def _stored_body(state: ChaosState, stored: StoredStream) -> bytes:
    """A stored response as one object; a cancelled one says ``"status": "cancelled"``."""
    body = stored.writer.body(state.config, stored.req, stored.decision, stored.ids, stored.answers)
    if stored.ids.response_id not in state.cancelled:
        return body
    obj = msgspec.json.decode(body)
    obj["status"] = "cancelled"
    return msgspec.json.encode(obj)


async def cancel(request: web.Request) -> web.Response:
    """``POST …/responses/{id}/cancel``: stop a background response (OpenAI's own endpoint). The
    response's status becomes ``cancelled``; cancelling it again answers the same. Chaos made the
    answer up front, so nothing is left to stop: the count (``cancels``) is what a test reads."""
    state = request.app[STATE]
    stats = state.stats
    rid = request.match_info["response_id"]
    stored = state.stored.get(rid)
    if stored is None:
        stats.statuses[404] += 1
        return json_response(404, {"error": {"message": f"No response found with id '{rid}'.",
                                     "type": "invalid_request_error", "param": None,
                                     "code": "not_found"}})
    if rid not in state.cancelled:
        state.cancelled.add(rid)
        stats.cancels += 1
    stats.statuses[200] += 1
    return web.Response(body=_stored_body(state, stored), content_type="application/json",
                        headers={"Server": SERVER_HEADER})


