"""``sseguard chaos``: serve a seeded, fault-injecting upstream of every protocol until Ctrl-C.

Flags override the TOML file (``ChaosConfig.with_overrides``); the server itself is
``sseguard.chaos.server``. Registers itself on the app when ``sseguard.cli`` imports it.
"""

from __future__ import annotations

import json

import typer

from sseguard._config import parse_listen
from sseguard.cli._app import Command, app, fail
from sseguard.cli._names import family_names
from sseguard.core.errors import ConfigError


@app.command(cls=Command)
def chaos(
    listen: str = typer.Option("127.0.0.1:9000", "--listen", metavar="HOST:PORT",
                               help="Where to listen (loopback by default; port 0 = any free port)."),
    fault: list[str] = typer.Option([], "--fault", metavar="NAME=P",
                                    help="Inject fault NAME with probability P (repeatable)."),
    seed: int | None = typer.Option(None, "--seed", metavar="N",
                                    help="Seed: the same seed replays the same run."),
    config: str | None = typer.Option(None, "--config", metavar="CHAOS.toml",
                                      help="TOML file with pacing, faults, dialects and patterns."),
    dialect: list[str] = typer.Option([], "--dialect", metavar="NAME",
                                      help="no_finish_reason, no_done, empty_finish_reason, "
                                           "usage_choices_null, trailing_done (repeatable)."),
    raw_markup: str | None = typer.Option(None, "--raw-markup", metavar="FAMILY",
                                          help="Leave tool calls as FAMILY markup in the text "
                                               f"of every protocol ({', '.join(family_names())})."),
    ttft_ms: float | None = typer.Option(None, "--ttft-ms", metavar="MS",
                                         help="Delay before the first chunk."),
    inter_token_ms: float | None = typer.Option(None, "--inter-token-ms", metavar="MS",
                                                help="Delay between chunks."),
    tokens: int | None = typer.Option(None, "--tokens", metavar="N", help="Content chunks per answer."),
    stall_ms: float | None = typer.Option(None, "--stall-ms", metavar="MS",
                                          help="Silence of a stalled stream."),
    stall_then: str | None = typer.Option(None, "--stall-then", metavar="finish|hang",
                                          help="After a stall: finish, or hang until the client "
                                               "leaves."),
    first_answer: str | None = typer.Option(
        None, "--first-answer", metavar="FAULT",
        help="Break only each conversation's first answer with FAULT (at half the answer) and "
             "answer every later request of it whole (replaces --fault)."),
    model: str | None = typer.Option(None, "--model", metavar="MODEL", help="Model id served on /v1/models."),
    as_json: bool = typer.Option(False, "--json", help="Print the URL and configuration as JSON."),
    workers: str = typer.Option("1", "--workers", metavar="N|auto",
                                help="Processes serving the port (auto = one per core)."),
    upstream: str | None = typer.Option(
        None, "--upstream", metavar="URL",
        help="Relay every request to this real upstream (its base URL) and break its streams "
             "instead of generating answers; --tokens is then the answer length cuts are spread "
             "over."),
    garble_cached: float | None = typer.Option(
        None, "--garble-cached", metavar="P",
        help="Garble this share of the answers to prompts a prefix cache serves (a repeated "
             "prompt, or a long shared prefix): the corruption a KV-cache race writes."),
) -> None:
    """Serve a fault-injecting upstream of every protocol.

    It serves POST /v1/chat/completions, /v1/responses (OpenAI Responses) and /v1/messages (Anthropic
    Messages), streamed or not, until Ctrl-C. Each response names what it injected in the
    x-sseguard-fault header.

    \b
    Example:
      sseguard chaos --listen 127.0.0.1:9000 --fault truncated=0.07 \\
        --fault cut_mid_frame=0.01
      sseguard chaos --first-answer truncated   # each conversation breaks once
      sseguard chaos --upstream http://127.0.0.1:8000/v1 --listen 127.0.0.1:9000 \\
        --fault truncated=0.1 --garble-cached 0.2   # a real engine's, broken
    """
    from sseguard._serve import Listening, parse_workers
    from sseguard.chaos import ChaosConfig
    from sseguard.chaos.server import serve_blocking
    from sseguard.chaos.upstream_server import check_upstream, serve_upstream_blocking

    try:
        processes = parse_workers(workers)
        host, port = parse_listen(listen)
        base = ChaosConfig.from_toml(config) if config else ChaosConfig()
        cfg = base.with_overrides(seed=seed, faults=fault, dialects=dialect, raw_markup=raw_markup,
                                  ttft_ms=ttft_ms, inter_token_ms=inter_token_ms, tokens=tokens,
                                  stall_ms=stall_ms, stall_then=stall_then, model=model,
                                  first_answer=first_answer, garble_cached=garble_cached)
        if upstream is not None:
            check_upstream(upstream)
            if raw_markup is not None:
                raise ConfigError("--raw-markup shapes generated answers: it has no effect with "
                                  "--upstream")
    except ConfigError as exc:
        fail(str(exc))

    def ready(server: Listening) -> None:
        faults = {str(k): v for k, v in cfg.faults.items()}
        if as_json:
            typer.echo(json.dumps({"url": server.url, "seed": cfg.seed, "faults": faults,
                                   "dialects": sorted(cfg.dialects), "raw_markup": cfg.raw_markup,
                                   "patterns": len(cfg.patterns), "workers": processes,
                                   "first_answer": cfg.first_answer, "upstream": upstream}))
            return
        relayed = f" (relaying to {upstream})" if upstream is not None else ""
        typer.echo(f"sseguard chaos listening on {server.url}{relayed}")
        summary = ", ".join(f"{k}={v:g}" for k, v in faults.items()) or "none"
        if cfg.first_answer is not None:
            summary = f"each conversation's first answer: {cfg.first_answer}"
        extra = f"; {len(cfg.patterns)} pattern(s)" if cfg.patterns else ""
        typer.echo(f"seed {cfg.seed}; faults: {summary}{extra}; Ctrl-C to stop", err=True)

    try:
        if upstream is not None:
            status = serve_upstream_blocking(cfg, upstream, host, port, ready, workers=processes)
        else:
            status = serve_blocking(cfg, host, port, ready, workers=processes)
    except ConfigError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot listen on {listen}: {exc.strerror or exc}")
    if status:
        raise typer.Exit(status)
