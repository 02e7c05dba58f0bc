"""``sseguard locust``: resolve the settings once, check them, then hand the process over to Locust.

Kept apart from ``sseguard.locust.user`` on purpose: importing Locust monkey-patches the whole process
for gevent, which the CLI (and anything else importing this module) must not suffer. This module only
parses, validates and builds the command line.

The settings travel to the Locust process in one environment variable (:data:`SETTINGS_ENV`) holding
the *inputs* (flags and the config file's path), never a key: each Locust process resolves them again
with the probe's own ``build_config`` and reads the key from ``key_env`` itself. Master and workers may
run on different machines, each with its own ``sseguard locust`` command line and the same TOML file.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from sseguard.core._renamed import renamed
from sseguard.core.errors import ConfigError
from sseguard.extras import require
from sseguard.probe.config import (
    ProbeConfig,
    arms_from_toml,
    build_config,
    parse_arm,
)
from sseguard.probe.config_file import probe_table, read_toml

#: JSON ``{"options": {...}, "config": path or null}`` written by ``sseguard locust``.
SETTINGS_ENV = "SSEGUARD_LOCUST_SETTINGS"
#: A TOML file (the probe's format) for a plain ``locust -f …`` run without the wrapper.
CONFIG_ENV = "SSEGUARD_LOCUST_CONFIG"
#: The locustfile shipped in the package (it only imports the user class).
LOCUSTFILE = str(Path(__file__).with_name("locustfile.py"))
DEFAULT_MASTER_PORT = 5557
#: Without ``--out`` (or ``out`` in the file) each run writes to ``sseguard-locust/<run id>``: the run
#: id comes from the master, so every worker of one run lands in the same directory.
DEFAULT_OUT_ROOT = "sseguard-locust"

_OPTION_KEYS = ("arms", "api", "model", "key_env", "workload", "body", "policy", "tolerate",
                "stall_timeout", "timeout", "connect_timeout", "out", "seed", "headers")


@dataclass(frozen=True, slots=True)
class LaunchSettings:
    """What ``sseguard locust`` was given: flag values (None = unset) and the TOML file's path."""

    options: Mapping[str, Any]
    config_path: str | None = None

    def resolve(self, *, need_keys: bool = True) -> ProbeConfig:
        """The validated configuration. A master sends no request, so it may lack the key variable."""
        options = {k: v for k, v in self.options.items() if k in _OPTION_KEYS}
        if need_keys:
            return build_config(options, config_path=self.config_path)
        with _placeholder_keys(self._key_names(options)):
            return build_config(options, config_path=self.config_path)

    @property
    def explicit_out(self) -> bool:
        """Whether the output directory was chosen (flag or file) rather than left to the run id."""
        if self.options.get("out"):
            return True
        if self.config_path is None:
            return False
        return bool(probe_table(read_toml(self.config_path), self.config_path).get("out"))

    def _key_names(self, options: Mapping[str, Any]) -> set[str]:
        names = {a.key_env for a in self._arms(options) if a.key_env}
        if options.get("key_env"):
            names.add(str(options["key_env"]))
        return names

    def _arms(self, options: Mapping[str, Any]) -> list[Any]:
        arms = [parse_arm(text, i) for i, text in enumerate(options.get("arms") or [], 1)]
        if self.config_path is not None:
            arms += arms_from_toml(read_toml(self.config_path), self.config_path)
        return arms

    def to_env(self) -> str:
        path = str(Path(self.config_path).resolve()) if self.config_path else None
        return json.dumps({"options": dict(self.options), "config": path})

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> LaunchSettings:
        """The settings a Locust process was started with (wrapper JSON, else a TOML path)."""
        env = os.environ if environ is None else environ
        raw = env.get(SETTINGS_ENV)
        if raw:
            try:
                doc = json.loads(raw)
                options, path = doc["options"], doc.get("config")
            except (ValueError, KeyError, TypeError):
                raise ConfigError(f"{SETTINGS_ENV} is not what `sseguard locust` writes") from None
            if not isinstance(options, dict) or not (path is None or isinstance(path, str)):
                raise ConfigError(f"{SETTINGS_ENV} is not what `sseguard locust` writes")
            return cls(options=options, config_path=path)
        path = env.get(CONFIG_ENV)
        if path:
            return cls(options={}, config_path=path)
        raise ConfigError(f"no sseguard settings: run `sseguard locust …`, or set {CONFIG_ENV} to a "
                          "TOML file with [[arm]] tables")


