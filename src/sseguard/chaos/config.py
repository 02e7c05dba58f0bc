"""What a chaos upstream does: pacing, fault probabilities, dialects, raw markup, fault patterns.

Built from a TOML file (``--config chaos.toml``), from CLI flags (``--fault truncated=0.07``), or in code.
Every bad value is a ``ConfigError`` with a one-line message naming the key, because the CLI shows it
as is. The TOML layout is documented in ``docs/chaos.md`` and ``examples/chaos.toml``.
"""

from __future__ import annotations

import bisect
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, overload

from sseguard._config import integer as _integer
from sseguard._config import number as _number
from sseguard._config import probability as _probability
from sseguard._config import string as _string
from sseguard.chaos.faults import Fault, ServerDialect
from sseguard.core.contract import protocols
from sseguard.core.errors import ConfigError
from sseguard.core.toolcalls import Family, canonical, families

#: The protocols an ``ApiPattern`` can single out (the protocol registry's names).
API_NAMES = tuple(str(p.api) for p in protocols())

#: The error endings a Responses stream can get (``FaultOptions.responses_error_form``).
RESPONSES_ERROR_FORMS = ("flat", "nested", "failed", "any")


def _known(values: Iterable[str]) -> str:
    return ", ".join(values)


def parse_fault_name(name: str) -> Fault:
    try:
        return Fault(name.strip())
    except ValueError:
        raise ConfigError(f"unknown fault {name.strip()!r} (known: {_known(Fault)})") from None


def parse_dialect(name: str) -> ServerDialect:
    try:
        return ServerDialect(name.strip())
    except ValueError:
        raise ConfigError(f"unknown dialect {name.strip()!r} (known: {_known(ServerDialect)})") from None


class _FamilyNames(Sequence[str]):
    """Names of the registered markup families (``sseguard.core.toolcalls.families()``, plugins included)
    that ``keep`` selects, read from the registry when first used."""

    def __init__(self, keep: Callable[[Family], bool]) -> None:
        self._keep = keep

    def _names(self) -> list[str]:
        return [name for name, fam in families().items() if self._keep(fam)]

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...
    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        return self._names()[index]

    def __len__(self) -> int:
        return len(self._names())


#: Tool-call markup families the server can leave raw in ``content``: every registered one.
MARKUP_FAMILIES: Sequence[str] = _FamilyNames(lambda fam: True)
#: The families whose markup the ``malformed_closing_tag`` fault can break in their own format; the
#: others get a DSML V3.2 block with the misspelled closer instead.
MALFORMABLE: Sequence[str] = _FamilyNames(lambda fam: fam.malformable)


def parse_family(name: str) -> str:
    """The family ``name`` means (an engine's alias included), or one line listing the known."""
    if canonical(name) not in families():
        raise ConfigError(f"unknown markup family {name!r} (known: {_known(families())})")
    return canonical(name)


def parse_fault_spec(spec: str) -> tuple[Fault, float]:
    """``truncated=0.07`` → ``(Fault.TRUNCATED, 0.07)``; a bare name means probability 1."""
    name, sep, raw = spec.partition("=")
    fault = parse_fault_name(name)
    if not sep:
        return fault, 1.0
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"--fault {spec!r}: probability {raw!r} is not a number") from None
    return fault, _probability(value, f"--fault {name.strip()}")


@dataclass(frozen=True, slots=True)
class Pacing:
    """Chunk timing and answer length. ``tokens`` is the number of content chunks per answer."""

    ttft_ms: float = 0.0  # from the response headers to the first chunk
    inter_token_ms: float = 0.0  # between content chunks
    tokens: int = 32
    reasoning_tokens: int = 8  # reasoning chunks per answer when reasoning_effort asks for it


@dataclass(frozen=True, slots=True)
class FaultOptions:
    """How the faults that need a parameter behave."""

    stall_ms: float = 30_000.0  # silence of a `stalled` response
    stall_then: str = "finish"  # finish: resume and complete; hang: stay silent until the client leaves
    hang_max_s: float = 300.0  # a hanging response is reset after this long, whatever the client does
    http_statuses: tuple[int, ...] = (429, 500, 503)
    error_event_form: str = "both"  # data: `data: {"error": …}`; event: `event: error`; both
    # Responses: flat `error` event, nested `error: {…}`, `response.failed`, or any (seeded).
    responses_error_form: str = "any"
    # `garbled` on a relayed answer (`chaos --upstream`): characters kept intact, then overwritten.
    garble_after: int = 8
    garble_span: int = 24


