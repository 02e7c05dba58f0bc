"""The ``sseguard`` command line: parses arguments and calls library functions, nothing more.

Every command turns a ``ConfigError`` (or any unusable input) into one line on stderr and exit code 2;
exit 1 means "ran fine, and something failed the policy".
"""

from __future__ import annotations

import sys
from typing import NoReturn

import typer
from rich.console import Console

from sseguard import __version__
from sseguard.errors import ConfigError

app = typer.Typer(
    name="sseguard",
    help="Make streamed LLM responses trustworthy: check, probe, analyze and guard SSE streams.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console()
err_console = Console(stderr=True)


def fail(message: str) -> NoReturn:
    """Unusable input: one line, exit code 2, never a traceback."""
    err_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(2)


def version_callback(value: bool) -> None:
    if value:
        console.print(f"sseguard {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=version_callback, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    """sseguard: strict checking for OpenAI-compatible streaming responses."""


# ── commands ──────────────────────────────────────────────────────────────────────────────────────
# Each command lives in its own section below, in the order of the tour in README.md.


# ── check ─────────────────────────────────────────────────────────────────────────────────────────
@app.command()
def check(
    body_file: str = typer.Argument(..., metavar="BODY_FILE",
                                    help="A captured raw response body, or - for stdin."),
    request: str | None = typer.Option(None, "--request", metavar="REQUEST.json",
                                       help="The request body that produced the stream."),
    policy: str = typer.Option("strict", "--policy", help="strict, no-finish-ok, no-done-ok, lenient."),
    tolerate: str | None = typer.Option(None, "--tolerate", metavar="ENDING,…",
                                        help="Endings or findings that do not fail the stream."),
    status: int = typer.Option(200, "--status", help="The HTTP status the body came with."),
    markup: str = typer.Option("all", "--markup", help="Markup family to look for in content, or all."),
    as_json: bool = typer.Option(False, "--json", help="Print the verdict as one JSON object."),
) -> None:
    """Check one captured stream body against the streaming contract.

    Exit code 0 when the policy passes it, 1 when it fails, 2 for unusable input.

    Example: sseguard check examples/bodies/truncated.sse --request examples/request_tools.json
    """
    from sseguard import checkfile

    try:
        outcome = checkfile.check_file(body_file, request_path=request, policy=policy,
                                      tolerate=tolerate, status=status, markup=markup)
    except ConfigError as exc:
        fail(str(exc))
    if as_json:
        typer.echo(checkfile.verdict_json(outcome))
    else:
        checkfile.print_verdict(outcome, console)
    raise typer.Exit(0 if outcome.passed else 1)


# ── chaos ─────────────────────────────────────────────────────────────────────────────────────────
@app.command()
def chaos(
    listen: str = typer.Option("127.0.0.1:9000", "--listen", metavar="HOST:PORT",
                               help="Where to listen (loopback by default; port 0 = any free port)."),
    fault: list[str] = typer.Option([], "--fault", metavar="NAME=P",
                                    help="Inject fault NAME with probability P (repeatable)."),
    seed: int | None = typer.Option(None, "--seed", help="Seed: the same seed replays the same run."),
    config: str | None = typer.Option(None, "--config", metavar="CHAOS.toml",
                                      help="TOML file with pacing, faults, dialects and patterns."),
    dialect: list[str] = typer.Option([], "--dialect", metavar="NAME",
                                      help="no_finish_reason, no_done, empty_finish_reason, "
                                           "usage_choices_null (repeatable)."),
    raw_markup: str | None = typer.Option(None, "--raw-markup", metavar="FAMILY",
                                          help="Leave tool calls as FAMILY markup in content "
                                               "(dsml-v32, dsml-v4, dsml-v41, deepseek-v3, "
                                               "deepseek-v31, hermes, qwen3-coder)."),
    ttft_ms: float | None = typer.Option(None, "--ttft-ms", help="Delay before the first chunk."),
    inter_token_ms: float | None = typer.Option(None, "--inter-token-ms",
                                                help="Delay between chunks."),
    tokens: int | None = typer.Option(None, "--tokens", help="Content chunks per answer."),
    stall_ms: float | None = typer.Option(None, "--stall-ms", help="Silence of a stalled stream."),
    stall_then: str | None = typer.Option(None, "--stall-then",
                                          help="After a stall: finish, or hang until the client "
                                               "leaves."),
    model: str | None = typer.Option(None, "--model", help="Model id served on /v1/models."),
    as_json: bool = typer.Option(False, "--json", help="Print the URL and configuration as JSON."),
) -> None:
    """Run a fault-injecting OpenAI-compatible upstream until Ctrl-C.

    Each response names what it injected in the x-sseguard-fault header.

    Example: sseguard chaos --listen 127.0.0.1:9000 --fault truncated=0.07 --fault cut_mid_frame=0.01
    """
    import json

    from sseguard.chaos import ChaosConfig
    from sseguard.chaos.config import parse_listen
    from sseguard.chaos.server import ChaosServer, serve_blocking

    try:
        host, port = parse_listen(listen)
        base = ChaosConfig.from_toml(config) if config else ChaosConfig()
        cfg = base.with_overrides(seed=seed, faults=fault, dialects=dialect, raw_markup=raw_markup,
                                  ttft_ms=ttft_ms, inter_token_ms=inter_token_ms, tokens=tokens,
                                  stall_ms=stall_ms, stall_then=stall_then, model=model)
    except ConfigError as exc:
        fail(str(exc))

    def ready(server: ChaosServer) -> None:
        faults = {str(k): v for k, v in cfg.faults.items()}
        if as_json:
            typer.echo(json.dumps({"url": server.url, "seed": cfg.seed, "faults": faults,
                                   "dialects": sorted(cfg.dialects), "raw_markup": cfg.raw_markup,
                                   "patterns": len(cfg.patterns)}))
            return
        typer.echo(f"sseguard chaos listening on {server.url}")
        summary = ", ".join(f"{k}={v:g}" for k, v in faults.items()) or "none"
        extra = f"; {len(cfg.patterns)} pattern(s)" if cfg.patterns else ""
        typer.echo(f"seed {cfg.seed}; faults: {summary}{extra}; Ctrl-C to stop", err=True)

    try:
        serve_blocking(cfg, host, port, ready)
    except OSError as exc:
        fail(f"cannot listen on {listen}: {exc.strerror or exc}")


def main() -> None:
    """Console-script entry: click's usage errors exit 2 already; ConfigError is mapped to exit 2."""
    try:
        app()
    except ConfigError as exc:
        err_console.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
