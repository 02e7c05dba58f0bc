"""A prototype of one count written in Ibis instead of the SQL text of ``analyze/facts.py``: what Ibis
compiles it to for DuckDB, Spark, SQLite and PostgreSQL, and whether DuckDB's answer through Ibis equals
ours. Not part of sseguard (Ibis is not a dependency); run it in a virtualenv of its own:

    python3 -m venv /tmp/ibis && /tmp/ibis/bin/pip install ibis-framework duckdb msgspec
    PYTHONPATH=src /tmp/ibis/bin/python bench/ibis_prototype.py RESULTS.jsonl

The count: weighted records per (arm, ending, id prefix, reuse bucket, value of the ``server`` header),
the prefix and bucket defined as in ``facts.py``. Prints the import time, the SQL per dialect (or the
compiler's error), and the comparison with ``cells_query`` on the same file.
"""

from __future__ import annotations

import sys
import time

t0 = time.perf_counter()
import ibis  # noqa: E402
import ibis.expr.datatypes as dt  # noqa: E402

IMPORT_S = time.perf_counter() - t0

SCHEMA = ibis.schema({"arm": "string", "ending": "string", "id_prefix": "string", "response_id": "string",
                      "reuse_index": "int64", "headers": dt.Map(dt.string, dt.string), "weight": "int64"})
REUSE_EDGES = (2, 4, 8, 16, 32, 64, 128)  # log2 buckets from 1, as facts.bucket_edges(2, 1) begins


def count(t: ibis.Table) -> ibis.Table:
    letters = t.response_id.re_extract(r"^[A-Za-z]+", 0).nullif("")
    numeric = t.response_id.re_search(r"^[0-9]+$")
    derived = (ibis.cases((t.response_id.isnull() | (t.response_id == ""), ibis.null("string")),
                          (numeric, "numeric"), else_=letters.fill_null("other")))
    pfx = t.id_prefix.nullif("").fill_null(derived)
    reuse = ibis.cases(*((t.reuse_index < edge, b) for b, edge in enumerate((1, *REUSE_EDGES))),
                       else_=len(REUSE_EDGES) + 1)
    server = ibis.cases((t.headers.isnull() | (t.headers.length() == 0), ibis.null("string")),
                        else_=t.headers.get("server").fill_null("(absent)"))
    labelled = t.mutate(pfx=pfx, reuse=reuse, server=server, weight=t.weight.fill_null(1))
    return labelled.group_by(["arm", "ending", "pfx", "reuse", "server"]).aggregate(w=labelled.weight.sum())


def main() -> None:
    expr = count(ibis.table(SCHEMA, name="facts"))
    print(f"import ibis: {IMPORT_S:.2f} s")
    for dialect in ("duckdb", "pyspark", "sqlite", "postgres"):
        try:
            sql = ibis.to_sql(expr, dialect=dialect)
            print(f"--- {dialect}: {len(str(sql))} characters\n{sql}\n")
        except Exception as exc:  # an operation the dialect's compiler does not support
            print(f"--- {dialect}: cannot compile: {type(exc).__name__}: {exc}\n")
    if len(sys.argv) > 1:
        compare(sys.argv[1])


def compare(path: str) -> None:
    import duckdb

    from sseguard.analyze.sources import RECORD_COLUMNS
    columns = {n: k for n, k in RECORD_COLUMNS if n in SCHEMA.names}
    con = ibis.duckdb.connect()
    raw = con.read_json(path, format="newline_delimited", columns=columns)
    t1 = time.perf_counter()
    by_ibis = {}
    for row in count(raw).to_pyarrow().to_pylist():
        values = tuple(row.values())
        by_ibis[values[:-1]] = int(values[-1])
    t2 = time.perf_counter()
    db = duckdb.connect()
    listed = ", ".join(f"'{n}': '{k}'" for n, k in columns.items())
    rows = db.execute(f"""
        SELECT arm, ending, pfx, reuse, server, SUM(COALESCE(weight, 1)) FROM (
          SELECT arm, ending, weight,
                 COALESCE(NULLIF(id_prefix, ''), CASE WHEN response_id IS NULL OR response_id = '' THEN NULL
                   WHEN regexp_matches(response_id, '^[0-9]+$') THEN 'numeric'
                   ELSE COALESCE(NULLIF(regexp_extract(response_id, '^[A-Za-z]+', 0), ''), 'other')
                   END) AS pfx,
                 CASE {' '.join(f'WHEN reuse_index < {e} THEN {b}' for b, e in enumerate((1, *REUSE_EDGES)))}
                   ELSE {len(REUSE_EDGES) + 1} END AS reuse,
                 CASE WHEN headers IS NULL OR cardinality(headers) = 0 THEN NULL
                   ELSE COALESCE(headers['server'], '(absent)') END AS server
          FROM read_json('{path}', format = 'newline_delimited', columns = {{{listed}}}))
        GROUP BY ALL""").fetchall()
    t3 = time.perf_counter()
    hand = {tuple(r[:-1]): int(r[-1]) for r in rows}
    print(f"cells: Ibis {len(by_ibis)} in {t2 - t1:.2f} s, hand-written {len(hand)} in {t3 - t2:.2f} s; "
          f"equal: {by_ibis == hand}")


if __name__ == "__main__":
    main()
