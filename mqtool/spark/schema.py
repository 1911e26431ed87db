"""Column types of the family row schemas (``ROW_FIELDS`` / ``FINDING_FIELDS`` in :mod:`mqtool.ranges`) as
Arrow and Spark schemas, and rows → Arrow record batches. Needs pyarrow; Spark types are built lazily."""
from __future__ import annotations

from typing import Iterable, Iterator

BATCH_ROWS = 4096


def arrow_type(t: str):
    import pyarrow as pa

    return {
        "string": pa.string(),
        "long": pa.int64(),
        "int": pa.int32(),
        "bool": pa.bool_(),
        "map<string,string>": pa.map_(pa.string(), pa.string()),
        "array<string>": pa.list_(pa.string()),
        "array<array<string>>": pa.list_(pa.list_(pa.string())),
    }[t]


def arrow_schema(fields: list[tuple[str, str]]):
    import pyarrow as pa

    return pa.schema([pa.field(n, arrow_type(t), nullable=True) for n, t in fields])


def spark_ddl(fields: list[tuple[str, str]]) -> str:
    """A Spark DDL string (``a BIGINT, b STRING, ...``) for a field list."""
    names = {"string": "STRING", "long": "BIGINT", "int": "INT", "bool": "BOOLEAN",
             "map<string,string>": "MAP<STRING, STRING>", "array<string>": "ARRAY<STRING>",
             "array<array<string>>": "ARRAY<ARRAY<STRING>>"}
    return ", ".join(f"`{n}` {names[t]}" for n, t in fields)


def to_batches(rows: Iterable[dict], schema, batch_rows: int = BATCH_ROWS) -> Iterator:
    """Row dicts → ``pyarrow.RecordBatch`` es of ``schema`` (missing keys are nulls, extra keys dropped)."""
    import pyarrow as pa

    names = schema.names
    cols: list[list] = [[] for _ in names]
    n = 0
    for r in rows:
        g = r.get
        for c, name in zip(cols, names):
            c.append(g(name))
        n += 1
        if n >= batch_rows:
            yield pa.RecordBatch.from_arrays([pa.array(c, type=f.type) for c, f in zip(cols, schema)],
                                             schema=schema)
            cols = [[] for _ in names]
            n = 0
    if n:
        yield pa.RecordBatch.from_arrays([pa.array(c, type=f.type) for c, f in zip(cols, schema)], schema=schema)


def finding_row(store: str, d: dict) -> dict:
    """A verify NDJSON object (finding or summary) → a findings-table row (expected/actual as JSON text;
    a summary row carries its whole JSON object in ``message``)."""
    from mqtool.render import dumps

    if d.get("kind") == "summary":
        return {"store": store, "kind": "summary", "message": dumps(d)}
    out = dict(d)
    out["store"] = store
    for k in ("expected", "actual"):
        v = out.get(k)
        if v is not None and not isinstance(v, str):
            out[k] = dumps(v)
    return out


def columns_to_batch(columns: dict, n: int, schema):
    """``n`` rows given column-wise (a family's ``iter_range_columns`` chunk: name → a list or a pyarrow
    array; a name not given is all null) → a ``pyarrow.RecordBatch`` of ``schema`` (arrays cast to its types)."""
    import pyarrow as pa

    arrays = []
    for f in schema:
        col = columns.get(f.name)
        if col is None:
            arrays.append(pa.nulls(n, type=f.type))
        elif isinstance(col, pa.Array):
            arrays.append(col if col.type == f.type else col.cast(f.type))
        else:
            arrays.append(pa.array(col, type=f.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
