"""``KafkaVerifier``: the walk over log dirs, partitions and segments that runs each check (the checks are
its mixins, one module per group: :mod:`.log`, :mod:`.indexes`, :mod:`.partition`)."""
from __future__ import annotations

from formats import kafka as K
from mqtool.errors import InputError
from mqtool.findings import ERROR, INFO, WARNING, Finding, Summary
from mqtool.kafka.store import LogDir, Partition
from mqtool.kafka.interval import index_interval
from mqtool.kafka.rebuild.txn import TxnTracker
from mqtool.kafka.verify.indexes import IndexChecks
from mqtool.kafka.verify.log import LogChecks
from mqtool.kafka.verify.partition import PartitionChecks
from mqtool.kafka.verify.state import SegmentSeen


class KafkaVerifier(LogChecks, IndexChecks, PartitionChecks):
    def __init__(self, opts, part: str = "store"):
        self.opts = opts
        self.part = part
        self.deep = bool(getattr(opts, "deep", False))
        self.interval = K.DEFAULT_INDEX_INTERVAL_BYTES      # per partition: see run_partition
        self.intervals: dict = {}
        self.summary = Summary()
        self.salvage = None
        self.stats = {"segments": 0, "batches": 0, "records": 0, "bytes": 0, "partitions": 0}
        self.messages = 0           # records of data batches, by their headers (as info and report count)

    # -- helpers
    def _f(self, sev, code, file, position, offset, message, expected=None, actual=None, span=None):
        f = Finding(sev, f"kafka.{code}", str(file) if file is not None else None, position, offset, message,
                    expected, actual, span)
        self.summary.add(f)
        return f

    # -- log dirs
    def run_logdirs(self, logdirs: list[LogDir], only_base: int | None = None, only_kind: str | None = None):
        for ld in logdirs:
            leos = {}
            if ld.bootstrap_checkpoint is not None and only_base is None:
                yield from self._guard(self.check_snapshot_log(ld.bootstrap_checkpoint))
            for p in ld.partitions:
                leo = yield from self.run_partition(p, only_base, only_kind)
                if p.topic is not None:
                    leos[(p.topic, p.partition)] = (leo, p)
            if ld.path is not None and only_base is None and self.part == "store":
                yield from self._guard(self.check_logdir_checkpoints(ld, leos))
        self.summary.extra.update(self.stats)
        if self.intervals:
            self.summary.extra["index_interval_bytes"] = self.intervals

    # -- partitions
    def run_partition(self, p: Partition, only_base=None, only_kind=None):
        self.stats["partitions"] += 1
        txn = TxnTracker()
        if self.part in ("store", "index"):
            dec = index_interval(p, self.opts)
            self.interval = dec.value
            self.intervals[p.label] = dec.to_dict("bytes")
            if dec.warning:
                yield self._f(INFO if dec.severity == "info" else WARNING, "index-interval", p.path, None, None, dec.warning, dec.value,
                              list(dec.candidates))
        seen_all: list[SegmentSeen] = []
        prev_last = None
        for seg in p.transient:
            for f in (seg.log, seg.index, seg.timeindex, seg.txnindex):
                if f is not None:
                    yield self._f(INFO, "transient-file", f, None, None,
                                  f"{seg.suffix} file (segment {seg.suffix[1:]} by the broker; not part of the live log)")
        for seg in p.segments:
            if only_base is not None and seg.base_offset != only_base:
                continue
            seen = SegmentSeen(seg.base_offset)
            prev_last = yield from self.check_segment(seg, seen, txn, prev_last, seg is p.segments[-1], only_kind)
            seen_all.append(seen)
        yield from self._segment_gaps(p, seen_all)
        if only_base is None:
            for _end, _epoch, f in p.kraft_snapshots:
                yield from self._guard(self.check_snapshot_log(f))
        leo = 0
        if p.segments:
            leo = p.segments[-1].base_offset
        for s in seen_all:
            if s.last_offset is not None:
                leo = max(leo, s.last_offset + 1)
        if only_base is None and self.part == "store":
            yield from self._orphans(p)
            yield from self._guard(self.check_partition_files(p, seen_all, leo))
        return leo

    def check_segment(self, seg, seen: SegmentSeen, txn: TxnTracker, prev_last, active: bool, only_kind=None):
        """One segment: its ``.log`` (offsets following ``prev_last``, the partition's open transactions in
        ``txn``), then its index files against what that pass saw (into ``seen``); returns the last offset so
        far. (``verify --engine spark`` runs it per segment on the executors: mqtool.kafka.verifyplan.)"""
        if seg.log is not None:
            prev_last = yield from self._guard(self.check_log(seg, seen, txn, prev_last, active=active), prev_last)
        if self.part in ("store", "index") and only_kind in (None, "index", "log"):
            yield from self._guard(self.check_offset_index(seg, seen))
        if self.part in ("store", "index") and only_kind in (None, "timeindex", "log"):
            yield from self._guard(self.check_time_index(seg, seen))
        if self.part in ("store", "index") and only_kind in (None, "txnindex", "log"):
            yield from self._guard(self.check_txn_index(seg, seen))
        return prev_last

    def _guard(self, gen, default=None):
        """Run one check; a file it cannot read (FIFO, device, directory, symlink loop, permissions, vanished)
        becomes a ``file-unreadable`` finding and the walk goes on with the next file."""
        try:
            return (yield from gen)
        except InputError as e:
            yield self._f(ERROR, "file-unreadable", e.file, e.offset, None, f"cannot read: {e.message}")
            return default
