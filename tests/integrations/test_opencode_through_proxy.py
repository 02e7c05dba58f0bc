"""opencode, a real coding agent, through ``sseguard proxy --resume vllm`` in front of a chaos upstream
that cuts the first answer of every conversation after content (``--first-answer truncated``).

Without the proxy opencode would act on the half answer; through it, each cut stream is continued
where it broke and opencode finishes its turn: a tool call, then a final text, every step ended with
a reason. The binary is opencode's standalone Linux build (``.ci/opencode`` fetches it; the test
finds it through ``SSEGUARD_OPENCODE``). It runs with a home of its own in the test's directory, its
model list fetch and update check off. It still asks the npm registry for its plugin package at start
(seen with strace), so every HTTP(S) request not to 127.0.0.1 is sent to a closed port on 127.0.0.1 (the
proxy variables, and the registry Bun and npm read): traced, it then connects to nothing but loopback.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from sseguard.chaos import ChaosConfig, run_chaos
from sseguard.proxy import ProxyConfig, run_proxy
from sseguard.store import open_store

OPENCODE = os.environ.get("SSEGUARD_OPENCODE", "")
IN_CI = os.environ.get("CI") == "true" and bool(OPENCODE)


def _opencode() -> str:
    if OPENCODE and Path(OPENCODE).is_file() and os.access(OPENCODE, os.X_OK):
        return OPENCODE
    if IN_CI:
        pytest.fail(f"SSEGUARD_OPENCODE={OPENCODE!r} is no executable: run .ci/opencode")
    pytest.skip("opencode not found: set SSEGUARD_OPENCODE to the binary .ci/opencode prints")


def _config(base_url: str) -> dict[str, Any]:
    return {
        "$schema": "https://opencode.ai/config.json",
        "provider": {"guarded": {"npm": "@ai-sdk/openai-compatible", "name": "guarded",
                                 "options": {"baseURL": base_url, "apiKey": "not-a-key"},
                                 "models": {"chaos-1": {"name": "chaos-1"}}}},
        "model": "guarded/chaos-1",
        "autoupdate": False,
        "share": "disabled",
    }


async def _run_opencode(binary: str, project: Path, home: Path) -> tuple[int, list[dict[str, Any]], str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
           "XDG_CONFIG_HOME": str(home / ".config"), "XDG_DATA_HOME": str(home / ".local/share"),
           "XDG_CACHE_HOME": str(home / ".cache"), "XDG_STATE_HOME": str(home / ".local/state"),
           "OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_MODELS_FETCH": "1",
           "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1"}
    nowhere = "http://127.0.0.1:9"  # the discard port: nothing listens, a request fails at once
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        env[name] = nowhere
    env |= {"NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
            "BUN_CONFIG_REGISTRY": nowhere + "/", "NPM_CONFIG_REGISTRY": nowhere + "/"}
    proc = await asyncio.create_subprocess_exec(
        binary, "run", "--format", "json", "-m", "guarded/chaos-1", "Say hello in one sentence.",
        cwd=project, env=env, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout=300)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    events = [json.loads(line) for line in out.decode().splitlines() if line.startswith("{")]
    return proc.returncode or 0, events, err.decode()[-3000:]


@pytest.mark.timeout(600)
async def test_opencode_finishes_its_turn_when_every_first_answer_is_cut(tmp_path: Path) -> None:
    binary = _opencode()
    project, home = tmp_path / "project", tmp_path / "home"
    project.mkdir()
    home.mkdir()
    store = tmp_path / "proxy.db"
    chaos_config = ChaosConfig(seed=1).with_overrides(first_answer="truncated")
    async with run_chaos(chaos_config) as chaos:
        proxy_config = ProxyConfig.from_options(upstream=chaos.url, listen="127.0.0.1:0", resume="vllm",
                                                retry=0, store=str(store))
        async with run_proxy(proxy_config) as proxy:
            (project / "opencode.json").write_text(json.dumps(_config(proxy.url)), encoding="utf-8")
            code, events, err = await _run_opencode(binary, project, home)
        cut = chaos.stats.injected("truncated")
        async with aiohttp.ClientSession() as session, \
                session.get(chaos.url.removesuffix("/v1") + "/chaos/conversations") as resp:
            conversations: dict[str, Any] = await resp.json()

    assert code == 0, err
    steps = [e["part"] for e in events if e.get("type") == "step_finish"]
    texts = [e["part"]["text"] for e in events if e.get("type") == "text"]
    # The turn ran to its end: every step finished with a reason, the last one "stop", with text.
    assert steps and all(s.get("reason") for s in steps), events
    assert steps[-1]["reason"] == "stop" and texts and texts[-1].strip(), events
    # What opencode printed last is its conversation's whole last answer, as chaos wrote it uncut.
    assert texts[-1] in {c["last_text"] for c in conversations.values()}, (texts, conversations)
    assert any(c["broken"] == "truncated" and c["last_text"] == texts[-1]
               for c in conversations.values()), conversations
    # Every conversation's first answer was cut upstream, and each cut was continued by the proxy.
    assert cut >= 1
    reader = open_store(str(store))
    try:
        records = list(reader.read())
    finally:
        reader.close()
    client = [r for r in records if r.heal_of is None]
    resumed = [r for r in client if r.healed == "resume"]
    assert len(resumed) == cut, [(r.healed, r.ending) for r in records]
    assert all(r.ending == "complete" for r in client), [(r.healed, r.ending) for r in client]
