"""Record: one schema for every store, built from a verdict with secrets removed."""

from __future__ import annotations

import pytest

from sseguard.core.contract import StreamChecker
from sseguard.core.policy import Policy
from sseguard.core.record import Record, decode_record, encode_record, id_prefix, record_from_verdict
from support.protocol_streams import Responses, messages_text, responses_text, run
from support.streams import text_stream

KEY = "sk-live-0123456789abcdefghijklmnop"


@pytest.mark.parametrize(("rid", "prefix"), [
    ("chatcmpl-9fA2", "chatcmpl"), ("gw-17", "gw"), ("8731209", "numeric"), ("abc123", "abc"),
    ("resp_1", "resp"), ("", None), (None, None), ("-x", "other"),
])
def test_id_prefix(rid: str | None, prefix: str | None) -> None:
    assert id_prefix(rid) == prefix


def test_record_from_verdict_keeps_facts_and_drops_secrets() -> None:
    checker = StreamChecker()
    checker.feed(text_stream(["a", f" {KEY}"], done=False))
    verdict = checker.close()
    rec = record_from_verdict(verdict, policy=Policy.from_spec(), arm="a", index=3,
                              headers={"Authorization": f"Bearer {KEY}", "x-request-id": "r1",
                                       "x-sseguard-fault": "no_done", "Server": "gw/1"})
    assert (rec.ending, rec.passed, rec.injected, rec.arm, rec.index) == ("no_done", False, "no_done", "a", 3)
    assert rec.headers["x-request-id"] == "r1" and rec.headers["server"] == "gw/1"
    assert "authorization" not in rec.headers
    line = encode_record(rec)
    assert KEY.encode() not in line and b"Bearer" not in line
    assert decode_record(line) == rec
    assert rec.failed_under(Policy.from_spec()) and not rec.failed_under(Policy.from_spec("no-done-ok"))


def test_record_defaults_round_trip() -> None:
    rec = Record(arm="x")
    assert decode_record(encode_record(rec).decode()) == rec


@pytest.mark.parametrize(("api", "body", "finish", "usage_key", "model"), [
    ("responses", Responses().created().message(0, ["a"]).completed().body(), ["completed"],
     "total_tokens", "gpt-5-mini"),
    ("responses", responses_text(["a"], end="incomplete"), ["max_output_tokens"], "total_tokens",
     "gpt-5-mini"),
    ("responses", responses_text(["a"], end="none"), [None], None, "gpt-5-mini"),
    ("responses", responses_text(["a"], end="failed"), ["failed"], None, "gpt-5-mini"),
    ("messages", messages_text(["a"], stop_reason="max_tokens"), ["max_tokens"], "output_tokens",
     "claude-sonnet-4-5"),
    ("messages", messages_text(["a"], stop_reason=None), [None], "output_tokens",
     "claude-sonnet-4-5"),
    ("messages", b"", [None], None, None),
])
def test_record_facts_are_read_in_each_protocol(api: str, body: bytes, finish: list[str | None],
                                                usage_key: str | None, model: str | None) -> None:
    rec = record_from_verdict(run(api, body), policy=Policy.from_spec())
    assert (rec.api, rec.finish_reasons, rec.model) == (api, finish, model)
    assert (usage_key in rec.usage) if usage_key else rec.usage is None
    assert decode_record(encode_record(rec)) == rec