@dataclass(frozen=True, slots=True)
class LoadPattern:
    """Fault probability as a function of the streams in flight (this one included).

    Piecewise linear through ``points`` ((in_flight, probability), sorted), flat outside them: the
    "0 % at 1 session, 18 % at 60" shape of real engine bugs.
    """

    fault: Fault
    points: tuple[tuple[float, float], ...]

    def probability(self, inflight: int) -> float:
        xs = [x for x, _ in self.points]
        i = bisect.bisect_right(xs, inflight)
        if i == 0:
            return self.points[0][1]
        if i == len(self.points):
            return self.points[-1][1]
        (x0, p0), (x1, p1) = self.points[i - 1], self.points[i]
        return p0 + (p1 - p0) * (inflight - x0) / (x1 - x0)


@dataclass(frozen=True, slots=True)
class RoutedPattern:
    """A ``share`` of responses takes another route (ids start with ``prefix``); only it fails."""

    fault: Fault
    share: float
    prefix: str = "gw-"
    probability: float = 1.0

    @property
    def route(self) -> str:
        return self.prefix.rstrip("-_:.") or self.prefix


@dataclass(frozen=True, slots=True)
class WindowPattern:
    """Faults only between ``start_s`` and ``end_s`` seconds after the server started."""

    fault: Fault
    start_s: float
    end_s: float
    probability: float = 1.0

    def active(self, elapsed_s: float) -> bool:
        return self.start_s <= elapsed_s < self.end_s


@dataclass(frozen=True, slots=True)
class ApiPattern:
    """Faults only on one protocol's path (``chat``, ``responses``, ``messages``): a gateway that serves
    an OpenAI and an Anthropic path side by side and breaks on one of them only."""

    fault: Fault
    api: str
    probability: float = 1.0

    def __post_init__(self) -> None:
        if self.api not in API_NAMES:
            raise ConfigError(f"unknown api {self.api!r} (known: {_known(API_NAMES)})")


@dataclass(frozen=True, slots=True)
class CachePattern:
    """The incident's pattern (issue 39): a fault only when the request hits the prefix cache (its
    prompt starts with a prefix served before, ``chaos.cache``) and only above ``above`` streams in
    flight — a missing synchronisation in a hierarchical KV cache, seen only under load."""

    fault: Fault
    above: int
    probability: float = 1.0

    def p(self, *, cached: bool, inflight: int) -> float:
        return self.probability if cached and inflight > self.above else 0.0


Pattern = LoadPattern | RoutedPattern | WindowPattern | ApiPattern | CachePattern


