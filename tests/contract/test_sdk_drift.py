"""Drift is found by CI, not by users: every name the installed SDKs define for a protocol (stream
event types, content blocks and output items, deltas, finish reasons) is classified by that
protocol's tables. CI installs the latest SDKs, so a release that adds a kind fails here, by name."""

from __future__ import annotations

import dataclasses

import pytest
from typer.testing import CliRunner

from sseguard import sdkdrift
from sseguard.cli import app
from sseguard.core.contract.gemini import GEMINI
from sseguard.core.contract.messages import MESSAGES
from sseguard.core.contract.registry import protocol
from sseguard.core.contract.vocabulary import Kinds, Reasons
from sseguard.core.verdict import Api


def assert_no_drift() -> None:
    missing = sdkdrift.drift(sdkdrift.sdk_names())
    assert not missing, "names the SDKs define that no table classifies: " + ", ".join(
        f"{r.api} {r.what} {r.name!r} ({r.sdk})" for r in missing)


def test_every_name_the_installed_sdks_define_is_classified_by_a_table() -> None:
    assert_no_drift()


def test_the_sdks_are_read_not_skipped() -> None:
    rows = {(str(r.api), r.what, r.name): r for r in sdkdrift.sdk_names()}
    # A few names each SDK is known to define (a broken introspection would find none).
    for key, cls in [(("chat", "reason", "content_filter"), "policy"),
                     (("chat", "delta", "refusal"), "known"),
                     (("responses", "event", "response.output_text.delta"), "known"),
                     (("responses", "reason", "max_output_tokens"), "finished"),
                     (("messages", "block", "mcp_tool_use"), "known"),
                     (("messages", "delta", "compaction_delta"), "known"),
                     (("messages", "reason", "refusal"), "policy"),
                     (("gemini", "reason", "MALFORMED_RESPONSE"), "failed"),
                     (("gemini", "blocked_reason", "JAILBREAK"), "policy"),
                     (("gemini", "delta", "partialArgs"), "known")]:
        assert rows[key].cls == cls
    assert {r.sdk.split()[0] for r in rows.values()} == {"openai", "anthropic", "google-genai"}


def _without(monkeypatch: pytest.MonkeyPatch) -> None:
    """The descriptors as if Gemini's table had lost MALFORMED_RESPONSE and Messages' had never
    heard of the mcp_tool_use block."""
    gemini = dataclasses.replace(GEMINI, reasons=Reasons(
        {k: v for k, v in GEMINI.reasons.table.items() if k != "MALFORMED_RESPONSE"},
        GEMINI.reasons.blocked))
    messages = dataclasses.replace(MESSAGES, kinds=Kinds(
        MESSAGES.kinds.events, MESSAGES.kinds.blocks - {"mcp_tool_use"}, MESSAGES.kinds.deltas))
    patched = {Api.GEMINI: gemini, Api.MESSAGES: messages}
    monkeypatch.setattr(sdkdrift, "protocol", lambda api: patched.get(Api(api)) or protocol(api))


def test_drift_fails_naming_a_name_taken_out_of_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    _without(monkeypatch)
    missing = sdkdrift.drift(sdkdrift.sdk_names())
    assert [(str(r.api), r.what, r.name) for r in missing] == [
        ("gemini", "reason", "MALFORMED_RESPONSE"), ("messages", "block", "mcp_tool_use")]
    with pytest.raises(AssertionError, match="gemini reason 'MALFORMED_RESPONSE' \\(google-genai "):
        assert_no_drift()


def test_protocols_sdk_drift_exits_0_when_everything_is_classified() -> None:
    result = CliRunner().invoke(app, ["protocols", "--sdk-drift", "--json"])
    assert result.exit_code == 0, result.output
    assert '"name": "mcp_tool_use", "protocol": "messages", "what": "block", "class": "known"' \
        in result.output


def test_protocols_sdk_drift_exits_1_naming_what_is_unclassified(
        monkeypatch: pytest.MonkeyPatch) -> None:
    _without(monkeypatch)
    result = CliRunner().invoke(app, ["protocols", "--sdk-drift"])
    assert result.exit_code == 1
    assert "2 unclassified" in result.output
    assert "MALFORMED_RESPONSE" in result.output and "mcp_tool_use" in result.output


def test_protocols_prints_each_reason_with_its_class() -> None:
    result = CliRunner().invoke(app, ["protocols", "--json"])
    assert result.exit_code == 0
    assert '{"protocol": "gemini", "reason": "MALFORMED_FUNCTION_CALL", "class": "failed"}' \
        in result.output
    assert '{"protocol": "messages", "reason": "refusal", "class": "policy"}' in result.output
