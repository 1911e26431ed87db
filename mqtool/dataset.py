"""Rows of the exported Parquet dataset: one schema for every family, and the verify findings rows.

Needs pyarrow for the Arrow parts (imported lazily), never pyspark: ``export --engine local`` and the Spark
data source both use it.

**One schema across families.** Every message file of ``mqtool export`` has the columns of
:func:`export_fields`: the union of the families' ``ROW_FIELDS`` (``mqtool/<family>/ranges.py``) in family
order, first appearance wins the position, plus ``family`` after ``store``. A name that two families type
differently gets one type by :func:`combine_types` (documented in docs/spark.md):

* ``int`` and ``long`` → ``long`` (widening, values unchanged);
* ``string`` and ``int``/``long``/``bool`` → ``string`` (numbers as decimal text, booleans as ``true``/``false``);
* ``string`` and ``array<string>`` → ``array<string>`` (a string becomes a one-element list);
* anything else is an error here, so a new conflict is decided (and documented) rather than guessed.

Columns a family does not have are null in its rows. :func:`to_family_types` turns a table read back into a
family's own types (the inverse of the conversions above).
"""
from __future__ import annotations

import functools
from itertools import repeat

from mqtool.ranges import FINDING_FIELDS

FAMILY_COLUMN = ("family", "string")
#: the true store path and topic of rows whose partition directory had to be named by a hash (else null):
#: a Hive partition column is read from the directory name, so the exact value travels in the file too
FULL_COLUMNS = (("store_full", "string"), ("topic_full", "string"))
_SCALARS_TO_TEXT = {"int", "long", "bool"}


def combine_types(name: str, a: str, b: str) -> str:
    """The export type of column ``name`` typed ``a`` by one family and ``b`` by another."""
    if a == b:
        return a
    pair = {a, b}
    if pair == {"int", "long"}:
        return "long"
    if pair == {"string", "array<string>"}:
        return "array<string>"
    if "string" in pair and (pair - {"string"}) <= _SCALARS_TO_TEXT:
        return "string"
    raise TypeError(f"export schema: column {name!r} is {a} in one family and {b} in another, and no rule "
                    "combines them (mqtool/dataset.py combine_types, docs/spark.md)")


def union_fields(field_lists: dict[str, list[tuple[str, str]]]) -> list[tuple[str, str]]:
    """The union of several families' field lists (``{family: ROW_FIELDS}``), ``family`` after ``store``."""
    order: list[str] = []
    types: dict[str, str] = {}
    for fields in field_lists.values():
        for n, t in fields:
            if n == FAMILY_COLUMN[0]:
                raise TypeError(f"export schema: a family defines the reserved column {n!r}")
            if n in types:
                types[n] = combine_types(n, types[n], t)
            else:
                order.append(n)
                types[n] = t
    out = [(n, types[n]) for n in order]
    at = order.index("store") + 1 if "store" in types else 0
    return out[:at] + [FAMILY_COLUMN] + out[at:]


def family_fields() -> dict[str, list[tuple[str, str]]]:
    """``ROW_FIELDS`` of every family of this build, in :data:`mqtool.families.FAMILIES` order."""
    from mqtool.families import FAMILIES
    from mqtool.ranges import family_ranges

    return {f: family_ranges(f).ROW_FIELDS for f in FAMILIES}


@functools.lru_cache(maxsize=None)
def _export_fields() -> tuple:
    return tuple(union_fields(family_fields()) + list(FULL_COLUMNS))


def export_fields() -> list[tuple[str, str]]:
    """The message columns of every exported file (all families), with their types."""
    return list(_export_fields())


def _one_element_list(v):
    return [v]


