"""``sseguard locust``: Locust with sseguard's stream-checking user; unknown arguments go to Locust.

Takes the shared ``LOAD`` options (the probe's), checks them once here, then hands the process to
Locust (``sseguard.locust.launch``). Registers itself on the app when ``sseguard.cli`` imports it.
"""

from __future__ import annotations

from typing import Any

import typer

from sseguard.cli._app import Command, app, fail
from sseguard.cli._options import LOAD, given, with_options
from sseguard.core.errors import ConfigError


@app.command(cls=Command, context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
@with_options(LOAD)
def locust(
    ctx: typer.Context,
    options: dict[str, Any],
    out: str | None = typer.Option(None, "--out", metavar="DIR",
                                   help="Where workers write results-<worker>.jsonl and evidence/ "
                                        "(default sseguard-locust/<run id>)."),
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
    from sseguard.locust.launch import LaunchSettings, run

    config = options.pop("config")
    settings = LaunchSettings(options=given({**options, "out": out}), config_path=config)
    try:
        run(settings, list(ctx.args), master_wait=master_wait, locust_config=locust_config,
            run_id=run_id)
    except ConfigError as exc:
        fail(str(exc))
