"""The consistency workload inside a run: collect the reference answers, then judge every answer by them.

``collect`` runs before the first level: each arm's fixed prompts one at a time (concurrency 1), each
recorded like any request (``consistency = "reference"``), the whole answers kept in the run
directory (``consistency.REFERENCES``). Prompts that already have a reference (``--resume``, or a
later run in the same directory) are not sent again. ``judge`` compares an answer at load with its
prompt's reference, as facts of its record: a divergence is never a failure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import aiohttp

from sseguard.core.redact import Redactor
from sseguard.core.verdict import GARBLE_KINDS, FindingKind, Verdict
from sseguard.probe import consistency
from sseguard.probe.formats import format_for
from sseguard.probe.request import RequestSettings, run_request
from sseguard.probe.sink import Sink
from sseguard.probe.target import ConnectionTracker, Target
from sseguard.probe.workloads import FixedPrompts, Workload, whole_answer

#: Findings that say an answer's text holds what no answer holds: garbled text, or tool-call markup
#: leaked into it (the visible part of the same corruption, issue 39).
NOT_ANSWER_TEXT = GARBLE_KINDS | {FindingKind.MARKUP_LEAK}

_REFERENCE = {"consistency": "reference"}


async def collect(session: aiohttp.ClientSession, target: Target, workload: Workload,
                  refs: consistency.References, *, settings: RequestSettings, sink: Sink, base: int,
                  done: set[tuple[str, int]], connections: ConnectionTracker) -> None:
    """Send ``target``'s prompts without a reference, one after another; keep the whole answers.
    Request ``i`` gets index ``base + i`` (an index a resumed run already has is not sent again)."""
    arm = target.arm.name
    api = target.arm.protocol
    fmt = format_for(api)
    for i in refs.missing(arm):
        if (arm, base + i) in done:
            continue  # sent before and not whole: that prompt goes without a reference
        body = workload.finish(consistency.prompt_body(fmt, i), model=target.arm.model, api=api)
        outcome = await run_request(session, target, body, settings=settings, sink=sink,
                                    index=base + i, workload=workload.name, concurrency=1,
                                    connections=connections, judge=lambda _v: _REFERENCE)
        text = consistency.answer_text(whole_answer(fmt, outcome.verdict))
        if text is not None:
            refs.put(arm, i, settings.redactor.text(text))
    refs.save()


def judge(refs: consistency.References, arm: str, conversation: FixedPrompts, api: str,
          redactor: Redactor) -> Callable[[Verdict], Mapping[str, Any]]:
    """The facts of an answer to ``conversation``'s last prompt against its reference (none when
    either is missing: an answer cut short is a failure, not a divergence)."""
    fmt = format_for(api)

    def facts(verdict: Verdict) -> Mapping[str, Any]:
        reference = refs.get(arm, conversation.prompt)
        text = consistency.answer_text(whole_answer(fmt, verdict))
        if reference is None or text is None:
            return {}
        text = redactor.text(text)
        outcome, at, token = consistency.compare(reference, text)
        if outcome != "identical":
            nontext = any(f.kind in NOT_ANSWER_TEXT for f in verdict.findings)
            outcome = consistency.divergence(conversation.prompt, reference, text, nontext=nontext)
        return {"consistency": outcome, "diverged_at": at, "diverged_token": token}

    return facts
