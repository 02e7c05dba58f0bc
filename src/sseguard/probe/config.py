"""What a probe run targets and how hard: arms, workload, bounds, policy — from flags or a TOML file.

Keys never travel on the command line or in a file: an arm names the *environment variable* that holds
its key (``key_env``), and a secret-named header given as a flag or in the file is refused. Every
problem is a one-line ``ConfigError`` raised before a single request goes out.
"""

from __future__ import annotations

import math
import os
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from sseguard._config import nonneg_float as _nonneg_float
from sseguard._config import opt_int as _int
from sseguard._config import opt_string as _opt_str
from sseguard._config import positive_float as _positive_float
from sseguard._config import positive_int as _positive_int
from sseguard.core.contract import api_names, protocol
from sseguard.core.errors import ConfigError, UsageError
from sseguard.core.policy import Policy
from sseguard.core.redact import SECRET_NAMES
from sseguard.core.verdict import Api
from sseguard.probe.config_file import arm_tables, probe_table, read_toml
from sseguard.probe.formats import (
    DEFAULT_MODEL,
    BodySettings,
    check_request_body,
    format_for,
    load_body_file,
)

WORKLOADS = ("small", "big", "reuse", "tools", "consistency")
DEFAULT_BIG_BYTES = 1_700_000
DEFAULT_COUNT = 100
DEFAULT_LEVELS = (1, 8, 16, 32, 60)
_ARM_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")


def parse_api(value: Any, where: str) -> Api:
    """A protocol's name (``Api``); anything else is a one-line ``ConfigError`` listing the names."""
    try:
        return protocol(value).api
    except UsageError:
        raise ConfigError(f"{where}: unknown api {value!r} (known: {api_names()})") from None


@dataclass(frozen=True, slots=True)
class Arm:
    """One target endpoint. ``key_env`` is the *name* of the env var holding its key, never the key.

    ``api`` is the protocol the arm speaks; None until ``build_config`` fills in the run's ``--api``
    (chat by default). ``key_header`` None means the protocol's own (``Protocol.auth``):
    ``Authorization: Bearer`` for the OpenAI protocols, ``x-api-key`` for Anthropic Messages.
    ``body_file`` is the arm's own request body
    (in its protocol's format), for arms of several protocols side by side; it replaces the run's
    workload for this arm.
    """

    name: str
    base_url: str
    model: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    key_env: str | None = None
    key_header: str | None = None  # `api-key` for Azure, `x-api-key` for some gateways
    api: Api | None = None
    body_file: str | None = None

    @property
    def protocol(self) -> Api:
        return self.api or Api.CHAT

    @property
    def url(self) -> str:
        """The stream URL: the base URL plus the protocol's stream path (``Protocol.routes``, the
        model filled in where the path holds it) unless it already ends so; a query the base URL
        carries stays the query, and a protocol with two framings asks for its SSE one
        (``Protocol.sse_query``: Gemini's ``alt=sse``, as its SDKs do)."""
        proto = protocol(self.protocol)
        parts = urlsplit(self.base_url)
        base = parts.path.rstrip("/")
        path = proto.routes[0].fill(model=self.model or DEFAULT_MODEL)
        query = [q for q in parts.query.split("&") if q]
        if proto.sse_query is not None:
            name, value = proto.sse_query
            if not any(q.split("=", 1)[0] == name for q in query):
                query.append(f"{name}={value}")
        return urlunsplit(parts._replace(path=base if base.endswith(path) else f"{base}{path}",
                                         query="&".join(query)))

    @property
    def key_header_name(self) -> str:
        if self.key_header:
            return self.key_header
        return protocol(self.protocol).auth.header

    @property
    def path(self) -> str:
        return urlsplit(self.url).path or "/"

    def key(self, environ: Mapping[str, str] | None = None) -> str | None:
        """The key read from the environment; a named but unset variable is a ``ConfigError``."""
        if self.key_env is None:
            return None
        env = os.environ if environ is None else environ
        value = env.get(self.key_env)
        if not value:
            raise ConfigError(f"environment variable {self.key_env} (key_env of arm {self.name!r}) "
                              "is not set")
        return value

    def request_headers(self, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        """Headers to send: the arm's own plus the key header built from ``key_env``."""
        headers = dict(self.headers)
        given = {k.lower() for k in headers}
        # The protocol's fixed headers (Anthropic refuses a request without ``anthropic-version``).
        headers.update((k, v) for k, v in protocol(self.protocol).headers.items() if k.lower() not in given)
        key = self.key(environ)
        if key is not None:
            name = self.key_header_name
            if name.lower() in ("authorization", "proxy-authorization"):
                headers[name] = f"Bearer {key}"
            else:
                headers[name] = key
        return headers

    def to_dict(self) -> dict[str, Any]:
        """A form safe to store: no key (only the variable's name)."""
        return {"name": self.name, "base_url": self.base_url, "model": self.model,
                "headers": dict(self.headers), "key_env": self.key_env, "key_header": self.key_header,
                "api": str(self.protocol), "body_file": self.body_file}


@dataclass(frozen=True, slots=True)
class WorkloadSpec:
    """What every request of the run asks for."""

    name: str = "small"
    big_bytes: int = DEFAULT_BIG_BYTES
    body_file: str | None = None
    max_tokens: int | None = None
    reasoning_effort: str | None = None
    include_usage: bool = True
    max_turns: int = 8

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "big_bytes": self.big_bytes, "body_file": self.body_file,
                "max_tokens": self.max_tokens, "reasoning_effort": self.reasoning_effort,
                "include_usage": self.include_usage, "max_turns": self.max_turns}


