"""A checker's lane (``contract.lane``) never changes what the checker says, and is taken where it can.

The lane folds a stream's steady text-delta frame without decoding it again. Whatever the text holds
(quotes, escapes, control characters, any Unicode, escaped or not), whatever comes between the deltas
(ids, retries, comments, keep-alives, another head, the end, errors) and however the body is cut into
reads, the events and the verdict must be those of the general way (the same checker with lane
learning switched off). The examples state literal results: what the lane folded, where a leak found
in a lane frame is placed, which frames it refuses.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sseguard.core.contract import checker_for
from sseguard.core.contract.lane import Lane, plain
from sseguard.core.sse import SSEDecoder, SSEEvent
from sseguard.core.verdict import Verdict


def _general(api: str, keep_text: bool = True) -> Any:
    checker = checker_for(api, keep_text=keep_text)
    checker._learn_lane = lambda *a, **k: False  # every event the general way
    return checker


def _run(checker: Any, reads: list[bytes]) -> tuple[list[SSEEvent], Verdict]:
    events: list[SSEEvent] = []
    for read in reads:
        events.extend(checker.feed(read))
    return events, checker.close()


def _lane_folds(api: str, reads: list[bytes]) -> tuple[int, Verdict]:
    """How many events the lane folded, and the verdict."""
    checker = checker_for(api)
    folded = 0
    fold = checker._lane_fold

    def counting(text: str) -> None:
        nonlocal folded
        folded += 1
        fold(text)

    checker._lane_fold = counting
    verdict = _run(checker, reads)[1]
    return folded, verdict


def _json(value: Any, ascii_only: bool = False) -> str:
    return json.dumps(value, ensure_ascii=ascii_only, separators=(",", ":"))


# ── each protocol's frames, written out here ─────────────────────────────────────────────────


def chat(kind: str, text: str = "", ascii_only: bool = False) -> bytes:
    def head(cid: str, choice: str) -> str:
        return ('{"id":"' + cid + '","object":"chat.completion.chunk","created":1,"model":"m",'
                '"choices":[' + choice + "]}")

    cid = "c2" if kind == "other_id" else "c1"
    if kind == "start":
        choice = '{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}'
    elif kind == "finish":
        choice = '{"index":0,"delta":{},"finish_reason":"stop"}'
    elif kind == "second_choice":
        choice = '{"index":1,"delta":{"content":' + _json(text) + '},"finish_reason":null}'
    elif kind == "done":
        return b"data: [DONE]\n\n"
    elif kind == "error":
        return b'data: {"error":{"message":"overloaded"}}\n\n'
    elif kind == "usage":
        return ('data: ' + head(cid, "") + "\n\n").replace(
            '"choices":[]', '"choices":[],"usage":{"total_tokens":3}').encode()
    else:
        choice = ('{"index":0,"delta":{"content":' + _json(text, ascii_only)
                  + '},"finish_reason":null}')
    return ("data: " + head(cid, choice) + "\n\n").encode()


def responses(kind: str, seq: int, text: str = "", ascii_only: bool = False,
              part_text: str = "") -> bytes:
    def ev(name: str, body: str) -> bytes:
        return f'event: {name}\ndata: {{"type":"{name}",{body},"sequence_number":{seq}}}\n\n'.encode()

    if kind == "start":
        return (ev("response.created", '"response":{"id":"r1","status":"in_progress","output":[]}')
                + ev("response.output_item.added",
                     '"output_index":0,"item":{"id":"m1","type":"message","content":[]}')
                .replace(b'"sequence_number":%d' % seq, b'"sequence_number":%d' % (seq + 1))
                + ev("response.content_part.added",
                     '"output_index":0,"content_index":0,"part":{"type":"output_text","text":'
                     + _json(part_text) + "}")
                .replace(b'"sequence_number":%d' % seq, b'"sequence_number":%d' % (seq + 2)))
    if kind == "part_done":
        return ev("response.content_part.done",
                  '"output_index":0,"content_index":0,"part":{"type":"output_text","text":""}')
    if kind == "finish":
        return ev("response.completed", '"response":{"id":"r1","status":"completed","output":[]}')
    if kind == "error":
        return ev("error", '"code":"server_error","message":"overloaded"')
    return ev("response.output_text.delta", '"item_id":"m1","output_index":0,"content_index":0,'
              f'"delta":{_json(text, ascii_only)},"logprobs":[]')


def messages(kind: str, text: str = "", ascii_only: bool = False) -> bytes:
    def ev(name: str, body: str) -> bytes:
        return f'event: {name}\ndata: {{"type":"{name}"{body}}}\n\n'.encode()

    if kind == "start":
        return (ev("message_start", ',"message":{"id":"msg_1","type":"message","role":"assistant",'
                                    '"content":[],"usage":{"input_tokens":1}}')
                + ev("content_block_start", ',"index":0,"content_block":{"type":"text","text":""}'))
    if kind == "ping":
        return ev("ping", "")
    if kind == "stop_block":
        return ev("content_block_stop", ',"index":0')
    if kind == "finish":
        return (ev("message_delta", ',"delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}')
                + ev("message_stop", ""))
    if kind == "error":
        return ev("error", ',"error":{"type":"overloaded_error","message":"overloaded"}')
    return ev("content_block_delta",
              f',"index":0,"delta":{{"type":"text_delta","text":{_json(text, ascii_only)}}}')


def gemini(kind: str, text: str = "", ascii_only: bool = False, crlf: bool = False) -> bytes:
    end = "\r\n\r\n" if crlf else "\n\n"
    rid = "g2" if kind == "other_id" else "g1"
    finish = ',"finishReason":"STOP"' if kind == "finish" else ""
    role = '"model"' if kind != "role" else '"assistant"'
    if kind == "error":
        return ('data: {"error":{"code":503,"message":"overloaded","status":"UNAVAILABLE"}}'
                + end).encode()
    return (f'data: {{"candidates":[{{"content":{{"parts":[{{"text":{_json(text, ascii_only)}}}],'
            f'"role":{role}}}{finish},"index":0}}],"usageMetadata":{{"promptTokenCount":5}},'
            f'"modelVersion":"m","responseId":"{rid}"}}' + end).encode()


#: A stream learns its lane at its eighth text delta folded the general way (a short answer never
#: pays for learning): seven plain deltas of "w" come first in most streams and examples.
WARM = 7


# ── the differential property ────────────────────────────────────────────────────────────────

#: Text a delta may hold: mostly plain words, then anything (quotes, backslashes, control
#: characters, astral and non-ASCII characters, markup that leaks).
_texts = st.one_of(
    st.sampled_from([" the", "", " quick", " 你好", " 🦊", "<tool_call>", "｜DSML｜", "to=functions.f"]),
    st.text(max_size=12))

_STEPS = {
    "chat": ["delta"] * 8 + ["other_id", "second_choice", "usage", "finish", "done", "error",
                             "id_line", "retry_line", "comment", "ping_event"],
    "responses": ["delta"] * 8 + ["gap", "part_done", "finish", "error", "id_line", "comment"],
    "messages": ["delta"] * 8 + ["ping", "stop_block", "finish", "error", "id_line", "comment"],
    "gemini": ["delta"] * 8 + ["other_id", "role", "finish", "error", "id_line", "crlf", "comment"],
}


@st.composite
def streams(draw: Any, api: str) -> list[bytes]:
    """A stream of frames: a usual start, then text deltas among every other kind of frame."""
    frames: list[bytes] = []
    seq = 0
    if api == "chat":
        frames.append(chat("start"))
    elif api == "responses":
        frames.append(responses("start", 0, part_text=draw(st.sampled_from(["", "", "Hi"]))))
        seq = 3
    elif api == "messages":
        frames.append(messages("start"))
    if draw(st.integers(0, 3)):  # mostly enough plain deltas first for a lane to be learned
        warm = draw(st.sampled_from(["w", "w", ""]))  # (empty: a lane learned from empty text)
        for _ in range(WARM + 1 + (api == "gemini")):  # (a lane learned at the last)
            if api == "chat":
                frames.append(chat("delta", warm))
            elif api == "responses":
                frames.append(responses("delta", seq, warm))
                seq += 1
            elif api == "messages":
                frames.append(messages("delta", warm))
            else:
                frames.append(gemini("delta", warm))
    for step in draw(st.lists(st.sampled_from(_STEPS[api]), min_size=1, max_size=24)):
        text = draw(_texts)
        ascii_only = draw(st.booleans())
        if step == "comment":
            frames.append(b": keep-alive\n\n")
            continue
        prefix = {"id_line": b"id: 7\n", "retry_line": b"retry: 50\n"}.get(step, b"")
        kind = "delta" if step in ("id_line", "retry_line", "crlf", "gap") else step
        if api == "chat":
            frame = b"event: ping\ndata: {}\n\n" if step == "ping_event" else chat(kind, text,
                                                                                 ascii_only)
        elif api == "responses":
            seq += 1 if step == "gap" else 0
            frame = responses(kind, seq, text, ascii_only)
            seq += 1
        elif api == "messages":
            frame = messages(kind, text, ascii_only)
        else:
            frame = gemini(kind, text, ascii_only, crlf=step == "crlf")
        frames.append(prefix + frame)
    return frames


@st.composite
def reads(draw: Any, frames: list[bytes]) -> list[bytes]:
    """Mostly one frame per read (where the lane applies), sometimes cut or merged."""
    out: list[bytes] = []
    for frame in frames:
        how = draw(st.sampled_from(["whole"] * 5 + ["cut", "merge"]))
        if how == "cut" and len(frame) > 1:
            at = draw(st.integers(1, len(frame) - 1))
            out += [frame[:at], frame[at:]]
        elif how == "merge" and out:
            out[-1] += frame
        else:
            out.append(frame)
    return out


def _differential(api: str, data: Any) -> None:
    body = data.draw(reads(data.draw(streams(api))))
    keep_text = data.draw(st.booleans())  # a relay keeps no text, only a digest of it
    with_lane = _run(checker_for(api, keep_text=keep_text), body)
    without = _run(_general(api, keep_text), body)
    assert with_lane == without


@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_chat_lane_gives_the_general_events_and_verdict(data: Any) -> None:
    _differential("chat", data)


@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_responses_lane_gives_the_general_events_and_verdict(data: Any) -> None:
    _differential("responses", data)


@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_messages_lane_gives_the_general_events_and_verdict(data: Any) -> None:
    _differential("messages", data)


@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_gemini_lane_gives_the_general_events_and_verdict(data: Any) -> None:
    _differential("gemini", data)


# ── examples: the lane is taken, and what it folds ───────────────────────────────────────────

def test_chat_plain_deltas_take_the_lane_and_assemble_the_answer() -> None:
    body = [chat("start"), *[chat("delta", "w")] * WARM, chat("delta", "Hel"), chat("delta", "lo"),
            chat("delta", ", "), chat("delta", "wörld 🦊"), chat("finish"), chat("done")]
    folded, v = _lane_folds("chat", body)
    assert folded == 3  # "Hel" teaches the lane; the next three take it
    assert v.ending == "complete"
    assert v.message["choices"][0]["message"]["content"] == "wwwwwwwHello, wörld 🦊"
    assert v.chunks == 13


def test_a_short_answer_never_learns_a_lane() -> None:
    body = [chat("start"), *[chat("delta", "w")] * WARM, chat("finish"), chat("done")]
    checker = checker_for("chat")
    _run(checker, body)
    assert checker._lane is None


def test_escaped_deltas_take_the_lane_too() -> None:
    body = [chat("start"), *[chat("delta", "w")] * WARM, chat("delta", "a"),
            chat("delta", 'say "hi"'), chat("delta", "b\n"), chat("delta", "é", ascii_only=True),
            chat("delta", "c"), chat("finish"), chat("done")]
    folded, v = _lane_folds("chat", body)
    assert folded == 4  # an escaped quote, \n and \u00e9 are one JSON string all the same
    assert v.message["choices"][0]["message"]["content"] == 'wwwwwwwasay "hi"b\néc'


def test_a_leak_split_over_lane_frames_is_found_at_its_frame() -> None:
    body = [chat("start"), *[chat("delta", "w")] * WARM, chat("delta", "ok "),
            chat("delta", "<tool_"), chat("delta", "call>{")]
    folded, v = _lane_folds("chat", body)
    assert folded == 2
    leaks = [(f.kind, f.frame) for f in v.findings if f.kind == "markup_leak"]
    assert leaks == [("markup_leak", 11)]
    place = next(f for f in v.findings if f.kind == "markup_leak")
    assert place.offset == sum(map(len, body))  # the end of the frame that completed it


def test_responses_lane_needs_the_next_sequence_number() -> None:
    body = [responses("start", 0), *[responses("delta", 3 + i, "w") for i in range(WARM)],
            responses("delta", 10, "a"), responses("delta", 11, "b"),
            responses("delta", 13, "c"), responses("delta", 14, "d")]
    folded, v = _lane_folds("responses", body)
    assert folded == 2  # "b" and "d": 13 skips 12 (a gap: the general way), then 14 is next again
    assert [(f.kind, f.detail) for f in v.findings] == [
        ("sequence_gap", "sequence_number 13 where 12 was next")]


def test_messages_lane_stops_at_the_block_stop() -> None:
    body = [messages("start"), *[messages("delta", "w")] * WARM, messages("delta", "a"),
            messages("delta", "b"), messages("stop_block"), messages("delta", "c"),
            messages("finish")]
    folded, v = _lane_folds("messages", body)
    assert folded == 1  # "b"; "c" comes after its block closed: the general way reports it
    assert [(f.kind, f.detail) for f in v.findings] == [
        ("event_order", "content_block_delta for content block 0, which is not open")]


def test_gemini_lane_with_crlf_frames() -> None:
    body = [gemini("delta", "a", crlf=True), *[gemini("delta", "w", crlf=True)] * WARM,
            gemini("delta", "b", crlf=True), gemini("delta", "c", crlf=True),
            gemini("finish", "", crlf=True)]
    folded, v = _lane_folds("gemini", body)
    assert folded == 1  # the first record makes the candidate, "b" teaches, "c" takes it
    assert v.message["candidates"][0]["content"]["parts"] == [{"text": "awwwwwwwbc"}]
    assert v.ending == "complete"


def test_an_event_id_in_force_is_given_to_lane_events() -> None:
    checker = checker_for("chat")
    checker.feed(b"id: 41\n" + chat("start"))
    for _ in range(WARM + 1):
        checker.feed(chat("delta", "a"))
    (event,) = checker.feed(chat("delta", "b"))
    assert checker._lane is not None
    assert event.id == "41" and event.raw == chat("delta", "b") and event.event == "message"


# ── Lane.learn: what it refuses ──────────────────────────────────────────────────────────────

_PATH = ("choices", 0, "delta", "content")


def _learn(raw: bytes, text: str) -> Lane | None:
    return Lane.learn(raw, text, _PATH, json.loads, SSEDecoder())


def test_a_lane_matches_one_whole_string_in_its_hole() -> None:
    lane = _learn(chat("delta", "abc"), "abc")
    assert lane is not None
    assert lane.text(chat("delta", "xyz 你好")) == "xyz 你好"
    assert lane.text(chat("delta", "")) == ""
    assert lane.text(chat("delta", 'a"b')) == 'a"b'  # escaped: \"
    assert lane.text(chat("delta", "a\\b\tc")) == "a\\b\tc"
    assert lane.text(chat("delta", "é", ascii_only=True)) == "é"  # \u00e9
    raw = chat("delta", "PLACE")
    assert lane.text(raw.replace(b"PLACE", b'a"b')) is None  # an unescaped quote: another token
    assert lane.text(raw.replace(b"PLACE", b"a\\")) is None  # the closing quote escaped
    assert lane.text(raw.replace(b"PLACE", b"tab\there")) is None  # a raw control character
    assert lane.text(raw.replace(b"PLACE", b"\\ud800")) is None  # a lone surrogate
    assert lane.text(raw.replace(b"PLACE", "é".encode()[:1])) is None  # not UTF-8
    assert lane.text(chat("delta", "x") + chat("delta", "y")) is None  # two frames in one read
    assert lane.text(chat("other_id", "x")) is None


def test_a_lane_is_not_learned_where_the_text_is_not_one_plain_token() -> None:
    assert _learn(chat("delta", "a\nb"), "a\nb") is None  # escaped
    assert _learn(chat("delta", "c1"), "c1") is None  # also the id: found twice
    assert _learn(b"id: 1\n" + chat("delta", "abc"), "abc") is None  # sets an id
    assert _learn(chat("delta", "abc")[:-1], "abc") is None  # not one whole frame
    assert _learn(chat("delta", "abc"), "abd") is None  # not its text


def test_plain_is_text_json_writes_unescaped() -> None:
    assert [plain(t) for t in ["abc", "", "你好 🦊", 'a"', "a\\", "\x1f", "\ud800"]] == [
        True, True, True, False, False, False, False]


def test_a_bytearray_read_takes_the_general_way_and_its_event_raw_is_bytes() -> None:
    checker = checker_for("chat")
    for frame in (chat("start"), *[chat("delta", "a")] * (WARM + 2)):
        checker.feed(frame)
    assert checker._lane is not None
    (event,) = checker.feed(bytearray(chat("delta", "c")))
    assert type(event.raw) is bytes and event.raw == chat("delta", "c")
