"""How much checking costs beyond reading: each protocol's checker vs bare parsing, in one run.

Baseline: httpx-sse's line and event decoders (what the httpx ecosystem uses) plus ``json.loads`` of
every data frame, over the same bytes fed in the same 64-byte pieces, doing nothing else. Ours: the
protocol's checker ``feed`` (SSE decoding + JSON + assembling + contract) and ``close()``. The bodies
are shaped as each API sends them: chat chunks with OpenAI's obfuscation field, Responses
``output_text.delta`` events with ``event:`` lines and sequence numbers, Anthropic ``text_delta``
events.

``--long-line``: the SSE decoders alone on one event whose ``data:`` line is ``--mb`` long, fed in
pieces of 1, 16 and 4,096 bytes (a long tool argument or base64 image arriving in tiny reads): ours
against httpx-sse's and the openai SDK's decoder, in bytes per second. A decoder that searches the
unfinished line again at every read is quadratic here.

Run: .venv/bin/python -m bench.checker.bench_checker [--api all|chat|responses|messages|gemini] [--mb 10]
     [--piece 64] [--repeat 5]
     .venv/bin/python -m bench.checker.bench_checker --long-line [--mb 1]
"""

from __future__ import annotations

import argparse
import codecs
import json
import statistics
import time

from httpx_sse._decoders import SSEDecoder as HttpxSSEDecoder
from httpx_sse._decoders import SSELineDecoder

from bench.harness import machine
from sseguard.core.contract import checker_for
from sseguard.core.sse import SSEDecoder
from sseguard.core.verdict import Ending

WORDS = ["The", " quick", " brown", " fox", " jumps", " over", " the", " lazy", " dog", ".", " 你好",
         " ", "\n", " streaming", " tokens", " arrive", " one", " by", " one"]


def realistic_body(target_bytes: int) -> bytes:
    """OpenAI-shaped chunks (~230 B each, with the obfuscation field OpenAI adds), then finish and [DONE]."""
    head = {"id": "chatcmpl-BfR2x7kLmNoPqRsTuVwXyZ", "object": "chat.completion.chunk",
            "created": 1764748800, "model": "deepseek-v4", "system_fingerprint": "fp_3f1a2b"}
    parts: list[bytes] = []
    size = 0
    i = 0
    while size < target_bytes:
        obj = dict(head, choices=[{"index": 0, "delta": {"content": WORDS[i % len(WORDS)]},
                                   "logprobs": None, "finish_reason": None}], obfuscation="aZ3k9")
        frame = b"data: " + json.dumps(obj, ensure_ascii=False).encode() + b"\n\n"
        parts.append(frame)
        size += len(frame)
        i += 1
    fin = dict(head, choices=[{"index": 0, "delta": {}, "finish_reason": "stop"}])
    parts.append(b"data: " + json.dumps(fin).encode() + b"\n\ndata: [DONE]\n\n")
    return b"".join(parts)


def _event(name: str, obj: dict[str, object]) -> bytes:
    return (f"event: {name}\ndata: ".encode() + json.dumps(obj, ensure_ascii=False).encode()
            + b"\n\n")


