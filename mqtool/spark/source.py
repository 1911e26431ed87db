"""The ``mqtool`` PySpark data source (``pyspark.sql.datasource``, PySpark 4.x).

``spark.read.format("mqtool").option("format", "rocketmq"|"litemq"|"kafka"|"auto").load(paths)``:

* messages mode (default): one partition per byte range of every log segment (option ``splitSize``,
  default 128 MiB); each partition resyncs to the first record that starts in its range and yields the
  rows of ``mqtool dump commitlog`` for the records that start there, as Arrow record batches, with a
  ``store`` column first (the store path as given). Union over partitions == the embedded scan.
* verify rows (``option("rows", "verify")``): one partition per store, rows are that store's verify
  findings (the NDJSON objects of ``mqtool verify store``) plus one ``kind = "summary"`` row per store.
* damage rows (``option("rows", "damage")``): the ranges the message scan skipped as damaged, one
  findings-shaped row each (``kind = "damage"``), the same ranges ``dump``/``export`` count.

Damaged input follows Spark's own conventions (as the CSV/JSON sources): ``mode`` = ``PERMISSIVE``
(default: rows of the readable records; damage kept: as rows with only ``store`` and the
``columnNameOfCorruptRecord`` column set when that option names a column, else through ``rows=damage``),
``DROPMALFORMED`` (damage dropped) or ``FAILFAST`` (the first damaged range fails the job, naming it). A file
that cannot be opened or vanished fails the job, naming the file, unless ``ignoreCorruptFiles`` /
``ignoreMissingFiles`` is true (then it is skipped, as Spark's file sources do).

Options: ``format`` (default auto), ``rows`` (messages|verify|damage), ``mode``, ``splitSize`` (bytes or 64K/128M/1G),
``body`` (none|text|hex|base64), ``includeBlank`` (false), ``deep`` (false; Kafka: record rows too, with
their keys/values when ``body`` is set), ``topic``, ``key``, ``tag`` (the dump filters),
``maxMessageSize``, ``batchRows`` (rows per Arrow batch, 4096), ``maxPartitionBytes`` (task size: small
segments and ranges are packed into partitions of about this many bytes, as Spark packs small files; default
the split size when given, else 128 MiB), ``openCostInBytes`` (4M, what a range costs beyond its bytes),
``maxPartitions`` (a cap on the number of partitions). Paths may be store roots, commitlog dirs or segment files, and
globs (expanded on the driver, and made absolute there: executors have other working directories); they must
be readable by the executors under the same name (local disk, NFS, a mounted bucket).
"""
from __future__ import annotations

import bisect
import glob
import json
import os
import re

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from mqtool.dataset import verify_rows  # noqa: F401  (moved there: export needs it without pyspark)
from mqtool.errors import InputError, UsageError
from mqtool.io import open_input
from mqtool.ranges import FINDING_FIELDS, family_ranges, parse_size
from mqtool.spark import schema as S

FAMILIES = ("rocketmq", "litemq", "kafka")
ROWS = ("messages", "verify", "damage")
MODES = ("PERMISSIVE", "DROPMALFORMED", "FAILFAST")
# An executor's failure carries this marker and a JSON object, so that the driver can name the file in one
# line (see :func:`mqtool.spark.session.spark_errors`).
FAIL_MARK = "MQTOOL-READ-FAILED"


class ReadFailed(Exception):
    """Raised on an executor: a file cannot be read (or, with FAILFAST, a range is damaged)."""

    def __init__(self, kind: str, file: str, message: str):
        file, message = _remote().shown(file), _remote().shown(message)     # a remote store: its URL
        super().__init__(f"{FAIL_MARK}{json.dumps({'kind': kind, 'file': file, 'message': message})}"
                         f"{FAIL_MARK}")


def _truthy(v) -> bool:
    return str(v).strip().lower() in ("1", "true", "yes", "on")


