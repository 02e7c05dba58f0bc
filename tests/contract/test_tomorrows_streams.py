"""Tomorrow's streams (issue 41): every event, block, delta, part and reason the installed SDKs define,
in a healthy stream written here by hand from the provider's documented shape, is judged complete with
no finding and relayed by the proxy byte for byte; the same stream cut before its end is a bad ending;
every reason that says the model failed — and one no table names — is a failure.

The bodies are literal (JSON objects written out below, framed by the small helpers here); nothing is
built from sseguard's own tables. ``test_every_sdk_name_has_a_healthy_stream_here`` ties the list to
the installed SDKs: a name a new SDK release adds fails there until a body for it is written here.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from sseguard import sdkdrift
from sseguard.core.contract import checker_for
from sseguard.core.verdict import Ending, Verdict
from sseguard.proxy import run_proxy
from support.proxy import Script, proxy_config, raw_post, scripted

E = Ending


def check(api: str, body: bytes) -> Verdict:
    checker = checker_for(api)
    checker.feed(body)
    return checker.close()


def _j(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))


# ── Chat Completions ─────────────────────────────────────────────────────────────────────────────


def chat_body(deltas: list[dict[str, Any]], reason: str = "stop") -> tuple[bytes, int]:
    """Chunks with these deltas, then the finish chunk and ``[DONE]`` (the last two frames)."""
    head = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    frames = [f"data: {_j({**head, 'choices': [{'index': 0, 'delta': d, 'finish_reason': None}]})}\n\n"
              for d in deltas]
    frames.append(f"data: {_j({**head, 'choices': [{'index': 0, 'delta': {}, 'finish_reason': reason}]})}"
                  "\n\n")
    frames.append("data: [DONE]\n\n")
    return "".join(frames).encode(), len("".join(frames[-2:]).encode())


CHAT_DELTAS: dict[str, tuple[list[dict[str, Any]], str]] = {
    "role": ([{"role": "assistant", "content": ""}, {"content": "Hi"}], "stop"),
    "content": ([{"content": "Hello"}, {"content": " there"}], "stop"),
    "reasoning_content": ([{"reasoning_content": "Think."}, {"content": "Hi"}], "stop"),
    "reasoning": ([{"reasoning": "Think."}, {"content": "Hi"}], "stop"),
    "tool_calls": ([{"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                     "function": {"name": "get_weather", "arguments": ""}}]},
                    {"tool_calls": [{"index": 0, "function": {"arguments": '{"city":"Paris"}'}}]}],
                   "tool_calls"),
    "function_call": ([{"role": "assistant", "function_call": {"name": "get_weather",
                                                               "arguments": ""}},
                       {"function_call": {"arguments": '{"city":'}},
                       {"function_call": {"arguments": '"Paris"}'}}], "function_call"),
    "refusal": ([{"role": "assistant", "refusal": "I can't"}, {"refusal": " help with that."}],
                "stop"),
    "audio": ([{"audio": {"id": "audio_1", "data": "UklG", "transcript": "Hi",
                          "expires_at": 1700000000}},
               {"audio": {"data": "RgAA", "transcript": " there"}}], "stop"),
}

#: Every field of a chunk and of a choice the openai SDK defines, in OpenAI's documented shapes
#: (``logprobs`` with its content, ``moderation`` with its input and output, a usage chunk with no
#: choices): written by hand, then the end (the finish chunk, the usage chunk and ``[DONE]``).
CHAT_FIELDS_HEAD = (
    b'data: {"id":"chatcmpl-9","object":"chat.completion.chunk","created":1,"model":"gpt-x",'
    b'"service_tier":"default","system_fingerprint":"fp_1","choices":[{"index":0,"delta":'
    b'{"role":"assistant","content":"Hi"},"logprobs":{"content":[{"token":"Hi","logprob":-0.1,'
    b'"bytes":[72,105],"top_logprobs":[]}],"refusal":null},"finish_reason":null}],'
    b'"obfuscation":"x9"}\n\n')
CHAT_FIELDS_END = (
    b'data: {"id":"chatcmpl-9","object":"chat.completion.chunk","created":1,"model":"gpt-x",'
    b'"service_tier":"default","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{},'
    b'"logprobs":null,"finish_reason":"stop"}],"moderation":{"input":{"type":"moderation_results",'
    b'"model":"omni-moderation-latest","results":[]},"output":{"type":"error","code":"unavailable",'
    b'"message":"moderation is unavailable"}},"obfuscation":"q"}\n\n'
    b'data: {"id":"chatcmpl-9","object":"chat.completion.chunk","created":1,"model":"gpt-x",'
    b'"service_tier":"default","system_fingerprint":"fp_1","choices":[],"usage":{"prompt_tokens":3,'
    b'"completion_tokens":1,"total_tokens":4}}\n\n'
    b'data: [DONE]\n\n')

CHAT_REASONS: dict[str, list[dict[str, Any]]] = {
    "stop": [{"content": "Hi"}],
    "length": [{"content": "Hi"}],
    "content_filter": [{"content": "Hi"}],
    "tool_calls": CHAT_DELTAS["tool_calls"][0],
    "function_call": CHAT_DELTAS["function_call"][0],
}


# ── Responses ────────────────────────────────────────────────────────────────────────────────────


def responses_body(events: list[dict[str, Any]], end: dict[str, Any] | None = None,
                   ) -> tuple[bytes, int]:
    """``response.created``, these events, then the terminal event (the last frame), numbered."""
    created = {"type": "response.created", "response": {
        "id": "resp_1", "object": "response", "created_at": 1, "status": "in_progress",
        "model": "m", "output": []}}
    terminal = end or {"type": "response.completed", "response": {
        "id": "resp_1", "object": "response", "created_at": 1, "status": "completed", "model": "m",
        "output": [], "usage": {"input_tokens": 3, "output_tokens": 5, "total_tokens": 8}}}
    frames = []
    for n, event in enumerate([created, *events, terminal]):
        frames.append(f"event: {event['type']}\ndata: {_j({**event, 'sequence_number': n})}\n\n")
    return "".join(frames).encode(), len(frames[-1].encode())


def _item(item: dict[str, Any], inner: list[dict[str, Any]],
          **done: Any) -> list[dict[str, Any]]:
    """An output item opened, its events, and closed (output index 0) with ``done``'s fields."""
    return [{"type": "response.output_item.added", "output_index": 0, "item": item}, *inner,
            {"type": "response.output_item.done", "output_index": 0,
             "item": {**item, "status": "completed", **done}}]


