"""Read records from wherever a run left them: JSONL files, directories of them, or a record store.

Locust workers and sharded probes each write their own JSONL file, so a directory means "every
``*.jsonl`` in it, merged". A proxy fleet writes to a store instead (SQLite or PostgreSQL), read through
``sseguard.store``, imported only when a store is named so that reading a file never loads a database
driver. Any unreadable source or malformed line is a one-line ``ConfigError`` naming the file and line:
an analysis that silently skipped records would report rates over the wrong denominator.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import msgspec

from sseguard.core.errors import ConfigError
from sseguard.core.record import SCHEMA_VERSION, Record

_decoder = msgspec.json.Decoder(Record)
_STORE_SUFFIXES = (".db", ".sqlite", ".sqlite3")
_STORE_SCHEMES = ("sqlite://", "postgresql://", "postgres://")
_PASSWORD_IN_URL = re.compile(r"(://[^:/@\s]*:)[^@/\s]*@")


def load_records(sources: list[str]) -> list[Record]:
    """All records of every source, in the order given (files of a directory sorted by name)."""
    if not sources:
        raise ConfigError("no source given (a results .jsonl file, a directory of them, or a store)")
    records: list[Record] = []
    for source in sources:
        if is_store_source(source):
            records.extend(_read_store(source))
        elif source == "-":
            records.extend(_parse_lines(sys.stdin.buffer.read(), "<stdin>"))
        else:
            path = Path(source)
            if path.is_dir():
                files = sorted(p for p in path.glob("*.jsonl") if p.is_file())
                if not files:
                    raise ConfigError(f"no *.jsonl files in directory {source}")
                for file in files:
                    records.extend(_read_jsonl(file))
            else:
                records.extend(_read_jsonl(path))
    return records


def is_store_source(source: str) -> bool:
    """A store URL, or a path that names a SQLite database by its suffix."""
    return source.startswith(_STORE_SCHEMES) or source.lower().endswith(_STORE_SUFFIXES)


def _read_jsonl(path: Path) -> list[Record]:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    return _parse_lines(data, str(path))


def _parse_lines(data: bytes, name: str) -> list[Record]:
    out: list[Record] = []
    lines = data.split(b"\n")
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = _decoder.decode(line)
        except msgspec.DecodeError as exc:
            hint = ""
            if number == len(lines) and not data.endswith(b"\n"):
                hint = " (the last line is incomplete: was the writer killed mid-line?)"
            raise ConfigError(f"{name}:{number}: not a valid record: {_one_line(exc)}{hint}") from None
        if record.schema > SCHEMA_VERSION:
            raise ConfigError(f"{name}:{number}: record schema {record.schema} is newer than this "
                              f"sseguard reads ({SCHEMA_VERSION}); upgrade sseguard")
        out.append(record)
    return out


def _read_store(source: str) -> list[Record]:
    shown = _PASSWORD_IN_URL.sub(r"\1***@", source)
    local = _local_sqlite_path(source)
    # Opening a SQLite store creates the file: a typo must be an error, not an empty analysis.
    if local is not None and not local.is_file():
        raise ConfigError(f"cannot read store {shown}: no such file {local}")
    try:
        from sseguard.store import open_store
    except ImportError as exc:
        raise ConfigError(f"cannot read store {shown}: store support is not available ({exc})") from None
    try:
        store = open_store(source)
    except ConfigError:
        raise
    except Exception as exc:  # a driver's own error type: reported as one line, never a traceback
        raise ConfigError(f"cannot open store {shown}: {_one_line(exc)}") from None
    try:
        return list(store.read())
    except ConfigError:
        raise
    except Exception as exc:
        raise ConfigError(f"cannot read store {shown}: {_one_line(exc)}") from None
    finally:
        store.close()


def _local_sqlite_path(source: str) -> Path | None:
    if source.startswith(("postgresql://", "postgres://")):
        return None
    if source.startswith("sqlite://"):
        rest = source.removeprefix("sqlite://")
        # sqlite:///relative.db and sqlite:////absolute.db; anything else open_store rejects itself.
        return Path(rest[1:]) if rest.startswith("/") and rest != "/" else None
    return Path(source)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__
