"""``LogSegment.recover`` as a state machine (:class:`Recoverer`) and the canonical index files it gives
(:class:`SegmentIndexes`); :func:`recover_segment` runs it over one segment."""
from __future__ import annotations

from dataclasses import dataclass, field

from formats import kafka as K
from mqtool.kafka import layout as L
from mqtool.kafka.records import Batch
from mqtool.kafka.scan import Damage, scan
from mqtool.kafka.rebuild.txn import TxnTracker, control_type_of

_OFFSET_ENTRY, _TIME_ENTRY, _TXN_ENTRY = L.OFFSET_ENTRY, L.TIME_ENTRY, L.TXN_ENTRY

PREALLOCATED_INDEX_SIZE = K.DEFAULT_SEGMENT_INDEX_BYTES // K.OFFSET_INDEX_ENTRY_SIZE * K.OFFSET_INDEX_ENTRY_SIZE
PREALLOCATED_TIMEINDEX_SIZE = K.DEFAULT_SEGMENT_INDEX_BYTES // K.TIME_INDEX_ENTRY_SIZE * K.TIME_INDEX_ENTRY_SIZE


@dataclass
class SegmentIndexes:
    base_offset: int
    offset_entries: list = field(default_factory=list)    # (relativeOffset, position)
    time_entries: list = field(default_factory=list)      # (timestamp, relativeOffset)
    aborted: list = field(default_factory=list)           # (version, pid, first, last, lso)
    valid_bytes: int = 0                                  # where recovery would truncate the .log
    stop_reason: str | None = None                        # why recovery stopped before the end, if it did
    overflow: list = field(default_factory=list)          # (position, offset): entries that cannot be written

    def index_bytes(self, preallocate: bool = False) -> bytes:
        data = b"".join(_OFFSET_ENTRY.pack(*e) for e in self.offset_entries)
        return data.ljust(PREALLOCATED_INDEX_SIZE, b"\x00") if preallocate else data

    def timeindex_bytes(self, preallocate: bool = False) -> bytes:
        data = b"".join(_TIME_ENTRY.pack(*e) for e in self.time_entries)
        return data.ljust(PREALLOCATED_TIMEINDEX_SIZE, b"\x00") if preallocate else data

    def txnindex_bytes(self) -> bytes:
        return b"".join(_TXN_ENTRY.pack(*e) for e in self.aborted)


class Recoverer:
    """``LogSegment.recover`` as a state machine fed one shallow batch at a time (so verify can run it in the
    same pass as its own checks). Feed only batches recovery would accept (valid CRC, contiguous)."""

    def __init__(self, base_offset: int, interval: int = K.DEFAULT_INDEX_INTERVAL_BYTES,
                 txn: TxnTracker | None = None):
        self.out = SegmentIndexes(base_offset)
        self.base = base_offset
        self.interval = interval
        self.txn = txn
        self.valid = 0
        self.last_entry = 0
        self.max_ts, self.max_ts_off, self.max_ts_pos = K.NO_TIMESTAMP, -1, 0
        self.last_time_ts = K.NO_TIMESTAMP
        self.stopped = False

    def _fits(self, off: int, position: int) -> bool:
        """Does ``off`` fit an index entry (a relative offset in 0..2^31-1, as Kafka's
        ``LogSegment.ensureOffsetInRange``; the broker splits such a segment instead)? Else noted, skipped."""
        if 0 <= off - self.base <= 0x7FFFFFFF:
            return True
        if not self.out.overflow or self.out.overflow[-1] != (position, off):
            self.out.overflow.append((position, off))
        return False

    def _maybe_time(self, ts: int, off: int, position: int) -> None:
        if ts > self.last_time_ts and self._fits(off, position):
            self.out.time_entries.append((ts, off - self.base))
            self.last_time_ts = ts

    def feed(self, b: Batch, control_type: int | None = None) -> bool:
        """Returns False (and stops) at the first batch recovery would truncate at."""
        if self.stopped or not b.crc_ok or b.position != self.valid:
            self.stop(f"invalid batch at {b.position} (CRC mismatch)" if not b.crc_ok
                      else f"gap before {b.position}")
            if b.crc_ok:
                # Recovery would truncate here; a verifier feeding on keeps the transaction state (and the
                # aborted transactions it implies) of the intact batches after the damage.
                self._observe_txn(b, control_type)
            return False
        if b.max_timestamp > self.max_ts:
            self.max_ts, self.max_ts_off, self.max_ts_pos = b.max_timestamp, b.last_offset, b.position
        if self.valid - self.last_entry > self.interval:
            if self._fits(b.last_offset, b.position):
                self.out.offset_entries.append((b.last_offset - self.base, self.valid))
            self._maybe_time(self.max_ts, self.max_ts_off, self.max_ts_pos)
            self.last_entry = self.valid
        self._observe_txn(b, control_type)
        self.valid += b.size
        return True

    def _observe_txn(self, b: Batch, control_type: int | None) -> None:
        if self.txn is not None and b.is_transactional:
            if b.is_control and control_type is None:
                control_type = control_type_of(b)
            a = self.txn.observe(b, control_type)
            if a is not None:
                self.out.aborted.append(a)

    def stop(self, reason: str) -> None:
        if not self.stopped:
            self.stopped = True
            self.out.stop_reason = reason

    def finish(self, final_time_entry: bool = True) -> SegmentIndexes:
        self.out.valid_bytes = self.valid
        if final_time_entry:
            self._maybe_time(self.max_ts, self.max_ts_off, self.max_ts_pos)
        return self.out


def recover_segment(buf, path: str, base_offset: int, interval: int = K.DEFAULT_INDEX_INTERVAL_BYTES,
                    final_time_entry: bool = True, txn: TxnTracker | None = None,
                    fd: int | None = None) -> SegmentIndexes:
    """Run the recovery rule over one segment buffer."""
    r = Recoverer(base_offset, interval, txn)
    for ev in scan(buf, path, fd=fd):
        if isinstance(ev, Damage):
            if ev.code != "zero-tail":
                r.stop(f"{ev.code} at {ev.position}: {ev.message}")
            break
        if not r.feed(ev):
            break
    return r.finish(final_time_entry)
