"""Arms speak a protocol: `--api` for arms that set none, `api` in `[[arm]]`, each protocol's path
and auth headers, and an unknown api refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sseguard.core.errors import ConfigError
from sseguard.probe.config import build_config, make_arm
from sseguard.probe.target import Target

KEY = "k3y-anthropic-style-0042"


def test_each_protocol_has_its_own_path_unless_the_url_already_ends_with_it() -> None:
    assert make_arm("a", "http://h/v1").url == "http://h/v1/chat/completions"
    assert make_arm("a", "http://h/v1", api="responses").url == "http://h/v1/responses"
    assert make_arm("a", "http://h/v1/", api="messages").url == "http://h/v1/messages"
    assert make_arm("a", "http://h/anthropic/v1/messages", api="messages").path == "/anthropic/v1/messages"


def test_a_messages_arm_sends_its_key_as_x_api_key_with_the_anthropic_version() -> None:
    arm = make_arm("claude", "http://h/v1", api="messages", key_env="ANTHROPIC_TEST_KEY")
    target = Target.of(arm, {"ANTHROPIC_TEST_KEY": KEY})
    assert target.headers["x-api-key"] == KEY and target.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in {k.lower() for k in target.headers}
    assert target.secrets == [KEY]
    openai = Target.of(make_arm("o", "http://h/v1", api="responses", key_env="K"), {"K": KEY})
    assert openai.headers["authorization"] == f"Bearer {KEY}" and "anthropic-version" not in openai.headers
    # A gateway that wants the Anthropic path keyed another way says so, as for any arm.
    bearer = make_arm("gw", "http://h/v1", api="messages", key_env="K", key_header="authorization")
    assert Target.of(bearer, {"K": KEY}).headers["authorization"] == f"Bearer {KEY}"


def test_api_flag_fills_arms_that_set_none_and_toml_arms_keep_their_own(tmp_path: Path) -> None:
    toml = tmp_path / "probe.toml"
    toml.write_text('[[arm]]\nname = "claude"\nbase_url = "http://127.0.0.1:9/v1"\napi = "messages"\n'
                    '[[arm]]\nname = "plain"\nbase_url = "http://127.0.0.1:9/v1"\n')
    out = str(tmp_path / "o")
    cfg = build_config({"out": out}, config_path=str(toml))
    assert [(a.name, a.protocol) for a in cfg.arms] == [("claude", "messages"), ("plain", "chat")]
    cfg = build_config({"out": out, "api": "responses", "arms": ["cli=http://127.0.0.1:9/v1"]},
                       config_path=str(toml))
    assert [(a.name, a.protocol) for a in cfg.arms] == [("claude", "messages"), ("plain", "responses"),
                                                        ("cli", "responses")]
    saved = cfg.to_dict()
    assert [a["api"] for a in saved["arms"]] == ["messages", "responses", "responses"]
    # A resumed run keeps each arm's api; a run saved before apis existed was chat.
    again = build_config({"out": out}, saved=json.loads(json.dumps(saved)))
    assert [a.protocol for a in again.arms] == ["messages", "responses", "responses"]
    old = {**saved, "arms": [{"name": "x", "base_url": "http://127.0.0.1:9/v1"}]}
    assert build_config({"out": out}, saved=old).arms[0].protocol == "chat"


def test_an_unknown_api_is_one_line_naming_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        build_config({"arms": ["a=http://127.0.0.1:9/v1"], "api": "grpc", "out": str(tmp_path)})
    assert str(err.value) == "--api: unknown api 'grpc' (known: chat, responses, messages, gemini)"
    toml = tmp_path / "p.toml"
    toml.write_text('[[arm]]\nname = "x"\nbase_url = "http://127.0.0.1:9/v1"\napi = "soap"\n')
    with pytest.raises(ConfigError, match=r"arm 'x': unknown api 'soap' \(known: chat, responses"):
        build_config({"out": str(tmp_path)}, config_path=str(toml))


def test_each_arm_may_bring_its_own_body_in_its_own_format(tmp_path: Path) -> None:
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps({"messages": [{"role": "system", "content": "x"},
                                             {"role": "user", "content": "y"}]}))
    claude = tmp_path / "claude.json"
    claude.write_text(json.dumps({"system": "x", "max_tokens": 50,
                                  "messages": [{"role": "user", "content": "y"}]}))
    toml = tmp_path / "p.toml"
    toml.write_text(f'[[arm]]\nname = "oai"\nbase_url = "http://127.0.0.1:9/v1"\nbody = "{chat}"\n'
                    f'[[arm]]\nname = "claude"\nbase_url = "http://127.0.0.1:9/v1"\napi = "messages"\n'
                    f'body = "{claude}"\n')
    cfg = build_config({"out": str(tmp_path / "o")}, config_path=str(toml))
    assert [(a.name, a.body_file) for a in cfg.arms] == [("oai", str(chat)), ("claude", str(claude))]
    assert [a["body_file"] for a in cfg.to_dict()["arms"]] == [str(chat), str(claude)]
    # The same two files on the wrong arms: each refused, naming the arm and the format it needs.
    toml.write_text(f'[[arm]]\nname = "claude"\nbase_url = "http://127.0.0.1:9/v1"\napi = "messages"\n'
                    f'body = "{chat}"\n')
    with pytest.raises(ConfigError, match=r"arm 'claude' speaks messages and needs an Anthropic"):
        build_config({"out": str(tmp_path / "o")}, config_path=str(toml))
    toml.write_text('[[arm]]\nname = "x"\nbase_url = "http://127.0.0.1:9/v1"\nbody = "nope.json"\n')
    with pytest.raises(ConfigError, match=r"arm 'x': cannot read body file nope\.json"):
        build_config({"out": str(tmp_path / "o")}, config_path=str(toml))


def test_an_unknown_key_in_an_arm_or_the_probe_table_is_named_with_the_known_ones() -> None:
    from sseguard.probe.config_file import arm_tables, probe_table

    with pytest.raises(ConfigError) as err:
        arm_tables({"arm": [{"base_url": "http://127.0.0.1:1/v1", "api_key": "x"}]}, "p.toml")
    assert str(err.value) == ("p.toml: arm 1: unknown key 'api_key' (known: api, base_url, body, headers, "
                              "key_env, key_header, model, name, url)")
    with pytest.raises(ConfigError) as err:
        probe_table({"probe": {"workload": "small", "wrokers": 2}}, "p.toml")
    assert str(err.value).startswith("p.toml: unknown key 'wrokers' in [probe] (known: api, big_bytes, ")
