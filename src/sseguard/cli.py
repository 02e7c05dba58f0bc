"""The ``sseguard`` command line: parses arguments and calls library functions, nothing more.

Every command turns a ``ConfigError`` (or any unusable input) into one line on stderr and exit code 2;
exit 1 means "ran fine, and something failed the policy".
"""

from __future__ import annotations

import sys
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperCommand

from sseguard import __version__
from sseguard.errors import ConfigError

app = typer.Typer(
    name="sseguard",
    help="Make streamed LLM responses trustworthy: check, probe, analyze and guard SSE streams.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
console = Console()
err_console = Console(stderr=True)


class _Command(TyperCommand):
    """Help that names an argument by its metavar alone: typer appends the Python type
    (``<str>``, ``<list[str]>``), which tells a reader nothing the metavar does not say better."""

    # Typed Any: typer hands in its vendored click's Context and HelpFormatter, which it does not export.
    def format_options(self, ctx: Any, formatter: Any) -> None:
        args: list[tuple[str, str]] = []
        opts: list[tuple[str, str]] = []
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if param.param_type_name == "argument":
                name = param.metavar or (param.name or "").upper()
                args.append((name + ("..." if param.nargs != 1 else ""), record[1]))
            else:
                opts.append(record)
        for title, rows in (("Arguments", args), ("Options", opts)):
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


def fail(message: str) -> NoReturn:
    """Unusable input: one line, exit code 2, never a traceback."""
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(2)


def version_callback(value: bool) -> None:
    if value:
        typer.echo(f"sseguard {__version__}")
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
@app.command(cls=_Command)
def check(
    body_file: str = typer.Argument(..., metavar="BODY_FILE",
                                    help="A captured raw response body, or - for stdin."),
    request: str | None = typer.Option(None, "--request", metavar="REQUEST.json",
                                       help="The request body that produced the stream."),
    policy: str = typer.Option("strict", "--policy", metavar="POLICY",
                               help="strict, no-finish-ok, no-done-ok, lenient."),
    tolerate: str | None = typer.Option(None, "--tolerate", metavar="ENDING,…",
                                        help="Endings or findings that do not fail the stream."),
    status: int = typer.Option(200, "--status", metavar="STATUS", help="The HTTP status the body came with."),
    markup: str = typer.Option("all", "--markup", metavar="FAMILY",
                               help="Markup family to look for in content, or all."),
    api: str | None = typer.Option(None, "--api", metavar="API",
                                   help="The body's protocol (chat, responses, messages); detected from "
                                        "the body when not given."),
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
    from sseguard import checkfile

    try:
        outcome = checkfile.check_file(body_file, request_path=request, policy=policy,
                                      tolerate=tolerate, status=status, markup=markup, api=api)
    except ConfigError as exc:
        fail(str(exc))
    if as_json:
        typer.echo(checkfile.verdict_json(outcome))
    else:
        checkfile.print_verdict(outcome, console)
    raise typer.Exit(0 if outcome.passed else 1)


# ── chaos ─────────────────────────────────────────────────────────────────────────────────────────
@app.command(cls=_Command)
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
                                               "of every protocol (dsml-v32, dsml-v4, dsml-v41, deepseek-v3, "
                                               "deepseek-v31, hermes, qwen3-coder, kimi-k2, glm45, "
                                               "glm47, harmony, minimax-m2)."),
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
    model: str | None = typer.Option(None, "--model", metavar="MODEL", help="Model id served on /v1/models."),
    as_json: bool = typer.Option(False, "--json", help="Print the URL and configuration as JSON."),
    workers: str = typer.Option("1", "--workers", metavar="N|auto",
                                help="Processes serving the port (auto = one per core)."),
) -> None:
    """Serve a fault-injecting upstream (chat, responses, messages).

    It serves POST /v1/chat/completions, /v1/responses (OpenAI Responses) and /v1/messages (Anthropic
    Messages), streamed or not, until Ctrl-C. Each response names what it injected in the
    x-sseguard-fault header.

    \b
    Example:
      sseguard chaos --listen 127.0.0.1:9000 --fault truncated=0.07 \\
        --fault cut_mid_frame=0.01
    """
    import json

    from sseguard._serve import Listening, parse_workers
    from sseguard.chaos import ChaosConfig
    from sseguard.chaos.config import parse_listen
    from sseguard.chaos.server import serve_blocking

    try:
        processes = parse_workers(workers)
        host, port = parse_listen(listen)
        base = ChaosConfig.from_toml(config) if config else ChaosConfig()
        cfg = base.with_overrides(seed=seed, faults=fault, dialects=dialect, raw_markup=raw_markup,
                                  ttft_ms=ttft_ms, inter_token_ms=inter_token_ms, tokens=tokens,
                                  stall_ms=stall_ms, stall_then=stall_then, model=model)
    except ConfigError as exc:
        fail(str(exc))

    def ready(server: Listening) -> None:
        faults = {str(k): v for k, v in cfg.faults.items()}
        if as_json:
            typer.echo(json.dumps({"url": server.url, "seed": cfg.seed, "faults": faults,
                                   "dialects": sorted(cfg.dialects), "raw_markup": cfg.raw_markup,
                                   "patterns": len(cfg.patterns), "workers": processes}))
            return
        typer.echo(f"sseguard chaos listening on {server.url}")
        summary = ", ".join(f"{k}={v:g}" for k, v in faults.items()) or "none"
        extra = f"; {len(cfg.patterns)} pattern(s)" if cfg.patterns else ""
        typer.echo(f"seed {cfg.seed}; faults: {summary}{extra}; Ctrl-C to stop", err=True)

    try:
        status = serve_blocking(cfg, host, port, ready, workers=processes)
    except ConfigError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot listen on {listen}: {exc.strerror or exc}")
    if status:
        raise typer.Exit(status)