def responses_body(target_bytes: int) -> bytes:
    """A Responses stream as OpenAI sends it: one message item, ``output_text.delta`` events (~230 B
    each, with the obfuscation field), the ``.done`` events and ``response.completed``."""
    rid, mid = "resp_68f0c2a1b7e48190a3d5e6f7a8b9c0d1", "msg_68f0c2a3c1d08190b2e4f6a8c0e2d4f6"
    response: dict[str, object] = {"id": rid, "object": "response", "created_at": 1764748800,
                                   "status": "in_progress", "model": "gpt-5-mini", "output": [],
                                   "usage": None}
    item: dict[str, object] = {"id": mid, "type": "message", "status": "in_progress",
                               "role": "assistant", "content": []}
    part = {"type": "output_text", "text": "", "annotations": []}
    seq = 0
    parts: list[bytes] = []

    def add(name: str, **fields: object) -> None:
        nonlocal seq
        parts.append(_event(name, {"type": name, "sequence_number": seq, **fields}))
        seq += 1

    add("response.created", response=response)
    add("response.in_progress", response=response)
    add("response.output_item.added", output_index=0, item=item)
    add("response.content_part.added", item_id=mid, output_index=0, content_index=0, part=part)
    size = sum(map(len, parts))
    words: list[str] = []
    while size < target_bytes:
        word = WORDS[len(words) % len(WORDS)]
        words.append(word)
        add("response.output_text.delta", item_id=mid, output_index=0, content_index=0, delta=word,
            logprobs=[], obfuscation="aZ3k9")
        size += len(parts[-1])
    text = "".join(words)
    add("response.output_text.done", item_id=mid, output_index=0, content_index=0, text=text,
        logprobs=[])
    add("response.content_part.done", item_id=mid, output_index=0, content_index=0,
        part=dict(part, text=text))
    done_item = dict(item, status="completed", content=[dict(part, text=text)])
    add("response.output_item.done", output_index=0, item=done_item)
    add("response.completed", response=dict(response, status="completed", output=[done_item],
                                            usage={"input_tokens": 9, "output_tokens": len(words),
                                                   "total_tokens": 9 + len(words)}))
    return b"".join(parts)


