"""The attribute search names what the failing streams share, and claims nothing when they share nothing."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sseguard.analyze import analyze
from sseguard.analyze.columns import clock
from sseguard.analyze.counts import bucket_width
from sseguard.core.record import Record
from support.analyze import (
    build,
    by_api,
    load_sweep,
    mixed,
    no_signal,
    rec,
    routed,
    time_window,
)

STABLE_KEYS = {"id_prefix", "time_window", "reuse_index", "prompt_size", "concurrency", "arm", "workload"}


def failing(records: list[Record]) -> list[Record]:
    return [r for r in records if r.ending != "complete" or r.findings]


def test_routed_failures_name_the_id_prefix_first() -> None:
    records = routed()
    bad = failing(records)
    analysis = analyze(records)
    top = analysis.top
    assert top is not None and top.key == "id_prefix"
    assert top.best is not None and top.best.values == ("gw",) and top.complete
    healthy_numeric = sum(r.id_prefix == "numeric" for r in records)
    assert analysis.headlines[1] == top.headline
    assert top.headline is not None and top.headline.startswith(
        f"all {len(bad)} truncated streams had response ids starting `gw-`")
    assert f"none of {healthy_numeric} numeric response ids failed" in top.headline


def test_time_window_failures_name_the_window_and_their_endings() -> None:
    records = time_window()
    analysis = analyze(records)
    top = analysis.top
    assert top is not None and top.key == "time_window" and top.complete
    assert top.best is not None and top.best.label == "2:00–4:00"
    assert top.headline is not None
    assert "started 2:00–4:00 into the run" in top.headline
    assert "cut_mid_frame" in top.headline and "truncated" in top.headline  # the endings are named


def test_load_dependent_failures_name_concurrency_and_flag_the_sweeps_time_mirror() -> None:
    analysis = analyze(load_sweep())
    top = analysis.top
    assert top is not None and top.key == "concurrency"
    assert top.best is not None and set(top.best.values) <= {"32", "60"} and "60" in top.best.values
    # A sweep runs its levels one after another, so some time window looks bad too; it is no
    # finding of its own: either the same streams, or nothing left once the level is held fixed.
    mirror = analysis.attribute("time_window")
    assert mirror is not None and mirror.significant and not mirror.lead
    assert "concurrency" in (mirror.confounded_with, mirror.explained_by)
    assert sum("concurrency" in h or "into the run" in h for h in analysis.headlines[1:2]) == 1
    rates = [g.rate.value for g in analysis.levels]
    assert rates[0] < rates[2] < rates[-1]


def test_load_dependence_without_a_sweep_has_no_time_mirror() -> None:
    levels = {1: 0.0, 16: 0.03, 64: 0.3}

    def one(i: int, rng: random.Random) -> dict[str, object]:
        level = rng.choice(list(levels))
        return {"concurrency": level, "started": i * 0.3,
                "ending": "truncated" if rng.random() < levels[level] else "complete"}

    analysis = analyze(build(600, 5, one))
    assert analysis.top is not None and analysis.top.key == "concurrency"
    assert analysis.top.also == () and analysis.top.best is not None
    assert analysis.top.best.values == ("64",)


@pytest.mark.parametrize("seed", [4, 11, 12, 13, 14])
def test_uniform_random_failures_claim_no_separation(seed: int) -> None:
    analysis = analyze(no_signal(seed))
    assert analysis.total.failed > 10
    assert analysis.top is None
    assert not any(a.significant or a.complete for a in analysis.attributes)
    assert analysis.headlines[1].startswith("no recorded attribute separates failing from healthy")


def test_header_values_are_attributes_but_per_request_ids_are_not() -> None:
    def one(i: int, rng: random.Random) -> dict[str, object]:
        server = rng.choice(["b1", "b2", "b3"])
        bad = server == "b2" and rng.random() < 0.4
        return {"headers": {"server": server, "x-request-id": f"req-{i}", "traceparent": f"00-{i:032x}"},
                "ending": "no_done" if bad else "complete", "started": i * 0.5}

    analysis = analyze(build(300, 6, one))
    keys = {a.key for a in analysis.attributes}
    assert "header:x-request-id" not in keys and "header:traceparent" not in keys
    assert analysis.top is not None and analysis.top.key == "header:server"
    assert analysis.top.best is not None and analysis.top.best.values == ("b2",)
    assert analysis.top.headline is not None and "`server: b2`" in analysis.top.headline


def test_injected_ground_truth_is_never_an_attribute() -> None:
    # The chaos server's own label of each fault would "explain" every failure perfectly.
    def one(i: int, rng: random.Random) -> dict[str, object]:
        bad = rng.random() < 0.15
        fault = "truncated" if bad else "none"
        return {"ending": "truncated" if bad else "complete", "injected": fault, "started": i * 0.5,
                "headers": {"server": "chaos", "x-sseguard-fault": fault}}

    analysis = analyze(build(300, 7, one))
    keys = {a.key for a in analysis.attributes}
    assert not any("injected" in k or "sseguard-fault" in k for k in keys)
    assert analysis.top is None


def test_failures_without_a_response_id_do_not_make_the_id_prefix_a_finding() -> None:
    # An HTTP 503 has no response id; "all failures had no id" is a consequence, not a cause.
    def one(i: int, rng: random.Random) -> dict[str, object]:
        if rng.random() < 0.1:
            return {"ending": "http_error", "status": 503, "rid": "", "headers": {}, "started": i * 0.5}
        return {"rid": f"{rng.choice(['a', 'b'])}-{i}", "started": i * 0.5}

    records = build(400, 8, one)
    for r in records:
        if not r.response_id:
            r.response_id = r.id_prefix = None
    analysis = analyze(records)
    prefix = analysis.attribute("id_prefix")
    assert prefix is not None and not prefix.significant
    assert prefix.unobserved_failures == len(failing(records)) and prefix.failed == 0


def test_a_header_that_mirrors_the_route_is_named_beside_it_not_before_it() -> None:
    records = routed()
    for r in records:
        r.headers["x-backend"] = "edge" if r.id_prefix == "gw" else "core"
    analysis = analyze(records)
    assert analysis.top is not None and analysis.top.key == "id_prefix"
    assert analysis.top.also == ("header:x-backend",)
    backend = analysis.attribute("header:x-backend")
    assert backend is not None and backend.confounded_with == "id_prefix"
    assert sum(h.startswith("all ") for h in analysis.headlines) == 1  # one finding, not two


def test_partial_separation_is_stated_with_both_rates() -> None:
    def one(i: int, rng: random.Random) -> dict[str, object]:
        big = rng.random() < 0.5
        p = 0.3 if big else 0.02
        return {"prompt_bytes": 2_000_000 if big else 800, "started": i * 0.5,
                "ending": "stalled" if rng.random() < p else "complete"}

    analysis = analyze(build(500, 9, one))
    top = analysis.top
    assert top is not None and top.key == "prompt_size" and not top.complete
    assert top.best is not None and top.best.label == "1 MiB–4 MiB"
    assert top.headline is not None and "stalled streams had prompts of 1 MiB–4 MiB" in top.headline
    assert f"{top.best.outside.failed} of {top.best.outside.total}" in top.headline


def test_every_attribute_key_is_stable() -> None:
    records = routed()
    for i, r in enumerate(records):
        r.arm = "a" if i % 2 else "b"
        r.workload = "small" if i % 3 else "tools"
        r.prompt_bytes = 1000 * (1 + i % 7) ** 3
        r.concurrency = (1, 8)[i % 2]
        r.headers["server"] = ("b1", "b2")[i % 2]  # a constant header explains nothing: left out
    keys = {a.key for a in analyze(records).attributes}  # every column with two values or more
    assert keys >= STABLE_KEYS
    assert {k for k in keys if k not in STABLE_KEYS} == {"header:server"}


@pytest.mark.parametrize(("span", "width"), [(0, None), (50, 3.0), (150, 10.0), (600, 60.0),
                                             (3 * 3600, 600.0)])
def test_time_windows_are_minutes_finer_for_short_runs_wider_for_long_ones(
        span: float, width: float | None) -> None:
    assert bucket_width(span) == width


def test_time_windows_count_from_each_runs_own_start() -> None:
    a = [rec(i, started=i * 10.0, run_id="r1") for i in range(30)]
    b = [rec(i, started=5000 + i * 10.0, run_id="r2") for i in range(30)]
    analysis = analyze(a + b)
    assert analysis.span_s == pytest.approx(290.0)


def test_several_kinds_of_failure_are_each_traced_to_their_own_cause() -> None:
    # The demo's story: a route truncates, a window of overload sends error events, load cuts.
    records = mixed()
    counts = {e: sum(r.ending == e for r in records) for e in ("truncated", "error_event", "cut_mid_frame")}
    analysis = analyze(records)
    assert set(analysis.by_reason) == set(counts)
    leads = {reason: attrs[0] for reason, attrs in analysis.by_reason.items()}
    assert (leads["truncated"].key, leads["truncated"].complete) == ("id_prefix", True)
    assert (leads["error_event"].key, leads["error_event"].complete) == ("time_window", True)
    assert leads["cut_mid_frame"].key == "concurrency"
    assert leads["cut_mid_frame"].best is not None and leads["cut_mid_frame"].best.values == ("32",)
    said = analysis.headlines[1:4]
    assert said[0].startswith(f"all {counts['truncated']} truncated streams had response ids starting `gw-`")
    assert said[0].count("ended truncated") == 2  # rates of truncation, not of any failure
    window = leads["error_event"].best
    assert window is not None
    start, end = (int(t.split(":")[0]) * 60 + int(t.split(":")[1]) for t in window.label.split("–"))
    assert 44 <= start <= 47 and 53 <= end <= 56  # the burst was 0:47–0:53
    assert said[1].startswith(f"all {counts['error_event']} error_event streams started {window.label}")
    assert "cut_mid_frame streams ran at concurrency 32" in said[2]


def test_a_run_that_fails_one_way_has_no_per_kind_search() -> None:
    assert analyze(routed()).by_reason == {}


@pytest.mark.parametrize(("seconds", "text"), [(0, "0:00"), (125, "2:05"), (7.5, "0:07.5"),
                                               (3725, "1:02:05")])
def test_clock_labels_stay_distinct_for_half_second_windows(seconds: float, text: str) -> None:
    assert clock(seconds) == text


def test_a_numeric_header_is_searched_as_ranges() -> None:
    def one(i: int, rng: random.Random) -> dict[str, object]:
        depth = rng.randrange(0, 48)
        bad = depth >= 16 and rng.random() < 0.3
        return {"headers": {"x-queue-depth": str(depth)}, "started": i * 0.2,
                "ending": "stalled" if bad else "complete"}

    analysis = analyze(build(500, 31, one))
    top = analysis.top
    assert top is not None and top.key == "header:x-queue-depth" and top.ordered and top.complete
    assert top.best is not None and top.best.label == "16–63"
    assert top.headline is not None and "had `x-queue-depth` 16–63" in top.headline


def test_an_attribute_that_only_follows_a_stronger_one_is_no_finding_of_its_own() -> None:
    # Each connection carries more requests as the run goes on, so the reuse index tracks time; a
    # burst of failures in one window then makes a reuse bucket look bad as well.
    def one(i: int, rng: random.Random) -> dict[str, object]:
        started = i * 0.25
        bad = 60 <= started < 80 and rng.random() < 0.3
        return {"started": started, "reuse_index": int(started // 10) + rng.choice([0, 0, 1]),
                "ending": "truncated" if bad else "complete"}

    analysis = analyze(build(480, 32, one))
    assert analysis.top is not None and analysis.top.key == "time_window"
    reuse = analysis.attribute("reuse_index")
    assert reuse is not None and reuse.significant  # on its own it looks like a finding…
    assert "time_window" in (reuse.explained_by, reuse.confounded_with)  # …but it only follows time
    assert not any("reuse index" in h for h in analysis.headlines)


def test_a_reuse_index_that_was_not_measured_is_left_out_not_read_as_a_fresh_connection() -> None:
    # Random truncations; the failing streams' connection was not seen (None). Recorded as 0, as
    # the probe once did, "reuse index 0" would be named as the cause of every failure.
    def one(i: int, rng: random.Random) -> dict[str, object]:
        bad = rng.random() < 0.1
        return {"started": i * 0.1, "ending": "truncated" if bad else "complete",
                "reuse_index": None if bad else rng.randrange(0, 40)}

    records = build(600, 33, one)
    analysis = analyze(records)
    reuse = analysis.attribute("reuse_index")
    assert reuse is not None and not reuse.significant
    assert reuse.unobserved_failures == len(failing(records)) > 0
    assert analysis.top is None
    assert analysis.headlines[1].startswith("no recorded attribute separates failing from healthy")
    as_zero = analyze([r if r.reuse_index is not None else rec(r.index, ending=r.ending,
                                                                  started=r.started_at - 1_750_000_000.0,
                                                                  reuse_index=0)
                       for r in records])
    assert as_zero.top is not None and as_zero.top.key == "reuse_index"  # the artifact, for contrast


def test_a_reuse_bucket_seen_only_at_the_failing_level_is_reported_as_following_it() -> None:
    # A sweep: levels 1, 8, 32 one after another; connections carry more requests as a level goes
    # on, and only level 32 has reuse 16 and up. Failures: 30 % at 32, whatever the reuse index.
    def one(i: int, rng: random.Random) -> dict[str, object]:
        level = (1, 8, 32)[i // 200]
        reuse = (i % 200) // (200 // min(level, 8)) + (16 if level == 32 and i % 200 >= 100 else 0)
        bad = level == 32 and rng.random() < 0.3
        return {"started": i * 0.05, "concurrency": level, "reuse_index": reuse,
                "ending": "cut_mid_frame" if bad else "complete"}

    analysis = analyze(build(600, 34, one))
    assert analysis.top is not None and analysis.top.key == "concurrency"
    reuse = analysis.attribute("reuse_index")
    assert reuse is not None and reuse.significant and not reuse.lead
    assert "concurrency" in (reuse.explained_by, reuse.confounded_with)
    named = [a.key for a in analysis.attributes if a.lead]
    assert "reuse_index" not in named
    if reuse.explained_by:
        assert any(h.startswith("not causes of their own") and "reuse_index" in h
                   for h in analysis.headlines)


@settings(max_examples=25, deadline=None)
@given(extra=st.lists(st.tuples(st.sampled_from(["complete", "truncated", "stalled"]),
                                st.integers(0, 300)), max_size=40))
def test_records_without_a_reuse_index_never_change_its_comparison(
        extra: list[tuple[str, int]]) -> None:
    # Streams whose connection was not seen are left out of the reuse-index search whatever their
    # outcome: its per-value counts stay those of the measured streams, and only the count of
    # unobserved failures grows.
    base = routed()
    unmeasured = [rec(1000 + i, ending=ending, started=start * 0.2, reuse_index=None)
                  for i, (ending, start) in enumerate(extra)]
    before = analyze(base).attribute("reuse_index")
    after = analyze(base + unmeasured).attribute("reuse_index")
    assert before is not None and after is not None
    assert [(v.value, v.rate.failed, v.rate.total) for v in after.values] == [
        (v.value, v.rate.failed, v.rate.total) for v in before.values]
    assert after.unobserved_failures == sum(e != "complete" for e, _ in extra)


def test_a_fault_only_one_protocols_path_has_is_named_as_the_api_in_plain_words() -> None:
    records = by_api()
    bad = failing(records)
    analysis = analyze(records)
    top = analysis.top
    assert top is not None and top.key == "api" and top.complete
    assert top.best is not None and top.best.values == ("messages",)
    # One arm per api: the arm picks the same streams, and the api (the more general) leads.
    assert top.also == ("arm",)
    healthy = sum(r.api != "messages" for r in records)
    assert top.headline is not None and top.headline.startswith(
        f"all {len(bad)} truncated streams came over messages ")
    assert f"none of {healthy} chat or responses streams failed" in top.headline
    assert analysis.headlines[1] == top.headline


def test_api_is_searched_across_arms_when_each_protocol_has_several() -> None:
    analysis = analyze(by_api(arms_per_api=3))
    top = analysis.top
    assert top is not None and top.key == "api" and top.best is not None
    assert top.best.values == ("messages",) and top.complete
    arm = analysis.attribute("arm")
    assert arm is not None and arm.confounded_with == "api"
