"""The ``mqtool`` PySpark data source (``pyspark.sql.datasource``, PySpark 4.x).

``spark.read.format("mqtool").option("format", "rocketmq"|"litemq"|"kafka"|"auto").load(paths)``:

* messages mode (default): one partition per byte range of every log segment (option ``splitSize``,
  default 128 MiB); each partition resyncs to the first record that starts in its range and yields the
  rows of ``mqtool dump commitlog`` for the records that start there, as Arrow record batches, with a
  ``store`` column first (the store path as given). Union over partitions == the embedded scan.
* verify mode (``option("mode", "verify")``): one partition per store, rows are that store's verify
  findings (the NDJSON objects of ``mqtool verify store``) plus one ``kind = "summary"`` row per store.

Options: ``format`` (default auto), ``mode`` (messages|verify), ``splitSize`` (bytes or 64K/128M/1G),
``body`` (none|text|hex|base64), ``includeBlank`` (false), ``deep`` (false; Kafka: record rows too, with
their keys/values when ``body`` is set), ``topic``, ``key``, ``tag`` (the dump filters),
``maxMessageSize``, ``batchRows`` (rows per Arrow batch, 4096), ``maxPartitions`` (group consecutive
ranges into at most this many partitions). Paths may be store roots, commitlog dirs or segment files, and
globs (expanded on the driver); they must be readable by the executors under the same name (local disk, NFS, a mounted bucket).
"""
from __future__ import annotations

import glob
import json
import os

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from mqtool.errors import UsageError
from mqtool.ranges import FINDING_FIELDS, family_ranges, parse_size
from mqtool.spark import schema as S

FAMILIES = ("rocketmq", "litemq", "kafka")


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
        if glob.has_magic(p):
            hits = sorted(glob.glob(p))
            if not hits:
                raise UsageError(f"mqtool data source: no path matches {p!r}")
            out.extend(hits)
        else:
            if not os.path.lexists(p):
                raise UsageError(f"mqtool data source: no such path {p!r}")
            out.append(p)
    return out


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


def group_ranges(ranges: list, max_partitions: int | None) -> list[list]:
    """Consecutive ranges in at most ``max_partitions`` groups of near-equal count (order kept)."""
    if not max_partitions or len(ranges) <= max_partitions:
        return [[r] for r in ranges]
    n = len(ranges)
    bounds = [n * i // max_partitions for i in range(max_partitions + 1)]
    return [ranges[a:b] for a, b in zip(bounds, bounds[1:]) if b > a]


class StorePartition(InputPartition):
    def __init__(self, path: str, family: str):
        self.path = path
        self.family = family


class MqtoolDataSource(DataSource):
    """Registered as ``mqtool``."""

    @classmethod
    def name(cls) -> str:
        return "mqtool"

    def _mode(self) -> str:
        mode = str(self.options.get("mode", "messages")).lower()
        if mode not in ("messages", "verify"):
            raise UsageError(f"mqtool data source: unknown mode {mode!r} (messages or verify)")
        return mode

    def _stores(self) -> list[tuple[str, str]]:
        if not hasattr(self, "_stores_cache"):
            self._stores_cache = resolve_families(expand_paths(self.options), self.options.get("format"))
        return self._stores_cache

    def row_fields(self) -> list[tuple[str, str]]:
        if self._mode() == "verify":
            return FINDING_FIELDS
        fams = sorted({f for _, f in self._stores()})
        if len(fams) != 1:
            raise UsageError(f"mqtool data source: the paths hold several families ({', '.join(fams)}); "
                             "load each family separately (option format)")
        return family_ranges(fams[0]).ROW_FIELDS

    def schema(self):
        return S.spark_ddl(self.row_fields())

    def reader(self, schema):
        return MqtoolReader(self.options, self._stores(), self._mode(), self.row_fields())


class MqtoolReader(DataSourceReader):
    def __init__(self, options, stores, mode, fields):
        self.stores = stores
        self.mode = mode
        self.fields = fields
        self.split = parse_size(options.get("splitSize"))
        self.body = str(options.get("body", "none")).lower()
        self.include_blank = _truthy(options.get("includeBlank", "false"))
        self.deep = _truthy(options.get("deep", "false"))           # kafka: record rows too
        self.topic = options.get("topic")
        self.key = options.get("key")
        self.tag = options.get("tag")
        self.batch_rows = int(options.get("batchRows", S.BATCH_ROWS))
        mp = options.get("maxPartitions")
        self.max_partitions = int(mp) if mp else None
        mms = options.get("maxMessageSize")
        self.max_message_size = parse_size(mms) if mms else 4 * 1024 * 1024

    def partitions(self):
        if self.mode == "verify":
            return [StorePartition(p, f) for p, f in self.stores]
        ranges = []
        for p, f in self.stores:
            ranges.extend(family_ranges(f).plan(p, self.split))
        return [RangePartition(g) for g in group_ranges(ranges, self.max_partitions)] or [StorePartition("", "")]

    def read(self, partition):
        schema = S.arrow_schema(self.fields)
        if isinstance(partition, StorePartition):
            if not partition.path:
                return iter(())
            return S.to_batches(verify_rows(partition.path, partition.family, self.max_message_size), schema)
        return S.to_batches(self._message_rows(partition.ranges), schema, self.batch_rows)

    def _message_rows(self, ranges):
        from mqtool.options import DumpOptions

        opts = DumpOptions(topic=self.topic, key=self.key, tag=self.tag, body=self.body,
                           include_blank=self.include_blank, max_message_size=self.max_message_size,
                           deep=self.deep, print_data=self.deep and self.body != "none")
        for rng in ranges:
            store = rng.store
            for row in family_ranges(rng.family).iter_range_rows(rng, opts):
                row["store"] = store
                yield row


def verify_rows(path: str, family: str, max_message_size: int = 4 * 1024 * 1024):
    """Findings rows (and a summary row) of ``verify store`` on one store, run in one process."""
    from mqtool.detect import family_module
    from mqtool.options import VerifyOptions

    from mqtool.causes import linked

    ops = family_module(family, "ops")
    findings, summary_fn = linked(*ops.verify("store", path, VerifyOptions(max_message_size=max_message_size,
                                                                          jobs=1, progress=False)), path, family)
    for f in findings:
        yield S.finding_row(path, f.to_dict())
    yield S.finding_row(path, summary_fn().to_dict())