def messages_body(target_bytes: int) -> bytes:
    """A Messages stream as Anthropic sends it: ``message_start``, one text block of ``text_delta``
    events, ``message_delta`` with the stop_reason and usage, ``message_stop``."""
    parts = [_event("message_start", {"type": "message_start", "message": {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant", "content": [],
        "model": "claude-sonnet-4-5", "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 25, "output_tokens": 1}}}),
        _event("content_block_start", {"type": "content_block_start", "index": 0,
                                       "content_block": {"type": "text", "text": ""}})]
    size = sum(map(len, parts))
    i = 0
    while size < target_bytes:
        parts.append(_event("content_block_delta", {
            "type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": WORDS[i % len(WORDS)]}}))
        size += len(parts[-1])
        i += 1
    parts.append(_event("content_block_stop", {"type": "content_block_stop", "index": 0}))
    parts.append(_event("message_delta", {"type": "message_delta",
                                          "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                                          "usage": {"output_tokens": i}}))
    parts.append(_event("message_stop", {"type": "message_stop"}))
    return b"".join(parts)


def gemini_body(target_bytes: int) -> bytes:
    """A Gemini ``streamGenerateContent?alt=sse`` stream as Google sends it: one record per text delta
    (each with ``usageMetadata``, ``modelVersion`` and ``responseId``, no ``event:`` names), the last
    with ``finishReason`` and the candidates' token count; no sentinel."""
    def record(text: str, finish: str | None, out_tokens: int | None) -> bytes:
        candidate: dict[str, object] = {"content": {"parts": [{"text": text}], "role": "model"},
                                        "index": 0}
        usage: dict[str, object] = {"promptTokenCount": 9, "totalTokenCount": 9}
        if finish is not None:
            candidate["finishReason"] = finish
            usage.update(candidatesTokenCount=out_tokens, totalTokenCount=9 + (out_tokens or 0))
        obj = {"candidates": [candidate], "usageMetadata": usage, "modelVersion": "gemini-2.5-flash",
               "responseId": "Yn0waZ2ZIpaMvdIPkL7x2Qg"}
        return b"data: " + json.dumps(obj, ensure_ascii=False).encode() + b"\r\n\r\n"

    parts: list[bytes] = []
    size = 0
    i = 0
    while size < target_bytes:
        parts.append(record(WORDS[i % len(WORDS)], None, None))
        size += len(parts[-1])
        i += 1
    parts.append(record("", "STOP", i))
    return b"".join(parts)


# ── streams shaped as one answer of the probe: text deltas, a tool call, usage, the terminal ─────
ARGS = ['{"loca', 'tion": "Hang', 'zhou, Zhe', 'jiang", ', '"days": ', '3, "unit', 's": "met', 'ric"}']
SPOKEN = ["The quick", " brown fox", " jumps over", " the lazy", " dog.", " 你好,", " streaming",
          " tokens arrive", " one by", " one\n"]


def _said(texts: int) -> list[str]:
    return [SPOKEN[i % len(SPOKEN)] for i in range(texts)]


def chat_answer(texts: int) -> bytes:
    """A chat answer: the role chunk, ``texts`` deltas of two or three tokens, a tool call in eight
    argument fragments, the finish chunk, the usage chunk (``include_usage``) and ``[DONE]``."""
    head = {"id": "chatcmpl-BfR2x7kLmNoPqRsTuVwXyZ", "object": "chat.completion.chunk",
            "created": 1764748800, "model": "deepseek-v4", "system_fingerprint": "fp_3f1a2b"}

    def chunk(delta: dict[str, object], finish: str | None = None) -> bytes:
        obj = dict(head, choices=[{"index": 0, "delta": delta, "logprobs": None,
                                   "finish_reason": finish}], obfuscation="aZ3k9")
        return b"data: " + json.dumps(obj, ensure_ascii=False).encode() + b"\n\n"

    parts = [chunk({"role": "assistant", "content": ""})]
    parts += [chunk({"content": text}) for text in _said(texts)]
    parts.append(chunk({"tool_calls": [{"index": 0, "id": "call_kX2mP9qR7sT4", "type": "function",
                                        "function": {"name": "get_weather", "arguments": ""}}]}))
    parts += [chunk({"tool_calls": [{"index": 0, "function": {"arguments": a}}]}) for a in ARGS]
    parts.append(chunk({}, "tool_calls"))
    usage = dict(head, choices=[], usage={"prompt_tokens": 9, "completion_tokens": texts + 9,
                                          "total_tokens": texts + 18})
    parts.append(b"data: " + json.dumps(usage).encode() + b"\n\ndata: [DONE]\n\n")
    return b"".join(parts)


def responses_answer(texts: int) -> bytes:
    """A Responses answer: created, in_progress, a message item of ``texts`` deltas with its
    ``.done`` events, a function_call item in eight argument deltas, ``response.completed``."""
    rid, mid, fid = ("resp_68f0c2a1b7e48190a3d5e6f7a8b9c0d1", "msg_68f0c2a3c1d08190b2e4f6a8c0e2d4f6",
                     "fc_68f0c2a4d2e88190c3e5a7b9d1f3a5c7")
    response: dict[str, object] = {"id": rid, "object": "response", "created_at": 1764748800,
                                   "status": "in_progress", "model": "gpt-5-mini", "output": [],
                                   "usage": None}
    item: dict[str, object] = {"id": mid, "type": "message", "status": "in_progress",
                               "role": "assistant", "content": []}
    call: dict[str, object] = {"id": fid, "type": "function_call", "status": "in_progress",
                               "call_id": "call_kX2mP9qR7sT4", "name": "get_weather", "arguments": ""}
    part = {"type": "output_text", "text": "", "annotations": []}
    seq = 0
    parts: list[bytes] = []

    def add(name: str, **fields: object) -> None:
        nonlocal seq
        parts.append(_event(name, {"type": name, "sequence_number": seq, **fields}))
        seq += 1

    add("response.created", response=response)
    add("response.in_progress", response=response)
    add("response.output_item.added", output_index=0, item=item)
    add("response.content_part.added", item_id=mid, output_index=0, content_index=0, part=part)
    said = _said(texts)
    for word in said:
        add("response.output_text.delta", item_id=mid, output_index=0, content_index=0, delta=word,
            logprobs=[], obfuscation="aZ3k9")
    text = "".join(said)
    add("response.output_text.done", item_id=mid, output_index=0, content_index=0, text=text,
        logprobs=[])
    add("response.content_part.done", item_id=mid, output_index=0, content_index=0,
        part=dict(part, text=text))
    done_item = dict(item, status="completed", content=[dict(part, text=text)])
    add("response.output_item.done", output_index=0, item=done_item)
    add("response.output_item.added", output_index=1, item=call)
    for a in ARGS:
        add("response.function_call_arguments.delta", item_id=fid, output_index=1, delta=a,
            obfuscation="aZ3k9")
    arguments = "".join(ARGS)
    add("response.function_call_arguments.done", item_id=fid, output_index=1, arguments=arguments)
    done_call = dict(call, status="completed", arguments=arguments)
    add("response.output_item.done", output_index=1, item=done_call)
    add("response.completed", response=dict(response, status="completed",
                                            output=[done_item, done_call],
                                            usage={"input_tokens": 9, "output_tokens": texts + 9,
                                                   "total_tokens": texts + 18}))
    return b"".join(parts)


def messages_answer(texts: int) -> bytes:
    """A Messages answer: ``message_start``, a text block of ``texts`` deltas, a tool_use block in
    eight ``input_json_delta``s, ``message_delta`` with stop_reason and usage, ``message_stop``."""
    parts = [_event("message_start", {"type": "message_start", "message": {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant", "content": [],
        "model": "claude-sonnet-4-5", "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 25, "output_tokens": 1}}}),
        _event("content_block_start", {"type": "content_block_start", "index": 0,
                                       "content_block": {"type": "text", "text": ""}})]
    parts += [_event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                             "delta": {"type": "text_delta", "text": text}})
              for text in _said(texts)]
    parts.append(_event("content_block_stop", {"type": "content_block_stop", "index": 0}))
    parts.append(_event("content_block_start", {
        "type": "content_block_start", "index": 1, "content_block": {
            "type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9", "name": "get_weather",
            "input": {}}}))
    parts += [_event("content_block_delta", {"type": "content_block_delta", "index": 1,
                                             "delta": {"type": "input_json_delta",
                                                       "partial_json": a}}) for a in ARGS]
    parts.append(_event("content_block_stop", {"type": "content_block_stop", "index": 1}))
    parts.append(_event("message_delta", {"type": "message_delta",
                                          "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                                          "usage": {"output_tokens": texts + 9}}))
    parts.append(_event("message_stop", {"type": "message_stop"}))
    return b"".join(parts)


def gemini_answer(texts: int) -> bytes:
    """A Gemini ``alt=sse`` answer: ``texts`` records of a text part each (with ``usageMetadata``,
    ``modelVersion``, ``responseId``), then one record with the ``functionCall`` (Gemini sends a
    call whole), ``finishReason`` and the candidates' token count."""
    usage: dict[str, object] = {"promptTokenCount": 9, "totalTokenCount": 9}

    def record(parts: list[dict[str, object]], finish: str | None = None) -> bytes:
        candidate: dict[str, object] = {"content": {"parts": parts, "role": "model"}, "index": 0}
        use = usage
        if finish is not None:
            candidate["finishReason"] = finish
            use = dict(usage, candidatesTokenCount=texts + 9, totalTokenCount=texts + 18)
        obj = {"candidates": [candidate], "usageMetadata": use, "modelVersion": "gemini-2.5-flash",
               "responseId": "Yn0waZ2ZIpaMvdIPkL7x2Qg"}
        return b"data: " + json.dumps(obj, ensure_ascii=False).encode() + b"\r\n\r\n"

    out = [record([{"text": text}]) for text in _said(texts)]
    out.append(record([{"functionCall": {"name": "get_weather", "args": {
        "location": "Hangzhou, Zhejiang", "days": 3, "units": "metric"}}}], "STOP"))
    return b"".join(out)


#: One answer per protocol, as the probe reads them, and the request that asked for it.
ANSWERS = {"chat": chat_answer, "responses": responses_answer, "messages": messages_answer,
           "gemini": gemini_answer}
ANSWER_REQUESTS: dict[str, dict[str, object]] = {
    "chat": {"stream_options": {"include_usage": True}}, "responses": {}, "messages": {},
    "gemini": {}}


def frames_of(body: bytes) -> list[bytes]:
    """The body cut at its event boundaries: one read per event, as a client reads events that
    arrive tens of milliseconds apart."""
    sep = b"\r\n\r\n" if b"\r\n\r\n" in body else b"\n\n"
    cuts = body.split(sep)
    return [c + sep for c in cuts[:-1]] + ([cuts[-1]] if cuts[-1] else [])


BODIES = {"chat": realistic_body, "responses": responses_body, "messages": messages_body,
          "gemini": gemini_body}


def baseline(pieces: list[bytes]) -> int:
    """httpx-sse decoding + json.loads of each data frame, nothing else."""
    text_decoder = codecs.getincrementaldecoder("utf-8")("replace")
    lines = SSELineDecoder()
    events = HttpxSSEDecoder()
    n = 0
    for piece in pieces:
        for line in lines.decode(text_decoder.decode(piece)):
            sse = events.decode(line)
            if sse is not None and sse.data != "[DONE]":
                json.loads(sse.data)
                n += 1
    return n


def ours(api: str, pieces: list[bytes]) -> int:
    checker = checker_for(api)
    for piece in pieces:
        checker.feed(piece)
    verdict = checker.close()
    assert verdict.ending is Ending.COMPLETE and not verdict.findings, (verdict.ending,
                                                                        verdict.findings)
    return verdict.chunks


def measure(api: str, mb_target: float, piece: int, repeat: int) -> None:
    body = BODIES[api](int(mb_target * 1_000_000))
    pieces = [body[i:i + piece] for i in range(0, len(body), piece)]
    mb = len(body) / 1e6
    times: dict[str, list[float]] = {"baseline": [], "ours": []}
    counts = {}
    for _ in range(repeat):  # interleaved, so both see the same machine noise
        for name in ("baseline", "ours"):
            t0 = time.process_time()
            counts[name] = baseline(pieces) if name == "baseline" else ours(api, pieces)
            times[name].append(time.process_time() - t0)
    assert counts["baseline"] == counts["ours"], counts
    base = statistics.median(times["baseline"])
    mine = statistics.median(times["ours"])
    print(f"[{api}] body {mb:.1f} MB, {len(pieces)} pieces of {piece} B, {counts['ours']} events")
    print(f"  httpx-sse + json.loads (parse only): {mb / base:7.1f} MB/s  "
          f"({base:.3f} s CPU, median of {repeat})")
    print(f"  sseguard {api} checker (full check): {mb / mine:7.1f} MB/s  ({mine:.3f} s CPU)")
    print(f"  speed ratio ours/baseline: {base / mine:.2f}x  (target >= 0.7x)")


def _ours_line(pieces: list[bytes]) -> int:
    decoder = SSEDecoder()
    n = sum(len(decoder.feed(piece)) for piece in pieces)
    decoder.close()
    return n


def _httpx_sse_line(pieces: list[bytes]) -> int:
    text_decoder = codecs.getincrementaldecoder("utf-8")("replace")
    lines = SSELineDecoder()
    events = HttpxSSEDecoder()
    n = 0
    for piece in pieces:
        for line in lines.decode(text_decoder.decode(piece)):
            n += events.decode(line) is not None
    return n


def _openai_line(pieces: list[bytes]) -> int:
    from openai._streaming import SSEDecoder as OpenAIDecoder

    return sum(1 for _ in OpenAIDecoder().iter_bytes(iter(pieces)))


def long_line(mb: float) -> None:
    """One event with a ``data:`` line of ``mb`` MB, in pieces of 1, 16 and 4,096 bytes."""
    body = b"data: " + b"x" * int(mb * 1_000_000) + b"\n\n"
    decoders = {"sseguard": _ours_line, "httpx-sse": _httpx_sse_line, "openai": _openai_line}
    print(f"one event, a {len(body) / 1e6:.1f} MB data line; bytes/s (CPU time), one run each")
    for piece in (1, 16, 4096):
        pieces = [body[i:i + piece] for i in range(0, len(body), piece)]
        row = []
        for name, decode in decoders.items():
            t0 = time.process_time()
            assert decode(pieces) == 1, name
            spent = time.process_time() - t0
            row.append(f"{name} {len(body) / spent / 1e6:8.2f} MB/s ({spent:6.2f} s)")
        print(f"  {piece:>5} B pieces: " + "  ".join(row))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--api", choices=["all", *BODIES], default="all")
    ap.add_argument("--mb", type=float, default=10.0)
    ap.add_argument("--piece", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--long-line", action="store_true",
                    help="The SSE decoders alone on one --mb long line (default 1 MB).")
    args = ap.parse_args()
    print(machine())
    if args.long_line:
        long_line(args.mb if args.mb != ap.get_default("mb") else 1.0)
        return
    for api in BODIES if args.api == "all" else [args.api]:
        measure(api, args.mb, args.piece, args.repeat)


if __name__ == "__main__":
    main()