_AT = {"item_id": "it_1", "output_index": 0}
MESSAGE = {"type": "message", "id": "it_1", "role": "assistant", "status": "in_progress",
           "content": []}
#: Output items with no events of their own (opened and closed), by type.
_OTHER_ITEMS: dict[str, dict[str, Any]] = {
    "function_call_output": {"call_id": "call_1", "output": "20C"},
    "custom_tool_call_output": {"call_id": "call_1", "output": "ok"},
    "computer_call": {"call_id": "call_1", "action": {"type": "screenshot"},
                      "pending_safety_checks": []},
    "computer_call_output": {"call_id": "call_1",
                             "output": {"type": "computer_screenshot", "image_url": "x"}},
    "local_shell_call": {"call_id": "call_1", "action": {"type": "exec", "command": ["ls"],
                                                         "env": {}}},
    "local_shell_call_output": {"output": "a.txt"},
    "apply_patch_call": {"call_id": "call_1", "operation": {"type": "delete_file",
                                                            "path": "a"}},
    "apply_patch_call_output": {"call_id": "call_1", "output": "done"},
    "mcp_approval_request": {"server_label": "s", "name": "echo", "arguments": "{}"},
    "mcp_approval_response": {"approval_request_id": "it_0", "approve": True},
    "compaction": {"encrypted_content": "enc"},
    "tool_search_call": {"arguments": {"query": "weather"}},
    "tool_search_output": {"tools": []},
    "program": {"code": "print(1)"},
    "program_output": {"output": "1"},
    "additional_tools": {"tools": []},
}
RESPONSES_BODIES: dict[str, list[dict[str, Any]]] = {
    "message": _item(MESSAGE, [
        {"type": "response.content_part.added", **_AT, "content_index": 0,
         "part": {"type": "output_text", "text": "", "annotations": []}},
        {"type": "response.output_text.delta", **_AT, "content_index": 0, "delta": "Hi"},
        {"type": "response.output_text.annotation.added", **_AT, "content_index": 0,
         "annotation_index": 0, "annotation": {"type": "url_citation", "url": "https://a.example",
                                               "title": "A", "start_index": 0, "end_index": 2}},
        {"type": "response.output_text.done", **_AT, "content_index": 0, "text": "Hi"},
        {"type": "response.content_part.done", **_AT, "content_index": 0,
         "part": {"type": "output_text", "text": "Hi", "annotations": []}},
        {"type": "response.content_part.added", **_AT, "content_index": 1,
         "part": {"type": "refusal", "refusal": ""}},
        {"type": "response.refusal.delta", **_AT, "content_index": 1, "delta": "No."},
        {"type": "response.refusal.done", **_AT, "content_index": 1, "refusal": "No."},
        {"type": "response.content_part.done", **_AT, "content_index": 1,
         "part": {"type": "refusal", "refusal": "No."}}]),
    "reasoning": _item({"type": "reasoning", "id": "it_1", "summary": []}, [
        {"type": "response.reasoning_summary_part.added", **_AT, "summary_index": 0,
         "part": {"type": "summary_text", "text": ""}},
        {"type": "response.reasoning_summary_text.delta", **_AT, "summary_index": 0,
         "delta": "Plan."},
        {"type": "response.reasoning_summary_text.done", **_AT, "summary_index": 0,
         "text": "Plan."},
        {"type": "response.reasoning_summary_part.done", **_AT, "summary_index": 0,
         "part": {"type": "summary_text", "text": "Plan."}},
        {"type": "response.reasoning_text.delta", **_AT, "content_index": 0, "delta": "Think"},
        {"type": "response.reasoning_text.done", **_AT, "content_index": 0, "text": "Think"}]),
    "function_call": _item({"type": "function_call", "id": "it_1", "call_id": "call_1",
                            "name": "get_weather", "arguments": ""}, [
        {"type": "response.function_call_arguments.delta", **_AT, "delta": '{"city":"Paris"}'},
        {"type": "response.function_call_arguments.done", **_AT,
         "arguments": '{"city":"Paris"}'}], arguments='{"city":"Paris"}'),
    "custom_tool_call": _item({"type": "custom_tool_call", "id": "it_1", "call_id": "call_1",
                               "name": "grep", "input": ""}, [
        {"type": "response.custom_tool_call_input.delta", **_AT, "delta": "foo"},
        {"type": "response.custom_tool_call_input.done", **_AT, "input": "foo"}]),
    "mcp_call": _item({"type": "mcp_call", "id": "it_1", "server_label": "s", "name": "echo",
                       "arguments": ""}, [
        {"type": "response.mcp_call.in_progress", **_AT},
        {"type": "response.mcp_call_arguments.delta", **_AT, "delta": '{"x":1}'},
        {"type": "response.mcp_call_arguments.done", **_AT, "arguments": '{"x":1}'},
        {"type": "response.mcp_call.completed", **_AT},
        {"type": "response.mcp_call.failed", **_AT}]),
    "mcp_list_tools": _item({"type": "mcp_list_tools", "id": "it_1", "server_label": "s",
                             "tools": []}, [
        {"type": "response.mcp_list_tools.in_progress", **_AT},
        {"type": "response.mcp_list_tools.completed", **_AT},
        {"type": "response.mcp_list_tools.failed", **_AT}]),
    "code_interpreter_call": _item({"type": "code_interpreter_call", "id": "it_1", "code": "",
                                    "container_id": "c1", "outputs": []}, [
        {"type": "response.code_interpreter_call.in_progress", **_AT},
        {"type": "response.code_interpreter_call.interpreting", **_AT},
        {"type": "response.code_interpreter_call_code.delta", **_AT, "delta": "1+1"},
        {"type": "response.code_interpreter_call_code.done", **_AT, "code": "1+1"},
        {"type": "response.code_interpreter_call.completed", **_AT}]),
    "file_search_call": _item({"type": "file_search_call", "id": "it_1", "queries": ["q"]}, [
        {"type": "response.file_search_call.in_progress", **_AT},
        {"type": "response.file_search_call.searching", **_AT},
        {"type": "response.file_search_call.completed", **_AT}]),
    "web_search_call": _item({"type": "web_search_call", "id": "it_1",
                              "action": {"type": "search", "query": "q"}}, [
        {"type": "response.web_search_call.in_progress", **_AT},
        {"type": "response.web_search_call.searching", **_AT},
        {"type": "response.web_search_call.completed", **_AT}]),
    "image_generation_call": _item({"type": "image_generation_call", "id": "it_1",
                                    "result": None}, [
        {"type": "response.image_generation_call.in_progress", **_AT},
        {"type": "response.image_generation_call.generating", **_AT},
        {"type": "response.image_generation_call.partial_image", **_AT,
         "partial_image_index": 0, "partial_image_b64": "iVBORw0KGgo="},
        {"type": "response.image_generation_call.completed", **_AT}]),
    "shell_call": _item({"type": "shell_call", "id": "it_1", "call_id": "call_1",
                         "action": {"commands": []}}, [
        {"type": "response.shell_call_command.added", **_AT, "command_index": 0, "command": ""},
        {"type": "response.shell_call_command.delta", **_AT, "command_index": 0, "delta": "ls"},
        {"type": "response.shell_call_command.done", **_AT, "command_index": 0, "command": "ls"}]),
    "shell_call_output": _item({"type": "shell_call_output", "id": "it_1", "call_id": "call_1",
                                "output": []}, [
        {"type": "response.shell_call_output_content.delta", **_AT, "delta": "a.txt"},
        {"type": "response.shell_call_output_content.done", **_AT, "output": "a.txt"}]),
    "audio": [{"type": "response.audio.delta", "delta": "UklG"},
              {"type": "response.audio.done"},
              {"type": "response.audio.transcript.delta", "delta": "Hi"},
              {"type": "response.audio.transcript.done"}],
    "lifecycle": [{"type": "response.queued", "response": {"id": "resp_1", "status": "queued"}},
                  {"type": "response.in_progress", "response": {"id": "resp_1",
                                                                "status": "in_progress"}},
                  {"type": "response.compaction.compacting", "output_index": 0}],
    **{kind: _item({"type": kind, "id": "it_1", **fields}, []) for kind, fields in _OTHER_ITEMS.items()},
}