def _one_element_lists(values, typ):
    """``values`` (an Arrow array) as the list array ``typ`` of one-element lists, null where a value is null:
    what :func:`_one_element_list` gives value by value."""
    import pyarrow as pa
    import pyarrow.compute as pc

    valid = values.is_valid()
    ends = pc.cumulative_sum(pc.cast(valid, pa.int32()))
    offsets = pa.concat_arrays([pa.array([0], type=pa.int32()), ends])
    return pa.ListArray.from_arrays(offsets, values.drop_null(), type=typ, mask=pc.invert(valid))


def _converter(src: str, dst: str):
    """Value conversion from a family's type to the export type (None: the value goes in as it is)."""
    if src == dst or (src, dst) == ("int", "long"):
        return None
    if dst == "string" and src == "bool":
        return lambda v: "true" if v else "false"
    if dst == "string" and src in _SCALARS_TO_TEXT:
        return str
    if dst == "array<string>" and src == "string":
        return _one_element_list
    raise TypeError(f"no conversion from {src} to {dst}")


def family_converters(family_row_fields: list[tuple[str, str]], fields: list[tuple[str, str]] | None = None):
    """[(column, function)] turning a family's row values into the export types."""
    target = dict(fields if fields is not None else export_fields())
    out = []
    for n, t in family_row_fields:
        fn = _converter(t, target[n])
        if fn is not None:
            out.append((n, fn))
    return out


class BatchBuilder:
    """Row dicts → Arrow record batches with the columns ``fields`` (the file schema). Rows of one
    ``family`` (with its ``row_fields``) get the export conversions, the ``family`` column, and nulls for the
    columns the family lacks (built without touching the rows); ``family`` None: rows already in ``fields``
    types (e.g. findings)."""

    def __init__(self, fields: list[tuple[str, str]], family: str | None = None,
                 row_fields: list[tuple[str, str]] | None = None):
        from mqtool.spark.schema import arrow_schema

        self.schema = arrow_schema(fields)
        self.family = family
        names = {n for n, _ in fields}
        have = {n for n, _ in row_fields} if row_fields is not None else names
        self.present = [(i, f.name, f.type) for i, f in enumerate(self.schema)
                        if f.name in have and f.name != FAMILY_COLUMN[0] and (f.name, "string") not in FULL_COLUMNS]
        self.family_index = self.schema.get_field_index(FAMILY_COLUMN[0]) if family else -1
        self.converters = dict(family_converters([(n, t) for n, t in row_fields if n in names], fields)
                               if row_fields is not None else [])

    def batch(self, rows: list[dict]):
        get = dict.get
        return self.batch_from_columns({name: list(map(get, rows, repeat(name))) for _, name, _ in self.present},
                                       len(rows))

    def batch_from_columns(self, columns: dict[str, list], n: int):
        """The batch of ``n`` rows given column-wise: ``columns[name]`` lists the values of every present column
        (the family's row fields; a missing name counts as all None)."""
        import pyarrow as pa

        conv = self.converters
        arrays = [None] * len(self.schema)
        for i, name, typ in self.present:
            col = columns.get(name)
            if col is None:
                arrays[i] = pa.nulls(n, type=typ)
                continue
            fn = conv.get(name)
            if fn is _one_element_list:     # with Arrow kernels, not value by value
                arrays[i] = _one_element_lists(pa.array(col, type=typ.value_type), typ)
                continue
            if fn is not None:
                col = [None if v is None else fn(v) for v in col]
            try:
                arrays[i] = pa.array(col, type=typ)
            except OverflowError:
                arrays[i] = pa.array(_fitting(col, typ), type=typ)
            except UnicodeEncodeError:      # a file or directory name that is not UTF-8 (surrogate escapes)
                arrays[i] = pa.array(_utf8_text(col), type=typ)
        if self.family_index >= 0:
            arrays[self.family_index] = pa.array(repeat(self.family, n), type=pa.string(), size=n)
        for i, f in enumerate(self.schema):
            if arrays[i] is None:
                arrays[i] = pa.nulls(n, type=f.type)
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)


