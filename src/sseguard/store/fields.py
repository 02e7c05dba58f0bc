"""The facts of a record that the analysis counts, defined once: stored as columns, read as columns.

``sseguard analyze`` counts records per attribute value (``analyze.facts``). Read out of each record's
JSON, ten million records cost a JSON parse each, in SQLite one ``json_extract`` per field per record.
So the store writes these facts as plain columns next to the JSON, derived from the ``Record`` it is
given, and the analysis scans those narrow columns instead. ``FACT_COLUMNS`` is the one list: the
stores' DDL and INSERTs, and the analysis's facts relation (``analyze.facts.FACTS``), come from it.

The values are the facts relation's, not the raw fields: ``pfx`` is the response-id prefix the analysis
uses (the recorded ``id_prefix``, else ``record.id_prefix`` of the id), ``sep`` the character after it
in the id, ``kinds`` the finding kinds joined with commas (NULL without findings), ``headers`` the
response headers as JSON text. The ids themselves (one distinct value per record) are not columns.
This module imports no database driver: the core may not, and the stores and the analysis both can.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import msgspec

from sseguard.core.record import Record, id_prefix

_encode = msgspec.json.Encoder().encode


@dataclass(frozen=True, slots=True)
class FactColumn:
    """One counted fact: its column name and types, and how the store derives it from a record."""

    name: str
    sqlite: str
    postgres: str
    of: Callable[[Record], object]


def prefix_of(record: Record) -> str | None:
    """The response-id prefix the analysis ranks (``facts.with_prefix`` computes the same in SQL)."""
    return record.id_prefix or id_prefix(record.response_id)


def sep_of(record: Record) -> str | None:
    """The character after the prefix in the id (``-`` of ``gw-17``), how the report writes the prefix."""
    pfx, rid = prefix_of(record), record.response_id
    if pfx is None or rid is None or len(rid) <= len(pfx) or not rid.startswith(pfx):
        return None
    return rid[len(pfx)]


def kinds_of(record: Record) -> str | None:
    kinds = [str(k) for f in record.findings if (k := f.get("kind")) is not None]
    return ",".join(kinds) if kinds else None


def unknown_of(record: Record) -> str | None:
    """The event, block and delta kinds the checker did not know (``Record.unknown_kinds``), joined
    with commas like ``kinds`` (NULL without any): counted by ``analyze``, never judged."""
    return ",".join(record.unknown_kinds) if record.unknown_kinds else None


def headers_of(record: Record) -> str:
    return _encode(record.headers).decode("utf-8")


#: Beyond the columns every store version has (run_id, arm, ending, started_at, weight): the facts the
#: analysis counts, in the facts relation's names. Schema 2 of the store added them.
FACT_COLUMNS: tuple[FactColumn, ...] = (
    FactColumn("schema", "INTEGER", "BIGINT", lambda r: r.schema),
    FactColumn("idx", "INTEGER", "BIGINT", lambda r: r.index),
    FactColumn("api", "TEXT", "TEXT", lambda r: r.api),
    FactColumn("workload", "TEXT", "TEXT", lambda r: r.workload),
    FactColumn("concurrency", "INTEGER", "BIGINT", lambda r: r.concurrency),
    FactColumn("kinds", "TEXT", "TEXT", kinds_of),
    FactColumn("pfx", "TEXT", "TEXT", prefix_of),
    FactColumn("sep", "TEXT", "TEXT", sep_of),
    FactColumn("reuse_index", "INTEGER", "BIGINT", lambda r: r.reuse_index),
    FactColumn("prompt_bytes", "INTEGER", "BIGINT", lambda r: r.prompt_bytes),
    FactColumn("headers", "TEXT", "JSONB", headers_of),
    FactColumn("heal_of", "INTEGER", "BIGINT", lambda r: r.heal_of),
    FactColumn("healed", "TEXT", "TEXT", lambda r: r.healed),
    FactColumn("heal_attempts", "INTEGER", "BIGINT", lambda r: r.heal_attempts),
    FactColumn("heal_tokens", "INTEGER", "BIGINT", lambda r: r.heal_tokens),
    # Schema 3: what the server said about its cache, and the consistency workload's comparison.
    FactColumn("prompt_tokens", "INTEGER", "BIGINT", lambda r: r.prompt_tokens),
    FactColumn("cached_tokens", "INTEGER", "BIGINT", lambda r: r.cached_tokens),
    FactColumn("consistency", "TEXT", "TEXT", lambda r: r.consistency),
    FactColumn("diverged_token", "INTEGER", "BIGINT", lambda r: r.diverged_token),
    # Schema 4: the kinds the protocol's tables did not know (issue 41).
    FactColumn("unknown_kinds", "TEXT", "TEXT", unknown_of),
)
#: The cache and consistency facts (schema 3), last in the facts relation: NULL where not reported.
CACHE_FACTS = ("prompt_tokens", "cached_tokens", "consistency", "diverged_token")
#: The unknown kinds (schema 4), last in the facts relation. Unlike the cache facts, records written
#: before the column existed may carry them: a store's older rows are read for them from their JSON.
UNKNOWN_FACT = "unknown_kinds"
#: The columns every version of the store has, which the facts relation reads as they are.
BASE_COLUMNS = ("run_id", "arm", "ending", "started_at", "weight")
#: The facts relation's columns, in order: what every source presents to the counting queries.
FACTS = ("schema", "run_id", "idx", "started_at", "arm", "api", "workload", "concurrency", "ending",
         "kinds", "pfx", "sep", "reuse_index", "prompt_bytes", "headers", "weight", *CACHE_FACTS,
         UNKNOWN_FACT)
#: The heal fields, which a store's facts relation carries too (``analyze.healing`` reads them there;
#: files are read for them apart, as Parquet exported before they existed lacks them).
HEAL_FACTS = ("heal_of", "healed", "heal_attempts", "heal_tokens")
assert set(FACTS) | set(HEAL_FACTS) == {c.name for c in FACT_COLUMNS} | set(BASE_COLUMNS), \
    "the facts relation and the stored columns differ"


def fact_values(record: Record) -> tuple[object, ...]:
    """The record's ``FACT_COLUMNS`` values, in order."""
    return tuple(c.of(record) for c in FACT_COLUMNS)
