"""What a guard proxy is told: where the upstream is, what a bad end is, and what to do about one.

Every value is checked here, once, and a bad one is a ``ConfigError`` with a one-line message naming the
flag, because the CLI shows it as is. The upstream is fixed at start: the proxy forwards to that origin
and nowhere else, so a client can never turn it into an open relay.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass, field, replace
from enum import StrEnum

from yarl import URL

from sseguard._config import parse_listen
from sseguard._config import seconds as _seconds
from sseguard._serve import parse_workers
from sseguard.core.errors import ConfigError
from sseguard.core.policy import AGENTS, GUARD_DEFAULT, Policy
from sseguard.core.verdict import Ending
from sseguard.store.retention import Retention


class OnBadEnd(StrEnum):
    """What the client gets when the upstream ends a stream badly."""

    #: A ``data: {"error": …}`` frame (the one shape the openai SDKs raise on), then a clean close
    #: without ``[DONE]``.
    ERROR_EVENT = "error-event"
    #: The connection is reset with no terminal frame: the client's HTTP layer reports an incomplete body.
    ABORT = "abort"
    #: Forwarded as it came (still checked and recorded): the proxy only observes.
    PASS = "pass"


#: A path segment that names an API version: v1, v4, v1beta, v2alpha1.
_VERSION = re.compile(r"^v\d+[a-z0-9]*$", re.IGNORECASE)
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmg]i?b?|b)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "kib": 1024, "ki": 1024,
          "m": 1000**2, "mb": 1000**2, "mib": 1024**2, "mi": 1024**2,
          "g": 1000**3, "gb": 1000**3, "gib": 1024**3, "gi": 1024**3}


def parse_size(value: str | int, flag: str = "--max-body") -> int:
    """``"16MiB"``, ``"10mb"``, ``"65536"`` → bytes."""
    if isinstance(value, int) and not isinstance(value, bool):
        size = value
    else:
        m = _SIZE.match(str(value))
        if not m:
            raise ConfigError(f"{flag} {value!r} is not a size (examples: 65536, 512KiB, 16MB)")
        size = int(float(m.group(1)) * _UNITS[(m.group(2) or "").lower()])
    if size < 1:
        raise ConfigError(f"{flag} must be at least 1 byte, not {value!r}")
    return size


def parse_share(value: str | float, flag: str) -> float:
    """``"20%"``, ``"0.2"``, ``0.2`` → 0.2: a share from 0 to 10 (1,000 %)."""
    text = str(value).strip()
    try:
        share = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise ConfigError(f"{flag} {value!r} is not a share (examples: 20%, 0.2, 0)") from None
    if not 0 <= share <= 10:
        raise ConfigError(f"{flag} {value!r}: use a share from 0 to 1000%")
    return share


def _base_url(flag: str, value: str, example: str) -> URL:
    """``value`` as an http(s) URL with a host, or the ``ConfigError`` naming ``flag`` (with an
    ``example`` of a good one)."""
    try:
        url = URL(value.strip())
    except ValueError as exc:
        raise ConfigError(f"{flag} {value!r} is not a URL: {exc}") from None
    if url.scheme not in ("http", "https") or not url.host:
        raise ConfigError(f"{flag} {value!r} must be an http:// or https:// base URL "
                          f"(example: {example})")
    return url


def parse_upstream(value: str) -> URL:
    """The upstream base URL (``http://host:port/v1``), without a trailing slash."""
    url = _base_url("--upstream", value, "http://127.0.0.1:8000/v1")
    if url.query_string or url.fragment or url.user or url.password:
        raise ConfigError(f"--upstream {value!r} must not carry a query, fragment or credentials")
    # The proxy serves /v1/<rest> and maps it onto <base>/<rest>. A base with a version segment is
    # an openai-SDK base_url (…/v1, Gemini's /v1beta/openai, Zhipu's /api/paas/v4): <rest> goes
    # right after it. A base without one is an anthropic-SDK base_url (https://api.anthropic.com, an
    # Anthropic-compatible gateway's …/anthropic), to which that SDK appends /v1/messages: so /v1.
    path = url.raw_path.rstrip("/")
    if not any(_VERSION.match(segment) for segment in path.split("/")):
        path += "/v1"
    return url.with_path(path, encoded=True)


def _repair(value: str) -> str:
    name = value.strip()
    if name in ("off", "auto"):
        return name
    from sseguard.core.toolcalls import FAMILIES, canonical

    name = canonical(name)  # an engine's name for the family (qwen3_xml, gpt-oss, …)
    if name not in FAMILIES:
        raise ConfigError(f"--repair-markup {value!r}: use off, auto or a family "
                          f"({', '.join(FAMILIES)})")
    return name


def _resume(value: str | None, repair_markup: str) -> str | None:
    """``vllm``, ``deepseek``, ``anthropic``, or one chat dialect and ``anthropic``
    (``vllm,anthropic``: one per protocol), normalised; None: off."""
    names = [n.strip() for n in (value or "off").split(",") if n.strip()]
    if not names or names == ["off"] or names == ["none"]:
        return None
    from sseguard.proxy.resume.dialects import DIALECTS

    for name in names:
        if name not in DIALECTS:
            raise ConfigError(f"--resume {value!r}: use off, or one or more of "
                              f"{', '.join(DIALECTS)} (comma-separated)")
    names = list(dict.fromkeys(names))
    protocols = [str(DIALECTS[n].api) for n in names]
    for proto in set(protocols):
        if protocols.count(proto) > 1:
            clash = " and ".join(n for n in names if str(DIALECTS[n].api) == proto)
            raise ConfigError(f"--resume {value!r}: {clash} both continue {proto} streams; "
                              "name one dialect per protocol")
    if repair_markup.strip() != "off":
        raise ConfigError("--resume cannot be combined with --repair-markup: a repaired stream "
                          "is not the text the upstream would continue")
    return ",".join(names)


def _store_ok(value: bool, dialect: str | None) -> bool:
    """``--resume-store-ok``: a dialect that stores the client's request (``dialects.ResumeDialect
    .upstream_request``) applies to a request that asked ``store: false`` too."""
    from sseguard.proxy.resume.dialects import DIALECTS

    if value and not any(n in DIALECTS and DIALECTS[n].upstream_request is not None
                         for n in (dialect or "").split(",")):
        names = ", ".join(n for n, d in DIALECTS.items() if d.upstream_request is not None)
        raise ConfigError(f"--resume-store-ok is used only by --resume {names}")
    return value


def _resume_base(value: str | None, dialect: str | None, upstream: URL) -> URL | None:
    """Where a dialect with its own base (``dialects.ResumeDialect.own_base``: DeepSeek's prefix completion,
    served only under ``/beta``) sends its continuations: ``--resume-base-url``, or by default the
    upstream's base with its version segment replaced by ``beta`` (``https://api.deepseek.com/v1`` →
    ``https://api.deepseek.com/beta``)."""
    from sseguard.proxy.resume.dialects import DIALECTS

    own = [n for n in (dialect or "").split(",") if n in DIALECTS and DIALECTS[n].own_base]
    if value is None or not value.strip():
        if not own:
            return None
        path = upstream.raw_path.rstrip("/")
        head, _, last = path.rpartition("/")
        base = head if _VERSION.match(last) else path
        return upstream.with_path(f"{base}/beta", encoded=True)
    if not own:
        names = ", ".join(n for n, d in DIALECTS.items() if d.own_base)
        raise ConfigError(f"--resume-base-url is used only by --resume {names}")
    url = _base_url("--resume-base-url", value, "https://api.deepseek.com/beta")
    if url.user or url.password:  # not echoed: the value holds a secret
        raise ConfigError("--resume-base-url must not carry credentials (the client's headers "
                          "authenticate continuations too)")
    if url.query_string or url.fragment:
        raise ConfigError(f"--resume-base-url {value!r} must not carry a query or fragment")
    return url.with_path(url.raw_path.rstrip("/"), encoded=True)


@dataclass(frozen=True, slots=True)
class ProxyConfig:
    """Everything one proxy instance needs; build it with :meth:`from_options` to get checked values."""

    upstream: URL
    host: str = "127.0.0.1"
    port: int = 8080
    #: ``agents`` by default: a finished answer that only lacks its sentinel is completed, not failed.
    policy: Policy = AGENTS
    on_bad_end: OnBadEnd = OnBadEnd.ERROR_EVENT
    #: ``--complete-done``: complete such a stream under any policy (``agents`` always does).
    complete_done: bool = False
    repair_markup: str = "off"
    stall_timeout: float = 60.0  # silence on an open stream before it counts as stalled
    timeout: float = 600.0  # waiting for the upstream's response headers (and non-stream bodies)
    connect_timeout: float = 10.0
    max_body: int = 32 * 1024 * 1024
    store: str | None = "sseguard.db"
    #: Extra exact strings removed from stored evidence (keys with no recognisable shape).
    secrets: tuple[str, ...] = ()
    arm: str = ""  # the records' arm; the upstream's host:port when empty
    run_id: str = field(default_factory=lambda: f"proxy-{secrets.token_hex(4)}")
    #: Processes serving the port (``--workers``), and which of them this one is: the records of one
    #: run are numbered worker, worker + workers, … so that the workers never reuse an index.
    workers: int = 1
    worker: int = 0
    #: ``--retry``: upstream attempts after the first while no body byte has reached the client.
    retry: int = 2
    #: ``--retry-max-wait``: the longest wait before a retry; a ``Retry-After`` beyond it is not waited.
    retry_max_wait: float = 10.0
    #: ``--retry-budget``: the share retries may add to the upstream requests of the last 10 s.
    retry_budget: float = 0.2
    #: ``--resume``: the continuation dialect of the upstream (None: off), and continuations per stream.
    resume: str | None = None
    resume_max: int = 2
    #: ``--resume-base-url``: the base continuations go to with ``--resume deepseek`` (its beta API).
    resume_base_url: URL | None = None
    #: ``--resume-store-ok``: ``--resume openai-background`` also stores (and so can continue) a
    #: request whose client asked ``store: false``.
    resume_store_ok: bool = False
    #: Store retention and sampling of healthy streams (``--retain``, ``--retain-healthy``,
    #: ``--sample-healthy``); see ``sseguard.store.retention``.
    retention: Retention = field(default_factory=Retention)
    #: ``--otel``: a span per stream and the GenAI metrics, exported as the ``OTEL_*`` variables say.
    otel: bool = False

    @classmethod
    def from_options(cls, *, upstream: str, listen: str = "127.0.0.1:8080", policy: str = GUARD_DEFAULT,
                     tolerate: str | None = None, on_bad_end: str = "error-event",
                     complete_done: bool = False, repair_markup: str = "off",
                     stall_timeout: float = 60.0, timeout: float = 600.0,
                     max_body: str | int = 32 * 1024 * 1024, store: str | None = "sseguard.db",
                     secrets: tuple[str, ...] = (), arm: str = "",
                     workers: str | int = 1, retain: str | None = None,
                     retain_healthy: str | None = None,
                     sample_healthy: float | None = None, retry: int = 2,
                     retry_max_wait: float = 10.0, resume: str | None = None,
                     resume_max: int = 2, resume_base_url: str | None = None,
                     retry_budget: str | float = 0.2,
                     resume_store_ok: bool = False, otel: bool = False) -> ProxyConfig:
        """Check every option as a person typed it; raise ``ConfigError`` naming the bad flag."""
        host, port = parse_listen(listen)
        try:
            mode = OnBadEnd(on_bad_end.strip())
        except ValueError:
            raise ConfigError(f"--on-bad-end {on_bad_end!r}: use "
                              f"{', '.join(m.value for m in OnBadEnd)}") from None
        if isinstance(retry, bool) or not isinstance(retry, int) or not 0 <= retry <= 20:
            raise ConfigError(f"--retry {retry!r}: use a whole number from 0 to 20")
        if isinstance(resume_max, bool) or not isinstance(resume_max, int) or not 0 <= resume_max <= 20:
            raise ConfigError(f"--resume-max {resume_max!r}: use a whole number from 0 to 20")
        dialect = _resume(resume, repair_markup)
        base = parse_upstream(upstream)
        store_url = None if store is None or store.strip().lower() in ("", "none", "off") else store
        return cls(
            upstream=base, host=host, port=port,
            policy=Policy.from_spec(policy, tolerate), on_bad_end=mode,
            complete_done=complete_done, repair_markup=_repair(repair_markup),
            stall_timeout=_seconds(stall_timeout, "--stall-timeout"),
            timeout=_seconds(timeout, "--timeout"), max_body=parse_size(max_body),
            store=store_url, secrets=tuple(s for s in secrets if s), arm=arm,
            workers=parse_workers(workers),
            retention=Retention.from_options(retain, retain_healthy, sample_healthy), retry=retry,
            retry_max_wait=_seconds(retry_max_wait, "--retry-max-wait"), resume=dialect,
            resume_max=resume_max, resume_base_url=_resume_base(resume_base_url, dialect, base),
            retry_budget=parse_share(retry_budget, "--retry-budget"),
            resume_store_ok=_store_ok(resume_store_ok, dialect), otel=otel,
        )

    @property
    def retries_off(self) -> bool:
        """The proxy makes no retries of its own (``--retry 0`` or ``--retry-budget 0``): its error
        answers then tell a client whose retry can help to make it (``x-should-retry: true``)."""
        return self.retry == 0 or self.retry_budget == 0

    @property
    def effective_policy(self) -> Policy:
        """The policy the proxy acts on: ``--complete-done`` makes a missing ``[DONE]`` repairable.

        Its ``complete`` says whether a passing ``no_done`` stream gets its sentinel: under ``agents``
        (the default) and with ``--complete-done``.
        """
        policy = self.policy
        if not self.complete_done or policy.complete:
            return policy
        if Ending.NO_DONE in policy.tolerate:
            return replace(policy, complete=True)
        return Policy(name=f"{policy.name}+complete-done", tolerate=policy.tolerate | {Ending.NO_DONE},
                      complete=True)

    @property
    def arm_name(self) -> str:
        if self.arm:
            return self.arm
        return f"{self.upstream.host}:{self.upstream.port}"

    @property
    def listen_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"
