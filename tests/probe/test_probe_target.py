"""A target's path is worked out once, from its URL, as records and evidence name it."""

from __future__ import annotations

from sseguard.core.verdict import Api
from sseguard.probe.config import make_arm
from sseguard.probe.target import Target


def test_the_path_is_the_urls_path_for_each_protocol() -> None:
    assert Target.of(make_arm("a", "http://127.0.0.1:9/v1")).path == "/v1/chat/completions"
    assert Target.of(make_arm("r", "http://127.0.0.1:9/v1", api=Api.RESPONSES)).path == "/v1/responses"
    assert Target.of(make_arm("m", "http://h:9/proxy/v1", api=Api.MESSAGES)).path == \
        "/proxy/v1/messages"


def test_a_query_stays_out_of_the_path_and_the_path_matches_the_arms() -> None:
    arm = make_arm("g", "http://127.0.0.1:9/v1beta?key=abc", model="gemini-2.5-flash", api=Api.GEMINI)
    target = Target.of(arm)
    assert "?" not in target.path and target.path == arm.path
    assert target.path == "/v1beta/models/gemini-2.5-flash:streamGenerateContent"


def test_a_target_built_by_hand_gets_its_path_too() -> None:
    target = Target(arm=make_arm("a", "http://x:1/v1"), url="http://x:1/base/v1/chat/completions",
                    headers={})
    assert target.path == "/base/v1/chat/completions"
