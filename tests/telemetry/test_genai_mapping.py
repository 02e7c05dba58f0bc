"""``telemetry.genai``: a verdict and its call's facts as the GenAI conventions' attributes, sans-IO
(no OpenTelemetry needed). The span is ERROR exactly when the policy fails the stream, with
``error.type`` what failed it; a client that left is no upstream error; findings are events."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from sseguard.core.policy import PRESETS, Policy
from sseguard.core.verdict import Api, Ending, Finding, FindingKind, Verdict
from sseguard.telemetry.genai import (
    MAX_FINDING_EVENTS,
    Attempt,
    MeasuredCall,
    metrics_of,
    request_model,
    span_of,
)

CHAT_MESSAGE = {"id": "chatcmpl-1", "model": "served-model", "choices": [
    {"index": 0, "message": {"role": "assistant", "content": "Hi"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 9, "completion_tokens": 3,
              "prompt_tokens_details": {"cached_tokens": 4}}}


def call(verdict: Verdict, policy: Policy | None = None, **facts: object) -> MeasuredCall:
    return MeasuredCall(verdict=verdict, policy=policy or Policy(), start_ns=1_000_000_000,
                duration_s=2.5, **facts)  # type: ignore[arg-type]


def test_a_complete_chat_stream_in_the_conventions_words() -> None:
    verdict = Verdict(Ending.COMPLETE, message=CHAT_MESSAGE, chunks=4, bytes=400,
                      first_id="chatcmpl-1")
    plan = span_of(call(verdict, request_model="asked-model", ttfc_s=0.25,
                        server_address="10.0.0.5", server_port=8000))
    assert plan.name == "chat asked-model"
    assert (plan.start_ns, plan.end_ns) == (1_000_000_000, 3_500_000_000)
    assert plan.error_type is None and plan.description is None and plan.events == ()
    assert plan.attributes == {
        "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "asked-model", "gen_ai.response.model": "served-model",
        "server.address": "10.0.0.5", "server.port": 8000, "gen_ai.request.stream": True,
        "sseguard.protocol": "chat", "gen_ai.response.finish_reasons": ("stop",),
        "gen_ai.response.id": "chatcmpl-1", "gen_ai.response.time_to_first_chunk": 0.25,
        "gen_ai.usage.input_tokens": 9, "gen_ai.usage.output_tokens": 3,
        "gen_ai.usage.cache_read.input_tokens": 4, "sseguard.stream.ending": "complete",
        "sseguard.stream.chunks": 4, "sseguard.stream.bytes": 400}


def test_a_truncated_stream_is_an_error_with_its_ending_and_finding_events() -> None:
    verdict = Verdict(Ending.TRUNCATED, findings=(
        Finding(FindingKind.TOOL_CALL_UNTERMINATED, "arguments cut at sk-abcdefghijklmnopqrstuv", 3, 120),),
        message={"choices": [{"index": 0, "finish_reason": None}]}, api="chat")
    plan = span_of(call(verdict))
    assert plan.error_type == "truncated"
    assert plan.attributes["error.type"] == "truncated"
    assert plan.attributes["gen_ai.response.finish_reasons"] == ()
    assert plan.attributes["sseguard.policy"] == "strict"
    assert plan.description == "the stream failed the policy: truncated"
    (event,) = plan.events
    assert event.name == "sseguard.finding"
    assert event.attributes["sseguard.finding.kind"] == "tool_call_unterminated"
    assert (event.attributes["sseguard.finding.frame"], event.attributes["sseguard.finding.offset"]) \
        == (3, 120)
    assert "sk-abcdefghijklmnopqrstuv" not in str(event.attributes)  # redacted before it leaves


def test_a_finding_the_policy_does_not_tolerate_is_the_error_type() -> None:
    verdict = Verdict(Ending.COMPLETE, findings=(Finding(FindingKind.TOOL_ARGS_INVALID_JSON),))
    assert span_of(call(verdict)).error_type == "tool_args_invalid_json"
    lenient = Policy.from_spec("strict", "tool_args_invalid_json")
    assert span_of(call(verdict, lenient)).error_type is None


def test_a_resumed_stream_names_its_attempts_and_the_bytes_it_resumed_after() -> None:
    verdict = Verdict(Ending.COMPLETE, message=CHAT_MESSAGE)
    plan = span_of(call(verdict, healed="resume", heal_attempts=2, heal_tokens=40,
                        heal_dialect="vllm",
                        attempts=(Attempt("truncated", 700), Attempt("cut_mid_frame", 300))))
    assert plan.error_type is None
    attrs = plan.attributes
    assert (attrs["sseguard.heal.how"], attrs["sseguard.heal.attempts"], attrs["sseguard.heal.tokens"],
            attrs["sseguard.heal.dialect"], attrs["sseguard.heal.resumed_bytes"]) == \
        ("resume", 2, 40, "vllm", 1000)
    assert [(e.name, e.attributes["sseguard.stream.ending"]) for e in plan.events] == \
        [("sseguard.heal.attempt", "truncated"), ("sseguard.heal.attempt", "cut_mid_frame")]
    assert metrics_of(call(verdict, healed="resume")).ending_attributes == \
        {"sseguard.protocol": "chat", "sseguard.stream.ending": "complete", "sseguard.heal.how": "resume"}


def test_each_protocol_names_its_provider_operation_model_and_tokens() -> None:
    responses = Verdict(Ending.COMPLETE, api="responses", message={
        "model": "gpt-x", "status": "completed", "usage": {"input_tokens": 5, "output_tokens": 7}})
    messages = Verdict(Ending.COMPLETE, api="messages", message={
        "model": "claude-x", "stop_reason": "end_turn",
        "usage": {"input_tokens": 5, "output_tokens": 8, "cache_read_input_tokens": 10}})
    gemini = Verdict(Ending.COMPLETE, api="gemini", message={
        "modelVersion": "gemini-x", "candidates": [{"finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 6, "candidatesTokenCount": 9}})
    got = [(a["gen_ai.provider.name"], a["gen_ai.operation.name"], a["gen_ai.response.model"],
            a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"],
            a["gen_ai.response.finish_reasons"])
           for a in (span_of(call(v)).attributes for v in (responses, messages, gemini))]
    assert got == [("openai", "chat", "gpt-x", 5, 7, ("completed",)),
                   ("anthropic", "chat", "claude-x", 15, 8, ("end_turn",)),
                   ("gcp.gemini", "generate_content", "gemini-x", 6, 9, ("STOP",))]


def test_the_request_model_comes_from_the_body_or_geminis_path() -> None:
    assert request_model("chat", {"model": "m1"}, "/v1/chat/completions") == "m1"
    assert request_model("gemini", None, "/v1beta/models/gemini-2.5-pro:streamGenerateContent") \
        == "gemini-2.5-pro"
    assert request_model("messages", {"messages": []}, "/v1/messages") is None


@given(ending=st.sampled_from(list(Ending)), kinds=st.lists(st.sampled_from(list(FindingKind)), max_size=40),
       preset=st.sampled_from(sorted(PRESETS)), gone=st.booleans(), api=st.sampled_from(list(Api)))
def test_the_span_is_an_error_exactly_when_the_policy_fails_the_stream(
        ending: Ending, kinds: list[FindingKind], preset: str, gone: bool, api: Api) -> None:
    policy = Policy.from_spec(preset)
    verdict = Verdict(ending, findings=tuple(Finding(k) for k in kinds), api=str(api))
    plan = span_of(call(verdict, policy, client_gone=gone))
    expected = None if gone else policy.failure(verdict)
    assert plan.error_type == expected
    assert plan.attributes.get("error.type") == expected
    assert metrics_of(call(verdict, policy, client_gone=gone)).attributes.get("error.type") == expected
    assert plan.attributes["sseguard.stream.ending"] == ("client_disconnect" if gone else str(ending))
    assert ("sseguard.policy" in plan.attributes) is (expected is not None)
    assert len(plan.events) == min(len(kinds), MAX_FINDING_EVENTS)
    assert all(isinstance(r, str) for r in plan.attributes["gen_ai.response.finish_reasons"])
