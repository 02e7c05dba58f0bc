"""Which endings and findings *fail* a stream.

Verdicts are graded and never lossy; what counts as a failure is a separate, named decision. Real
servers have dialects (Ollama and some vLLM builds omit ``finish_reason`` on complete answers; some
gateways omit ``[DONE]`` after a proper finish). Strict checkers that flagged those as errors caused
false alarms and retry loops until people switched checking off, so a dialect is tolerated by name
instead, and the verdict stays the same whatever the policy says.

The guards in a stream's path (``sseguard proxy``, the strict transports of ``sseguard.client``) judge
by ``agents`` unless told otherwise: the coding agents people run (opencode, Claude Code) take a
finished answer that lacks only its sentinel as the whole answer it is, so failing it turned a good
answer into an error (issue 29). ``strict`` keeps every ending but ``complete`` a failure.

The garbled-text findings (``contract.garble``: U+FFFD, control characters, a word repeated past a
bound, reasoning after the answer) are *warnings* under every preset: they are recorded and counted,
but a stream that only has them passes, because they are cheap heuristics a healthy answer could
trip. ``strict-text`` is ``strict`` that fails them too, for a run hunting a corrupting cache.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sseguard.core.errors import ConfigError
from sseguard.core.verdict import GARBLE_KINDS, Ending, FindingKind, Verdict

#: Findings every preset but those of ``TEXT_STRICT`` tolerates: recorded, never a failure by default.
WARNINGS: frozenset[Ending | FindingKind] = frozenset(GARBLE_KINDS)

#: Named presets: each one tolerates what a known dialect does on a *good* stream.
PRESETS: dict[str, frozenset[str]] = {
    "strict": frozenset(),
    # Ollama, some vLLM builds: [DONE] arrives but finish_reason is never set.
    "no-finish-ok": frozenset({Ending.NO_FINISH}),
    # Gateways that send the finish (and usage) but never the [DONE] sentinel.
    "no-done-ok": frozenset({Ending.NO_DONE}),
    # Either dialect; a clean EOF after content (truncated) still fails.
    "lenient": frozenset({Ending.NO_FINISH, Ending.NO_DONE, FindingKind.MISSING_USAGE}),
    # The guards' default: a finished answer (every choice has its finish_reason; messages: a
    # stop_reason) that only lacks its sentinel passes, and a guard in the stream's path supplies the
    # sentinel (COMPLETING below). Truncated, cut and stalled streams still fail.
    "agents": frozenset({Ending.NO_DONE}),
    # strict, and the garbled-text warnings fail too.
    "strict-text": frozenset(),
}
#: The presets that fail the garbled-text findings (``WARNINGS``) instead of tolerating them.
TEXT_STRICT = frozenset({"strict-text"})


#: The presets under which a guard in the stream's path appends the missing sentinel (``data: [DONE]``,
#: ``message_stop``) to a finished answer it passes, so the client sees the end it expects.
COMPLETING = frozenset({"agents"})
#: The policy of the proxy and the strict transports when none is given.
GUARD_DEFAULT = "agents"


def _parse_names(names: str | Iterable[str] | None) -> frozenset[Ending | FindingKind]:
    if names is None:
        return frozenset()
    items = names.split(",") if isinstance(names, str) else list(names)
    out: set[Ending | FindingKind] = set()
    for raw in items:
        name = raw.strip()
        if not name:
            continue
        if name in Ending.__members__.values():
            out.add(Ending(name))
        elif name in FindingKind.__members__.values():
            out.add(FindingKind(name))
        else:
            known = ", ".join([*Ending, *FindingKind])
            raise ConfigError(f"unknown ending or finding {name!r} (known: {known})")
    return frozenset(out)


@dataclass(frozen=True, slots=True)
class Policy:
    """A pass/fail judgement over verdicts: ``complete`` without findings passes, plus what is tolerated."""

    name: str = "strict"
    tolerate: frozenset[Ending | FindingKind] = WARNINGS
    #: A guard in the stream's path completes a passing ``no_done`` stream with its sentinel.
    complete: bool = False

    @classmethod
    def from_spec(cls, policy: str = "strict",
                  tolerate: str | Iterable[str] | None = None) -> Policy:
        """Build a policy from a preset name and an extra tolerate list (``"no_done,missing_usage"``)."""
        if policy not in PRESETS:
            raise ConfigError(f"unknown policy {policy!r} (known: {', '.join(PRESETS)})")
        extra = _parse_names(tolerate)
        base = _parse_names(PRESETS[policy]) | (frozenset() if policy in TEXT_STRICT else WARNINGS)
        name = policy if not extra else f"{policy}+{','.join(sorted(map(str, extra)))}"
        return cls(name=name, tolerate=base | extra, complete=policy in COMPLETING)

    @property
    def listed(self) -> list[str]:
        """What this policy tolerates beyond the warnings every preset tolerates, as written in a
        summary or a saved config (``from_spec`` adds the warnings back)."""
        return sorted(map(str, self.tolerate - WARNINGS))

    def failure(self, verdict: Verdict) -> str | None:
        """Why the verdict fails under this policy (the ending, or the first untolerated finding)."""
        if verdict.ending is not Ending.COMPLETE and verdict.ending not in self.tolerate:
            return str(verdict.ending)
        for finding in verdict.findings:
            if finding.kind not in self.tolerate:
                return str(finding.kind)
        return None

    def passes(self, verdict: Verdict) -> bool:
        return self.failure(verdict) is None

    def passes_facts(self, ending: str, finding_kinds: Iterable[str]) -> bool:
        """Judge stored facts (a record) without rebuilding a verdict."""
        if ending != Ending.COMPLETE and ending not in self.tolerate:
            return False
        return all(kind in self.tolerate for kind in finding_kinds)


STRICT = Policy()
#: The guards' default (``GUARD_DEFAULT``): a finished answer without its sentinel passes, completed.
AGENTS = Policy.from_spec(GUARD_DEFAULT)
