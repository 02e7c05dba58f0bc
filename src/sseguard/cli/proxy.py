"""``sseguard proxy``: build the config, serve until Ctrl-C or SIGTERM.

The flags become a ``ProxyConfig``; each worker process runs ``sseguard.proxy.driver.worker.serve_worker``.
Every unusable value surfaces as a ``ConfigError`` (one line, exit 2). Registers itself on the app
when ``sseguard.cli`` imports it.
"""

from __future__ import annotations

import errno
import functools
from collections.abc import Callable
from typing import TYPE_CHECKING

import typer

from sseguard.cli._app import Command, app, fail
from sseguard.cli._names import family_names
from sseguard.cli._options import tolerate_option
from sseguard.core.errors import ConfigError
from sseguard.core.policy import GUARD_DEFAULT

if TYPE_CHECKING:
    from sseguard._serve import Listening


def run_proxy_command(*, upstream: str, listen: str, policy: str = GUARD_DEFAULT,
                      tolerate: str | None, on_bad_end: str, complete_done: bool, repair_markup: str,
                      stall_timeout: float, timeout: float, store: str, max_body: str,
                      echo: Callable[..., None], workers: str = "1", retain: str | None = None,
                      retain_healthy: str | None = None, sample_healthy: float | None = None,
                      retry: int = 2, retry_max_wait: float = 10.0, resume: str = "off",
                      resume_max: int = 2, resume_base_url: str | None = None,
                      retry_budget: str = "20%", resume_store_ok: bool = False,
                      otel: bool = False) -> int:
    """Serve with the given flags until interrupted (uvloop when installed); returns the exit status."""
    from sseguard._serve import serve_workers
    from sseguard.proxy.config import ProxyConfig
    from sseguard.proxy.driver.worker import serve_worker

    config = ProxyConfig.from_options(
        upstream=upstream, listen=listen, policy=policy, tolerate=tolerate, on_bad_end=on_bad_end,
        complete_done=complete_done, repair_markup=repair_markup, stall_timeout=stall_timeout,
        timeout=timeout, max_body=max_body, store=store, workers=workers, retain=retain,
        retain_healthy=retain_healthy, sample_healthy=sample_healthy, retry=retry,
        retry_max_wait=retry_max_wait, resume=resume, resume_max=resume_max,
        resume_base_url=resume_base_url, retry_budget=retry_budget, resume_store_ok=resume_store_ok,
        otel=otel)
    if otel:
        from sseguard import telemetry

        telemetry.load().check_environment()  # the extra and the OTEL_* values, checked now
    if config.store is not None:
        from sseguard.store import open_store

        # Fail on an unusable store now, with one line, rather than at the first stream. This also
        # creates a SQLite file (in WAL mode) before several workers open it at once.
        open_store(config.store).close()

    def ready(where: Listening) -> None:
        echo(f"sseguard proxy listening on {where.url} → {config.upstream}")
        evidence = config.store or "nowhere (--store none)"
        processes = f"{config.workers} workers; " if config.workers > 1 else ""
        echo(f"{processes}policy {config.effective_policy.name}; on bad end: {config.on_bad_end}; "
             f"repair: {config.repair_markup}; retry: {config.retry}; "
             f"resume: {config.resume or 'off'}"
             f"{f' via {config.resume_base_url}' if config.resume_base_url else ''}; "
             f"records → {evidence}; "
             f"{'OpenTelemetry on; ' if config.otel else ''}"
             f"run {config.run_id}; Ctrl-C to stop", err=True)

    try:
        return serve_workers(config.workers, config.host, config.port,
                             functools.partial(serve_worker, config), ready)
    except OSError as exc:
        if exc.errno in (errno.EADDRINUSE, errno.EACCES, errno.EADDRNOTAVAIL):
            raise ConfigError(f"cannot listen on {listen}: {exc.strerror or exc}") from None
        raise


