"""``sseguard check``: judge one captured body file and show the verdict to a person or a script.

An adapter over the sans-IO checker: it reads files, the checker never does. The command registers
itself on the app when ``sseguard.cli`` imports this module.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import typer
from rich.console import Console
from rich.table import Table

from sseguard.cli._app import Command, app, console, fail
from sseguard.cli._names import check_family, family_names, protocol_names
from sseguard.cli._options import policy_option, tolerate_option
from sseguard.core.contract import check_body, detect_api
from sseguard.core.contract.protocol import Protocol
from sseguard.core.contract.registry import protocol
from sseguard.core.errors import ConfigError
from sseguard.core.policy import Policy
from sseguard.core.verdict import Api, Verdict


@dataclass(frozen=True)
class CheckOutcome:
    source: str
    verdict: Verdict
    policy: Policy
    failure: str | None

    @property
    def passed(self) -> bool:
        return self.failure is None


def _read_bytes(path: str) -> bytes:
    if path == "-":
        return sys.stdin.buffer.read()
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None


def load_request(path: str) -> dict[str, Any]:
    raw = _read_bytes(path)
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise ConfigError(f"{path} is not JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise ConfigError(f"{path} must hold a JSON object (the request body)")
    return obj


def resolve_api(api: str | None, body: bytes) -> Api:
    """The protocol to check ``body`` against: ``api`` when given (a body that plainly speaks another
    protocol is unusable input, not a verdict), else what the body shows, else chat."""
    detected = detect_api(body)
    if api is None:
        return detected or Api.CHAT
    try:
        which = Api(api)
    except ValueError:
        raise ConfigError(f"--api {api!r} is not one of: {', '.join(a.value for a in Api)}") from None
    if detected is not None and detected is not which:
        raise ConfigError(f"the body is a {detected} stream, not {which} (drop --api to detect it)")
    return which


def check_file(body_path: str, *, request_path: str | None = None, policy: str = "strict",
               tolerate: str | None = None, status: int = 200, markup: str = "all",
               api: str | None = None) -> CheckOutcome:
    """Feed a whole captured body to its protocol's checker; a non-2xx status makes the body the
    error body. ``api`` names the protocol; without it the body tells."""
    judge = Policy.from_spec(policy, tolerate)
    if not 100 <= status <= 599:
        raise ConfigError(f"--status {status} is not an HTTP status")
    request = load_request(request_path) if request_path else None
    body = _read_bytes(body_path)
    which = resolve_api(api, body if 200 <= status < 300 else b"")
    verdict = check_body(body, which, request=request, markup=markup, http_status=status)
    return CheckOutcome(body_path, verdict, judge, judge.failure(verdict))


def verdict_json(outcome: CheckOutcome) -> str:
    data = outcome.verdict.to_dict()
    data.update(source=outcome.source, policy=outcome.policy.name, passed=outcome.passed,
                failure=outcome.failure)
    # msgspec, not json.dumps: the assembled object holds what the peer sent, nested as deep as its
    # JSON decoder allowed, which is deeper than json.dumps can recurse.
    return msgspec.json.encode(data).decode("utf-8")


def print_verdict(outcome: CheckOutcome, console: Console) -> None:
    v = outcome.verdict
    mark = "[bold green]PASS[/]" if outcome.passed else f"[bold red]FAIL[/] ({outcome.failure})"
    table = Table(title=f"{outcome.source}: {mark} under policy {outcome.policy.name}",
                  show_header=False, title_justify="left")
    table.add_column("what", style="bold")
    table.add_column("value", overflow="fold")
    table.add_row("ending", str(v.ending))
    table.add_row("http status", str(v.http_status))
    table.add_row("chunks / bytes", f"{v.chunks} / {v.bytes}")
    table.add_row("response id", f"{v.first_id}" + (f" → {v.last_id}" if v.last_id != v.first_id else ""))
    for what, summary in _answer_rows(v):
        table.add_row(what, summary)
    described = protocol(v.api)
    reasons, outline = described.reasons, described.outline
    # (an answer without candidates names its prompt's block reason, ``Outline.unanswered``: the
    # blocked table classes it)
    blocked = (outline.unanswered is not None and outline.candidates is not None
               and not v.message.get(outline.candidates))
    for index, reason in enumerate(described.finish_of(v.message)):
        if reason is not None:
            table.add_row(f"reason {index}", f"{reason}: {reasons.classify(reason, blocked=blocked)}")
    if v.unknown_kinds:
        table.add_row("unknown kinds", ", ".join(v.unknown_kinds) + " (passed through)")
    if v.error:
        table.add_row("error", v.error[:300])
    if not v.findings:
        table.add_row("findings", "none")
    for f in v.findings:
        table.add_row(f"finding: {f.kind}", f"{f.detail} (frame {f.frame}, byte {f.offset})")
    console.print(table)


def _answer_rows(v: Verdict) -> list[tuple[str, str]]:
    """What came back, in the words of the protocol's ``Outline``: its finish, one row per
    candidate (a chat choice, a Gemini candidate) and one per block (a Messages content block, a
    Responses output item)."""
    rows: list[tuple[str, str]] = []
    described = protocol(v.api)
    outline, message = described.outline, v.message
    if outline.finish is not None:
        detail = message.get(outline.finish_detail) if outline.finish_detail else None
        rows.append((outline.finish, f"{_shown(message.get(outline.finish))}{_reason(detail)}"))
    if outline.candidates is not None:
        candidates = _dicts(message.get(outline.candidates))
        for position, candidate in enumerate(candidates):
            index = candidate.get("index")  # its own index; where it gives none, its place
            rows.append((f"{outline.candidate} {index if isinstance(index, int) else position}",
                         _candidate_summary(described, candidate)))
        if not candidates and outline.unanswered is not None:
            where, field = outline.unanswered
            said = message.get(where)
            if isinstance(said, dict) and field in said:
                rows.append((field, _shown(said[field])))
    if outline.blocks is not None:
        for index, block in enumerate(_dicts(message.get(outline.blocks))):
            rows.append((f"{outline.block} {index}", _item_summary(block)))
    return rows


def _candidate_summary(described: Protocol, candidate: dict[str, Any]) -> str:
    """A candidate's finish, the length of its text and its tool calls (the protocol's own answer
    reader, given a message holding this candidate alone)."""
    outline = described.outline
    assert outline.candidates is not None
    answer = described.format.answer({outline.candidates: [candidate]})
    summary = f"{outline.candidate_finish}={_shown(candidate.get(outline.candidate_finish or ''))}"
    summary += f", {len(answer.text) if answer else 0} chars"
    if answer and answer.calls:
        summary += f", tool calls: {', '.join(call.name for call in answer.calls)}"
    return summary


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _reason(details: Any) -> str:
    return f" ({_shown(details.get('reason'))})" if isinstance(details, dict) else ""


def _item_summary(item: dict[str, Any]) -> str:
    """A Responses output item or a Messages content block in a few words (peer values that are not
    the expected strings count as nothing: they may be nested arbitrarily deep)."""
    kind = _text(item.get("type")) or "untyped"
    name = _text(item.get("name"))
    if name:
        return f"{kind} {name}"
    chars = len(_text(item.get("text"))) + len(_text(item.get("thinking")))
    chars += sum(len(_text(part.get("text"))) for part in _dicts(item.get("content")))
    chars += sum(len(_text(part.get("text"))) for part in _dicts(item.get("summary")))
    return f"{kind}, {chars} chars"


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _shown(value: Any) -> str:
    """A peer's status-like value for a person: itself when a string, else only what it is."""
    return value if isinstance(value, str) else "null" if value is None else type(value).__name__


