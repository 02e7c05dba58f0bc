"""``analyze`` tells a healthy engine's batch variance from corruption.

The records reproduce the pattern measured on vLLM 0.32 (CPU, SmolLM2-135M, bfloat16, prefix caching
on, temperature 0, the consistency workload at 1 / 8 / 32 with 32 answers a level): no answer changed
at concurrency 1; at 8 and 32, the same few prompts — nearly all of them the short, uncached ones —
each changed to one alternative, the same every time, first differing between character 4 and 196.
The analysis before this rule called it a finding ("cache" significant, in the opposite direction
from corruption). Now: 0 corruption findings. Then the same run with garbled answers (a span
overwritten in place, as ``chaos --upstream --garble-cached`` writes them) on the cached prompts at
32: named, and as the cache's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sseguard.analyze import analyze_sources
from sseguard.core.record import Record, encode_record
from sseguard.probe import consistency

T0 = 1_750_000_000.0
#: prompt → (its benign alternative's digest, where it first differs: character, token), and the
#: levels where it changed. Prompts 1, 3, 5, 7 and 9 are short (uncached); 2 is long and cached.
FLIPS = {1: ("a11a11a11a11", 4, 1, (8, 32)), 3: ("b33b33b33b33", 116, 24, (8, 32)),
         5: ("c55c55c55c55", 150, 31, (8, 32)), 7: ("d77d77d77d77", 196, 40, (8, 32)),
         2: ("e22e22e22e22", 120, 25, (32,))}


def _record(i: int, prompt: int, level: int, value: str, *, at: int | None = None,
            token: int | None = None) -> Record:
    cached = prompt % 2 == 0
    return Record(run_id="run-1", index=i, started_at=T0 + i * 0.1, ending="complete",
                  response_id=f"chatcmpl-{i}", status=200, workload="consistency", arm="vllm",
                  concurrency=level, prompt_bytes=1400 if cached else 60,
                  prompt_tokens=300 if cached else 20,
                  cached_tokens=(288 if i % 3 else 272) if cached else 0,
                  consistency=value, diverged_at=at, diverged_token=token)


def _healthy_run(garble: dict[tuple[int, int], str] | None = None) -> list[Record]:
    """References, then levels 1, 8, 32 with each of the 16 prompts twice; ``garble`` maps
    (prompt, send) at level 32 to a garbled answer's consistency value."""
    records = [_record(i, i, 1, "reference") for i in range(consistency.PROMPTS)]
    for level in (1, 8, 32):
        for send in range(2):
            for prompt in range(consistency.PROMPTS):
                i = len(records)
                flip = FLIPS.get(prompt)
                if garble and level == 32 and (prompt, send) in garble:
                    records.append(_record(i, prompt, level, garble[(prompt, send)], at=20, token=4))
                elif flip is not None and level in flip[3] and (prompt != 2 or send == 0):
                    digest, at, token, _ = flip
                    records.append(_record(i, prompt, level, f"diverged:{prompt}:{digest}",
                                           at=at, token=token))
                else:
                    records.append(_record(i, prompt, level, "identical"))
    return records


def _analyze(tmp_path: Path, records: list[Record]) -> Any:
    path = tmp_path / "results.jsonl"
    path.write_bytes(b"".join(encode_record(r) + b"\n" for r in records))
    return analyze_sources([str(path)])


def test_the_measured_healthy_pattern_gives_no_corruption_finding(tmp_path: Path) -> None:
    records = _healthy_run()
    assert sum(str(r.consistency).startswith("diverged") for r in records) == 17
    analysis = _analyze(tmp_path, records)
    c = analysis.consistency
    assert c is not None
    assert (c.total.failed, c.total.total) == (17, 96)
    assert c.garbled.failed == 0
    assert c.attributes == {"vllm": []}  # nothing searched: no garbled answer
    assert [(a.prompt, a.answers, a.why) for a in c.alternatives] == [
        ("1", 4, "stable"), ("2", 1, "once"), ("3", 4, "stable"), ("5", 4, "stable"),
        ("7", 4, "stable")]
    said = "\n".join(analysis.headlines)
    findings = [line for line in analysis.headlines
                if line.startswith("corrupted answers") or "corruption on arm" in line]
    assert findings == [], said
    assert "cache" not in said  # nor any attribute named for the divergences
    assert "17 of them are 5 fluent alternative(s) of 5 prompt(s)" in said, said
    assert "not corruption" in said
    assert [(lv.concurrency, lv.rate.failed, lv.garbled) for lv in c.levels] == [
        (1, 0, 0), (8, 8, 0), (32, 9, 0)]