def utf8_text(s: str) -> str:
    """``s`` as valid UTF-8 text for Parquet (strings and file names there are UTF-8 only): a string holding
    surrogate escapes (the bytes of a name that is not UTF-8, as the OS gives it) gets those bytes as ``\\xNN``
    text, as a terminal shows them (:mod:`mqtool.sanitize`); any other string is returned as it is."""
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        try:
            raw = s.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:          # a lone surrogate that is no escaped byte
            raw = s.encode("utf-8", "surrogatepass")
        return raw.decode("utf-8", "backslashreplace")


def _utf8_text(values):
    """:func:`utf8_text` over a column's values (lists element by element)."""
    def one(v):
        if isinstance(v, str):
            return utf8_text(v)
        if isinstance(v, (list, tuple)):
            return [one(x) for x in v]
        return v

    return [one(v) for v in values]


def _fitting(col: list, typ) -> list:
    """``col`` with the integers its Arrow integer type cannot hold as None: a hostile store can claim values
    no field of the format can (a Kafka base offset of 2^63 - 1 plus a delta), and Parquet has no wider type."""
    bits = typ.bit_width
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return [v if v is None or not isinstance(v, int) or lo <= v <= hi else None for v in col]


def spark_select(family: str, row_fields: list[tuple[str, str]]) -> list[str]:
    """Spark SQL expressions (for ``DataFrame.selectExpr``) turning the data source rows of ``family`` into the
    export columns, the same values as :class:`BatchBuilder` gives (used by ``export --engine spark``)."""
    from mqtool.spark.schema import spark_ddl

    have = dict(row_fields)
    out = []
    for n, t in export_fields():
        sql_type = spark_ddl([(n, t)]).split(" ", 1)[1]
        col = f"`{n}`"
        if n == FAMILY_COLUMN[0]:
            out.append(f"'{family}' AS {col}")
        elif n not in have:
            out.append(f"CAST(NULL AS {sql_type}) AS {col}")
        elif have[n] == t:
            out.append(col)
        elif t == "array<string>" and have[n] == "string":
            out.append(f"CASE WHEN {col} IS NULL THEN NULL ELSE array({col}) END AS {col}")
        else:       # int → bigint; int/bigint → decimal text; boolean → 'true'/'false'
            out.append(f"CAST({col} AS {sql_type}) AS {col}")
    return out


def to_family_types(table, fields: list[tuple[str, str]]):
    """A table read back from an export, with the columns of ``fields`` turned back into those types (the
    inverse of the export conversions: one-element lists → their string, decimal text → numbers)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from mqtool.spark.schema import arrow_type

    for n, t in fields:
        i = table.schema.get_field_index(n)
        if i < 0:
            continue
        want = arrow_type(t)
        col = table.column(i)
        if col.type == want:
            continue
        if pa.types.is_list(col.type) and not pa.types.is_list(want):
            col = pc.list_element(col, 0)
        if pa.types.is_string(col.type) and pa.types.is_boolean(want):
            col = pc.equal(col, "true")
        table = table.set_column(i, pa.field(n, want), col.cast(want))
    return table


def verify_rows(path: str, family: str, max_message_size: int = 4 * 1024 * 1024, sizes: dict | None = None):
    """Findings rows (and a summary row) of ``verify store`` on one store, run in one process; the columns
    of :data:`mqtool.ranges.FINDING_FIELDS`."""
    from mqtool.causes import linked
    from mqtool.families import family_module
    from mqtool.options import VerifyOptions
    from mqtool.spark.schema import finding_row

    ops = family_module(family, "ops")
    findings, summary_fn = linked(*ops.verify("store", path, VerifyOptions(
        max_message_size=max_message_size, jobs=1, progress=False, **(sizes or {}))), path, family)
    for f in findings:
        yield finding_row(path, f.to_dict())
    yield finding_row(path, summary_fn().to_dict())


__all__ = ["FINDING_FIELDS", "BatchBuilder", "combine_types", "export_fields", "family_converters",
           "spark_select", "to_family_types", "union_fields", "verify_rows"]
