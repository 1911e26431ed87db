"""Kafka checks → findings. One pass over each ``.log``; index files are checked against what that pass saw.

Stable finding codes (``kafka.*``); severity in brackets:

log      segment-gap [E; I when the partition looks compacted] (offsets between two segments are in none),
         crc-mismatch [E], skipped-bytes [E], partial-tail [W], zero-tail [I], offset-below-base [E],
         offset-not-increasing [E], offset-overflow [E], records-undecodable [E], record-offsets [E],
         payload-inflate-failed [E] (a compressed batch whose payload does not inflate; checked without --deep),
         inner-crc-mismatch [E], offset-gaps [I], transient-file [I], empty-segment [I]
.index   index-missing [I], index-size [E], index-sanity [E], index-garbage-tail [E], index-preallocated [I],
         index-not-monotonic [E], index-position-not-batch [E], index-offset-mismatch [E],
         index-append-path [I] (entry written by a multi-batch append: offset of a later batch's end),
         index-covers-prefix [W], index-noncanonical [I]
.timeindex  timeindex-missing [I], timeindex-size [E], timeindex-sanity [E], timeindex-garbage-tail [E],
         timeindex-preallocated [I], timeindex-out-of-order [E], timeindex-timestamp-mismatch [E],
         timeindex-offset-not-found [E], timeindex-record-offset [I] (Kafka 2.x: offset of the record with
         the max timestamp inside the batch, not the batch's last offset), timeindex-no-final-entry [I],
         timeindex-covers-prefix [W], timeindex-noncanonical [I]
.txnindex   txnindex-size [E], txnindex-no-marker [E], txnindex-missing-entry [E], txnindex-mismatch [W]
.snapshot   snapshot-crc [E], snapshot-malformed [E], snapshot-beyond-log-end [W], snapshot-stray [I; W when its
         offset lies between two segment bases] (no .log of that base; Kafka deletes it at load)
orphans  segment-log-missing [E] (.index/.timeindex/.txnindex of a middle or last segment whose .log is gone),
         orphan-index [W] (index files before the first .log, or in a partition with no .log)
checkpoints checkpoint-malformed [E], checkpoint-negative [E], checkpoint-beyond-log-end [W], checkpoint-unknown-partition [W],
         leader-epoch-beyond-log-end [E], leader-epoch-mismatch [W], leader-epoch-mid-batch [W],
         partition-metadata-malformed [E]
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from pathlib import Path

from formats import kafka as K
from mqtool.errors import InputError
from mqtool.findings import ERROR, INFO, WARNING, Finding, Summary, checkpoint_value_problems
from mqtool.io import map_input
from mqtool.kafka import indexfiles as F
from mqtool.codecs import CodecError, kafka_codec_name as codec_name
from mqtool.kafka.store import (LogDir, Partition, Segment, looks_compacted, orphan_segments,
                                 stray_snapshots)
from mqtool.kafka.interval import index_interval
from mqtool.kafka.rebuild import Recoverer, TxnTracker, control_type_of
from mqtool.kafka.records import Batch, LimitExceeded, header_records, iter_records, records_area
from mqtool.kafka.scan import Damage, scan


@dataclass
class SegmentSeen:
    """What one pass over a segment's .log saw (enough to check its index files)."""

    base: int
    size: int = 0
    batches: int = 0
    records: int = 0
    by_position: dict = field(default_factory=dict)      # position -> (base, last, max_ts)
    by_last: dict = field(default_factory=dict)          # lastOffset -> (position, max_ts)
    bases: list = field(default_factory=list)            # sorted base offsets (for containment lookups)
    spans: list = field(default_factory=list)            # (base, last, max_ts) parallel to bases
    aborts: set = field(default_factory=set)             # (pid, marker offset)
    epochs: list = field(default_factory=list)           # runs [epoch, first offset, last offset] of v2 PLEs
    first_offset: int | None = None
    boundary_gap: tuple | None = None                    # (previous segment's last offset, this first base)
    last_offset: int | None = None
    canonical = None                                     # SegmentIndexes from the recovery rule
    interior_gaps: int = 0
    canonical_nofinal: list | None = None


