"""The index checks: ``.index``, ``.timeindex`` and ``.txnindex`` against what the ``.log`` pass saw."""
from __future__ import annotations

import bisect

from formats import kafka as K
from mqtool.findings import ERROR, INFO, WARNING
from mqtool.kafka import indexfiles as F
from mqtool.kafka.store import Segment
from mqtool.kafka.verify.state import SegmentSeen


class IndexChecks:
    """The checks of a segment's index files (a mixin of :class:`~mqtool.kafka.verify.verifier.KafkaVerifier`)."""

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
        bad = False
        # (a hostile index can hold 8 Mi wrong entries, two findings each: the loop keeps to locals)
        f, base, at_position, entry_size, spath = self._f, seg.base_offset, seen.by_position.get, \
            K.OFFSET_INDEX_ENTRY_SIZE, str(path)
        prev_rel = prev_pos = None
        for i, (rel, pos) in enumerate(idx.entries):
            off = base + rel
            where = i * entry_size
            if prev_rel is not None and (rel <= prev_rel or pos <= prev_pos):
                bad = True
                yield f(ERROR, "index-not-monotonic", spath, where, off,
                        f"entry {i} ({off} @ {pos}) does not increase after ({base + prev_rel} @ {prev_pos})")
            prev_rel, prev_pos = rel, pos
            b = at_position(pos)
            if b is None:
                bad = True
                yield f(ERROR, "index-position-not-batch", spath, where, off,
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
        disk = idx.entries
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
        f, base, by_last, entry_size, spath = self._f, seg.base_offset, seen.by_last.get, K.TIME_INDEX_ENTRY_SIZE, \
            str(path)
        for i, (ts, rel) in enumerate(tix.entries):
            off = base + rel
            where = i * entry_size
            if prev_ts is not None and ts <= prev_ts:
                bad = True
                yield f(ERROR, "timeindex-out-of-order", spath, where, off,
                        f"entry {i}: timestamp {ts} is not after the previous entry's {prev_ts}",
                        expected=f"> {prev_ts}", actual=ts)
            prev_ts = ts
            hit = by_last(off)
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
                yield f(ERROR, "timeindex-offset-not-found", spath, where, off,
                        f"entry {i}: offset {off} is in no batch of the log")
        if bad or record_level:
            return
        canon = seen.canonical.time_entries if seen.canonical else []
        disk = tix.entries
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