@dataclass(frozen=True, slots=True)
class ProbeConfig:
    """One run: arms side by side, one workload, one or more concurrency levels, always bounded."""

    arms: tuple[Arm, ...]
    workload: WorkloadSpec = field(default_factory=WorkloadSpec)
    levels: tuple[int, ...] = (8,)
    count: int | None = DEFAULT_COUNT  # per arm and level; None with a duration means "until time is up"
    duration: float | None = None  # seconds per level
    rate: float | None = None  # request starts per second, per arm
    ramp: float | None = None  # seconds to spread the first requests over; None = about one stream
    stall_timeout: float = 30.0
    timeout: float = 300.0
    connect_timeout: float = 10.0
    policy: Policy = field(default_factory=Policy)
    out: str = "sseguard-out"  # build_config picks a fresh sseguard-runs/<time> when not given
    seed: int = 0
    check_reachable: bool = True
    #: ``--otel``: a span per request and the GenAI metrics, exported as the ``OTEL_*`` variables say
    #: (a setting of this session, not of the run: never saved for ``--resume``).
    otel: bool = False

    @property
    def sweep(self) -> bool:
        return len(self.levels) > 1

    def to_dict(self) -> dict[str, Any]:
        """The settings as stored in ``run.json`` (for ``--resume``): names of key variables only."""
        return {
            "arms": [a.to_dict() for a in self.arms], "workload": self.workload.to_dict(),
            "levels": list(self.levels), "count": self.count, "duration": self.duration,
            "rate": self.rate, "ramp": self.ramp, "stall_timeout": self.stall_timeout,
            "timeout": self.timeout, "connect_timeout": self.connect_timeout,
            "policy": self.policy.name.split("+")[0],
            "tolerate": self.policy.listed,
            "out": self.out, "seed": self.seed,
        }


def default_out() -> str:
    """A fresh directory per run, so a second run never lands in the first one's results."""
    return f"sseguard-runs/{time.strftime('%Y%m%d-%H%M%S')}"


# ── parsing helpers ─────────────────────────────────────────────────────────────────────────────
def parse_duration(text: str | float | int) -> float:
    """``"10m"`` → 600.0; ``"90"``/``"90s"`` seconds; ``"1.5h"``, ``"250ms"``."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        value = float(text)
    else:
        m = _DURATION.match(str(text))
        if not m:
            raise ConfigError(f"duration {text!r} is not like 90s, 10m or 1h")
        unit = {"ms": 0.001, "s": 1.0, None: 1.0, "m": 60.0, "h": 3600.0}[m.group(2)]
        value = float(m.group(1)) * unit
    if not math.isfinite(value) or value <= 0:
        raise ConfigError(f"duration {text!r} must be positive")
    return value


def parse_levels(text: str | Sequence[int] | int) -> tuple[int, ...]:
    """``"1,8,16"`` → (1, 8, 16); every level a positive integer."""
    items: list[Any]
    if isinstance(text, str):
        items = [t.strip() for t in text.split(",") if t.strip()]
    elif isinstance(text, int):
        items = [text]
    else:
        items = list(text)
    levels: list[int] = []
    for item in items:
        if isinstance(item, bool | float):
            raise ConfigError(f"concurrency {item!r} is not a whole number")
        try:
            level = int(item)
        except (TypeError, ValueError):
            raise ConfigError(f"concurrency {item!r} is not a whole number") from None
        if level < 1 or level > 100_000:
            raise ConfigError(f"concurrency {level} must be between 1 and 100000")
        levels.append(level)
    if not levels:
        raise ConfigError("no concurrency level given")
    return tuple(levels)


def parse_header(text: str) -> tuple[str, str]:
    """``"X-Team: ml"`` → (``x-team``, ``ml``); secret-named headers are refused (use ``key_env``)."""
    name, sep, value = text.partition(":")
    name = name.strip()
    if not sep or not name or any(c.isspace() for c in name):
        raise ConfigError(f"header {text.split(':')[0]!r}… is not like 'Name: value'")
    return _check_header(name, value.strip())


def _check_header(name: str, value: str) -> tuple[str, str]:
    if name.lower() in SECRET_NAMES:
        raise ConfigError(f"header {name!r} carries a secret: put the key in an environment variable "
                          "and name it with --key-env / key_env (and key_header)")
    return name, value


def check_url(url: str, *, where: str) -> str:
    """An http(s) URL with a host, or a ``ConfigError`` naming ``where`` it came from."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ConfigError(f"{where}: {url!r} is not a URL ({exc})") from None
    if parts.scheme not in ("http", "https"):
        scheme = parts.scheme or "(none)"
        raise ConfigError(f"{where}: unknown URL scheme {scheme!r} in {url!r} (use http or https)")
    if not parts.hostname:
        raise ConfigError(f"{where}: no host in {url!r}")
    if port == 0:
        raise ConfigError(f"{where}: port 0 in {url!r}")
    if parts.username or parts.password:
        raise ConfigError(f"{where}: credentials in the URL are refused; use key_env")
    return url