@app.command(cls=Command)
def check(
    body_file: str = typer.Argument(..., metavar="BODY_FILE",
                                    help="A captured raw response body, or - for stdin."),
    request: str | None = typer.Option(None, "--request", metavar="REQUEST.json",
                                       help="The request body that produced the stream."),
    policy: str = policy_option("strict"),
    tolerate: str | None = tolerate_option("the stream"),
    status: int = typer.Option(200, "--status", metavar="STATUS", help="The HTTP status the body came with."),
    markup: str = typer.Option("all", "--markup", metavar="FAMILY",
                               help=f"Markup family to look for in content ({', '.join(family_names())}), "
                                    "or all."),
    api: str | None = typer.Option(None, "--api", metavar="API",
                                   help=f"The body's protocol ({', '.join(protocol_names())}); detected "
                                        "from the body when not given."),
    as_json: bool = typer.Option(False, "--json", help="Print the verdict as one JSON object."),
) -> None:
    """Check one captured stream body against its protocol's contract.

    Exit code 0 when the policy passes it, 1 when it fails, 2 for unusable input.

    \b
    Examples:
      sseguard check examples/bodies/truncated.sse \\
        --request examples/request_tools.json
      sseguard check examples/bodies/messages_no_done.sse --api messages
    """
    try:
        markup = check_family(markup, "--markup", also=("all", "auto")) or markup
        outcome = check_file(body_file, request_path=request, policy=policy, tolerate=tolerate,
                             status=status, markup=markup, api=api)
    except ConfigError as exc:
        fail(str(exc))
    if as_json:
        typer.echo(verdict_json(outcome))
    else:
        print_verdict(outcome, console)
    raise typer.Exit(0 if outcome.passed else 1)