@dataclass(frozen=True, slots=True)
class ChaosConfig:
    """Everything a chaos server does; the defaults are a healthy, instant server."""

    seed: int = 0
    model: str = "chaos-1"
    id_prefix: str = "chatcmpl-"
    pacing: Pacing = field(default_factory=Pacing)
    faults: Mapping[Fault, float] = field(default_factory=dict)
    options: FaultOptions = field(default_factory=FaultOptions)
    dialects: frozenset[ServerDialect] = frozenset()
    raw_markup: str | None = None  # a MARKUP_FAMILIES name: tool calls left as markup in content
    patterns: tuple[Pattern, ...] = ()
    #: Break each conversation's first answer with this fault and nothing else (``first_answer``,
    #: ``chaos.conversations``): the draw (faults, patterns) is not made while it is set.
    first_answer: Fault | None = None

    def __post_init__(self) -> None:
        total = 0.0
        for fault, p in self.faults.items():
            _probability(p, f"fault {fault}")
            total += p
        if total > 1.0 + 1e-9:
            raise ConfigError(f"fault probabilities add up to {total:g}, more than 1")
        shares = sum(p.share for p in self.patterns if isinstance(p, RoutedPattern))
        if shares > 1.0 + 1e-9:
            raise ConfigError(f"routed shares add up to {shares:g}, more than 1")
        if self.raw_markup is not None:  # an engine's alias names its family from here on
            object.__setattr__(self, "raw_markup", parse_family(self.raw_markup))

    @property
    def routes(self) -> tuple[RoutedPattern, ...]:
        return tuple(p for p in self.patterns if isinstance(p, RoutedPattern))

    def with_overrides(self, *, seed: int | None = None, faults: Iterable[str] = (),
                       dialects: Iterable[str] = (), raw_markup: str | None = None,
                       ttft_ms: float | None = None, inter_token_ms: float | None = None,
                       tokens: int | None = None, stall_ms: float | None = None,
                       stall_then: str | None = None, model: str | None = None,
                       first_answer: str | None = None,
                       garble_cached: float | None = None) -> ChaosConfig:
        """Apply CLI flags on top of this (file) configuration; flags win, ``--fault`` entries merge.

        ``garble_cached``: garble this share of the answers to prompts the cache serves (a cache
        pattern, first among the patterns)."""
        merged = dict(self.faults)
        for spec in faults:
            fault, p = parse_fault_spec(spec)
            merged[fault] = p
        pacing = self.pacing
        if ttft_ms is not None:
            pacing = replace(pacing, ttft_ms=_number(ttft_ms, "--ttft-ms"))
        if inter_token_ms is not None:
            pacing = replace(pacing, inter_token_ms=_number(inter_token_ms, "--inter-token-ms"))
        if tokens is not None:
            pacing = replace(pacing, tokens=_integer(tokens, "--tokens", minimum=1))
        options = self.options
        if stall_ms is not None:
            options = replace(options, stall_ms=_number(stall_ms, "--stall-ms"))
        if stall_then is not None:
            options = replace(options, stall_then=_choice(stall_then, "--stall-then",
                                                          ("finish", "hang")))
        patterns = self.patterns
        if garble_cached is not None:
            patterns = (CachePattern(Fault.GARBLED, above=0,
                                     probability=_probability(garble_cached, "--garble-cached")),
                        *patterns)
        return replace(
            self,
            patterns=patterns,
            seed=self.seed if seed is None else seed,
            model=self.model if model is None else model,
            faults=merged,
            pacing=pacing,
            options=options,
            dialects=self.dialects | {parse_dialect(d) for d in dialects},
            raw_markup=self.raw_markup if raw_markup is None else parse_family(raw_markup),
            first_answer=(self.first_answer if first_answer is None
                          else parse_fault_name(first_answer)),
        )

    @classmethod
    def from_toml(cls, path: str | Path) -> ChaosConfig:
        """Read a TOML file; unreadable or invalid files are a ``ConfigError`` naming the file."""
        p = Path(path)
        try:
            data = tomllib.loads(p.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"cannot read {p}: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise ConfigError(f"{p} is not UTF-8 text") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{p} is not valid TOML: {exc}") from None
        try:
            return cls.from_mapping(data)
        except ConfigError as exc:
            raise ConfigError(f"{p}: {exc}") from None

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> ChaosConfig:
        """Build from the TOML layout (a dict); unknown keys are errors, so typos are not ignored."""
        _only(data, {"seed", "model", "id_prefix", "pacing", "faults", "fault_options", "dialects",
                     "raw_markup", "patterns", "first_answer"}, "the top level")
        pacing = Pacing(**_table(data, "pacing", {
            "ttft_ms": lambda v, w: _number(v, w),
            "inter_token_ms": lambda v, w: _number(v, w),
            "tokens": lambda v, w: _integer(v, w, minimum=1),
            "reasoning_tokens": lambda v, w: _integer(v, w, minimum=0),
        }))
        options = FaultOptions(**_table(data, "fault_options", {
            "stall_ms": lambda v, w: _number(v, w),
            "stall_then": lambda v, w: _choice(v, w, ("finish", "hang")),
            "hang_max_s": lambda v, w: _number(v, w),
            "http_statuses": _statuses,
            "error_event_form": lambda v, w: _choice(v, w, ("data", "event", "both")),
            "responses_error_form": lambda v, w: _choice(v, w, RESPONSES_ERROR_FORMS),
            "garble_after": lambda v, w: _integer(v, w, minimum=0),
            "garble_span": lambda v, w: _integer(v, w, minimum=1),
        }))
        faults_raw = data.get("faults", {})
        if not isinstance(faults_raw, dict):
            raise ConfigError("[faults] must be a table of name = probability")
        faults = {parse_fault_name(k): _probability(v, f"faults.{k}")
                  for k, v in faults_raw.items()}
        dialects_raw = data.get("dialects", [])
        if not isinstance(dialects_raw, list):
            raise ConfigError("dialects must be a list of names")
        patterns_raw = data.get("patterns", [])
        if not isinstance(patterns_raw, list):
            raise ConfigError("patterns must be an array of tables ([[patterns]])")
        raw_markup = data.get("raw_markup")
        return cls(
            seed=_integer(data.get("seed", 0), "seed"),
            model=_string(data.get("model", "chaos-1"), "model"),
            id_prefix=_string(data.get("id_prefix", "chatcmpl-"), "id_prefix"),
            pacing=pacing,
            faults=faults,
            options=options,
            dialects=frozenset(parse_dialect(_string(d, "dialects[]")) for d in dialects_raw),
            raw_markup=None if raw_markup is None else parse_family(_string(raw_markup,
                                                                            "raw_markup")),
            patterns=tuple(parse_pattern(p, i) for i, p in enumerate(patterns_raw)),
            first_answer=(None if data.get("first_answer") is None else parse_fault_name(
                _string(data["first_answer"], "first_answer"))),
        )


def _only(data: Mapping[str, Any], allowed: set[str], where: str) -> None:
    for key in data:
        if key not in allowed:
            raise ConfigError(f"unknown key {key!r} in {where} (known: {_known(sorted(allowed))})")


