"""The consistency workload: deterministic requests in every protocol's words, references kept with the
run, and a sweep against chaos's cache-corruption pattern that finds exactly what was injected."""

from __future__ import annotations

import inspect
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from sseguard.analyze.summary import analyze_sources
from sseguard.chaos import ChaosConfig, Fault, run_chaos
from sseguard.chaos.config import CachePattern
from sseguard.core.verdict import Api
from sseguard.probe import consistency
from sseguard.probe.config import WorkloadSpec
from sseguard.probe.runner import execute
from sseguard.probe.workloads import Workload
from support.probe import FAST, config, serve_app

# ── comparing answers ────────────────────────────────────────────────────────────────────────────────


def test_identical_answers_and_where_one_diverged() -> None:
    assert consistency.compare("The tide is high.", "The tide is high.") == ("identical", None, None)
    assert consistency.compare("The tide is high.", "The tide is low.") == ("diverged", 12, 3)
    # An answer that stops early (or goes on) diverges where the shorter one ends.
    assert consistency.compare("The tide is high.", "The tide") == ("diverged", 8, 2)


def test_token_positions_count_words_and_punctuation_apart() -> None:
    assert consistency.token_position("Hello, world! Fine.", 13) == 4
    assert consistency.token_position("", 0) == 0


def test_half_the_prompts_share_a_cacheable_prefix_and_half_are_shorter_than_a_block() -> None:
    long = [consistency.prompt(i) for i in range(0, consistency.PROMPTS, 2)]
    short = [consistency.prompt(i) for i in range(1, consistency.PROMPTS, 2)]
    heads = {p.rsplit("\n\n", 1)[0] for p in long}
    assert len(heads) == 1 and len(next(iter(heads))) > 512
    assert all(len(p.split()) < 12 and "\n" not in p for p in short)


# ── deterministic sampling, in each protocol's words ─────────────────────────────────────────────────

SAMPLING = {
    Api.CHAT: ({"temperature": 0, "top_p": 1, "seed": 1234}, ()),
    Api.RESPONSES: ({"temperature": 0, "top_p": 1}, ("seed",)),
    Api.MESSAGES: ({}, ("seed", "top_p", "top_k", "temperature")),
}


@pytest.mark.parametrize("api", list(SAMPLING))
def test_each_protocol_asks_for_deterministic_sampling_in_its_own_words(api: Api) -> None:
    workload = Workload(WorkloadSpec(name="consistency"))
    body = workload.finish(workload.conversation("w", api).next_body(), model="m", api=api)
    wanted, absent = SAMPLING[api]
    assert {k: body[k] for k in wanted} == wanted
    assert not set(absent) & set(body)


def test_gemini_asks_in_its_generation_config() -> None:
    workload = Workload(WorkloadSpec(name="consistency"))
    body = workload.finish(workload.conversation("w", Api.GEMINI).next_body(), model="m",
                           api=Api.GEMINI)
    assert body["generationConfig"] == {"temperature": 0, "topP": 1, "seed": 1234}


def test_other_workloads_leave_sampling_to_the_server() -> None:
    workload = Workload(WorkloadSpec(name="small"))
    body = workload.finish(workload.conversation("w").next_body(), model="m")
    assert not {"temperature", "top_p", "seed"} & set(body)


# ── the SDKs send the same fields, so a server reads ours as it reads theirs ─────────────────────────

BODIES = web.AppKey("bodies", list)


async def _capture(request: web.Request) -> web.Response:
    request.app[BODIES].append(await request.json())
    return web.json_response({"error": {"message": "captured", "type": "invalid_request_error",
                                        "code": 400, "status": "INVALID_ARGUMENT"}}, status=400)


def _capturing_app() -> web.Application:
    app = web.Application()
    app[BODIES] = []
    app.router.add_route("POST", "/{tail:.*}", _capture)
    return app


async def test_the_real_sdks_send_seed_and_its_equivalents_as_the_workload_does() -> None:
    import anthropic
    import openai
    from google import genai
    from google.genai import types

    app = _capturing_app()
    async with serve_app(app) as base:
        root = base.removesuffix("/v1")
        oai = openai.AsyncOpenAI(base_url=base, api_key="not-a-key", max_retries=0)
        with pytest.raises(openai.BadRequestError):
            await oai.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}],
                                              stream=True, seed=1234, temperature=0, top_p=1)
        gem = genai.Client(api_key="not-a-key", http_options=types.HttpOptions(
            base_url=root, retry_options=types.HttpRetryOptions(attempts=1)))
        with pytest.raises(Exception, match="captured"):
            async for _ in await gem.aio.models.generate_content_stream(
                    model="m", contents="hi",
                    config=types.GenerateContentConfig(seed=1234, temperature=0, top_p=1)):
                pass
    sdk_chat, sdk_gemini = app[BODIES]
    ours = Workload(WorkloadSpec(name="consistency"))

    def finished(api: Api) -> dict[str, Any]:
        return ours.finish(ours.conversation("w", api).next_body(), model="m", api=api)

    chat, messages, gemini = finished(Api.CHAT), finished(Api.MESSAGES), finished(Api.GEMINI)
    for key in ("seed", "temperature", "top_p"):
        assert sdk_chat[key] == chat[key], key
    # The Messages API has no such fields any more: the anthropic SDK cannot send them, nor do we.
    sampling = {"seed", "temperature", "top_p", "top_k"}
    assert not sampling & set(inspect.signature(anthropic.resources.messages.AsyncMessages.create).parameters)
    assert not sampling & set(messages)
    assert sdk_gemini["generationConfig"] == gemini["generationConfig"] == {
        "temperature": 0, "topP": 1, "seed": 1234}


