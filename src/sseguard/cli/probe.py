"""``sseguard probe`` and ``sseguard sweep``: the same options, one run or one run per level.

The arms and judging options are the shared ``LOAD`` group (``locust`` takes it too). Every unusable
input is a ``ConfigError`` (one line, exit 2). Registers both commands on the app when
``sseguard.cli`` imports it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import typer
from rich.console import Console

from sseguard.cli._app import Command, app, console, err_console, fail
from sseguard.cli._options import LOAD, with_options
from sseguard.core.errors import ConfigError
from sseguard.probe.config import DEFAULT_LEVELS, ProbeConfig, build_config
from sseguard.probe.sink import read_run_file


def config_from_options(options: Mapping[str, Any], *, config_path: str | None,
                        resume: str | None, sweep: bool) -> ProbeConfig:
    """Flags (None = not given) over the TOML file over a resumed run's saved settings."""
    opts = dict(options)
    saved: dict[str, Any] | None = None
    if resume is not None:
        if opts.get("out") not in (None, resume):
            raise ConfigError("--resume DIR writes into DIR; drop --out")
        saved = read_run_file(resume)["config"]
        opts["out"] = resume
    elif sweep and opts.get("concurrency") is None:
        opts["concurrency"] = ",".join(map(str, DEFAULT_LEVELS))
    config = build_config(opts, config_path=config_path, saved=saved)
    if sweep and not config.sweep and resume is None:
        raise ConfigError("sweep needs two or more levels, e.g. --concurrency 1,8,16,32,60")
    return config


def probe_main(options: Mapping[str, Any], *, config_path: str | None, resume: str | None,
               sweep: bool, as_json: bool, live: bool | None, console: Console,
               err_console: Console, workers: str = "1", otel: bool = False) -> int:
    """Run the probe (or sweep) and print its summary; returns the exit code. ``workers`` (a
    number or ``auto``) above 1 shares the run among that many processes, with no live display."""
    from sseguard._serve import parse_workers
    from sseguard.probe.report import summarize
    from sseguard.probe.runner import run_probe
    from sseguard.probe.workers import run_parallel

    processes = parse_workers(workers)
    config = config_from_options(options, config_path=config_path, resume=resume, sweep=sweep)
    if otel:
        from sseguard import telemetry

        telemetry.load().check_environment()  # the extra and the OTEL_* values, checked now
        config = dataclasses.replace(config, otel=True)
    if processes > 1:
        result = run_parallel(config, processes, resume=resume is not None, console=err_console,
                              announce=not as_json)
    else:
        result = run_probe(config, resume=resume is not None, console=err_console, live=live,
                           announce=not as_json)
    summarize(result, console, as_json=as_json)
    return result.exit_code


def _probe_command(sweep: bool) -> Any:
    """The probe and the sweep share every option; only the default concurrency differs."""

    @with_options(LOAD)
    def command(
        options: dict[str, Any],
        big_bytes: int | None = typer.Option(None, "--big-bytes", metavar="BYTES",
                                             help="Prompt size of the big workload (1700000)."),
        max_tokens: int | None = typer.Option(None, "--max-tokens", metavar="N",
                                              help="max_tokens of every request."),
        reasoning_effort: str | None = typer.Option(None, "--reasoning-effort", metavar="EFFORT",
                                                    help="reasoning_effort of every request."),
        include_usage: bool | None = typer.Option(None, "--include-usage/--no-include-usage",
                                                  help="Ask for the usage chunk (default yes)."),
        count: int | None = typer.Option(None, "--count", metavar="N",
                                         help="Requests per arm (and per level); default 100."),
        duration: str | None = typer.Option(None, "--duration", metavar="10m",
                                            help="Time per level; with --count, whichever ends first."),
        concurrency: str | None = typer.Option(None, "--concurrency", metavar="C[,C…]",
                                               help="Streams in flight per arm"
                                                    + (" at each level (1,8,16,32,60)." if sweep
                                                       else " (8); a list makes a sweep.")),
        rate: float | None = typer.Option(None, "--rate", metavar="PER_SECOND",
                                          help="Request starts per second per arm."),
        ramp: float | None = typer.Option(None, "--ramp", metavar="SECONDS",
                                          help="Spread the first requests (default: one stream)."),
        out: str | None = typer.Option(None, "--out", metavar="DIR",
                                       help="Output directory (default sseguard-runs/<time>)."),
        resume: str | None = typer.Option(None, "--resume", metavar="DIR",
                                          help="Continue the run in DIR, skipping finished requests."),
        workers: str = typer.Option("1", "--workers", metavar="N|auto",
                                    help="Probe processes sharing the run (auto: one per core); "
                                         "records merged into one results.jsonl."),
        as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
        otel: bool = typer.Option(False, "--otel",
                                  help="Export a span per request and the GenAI metrics over OTLP, "
                                       "as the OTEL_* variables say; needs sseguard[otel]."),
        no_live: bool = typer.Option(False, "--no-live", help="No live display."),
    ) -> None:
        config = options.pop("config")
        options.update({"big_bytes": big_bytes, "max_tokens": max_tokens,
                        "reasoning_effort": reasoning_effort, "include_usage": include_usage,
                        "count": count, "duration": duration, "concurrency": concurrency,
                        "rate": rate, "ramp": ramp, "out": out})
        try:
            code = probe_main(options, config_path=config, resume=resume, sweep=sweep,
                              as_json=as_json, live=False if no_live else None, console=console,
                              err_console=err_console, workers=workers, otel=otel)
        except ConfigError as exc:
            fail(str(exc))
        raise typer.Exit(code)

    return command


app.command(
    "probe", cls=Command,
    help="Send many real streamed requests and classify how each one ended.\n\n"
         "Exit code 0 when every stream passes the policy, 1 when some failed, 2 for unusable input.\n\n"
         "\b\nExample:\n"
         "  DS_KEY=… sseguard probe --arm ds=https://api.deepseek.com/v1 \\\n"
         "    --key-env DS_KEY --model deepseek-chat --count 200 --concurrency 16",
)(_probe_command(sweep=False))
app.command(
    "sweep", cls=Command,
    help="The same workload at each concurrency level, one after another, into one results file.\n\n"
         "\b\nExample:\n"
         "  sseguard sweep --arm local=http://127.0.0.1:8000/v1 \\\n"
         "    --concurrency 1,8,16,32,60 --count 100",
)(_probe_command(sweep=True))