@contextlib.contextmanager
def _placeholder_keys(names: set[str]) -> Iterator[None]:
    """Let validation pass for key variables this process never reads (restored right after)."""
    missing = [n for n in names if not os.environ.get(n)]
    for name in missing:
        os.environ[name] = "placeholder-not-sent"
    try:
        yield
    finally:
        for name in missing:
            os.environ.pop(name, None)


# ── Locust's own command line ────────────────────────────────────────────────────────────────────
def _value(args: Sequence[str], *names: str) -> str | None:
    """The value of a Locust option given as ``--name value`` or ``--name=value`` (last one wins)."""
    found: str | None = None
    for i, arg in enumerate(args):
        for name in names:
            if arg == name and i + 1 < len(args):
                found = args[i + 1]
            elif arg.startswith(name + "="):
                found = arg[len(name) + 1:]
    return found


def role(args: Sequence[str]) -> str:
    """``master``, ``worker`` or ``local``, as Locust will run."""
    if "--master" in args:
        return "master"
    if "--worker" in args or "--slave" in args:
        return "worker"
    return "local"


def master_address(args: Sequence[str], environ: Mapping[str, str] | None = None) -> tuple[str, int]:
    env = os.environ if environ is None else environ
    host = _value(args, "--master-host") or env.get("LOCUST_MASTER_NODE_HOST") or "127.0.0.1"
    raw = _value(args, "--master-port") or env.get("LOCUST_MASTER_NODE_PORT") or str(DEFAULT_MASTER_PORT)
    if not re.fullmatch(r"\d{1,5}", raw) or not 0 < int(raw) < 65536:
        raise ConfigError(f"--master-port {raw!r} is not a TCP port")
    return host, int(raw)


def wait_for_master(host: str, port: int, wait: float) -> None:
    """Fail fast (a one-line error) instead of Locust's silent minute of reconnect attempts."""
    deadline = time.monotonic() + max(wait, 0.0)
    last: OSError | None = None
    while True:
        try:
            with socket.create_connection((host, port), timeout=min(2.0, max(wait, 0.2))):
                return
        except OSError as exc:
            last = exc
        if time.monotonic() >= deadline:
            reason = last.strerror if last is not None and last.strerror else str(last)
            raise ConfigError(f"cannot reach the Locust master at {host}:{port} ({reason}; "
                              f"waited {wait:g} s — start the master first, or raise --master-wait)")
        time.sleep(0.2)


def locust_argv(locust_args: Sequence[str], *, locust_config: str | None = None,
                run_id: str | None = None) -> list[str]:
    """``python -m locust -f <shipped locustfile> …``; a user's own ``-f`` wins."""
    args = list(locust_args)
    head = [sys.executable, "-m", "locust"]
    if _value(args, "-f", "--locustfile") is None:
        head += ["-f", LOCUSTFILE]
    if locust_config is not None:
        head += ["--config", locust_config]
    if run_id is not None:
        head += ["--sseguard-run-id", run_id]
    return head + args


def prepare(settings: LaunchSettings, locust_args: Sequence[str], *, master_wait: float = 10.0,
            locust_config: str | None = None, run_id: str | None = None,
            environ: Mapping[str, str] | None = None) -> tuple[list[str], dict[str, str]]:
    """Validate everything and return (argv, environment) for the Locust process.

    Raises ``ConfigError`` (one line) for unusable settings, a missing key variable on a process that
    sends requests, or a master that cannot be reached from a worker.
    """
    require("locust", "sseguard locust")
    which = role(locust_args)
    settings.resolve(need_keys=which != "master")
    if which == "worker":
        wait_for_master(*master_address(locust_args, environ), master_wait)
    env = dict(os.environ if environ is None else environ)
    env[SETTINGS_ENV] = settings.to_env()
    return locust_argv(locust_args, locust_config=locust_config, run_id=run_id), env


def run(settings: LaunchSettings, locust_args: Sequence[str], **kwargs: Any) -> NoReturn:
    """Replace this process with Locust (its exit code, signals and output become the command's)."""
    argv, env = prepare(settings, locust_args, **kwargs)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(argv[0], argv, env)

#: Old names → new (docs/design/vocabulary.md "Names").
__getattr__ = renamed(__name__, {"Settings": "LaunchSettings"})