def incomplete(reason: str) -> dict[str, Any]:
    return {"type": "response.incomplete", "response": {
        "id": "resp_1", "object": "response", "created_at": 1, "status": "incomplete",
        "model": "m", "output": [], "incomplete_details": {"reason": reason},
        "usage": {"input_tokens": 3, "output_tokens": 5, "total_tokens": 8}}}


# ── Messages ─────────────────────────────────────────────────────────────────────────────────────


def messages_body(blocks: list[tuple[dict[str, Any], list[dict[str, Any]]]],
                  stop: str = "end_turn", *, ping: bool = False) -> tuple[bytes, int]:
    """``message_start``, each block started, its deltas, stopped; ``message_delta`` with the stop
    reason and ``message_stop`` (the last two frames)."""
    events: list[dict[str, Any]] = [{"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "m", "content": [],
        "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 3, "output_tokens": 1}}}]
    if ping:
        events.append({"type": "ping"})
    for index, (block, deltas) in enumerate(blocks):
        events.append({"type": "content_block_start", "index": index, "content_block": block})
        events.extend({"type": "content_block_delta", "index": index, "delta": d} for d in deltas)
        events.append({"type": "content_block_stop", "index": index})
    events.append({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                   "usage": {"output_tokens": 5}})
    events.append({"type": "message_stop"})
    frames = [f"event: {e['type']}\ndata: {_j(e)}\n\n" for e in events]
    return "".join(frames).encode(), len("".join(frames[-2:]).encode())


Block = tuple[dict[str, Any], list[dict[str, Any]]]
_TEXT: Block = ({"type": "text", "text": ""}, [{"type": "text_delta", "text": "Hi"},
                                          {"type": "citations_delta", "citation": {
                                              "type": "char_location", "cited_text": "Hi",
                                              "document_index": 0, "document_title": "d",
                                              "start_char_index": 0, "end_char_index": 2}}])
_INPUT: list[dict[str, Any]] = [{"type": "input_json_delta", "partial_json": '{"query":'},
          {"type": "input_json_delta", "partial_json": '"weather"}'}]
MESSAGES_BLOCKS: dict[str, tuple[list[tuple[dict[str, Any], list[dict[str, Any]]]], str]] = {
    "text": ([_TEXT], "end_turn"),
    "thinking": ([({"type": "thinking", "thinking": "", "signature": ""},
                   [{"type": "thinking_delta", "thinking": "Hmm."},
                    {"type": "signature_delta", "signature": "EqQB"}]), _TEXT], "end_turn"),
    "redacted_thinking": ([({"type": "redacted_thinking", "data": "EmwKAhgB"}, []), _TEXT],
                          "end_turn"),
    "tool_use": ([({"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}},
                   [{"type": "input_json_delta", "partial_json": '{"city":"Paris"}'}])],
                 "tool_use"),
    "server_tool_use": ([({"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search",
                           "input": {}}, _INPUT)], "pause_turn"),
    "mcp_tool_use": ([({"type": "mcp_tool_use", "id": "mcptoolu_1", "name": "echo",
                        "server_name": "srv", "input": {}}, _INPUT)], "end_turn"),
    "mcp_tool_result": ([({"type": "mcp_tool_result", "tool_use_id": "mcptoolu_1",
                           "is_error": False, "content": [{"type": "text", "text": "ok"}]}, []),
                         _TEXT], "end_turn"),
    "mcp_tool_listing": ([({"type": "mcp_tool_listing", "server_name": "srv", "tools": []}, []),
                          _TEXT], "end_turn"),
    "web_search_tool_result": ([({"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1",
                                  "content": [{"type": "web_search_result",
                                               "url": "https://a.example", "title": "A",
                                               "encrypted_content": "enc",
                                               "page_age": None}]}, []), _TEXT], "end_turn"),
    "web_fetch_tool_result": ([({"type": "web_fetch_tool_result", "tool_use_id": "srvtoolu_1",
                                 "content": {"type": "web_fetch_result",
                                             "url": "https://a.example",
                                             "content": {"type": "document", "source": {
                                                 "type": "text", "media_type": "text/plain",
                                                 "data": "hi"}}}}, []), _TEXT], "end_turn"),
    "code_execution_tool_result": ([({"type": "code_execution_tool_result",
                                      "tool_use_id": "srvtoolu_1",
                                      "content": {"type": "code_execution_result", "stdout": "2",
                                                  "stderr": "", "return_code": 0,
                                                  "content": []}}, []), _TEXT], "end_turn"),
    "bash_code_execution_tool_result": ([({"type": "bash_code_execution_tool_result",
                                           "tool_use_id": "srvtoolu_1",
                                           "content": {"type": "bash_code_execution_result",
                                                       "stdout": "ok", "stderr": "",
                                                       "return_code": 0, "content": []}}, []),
                                         _TEXT], "end_turn"),
    "text_editor_code_execution_tool_result": ([({
        "type": "text_editor_code_execution_tool_result", "tool_use_id": "srvtoolu_1",
        "content": {"type": "text_editor_code_execution_view_result", "file_type": "text",
                    "content": "x", "num_lines": 1, "start_line": 1, "total_lines": 1}}, []),
        _TEXT], "end_turn"),
    "tool_search_tool_result": ([({"type": "tool_search_tool_result", "tool_use_id": "srvtoolu_1",
                                   "content": {"type": "tool_search_tool_search_result",
                                               "tool_references": [{"type": "tool_reference",
                                                                    "tool_name": "x"}]}}, []),
                                 _TEXT], "end_turn"),
    "advisor_tool_result": ([({"type": "advisor_tool_result", "tool_use_id": "srvtoolu_1",
                               "content": {"type": "advisor_result", "text": "ok"}}, []), _TEXT],
                            "end_turn"),
    "container_upload": ([({"type": "container_upload", "file_id": "file_1"}, []), _TEXT],
                         "end_turn"),
    "compaction": ([({"type": "compaction", "content": None},
                     [{"type": "compaction_delta", "content": "Summary so far.",
                       "encrypted_content": "enc"}])], "compaction"),
    "fallback": ([({"type": "fallback"}, []), _TEXT], "end_turn"),
}


# ── Gemini ───────────────────────────────────────────────────────────────────────────────────────


def gemini_body(parts: list[list[dict[str, Any]]], reason: str = "STOP") -> tuple[bytes, int]:
    """One record per list of parts, then the record with the finish reason (the last frame)."""
    tail: dict[str, Any] = {"usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 2,
                              "totalTokenCount": 5}, "modelVersion": "m", "responseId": "r1"}
    records = [{"candidates": [{"content": {"role": "model", "parts": p}, "index": 0}],
                "modelVersion": "m", "responseId": "r1"} for p in parts]
    records.append({"candidates": [{"content": {"role": "model", "parts": [{"text": ""}]},
                                    "finishReason": reason, "index": 0}], **tail})
    frames = [f"data: {_j(r)}\r\n\r\n" for r in records]
    return "".join(frames).encode(), len(frames[-1].encode())


_PNG: dict[str, Any] = {"mimeType": "image/png", "data": "iVBORw0KGgo="}
GEMINI_PARTS: dict[str, list[list[dict[str, Any]]]] = {
    "text": [[{"text": "Hi"}]],
    "thought": [[{"text": "Hmm.", "thought": True}], [{"text": "Hi"}]],
    "thoughtSignature": [[{"text": "Hi", "thoughtSignature": "c2lnbmF0dXJl"}]],
    "functionCall": [[{"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}}]],
    # A call whose arguments stream: the name, pieces by jsonPath (a string in two), the close.
    "partialArgs": [[{"functionCall": {"name": "get_weather", "id": "fc_1",
                                       "willContinue": True}}],
                    [{"functionCall": {"partialArgs": [{"jsonPath": "$.city", "stringValue": "Pa",
                                                        "willContinue": True}],
                                       "willContinue": True}}],
                    [{"functionCall": {"partialArgs": [{"jsonPath": "$.city",
                                                        "stringValue": "ris"}],
                                       "willContinue": True}}],
                    [{"functionCall": {"partialArgs": [{"jsonPath": "$.days", "numberValue": 3},
                                                       {"jsonPath": "$.metric", "boolValue": True},
                                                       {"jsonPath": "$.note",
                                                        "nullValue": "NULL_VALUE"}],
                                       "willContinue": True}}],
                    [{"functionCall": {}}]],
    "functionResponse": [[{"functionResponse": {"name": "get_weather",
                                                "response": {"temp": 20}}}], [{"text": "Warm."}]],
    "inlineData": [[{"inlineData": _PNG}]],
    "fileData": [[{"fileData": {"mimeType": "application/pdf", "fileUri": "gs://b/f.pdf"}}]],
    "executableCode": [[{"executableCode": {"language": "PYTHON", "code": "print(1)"}}]],
    "codeExecutionResult": [[{"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "1\n"}}]],
    "videoMetadata": [[{"fileData": {"mimeType": "video/mp4", "fileUri": "gs://b/v.mp4"},
                        "videoMetadata": {"startOffset": "0s", "endOffset": "5s"}}]],
    "mediaResolution": [[{"inlineData": _PNG, "mediaResolution": {"level": "MEDIA_RESOLUTION_LOW"}}]],
    "toolCall": [[{"toolCall": {"id": "t1", "toolType": "GOOGLE_SEARCH_WEB",
                                "args": {"q": "weather"}}}], [{"text": "Sunny."}]],
    "toolResponse": [[{"toolResponse": {"id": "t1", "toolType": "GOOGLE_SEARCH_WEB",
                                        "response": {"ok": True}}}], [{"text": "Sunny."}]],
    "partMetadata": [[{"text": "Hi", "partMetadata": {"source": "x"}}]],
    "audioTranscription": [[{"audioTranscription": {"text": "hello"}}]],
    "mediaProcessing": [[{"inlineData": _PNG, "mediaProcessing": {"status": "DONE"}}]],
    "speechMetadata": [[{"inlineData": {"mimeType": "audio/wav", "data": "UklG"},
                         "speechMetadata": {"speaker": "a"}}]],
    "documentMetadata": [[{"fileData": {"mimeType": "application/pdf", "fileUri": "gs://b/f.pdf"},
                           "documentMetadata": {"pageCount": 1}}]],
    "spreadsheetMetadata": [[{"fileData": {"mimeType": "text/csv", "fileUri": "gs://b/f.csv"},
                              "spreadsheetMetadata": {"sheetCount": 1}}]],
    "audioMetadata": [[{"inlineData": {"mimeType": "audio/wav", "data": "UklG"},
                        "audioMetadata": {"durationSeconds": 1}}]],
}

GEMINI_BLOCKED = ["SAFETY", "OTHER", "BLOCKLIST", "PROHIBITED_CONTENT", "IMAGE_SAFETY",
                  "MODEL_ARMOR", "JAILBREAK"]


def gemini_blocked(reason: str) -> bytes:
    return (b'data: {"promptFeedback":{"blockReason":"' + reason.encode() + b'"},'
            b'"usageMetadata":{"promptTokenCount":3,"totalTokenCount":3},'
            b'"modelVersion":"m","responseId":"r1"}\r\n\r\n')


# ── every healthy stream, by the names it shows ──────────────────────────────────────────────────

#: (protocol, what the case shows, body, bytes of the end that a cut leaves out)
HEALTHY: list[tuple[str, str, bytes, int]] = [
    *[("chat", f"delta {name}", *chat_body(deltas, reason))
      for name, (deltas, reason) in CHAT_DELTAS.items()],
    *[("chat", f"reason {reason}", *chat_body(deltas, reason))
      for reason, deltas in CHAT_REASONS.items()],
    ("chat", "chunk and choice fields", CHAT_FIELDS_HEAD + CHAT_FIELDS_END, len(CHAT_FIELDS_END)),
    *[("responses", f"item {name}", *responses_body(events))
      for name, events in RESPONSES_BODIES.items()],
    *[("responses", f"reason {reason}", *responses_body(
        RESPONSES_BODIES["message"], incomplete(reason)))
      for reason in ("max_output_tokens", "max_messages", "steered", "content_filter")],
    *[("messages", f"block {name}", *messages_body(blocks, stop, ping=name == "text"))
      for name, (blocks, stop) in MESSAGES_BLOCKS.items()],
    *[("messages", f"reason {reason}", *messages_body([_TEXT], reason))
      for reason in ("end_turn", "max_tokens", "stop_sequence", "tool_use", "pause_turn",
                     "refusal", "model_context_window_exceeded", "compaction")],
    *[("gemini", f"part {name}", *gemini_body(parts)) for name, parts in GEMINI_PARTS.items()],
    *[("gemini", f"reason {reason}", *gemini_body([[{"text": "Hi"}]], reason))
      for reason in ("STOP", "MAX_TOKENS", "CONTINUATION", "SAFETY", "RECITATION", "LANGUAGE",
                     "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY",
                     "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION", "ESCALATION",
                     "PUP_LIMITED_DISABLED", "MODEL_ARMOR")],
]
IDS = [f"{api}-{what}" for api, what, _, _ in HEALTHY]

#: Reasons that say the model failed, and one no table names, by protocol: each a failure.
FAILED: list[tuple[str, bytes]] = [
    *[("gemini", gemini_body([[{"text": "Hi"}]], reason)[0])
      for reason in ("FINISH_REASON_UNSPECIFIED", "OTHER", "MALFORMED_FUNCTION_CALL",
                     "UNEXPECTED_TOOL_CALL", "TOO_MANY_TOOL_CALLS", "MISSING_THOUGHT_SIGNATURE",
                     "MALFORMED_RESPONSE", "IMAGE_OTHER", "NO_IMAGE", "A_REASON_FROM_TOMORROW")],
    ("gemini", gemini_blocked("BLOCKED_REASON_UNSPECIFIED")),
    ("gemini", gemini_blocked("A_BLOCK_FROM_TOMORROW")),
    ("chat", chat_body([{"content": "Hi"}], "a_reason_from_tomorrow")[0]),
    ("responses", responses_body(RESPONSES_BODIES["message"],
                                 incomplete("a_reason_from_tomorrow"))[0]),
    ("messages", messages_body([_TEXT], "a_reason_from_tomorrow")[0]),
    ("responses", responses_body(RESPONSES_BODIES["message"], {
        "type": "response.failed", "response": {
            "id": "resp_1", "object": "response", "created_at": 1, "status": "failed",
            "model": "m", "output": [], "error": {"code": "server_error", "message": "boom"}}})[0]),
    ("responses", responses_body(RESPONSES_BODIES["message"], {
        "type": "error", "code": "server_error", "message": "boom", "param": None})[0]),
]


@pytest.mark.parametrize(("api", "what", "body", "end"), HEALTHY, ids=IDS)
def test_a_healthy_stream_of_every_kind_is_complete_and_its_cut_is_a_bad_ending(
        api: str, what: str, body: bytes, end: int) -> None:
    verdict = check(api, body)
    assert (verdict.ending, verdict.findings, verdict.error) == (E.COMPLETE, (), None)
    assert verdict.unknown_kinds == ()
    assert check(api, body[:-end]).ending is E.TRUNCATED
    assert check(api, body[:-3]).ending is E.CUT_MID_FRAME


@pytest.mark.parametrize("reason", GEMINI_BLOCKED)
def test_a_prompt_blocked_by_policy_is_complete(reason: str) -> None:
    verdict = check("gemini", gemini_blocked(reason))
    assert (verdict.ending, verdict.findings) == (E.COMPLETE, ())
    assert check("gemini", gemini_blocked(reason)[:-3]).ending is E.CUT_MID_FRAME


@pytest.mark.parametrize(("api", "body"), FAILED,
                         ids=[f"{api}-{i}" for i, (api, _) in enumerate(FAILED)])
def test_every_reason_that_says_the_model_failed_is_a_failure(api: str, body: bytes) -> None:
    verdict = check(api, body)
    assert verdict.ending is E.ERROR_EVENT
    assert verdict.error is not None


def test_what_the_sdks_keep_is_folded_not_dropped() -> None:
    chat = {name: check("chat", chat_body(*CHAT_DELTAS[name])[0]).message["choices"][0]["message"]
            for name in ("function_call", "refusal", "audio")}
    assert chat["function_call"]["function_call"] == {"name": "get_weather",
                                                      "arguments": '{"city":"Paris"}'}
    assert chat["refusal"]["refusal"] == "I can't help with that."
    assert chat["audio"]["audio"] == {"id": "audio_1", "data": "UklGRgAA", "transcript": "Hi there",
                                      "expires_at": 1700000000}
    mcp = check("messages", messages_body(*MESSAGES_BLOCKS["mcp_tool_use"])[0]).message
    assert mcp["content"][0]["input"] == {"query": "weather"}
    compaction = check("messages", messages_body(*MESSAGES_BLOCKS["compaction"])[0]).message
    assert compaction["content"][0] == {"type": "compaction", "content": "Summary so far.",
                                        "encrypted_content": "enc"}
    streamed = check("gemini", gemini_body(GEMINI_PARTS["partialArgs"])[0]).message
    assert streamed["candidates"][0]["content"]["parts"][0] == {"functionCall": {
        "name": "get_weather", "id": "fc_1",
        "args": {"city": "Paris", "days": 3, "metric": True, "note": None}}}


def test_a_kind_no_table_knows_passes_and_is_recorded_never_judged() -> None:
    body, _ = messages_body([({"type": "hologram", "frames": 3},
                              [{"type": "hologram_delta", "frame": "AAAA"}]), _TEXT])
    body = body.replace(b"event: message_stop", b"event: telepathy\ndata: {\"type\":\"telepathy\"}"
                                                b"\n\nevent: message_stop")
    verdict = check("messages", body)
    assert (verdict.ending, verdict.findings) == (E.COMPLETE, ())
    assert verdict.unknown_kinds == ("block:hologram", "delta:hologram_delta", "telepathy")
    gemini = check("gemini", gemini_body([[{"hologram": {"frames": 3}}], [{"text": "Hi"}]])[0])
    assert (gemini.ending, gemini.findings, gemini.unknown_kinds) == (
        E.COMPLETE, (), ("part:hologram",))


def test_a_stream_ending_while_a_call_still_continues_is_a_call_cut_off() -> None:
    pieces = GEMINI_PARTS["partialArgs"]
    for body in (gemini_body(pieces[:3])[0], gemini_body(pieces[:3])[0].rsplit(b"data: ", 1)[0]):
        verdict = check("gemini", body)
        assert [f.kind.value for f in verdict.findings] == ["tool_call_unterminated"]


def test_every_sdk_name_has_a_healthy_stream_here() -> None:
    """Each name the installed SDKs define appears in a healthy body above (failed reasons in
    ``FAILED``): an SDK release that adds one fails here until its body is written."""
    shown = b"".join(body for _, _, body, _ in HEALTHY) + b"".join(body for _, body in FAILED)
    shown += b"".join(gemini_blocked(r) for r in GEMINI_BLOCKED)
    missing = []
    for row in sdkdrift.sdk_names():
        needle = (f'"{row.name}"' if row.what in ("reason", "blocked_reason", "event", "block")
                  and not (row.api == "gemini" and row.what == "block")
                  else f'"{row.name}":')
        if row.api == "messages" and row.what in ("block", "delta", "event"):
            needle = f'"type":"{row.name}"'
        if row.what == "field":  # chunk.created: the field "created" of a chunk (or choice)
            needle = f'"{row.name.split(".", 1)[1]}":'
        if needle.encode() not in shown:
            missing.append(f"{row.api} {row.what} {row.name}")
    assert missing == []


# ── through the proxy: relayed byte for byte ─────────────────────────────────────────────────────

REQUESTS: dict[str, tuple[str, dict[str, Any]]] = {
    "chat": ("/chat/completions", {"model": "m", "stream": True,
                                   "messages": [{"role": "user", "content": "Hi"}]}),
    "responses": ("/responses", {"model": "m", "stream": True, "input": "Hi"}),
    "messages": ("/messages", {"model": "m", "stream": True, "max_tokens": 64,
                               "messages": [{"role": "user", "content": "Hi"}]}),
    "gemini": ("/models/m:streamGenerateContent?alt=sse",
               {"contents": [{"role": "user", "parts": [{"text": "Hi"}]}]}),
}


@pytest.mark.parametrize("api", list(REQUESTS))
async def test_the_proxy_relays_every_healthy_stream_byte_for_byte(api: str) -> None:
    path, request = REQUESTS[api]
    cases = [(what, body) for a, what, body, _ in HEALTHY if a == api]
    if api == "gemini":
        cases += [(f"blocked {r}", gemini_blocked(r)) for r in GEMINI_BLOCKED]
    async with scripted(Script([])) as up, run_proxy(proxy_config(up.url, retry=0)) as px:
        for what, body in cases:
            up.script = Script([body])
            got = await raw_post(f"{px.url}{path}", request)
            assert (got.status, got.error) == (200, None), what
            assert got.body == body, what