def make_arm(name: str, base_url: str, *, model: str | None = None,
             headers: Mapping[str, str] | None = None, key_env: str | None = None,
             key_header: str | None = None, api: str | Api | None = None,
             body_file: str | None = None) -> Arm:
    """A validated arm (name, URL, header names, env-var name, protocol, its own body file)."""
    if not _ARM_NAME.match(name):
        raise ConfigError(f"arm name {name!r}: use letters, digits, '.', '_' or '-' (at most 64)")
    check_url(base_url, where=f"arm {name!r}")
    if key_env is not None and not _ENV_NAME.match(key_env):
        raise ConfigError(f"arm {name!r}: key_env {key_env!r} is not an environment variable name "
                          "(give the variable's name, never the key)")
    checked = dict(_check_header(str(k), str(v)) for k, v in (headers or {}).items())
    if key_header is not None and (not key_header or any(c.isspace() for c in key_header)):
        raise ConfigError(f"arm {name!r}: key_header {key_header!r} is not a header name")
    protocol = None if api is None else parse_api(api, f"arm {name!r}")
    if body_file is not None and not Path(body_file).is_file():
        raise ConfigError(f"arm {name!r}: cannot read body file {body_file}")
    return Arm(name=name, base_url=base_url, model=model, headers=checked, key_env=key_env,
               key_header=key_header, api=protocol, body_file=body_file)


def parse_arm(text: str, position: int) -> Arm:
    """``NAME=URL`` (or a bare URL, named ``arm<position>``)."""
    name, sep, url = text.partition("=")
    if not sep or "://" in name:
        name, url = f"arm{position}", text
    return make_arm(name.strip(), url.strip())


def arms_from_toml(doc: Mapping[str, Any], path: str) -> list[Arm]:
    return [make_arm(**table) for table in arm_tables(doc, path)]