# ── against chaos ────────────────────────────────────────────────────────────────────────────────────

async def test_a_sweep_finds_the_cache_corruption_at_sixty_and_nothing_on_a_healthy_server(
        tmp_path: Path) -> None:
    corrupting = ChaosConfig(seed=3, pacing=FAST,
                             patterns=(CachePattern(Fault.GARBLED, above=8, probability=1.0),))
    async with run_chaos(corrupting) as bad, run_chaos(ChaosConfig(seed=3, pacing=FAST)) as good:
        cfg = config([f"cached={bad.url}", f"healthy={good.url}"], tmp_path, count=60,
                     concurrency="1,8,60", workload="consistency", stall_timeout=10.0, timeout=60.0)
        result = await execute(cfg, live=False)
    records = result.records
    refs = [r for r in records if r.consistency == "reference"]
    assert len(refs) == 2 * consistency.PROMPTS
    compared = [r for r in records
                if r.consistency == "identical" or consistency.is_diverged(r.consistency)]
    # Every whole answer is compared (on a loaded machine a few streams may stall: not compared).
    assert len(compared) == sum(r.ending == "complete" and r.consistency != "reference" for r in records)
    assert len(compared) >= 200
    # Every divergence is an injected garbling, and every injected garbling a divergence.
    assert all(consistency.is_diverged(r.consistency) == (r.injected == "garbled")
               for r in compared)
    diverged = Counter((r.arm, r.concurrency) for r in compared
                       if consistency.is_diverged(r.consistency))
    assert diverged[("cached", 1)] == diverged[("cached", 8)] == 0
    assert diverged[("cached", 60)] >= 5
    assert not [k for k in diverged if k[0] == "healthy"]
    # Only cached prompts are corrupted, and chaos reports them truthfully as cached tokens.
    assert all((r.cached_tokens or 0) > 0 for r in compared
               if consistency.is_diverged(r.consistency))
    # Chaos's garbling shuffles a span of words in place: every one is recorded as overwritten.
    assert all(str(r.consistency).endswith(":overwritten") for r in compared
               if consistency.is_diverged(r.consistency))
    assert {r.cache for r in compared} == {"none", "most"}
    assert all(r.passed for r in compared)  # a divergence is never a failed stream
    analysis = analyze_sources([str(tmp_path / "results.jsonl")])
    c = analysis.consistency
    assert c is not None
    at_sixty = next(lv for lv in c.levels if (lv.arm, lv.concurrency) == ("cached", 60))
    sixty = [r for r in compared if r.arm == "cached" and r.concurrency == 60]
    injected = sum(r.injected == "garbled" for r in sixty) / len(sixty)
    assert at_sixty.rate.low <= injected <= at_sixty.rate.high
    assert at_sixty.early == at_sixty.rate.failed  # a span early in the answer: the first 32 tokens
    named = {a.key for a in c.attributes["cached"] if a.significant}
    assert {"cache", "concurrency"} <= named
    assert not [a for a in c.attributes["healthy"] if a.significant]
    assert c.garbled.failed == c.total.failed  # every divergence judged garbled
    text = "\n".join(analysis.headlines)
    assert "cache corruption on arm cached" in text and "cache most" in text, text
    assert "on arm healthy" not in text


async def test_resume_and_a_later_run_reuse_the_stored_references(tmp_path: Path) -> None:
    async with run_chaos(ChaosConfig(seed=4, pacing=FAST)) as srv:
        first = await execute(config(srv.url, tmp_path, count=8, concurrency="2",
                                     workload="consistency"), live=False)
        stored = json.loads((tmp_path / consistency.REFERENCES).read_text())
        assert len(stored["arm1"]) == consistency.PROMPTS
        again = await execute(config(srv.url, tmp_path, count=16, concurrency="2",
                                     workload="consistency"), live=False, resume=True)
    assert json.loads((tmp_path / consistency.REFERENCES).read_text()) == stored
    refs = [r for r in again.records if r.consistency == "reference"]
    assert len(refs) == consistency.PROMPTS  # sent once, by the first run
    assert {r.consistency for r in again.records} - {"reference"} == {"identical"}
    assert len(first.records) == consistency.PROMPTS + 8