def _table(data: Mapping[str, Any], name: str, fields: dict[str, Any]) -> dict[str, Any]:
    table = data.get(name, {})
    if not isinstance(table, dict):
        raise ConfigError(f"[{name}] must be a table")
    _only(table, set(fields), f"[{name}]")
    return {k: fields[k](v, f"{name}.{k}") for k, v in table.items()}


def _choice(value: Any, where: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ConfigError(f"{where} must be one of {_known(choices)}, not {value!r}")
    return str(value)


def _statuses(value: Any, where: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not value:
        raise ConfigError(f"{where} must be a non-empty list of HTTP status codes")
    out = []
    for v in value:
        status = _integer(v, where)
        if not 400 <= status <= 599:
            raise ConfigError(f"{where}: {status} is not an HTTP error status (400-599)")
        out.append(status)
    return tuple(out)


def parse_pattern(data: Any, index: int = 0) -> Pattern:
    """One ``[[patterns]]`` table: ``type`` is load, routed, window, api or cache."""
    where = f"patterns[{index}]"
    if not isinstance(data, dict):
        raise ConfigError(f"{where} must be a table")
    kind = data.get("type")
    if "fault" not in data:
        raise ConfigError(f"{where} needs a fault")
    fault = parse_fault_name(_string(data["fault"], f"{where}.fault"))
    if kind == "load":
        _only(data, {"type", "fault", "points", "slope", "cap"}, where)
        return LoadPattern(fault, _load_points(data, where))
    if kind == "routed":
        _only(data, {"type", "fault", "share", "prefix", "probability"}, where)
        if "share" not in data:
            raise ConfigError(f"{where} (routed) needs a share")
        prefix = _string(data.get("prefix", "gw-"), f"{where}.prefix")
        if not prefix:
            raise ConfigError(f"{where}.prefix must not be empty")
        return RoutedPattern(fault, _probability(data["share"], f"{where}.share"), prefix,
                             _probability(data.get("probability", 1.0), f"{where}.probability"))
    if kind == "window":
        _only(data, {"type", "fault", "start_s", "end_s", "probability"}, where)
        start = _number(data.get("start_s", 0.0), f"{where}.start_s")
        if "end_s" not in data:
            raise ConfigError(f"{where} (window) needs end_s")
        end = _number(data["end_s"], f"{where}.end_s")
        if end <= start:
            raise ConfigError(f"{where}: end_s ({end:g}) must be after start_s ({start:g})")
        return WindowPattern(fault, start, end,
                             _probability(data.get("probability", 1.0), f"{where}.probability"))
    if kind == "api":
        _only(data, {"type", "fault", "api", "probability"}, where)
        if "api" not in data:
            raise ConfigError(f"{where} (api) needs an api")
        api = _string(data["api"], f"{where}.api")
        if api not in API_NAMES:
            raise ConfigError(f"{where}.api must be one of {_known(API_NAMES)}, not {api!r}")
        return ApiPattern(fault, api, _probability(data.get("probability", 1.0),
                                                   f"{where}.probability"))
    if kind == "cache":
        _only(data, {"type", "fault", "above", "probability"}, where)
        return CachePattern(fault, _integer(data.get("above", 0), f"{where}.above", minimum=0),
                            _probability(data.get("probability", 1.0), f"{where}.probability"))
    raise ConfigError(f"{where}.type must be one of load, routed, window, api, cache, not {kind!r}")


def _load_points(data: Mapping[str, Any], where: str) -> tuple[tuple[float, float], ...]:
    if "points" in data:
        if "slope" in data or "cap" in data:
            raise ConfigError(f"{where}: give either points or slope/cap, not both")
        raw = data["points"]
        if not isinstance(raw, list) or not raw:
            raise ConfigError(f"{where}.points must be a list of [in_flight, probability] pairs")
        points = []
        for pair in raw:
            if not isinstance(pair, list) or len(pair) != 2:
                raise ConfigError(f"{where}.points: {pair!r} is not an [in_flight, probability] pair")
            points.append((_number(pair[0], f"{where}.points", minimum=0),
                           _probability(pair[1], f"{where}.points")))
        points.sort()
        if len({x for x, _ in points}) != len(points):
            raise ConfigError(f"{where}.points has two probabilities for the same in-flight count")
        return tuple(points)
    if "slope" not in data:
        raise ConfigError(f"{where} (load) needs points or slope")
    return slope_points(_number(data["slope"], f"{where}.slope"),
                        _probability(data.get("cap", 1.0), f"{where}.cap"))


def slope_points(slope: float, cap: float = 1.0) -> tuple[tuple[float, float], ...]:
    """``p = min(cap, slope · max(0, in_flight − 1))`` as points of a ``LoadPattern``."""
    if slope <= 0 or cap == 0:
        return ((1.0, 0.0),)
    return ((1.0, 0.0), (1.0 + cap / slope, cap))