# ── probe, sweep ──────────────────────────────────────────────────────────────────────────────────
def _probe_command(sweep: bool) -> Any:
    """The probe and the sweep share every option; only the default concurrency differs."""

    def command(
        arm: list[str] = typer.Option([], "--arm", metavar="NAME=URL",
                                      help="A target's base URL (…/v1), repeatable: arms run side by "
                                           "side."),
        config: str | None = typer.Option(None, "--config", metavar="PROBE.toml",
                                          help="Arms (base_url, model, headers, key_env) and settings."),
        model: str | None = typer.Option(None, "--model", metavar="MODEL",
                                         help="Model name for arms that set none."),
        api: str | None = typer.Option(None, "--api", metavar="API",
                                       help="Protocol of arms that set none: chat (default), "
                                            "responses or messages."),
        workload: str | None = typer.Option(None, "--workload", metavar="WORKLOAD",
                                            help="small, big, reuse or tools."),
        body: str | None = typer.Option(None, "--body", metavar="FILE",
                                        help="Your own request body, in the arm's api format."),
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
        stall_timeout: float | None = typer.Option(None, "--stall-timeout", metavar="SECONDS",
                                                   help="No byte for this long ⇒ stalled (30)."),
        timeout: float | None = typer.Option(None, "--timeout", metavar="SECONDS",
                                             help="Whole-request limit (300)."),
        policy: str | None = typer.Option(None, "--policy", metavar="POLICY",
                                          help="strict, no-finish-ok, no-done-ok, lenient."),
        tolerate: str | None = typer.Option(None, "--tolerate", metavar="ENDING,…",
                                            help="Endings or findings that do not fail a stream."),
        out: str | None = typer.Option(None, "--out", metavar="DIR",
                                       help="Output directory (default sseguard-runs/<time>)."),
        resume: str | None = typer.Option(None, "--resume", metavar="DIR",
                                          help="Continue the run in DIR, skipping finished requests."),
        key_env: str | None = typer.Option(None, "--key-env", metavar="NAME",
                                           help="Env var holding the key (never the key itself)."),
        header: list[str] = typer.Option([], "--header", metavar="'K: V'",
                                         help="Extra request header (repeatable; no secrets)."),
        seed: int | None = typer.Option(None, "--seed", metavar="N", help="Seed for prompt wording."),
        as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
        no_live: bool = typer.Option(False, "--no-live", help="No live display."),
    ) -> None:
        from sseguard.probe.command import probe_main

        options = {"arms": arm, "api": api, "model": model, "workload": workload, "body": body,
                   "big_bytes": big_bytes, "max_tokens": max_tokens,
                   "reasoning_effort": reasoning_effort, "include_usage": include_usage,
                   "count": count, "duration": duration, "concurrency": concurrency, "rate": rate,
                   "ramp": ramp, "stall_timeout": stall_timeout, "timeout": timeout,
                   "policy": policy, "tolerate": tolerate, "out": out, "key_env": key_env,
                   "headers": header, "seed": seed}
        try:
            code = probe_main(options, config_path=config, resume=resume, sweep=sweep,
                              as_json=as_json, live=False if no_live else None, console=console,
                              err_console=err_console)
        except ConfigError as exc:
            fail(str(exc))
        raise typer.Exit(code)

    return command