class KafkaVerifier:
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
            if seg.log is not None:
                prev_last = yield from self._guard(
                    self.check_log(seg, seen, txn, prev_last, active=seg is p.segments[-1]), prev_last)
            if self.part in ("store", "index") and only_kind in (None, "index", "log"):
                yield from self._guard(self.check_offset_index(seg, seen))
            if self.part in ("store", "index") and only_kind in (None, "timeindex", "log"):
                yield from self._guard(self.check_time_index(seg, seen))
            if self.part in ("store", "index") and only_kind in (None, "txnindex", "log"):
                yield from self._guard(self.check_txn_index(seg, seen))
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

    def _guard(self, gen, default=None):
        """Run one check; a file it cannot read (FIFO, device, directory, symlink loop, permissions, vanished)
        becomes a ``file-unreadable`` finding and the walk goes on with the next file."""
        try:
            return (yield from gen)
        except InputError as e:
            yield self._f(ERROR, "file-unreadable", e.file, e.offset, None, f"cannot read: {e.message}")
            return default

    def _segment_gaps(self, p: Partition, seen_all: list[SegmentSeen]):
        """Offsets missing between two segments. Retention deletes only from the start and a roll starts the
        new segment at the next offset, so a gap at a segment boundary means a deleted (or lost) segment,
        unless the partition is compacted (the cleaner keeps segment base offsets while removing records):
        an error (data lost) when nothing else in the partition shows compaction, info otherwise."""
        gaps = [s for s in seen_all if s.boundary_gap is not None]
        if not gaps:
            return
        compacted = looks_compacted(p.topic, sum(s.interior_gaps for s in seen_all))
        by_base = {s.base: seg for seg in p.segments for s in seen_all if s.base == seg.base_offset}
        for s in gaps:
            last, base = s.boundary_gap
            seg = by_base.get(s.base)
            yield self._f(INFO if compacted else ERROR, "segment-gap", seg.log if seg else None, None, base,
                          f"offsets {last + 1}..{base - 1} are in no segment: the previous segment ends at {last} "
                          f"and this one starts at {base} (a deleted or lost segment"
                          + (", or compaction" if compacted else "; the partition shows no sign of compaction")
                          + ")", expected=last + 1, actual=base)

    def _orphans(self, p: Partition):
        """Index files whose .log is gone, and producer snapshots Kafka would delete as strays."""
        for seg, where in orphan_segments(p):
            files = [f for f in (seg.index, seg.timeindex, seg.txnindex) if f is not None]
            names = ", ".join(f.name for f in files)
            if where == "inside":
                yield self._f(ERROR, "segment-log-missing", files[0], None, seg.base_offset,
                              f"{names} but no {seg.name}.log: the log segment starting at offset {seg.base_offset} "
                              "is missing (deleted or lost), its index files remain")
            else:
                yield self._f(WARNING, "orphan-index", files[0], None, seg.base_offset,
                              f"{names} without a {seg.name}.log "
                              + ("before the first segment: a retention delete that did not finish (Kafka "
                                 "deletes such files at startup)" if where == "before" else
                                 "and the partition has no .log at all"))
        bases = [s.base_offset for s in p.segments if s.log is not None]
        for off, f in stray_snapshots(p):
            inside = bool(bases) and bases[0] < off < bases[-1]
            yield self._f(WARNING if inside else INFO, "snapshot-stray", f, None, off,
                          f"producer snapshot at offset {off} matches no segment base offset"
                          + (": the segment it was taken for is missing" if inside else "")
                          + " (Kafka deletes such a snapshot when it loads the partition)")

    # -- .log
    def check_log(self, seg: Segment, seen: SegmentSeen, txn: TxnTracker, prev_last, active: bool = True):
        self.stats["segments"] += 1
        path = seg.log
        rec = Recoverer(seg.base_offset, self.interval, txn)
        gaps = 0
        with map_input(path) as m:
            buf = m.buf
            seen.size = len(buf)
            self.stats["bytes"] += len(buf)
            if len(buf) == 0:
                yield self._f(INFO, "empty-segment", path, None, seg.base_offset, "empty segment (no batches)")
                return prev_last
            for ev in scan(buf, str(path), fd=m.fileno() if m.mapped else None):
                if m.shrunk():
                    # a mapped file truncated under us: reading on would touch lost pages (SIGBUS)
                    now = m.current_size()
                    rec.stop("file changed")
                    yield self._f(ERROR, "file-changed", path, ev.position,
                                  None, f"the file shrank to {now} bytes while being read; stopped here",
                                  expected=len(buf), actual=now)
                    break
                if isinstance(ev, Damage):
                    rec.stop(f"{ev.code} at {ev.position}")
                    if ev.code == "zero-tail" and not active:
                        yield self._f(WARNING, "zeroed-range", path, ev.position, None,
                                      f"{ev.length} zero bytes from {ev.position} to the end of a segment that is not "
                                      "the active one: Kafka trims a segment when it rolls, so these bytes were "
                                      "zeroed (damage) or the broker died while preallocating",
                                      span=(ev.position, ev.end))
                    elif ev.code == "zero-tail":
                        yield self._f(INFO, "zero-tail", path, ev.position, None,
                                      f"{ev.length} zero bytes from {ev.position} to the end: end of data "
                                      "(preallocated segment), not corruption")
                    elif ev.code == "partial-tail" and seen.batches == 0:
                        # a segment none of whose bytes make a batch: nothing in it is readable (an interrupted
                        # append leaves its tail after readable batches, not instead of them)
                        yield self._f(ERROR, "no-readable-batch", path, ev.position, None,
                                      f"no batch readable in the segment: {ev.message}", actual=ev.length)
                    elif ev.code == "partial-tail":
                        yield self._f(WARNING, "partial-tail", path, ev.position, None,
                                      f"{ev.length} bytes at the end do not make a whole batch "
                                      "(interrupted write; Kafka recovery truncates them)", span=(ev.position, ev.end))
                    else:
                        self.summary.skipped_ranges += 1
                        self.summary.skipped_bytes += ev.length
                        yield self._f(ERROR, "skipped-bytes", path, ev.position, None,
                                      f"bytes {ev.position}..{ev.end} ({ev.length}) skipped: {ev.message}",
                                      actual=ev.length, span=(ev.position, ev.end))
                    continue
                b: Batch = ev
                seen.batches += 1
                self.stats["batches"] += 1
                if not b.is_control:
                    self.messages += header_records(b)
                if not b.crc_ok:
                    yield self._f(ERROR, "crc-mismatch", path, b.position, b.base_offset,
                                  f"{'CRC32C' if b.magic == 2 else 'CRC32'} of magic v{b.magic} batch does not match",
                                  expected=b.crc, actual=_actual_crc(b))
                ctype = None
                if b.is_control and b.crc_ok:
                    ctype = control_type_of(b)
                    if ctype == K.CONTROL_ABORT:
                        seen.aborts.add((b.producer_id, b.last_offset))
                rec.feed(b, ctype)
                base = b.base_offset if b.base_offset is not None else b.last_offset
                if b.error:
                    yield self._f(WARNING if b.error_code != "records-undecodable" else ERROR, b.error_code,
                                  path, b.position, b.last_offset, b.error)
                if base < seg.base_offset:
                    yield self._f(ERROR, "offset-below-base", path, b.position, base,
                                  f"batch base offset {base} is below the segment's base offset {seg.base_offset}",
                                  expected=f">= {seg.base_offset}", actual=base)
                if b.last_offset - seg.base_offset > 0x7FFFFFFF:
                    yield self._f(ERROR, "offset-overflow", path, b.position, b.last_offset,
                                  "offset minus segment base does not fit in int32 (index entries cannot address it)")
                if prev_last is not None and base <= prev_last:
                    yield self._f(ERROR, "offset-not-increasing", path, b.position, base,
                                  f"batch offsets {base}..{b.last_offset} do not follow the previous last offset "
                                  f"{prev_last}", expected=f"> {prev_last}", actual=base)
                elif prev_last is not None and base != prev_last + 1:
                    if seen.batches == 1:
                        seen.boundary_gap = (prev_last, base)      # judged per partition (_segment_gaps)
                    else:
                        gaps += 1
                if b.magic == 2 and b.partition_leader_epoch >= 0:
                    if seen.epochs and seen.epochs[-1][0] == b.partition_leader_epoch:
                        seen.epochs[-1][2] = b.last_offset
                    else:
                        seen.epochs.append([b.partition_leader_epoch, base, b.last_offset])
                if b.crc_ok:      # a batch whose CRC fails may carry a damaged lastOffsetDelta: not a reference
                    prev_last = max(prev_last, b.last_offset) if prev_last is not None else b.last_offset
                if seen.first_offset is None:
                    seen.first_offset = base
                seen.last_offset = b.last_offset if seen.last_offset is None else max(seen.last_offset, b.last_offset)
                seen.by_position[b.position] = (base, b.last_offset, b.max_timestamp)
                seen.by_last.setdefault(b.last_offset, (b.position, b.max_timestamp))
                seen.bases.append(base)
                seen.spans.append((base, b.last_offset, b.max_timestamp))
                if self.deep or self.salvage is not None:
                    gaps += yield from self._check_records(path, b)
                elif b.magic == 2 and b.codec != K.CODEC_NONE and b.crc_ok:
                    # the CRC covers the compressed bytes; only inflating shows the records can be read
                    try:
                        records_area(b)
                    except CodecError as e:
                        yield self._inflate_finding(path, b, e)
        seen.canonical = rec.finish(True)
        seen.canonical_nofinal = None
        if not _sorted(seen.bases):
            order = sorted(range(len(seen.bases)), key=seen.bases.__getitem__)
            seen.bases = [seen.bases[i] for i in order]
            seen.spans = [seen.spans[i] for i in order]
        seen.interior_gaps = gaps
        if gaps:
            yield self._f(INFO, "offset-gaps", path, None, None,
                          f"{gaps} non-consecutive offset step(s) (normal after compaction or aborted/cleaned data)",
                          actual=gaps)
        if seen.batches == 0 and seen.size == 0:
            yield self._f(INFO, "empty-segment", path, None, seg.base_offset, "empty segment (no batches)")
        return prev_last

    def check_snapshot_log(self, path: Path):
        """KRaft snapshots (``bootstrap.checkpoint``, ``<offset>-<epoch>.checkpoint``): records format, no indexes."""
        seen = SegmentSeen(0)
        yield from self.check_log(Segment(0, log=path), seen, TxnTracker(), None)

    def _check_records(self, path, b: Batch):
        gaps = 0
        prev = None
        n = 0
        try:
            for r in iter_records(b):
                n += 1
                if r.crc_ok is False:
                    yield self._f(ERROR, "inner-crc-mismatch", path, b.position, r.offset,
                                  "CRC32 of an inner (compressed) legacy message does not match")
                if prev is not None:
                    if r.offset <= prev:
                        yield self._f(ERROR, "record-offsets", path, b.position, r.offset,
                                      f"record offset {r.offset} does not increase (previous {prev})")
                    elif r.offset != prev + 1:
                        gaps += 1
                if r.offset > b.last_offset:
                    yield self._f(ERROR, "record-offsets", path, b.position, r.offset,
                                  f"record offset {r.offset} beyond the batch's last offset {b.last_offset}")
                prev = r.offset
                if self.salvage is not None:
                    self.salvage(b, r)
        except LimitExceeded as e:
            if e.code != b.error_code:          # a legacy wrapper's cap is reported once, with the batch
                yield self._f(WARNING, e.code, path, b.position, b.base_offset, f"records not all checked: {e}")
        except CodecError as e:
            yield self._inflate_finding(path, b, e)
        except (ValueError, IndexError) as e:
            yield self._f(ERROR, "records-undecodable", path, b.position, b.base_offset,
                          f"records of the batch cannot be read: {e}")
        self.stats["records"] += n
        return gaps

    def _inflate_finding(self, path, b: Batch, e: Exception):
        return self._f(ERROR, "payload-inflate-failed", path, b.position, b.base_offset,
                       f"{codec_name(b.codec)} payload of batch {b.base_offset}..{b.last_offset} does not inflate: {e}",
                       expected=codec_name(b.codec), actual=str(e))

    def _index_shape(self, kind: str, path, ix, entry_size: int):
        """Size, garbage after the entries, preallocated zero tail: the checks .index and .timeindex share."""
        if ix.size % entry_size:
            yield self._f(ERROR, f"{kind}-size", path, None, None,
                          f"length {ix.size} is not a multiple of {entry_size} (Kafka's sanity check fails)",
                          actual=ix.size)
        if ix.garbage_tail:
            yield self._f(ERROR, f"{kind}-garbage-tail", path, len(ix.entries) * entry_size, None,
                          f"{ix.garbage_tail} non-zero bytes after the end of the entries")
        if ix.zero_tail:
            yield self._f(INFO, f"{kind}-preallocated", path, len(ix.entries) * entry_size, None,
                          f"{len(ix.entries)} entries then {ix.zero_tail} zero bytes (preallocated by a running "
                          "or crashed broker)")

    # -- .index
    def check_offset_index(self, seg: Segment, seen: SegmentSeen):
        if seg.index is None:
            if seg.log is not None and seen.canonical is not None and seen.canonical.offset_entries:
                yield self._f(INFO, "index-missing", seg.log.with_suffix(".index"), None, seg.base_offset,
                              "no .index file (Kafka rebuilds a missing index at startup)")
            return
        idx = F.read_offset_index(seg.index)
        path = seg.index
        yield from self._index_shape("index", path, idx, K.OFFSET_INDEX_ENTRY_SIZE)
        if idx.entries and idx.entries[-1][0] < 0:
            yield self._f(ERROR, "index-sanity", path, (len(idx.entries) - 1) * 8, seg.base_offset + idx.entries[-1][0],
                          "last entry's offset is below the base offset (Kafka's sanity check fails)")
        if seg.log is None:
            return
        prev = None
        bad = False
        for i, (rel, pos) in enumerate(idx.entries):
            off = seg.base_offset + rel
            where = i * K.OFFSET_INDEX_ENTRY_SIZE
            if prev is not None and (rel <= prev[0] or pos <= prev[1]):
                bad = True
                yield self._f(ERROR, "index-not-monotonic", path, where, off,
                              f"entry {i} ({off} @ {pos}) does not increase after ({seg.base_offset + prev[0]} @ {prev[1]})")
            prev = (rel, pos)
            b = seen.by_position.get(pos)
            if b is None:
                bad = True
                yield self._f(ERROR, "index-position-not-batch", path, where, off,
                              f"entry {i} points at position {pos}, where no batch starts (log is {seen.size} bytes)",
                              actual=pos)
            elif b[1] != off and b[1] < off and self._later_batch_holds(seen, pos, off):
                yield self._f(INFO, "index-append-path", path, where, off,
                              f"entry {i}: offset {off} at position {pos}, where a batch ending at {b[1]} starts; "
                              f"{off} is the last offset of a later batch: written by a multi-batch append "
                              "(follower, cleaner or a legacy message set); lookups stay correct "
                              "(DumpLogSegments reports it as a mismatch)", expected=b[1], actual=off)
            elif b[1] != off:
                bad = True
                yield self._f(ERROR, "index-offset-mismatch", path, where, off,
                              f"entry {i}: index offset {off}, log offset {b[1]} at position {pos}",
                              expected=b[1], actual=off)
        canon = seen.canonical.offset_entries if seen.canonical else []
        disk = [tuple(e) for e in idx.entries]
        if bad or disk == canon:
            return
        if len(disk) < len(canon) and canon[:len(disk)] == disk:
            covered = disk[-1][1] if disk else 0
            yield self._f(WARNING, "index-covers-prefix", path, len(disk) * 8, seg.base_offset + canon[len(disk)][0],
                          f"index has {len(disk)} entries, all consistent with the log, but the recovery rule gives "
                          f"{len(canon)}: it covers only the first part of the log (last entry at position {covered} of "
                          f"{seen.size}); the log grew after the index was written (stale index)",
                          expected=len(canon), actual=len(disk))
        else:
            yield self._f(INFO, "index-noncanonical", path, None, None,
                          f"{len(disk)} entries, all consistent with the log, differ from the recovery rule's "
                          f"{len(canon)} (index.interval.bytes={self.interval}); normal for append-path or other "
                          "interval settings")

    @staticmethod
    def _later_batch_holds(seen: SegmentSeen, pos: int, off: int) -> bool:
        hit = seen.by_last.get(off)
        return hit is not None and hit[0] > pos

    # -- .timeindex
    def check_time_index(self, seg: Segment, seen: SegmentSeen):
        if seg.timeindex is None:
            if seg.log is not None and seen.canonical is not None and seen.canonical.time_entries:
                yield self._f(INFO, "timeindex-missing", seg.log.with_suffix(".timeindex"), None, seg.base_offset,
                              "no .timeindex file (Kafka rebuilds a missing index at startup)")
            return
        tix = F.read_time_index(seg.timeindex)
        path = seg.timeindex
        yield from self._index_shape("timeindex", path, tix, K.TIME_INDEX_ENTRY_SIZE)
        if tix.entries and (tix.entries[-1][0] < tix.entries[0][0] or tix.entries[-1][1] < 0):
            yield self._f(ERROR, "timeindex-sanity", path, (len(tix.entries) - 1) * 12, None,
                          "last entry's timestamp/offset is below the first/base (Kafka's sanity check fails)")
        if seg.log is None:
            return
        prev_ts = None
        bad = False
        record_level = 0
        for i, (ts, rel) in enumerate(tix.entries):
            off = seg.base_offset + rel
            where = i * K.TIME_INDEX_ENTRY_SIZE
            if prev_ts is not None and ts <= prev_ts:
                bad = True
                yield self._f(ERROR, "timeindex-out-of-order", path, where, off,
                              f"entry {i}: timestamp {ts} is not after the previous entry's {prev_ts}",
                              expected=f"> {prev_ts}", actual=ts)
            prev_ts = ts
            hit = seen.by_last.get(off)
            if hit is not None:
                if hit[1] != ts:
                    bad = True
                    yield self._f(ERROR, "timeindex-timestamp-mismatch", path, where, off,
                                  f"entry {i}: timestamp {ts}, but the batch ending at offset {off} has max timestamp "
                                  f"{hit[1]}", expected=hit[1], actual=ts)
                continue
            j = bisect.bisect_right(seen.bases, off) - 1
            span = seen.spans[j] if j >= 0 else None
            if span is not None and span[0] <= off <= span[1]:
                if span[2] == ts:
                    record_level += 1
                    yield self._f(INFO, "timeindex-record-offset", path, where, off,
                                  f"entry {i}: offset {off} is a record inside batch {span[0]}..{span[1]} (max "
                                  f"timestamp {ts} matches), not the batch's last offset: the Kafka 2.x append path "
                                  "stored the offset of the record with the max timestamp; DumpLogSegments reports it "
                                  "as 'not found', current Kafka and a rebuild use the batch's last offset",
                                  expected=span[1], actual=off)
                else:
                    bad = True
                    yield self._f(ERROR, "timeindex-timestamp-mismatch", path, where, off,
                                  f"entry {i}: timestamp {ts}, but the batch holding offset {off} has max timestamp "
                                  f"{span[2]}", expected=span[2], actual=ts)
            else:
                bad = True
                yield self._f(ERROR, "timeindex-offset-not-found", path, where, off,
                              f"entry {i}: offset {off} is in no batch of the log")
        if bad or record_level:
            return
        canon = seen.canonical.time_entries if seen.canonical else []
        disk = [tuple(e) for e in tix.entries]
        if disk == canon:
            return
        if disk == canon[:-1] and canon:
            yield self._f(INFO, "timeindex-no-final-entry", path, len(disk) * 12, None,
                          "the closing max-timestamp entry a segment gets at roll/close is absent (active segment "
                          "of a running or crashed broker)")
        elif len(disk) < len(canon) and canon[:len(disk)] == disk:
            yield self._f(WARNING, "timeindex-covers-prefix", path, len(disk) * 12, None,
                          f"time index has {len(disk)} entries consistent with the log, the recovery rule gives "
                          f"{len(canon)}: it covers only the first part of the log (stale index)",
                          expected=len(canon), actual=len(disk))
        else:
            yield self._f(INFO, "timeindex-noncanonical", path, None, None,
                          f"{len(disk)} entries, all consistent with the log, differ from the recovery rule's "
                          f"{len(canon)} (append path, restarts or another index.interval.bytes)")

    # -- .txnindex
    def check_txn_index(self, seg: Segment, seen: SegmentSeen):
        canon = seen.canonical.aborted if seen.canonical else []
        if seg.txnindex is None:
            for e in canon:
                yield self._f(ERROR, "txnindex-missing-entry", seg.log.with_suffix(".txnindex"), None, e[3],
                              f"ABORT marker of producer {e[1]} at offset {e[3]} but no .txnindex file")
            return
        t = F.read_txn_index(seg.txnindex)
        path = seg.txnindex
        if t.partial:
            yield self._f(ERROR, "txnindex-size", path, t.size - t.partial, None,
                          f"length {t.size} is not a multiple of 34 ({t.partial} stray bytes)")
        if seg.log is None:
            return
        by_marker = {(e[1], e[3]): e for e in canon}
        for i, e in enumerate(t.entries):
            where = i * K.TXN_INDEX_ENTRY_SIZE
            if (e[1], e[3]) not in seen.aborts:
                yield self._f(ERROR, "txnindex-no-marker", path, where, e[3],
                              f"entry {i}: no ABORT marker of producer {e[1]} at offset {e[3]} in this segment")
                continue
            c = by_marker.get((e[1], e[3]))
            if c is not None and tuple(e) != tuple(c):
                yield self._f(WARNING, "txnindex-mismatch", path, where, e[3],
                              f"entry {i}: (first {e[2]}, lso {e[4]}) but the log implies (first {c[2]}, lso {c[4]})",
                              expected=list(c), actual=list(e))
        disk_markers = {(e[1], e[3]) for e in t.entries}
        for e in canon:
            if (e[1], e[3]) not in disk_markers:
                yield self._f(ERROR, "txnindex-missing-entry", path, None, e[3],
                              f"ABORT marker of producer {e[1]} at offset {e[3]} has no .txnindex entry")

    # -- per-partition files
    def check_partition_files(self, p: Partition, seen_all: list[SegmentSeen], leo: int):
        for off, path in p.snapshots:
            s = F.read_snapshot(path)
            if s.size >= 10 and not s.crc_ok:
                yield self._f(ERROR, "snapshot-crc", path, 2, None,
                              "producer snapshot CRC32C does not match (Kafka: CorruptSnapshotException)",
                              expected=s.crc)
            if s.problem:
                yield self._f(ERROR, "snapshot-malformed", path, None, None, s.problem.strip())
            if seen_all and off > leo:
                yield self._f(WARNING, "snapshot-beyond-log-end", path, None, off,
                              f"snapshot offset {off} is beyond the log end offset {leo}", expected=f"<= {leo}", actual=off)
            for ent in s.entries:
                if seen_all and ent[3] >= leo:
                    yield self._f(WARNING, "snapshot-beyond-log-end", path, None, ent[3],
                                  f"producer {ent[0]}: last offset {ent[3]} is not in the log (log end offset {leo})",
                                  expected=f"< {leo}", actual=ent[3])
        if p.leader_epoch_checkpoint is not None:
            c = F.read_leader_epoch_checkpoint(p.leader_epoch_checkpoint)
            if c.problem:
                yield self._f(ERROR, "checkpoint-malformed", p.leader_epoch_checkpoint, None, None, c.problem)
            runs = [r for s in seen_all for r in s.epochs]
            entries = sorted(c.entries, key=lambda x: x[1])
            starts = [o for _e, o in entries]
            reported = set()
            for e, o in entries:
                if e < 0 or o < 0:
                    yield from self._negative(p.leader_epoch_checkpoint, f"epoch {e} start offset", min(e, o))
                    continue
                if o > leo:
                    yield self._f(ERROR, "leader-epoch-beyond-log-end", p.leader_epoch_checkpoint, None, o,
                                  f"epoch {e} starts at {o}, beyond the log end offset {leo}")
                    continue
                for s in seen_all:
                    j = bisect.bisect_right(s.bases, o) - 1
                    if j >= 0 and s.spans[j][0] < o <= s.spans[j][1]:
                        yield self._f(WARNING, "leader-epoch-mid-batch", p.leader_epoch_checkpoint, None, o,
                                      f"epoch {e} starts at {o}, inside batch {s.spans[j][0]}..{s.spans[j][1]} "
                                      "(an epoch begins at a batch boundary)")
            # Every v2 batch's partitionLeaderEpoch must be the epoch the checkpoint gives for its offsets.
            for ple, first, last in runs:
                lo = bisect.bisect_right(starts, first) - 1
                hi = bisect.bisect_right(starts, last) - 1
                for k in range(max(lo, 0), hi + 1) if hi >= 0 else ():
                    e, o = entries[k]
                    if e != ple and (e, o) not in reported:
                        reported.add((e, o))
                        yield self._f(WARNING, "leader-epoch-mismatch", p.leader_epoch_checkpoint, None, o,
                                      f"checkpoint says epoch {e} from offset {o}, but batches {max(first, o)}.."
                                      f"{last} carry partition leader epoch {ple}", expected=ple, actual=e)
                if lo < 0 and entries and ("before", ple) not in reported:
                    reported.add(("before", ple))
                    yield self._f(WARNING, "leader-epoch-mismatch", p.leader_epoch_checkpoint, None, first,
                                  f"batches from offset {first} carry partition leader epoch {ple}, but the "
                                  f"checkpoint's first epoch starts at {entries[0][1]}", expected=ple, actual=None)
        if p.partition_metadata is not None:
            props = F.read_properties(p.partition_metadata)
            if props.get("version") != "0" or len(props.get("topic_id", "")) != 22:
                yield self._f(ERROR, "partition-metadata-malformed", p.partition_metadata, None, None,
                              f"expected 'version: 0' and a 22-character topic_id, found {props}")

    def _negative(self, path, what: str, value: int):
        for sev, code, msg, exp, act in checkpoint_value_problems(what, value):
            yield self._f(sev, code, path, None, None, msg, expected=exp, actual=act)

    # -- log-dir checkpoints
    def check_logdir_checkpoints(self, ld: LogDir, leos: dict):
        for name, path in sorted(ld.checkpoints.items()):
            c = F.read_offset_checkpoint(path)
            if c.problem:
                yield self._f(ERROR, "checkpoint-malformed", path, None, None, c.problem)
            for topic, part, off in c.entries:
                if off < 0:
                    yield from self._negative(path, f"{name}: {topic}-{part}", off)
                    continue
                hit = leos.get((topic, part))
                if hit is None:
                    yield self._f(WARNING, "checkpoint-unknown-partition", path, None, off,
                                  f"{topic}-{part} is listed but has no partition directory")
                    continue
                leo, _p = hit
                if name != "cleaner-offset-checkpoint" and off > leo:
                    yield self._f(WARNING, "checkpoint-beyond-log-end", path, None, off,
                                  f"{name}: {topic}-{part} at {off}, beyond the log end offset {leo}: the log lost "
                                  "data after the checkpoint was written, or the files were copied at different "
                                  "moments (non-atomic copy of a running broker)",
                                  expected=f"<= {leo}", actual=off)


def _sorted(xs) -> bool:
    return all(xs[i] <= xs[i + 1] for i in range(len(xs) - 1))


def _actual_crc(b: Batch) -> int:
    import zlib

    from crc32c import crc32c
    mv = memoryview(b._buf)
    if b.magic == 2:
        return crc32c(mv[b.position + 21:b.end])
    return zlib.crc32(mv[b.position + 16:b.end])
