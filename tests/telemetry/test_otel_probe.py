"""``sseguard probe --otel``: one span per request, exported over OTLP/HTTP to a receiver on loopback,
each one saying exactly what the record says (ending, error), against chaos with mixed faults."""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path
from typing import Any

from _otlp_support import STATUS_ERROR, STATUS_UNSET, otel_env, otlp_http_receiver
from sseguard.chaos import ChaosConfig, Fault, Pacing, run_chaos
from sseguard.probe.runner import execute
from support.probe import config

FAULTS = {Fault.TRUNCATED: 0.2, Fault.CUT_MID_FRAME: 0.1, Fault.NO_FINISH: 0.1, Fault.EMPTY: 0.1}


async def test_each_probe_request_is_a_span_with_its_records_ending(tmp_path: Path,
                                                                   monkeypatch: Any) -> None:
    with otlp_http_receiver() as (endpoint, received):
        for name, value in otel_env(endpoint).items():
            monkeypatch.setenv(name, value)
        chaos = ChaosConfig(seed=3, pacing=Pacing(ttft_ms=0, inter_token_ms=0, tokens=8),
                            faults=FAULTS)
        async with run_chaos(chaos) as srv:
            cfg = dataclasses.replace(config(srv.url, tmp_path, count=40, concurrency="4",
                                             policy="strict"), otel=True)
            result = await execute(cfg, live=False)
        spans = received.wait_spans(40)  # the run's end flushed them
    records = result.records
    assert len(spans) == 40
    by_id = Counter((s.attributes["sseguard.stream.ending"], s.attributes.get("error.type"),
                     s.status) for s in spans)
    expected = Counter((r.ending, None if r.ending == "complete" else r.ending,
                        STATUS_UNSET if r.ending == "complete" else STATUS_ERROR) for r in records)
    assert by_id == expected
    assert len({r.ending for r in records}) >= 3  # the draw really mixed faults
    assert {s.resource["service.name"] for s in spans} == {"sseguard-probe"}
