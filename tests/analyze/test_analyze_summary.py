"""The analysis tables: judged under any policy, per arm and level, arm vs arm, JSON-able."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import fisher_exact

from sseguard.analyze import analyze, failure_reason
from sseguard.core.errors import ConfigError
from sseguard.core.policy import Policy
from sseguard.core.record import Record
from support.analyze import build, by_api, load_sweep, mixed, rec, routed, routed_within_messages


def dialect_run() -> list[Record]:
    """A gateway that never sends [DONE] on good answers, and truncates a few."""
    def one(i: int, rng: random.Random) -> dict[str, object]:
        return {"ending": "truncated" if rng.random() < 0.05 else "no_done", "started": i * 0.5}
    return build(400, 21, one)


def test_the_same_records_under_two_policies_give_different_rates() -> None:
    records = dialect_run()
    truncated = sum(r.ending == "truncated" for r in records)
    strict = analyze(records, Policy.from_spec("strict"))
    lenient = analyze(records, Policy.from_spec("no-done-ok"))
    assert strict.total.failed == len(records)
    assert lenient.total.failed == truncated and 0 < truncated < len(records)
    assert lenient.failures == {"truncated": truncated}
    assert strict.headlines[0] != lenient.headlines[0] and "no-done-ok" in lenient.headlines[0]


def test_a_finding_fails_a_complete_stream_until_tolerated() -> None:
    records = [rec(0), rec(1, findings=("missing_usage",)), rec(2, findings=("markup_leak",))]
    strict = Policy.from_spec()
    assert [failure_reason(r, strict) for r in records] == [None, "missing_usage", "markup_leak"]
    tolerant = Policy.from_spec("strict", "missing_usage")
    assert [failure_reason(r, tolerant) for r in records] == [None, None, "markup_leak"]
    assert analyze(records, tolerant).findings == {"missing_usage": 1, "markup_leak": 1}


def test_per_arm_and_per_level_rows_count_every_ending() -> None:
    records = load_sweep(per_level=40)
    for i, r in enumerate(records):
        r.arm = "a" if i % 2 else "b"
    analysis = analyze(records)
    assert [g.arm for g in analysis.arms] == ["a", "b"]
    assert sum(g.requests for g in analysis.arms) == len(records)
    assert {(g.arm, g.concurrency) for g in analysis.levels} == {(a, c) for a in "ab"
                                                                 for c in (1, 8, 16, 32, 60)}
    for g in analysis.levels:
        assert sum(g.endings.values()) == g.requests
        assert g.rate.failed == g.requests - g.endings.get("complete", 0)
        assert g.rate.low <= g.rate.value <= g.rate.high


def test_arm_versus_arm_is_fishers_exact_test() -> None:
    def one(i: int, rng: random.Random) -> dict[str, object]:
        arm = "bad" if i % 2 else "good"
        p = 0.2 if arm == "bad" else 0.01
        return {"arm": arm, "ending": "cut_mid_frame" if rng.random() < p else "complete"}

    analysis = analyze(build(400, 22, one))
    (comparison,) = analysis.comparisons
    a, b = comparison.rate_a, comparison.rate_b
    expected = fisher_exact([[a.failed, a.total - a.failed], [b.failed, b.total - b.failed]]).pvalue
    assert comparison.p == pytest.approx(expected)
    assert any(h.startswith("arm `bad` fails more often than arm `good`") for h in analysis.headlines)


def test_to_dict_is_strict_json_with_stable_attribute_keys() -> None:
    records = routed()
    records.append(rec(999, ending="http_error", rid="", status=503))
    data = json.loads(json.dumps(analyze(records).to_dict(), allow_nan=False))
    assert data["requests"] == len(records) and data["policy"]["name"] == "strict"
    assert data["attributes"][0]["key"] == "id_prefix"
    assert data["attributes"][0]["best"]["values"] == ["gw"]
    assert data["attributes"][0]["complete"] is True
    assert isinstance(data["headlines"], list) and data["timeline"]
    several = json.loads(json.dumps(analyze(mixed()).to_dict(), allow_nan=False))
    assert several["by_reason"]["truncated"][0]["key"] == "id_prefix"


def test_no_failures_says_so_with_the_interval() -> None:
    analysis = analyze([rec(i, started=float(i)) for i in range(50)])
    assert analysis.total.failed == 0 and analysis.top is None
    assert analysis.headlines == ["no stream of 50 failed under policy strict (95% interval for the "
                                  "failure rate: 0%–7.1%)"]


def test_nothing_to_analyze_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        analyze([])
    with pytest.raises(ConfigError):
        analyze(routed(n=10), top=0)


def test_rates_per_api_with_wilson_intervals_and_api_versus_api_fisher() -> None:
    records = by_api(arms_per_api=2)
    analysis = analyze(records)
    rows = {row.api: row for row in analysis.apis}
    assert set(rows) == {"chat", "responses", "messages"}
    for api, row in rows.items():
        mine = [r for r in records if r.api == api]
        failed = sum(r.ending != "complete" for r in mine)
        assert (row.rate.failed, row.rate.total) == (failed, len(mine))
        assert row.rate.low <= row.rate.value <= row.rate.high
        assert row.arms == (f"{api}-0", f"{api}-1")
    assert rows["chat"].rate.failed == 0 < rows["messages"].rate.failed
    pairs = {(c.arm_a, c.arm_b): c for c in analysis.api_comparisons}
    assert set(pairs) == {("chat", "messages"), ("chat", "responses"), ("messages", "responses")}
    c = pairs[("chat", "messages")]
    expected = fisher_exact([[c.rate_a.failed, c.rate_a.total - c.rate_a.failed],
                             [c.rate_b.failed, c.rate_b.total - c.rate_b.failed]]).pvalue
    assert c.kind == "api" and c.p == pytest.approx(expected) and c.p < 1e-6
    # Several arms per api: the api comparison is a finding of its own.
    assert any(h.startswith("api `messages` fails more often than api `chat`")
               for h in analysis.headlines)
    assert {g.arm: g.api for g in analysis.arms}["messages-1"] == "messages"
    data = json.loads(json.dumps(analysis.to_dict(), allow_nan=False))
    assert [a["api"] for a in data["apis"]] == ["chat", "messages", "responses"]
    assert data["api_comparisons"][0]["kind"] == "api" and data["arms"][0]["api"] == "chat"


def test_one_protocol_has_no_api_rows_and_records_without_api_read_as_chat() -> None:
    analysis = analyze(routed())
    assert analysis.apis == [] and analysis.api_comparisons == [] and analysis.within_api == {}
    assert {g.api for g in analysis.arms} == {"chat"}
    assert analysis.attribute("api") is None


def test_the_attribute_search_within_one_api_names_what_its_failures_share() -> None:
    records = routed_within_messages()
    analysis = analyze(records)
    within = analysis.within_api
    assert set(within) == {"messages"}  # chat had no failure to explain
    lead = within["messages"][0]
    assert lead.key == "id_prefix" and lead.best is not None and lead.best.values == ("gw",)
    assert lead.complete and lead.headline is not None
    assert lead.headline.startswith("within messages: all ")
    msg = [r for r in records if r.api == "messages"]
    assert lead.observed == len(msg)
    # Across apis the pooled search names the route too (every failure carries `gw-`).
    assert analysis.top is not None and analysis.top.key == "id_prefix"


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["chat", "responses", "messages"]), st.integers(0, 3),
                          st.sampled_from(["complete", "truncated", "no_finish", "complete"])),
                min_size=1, max_size=60))
def test_api_rows_partition_the_streams_and_each_arm_row_names_its_apis(
        streams: list[tuple[str, int, str]]) -> None:
    records = [rec(i, api=api, arm=f"{api}-{k}", ending=ending, started=float(i))
               for i, (api, k, ending) in enumerate(streams)]
    analysis = analyze(records)
    apis = {api for api, _, _ in streams}
    if len(apis) < 2:
        assert analysis.apis == [] and analysis.attribute("api") is None
    else:
        assert {row.api for row in analysis.apis} == apis
        assert sum(row.requests for row in analysis.apis) == len(records)
        assert sum(row.rate.failed for row in analysis.apis) == analysis.total.failed
        for row in analysis.apis:
            mine = [r for r in records if r.api == row.api]
            assert row.rate.failed == sum(r.ending != "complete" for r in mine)
            assert row.arms == tuple(sorted({r.arm for r in mine}))
        assert len(analysis.api_comparisons) == len(apis) * (len(apis) - 1) // 2
    assert {g.arm: g.api for g in analysis.arms} == {r.arm: r.api for r in records}