def test_garbled_cached_answers_are_named_beside_the_healthy_pattern(tmp_path: Path) -> None:
    garble = {(p, s): f"diverged:{p}:{p:02d}{s}f00dcafe0:overwritten"
              for p in (0, 4, 6, 8, 10, 12, 14) for s in (0, 1)}
    analysis = _analyze(tmp_path, _healthy_run(garble))
    c = analysis.consistency
    assert c is not None
    assert c.garbled.failed == 14
    assert {a.why for a in c.alternatives if a.garbled} == {"overwritten"}
    assert len([a for a in c.alternatives if not a.garbled]) == 5  # the benign ones stay benign
    said = "\n".join(analysis.headlines)
    assert "corrupted answers: 14 of 96 garbled (14 with a span overwritten in place)" in said, said
    assert "cache corruption on arm vllm" in said, said
    named = {a.key for a in c.attributes["vllm"] if a.significant}
    assert "cache" in named, named


def test_a_prompt_answered_many_ways_is_garbled_where_an_answer_came_once(tmp_path: Path) -> None:
    garble = {(9, 0): "diverged:9:0000000000aa", (9, 1): "diverged:9:0000000000bb"}
    records = _healthy_run(garble)
    # A third way for prompt 9, at level 8: three alternatives, each once.
    records[16 + 32 + 9] = _record(16 + 32 + 9, 9, 8, "diverged:9:0000000000cc", at=30, token=6)
    c = _analyze(tmp_path, records).consistency
    assert c is not None
    assert sorted((a.digest, a.why) for a in c.alternatives if a.prompt == "9") == [
        ("0000000000aa", "varying"), ("0000000000bb", "varying"), ("0000000000cc", "varying")]
    assert c.garbled.failed == 3


def test_records_written_before_the_answer_was_identified_stay_benign(tmp_path: Path) -> None:
    records = [r if r.consistency in ("reference", "identical") or r.consistency is None
               else _record(r.index, 1, r.concurrency, "diverged", at=4, token=1)
               for r in _healthy_run()]
    c = _analyze(tmp_path, records).consistency
    assert c is not None
    assert (c.total.failed, c.garbled.failed, c.alternatives) == (17, 0, [])


def test_overwritten_spans_and_fluent_alternatives() -> None:
    reference = "The tide of the harbour is measured every morning."
    assert consistency.overwritten(reference, "The tXqz rk thq harbour is measured every morning.")
    # A span shuffled in place, up to the very end: the same characters in another order.
    assert consistency.overwritten("Stream model careful river.", "Stream river careful model.")
    assert not consistency.overwritten("It is a cat.", "It is a dog.")  # under 8 characters
    assert not consistency.overwritten("The tide is measured every morning.",
                                       "The tide rises and falls twice a day.")
    # A word swapped for one as long re-aligns at once: under the span, not an overwrite.
    assert not consistency.overwritten("The depth is measured every morning.",
                                       "The swell is measured every morning.")
    # An inserted phrase shifts the rest: the same words come back, never at the same positions.
    assert not consistency.overwritten("The depth is measured every morning, and written down.",
                                       "The depth of the harbour is measured every morning, and "
                                       "written down.")
    assert consistency.divergence(3, reference, "The tXqz rk thq harbour is measured every morning.",
                                  nontext=False) == "diverged:3:8fb40b69216b:overwritten"
    assert consistency.divergence(19, reference, "The tide", nontext=True) == \
        "diverged:3:d7d8d59ee006:nontext"


def test_a_sqlite_store_judges_as_the_jsonl_does(tmp_path: Path) -> None:
    from sseguard.store import open_store

    garble = {(0, 0): "diverged:0:000f00dcafe0:overwritten", (4, 1): "diverged:4:041f00dcafe0:nontext"}
    records = _healthy_run(garble)
    store = open_store(str(tmp_path / "x.db"))
    store.write(records)
    store.close()
    from_store = analyze_sources([str(tmp_path / "x.db")]).consistency
    from_jsonl = _analyze(tmp_path, records).consistency
    assert from_store is not None and from_jsonl is not None
    assert from_store.to_dict() == from_jsonl.to_dict()
    assert from_store.garbled.failed == 2
