"""The protocol registry is complete: every protocol has every facet, and every consumer finds it there.

The expected names, paths and headers are written literally here (an independent oracle), never read
back from the descriptors they check.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from sseguard.chaos.faults import Fault, ServerDialect
from sseguard.chaos.registry import writer_for, writers
from sseguard.chaos.server import make_app
from sseguard.core.contract import (
    Api,
    Protocol,
    Route,
    api_for_path,
    check_body,
    checker_for,
    detect_api,
    protocol,
    protocols,
)
from sseguard.core.contract.request import Format
from sseguard.core.errors import UsageError
from sseguard.core.sse import SSEDecoder
from sseguard.core.verdict import Ending

NAMES = ("chat", "responses", "messages", "gemini")
PATHS = {"chat": "/chat/completions", "responses": "/responses", "messages": "/messages",
         "gemini": "/models/{model}:streamGenerateContent"}
KEY_HEADERS = {"chat": "authorization", "responses": "authorization", "messages": "x-api-key",
               "gemini": "x-goog-api-key"}
_VERTEX = "/projects/{project}/locations/{location}/publishers/google/models/{model}"
SERVED = {"/v1/chat/completions", "/v1/responses", "/v1/messages",
          "/beta/chat/completions",  # chaos only: DeepSeek's chat prefix completion
          "/v1/responses/{response_id}/cancel",  # chaos only: a background response cancelled
          *(f"{mount}{path}:{method}" for mount in ("/v1", "/v1beta")
            for path in ("/models/{model}", _VERTEX)
            for method in ("streamGenerateContent", "generateContent"))}


def test_every_api_member_has_one_descriptor_in_enum_order() -> None:
    assert [str(p.api) for p in protocols()] == list(NAMES)
    assert [a.value for a in Api] == list(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_every_protocol_has_every_facet(name: str) -> None:
    p = protocol(name)
    assert isinstance(p, Protocol) and str(p.api) == name and p.title
    assert p.path == PATHS[name] and p.routes and all(r.path.startswith("/") for r in p.routes)
    assert p.mounts and all(m.startswith("/") and not m.endswith("/") for m in p.mounts)
    assert p.auth.header == KEY_HEADERS[name]
    assert isinstance(p.format, Format) and p.format.api == p.api
    assert p.format.turns_field and p.format.max_tokens_field and p.format.expected
    assert p.checker.api == p.api and p.checker(None).close().api == name
    assert callable(p.assembler)
    assert p.reasons.table and p.terminal_events
    assert p.finish_of({}) in ([], [None])
    relay = p.relay
    assert {Ending.TRUNCATED, Ending.CUT_MID_FRAME, Ending.EMPTY} <= set(relay.messages)
    assert set(p.bad_endings) <= {str(f) for f in Fault} and "truncated" in p.bad_endings
    assert set(p.dialects) <= {str(d) for d in ServerDialect}
    assert writer_for(name).api == p.api


@pytest.mark.parametrize("name", NAMES)
def test_the_relays_error_frame_is_an_error_event_to_the_same_protocols_checker(name: str) -> None:
    frame = protocol(name).relay.error_frame("truncated", "the upstream stopped", b"")
    [event] = SSEDecoder().feed(frame)
    assert protocol(name).relay.upstream_error(event) is not None
    checker = checker_for(name)
    checker.feed(frame)
    verdict = checker.close()
    assert verdict.ending is Ending.ERROR_EVENT
    assert "the upstream stopped" in (verdict.error or "")


@pytest.mark.parametrize(("name", "expected"), [
    ("chat", {"error": {"message": "slow down", "type": "rate_limit_error", "param": None,
                        "code": "rate_limit_exceeded"}}),
    ("responses", {"error": {"message": "slow down", "type": "rate_limit_error", "param": None,
                             "code": "rate_limit_exceeded"}}),
    ("messages", {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}),
    ("gemini", {"error": {"code": 429, "message": "slow down", "status": "RESOURCE_EXHAUSTED"}}),
])
def test_http_error_bodies_are_in_each_apis_own_shape(name: str, expected: dict[str, Any]) -> None:
    assert protocol(name).status_error(429, "slow down") == expected


def test_an_unknown_protocol_is_a_usage_error_listing_the_known_ones() -> None:
    with pytest.raises(UsageError, match=r"unknown api 'soap' \(known: chat, responses, messages, gemini\)"):
        protocol("soap")
    with pytest.raises(UsageError, match="unknown api 'soap'"):
        writer_for("soap")


@pytest.mark.parametrize(("path", "api"), [
    ("/v1/chat/completions", "chat"),
    ("/openai/v1/chat/completions?x=1", "chat"),
    ("/v1/responses", "responses"),
    ("/v1/responses/", "responses"),
    ("/v1/messages", "messages"),
    ("/v1/messages/count_tokens", None),
    ("/v1/responses/resp_1", None),
    ("/v1/models", None),
    ("/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", "gemini"),
    ("/v1/models/gemini-2.5-flash:generateContent", "gemini"),
    ("/v1/projects/p/locations/us-central1/publishers/google/models/gemini-2.5-flash"
     ":streamGenerateContent", "gemini"),
    ("/v1beta/models/gemini-2.5-flash:countTokens", None),
])
def test_the_protocol_is_told_from_the_request_path(path: str, api: str | None) -> None:
    assert api_for_path(path) == api


def test_the_chaos_server_serves_every_protocols_routes() -> None:
    app = make_app()
    posted = {r.resource.canonical for r in app.router.routes()
              if r.method == "POST" and r.resource is not None}
    assert posted == SERVED
    assert [str(w.api) for w in writers()] == list(NAMES)


def test_a_path_template_carries_the_model_and_decides_streaming() -> None:
    # What the fourth protocol (Gemini) needs of a route, shown on a bare Route.
    route = Route("/models/{model}:streamGenerateContent", streams=True)
    assert route.fill(model="gemini-2.5-flash") == "/models/gemini-2.5-flash:streamGenerateContent"
    match = route.pattern.search("/v1beta/models/gemini-2.5-flash:streamGenerateContent")
    assert match is not None and match.group("model") == "gemini-2.5-flash"
    assert route.pattern.search("/v1beta/models/gemini-2.5-flash:generateContent") is None


BODIES = {
    "chat": b'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,'
            b'"delta":{"content":"hi"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n',
    "responses": b'event: response.created\ndata: {"type":"response.created","sequence_number":0,'
                 b'"response":{"id":"resp_1","status":"in_progress","output":[]}}\n\n',
    "messages": b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1",'
                b'"content":[],"usage":{"input_tokens":1,"output_tokens":0}}}\n\n',
    "gemini": b'data: {"candidates":[{"content":{"parts":[{"text":"hi"}],"role":"model"}}],'
              b'"modelVersion":"gemini-2.5-flash","responseId":"r1"}\r\n\r\n',
}


@pytest.mark.parametrize("name", NAMES)
def test_a_body_is_claimed_by_its_own_protocol_only(name: str) -> None:
    assert detect_api(BODIES[name]) == name
    claimed = [str(p.api) for p in protocols()
               for event in SSEDecoder().feed(BODIES[name]) if event.data != "[DONE]"
               if p.claims(json.loads(event.data))]
    assert set(claimed) == {name}


def test_check_body_detects_the_protocol_and_judges_the_whole_body() -> None:
    verdict = check_body(BODIES["chat"])
    assert verdict.api == "chat" and verdict.ending is Ending.COMPLETE
    assert check_body(BODIES["messages"]).api == "messages"
    assert check_body(b": only a comment\n\n").api == "chat"  # nothing claims it: the default
    assert check_body(BODIES["chat"][:-14], api="chat").ending is Ending.NO_DONE


def test_check_body_refuses_text() -> None:
    with pytest.raises(UsageError, match="bytes, not str"):
        check_body("data: {}\n\n")  # type: ignore[arg-type]  # the misuse under test


def test_the_plugins_parametrization_is_the_promised_one() -> None:
    # The public promise of sseguard.testing, written out: a descriptor that dropped a name fails here.
    from sseguard.testing import BAD_ENDINGS, DIALECTS

    assert dict(BAD_ENDINGS) == {
        "chat": ("truncated", "no_done", "no_finish", "cut_mid_frame", "transport_error", "error_event",
                 "http_error", "empty", "tool_call_unterminated"),
        "responses": ("truncated", "no_finish", "cut_mid_frame", "transport_error", "error_event",
                      "http_error", "empty", "tool_call_unterminated"),
        "messages": ("truncated", "no_done", "no_finish", "cut_mid_frame", "transport_error",
                     "error_event", "http_error", "empty", "tool_call_unterminated"),
        "gemini": ("truncated", "cut_mid_frame", "transport_error", "error_event", "http_error",
                   "empty"),
    }
    assert dict(DIALECTS) == {
        "chat": ("no_finish_reason", "no_done", "empty_finish_reason", "usage_choices_null"),
        "responses": ("trailing_done",),
        "messages": ("no_done",),
        "gemini": (),
    }
