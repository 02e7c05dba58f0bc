"""What ``sseguard probe`` and ``sseguard sweep`` do once typer has parsed the flags.

Kept out of ``cli.py`` so the command line module stays a list of options. Every unusable input is a
``ConfigError`` (the CLI prints it as one line and exits 2).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Console

from sseguard.errors import ConfigError
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
               err_console: Console) -> int:
    """Run the probe (or sweep) and print its summary; returns the exit code."""
    from sseguard.probe.report import summarize
    from sseguard.probe.runner import run_probe

    config = config_from_options(options, config_path=config_path, resume=resume, sweep=sweep)
    result = run_probe(config, resume=resume is not None, console=err_console, live=live,
                       announce=not as_json)
    summarize(result, console, as_json=as_json)
    return result.exit_code