@app.command(cls=Command)
def proxy(
    upstream: str = typer.Option(..., "--upstream", metavar="BASE_URL",
                                 help="The upstream's base URL as its SDK takes it (…/v1, or an "
                                      "Anthropic base); the only place the proxy forwards to."),
    listen: str = typer.Option("127.0.0.1:8080", "--listen", metavar="HOST:PORT",
                               help="Where to listen (loopback by default; port 0 = any free port)."),
    policy: str = typer.Option(GUARD_DEFAULT, "--policy", metavar="POLICY",
                               help="What a bad end is: agents (a finished answer that only lacks "
                                    "its [DONE]/message_stop is completed), strict, no-finish-ok, "
                                    "no-done-ok, lenient."),
    tolerate: str | None = tolerate_option(),
    on_bad_end: str = typer.Option("error-event", "--on-bad-end", metavar="error-event|abort|pass",
                                   help="error-event (an error frame the SDKs raise on), abort "
                                        "(reset), or pass (forward as is, still recorded)."),
    complete_done: bool = typer.Option(False, "--complete-done",
                                       help="Append data: [DONE] (messages: message_stop) to a "
                                            "finished stream that lacks it."),
    repair_markup: str = typer.Option("off", "--repair-markup", metavar="auto|FAMILY|off",
                                      help="Turn tool-call markup left in content into tool calls "
                                           "(tool_calls, function_call items, tool_use blocks, "
                                           "functionCall parts); "
                                           f"FAMILY is one of {', '.join(family_names())}."),
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
    retry: int = typer.Option(2, "--retry", metavar="N",
                              help="Ask the upstream again, up to N times, when it fails before the "
                                   "client got a byte (connect error, reset, 429/5xx, empty 200, "
                                   "stall or error before the first event); 0 = never."),
    retry_max_wait: float = typer.Option(10.0, "--retry-max-wait", metavar="SECONDS",
                                         help="Longest wait before a retry; a Retry-After beyond it "
                                              "goes to the client at once."),
    retry_budget: str = typer.Option("20%", "--retry-budget", metavar="PERCENT",
                                     help="Retries may add at most this share to the upstream "
                                          "requests of the last 10 s (at least 10 retries); beyond "
                                          "it a failure is answered at once, with x-should-retry: "
                                          "false. 0 turns retries off as --retry 0 does."),
    resume: str = typer.Option("off", "--resume",
                               metavar="vllm|deepseek|anthropic|openai-background|off",
                               help="Continue a stream that broke after content: ask the upstream "
                                    "for the rest (vllm: chat continue_final_message; deepseek: chat "
                                    "prefix completion on the beta base URL; anthropic: Messages "
                                    "prefill; openai-background: Responses run with background and "
                                    "store true, read again after the last sequence number; one "
                                    "dialect per protocol: e.g. vllm,anthropic,openai-background) "
                                    "and splice it into the client's stream."),
    resume_store_ok: bool = typer.Option(False, "--resume-store-ok",
                                         help="--resume openai-background also stores (and so can "
                                              "continue) a request that asked store: false."),
    resume_max: int = typer.Option(2, "--resume-max", metavar="K",
                                   help="Continuations per stream at most."),
    resume_base_url: str | None = typer.Option(
        None, "--resume-base-url", metavar="URL",
        help="Where --resume deepseek sends continuations (default: the upstream base with its "
             "version segment replaced by /beta, e.g. https://api.deepseek.com/beta)."),
    retain: str | None = typer.Option(None, "--retain", metavar="AGE",
                                      help="Delete stored records older than this (e.g. 14d)."),
    retain_healthy: str | None = typer.Option(None, "--retain-healthy", metavar="AGE",
                                              help="Delete healthy streams' records sooner (e.g. 2d)."),
    sample_healthy: float | None = typer.Option(None, "--sample-healthy", metavar="FRACTION",
                                                help="Store this share of healthy streams, weighted so "
                                                     "`analyze` rates stay unbiased (e.g. 0.1)."),
    otel: bool = typer.Option(False, "--otel",
                              help="Export a span per stream and the GenAI metrics over OTLP, as the "
                                   "OTEL_* variables say (OTEL_EXPORTER_OTLP_ENDPOINT, "
                                   "OTEL_EXPORTER_OTLP_PROTOCOL, OTEL_SERVICE_NAME, …); needs "
                                   "sseguard[otel]."),
) -> None:
    """Guard an OpenAI-, Anthropic- or Gemini-compatible endpoint: no stream ends as a silent, clean end.

    Chat completions, Responses and Messages streams are forwarded as they arrive and checked in
    flight; one that ends badly under the policy ends with an error the SDK raises, in its protocol.
    Everything else is relayed verbatim. Every stream is recorded (secrets removed).

    \b
    Example:
      sseguard proxy --upstream http://127.0.0.1:8000/v1 --listen 127.0.0.1:8080
    """
    try:
        status = run_proxy_command(
            upstream=upstream, listen=listen, policy=policy, tolerate=tolerate,
            on_bad_end=on_bad_end, complete_done=complete_done, repair_markup=repair_markup,
            stall_timeout=stall_timeout, timeout=timeout, store=store, max_body=max_body,
            echo=typer.echo, workers=workers, retain=retain, retain_healthy=retain_healthy,
            sample_healthy=sample_healthy, retry=retry, retry_max_wait=retry_max_wait,
            resume=resume, resume_max=resume_max, resume_base_url=resume_base_url,
            retry_budget=retry_budget, resume_store_ok=resume_store_ok, otel=otel)
    except ConfigError as exc:
        fail(str(exc))
    if status:
        raise typer.Exit(status)
