"""The consumequeue writer: one queue's ``MappedFileQueue`` + ``ConsumeQueue#putMessagePositionInfo`` state."""
from __future__ import annotations

from formats import rocketmq as F
from mqtool.common import java_long
from mqtool.findings import WARNING, Finding
from mqtool.rocketmq.indexfiles import CQ_STRUCT

UNIT = F.CQ_STORE_UNIT_SIZE
_BLANK_UNIT = CQ_STRUCT.pack(0, F.CQ_BLANK_SIZE, 0)
_ZERO_UNIT = bytes(UNIT)
_pack_unit = CQ_STRUCT.pack
_MAX_LONG = (1 << 63) - 1


class QueueBuilder:
    """One queue's ``MappedFileQueue`` + ``ConsumeQueue#putMessagePositionInfo`` state."""

    __slots__ = ("topic", "queue_id", "file_size", "base", "buf", "first_created", "max_phys", "emit",
                 "notes", "units", "slot")

    def __init__(self, topic: str, queue_id: int, file_size: int, emit):
        self.topic, self.queue_id, self.file_size, self.emit = topic, queue_id, file_size, emit
        self.base = -1
        self.buf: bytearray | None = None
        self.first_created = False
        self.max_phys = 0
        self.notes: list[tuple[str, int, Finding]] = []
        self.units = 0
        self.slot = -1                                # index in the compiled loop's queue state, -1 none

    def put(self, offset: int, size: int, tags_code: int, cq_offset: int) -> None:
        if not 0 <= cq_offset <= (_MAX_LONG - self.file_size) // UNIT:
            # its unit would lie at a negative byte position or past 2^63 - 1 (a Java long): no file holds it
            self._note("cq-offset-out-of-range", f"queue offset {cq_offset} of the message at commitlog offset "
                       f"{offset} puts its unit outside any consume queue file: not rebuilt", offset)
            return
        end = offset + size
        if not -_MAX_LONG - 1 <= end <= _MAX_LONG:
            end = java_long(end)            # a Java long there: a hostile offset wraps
        if end <= self.max_phys:
            self._note("cq-put-skipped", f"message at commitlog offset {offset} ends at or below the queue's "
                       f"maxPhysicOffset {self.max_phys}: the broker skips it", offset)
            return
        expect = cq_offset * UNIT
        fs = self.file_size
        buf = self.buf
        if buf is None:
            self.base = expect - expect % fs
            buf = self.buf = bytearray()
            self.first_created = True
        elif len(buf) >= fs:
            self.emit(self, self.base, buf, False)     # handed over: never changed again (no copy)
            self.base += fs
            buf = self.buf = bytearray()
            self.first_created = False
        if self.first_created and cq_offset != 0 and not buf:
            buf += _BLANK_UNIT * ((expect % fs) // UNIT)
        if cq_offset != 0:
            cur = self.base + len(buf)
            if expect < cur:
                self._note("cq-put-repeated", f"queue offset {cq_offset} of the message at commitlog offset "
                           f"{offset} is behind the write position {cur // UNIT}: the broker skips it", offset)
                return
            if expect != cur:
                self._note("cq-offset-gap", f"queue offset {cq_offset} of the message at commitlog offset "
                           f"{offset} is ahead of the write position {cur // UNIT}: the broker appends it at "
                           f"{cur // UNIT} anyway", offset)
        self.max_phys = end
        buf += _pack_unit(offset, size, tags_code)
        self.units += 1

    def _note(self, code: str, message: str, offset: int) -> None:
        """Keep the first occurrence of each kind and count the rest (one finding per kind and queue)."""
        for i, (c, n, f) in enumerate(self.notes):
            if c == code:
                self.notes[i] = (c, n + 1, f)
                return
        self.notes.append((code, 1, Finding(WARNING, code, f"consumequeue/{self.topic}/{self.queue_id}", None,
                                            offset, message)))

    def findings(self) -> list[Finding]:
        out = []
        for _, n, f in self.notes:
            if n > 1:
                f = Finding(f.severity, f.code, f.file, f.position, f.offset,
                            f"{n} messages: first: {f.message}", f.expected, f.actual)
            out.append(f)
        return out

    def finish(self) -> None:
        if self.buf is not None:
            self.emit(self, self.base, self.buf, True)
            self.buf = None
