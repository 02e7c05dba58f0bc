"""The official ``openai`` (3.x) and ``anthropic`` (2.x) SDKs against the chaos server's Responses and
Messages endpoints: healthy streams parse fully, sync and async, and the final objects the SDK helpers
accumulate equal the non-streamed answer; then what each SDK does on each bad ending, measured."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from sseguard.chaos import ChaosConfig, ChaosServer, FaultOptions, Pacing, run_chaos_in_thread

WEATHER = {"type": "object", "properties": {"location": {"type": "string"},
                                            "days": {"type": "integer"}},
           "required": ["location"]}
RESPONSES_TOOL: Any = {"type": "function", "name": "get_weather", "description": "Weather.",
                       "parameters": WEATHER}
MESSAGES_TOOL: Any = {"name": "get_weather", "description": "Weather.", "input_schema": WEATHER}
ASK_TOOL = "Call get_weather for Paris."
USER: Any = [{"role": "user", "content": "Say something."}]
TOKENS = 8


@pytest.fixture(scope="module")
def server() -> Iterator[ChaosServer]:
    with run_chaos_in_thread(ChaosConfig(seed=5, pacing=Pacing(tokens=TOKENS,
                                                               reasoning_tokens=4))) as s:
        yield s


def _openai(server: ChaosServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url, api_key="sk-test", max_retries=0)


def _async_openai(server: ChaosServer) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=server.url, api_key="sk-test", max_retries=0)


def _anthropic(server: ChaosServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.url.removesuffix("/v1"), api_key="sk-ant-test",
                               max_retries=0)


def _async_anthropic(server: ChaosServer) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(base_url=server.url.removesuffix("/v1"),
                                    api_key="sk-ant-test", max_retries=0)


# ── Responses ────────────────────────────────────────────────────────────────────────────────────

RESPONSES_CASES: dict[str, dict[str, Any]] = {
    "text": {"input": "Say something."},
    "tool call": {"input": ASK_TOOL, "tools": [RESPONSES_TOOL]},
    "reasoning and text": {"input": "Think, then say something.", "reasoning": {"effort": "medium"}},
    "reasoning and tool call": {"input": [{"role": "user", "content": ASK_TOOL}],
                                "tools": [RESPONSES_TOOL], "reasoning": {"effort": "low"}},
}


def _check_raw_responses_events(events: list[Any]) -> dict[str, Any]:
    """What a client sees in the raw events: the lifecycle, +1 sequence numbers, joined deltas."""
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert [e.type for e in events[:2]] == ["response.created", "response.in_progress"]
    assert events[-1].type == "response.completed"
    final = events[-1].response
    assert final.id.startswith("resp_") and final.status == "completed"
    assert {e.response.id for e in events if hasattr(e, "response")} == {final.id}
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    args = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
    summary = "".join(e.delta for e in events
                      if e.type == "response.reasoning_summary_text.delta")
    opened = [e.output_index for e in events if e.type == "response.output_item.added"]
    closed = [e.output_index for e in events if e.type == "response.output_item.done"]
    assert opened == closed == list(range(len(final.output)))
    return {"text": text, "args": args, "summary": summary, "final": final}


def _responses_summary(response: Any) -> dict[str, Any]:
    """The parts of a final ``Response`` both the stream helper and a plain create must agree on."""
    out: dict[str, Any] = {"status": response.status, "text": response.output_text,
                           "usage": response.usage.model_dump(), "items": []}
    for item in response.output:
        if item.type == "function_call":
            out["items"].append((item.type, item.id, item.call_id, item.name, item.arguments))
        elif item.type == "reasoning":  # item ids differ per response: only their kind is compared
            assert item.id.startswith("rs_")
            out["items"].append((item.type, [s.text for s in item.summary]))
        else:
            assert item.id.startswith("msg_")
            out["items"].append((item.type, [c.text for c in item.content]))
    return out


def _assert_responses_answer(case: str, raw: dict[str, Any], streamed: Any, plain: Any) -> None:
    assert _responses_summary(streamed) == _responses_summary(plain)
    assert _responses_summary(raw["final"]) == _responses_summary(plain)
    assert streamed.output_text == raw["text"]
    kinds = [item.type for item in plain.output]
    if "tool call" in case:
        calls = [item for item in plain.output if item.type == "function_call"]
        assert kinds[-1] == "function_call" and calls[0].name == "get_weather"
        assert calls[0].call_id.startswith("call_") and calls[0].id.startswith("fc_")
        assert raw["args"] == calls[0].arguments
        assert isinstance(json.loads(calls[0].arguments)["location"], str)
    else:
        assert kinds[-1] == "message" and len(raw["text"].split()) == TOKENS
    if "reasoning" in case:
        assert kinds[0] == "reasoning" and raw["summary"]
        assert plain.output[0].summary[0].text == raw["summary"]
        assert plain.usage.output_tokens_details.reasoning_tokens > 0
    assert plain.usage.output_tokens > 0 and plain.usage.input_tokens > 0


@pytest.mark.parametrize("case", list(RESPONSES_CASES))
def test_openai_sdk_parses_responses_streams_sync(server: ChaosServer, case: str) -> None:
    kwargs = {"model": "chaos-1", **RESPONSES_CASES[case]}
    with _openai(server) as client:
        raw = _check_raw_responses_events(list(client.responses.create(stream=True, **kwargs)))
        with client.responses.stream(**kwargs) as stream:
            streamed = stream.get_final_response()
        plain = client.responses.create(**kwargs)
    _assert_responses_answer(case, raw, streamed, plain)


@pytest.mark.parametrize("case", list(RESPONSES_CASES))
async def test_openai_sdk_parses_responses_streams_async(server: ChaosServer, case: str) -> None:
    kwargs = {"model": "chaos-1", **RESPONSES_CASES[case]}
    async with _async_openai(server) as client:
        raw = _check_raw_responses_events(
            [e async for e in await client.responses.create(stream=True, **kwargs)])
        async with client.responses.stream(**kwargs) as stream:
            streamed = await stream.get_final_response()
        plain = await client.responses.create(**kwargs)
    _assert_responses_answer(case, raw, streamed, plain)


def test_openai_sdk_sees_max_output_tokens_as_an_incomplete_response() -> None:
    with run_chaos_in_thread(ChaosConfig(pacing=Pacing(tokens=40))) as server, \
            _openai(server) as client:
        events = list(client.responses.create(model="chaos-1", input="Say something.",
                                              max_output_tokens=16, stream=True))
        plain = client.responses.create(model="chaos-1", input="Say something.",
                                        max_output_tokens=16)
        # Measured: the helper takes this legitimate stop for a broken stream (docs/protocols.md).
        with pytest.raises(RuntimeError, match=r"response\.completed"), client.responses.stream(
                model="chaos-1", input="Say something.", max_output_tokens=16) as stream:
            stream.get_final_response()
    assert events[-1].type == "response.incomplete"
    assert events[-1].response.incomplete_details.reason == "max_output_tokens"
    assert plain.status == "incomplete" and plain.incomplete_details.reason == "max_output_tokens"
    assert [e.sequence_number for e in events] == list(range(len(events)))


def test_tool_result_gets_a_text_answer_on_responses(server: ChaosServer) -> None:
    with _openai(server) as client:
        first = client.responses.create(model="chaos-1", input=ASK_TOOL, tools=[RESPONSES_TOOL])
        call = first.output[-1]
        assert call.type == "function_call"
        second = client.responses.create(model="chaos-1", tools=[RESPONSES_TOOL], input=[
            {"role": "user", "content": ASK_TOOL}, call.model_dump(exclude_none=True),
            {"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}])
    assert [item.type for item in second.output] == ["message"] and second.output_text


# ── Messages ─────────────────────────────────────────────────────────────────────────────────────

MESSAGES_CASES: dict[str, dict[str, Any]] = {
    "text": {"messages": USER},
    "tool call": {"messages": [{"role": "user", "content": ASK_TOOL}], "tools": [MESSAGES_TOOL]},
    "thinking and text": {"messages": USER,
                          "thinking": {"type": "enabled", "budget_tokens": 2048}},
    "thinking and tool call": {"messages": [{"role": "user", "content": ASK_TOOL}],
                               "tools": [MESSAGES_TOOL],
                               "thinking": {"type": "enabled", "budget_tokens": 1024}},
}


def _check_raw_messages_events(events: list[Any]) -> dict[str, Any]:
    types = [e.type for e in events]
    assert types[0] == "message_start" and types[-2:] == ["message_delta", "message_stop"]
    assert "ping" not in types  # the SDK drops keep-alives (the server sends one: test_chaos_messages)
    starts = [e.index for e in events if e.type == "content_block_start"]
    stops = [e.index for e in events if e.type == "content_block_stop"]
    assert starts == stops == list(range(len(starts)))
    deltas = [e.delta for e in events if e.type == "content_block_delta"]
    assert events[0].message.id.startswith("msg_")
    return {"id": events[0].message.id, "stop_reason": events[-2].delta.stop_reason,
            "output_tokens": events[-2].usage.output_tokens,
            "text": "".join(d.text for d in deltas if d.type == "text_delta"),
            "thinking": "".join(d.thinking for d in deltas if d.type == "thinking_delta"),
            "json": "".join(d.partial_json for d in deltas if d.type == "input_json_delta"),
            "signatures": [d.signature for d in deltas if d.type == "signature_delta"]}


def _message_summary(message: Any) -> dict[str, Any]:
    """Ids and thinking signatures are per response; everything else must be the same answer."""
    content = [block.model_dump(exclude_none=True) for block in message.content]
    for block in content:
        if block["type"] == "thinking":
            assert len(block.pop("signature")) >= 64
    return {"stop_reason": message.stop_reason,
            "usage": (message.usage.input_tokens, message.usage.output_tokens), "content": content}


def _assert_messages_answer(case: str, raw: dict[str, Any], streamed: Any, plain: Any) -> None:
    assert _message_summary(streamed) == _message_summary(plain)
    assert streamed.id.startswith("msg_") and raw["id"] != streamed.id  # one id per response
    assert raw["stop_reason"] == plain.stop_reason
    assert raw["output_tokens"] == plain.usage.output_tokens
    kinds = [block.type for block in plain.content]
    if "tool call" in case:
        assert plain.stop_reason == "tool_use" and kinds[-1] == "tool_use"
        block = plain.content[-1]
        assert block.name == "get_weather" and block.id.startswith("toolu_")
        assert json.loads(raw["json"]) == block.input
    else:
        assert plain.stop_reason == "end_turn" and kinds[-1] == "text"
        assert raw["text"] == plain.content[-1].text and len(raw["text"].split()) == TOKENS
    if "thinking" in case:
        assert kinds[0] == "thinking" and raw["thinking"] == plain.content[0].thinking
        assert len(raw["signatures"]) == 1 and raw["signatures"][0] != streamed.content[0].signature


@pytest.mark.parametrize("case", list(MESSAGES_CASES))
def test_anthropic_sdk_parses_messages_streams_sync(server: ChaosServer, case: str) -> None:
    kwargs = {"model": "chaos-1", "max_tokens": 4096, **MESSAGES_CASES[case]}
    with _anthropic(server) as client:
        raw = _check_raw_messages_events(list(client.messages.create(stream=True, **kwargs)))
        with client.messages.stream(**kwargs) as stream:
            streamed = stream.get_final_message()
        plain = client.messages.create(**kwargs)
    _assert_messages_answer(case, raw, streamed, plain)


@pytest.mark.parametrize("case", list(MESSAGES_CASES))
async def test_anthropic_sdk_parses_messages_streams_async(server: ChaosServer, case: str) -> None:
    kwargs = {"model": "chaos-1", "max_tokens": 4096, **MESSAGES_CASES[case]}
    async with _async_anthropic(server) as client:
        raw = _check_raw_messages_events(
            [e async for e in await client.messages.create(stream=True, **kwargs)])
        async with client.messages.stream(**kwargs) as stream:
            streamed = await stream.get_final_message()
        plain = await client.messages.create(**kwargs)
    _assert_messages_answer(case, raw, streamed, plain)


def test_anthropic_sdk_sees_max_tokens_as_its_stop_reason(server: ChaosServer) -> None:
    with _anthropic(server) as client, client.messages.stream(
            model="chaos-1", max_tokens=3, messages=USER) as stream:
        final = stream.get_final_message()
    assert final.stop_reason == "max_tokens" and len(final.content[0].text.split()) == 3


def test_tool_result_gets_a_text_answer_on_messages(server: ChaosServer) -> None:
    ask: Any = {"role": "user", "content": ASK_TOOL}
    with _anthropic(server) as client:
        first = client.messages.create(model="chaos-1", max_tokens=1024, messages=[ask],
                                       tools=[MESSAGES_TOOL])
        use = first.content[-1]
        assert use.type == "tool_use"
        second = client.messages.create(model="chaos-1", max_tokens=1024, tools=[MESSAGES_TOOL],
                                        messages=[ask, {"role": "assistant",
                                                        "content": first.content},
                                                  {"role": "user", "content": [
                                                      {"type": "tool_result",
                                                       "tool_use_id": use.id,
                                                       "content": "sunny"}]}])
    assert second.stop_reason == "end_turn" and [b.type for b in second.content] == ["text"]


# ── what each SDK does on each bad ending, measured ──────────────────────────────────────────────

SILENT = "ends silently"
#: The measured table (openai 3.x, anthropic ≥ 2.17; earlier 2.x let httpx2's ReadError and
#: ReadTimeout out of a broken body). Rows are the endings the chaos server injects
#: (the Responses error event in each of its three forms, chat's in both); columns the ways an
#: application reads a stream: the raw iterator of ``create(stream=True)`` and the helper that
#: accumulates the final object (``get_final_response``, ``get_final_message``,
#: ``get_final_completion``).
SDK_TABLE: dict[str, dict[str, str]] = {
    "truncated": {
        "chat create": SILENT, "chat stream": SILENT,
        "responses create": SILENT, "responses stream": "RuntimeError",
        "messages create": SILENT, "messages stream": SILENT},
    "no_done": {
        "chat create": SILENT, "chat stream": SILENT,
        "messages create": SILENT, "messages stream": SILENT},
    "no_finish": {
        "chat create": SILENT, "chat stream": SILENT,
        "responses create": SILENT, "responses stream": "RuntimeError",
        "messages create": SILENT, "messages stream": SILENT},
    "cut_mid_frame": {
        "chat create": SILENT, "chat stream": SILENT,
        "responses create": SILENT, "responses stream": "RuntimeError",
        "messages create": SILENT, "messages stream": SILENT},
    "transport_error": {
        "chat create": "openai.APIConnectionError", "chat stream": "openai.APIConnectionError",
        "responses create": "openai.APIConnectionError",
        "responses stream": "openai.APIConnectionError",
        "messages create": "anthropic.APIConnectionError",
        "messages stream": "anthropic.APIConnectionError"},
    "error_event (chat data: {error}, then [DONE])": {
        "chat create": "openai.APIError", "chat stream": "openai.APIError"},
    "error_event (chat event: error)": {
        "chat create": "openai.APIError", "chat stream": "openai.APIError"},
    "error_event (responses flat error event)": {
        "responses create": SILENT, "responses stream": "RuntimeError"},
    "error_event (responses nested error: {…})": {
        "responses create": "openai.APIError", "responses stream": "openai.APIError"},
    "error_event (responses response.failed)": {
        "responses create": SILENT, "responses stream": "RuntimeError"},
    "error_event (messages event: error)": {
        "messages create": "anthropic.APIStatusError",
        "messages stream": "anthropic.APIStatusError"},
    "http_error": {
        "chat create": "openai.InternalServerError", "chat stream": "openai.InternalServerError",
        "responses create": "openai.InternalServerError",
        "responses stream": "openai.InternalServerError",
        "messages create": "anthropic.InternalServerError",
        "messages stream": "anthropic.InternalServerError"},
    "empty": {
        "chat create": SILENT, "chat stream": "AssertionError",
        "responses create": SILENT, "responses stream": "RuntimeError",
        "messages create": SILENT, "messages stream": "AssertionError"},
    "stalled": {
        "chat create": "openai.APITimeoutError", "chat stream": "openai.APITimeoutError",
        "responses create": "openai.APITimeoutError", "responses stream": "openai.APITimeoutError",
        "messages create": "anthropic.APITimeoutError",
        "messages stream": "anthropic.APITimeoutError"},
}
COLUMNS = ["chat create", "chat stream", "responses create", "responses stream",
           "messages create", "messages stream"]
#: Row → (fault injected, chat error_event_form, responses_error_form).
ROW_FAULTS: dict[str, tuple[str, str, str]] = {
    "error_event (chat data: {error}, then [DONE])": ("error_event", "data", "any"),
    "error_event (chat event: error)": ("error_event", "event", "any"),
    "error_event (responses flat error event)": ("error_event", "both", "flat"),
    "error_event (responses nested error: {…})": ("error_event", "both", "nested"),
    "error_event (responses response.failed)": ("error_event", "both", "failed"),
    "error_event (messages event: error)": ("error_event", "both", "any"),
}
#: The client timeout for the stalled row: generous, the server hangs until the client leaves.
TIMEOUT = 2.0


def _name(exc: BaseException) -> str:
    module = type(exc).__module__.split(".")[0]
    return type(exc).__name__ if module == "builtins" else f"{module}.{type(exc).__name__}"


def _outcome(run: Callable[[], object]) -> str:
    try:
        run()
    except Exception as exc:  # the measurement: whatever the SDK raises is the answer
        return _name(exc)
    return SILENT


async def _async_outcome(run: Callable[[], Awaitable[object]]) -> str:
    try:
        await run()
    except Exception as exc:  # the measurement, as above
        return _name(exc)
    return SILENT


def _sync_runs(server: ChaosServer, inject: str) -> dict[str, Callable[[], object]]:
    headers = {"x-sseguard-inject": inject}
    oa = openai.OpenAI(base_url=server.url, api_key="sk-test", max_retries=0, timeout=TIMEOUT)
    an = anthropic.Anthropic(base_url=server.url.removesuffix("/v1"), api_key="sk-ant-test",
                             max_retries=0, timeout=TIMEOUT)
    chat: Any = {"model": "chaos-1", "messages": USER, "extra_headers": headers}
    resp: Any = {"model": "chaos-1", "input": "Say something.", "extra_headers": headers}
    msgs: Any = {"model": "chaos-1", "max_tokens": 1024, "messages": USER,
                 "extra_headers": headers}

    def chat_stream() -> object:
        with oa.chat.completions.stream(**chat) as stream:
            return stream.get_final_completion()

    def responses_stream() -> object:
        with oa.responses.stream(**resp) as stream:
            return stream.get_final_response()

    def messages_stream() -> object:
        with an.messages.stream(**msgs) as stream:
            return stream.get_final_message()

    return {
        "chat create": lambda: list(oa.chat.completions.create(stream=True, **chat)),
        "chat stream": chat_stream,
        "responses create": lambda: list(oa.responses.create(stream=True, **resp)),
        "responses stream": responses_stream,
        "messages create": lambda: list(an.messages.create(stream=True, **msgs)),
        "messages stream": messages_stream,
    }


def _async_runs(server: ChaosServer, inject: str) -> dict[str, Callable[[], Awaitable[object]]]:
    headers = {"x-sseguard-inject": inject}
    oa = openai.AsyncOpenAI(base_url=server.url, api_key="sk-test", max_retries=0,
                            timeout=TIMEOUT)
    an = anthropic.AsyncAnthropic(base_url=server.url.removesuffix("/v1"),
                                  api_key="sk-ant-test", max_retries=0, timeout=TIMEOUT)
    chat: Any = {"model": "chaos-1", "messages": USER, "extra_headers": headers}
    resp: Any = {"model": "chaos-1", "input": "Say something.", "extra_headers": headers}
    msgs: Any = {"model": "chaos-1", "max_tokens": 1024, "messages": USER,
                 "extra_headers": headers}

    async def chat_create() -> object:
        return [c async for c in await oa.chat.completions.create(stream=True, **chat)]

    async def chat_stream() -> object:
        async with oa.chat.completions.stream(**chat) as stream:
            return await stream.get_final_completion()

    async def responses_create() -> object:
        return [e async for e in await oa.responses.create(stream=True, **resp)]

    async def responses_stream() -> object:
        async with oa.responses.stream(**resp) as stream:
            return await stream.get_final_response()

    async def messages_create() -> object:
        return [e async for e in await an.messages.create(stream=True, **msgs)]

    async def messages_stream() -> object:
        async with an.messages.stream(**msgs) as stream:
            return await stream.get_final_message()

    return {"chat create": chat_create, "chat stream": chat_stream,
            "responses create": responses_create, "responses stream": responses_stream,
            "messages create": messages_create, "messages stream": messages_stream}


def _config(row: str) -> ChaosConfig:
    _, chat_form, responses_form = ROW_FAULTS.get(row, (row, "both", "any"))
    return ChaosConfig(seed=2, pacing=Pacing(tokens=6), options=FaultOptions(
        stall_then="hang", hang_max_s=30, http_statuses=(500,), error_event_form=chat_form,
        responses_error_form=responses_form))


def _fault(row: str) -> str:
    return ROW_FAULTS.get(row, (row, "", ""))[0]


@pytest.mark.parametrize("row", list(SDK_TABLE))
def test_what_each_sdk_does_on_each_bad_ending_sync(row: str) -> None:
    with run_chaos_in_thread(_config(row)) as server:
        runs = _sync_runs(server, _fault(row))
        measured = {col: _outcome(runs[col]) for col in SDK_TABLE[row]}
    assert measured == SDK_TABLE[row]


@pytest.mark.parametrize("row", list(SDK_TABLE))
async def test_what_each_sdk_does_on_each_bad_ending_async(row: str) -> None:
    with run_chaos_in_thread(_config(row)) as server:
        runs = _async_runs(server, _fault(row))
        measured = {col: await _async_outcome(runs[col]) for col in SDK_TABLE[row]}
    assert measured == SDK_TABLE[row]


def test_a_healthy_stream_ends_silently_everywhere() -> None:
    """The control row: without the fault header every column ends silently (so the table's
    "ends silently" cells are the SDKs treating a broken stream like this one)."""
    with run_chaos_in_thread(_config("none")) as server:
        runs = _sync_runs(server, "none")
        assert {col: _outcome(run) for col, run in runs.items()} == dict.fromkeys(COLUMNS, SILENT)


def render_table() -> str:
    """The markdown of ``SDK_TABLE`` as ``docs/protocols.md`` holds it."""
    head = "| ending | " + " | ".join(f"{c.split()[0]} `{c.split()[1]}`" for c in COLUMNS) + " |"
    rows = [head, "|" + "---|" * (len(COLUMNS) + 1)]
    for row, cells in SDK_TABLE.items():
        values = [_cell(cells.get(col)) for col in COLUMNS]
        rows.append(f"| {row} | " + " | ".join(values) + " |")
    return "\n".join(rows) + "\n"


def _cell(value: str | None) -> str:
    if value is None:
        return "–"
    return "**silent**" if value == SILENT else f"raises `{value}`"


def test_the_measured_table_is_the_one_in_the_docs() -> None:
    doc = (Path(__file__).parents[2] / "docs" / "protocols.md").read_text(encoding="utf-8")
    assert render_table() in doc