def build_config(options: Mapping[str, Any], *, config_path: str | None = None,
                 saved: Mapping[str, Any] | None = None,
                 environ: Mapping[str, str] | None = None) -> ProbeConfig:
    """Merge defaults < saved run settings (resume) < TOML file < command-line options (None = unset).

    ``options`` keys: arms (list of ``NAME=URL``), model, workload, body, big_bytes, max_tokens,
    reasoning_effort, include_usage, count, duration, concurrency, rate, ramp, stall_timeout, timeout,
    policy, tolerate, out, key_env, headers (list of ``K: V``), seed.
    """
    merged: dict[str, Any] = {}
    arms: list[Arm] = []
    if saved:
        merged.update({k: v for k, v in saved.items() if k != "arms" and v is not None})
        workload = saved.get("workload") or {}
        if isinstance(workload, Mapping):
            merged.update({k: v for k, v in workload.items() if k != "name" and v is not None})
            merged["workload"] = workload.get("name", "small")
        merged["concurrency"] = saved.get("levels")
        merged.pop("levels", None)
        for i, a in enumerate(saved.get("arms") or [], 1):
            arms.append(make_arm(a.get("name") or f"arm{i}", a["base_url"], model=a.get("model"),
                                 headers=a.get("headers") or {}, key_env=a.get("key_env"),
                                 key_header=a.get("key_header"), api=a.get("api") or Api.CHAT,
                                 body_file=a.get("body_file")))
    if config_path is not None:
        doc = read_toml(config_path)
        table = probe_table(doc, config_path)
        if "body" in table:
            table["body_file"] = table.pop("body")
        merged.update({k: v for k, v in table.items() if v is not None})
        toml_arms = arms_from_toml(doc, config_path)
        if toml_arms:
            if saved:
                raise ConfigError("--resume uses the run's own arms; drop --config")
            arms = toml_arms
    given = {k: v for k, v in options.items() if v is not None and v != [] and v != ()}
    if "body" in given:
        given["body_file"] = given.pop("body")
    cli_arms = [parse_arm(text, i) for i, text in enumerate(given.pop("arms", []), 1)]
    if cli_arms:
        if saved:
            raise ConfigError("--resume uses the run's own arms; drop --arm")
        arms = cli_arms if config_path is None else [*arms, *cli_arms]
    header_lines = given.pop("headers", [])
    merged.update(given)
    if not arms:
        raise ConfigError("no target: give --arm NAME=URL (repeatable) or --config probe.toml")
    names = [a.name for a in arms]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup:
        raise ConfigError(f"arm name {dup!r} is used twice")

    extra_headers = dict(parse_header(h) for h in header_lines)
    key_env = merged.pop("key_env", None)
    model = merged.pop("model", None)
    run_api = merged.pop("api", None)
    default_api = Api.CHAT if run_api is None else parse_api(run_api, "--api")
    arms = [replace(a,
                    headers={**a.headers, **extra_headers},
                    model=a.model or _opt_str(model, "model"),
                    key_env=a.key_env or key_env,
                    api=a.api or default_api) for a in arms]
    arms = [make_arm(a.name, a.base_url, model=a.model, headers=a.headers, key_env=a.key_env,
                     key_header=a.key_header, api=a.api, body_file=a.body_file) for a in arms]
    for arm in arms:
        arm.key(environ)  # a missing variable is reported now, not at the first request

    workload = _workload(merged)
    _check_workload_fits(workload, arms)
    levels = parse_levels(merged.get("concurrency", 8))
    count = _positive_int(merged.get("count"), "count")
    duration = parse_duration(merged["duration"]) if merged.get("duration") is not None else None
    if count is None and duration is None:
        count = DEFAULT_COUNT
    policy = Policy.from_spec(_opt_str(merged.get("policy"), "policy") or "strict",
                              merged.get("tolerate"))
    return ProbeConfig(
        arms=tuple(arms), workload=workload, levels=levels, count=count, duration=duration,
        rate=_positive_float(merged.get("rate"), "rate"),
        ramp=_nonneg_float(merged.get("ramp"), "ramp"),
        stall_timeout=_positive_float(merged.get("stall_timeout"), "stall-timeout") or 30.0,
        timeout=_positive_float(merged.get("timeout"), "timeout") or 300.0,
        connect_timeout=_positive_float(merged.get("connect_timeout"), "connect-timeout") or 10.0,
        policy=policy,
        out=_opt_str(merged.get("out"), "out") or default_out(),
        seed=_int(merged.get("seed"), "seed") or 0,
    )


def _workload(merged: Mapping[str, Any]) -> WorkloadSpec:
    name = _opt_str(merged.get("workload"), "workload") or "small"
    body_file = _opt_str(merged.get("body_file"), "body")
    if name == "body" and body_file is not None:
        name = "small"  # a resumed --body run: the body file decides
    if name not in WORKLOADS:
        raise ConfigError(f"unknown workload {name!r} (known: {', '.join(WORKLOADS)}, or --body FILE)")
    if body_file is not None and not Path(body_file).is_file():
        raise ConfigError(f"cannot read body file {body_file}")
    effort = _opt_str(merged.get("reasoning_effort"), "reasoning-effort")
    include_usage = merged.get("include_usage", True)
    if not isinstance(include_usage, bool):
        raise ConfigError("include_usage must be true or false")
    return WorkloadSpec(
        name="body" if body_file is not None else name,
        big_bytes=_positive_int(merged.get("big_bytes"), "big-bytes") or DEFAULT_BIG_BYTES,
        body_file=body_file,
        max_tokens=_positive_int(merged.get("max_tokens"), "max-tokens"),
        reasoning_effort=effort,
        include_usage=include_usage,
        max_turns=_positive_int(merged.get("max_turns"), "max-turns") or 8,
    )


def _check_workload_fits(workload: WorkloadSpec, arms: Sequence[Arm]) -> None:
    """A ``--body`` (or an arm's own ``body``) must be in the arm's own format; the reasoning effort
    one every arm's format can express (a Messages thinking budget)."""
    for arm in arms:
        path = arm.body_file or workload.body_file
        if path is not None:
            check_request_body(load_body_file(path), arm.protocol, path=path, arm=arm.name)
    if workload.reasoning_effort is not None:
        for fmt in {format_for(a.protocol) for a in arms}:
            fmt.check_settings(BodySettings(reasoning_effort=workload.reasoning_effort,
                                        seed=0 if workload.name == "consistency" else None))
