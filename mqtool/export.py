"""``mqtool export``: messages (and verify findings) of many stores as a Parquet dataset.

Layout of ``OUT`` (Hive-style partitions, readable by Spark, pyarrow, DuckDB, pandas)::

    OUT/store=<store path>/topic=<topic>/part-*.parquet     message rows (columns of ``dump commitlog``)
    OUT/_findings/store=<store path>/part-*.parquet          with --findings: verify findings + summary rows

Partition values are escaped as Spark/Hive do (``/`` → ``%2F`` …); the ``_findings`` directory is skipped
by readers that load ``OUT`` itself. Two engines give the same dataset: ``local`` (pyarrow, in this process,
the default) and ``spark`` (the ``mqtool`` data source on any master).
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from mqtool.errors import OutputError, UsageError
from mqtool.io import AtomicWriter, move_output, prepare_output_dir
from mqtool.options import DumpOptions
from mqtool.ranges import FINDING_FIELDS, family_ranges

FINDINGS_DIR = "_findings"
# Characters Spark's ExternalCatalogUtils.escapePathName escapes in partition directory names.
_ESCAPE = set('"#%\'*/:=?\\\x7f{[]^')


# Partition values: a directory is named after the value (escaped as Spark does) while that name fits in
# PART_NAME_MAX bytes (file systems allow 255 for a name, "topic=" included); a longer value is named by its
# first PART_PREFIX characters, "~" and 16 hex digits of its SHA-256, and listed in OUT/_partitions.ndjson
# with its true value. Both engines apply the same rule (Spark through the same expression, _spark_partition).
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
    if len(_utf8(hive_escape(s))) <= PART_NAME_MAX:
        return s
    import hashlib

    return f"{s[:PART_PREFIX]}~{hashlib.sha256(_utf8(s)).hexdigest()[:16]}"


def _spark_partition(col):
    """:func:`partition_value` as a Spark column expression (escaped length: bytes + 2 per escaped char)."""
    from pyspark.sql import functions as F

    return F.when(_spark_escaped_length(col) <= PART_NAME_MAX, col).otherwise(
        F.concat(F.substring(col, 1, PART_PREFIX), F.lit("~"), F.substring(F.sha2(col, 256), 1, 16)))


def _spark_escaped_length(col):
    from pyspark.sql import functions as F

    kept = "[^" + "".join("\\" + c if c in "\\[]^-" else c for c in sorted(_ESCAPE - {"\x7f"})) + \
        "\\x{7f}\\x{00}-\\x{1f}]"
    return F.octet_length(col) + 2 * F.length(F.regexp_replace(col, kept, ""))


def write_partition_index(outp: Path, mapping: dict, force: bool) -> None:
    """``OUT/_partitions.ndjson``: one line per shortened partition value, {column, dir, value} (sorted), so
    that every directory name maps back to its true value. Not written when no value was shortened."""
    if not mapping:
        return
    from mqtool.render import dumps

    lines = [dumps({"column": c, "dir": f"{c}={hive_escape(partition_value(v))}", "value": v})
             for c, v in sorted(mapping)]
    with AtomicWriter(outp / PARTITIONS_FILE, overwrite=force) as f:
        f.write(("\n".join(lines) + "\n").encode("utf-8", "surrogatepass"))


def _shortened(col: str, values) -> set:
    return {(col, v) for v in values if v is not None and partition_value(v) != v}


def hive_escape(value) -> str:
    if value is None or value == "":
        return "__HIVE_DEFAULT_PARTITION__"
    s = str(value)
    return "".join(f"%{ord(c):02X}" if (c in _ESCAPE or ord(c) < 0x20) else c for c in s)


def _require_pyarrow():
    try:
        import pyarrow  # noqa: F401
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        raise UsageError("export needs pyarrow: pip install 'mqtool[spark]'") from None


class _PartitionedWriter:
    """One Parquet file per partition key, each written through :class:`AtomicWriter`."""

    def __init__(self, out: Path, fields: list[tuple[str, str]], part_cols: list[str], overwrite: bool,
                 batch_rows: int = 4096):
        from mqtool.spark.schema import arrow_schema

        self.out = out
        self.part_cols = part_cols
        self.schema = arrow_schema([f for f in fields if f[0] not in part_cols])
        self.overwrite = overwrite
        self.batch_rows = batch_rows
        self._open: dict[tuple, tuple] = {}     # key -> (AtomicWriter, ParquetWriter, pending rows)
        self.shortened: set = set()             # (column, true value) of the partitions named by a hash
        self.rows = 0

    def add(self, row: dict) -> None:
        key = tuple(row.get(c) for c in self.part_cols)
        ent = self._open.get(key)
        if ent is None:
            ent = self._open[key] = self._new(key)
        ent[2].append(row)
        self.rows += 1
        if len(ent[2]) >= self.batch_rows:
            self._flush(ent)

    def _new(self, key: tuple):
        import pyarrow.parquet as pq

        for c, v in zip(self.part_cols, key):
            self.shortened |= _shortened(c, [v])
        d = self.out.joinpath(*[f"{c}={hive_escape(partition_value(v))}" for c, v in zip(self.part_cols, key)])
        d.mkdir(parents=True, exist_ok=True)
        aw = AtomicWriter(d / "part-00000.parquet", overwrite=self.overwrite)
        f = aw.__enter__()
        try:
            pw = pq.ParquetWriter(f, self.schema, compression="zstd")
        except BaseException:
            aw.__exit__(*__import__("sys").exc_info())
            raise
        return (aw, pw, [])

    def _flush(self, ent) -> None:
        from mqtool.spark.schema import to_batches

        for b in to_batches(ent[2], self.schema, batch_rows=len(ent[2]) or 1):
            ent[1].write_batch(b)
        ent[2].clear()

    def close(self, exc=None) -> None:
        err = None
        for ent in self._open.values():
            try:
                if exc is None:
                    self._flush(ent)
                ent[1].close()
            except BaseException as e:  # keep closing the others
                err = err or e
            ent[0].__exit__(type(exc) if exc else None, exc, None)
        self._open.clear()
        if err is not None and exc is None:
            raise err

    def __enter__(self) -> "_PartitionedWriter":
        return self

    def __exit__(self, et, exc, tb) -> None:
        self.close(exc)     # on an exception: files discarded, the exception goes on


def _stores(paths, fmt):
    """(absolute path, family) per input: the ``store`` column holds absolute paths, so that both engines
    (and executors on other machines, whose working directory differs) name a store the same way."""
    from mqtool.detect import detect

    return [(os.path.abspath(p), detect(p, fmt)) for p in paths]


def export_local(paths, out, fmt=None, split_size=None, body="none", findings=False, force=False,
                 jobs: int = 1) -> dict:
    """Write the dataset with pyarrow in this process. Returns counts."""
    _require_pyarrow()
    stores = _stores(paths, fmt)
    outp = prepare_output_dir(out, [p for p, _ in stores], force)
    counts = {"messages": 0, "findings": 0, "stores": len(stores), "damaged": 0}
    opts = DumpOptions(body=body)

    shortened = _shortened("store", [p for p, _ in stores])

    def on_damage(d):
        counts["damaged"] += 1

    for path, fam in stores:
        mod = family_ranges(fam)
        with _PartitionedWriter(outp, mod.ROW_FIELDS, ["store", "topic"], force) as w:
            for rng in mod.plan(path, split_size):
                for row in mod.iter_range_rows(rng, opts, on_damage=on_damage):
                    row["store"] = path
                    w.add(row)
        counts["messages"] += w.rows
        shortened |= w.shortened
    if findings:
        from mqtool.spark.source import verify_rows

        for path, fam in stores:
            with _PartitionedWriter(outp / FINDINGS_DIR, FINDING_FIELDS, ["store"], force) as w:
                for row in verify_rows(path, fam):
                    w.add(row)
            counts["findings"] += w.rows
            shortened |= w.shortened
    write_partition_index(outp, shortened, force)
    return counts


CORRUPT_COL = "_mqtool_damage"


def export_spark(paths, out, fmt=None, split_size=None, body="none", findings=False, force=False,
                 master=None, spark=None, partition_size=None, max_partitions=None) -> dict:
    """Write the dataset through the ``mqtool`` data source on Spark (the session Spark's configuration
    gives, or ``master``). Damaged ranges are counted in the same pass (corrupt-record rows observed on
    their way to the writer, then dropped), so ``damaged`` equals the embedded count; a file an executor
    cannot read fails the export, naming the file."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    from mqtool.spark.session import describe, get_session, spark_errors

    stores = _stores(paths, fmt)
    spark = spark or get_session(master)
    outp = prepare_output_dir(out, [p for p, _ in stores], force)
    fams = sorted({f for _, f in stores})
    tmp = Path(tempfile.mkdtemp(prefix=".mqtool-tmp-spark-", dir=outp))
    counts = {"messages": 0, "findings": 0, "stores": len(stores), "damaged": 0}
    shortened = _shortened("store", [p for p, _ in stores])
    try:
        with spark_errors("export on Spark"):
            for fam in fams:
                mine = [p for p, f in stores if f == fam]
                describe(spark, "mqtool export", f"mqtool export: {fam} messages of {len(mine)} store(s): "
                         + ", ".join(mine))
                r = spark.read.format("mqtool").option("format", fam).option("body", body) \
                    .option("columnNameOfCorruptRecord", CORRUPT_COL)
                if split_size:
                    r = r.option("splitSize", str(split_size))
                if partition_size:
                    r = r.option("maxPartitionBytes", str(partition_size))
                if max_partitions:
                    r = r.option("maxPartitions", str(max_partitions))
                obs = Observation(f"mqtool-damage-{fam}")
                df = r.load(mine if len(mine) > 1 else mine[0])
                long_topic = F.when(_spark_escaped_length(F.col("topic")) > PART_NAME_MAX, F.col("topic"))
                df = df.observe(obs, F.count(F.col(CORRUPT_COL)).alias("damaged"),
                                F.collect_set(long_topic).alias("long_topics"))
                df.where(F.col(CORRUPT_COL).isNull()).drop(CORRUPT_COL) \
                    .withColumn("store", _spark_partition(F.col("store"))) \
                    .withColumn("topic", _spark_partition(F.col("topic"))) \
                    .write.mode("append").partitionBy("store", "topic").parquet(str(tmp / "m"))
                got = obs.get
                counts["damaged"] += int(got.get("damaged") or 0)
                shortened |= _shortened("topic", got.get("long_topics") or [])
            if findings:
                r = spark.read.format("mqtool").option("rows", "verify")
                for fam in fams:
                    mine = [p for p, f in stores if f == fam]
                    describe(spark, "mqtool export", f"mqtool export: {fam} verify findings of {len(mine)} "
                             "store(s): " + ", ".join(mine))
                    r.option("format", fam).load(mine if len(mine) > 1 else mine[0]) \
                        .withColumn("store", _spark_partition(F.col("store"))) \
                        .write.mode("append").partitionBy("store").parquet(str(tmp / "f"))
        _move_tree(tmp / "m", outp, force)
        if findings and (tmp / "f").exists():
            _move_tree(tmp / "f", outp / FINDINGS_DIR, force)
        write_partition_index(outp, shortened, force)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    counts["messages"] = count_rows(outp)
    if findings:
        counts["findings"] = count_rows(outp / FINDINGS_DIR)
    return counts


def _move_tree(src: Path, dst: Path, force: bool) -> None:
    """Move Spark's output (partition dirs, part files) into ``dst``; Spark's own markers are dropped."""
    if not src.exists():
        return
    dst.mkdir(parents=True, exist_ok=True)
    for p in sorted(src.iterdir()):
        if p.name.startswith(("_", ".")):
            continue
        target = dst / p.name
        if target.exists():
            if p.is_dir() and target.is_dir():
                _move_tree(p, target, force)
                continue
            if not force:
                raise OutputError("file exists (use --force to overwrite)", str(target))
            if target.is_dir():
                shutil.rmtree(target)
            else:
                target.unlink()
        move_output(p, target)


def count_rows(path: Path) -> int:
    import pyarrow.dataset as ds

    if not Path(path).exists():
        return 0
    return ds.dataset(str(path), format="parquet", partitioning="hive").count_rows()


def read_dataset(path, fields: list[tuple[str, str]], part_cols: list[str]):
    """Read an exported dataset back as a pyarrow Table with the partition columns typed as strings."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    part = ds.partitioning(pa.schema([(c, pa.string()) for c in part_cols]), flavor="hive")
    return ds.dataset(str(path), format="parquet", partitioning=part).to_table()