def expand_paths(options) -> list[str]:
    """``path`` / ``paths`` options (a JSON list for several) → existing paths, globs expanded, in order."""
    raw: list[str] = []
    if options.get("paths"):
        v = options.get("paths")
        try:
            raw.extend(json.loads(v))
        except ValueError:
            raw.extend(p for p in str(v).split(",") if p)
    if options.get("path"):
        raw.append(options.get("path"))
    if not raw:
        raise UsageError("mqtool data source: give one or more paths to load()")
    out: list[str] = []
    for p in raw:
        p = p.removeprefix("file://")
        if _remote().is_remote(p):      # s3://, hdfs://...: its local shadow (see mqtool.remote)
            out.append(str(_remote().stage(p)))
            continue
        if glob.has_magic(p):
            hits = sorted(glob.glob(p))
            if not hits:
                raise UsageError(f"mqtool data source: no path matches {p!r}")
            out.extend(os.path.abspath(h) for h in hits)
        else:
            if not os.path.lexists(p):
                raise UsageError(f"mqtool data source: no such path {p!r}")
            out.append(os.path.abspath(p))
    return out


def _remote():
    from mqtool import remote

    return remote


def resolve_families(paths: list[str], fmt: str | None) -> list[tuple[str, str]]:
    from mqtool.detect import detect

    fmt = (fmt or "auto").lower()
    if fmt != "auto" and fmt not in FAMILIES:
        raise UsageError(f"mqtool data source: unknown format {fmt!r} (rocketmq, litemq, kafka or auto)")
    return [(p, detect(p, None if fmt == "auto" else fmt)) for p in paths]


class RangePartition(InputPartition):
    """One or more consecutive byte ranges (several only when ``maxPartitions`` groups them)."""

    def __init__(self, ranges):
        self.ranges = list(ranges)


DEFAULT_PARTITION_BYTES = 128 * 1024 * 1024    # as Spark's spark.sql.files.maxPartitionBytes
DEFAULT_OPEN_COST = 4 * 1024 * 1024             # as Spark's spark.sql.files.openCostInBytes


