"""Row schemas: every output field of a family declared once (``mqtool/<family>/rows.py``).

A :class:`Field` gives a row key its type (the vocabulary of :data:`mqtool.ranges.TYPES`, plus ``json`` for a
value that is no Parquet column), whether a row may leave it out, whether it is a column of the Parquet/Spark
export, its table presentation (header, formatter, width, :attr:`Column.priority <mqtool.render.Column>` on
narrow terminals) and a one-line description. A :class:`RowSchema` is one row kind (``message``, ``batch``,
…): its fields in the order the row dict has them. From the schemas come

* the NDJSON key order: a row's keys are the schema's names in schema order, optional ones left out when
  absent (the row builders write their dict literally, for speed; :meth:`RowSchema.check_row` and the tests
  hold them to the schema);
* the table columns (:meth:`RowSchema.columns`, in the table order the family gives);
* the Parquet/Spark field list (:func:`export_fields`: context columns such as ``store`` first, then the union
  of the kinds' exported fields in order of first appearance) — ``ROW_FIELDS`` of ``<family>/ranges.py``;
* the key tuple a compiled row builder is configured with (:meth:`RowSchema.names`);
* the field tables of the docs (``tools/gen_row_docs.py``).

Adding a column: one :class:`Field` in the family's ``rows.py`` (and its name in the table order if it is
shown) plus its value in the row builder. No I/O here; the renderer's :class:`Column` is imported lazily.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable

from mqtool.plainclass import dataclass
from mqtool.ranges import TYPES

TYPE_CHECKING = False      # typing is not loaded at start-up (issue #20); type checkers read True
if TYPE_CHECKING:
    from typing import Any

#: value types a field may have: the export types, and ``json`` (an object or other JSON value; not exported)
FIELD_TYPES = TYPES + ("json",)


@dataclass(frozen=True)
class Field:
    """One output field. ``header`` None: not a table column. ``optional``: a row leaves the key out when it
    has no value (NDJSON), null in Parquet. ``export`` False: not a Parquet/Spark column (encoding markers,
    raw blobs, decoded objects)."""

    name: str
    type: str
    description: str = ""
    optional: bool = False
    export: bool = True
    header: str | None = None
    fmt: Callable[[Any], str] | None = None
    justify: str = "left"
    max_width: int | None = None
    no_wrap: bool = False
    priority: int = 5

    def __post_init__(self):
        if self.type not in FIELD_TYPES:
            raise TypeError(f"row field {self.name!r}: unknown type {self.type!r}")
        if self.type == "json" and self.export:
            raise TypeError(f"row field {self.name!r}: a json value cannot be an export column")

    def column(self, **changes):
        """The table column of this field (``changes``: attributes that differ in one table)."""
        from mqtool.columns import Column

        if self.header is None and "header" not in changes:
            raise ValueError(f"row field {self.name!r} has no table header")
        kw = dict(header=self.header, fmt=self.fmt, justify=self.justify, max_width=self.max_width,
                  no_wrap=self.no_wrap, priority=self.priority)
        kw.update(changes)
        return Column(self.name, **kw)


class RowSchema:
    """The fields of one row kind, in row order."""

    def __init__(self, kind: str, fields: Iterable[Field]):
        self.kind = kind
        self.fields = tuple(fields)
        self.by_name = {f.name: f for f in self.fields}
        if len(self.by_name) != len(self.fields):
            raise ValueError(f"row schema {kind!r}: a name is declared twice")

    def __getitem__(self, name: str) -> Field:
        return self.by_name[name]

    def __iter__(self):
        return iter(self.fields)

    def pick(self, *names: str) -> list[Field]:
        """The fields ``names`` of this schema (for a kind that shares them)."""
        return [self.by_name[n] for n in names]

    def names(self, exclude: Iterable[str] = ()) -> tuple[str, ...]:
        """The keys in row order (without ``exclude``)."""
        skip = set(exclude)
        unknown = skip - set(self.by_name)
        if unknown:
            raise KeyError(f"row schema {self.kind!r} has no field {sorted(unknown)}")
        return tuple(f.name for f in self.fields if f.name not in skip)

    def export_fields(self) -> list[tuple[str, str]]:
        return [(f.name, f.type) for f in self.fields if f.export]

    def columns(self, order: Iterable[str], **changes: dict) -> list:
        """Table columns of the fields ``order`` (in that order); ``changes[name]``: attributes that differ."""
        return [self.by_name[n].column(**changes.get(n, {})) for n in order]

    def check_row(self, row: dict) -> list[str]:
        """What is wrong with ``row`` against this schema (empty: nothing): an undeclared key, a key out of
        schema order, a required key missing."""
        problems = []
        at = {f.name: i for i, f in enumerate(self.fields)}
        last = -1
        for k in row:
            i = at.get(k)
            if i is None:
                problems.append(f"undeclared key {k!r}")
                continue
            if i < last:
                problems.append(f"key {k!r} out of schema order")
            last = max(last, i)
        for f in self.fields:
            if not f.optional and f.name not in row:
                problems.append(f"required key {f.name!r} missing")
        return problems


def export_fields(context: Iterable[Field], kinds: Iterable[RowSchema]) -> list[tuple[str, str]]:
    """A family's Parquet/Spark fields: the ``context`` columns (``store`` …) first, then every kind's exported
    fields in order of first appearance; a name typed differently by two kinds is an error."""
    out: dict[str, str] = {}
    for f in context:
        out[f.name] = f.type
    for schema in kinds:
        for n, t in schema.export_fields():
            if n in out and out[n] != t:
                raise TypeError(f"row field {n!r} is {out[n]} in one kind and {t} in {schema.kind!r}")
            out.setdefault(n, t)
    return list(out.items())


def iso_ms(ms) -> str:
    """:func:`mqtool.render.iso_ms` (imported when a table cell needs it, not when a schema is loaded)."""
    from mqtool.columns import iso_ms as fmt

    return fmt(ms)