app.command(
    "probe", cls=_Command,
    short_help="Send streamed requests and classify how each one ended.",
    help="Send many real streamed requests and classify how each one ended.\n\n"
         "Exit code 0 when every stream passes the policy, 1 when some failed, 2 for unusable input.\n\n"
         "\b\nExample:\n"
         "  DS_KEY=… sseguard probe --arm ds=https://api.deepseek.com/v1 \\\n"
         "    --key-env DS_KEY --model deepseek-chat --count 200 --concurrency 16",
)(_probe_command(sweep=False))
app.command(
    "sweep", cls=_Command,
    short_help="The same workload at each concurrency level, one after another.",
    help="The same workload at each concurrency level, one after another, into one results file.\n\n"
         "\b\nExample:\n"
         "  sseguard sweep --arm local=http://127.0.0.1:8000/v1 \\\n"
         "    --concurrency 1,8,16,32,60 --count 100",
)(_probe_command(sweep=True))


# ── locust ────────────────────────────────────────────────────────────────────────────────────────
@app.command(cls=_Command, short_help="Run Locust with sseguard's stream-checking user.",
             context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def locust(
    ctx: typer.Context,
    config: str | None = typer.Option(None, "--config", metavar="PROBE.toml",
                                      help="Arms and settings (the probe's file format), the same "
                                           "file for master and workers."),
    arm: list[str] = typer.Option([], "--arm", metavar="NAME=URL",
                                  help="A target's base URL (…/v1), repeatable: users are spread "
                                       "over the arms."),
    model: str | None = typer.Option(None, "--model", metavar="MODEL",
                                     help="Model name for arms that set none."),
    api: str | None = typer.Option(None, "--api", metavar="API",
                                   help="Protocol of arms that set none: chat (default), responses "
                                        "or messages."),
    key_env: str | None = typer.Option(None, "--key-env", metavar="NAME",
                                       help="Env var holding the key (never the key itself)."),
    workload: str | None = typer.Option(None, "--workload", metavar="WORKLOAD",
                                        help="small, big, reuse or tools."),
    body: str | None = typer.Option(None, "--body", metavar="FILE",
                                    help="Your own request body, in the arm's api format."),
    policy: str | None = typer.Option(None, "--policy", metavar="POLICY",
                                      help="strict, no-finish-ok, no-done-ok, lenient."),
    tolerate: str | None = typer.Option(None, "--tolerate", metavar="ENDING,…",
                                        help="Endings or findings that do not fail a stream."),
    stall_timeout: float | None = typer.Option(None, "--stall-timeout", metavar="SECONDS",
                                               help="No byte for this long ⇒ stalled (30)."),
    timeout: float | None = typer.Option(None, "--timeout", metavar="SECONDS",
                                         help="Whole-request limit (300)."),
    out: str | None = typer.Option(None, "--out", metavar="DIR",
                                   help="Where workers write results-<worker>.jsonl and evidence/ "
                                        "(default sseguard-locust/<run id>)."),
    header: list[str] = typer.Option([], "--header", metavar="'K: V'",
                                     help="Extra request header (repeatable; no secrets)."),
    seed: int | None = typer.Option(None, "--seed", metavar="N", help="Seed for prompt wording."),
    run_id: str | None = typer.Option(None, "--run-id", metavar="RUN_ID",
                                      help="Run id for the records (default: the master's time)."),
    master_wait: float = typer.Option(10.0, "--master-wait", metavar="SECONDS",
                                      help="How long a worker waits for its master to listen."),
    locust_config: str | None = typer.Option(None, "--locust-config", metavar="FILE",
                                             help="Locust's own config file (its --config)."),
) -> None:
    """Run Locust with sseguard's stream-checking user; every other argument goes to Locust.

    Each stream is one Locust request named by workload, failed under its ending's name; each worker
    writes the probe's records to OUT/results-<worker>.jsonl for `sseguard analyze OUT`.

    \b
    Example (one machine), a master:
      sseguard locust --arm local=http://127.0.0.1:8000/v1 --out run1 --master \\
        --headless -u 64 -r 8 -t 5m --expect-workers 2 --csv run1/locust
    then, twice, a worker:
      sseguard locust --arm local=http://127.0.0.1:8000/v1 --out run1 --worker
    """
    from sseguard.locust_run import Settings, run

    options = {"arms": arm, "api": api, "model": model, "key_env": key_env, "workload": workload,
               "body": body,
               "policy": policy, "tolerate": tolerate, "stall_timeout": stall_timeout,
               "timeout": timeout, "out": out, "headers": header, "seed": seed}
    settings = Settings(options={k: v for k, v in options.items() if v not in (None, [])},
                        config_path=config)
    try:
        run(settings, list(ctx.args), master_wait=master_wait, locust_config=locust_config,
            run_id=run_id)
    except ConfigError as exc:
        fail(str(exc))


# ── proxy ─────────────────────────────────────────────────────────────────────────────────────────
@app.command(cls=_Command, short_help="Guard an OpenAI-compatible endpoint against silent bad ends.")
def proxy(
    upstream: str = typer.Option(..., "--upstream", metavar="BASE_URL",
                                 help="The upstream's base URL as its SDK takes it (…/v1, or an "
                                      "Anthropic base); the only place the proxy forwards to."),
    listen: str = typer.Option("127.0.0.1:8080", "--listen", metavar="HOST:PORT",
                               help="Where to listen (loopback by default; port 0 = any free port)."),
    policy: str = typer.Option("strict", "--policy", metavar="POLICY",
                               help="What a bad end is: strict, no-finish-ok, no-done-ok, lenient."),
    tolerate: str | None = typer.Option(None, "--tolerate", metavar="ENDING,…",
                                        help="Endings or findings that do not fail a stream."),
    on_bad_end: str = typer.Option("error-event", "--on-bad-end", metavar="error-event|abort|pass",
                                   help="error-event (an error frame the SDKs raise on), abort "
                                        "(reset), or pass (forward as is, still recorded)."),
    complete_done: bool = typer.Option(False, "--complete-done",
                                       help="Append data: [DONE] (messages: message_stop) to a "
                                            "finished stream that lacks it."),
    repair_markup: str = typer.Option("off", "--repair-markup", metavar="auto|FAMILY|off",
                                      help="Turn tool-call markup left in content into tool calls "
                                           "(tool_calls, function_call items, tool_use blocks)."),
    stall_timeout: float = typer.Option(60.0, "--stall-timeout", metavar="SECONDS",
                                        help="Upstream silence on an open stream (or a relayed "
                                             "body) that counts as stalled."),
    timeout: float = typer.Option(600.0, "--timeout", metavar="SECONDS",
                                  help="Wait for the upstream's response headers (then 504)."),
    store: str = typer.Option("sseguard.db", "--store", metavar="PATH|URL",
                              help="Where stream records go: a SQLite file, postgresql://…, or none."),
    max_body: str = typer.Option("32MiB", "--max-body", metavar="SIZE",
                                 help="Largest body of a guarded endpoint accepted (then 413); "
                                      "other bodies stream through."),
    workers: str = typer.Option("1", "--workers", metavar="N|auto",
                                help="Processes serving the port (auto = one per core)."),
    retain: str | None = typer.Option(None, "--retain", metavar="AGE",
                                      help="Delete stored records older than this (e.g. 14d)."),
    retain_healthy: str | None = typer.Option(None, "--retain-healthy", metavar="AGE",
                                              help="Delete healthy streams' records sooner (e.g. 2d)."),
    sample_healthy: float | None = typer.Option(None, "--sample-healthy", metavar="FRACTION",
                                                help="Store this share of healthy streams, weighted so "
                                                     "`analyze` rates stay unbiased (e.g. 0.1)."),
) -> None:
    """Guard an OpenAI- or Anthropic-compatible endpoint: no stream ends as a silent, clean end.

    Chat completions, Responses and Messages streams are forwarded as they arrive and checked in
    flight; one that ends badly under the policy ends with an error the SDK raises, in its protocol.
    Everything else is relayed verbatim. Every stream is recorded (secrets removed).

    \b
    Example:
      sseguard proxy --upstream http://127.0.0.1:8000/v1 --listen 127.0.0.1:8080
    """
    from sseguard.proxy.cli import run_proxy_command

    try:
        status = run_proxy_command(
            upstream=upstream, listen=listen, policy=policy, tolerate=tolerate,
            on_bad_end=on_bad_end, complete_done=complete_done, repair_markup=repair_markup,
            stall_timeout=stall_timeout, timeout=timeout, store=store, max_body=max_body,
            echo=typer.echo, workers=workers, retain=retain, retain_healthy=retain_healthy,
            sample_healthy=sample_healthy)
    except ConfigError as exc:
        fail(str(exc))
    if status:
        raise typer.Exit(status)


# ── analyze, export ───────────────────────────────────────────────────────────────────────────────
@app.command(cls=_Command, name="analyze")
def analyze_command(
    sources: list[str] = typer.Argument(..., metavar="SOURCE",
                                        help="results .jsonl files, globs or run directories, Parquet "
                                             "(a file or directory), or stores (x.db, sqlite:///x.db, "
                                             "postgresql://…); several are one run."),
    policy: str = typer.Option("strict", "--policy", metavar="POLICY",
                               help="strict, no-finish-ok, no-done-ok, lenient."),
    tolerate: str | None = typer.Option(None, "--tolerate", metavar="ENDING,…",
                                        help="Endings or findings that do not fail a stream."),
    since: str | None = typer.Option(None, "--since", metavar="AGE|ISO",
                                     help="Only streams started since then: 24h, 7d, or an ISO time (UTC)."),
    until: str | None = typer.Option(None, "--until", metavar="AGE|ISO",
                                     help="Only streams started before then."),
    where: str | None = typer.Option(None, "--where", metavar="COL=VALUE,…",
                                     help="Only these streams: arm, api, workload, run, concurrency, "
                                          "ending (e.g. arm=gw,api=messages)."),
    engine: str = typer.Option("duckdb", "--engine", metavar="duckdb|spark",
                               help="Who counts JSONL and Parquet (stores count in their database)."),
    html: str | None = typer.Option(None, "--html", metavar="REPORT.html",
                                    help="Write one self-contained HTML report (plots embedded)."),
    png: str | None = typer.Option(None, "--png", metavar="DIR", help="Write the plots as PNG files."),
    as_json: bool = typer.Option(False, "--json", help="Print the analysis as one JSON document."),
    top: int = typer.Option(5, "--top", metavar="N", help="How many attribute findings to state."),
) -> None:
    """Find what the failing streams of a run have in common.

    The records are counted where they are (DuckDB for files, the store's own database, or Spark);
    only the counts reach Python. Rates per arm and concurrency level (Wilson 95 % intervals), arm
    vs arm (Fisher's exact test), and the recorded attributes ranked by how completely they separate
    failing from healthy streams. The records keep full verdicts, so any policy can judge them again.
    Exit code 0 when no stream failed the policy, 1 when some did, 2 for unusable input.

    \b
    Example:
      sseguard analyze out/results.jsonl --html report.html --tolerate no_done
      sseguard analyze sseguard.db --since 24h --where api=messages
    """
    from sseguard.analyze.run import run_analyze

    try:
        result = run_analyze(sources, policy=policy, tolerate=tolerate, html=html, png=png,
                             as_json=as_json, top=top, since=since, until=until, where=where,
                             engine=engine, console=console, err_console=err_console, echo=typer.echo)
    except ConfigError as exc:
        fail(str(exc))
    raise typer.Exit(1 if result.total.failed else 0)


@app.command(cls=_Command, name="export", short_help="Write records as Parquet, partitioned by day.")
def export_command(
    sources: list[str] = typer.Argument(..., metavar="SOURCE",
                                        help="results .jsonl files or run directories, Parquet, or "
                                             "stores (x.db, sqlite:///x.db, postgresql://…)."),
    parquet: str = typer.Option(..., "--parquet", metavar="OUT",
                                help="A new (or empty) directory: OUT/day=YYYY-MM-DD/*.parquet."),
    since: str | None = typer.Option(None, "--since", metavar="AGE|ISO",
                                     help="Only streams started since then: 24h, 7d, or an ISO time (UTC)."),
    until: str | None = typer.Option(None, "--until", metavar="AGE|ISO",
                                     help="Only streams started before then."),
    where: str | None = typer.Option(None, "--where", metavar="COL=VALUE,…",
                                     help="Only these streams (e.g. arm=gw,api=messages)."),
) -> None:
    """Write records as Parquet, partitioned by the UTC day they started: the form a data team loads
    into Spark, Trino, DuckDB or pandas, and that `sseguard analyze OUT` reads back.

    \b
    Example:
      sseguard export sseguard.db --parquet lake/sseguard --since 7d
    """
    from sseguard.analyze.run import run_export

    try:
        run_export(sources, parquet, since=since, until=until, where=where, err_console=err_console)
    except ConfigError as exc:
        fail(str(exc))


# ── parse, tokenizer ──────────────────────────────────────────────────────────────────────────────
@app.command(cls=_Command, short_help="Parse tool-call markup out of raw model output.", name="parse")
def parse_command(
    file: str = typer.Argument(..., metavar="FILE", help="Raw model output (UTF-8 text)."),
    family: str = typer.Option("auto", "--family", metavar="NAME",
                               help="dsml-v32, dsml-v4, dsml-v41, deepseek-v3, deepseek-v31, hermes, "
                                    "qwen3-coder, kimi-k2, harmony, glm45, glm47, minimax-m2, or "
                                    "auto (detect from the first marker)."),
    tools: str | None = typer.Option(None, "--tools", metavar="TOOLS.json",
                                     help="OpenAI tools list (or a request body with tools): "
                                          "enables undefined_function and the schema types of "
                                          "Qwen3-Coder, GLM and MiniMax values."),
    chunk: int = typer.Option(0, "--chunk", metavar="N",
                              help="Feed N characters at a time (0: the whole file at once)."),
    thinking: bool = typer.Option(False, "--thinking",
                                  help="The text starts inside reasoning (DeepSeek thinking mode, "
                                       "MiniMax-M2)."),
    as_json: bool = typer.Option(False, "--json",
                                 help="Print the final message as OpenAI JSON, with the errors."),
) -> None:
    """Parse tool-call markup out of raw model output, as a streaming server should.

    Exit code 0 when no markup error was found, 1 when one was, 2 for unusable input.

    \b
    Example:
      sseguard parse examples/markup/dsml-v4.txt --family auto --chunk 3
    """
    import json

    from sseguard.parsefile import final_message, parse_file, print_events

    try:
        result = parse_file(file, family, tools_path=tools, chunk=chunk,
                            starts_in_reasoning=thinking)
    except ConfigError as exc:
        fail(str(exc))
    if as_json:
        typer.echo(json.dumps(final_message(result), ensure_ascii=False, indent=2))
    else:
        print_events(result, console)
    raise typer.Exit(1 if result.errors else 0)


@app.command(cls=_Command, short_help="Say whether each tool-call marker is one token.", name="tokenizer")
def tokenizer_command(
    tokenizer_json: str = typer.Argument(..., metavar="TOKENIZER_JSON",
                                         help="A Hugging Face tokenizer.json file."),
    family: str | None = typer.Option(None, "--family", metavar="NAME",
                                      help="One markup family (default: all of them)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object per marker."),
) -> None:
    """Say for each tool-call marker whether it is one token (and its id) or splits into pieces.

    A marker that is several pieces is text the model can misspell — the first suspect when markup
    leaks into content.

    \b
    Example:
      sseguard tokenizer ~/models/DeepSeek-V3.2/tokenizer.json --family dsml-v32
    """
    import json

    from sseguard.tokenizer_check import check_tokenizer, print_reports

    try:
        reports = check_tokenizer(tokenizer_json, family)
    except ConfigError as exc:
        fail(str(exc))
    if as_json:
        for report in reports:
            typer.echo(json.dumps(report.to_dict(), ensure_ascii=False))
    else:
        print_reports(reports, console)


# ── demo ──────────────────────────────────────────────────────────────────────────────────────────
@app.command(cls=_Command, short_help="Probe a chaos upstream with four hidden faults and find them.")
def demo(
    out: str | None = typer.Option(None, "--out", metavar="DIR",
                                   help="Where results, report.html and plots go "
                                        "(default sseguard-runs/demo-<time>)."),
    seconds: float = typer.Option(20.0, "--seconds", metavar="SECONDS",
                                  help="Probing time, split over the levels."),
    no_live: bool = typer.Option(False, "--no-live", help="No live display."),
) -> None:
    """Probe an in-process chaos upstream over chat, responses and messages side by side, with four
    hidden faults, and show what the analysis finds.

    No network, no key; about half a minute.

    \b
    Example:
      sseguard demo --out demo-run
    """
    from sseguard.probe.demo import run_demo

    try:
        result = run_demo(out, seconds=seconds, console=console, err_console=err_console,
                          live=False if no_live else None)
    except ConfigError as exc:
        fail(str(exc))
    raise typer.Exit(0 if all(result.named.values()) else 1)


def main() -> None:
    """Console-script entry: click's usage errors exit 2 already; ConfigError is mapped to exit 2."""
    try:
        app()
    except ConfigError as exc:
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
