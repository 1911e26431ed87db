"""``mqtool export``: messages (and verify findings) of many stores as a Parquet dataset.

Layout of ``OUT`` (Hive-style partitions, readable by Spark, pyarrow, DuckDB, pandas)::

    OUT/store=<store path>/topic=<topic>/part-*.parquet     message rows (columns of ``dump commitlog``)
    OUT/_findings/store=<store path>/part-*.parquet          with --findings: verify findings + summary rows

Partition values are escaped as Spark/Hive do (``/`` → ``%2F`` …); a value whose directory name would be too
long is named by a prefix and a hash, listed with its true value in ``OUT/_partitions.ndjson``; the ``_findings`` directory is skipped
by readers that load ``OUT`` itself. Every message file has the one schema of
:func:`mqtool.dataset.export_fields` (all families), so a mixed export reads back as one table. Two engines:
``local`` (pyarrow on this machine, a process pool over byte ranges, the default) and ``spark`` (the
``mqtool`` data source on any master).
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

from mqtool.errors import UsageError
from mqtool.dataset import export_fields, utf8_text
from mqtool.io import OutputDir, current_umask, prepare_output_dir
from mqtool.options import DumpOptions
from mqtool.ranges import FINDING_FIELDS, family_ranges
from mqtool.remote import shown, shown_row

FINDINGS_DIR = "_findings"
# Characters Spark's ExternalCatalogUtils.escapePathName escapes in partition directory names.
_ESCAPE = set('"#%\'*/:=?\\\x7f{[]^')


# Partition values: a directory is named after the value (escaped as Spark does) while that name fits in
# PART_NAME_MAX bytes (file systems allow 255 for a name, "topic=" included); a longer value is named by its
# first PART_PREFIX characters, "~" and 16 hex digits of its SHA-256, and listed in OUT/_partitions.ndjson
# with its true value. Both engines write through the same writer (--engine spark runs its range tasks).
PART_NAME_MAX = 240
PART_PREFIX = 32
PARTITIONS_FILE = "_partitions.ndjson"


def _utf8(s: str) -> bytes:
    return s.encode("utf-8", "surrogatepass")


def partition_value(value):
    """The value a partition directory is named after (None stays None)."""
    if value is None:
        return None
    s = str(value)
    text = utf8_text(s)         # a name that is not UTF-8 is named by a hash too (Parquet paths are UTF-8)
    if text == s and len(_utf8(hive_escape(s))) <= PART_NAME_MAX:
        return s
    import hashlib

    return f"{text[:PART_PREFIX]}~{hashlib.sha256(_utf8(s)).hexdigest()[:16]}"


def write_partition_index(outp: OutputDir, mapping: set, force: bool) -> None:
    """``OUT/_partitions.ndjson``: one line per shortened partition value, {column, dir, value} (sorted), so
    that every directory name maps back to its true value. Not written when no value was shortened."""
    if not mapping:
        return
    from mqtool.ndjson import dumps

    lines = [dumps({"column": c, "dir": f"{c}={hive_escape(partition_value(v))}", "value": v})
             for c, v in sorted(mapping)]
    outp.write(PARTITIONS_FILE, ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass"), overwrite=force)


def _shortened(col: str, values) -> set:
    return {(col, v) for v in values if v is not None and partition_value(v) != v}


def hive_escape(value) -> str:
    if value is None or value == "":
        return "__HIVE_DEFAULT_PARTITION__"
    s = str(value)
    return "".join(f"%{ord(c):02X}" if (c in _ESCAPE or ord(c) < 0x20) else c for c in s)


#: Arrow's I/O threads (default 8): each reserves allocator address space, so under an address-space limit
#: (``ulimit -v``) a worker process could not start them and aborted ("cannot allocate memory for thread-local
#: data"); the writers here write one file at a time, so two are plenty
ARROW_IO_THREADS = 2


def _require_pyarrow():
    try:
        import pyarrow
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        raise UsageError("export --engine local needs pyarrow: pip install 'mqtool[parquet]' "
                         "(or 'mqtool[spark]' for --engine spark too)") from None
    if pyarrow.io_thread_count() > ARROW_IO_THREADS:
        pyarrow.set_io_thread_count(ARROW_IO_THREADS)


# Parquet settings of the local engine: zstd without dictionary pages (on the bench store: 2.5x faster to write
# than with them, and smaller files, message columns being mostly unique values)
PARQUET_OPTIONS = {"compression": "zstd", "use_dictionary": False}
# A row group is written once this many rows or bytes (Arrow) are buffered for one file: large enough for
# readers and the writer's per-column costs, small enough to bound memory (per open file)
ROW_GROUP_ROWS = 65536
ROW_GROUP_BYTES = 16 * 1024 * 1024
# ... and whatever the number of files (topics), at most this much is buffered per writer (rows as dicts,
# then as Arrow): beyond it every file writes what it holds
MAX_PENDING_ROWS = 16384
MAX_BUFFERED_BYTES = 32 * 1024 * 1024


class _PartitionedWriter:
    """One Parquet file (``file_name``) per partition key under ``out``, rows buffered ``batch_rows`` at a
    time. Writes in place: the caller writes into a temporary directory and moves it when all went well."""

    def __init__(self, out: Path, fields: list[tuple[str, str]], part_cols: list[str],
                 batch_rows: int = 4096, family: str | None = None, row_fields: list[tuple[str, str]] | None = None,
                 file_name: str = "part-00000.parquet"):
        from mqtool.dataset import BatchBuilder

        self.out = out
        self.part_cols = part_cols
        self.builder = BatchBuilder([f for f in fields if f[0] not in part_cols], family, row_fields)
        self.schema = self.builder.schema
        self.batch_rows = batch_rows
        self.file_name = file_name
        # key -> (ParquetWriter, pending rows, pending batches, true values, [rows, bytes] of the pending batches)
        self._open: dict[tuple, tuple] = {}
        self.shortened: set = set()             # (column, true value) of the partitions named by a hash
        self.rows = 0
        self._pending = 0           # rows held as dicts, all files
        self._buffered = 0          # bytes held as Arrow batches, all files

    def add(self, row: dict) -> None:
        key = row.get(self.part_cols[0]) if len(self.part_cols) == 1 else tuple(map(row.get, self.part_cols))
        ent = self._open.get(key)
        if ent is None:
            ent = self._open[key] = self._new(key)
        ent[1].append(row)
        self.rows += 1
        self._pending += 1
        if len(ent[1]) >= self.batch_rows:
            self._flush(ent)
        elif self._pending >= MAX_PENDING_ROWS:
            for e in self._open.values():
                self._flush(e)

    def add_columns(self, key, columns: dict[str, list], n: int) -> None:
        """``n`` rows of the partition ``key`` (one partition column) given column-wise (``columns``: row
        key → values, see ``iter_range_columns``)."""
        self._add_batch(key, self.builder.batch_from_columns(columns, n))

    def _add_batch(self, key, batch) -> None:
        ent = self._open.get(key)
        if ent is None:
            ent = self._open[key] = self._new(key)
        if ent[1]:
            self._flush(ent)        # rows given as dicts before go first
        self._hold(ent, batch)
        self.rows += batch.num_rows
        self._flush(ent)

    def _hold(self, ent, batch) -> None:
        nbytes = batch.nbytes       # computed over every buffer: once per batch
        ent[2].append(batch)
        ent[4][0] += batch.num_rows
        ent[4][1] += nbytes
        self._buffered += nbytes

    def _new(self, key: tuple):
        import pyarrow.parquet as pq

        if len(self.part_cols) == 1:
            key = (key,)
        for c, v in zip(self.part_cols, key):
            self.shortened |= _shortened(c, [v])
        d = self.out.joinpath(*[f"{c}={hive_escape(partition_value(v))}" for c, v in zip(self.part_cols, key)])
        # a value named by a hash: its rows carry the true one (``<column>_full``, a constant of this file)
        full = {f"{c}_full": v for c, v in zip(self.part_cols, key) if v is not None and partition_value(v) != v}
        full = {n: v for n, v in full.items() if self.schema.get_field_index(n) >= 0}
        d.mkdir(parents=True, exist_ok=True)
        return (pq.ParquetWriter(str(d / self.file_name), self.schema, **PARQUET_OPTIONS), [], [], full, [0, 0])

    def _flush(self, ent, final: bool = False) -> None:
        """Pending rows → an Arrow batch; buffered batches → a row group when big enough (or ``final``)."""
        if ent[1]:
            self._hold(ent, self.builder.batch(ent[1]))
            self._pending -= len(ent[1])
            ent[1].clear()
        if self._buffered >= MAX_BUFFERED_BYTES and not final:
            for e in self._open.values():
                self._write(e)
        batches = ent[2]
        if batches and (final or ent[4][0] >= ROW_GROUP_ROWS or ent[4][1] >= ROW_GROUP_BYTES):
            self._write(ent)

    def _write(self, ent) -> None:
        import pyarrow as pa

        batches = ent[2]
        if batches:
            table = pa.Table.from_batches(batches, schema=self.schema)
            for name, value in ent[3].items():
                i = self.schema.get_field_index(name)
                table = table.set_column(i, self.schema.field(i),
                                         pa.array([utf8_text(value)] * table.num_rows, pa.string()))
            ent[0].write_table(table, row_group_size=ROW_GROUP_ROWS)
            self._buffered -= ent[4][1]
            ent[4][0] = ent[4][1] = 0
            batches.clear()

    def close(self, exc=None) -> None:
        err = None
        for ent in self._open.values():
            try:
                if exc is None:
                    self._flush(ent, final=True)
                ent[0].close()
            except BaseException as e:  # keep closing the others
                err = err or e
        self._open.clear()
        if err is not None and exc is None:
            raise err

    def __enter__(self) -> "_PartitionedWriter":
        return self

    def __exit__(self, et, exc, tb) -> None:
        self.close(exc)     # on an exception the exception goes on; the caller drops the temporary directory


def _stores(paths, fmt):
    """(absolute path, family) per input: the ``store`` column holds absolute paths, so that both engines
    (and executors on other machines, whose working directory differs) name a store the same way."""
    from mqtool.detect import detect

    out, seen = [], set()
    for p in paths:
        a = os.path.abspath(p)
        if a not in seen:       # a store given twice is exported once (its part files would collide)
            seen.add(a)
            out.append((a, detect(p, fmt)))
    return out


def _export_range_task(args) -> tuple[int, int, set]:
    """Pool task: the rows of one byte range written as ``part-<range>.parquet`` files (one per topic) under
    ``tmp``. Returns (rows, damaged ranges met, topics whose partition directory is named by a hash)."""
    import gc

    rng, opts, tmp, umask = args
    _require_pyarrow()              # (a forkserver worker: Arrow's thread count set here too)
    mod = family_ranges(rng.family)
    damaged = [0]

    def on_damage(d):
        damaged[0] += 1

    gc_was = gc.isenabled()
    gc.disable()        # rows are short-lived dicts without cycles: collections would only cost time
    umask_was = os.umask(umask)     # the caller's (a forkserver worker has the forkserver's)
    try:
        # one store per range: its partition directory is fixed, rows are split by topic only
        remote = shown(rng.file) != rng.file       # a remote store: its URL shown, not the local shadow
        with _PartitionedWriter(Path(tmp) / f"store={hive_escape(partition_value(shown(rng.store)))}",
                                [f for f in export_fields() if f[0] != "store"], ["topic"], family=rng.family,
                                row_fields=mod.ROW_FIELDS, file_name=f"part-{rng.index:05d}.parquet") as w:
            names = [n for n, _ in mod.ROW_FIELDS if n != "store"]
            chunks = (mod.iter_range_columns(rng, opts, names, on_damage=on_damage)
                      if hasattr(mod, "iter_range_columns") else None)
            if chunks is not None:      # column-wise (RocketMQ with the compiled helper): no dict per row
                for by_topic in chunks:
                    for topic, (columns, n) in by_topic.items():
                        if remote and columns.get("file") is not None:
                            col = columns["file"]
                            columns = dict(columns, file=[shown(v) for v in (
                                col.to_pylist() if hasattr(col, "to_pylist") else col)])
                        w.add_columns(topic, columns, n)
            else:
                add = w.add
                for row in mod.iter_range_rows(rng, opts, on_damage=on_damage):
                    add(shown_row(row) if remote else row)
    finally:
        os.umask(umask_was)
        if gc_was:
            gc.enable()
    return w.rows, damaged[0], w.shortened


def export_local(paths, out, fmt=None, split_size=None, body="none", findings=False, force=False,
                 jobs: int = 1, sizes: dict | None = None, runner=None) -> dict:
    """Write the dataset with pyarrow on this machine: the byte ranges of every store in a process pool of
    ``jobs`` workers (0 = all cores), each range into its own part files. Everything is written into a
    temporary directory inside ``out`` and moved into place at the end; on any failure nothing is left
    (a directory this call created is removed again). Returns counts (``notes``: the damage notes of the stores
    as a whole, e.g. Kafka's ``segment-gap``, each counted in ``damaged``). ``sizes``: the
    :class:`~mqtool.options.SizeOptions` fields for the verify findings. ``runner``: what maps the range
    tasks instead of the process pool (``export --engine spark``: :class:`mqtool.spark.export.RangeRunner`)."""
    from mqtool.ranges import runner_for

    _require_pyarrow()
    stores = _stores(paths, fmt)
    created = not os.path.lexists(out)
    outp = prepare_output_dir(out, [p for p, _ in stores], force)
    counts = {"messages": 0, "rows": 0, "findings": 0, "stores": len(stores), "damaged": 0}
    notes: list[str] = []           # damage of a store as a whole (no range meets it), worded as dump words it
    tmp = outp.scratch_dir()
    try:
        for path, fam in stores:
            whole = getattr(family_ranges(fam), "store_damage", None)
            if whole is not None:
                notes += [shown(n) for n in whole(path)]
        counts["damaged"] += len(notes)
        opts = DumpOptions(body=body, jobs=jobs, split_size=split_size)
        ranges = [r for path, fam in stores for r in family_ranges(fam).plan(path, split_size)]
        runner = runner or runner_for(opts, ranges)
        plain = DumpOptions(body=body)
        mask = current_umask()
        shortened = _shortened("store", [shown(p) for p, _ in stores])
        written: dict[str, int] = {}        # rows per store
        for r, (rows, damaged, short) in zip(ranges, runner.imap(_export_range_task,
                                                                 [(r, plain, str(tmp / "m"), mask) for r in ranges])):
            written[r.store] = written.get(r.store, 0) + rows
            counts["rows"] += rows
            counts["damaged"] += damaged
            shortened |= short
        if findings:
            from mqtool.dataset import verify_rows

            per_store = runner.findings(stores, sizes) if hasattr(runner, "findings") else (
                verify_rows(path, fam, sizes=sizes) for path, fam in stores)
            for rows in per_store:
                with _PartitionedWriter(tmp / "f", FINDING_FIELDS, ["store"]) as w:
                    for row in rows:
                        w.add(shown_row(row))
                counts["findings"] += w.rows
        # each store=… partition replaces an earlier export's as a whole (--force), links never followed
        outp.replace_entries_in(tmp / "m")
        outp.replace_entries_in(tmp / "f", (FINDINGS_DIR,))
        write_partition_index(outp, shortened, force)
    except BaseException:
        outp.remove_scratch(tmp)
        if created:
            shutil.rmtree(outp.path, ignore_errors=True)
        raise
    outp.remove_scratch(tmp)
    # a store's partition holds just this export's rows (replaced as a whole): RocketMQ and LiteMQ rows are
    # messages; Kafka rows are batches, whose records are counted from the dataset. "messages" counts both
    # kinds of message; "batches" and "records" say what the Kafka rows are.
    counts["records"] = count_messages(outp.path, [(shown(p), f) for p, f in stores if f == "kafka"])
    counts["batches"] = sum(written.get(p, 0) for p, f in stores if f == "kafka")
    counts["messages"] = counts["records"] + sum(written.get(p, 0) for p, f in stores if f != "kafka")
    counts["notes"] = notes
    return counts


def export_spark(paths, out, fmt=None, split_size=None, body="none", findings=False, force=False,
                 master=None, spark=None, sizes: dict | None = None, partition_size=None,
                 max_partitions=None) -> dict:
    """:func:`export_local` with its range tasks (and the findings, one task per store) run on Spark (the
    session Spark's configuration gives, or ``master``): the same files and counts; a file an executor
    cannot read fails the export, naming the file (see :mod:`mqtool.spark.export`)."""
    from mqtool.spark.export import RangeRunner
    from mqtool.spark.session import describe, get_context

    spark = spark or get_context(master)
    describe(spark, "mqtool export", f"mqtool export: {len(paths)} store(s): " + ", ".join(map(str, paths)))
    return export_local(paths, out, fmt, split_size, body, findings, force, sizes=sizes,
                        runner=RangeRunner(spark, partition_size or split_size, max_partitions))


def count_messages(outp: Path, stores) -> int:
    """Messages in the dataset written to ``outp``: RocketMQ and LiteMQ rows are messages; Kafka rows are
    batches, whose records count by their header (:func:`mqtool.kafka.records.header_records`, control
    batches excluded) — the number ``verify`` and ``info`` give."""
    if not stores:
        return 0
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    from formats import kafka as K

    n = 0
    for path, fam in stores:
        d = Path(outp) / f"store={hive_escape(partition_value(path))}"
        if not d.exists():
            continue
        if fam != "kafka":
            n += count_rows(d)
            continue
        cols = ["kind", "count", "is_control", "crc_ok", "magic", "size"]
        for b in ds.dataset(str(d), format="parquet", partitioning="hive").to_batches(columns=cols):
            data = pc.and_(pc.equal(b["kind"], "batch"), pc.invert(pc.fill_null(b["is_control"], False)))
            count = pc.max_element_wise(pc.fill_null(b["count"], 0), 0)
            room = pc.max_element_wise(pc.subtract(pc.fill_null(b["size"], 0), K.V2_HEADER_SIZE), 0)
            v2 = pc.if_else(pc.fill_null(b["crc_ok"], False), pc.min_element_wise(count, room), 0)
            per = pc.if_else(pc.equal(pc.fill_null(b["magic"], "2"), "2"), v2, count)    # one schema: magic is text
            n += pc.sum(pc.if_else(data, per, 0)).as_py() or 0
    return n


def count_rows(path: Path) -> int:
    import pyarrow.dataset as ds

    if not Path(path).exists():
        return 0
    return ds.dataset(str(path), format="parquet", partitioning="hive").count_rows()


def read_dataset(path, fields: list[tuple[str, str]], part_cols: list[str]):
    """Read an exported dataset back as a pyarrow Table with the partition columns typed as strings and the
    columns of ``fields`` (a family's ``ROW_FIELDS``) in that family's types (see :mod:`mqtool.dataset`)."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    from mqtool.dataset import to_family_types

    part = ds.partitioning(pa.schema([(c, pa.string()) for c in part_cols]), flavor="hive")
    return to_family_types(ds.dataset(str(path), format="parquet", partitioning=part).to_table(), fields)