def group_ranges(ranges: list, max_partitions: int | None = None, target: int | None = None,
                 open_cost: int = DEFAULT_OPEN_COST) -> list[list]:
    """Consecutive ranges packed into Spark partitions (order kept), as Spark packs small files: each range
    costs its length plus ``open_cost``; a partition is closed before it would pass ``target`` bytes (default
    128 MiB). With ``max_partitions``, at most that many partitions (near-equal range counts if packing by
    size gives more)."""
    target = target or DEFAULT_PARTITION_BYTES
    groups: list[list] = []
    cur: list = []
    size = 0
    for r in ranges:
        cost = r.length + open_cost
        if cur and size + cost > target:
            groups.append(cur)
            cur, size = [], 0
        cur.append(r)
        size += cost
    if cur:
        groups.append(cur)
    if max_partitions and len(groups) > max_partitions:
        n = len(ranges)
        bounds = [n * i // max_partitions for i in range(max_partitions + 1)]
        return [ranges[a:b] for a, b in zip(bounds, bounds[1:]) if b > a]
    return groups


class StorePartition(InputPartition):
    def __init__(self, path: str, family: str):
        self.path = path
        self.family = family


class MqtoolDataSource(DataSource):
    """The batch side of the ``mqtool`` source; :class:`mqtool.spark.stream.StreamingDataSource` (what is
    registered as ``mqtool``) adds the streaming reader."""

    @classmethod
    def name(cls) -> str:
        return "mqtool"

    def _mode(self) -> str:
        """Which rows: messages, verify or damage (``rows``; ``mode=verify`` is the older spelling)."""
        return read_modes(self.options)[0]

    def _stores(self) -> list[tuple[str, str]]:
        if not hasattr(self, "_stores_cache"):
            self._stores_cache = resolve_families(expand_paths(self.options), self.options.get("format"))
        return self._stores_cache

    def row_fields(self) -> list[tuple[str, str]]:
        if self._mode() in ("verify", "damage"):
            return FINDING_FIELDS
        fams = sorted({f for _, f in self._stores()})
        if len(fams) != 1:
            raise UsageError(f"mqtool data source: the paths hold several families ({', '.join(fams)}); "
                             "load each family separately (option format)")
        fields = list(family_ranges(fams[0]).ROW_FIELDS)
        corrupt = self.options.get("columnNameOfCorruptRecord")
        if corrupt and read_modes(self.options)[1] == "PERMISSIVE":
            if corrupt in {n for n, _ in fields}:
                raise UsageError(f"mqtool data source: columnNameOfCorruptRecord {corrupt!r} is a column already")
            fields.append((corrupt, "string"))
        return fields

    def schema(self):
        fields = self.row_fields()
        wanted = self.options.get("columns")
        if wanted and self._mode() == "messages":
            fields = select_fields(fields, [c.strip() for c in str(wanted).split(",") if c.strip()])
        return S.spark_ddl(fields)

    def reader(self, schema):
        # Spark (4.1+) refuses a reader with pushFilters unless spark.sql.python.filterPushdown.enabled is
        # true, and calls reader() from its pushdown worker only when it is: give the filtering reader there.
        cls = FilteringReader if _called_for_pushdown() else MqtoolReader
        fields = self.row_fields()
        if self._mode() == "messages":
            # The Python data source API tells a reader nothing of the columns a query selects: the columns
            # read are those of the schema (the ``columns`` option's, or one the user gave with .schema())
            fields = select_fields(fields, [(f.name, f.dataType.simpleString()) for f in schema.fields])
        return cls(self.options, self._stores(), self._mode(), fields, self.row_fields())


_SPARK_TYPES = {"string": "string", "long": "bigint", "int": "int", "bool": "boolean"}


def select_fields(fields: list[tuple[str, str]], wanted: list) -> list[tuple[str, str]]:
    """The columns ``wanted`` (names, or (name, Spark type) pairs of a user's schema), in that order, out of
    ``fields``; a name that is not a column, or a type other than the column's, is a usage error."""
    have = dict(fields)
    out = []
    for w in wanted:
        name, spark_type = w if isinstance(w, tuple) else (w, None)
        if name not in have:
            raise UsageError(f"mqtool data source: no column {name!r} (columns: {', '.join(have)})")
        if spark_type is not None and spark_type != _SPARK_TYPES.get(have[name], have[name]):
            raise UsageError(f"mqtool data source: column {name!r} is {_SPARK_TYPES.get(have[name], have[name])}, "
                             f"not {spark_type}")
        out.append((name, have[name]))
    return out


def _called_for_pushdown() -> bool:
    import sys

    f = sys._getframe(1)
    while f is not None:
        if f.f_code.co_filename.endswith("data_source_pushdown_filters.py"):
            return True
        f = f.f_back
    return False


def read_modes(options) -> tuple[str, str]:
    """(rows, mode) of the options: rows messages|verify|damage, mode PERMISSIVE|DROPMALFORMED|FAILFAST."""
    rows = str(options.get("rows") or "").strip().lower()
    mode = str(options.get("mode") or "").strip()
    if mode.lower() in ROWS:            # mode=verify / mode=messages: the spelling before `rows`
        rows, mode = rows or mode.lower(), ""
    rows = rows or "messages"
    mode = mode.upper() or "PERMISSIVE"
    if rows not in ROWS:
        raise UsageError(f"mqtool data source: unknown rows {rows!r} (messages, verify or damage)")
    if mode not in MODES:
        raise UsageError(f"mqtool data source: unknown mode {mode!r} (PERMISSIVE, DROPMALFORMED or FAILFAST)")
    return rows, mode


_CODE = re.compile(r"\b([a-z][a-z0-9]*(?:-[a-z0-9]+)+)\b")


def damage_record(rng, d) -> dict:
    """A damage report of a range reader (a RocketMQ ``Damage`` or a one-line note) → a findings row, with
    ``note`` the one-line text ``dump`` prints for it."""
    if hasattr(d, "code"):
        from mqtool.rocketmq.ranges import damage_note

        return {"store": rng.store, "kind": "damage", "severity": "error", "code": d.code, "file": d.file,
                "position": d.position, "offset": d.offset, "message": f"{d.message}; skipped {d.length} bytes",
                "note": damage_note(d)}
    text = str(d)
    m = _CODE.search(text)
    return {"store": rng.store, "kind": "damage", "severity": "error", "code": m.group(1) if m else "damage",
            "file": rng.file, "message": text, "note": text}


class MqtoolReader(DataSourceReader):
    def __init__(self, options, stores, mode, fields, all_fields=None):
        self.stores = stores
        self.mode = mode
        self.fields = fields
        self.all_fields = all_fields or fields
        self.on_bad = read_modes(options)[1]
        self.ignore_corrupt = _truthy(options.get("ignoreCorruptFiles", "false"))
        self.ignore_missing = _truthy(options.get("ignoreMissingFiles", "false"))
        self.predicates: list[tuple] = []       # (op, column, value) pushed by Spark (FilteringReader)
        corrupt = options.get("columnNameOfCorruptRecord")
        self.corrupt_col = corrupt if (corrupt and self.on_bad == "PERMISSIVE" and mode == "messages"
                                       and corrupt in {n for n, _ in fields}) else None
        self.split = parse_size(options.get("splitSize"))
        self.body = str(options.get("body", "none")).lower()
        if mode == "messages" and not {"body", "body_error", "key", "value", "headers"} & {n for n, _ in fields}:
            self.body = "none"          # bodies (and Kafka keys/values) not selected: not inflated nor encoded
        self.include_blank = _truthy(options.get("includeBlank", "false"))
        self.deep = _truthy(options.get("deep", "false"))           # kafka: record rows too
        self.topic = options.get("topic")
        self.key = options.get("key")
        self.tag = options.get("tag")
        self.batch_rows = int(options.get("batchRows", S.BATCH_ROWS))
        mp = options.get("maxPartitions")
        self.max_partitions = int(mp) if mp else None
        # the task size: maxPartitionBytes, else the split size when one was given, else 128 MiB
        self.partition_bytes = parse_size(options.get("maxPartitionBytes")) or self.split
        oc = options.get("openCostInBytes")
        self.open_cost = parse_size(oc) if oc not in (None, "") else DEFAULT_OPEN_COST
        mms = options.get("maxMessageSize")
        self.max_message_size = parse_size(mms) if mms else 4 * 1024 * 1024
        self.sizes = size_options(options)
        self.shadows = _remote().shadows_of([p for p, _ in stores]) if any(
            "mqtool-remote-" in p for p, _ in stores) else []       # remote stores: rebuilt where missing
        self.remote_env = _remote().carried_env() if self.shadows else {}

    def partitions(self):
        if self.mode == "verify":
            return [StorePartition(p, f) for p, f in self.stores]
        ranges = []
        for p, f in self.stores:
            ranges.extend(family_ranges(f).plan(p, self.split))
        groups = group_ranges(ranges, self.max_partitions, self.partition_bytes, self.open_cost)
        return [RangePartition(g) for g in groups] or [StorePartition("", "")]

    def read(self, partition):
        schema = S.arrow_schema(self.fields)
        if self.shadows:
            _remote().restore(self.shadows, self.remote_env)
        if isinstance(partition, StorePartition):
            if not partition.path:
                return iter(())
            rows = verify_rows(partition.path, partition.family, self.max_message_size, self.sizes)
            return S.to_batches(map(_remote().shown_row, rows) if self.shadows else rows, schema)
        return self._message_batches(partition.ranges, schema)

    def _message_batches(self, ranges, schema):
        """The Arrow batches of a partition's ranges: column-wise where the family has a column lane
        (``iter_range_columns``: no dict per row), else from the row dicts. The cyclic garbage collector is
        off meanwhile (as in export's range tasks): the records and values a chunk holds have no cycles, and
        its collections would walk them again and again (a Python worker runs one task at a time)."""
        import gc

        was = gc.isenabled()
        gc.disable()
        try:
            yield from self._range_batches(ranges, schema)
        finally:
            if was:
                gc.enable()

    def _range_batches(self, ranges, schema):
        from mqtool.options import DumpOptions

        opts = DumpOptions(topic=self.topic, key=self.key, tag=self.tag, body=self.body,
                           include_blank=self.include_blank, max_message_size=self.max_message_size,
                           deep=self.deep, print_data=self.deep and self.body != "none")
        for rng in ranges:
            try:
                open_input(rng.file).close()        # read-only, O_NOATIME, FIFOs refused
            except InputError as e:
                if self._file_fails(rng.file, e.message):
                    continue
            damage: list[dict] = []
            on_damage = lambda d, rng=rng: damage.append(damage_record(rng, d))  # noqa: E731
            mod = family_ranges(rng.family)
            chunks = None
            if hasattr(mod, "iter_range_columns"):
                chunks = mod.iter_range_columns(rng, opts, [n for n, _ in mod.ROW_FIELDS if n != "store"],
                                                on_damage=on_damage)
            if chunks is None:
                yield from S.to_batches(self._range_rows(mod, rng, opts, damage, on_damage), schema,
                                        self.batch_rows)
                continue
            for by_topic in chunks:
                table = self._chunk_table(by_topic, rng, schema) if self.mode == "messages" else None
                yield from self._interleave(table, damage, schema)
            yield from self._interleave(None, damage, schema)

    def _interleave(self, table, damage: list, schema):
        """A chunk's rows (a table sorted by position, or None) with what becomes of the damage reported
        while it was read, each in its place: the rows before the damaged unit's position first, as the row
        path gives them."""
        cut = 0
        pos = table["position"].to_pylist() if table is not None and damage else None
        for at, row in self._damage_out(damage):
            if pos is not None and at is not None:
                i = bisect.bisect_left(pos, at, cut)
                if i > cut:
                    yield from self._table_batches(table.slice(cut, i - cut), schema)
                    cut = i
            yield from S.to_batches([row], schema)
        if table is not None and table.num_rows > cut:
            yield from self._table_batches(table.slice(cut), schema)

    def _table_batches(self, table, schema):
        return table.select(schema.names).to_batches(max_chunksize=max(self.batch_rows, 1))

    def _range_rows(self, mod, rng, opts, damage, on_damage):
        want_rows = self.mode == "messages"
        store = rng.store
        preds = self.predicates
        shown_row = _remote().shown_row if self.shadows else None
        if shown_row:
            store = _remote().shown(store)
        for row in mod.iter_range_rows(rng, opts, on_damage=on_damage):
            yield from self._damage_rows(damage)
            if shown_row:
                shown_row(row)
            if want_rows and (not preds or keep_row(row, preds, store)):
                row["store"] = store
                yield row
        yield from self._damage_rows(damage)

    def _chunk_table(self, by_topic: dict, rng, schema):
        """One column-lane chunk (``{topic: (columns, n)}``, rows grouped by topic) → a table of ``schema``'s
        columns (and ``position`` and the pushed predicates' columns) in row order (by position: a chunk is
        part of one range, one file), the pushed predicates applied; None when no row is left."""
        import pyarrow as pa
        import pyarrow.compute as pc

        need = list(schema.names)
        for extra in ["position"] + [c for _, c, _ in self.predicates]:
            if extra not in need:
                need.append(extra)
        types = dict(self.all_fields)
        full = S.arrow_schema([(n, types[n]) for n in need])
        store, file = rng.store, rng.file
        if self.shadows:        # a remote store: its URL shown, not the local shadow
            store, file = _remote().shown(store), _remote().shown(file)
        batches = []
        for columns, n in by_topic.values():
            if n:
                if "store" in need:
                    columns = dict(columns, store=pa.array([store] * n, pa.string()))
                if file != rng.file and columns.get("file") is not None:
                    col = columns["file"]
                    columns = dict(columns, file=[_remote().shown(v) for v in (
                        col.to_pylist() if hasattr(col, "to_pylist") else col)])
                batches.append(S.columns_to_batch(columns, n, full))
        if not batches:
            return None
        table = pa.Table.from_batches(batches, schema=full)
        if len(batches) > 1:
            table = table.take(pc.sort_indices(table["position"]))
        if self.predicates:
            table = table.filter(arrow_mask(table, self.predicates))
        return table if table.num_rows else None

    def _file_fails(self, file: str, why: str) -> bool:
        """A file cannot be read: True to skip it (ignoreMissingFiles / ignoreCorruptFiles), else raise."""
        missing = not os.path.lexists(file)
        if (missing and self.ignore_missing) or (not missing and self.ignore_corrupt):
            return True
        raise ReadFailed("missing" if missing else "unreadable", file,
                         "the file vanished" if missing else why)

    def _damage_rows(self, damage: list):
        """What becomes of the damage reported so far (emptied): an unreadable file fails (or is skipped);
        otherwise per mode: a failure, a corrupt-record row, a damage row, or nothing."""
        for _, row in self._damage_out(damage):
            yield row

    def _damage_out(self, damage: list):
        """:meth:`_damage_rows` as (position of the damage or None, row)."""
        while damage:
            rec = damage.pop(0)
            if rec["code"] == "file-unreadable" or not os.path.lexists(rec["file"]):
                if self._file_fails(rec["file"], rec["message"]):
                    continue
            if self.on_bad == "FAILFAST":
                raise ReadFailed("damage", rec["file"], rec["note"])
            if self.shadows:
                rec = _remote().shown_row(rec)
            if self.mode == "damage":
                yield rec.get("position"), rec
            elif self.corrupt_col:
                yield rec.get("position"), {"store": rec["store"], self.corrupt_col: rec["note"]}


_PY_TYPES = {"string": str, "long": int, "int": int}
_OPS = {"EqualTo": "==", "In": "in", "GreaterThan": ">", "GreaterThanOrEqual": ">=", "LessThan": "<",
        "LessThanOrEqual": "<=", "StringStartsWith": "startswith", "IsNotNull": "notnull"}


class FilteringReader(MqtoolReader):
    """:class:`MqtoolReader` with Spark filter pushdown: IS NOT NULL, and comparisons (=, IN, <, <=, >, >=,
    STARTSWITH) of a
    string or integer column (topic, keys' siblings: tags, queue_id, queue_offset, offset, timestamps, ...)
    with literals of the column's type are evaluated on each row before it is turned into Arrow, and a
    single topic equality also becomes the ``topic`` reader option (Kafka partitions of other topics are
    not read at all). Those filters are not evaluated again by Spark; any other filter is left to Spark."""

    def pushFilters(self, filters):
        if self.mode != "messages":
            yield from filters
            return
        types = dict(self.fields)
        for f in filters:
            p = _predicate(f, types)
            if p is None:
                yield f
                continue
            self.predicates.append(p)
            if p[0] == "==" and p[1] == "topic" and self.topic is None:
                self.topic = p[2]


def _predicate(f, types: dict):
    op = _OPS.get(type(f).__name__)
    attr = getattr(f, "attribute", None)
    if op is None or not attr or len(attr) != 1:
        return None
    if op == "notnull":
        return (op, attr[0], None) if attr[0] in types else None
    py = _PY_TYPES.get(types.get(attr[0], ""))
    if py is None or (op == "startswith" and py is not str):
        return None
    vals = f.value if op == "in" else (f.value,)
    if not all(type(v) is py for v in vals):
        return None
    return (op, attr[0], frozenset(vals) if op == "in" else f.value)


def keep_row(row: dict, preds, store: str) -> bool:
    """All pushed predicates hold for the row (a null never matches, as in SQL)."""
    for op, col, val in preds:
        v = store if col == "store" else row.get(col)
        if v is None:
            return False
        if op == "notnull":
            continue
        if op == "==":
            ok = v == val
        elif op == "in":
            ok = v in val
        elif op == ">":
            ok = v > val
        elif op == ">=":
            ok = v >= val
        elif op == "<":
            ok = v < val
        elif op == "<=":
            ok = v <= val
        else:
            ok = v.startswith(val)
        if not ok:
            return False
    return True


def arrow_mask(table, preds):
    """:func:`keep_row` over an Arrow table: a boolean mask, null (dropped by ``filter``) where a value is null."""
    import pyarrow as pa
    import pyarrow.compute as pc

    mask = None
    for op, col, val in preds:
        c = table[col]
        if pa.types.is_integer(c.type):
            c = c.cast(pa.int64())
        if op == "notnull":
            m = pc.is_valid(c)
        elif op == "in":
            m = pc.is_in(c, value_set=pa.array(sorted(val), c.type))
        elif op == "startswith":
            m = pc.starts_with(c, pattern=val)
        else:
            m = {"==": pc.equal, ">": pc.greater, ">=": pc.greater_equal, "<": pc.less,
                 "<=": pc.less_equal}[op](c, pa.scalar(val, c.type))
        mask = m if mask is None else pc.and_(mask, m)
    return mask


def _option_name(field_name: str) -> str:
    """A SizeOptions field as a data source option: ``max_hash_slots`` → ``maxHashSlots``."""
    head, *rest = field_name.split("_")
    return head + "".join(w.title() for w in rest)


def size_reader_options(sizes: dict | None) -> dict[str, str]:
    """SizeOptions fields (``--broker-conf`` … ``--index-interval-bytes``) as data source options."""
    return {_option_name(k): str(v) for k, v in (sizes or {}).items() if v is not None}


def size_options(options) -> dict:
    """Store geometry from the data source options (brokerConf, cqFileSize, maxHashSlots, maxIndexNum,
    indexIntervalBytes): the :class:`~mqtool.options.SizeOptions` fields, None where not given."""
    from dataclasses import fields

    from mqtool.options import SizeOptions

    out = {}
    for f in fields(SizeOptions):
        v = options.get(_option_name(f.name))
        if v is None or f.name == "broker_conf":
            out[f.name] = v
            continue
        try:
            out[f.name] = int(v)
        except ValueError:
            raise UsageError(f"mqtool data source: option {_option_name(f.name)}={v!r} is not a number") from None
    return out
