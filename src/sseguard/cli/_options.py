"""Option groups several commands share, declared once: probe, sweep and locust load the same arms.

Typer reads a command's options from its function signature. :func:`with_options` adds a group's
options to a command's signature and hands their values to the command as one ``options`` mapping
(keyed as ``sseguard.probe.config.build_config`` reads them), so ``--arm`` or ``--stall-timeout`` is
written in one place for every command that takes it.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import typer

from sseguard.cli._names import protocol_help


@dataclass(frozen=True, slots=True)
class Shared:
    """One shared option: its parameter name, its key in the ``options`` mapping, type and typer info."""

    name: str
    key: str
    annotation: Any
    info: Any


def policy_option(default: str | None) -> Any:
    """``--policy`` of every command that judges streams by a preset of ``sseguard.core.policy``."""
    return typer.Option(default, "--policy", metavar="POLICY",
                        help="strict, no-finish-ok, no-done-ok, lenient, agents, "
                             "strict-text (garbled text fails too).")


def tolerate_option(what: str = "a stream") -> Any:
    """``--tolerate``: endings or findings that do not fail ``what`` (a stream; check's one)."""
    return typer.Option(None, "--tolerate", metavar="ENDING,…",
                        help=f"Endings or findings that do not fail {what}.")


#: What probe, sweep and locust all take: the arms, what to send, how to judge it, where records go.
LOAD: tuple[Shared, ...] = (
    Shared("arm", "arms", list[str], typer.Option(
        [], "--arm", metavar="NAME=URL",
        help="A target's base URL (…/v1), repeatable: arms are loaded side by side.")),
    Shared("config", "config", str | None, typer.Option(
        None, "--config", metavar="PROBE.toml",
        help="Arms (base_url, model, headers, key_env, api) and settings.")),
    Shared("model", "model", str | None, typer.Option(
        None, "--model", metavar="MODEL", help="Model name for arms that set none.")),
    Shared("api", "api", str | None, typer.Option(
        None, "--api", metavar="API", help=protocol_help("arms that set none"))),
    Shared("key_env", "key_env", str | None, typer.Option(
        None, "--key-env", metavar="NAME", help="Env var holding the key (never the key itself).")),
    Shared("workload", "workload", str | None, typer.Option(
        None, "--workload", metavar="WORKLOAD", help="small, big, reuse, tools or consistency "
        "(fixed prompts, deterministic, each answer compared with its reference).")),
    Shared("body", "body", str | None, typer.Option(
        None, "--body", metavar="FILE", help="Your own request body, in the arm's api format.")),
    Shared("policy", "policy", str | None, policy_option(None)),
    Shared("tolerate", "tolerate", str | None, tolerate_option()),
    Shared("stall_timeout", "stall_timeout", float | None, typer.Option(
        None, "--stall-timeout", metavar="SECONDS", help="No byte for this long ⇒ stalled (30).")),
    Shared("timeout", "timeout", float | None, typer.Option(
        None, "--timeout", metavar="SECONDS", help="Whole-request limit (300).")),
    Shared("header", "headers", list[str], typer.Option(
        [], "--header", metavar="'K: V'", help="Extra request header (repeatable; no secrets).")),
    Shared("seed", "seed", int | None, typer.Option(
        None, "--seed", metavar="N", help="Seed for prompt wording.")),
)


def with_options(group: tuple[Shared, ...]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Give a command the group's options; it receives them as ``options`` (None/[] = not given)."""

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(command, eval_str=True)
        own = [p for p in signature.parameters.values() if p.name != "options"]
        added = [inspect.Parameter(s.name, inspect.Parameter.KEYWORD_ONLY, default=s.info,
                                   annotation=s.annotation) for s in group]

        @functools.wraps(command)
        def wrapper(**kwargs: Any) -> Any:
            options: dict[str, Any] = {s.key: kwargs.pop(s.name) for s in group}
            return command(options=options, **kwargs)

        wrapper.__signature__ = signature.replace(  # type: ignore[attr-defined]  # read by typer
            parameters=[*added, *(p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own)])
        return wrapper

    return decorate


def given(options: Mapping[str, Any]) -> dict[str, Any]:
    """Only the options the user set (None and [] mean "not given", so the TOML file decides)."""
    return {k: v for k, v in options.items() if v not in (None, [])}
