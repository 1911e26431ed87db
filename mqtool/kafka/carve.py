"""Carve Kafka log entries (v2 record batches, legacy v0/v1 messages and wrappers) out of arbitrary bytes
(``mqtool carve``).

An entry is reported only when it passes the walker's own resync test (:func:`mqtool.kafka.scan._frame_ok`):
magic <= 2 at +16, a length inside the bytes and of the version's minimum, the shape test
(:func:`mqtool.kafka.scan._shape_ok`: no attribute bit Kafka never sets, a known codec, sane counts and
"none" values, legacy key/value lengths adding up) and the CRC (CRC-32C over attributes..end for v2, CRC-32
over magic..end for v0/v1).

The search: every byte position is a candidate (the magic is one byte); the compiled ``frame_candidate``
(``mqtool/_native/kafka.c``) finds the next position whose shape passes, eight magic bytes per compare, and
only those get a CRC. A checked entry starts a run, walked contiguously (entries lie back to back in a
segment) while the next entry checks too; the search resumes at the run's end.
"""
from __future__ import annotations

import re
from typing import Iterator

from formats import kafka as K
from mqtool import native
from mqtool.carve import Layers
from mqtool.errors import DecodeError, wrap_decode
from mqtool.io import write_span
from mqtool.kafka import scan as S
from mqtool.kafka.dump import batch_row, record_row
from mqtool.kafka.records import Batch, iter_records
from mqtool.pages import PageWindow
from mqtool.schema_struct import field_positions

FAMILY = "kafka"
_V2 = field_positions(K.RecordBatchHeader)
_LEGACY = field_positions(K.LegacyHeaderV0)
# the places frame_candidate reads, in the order of its enum (F_SIZE .. F_LATTR)
FIELDS = tuple(_V2[name] for name in ("batchLength", "magic", "baseOffset", "partitionLeaderEpoch", "attributes",
                                      "lastOffsetDelta", "baseTimestamp", "maxTimestamp", "producerId",
                                      "producerEpoch", "baseSequence", "recordsCount")) + (_LEGACY["attributes"],)
# the smallest legacy messages: the header after the log overhead, then the key and value lengths (int32 each)
_V0_MIN = K.V0_HEADER_SIZE - K.LOG_OVERHEAD + 8
_V1_MIN = K.V1_HEADER_SIZE - K.LOG_OVERHEAD + 8
CONSTS = (K.MIN_RECORD_OVERHEAD, S._MIN_V2_SIZE, S._V2_ATTR_UNUSED, K.CODEC_MASK, S._MAX_CODEC,
          S._LEGACY_ATTR_UNUSED, K.V0_HEADER_SIZE, K.V1_HEADER_SIZE, _V0_MIN, _V1_MIN)
assert (_V0_MIN, _V1_MIN) == (K.MIN_RECORD_OVERHEAD, 22)     # the minimums mqtool.kafka.scan._frame_ok applies
assert _V2["magic"] == _LEGACY["magic"] == (K.MAGIC_OFFSET, 1) and _V2["batchLength"] == _LEGACY["size"]
_MAGIC_BYTE = re.compile(rb"[\x00-\x02]")


def _python_candidate(buf, lo: int, hi: int) -> int:
    """frame_candidate without the helper: every magic byte <= 2, then the shape test."""
    n = len(buf)
    stop = min(hi, n - K.LOG_OVERHEAD - K.MIN_RECORD_OVERHEAD + 1)
    for m in _MAGIC_BYTE.finditer(buf, lo + K.MAGIC_OFFSET, stop + K.MAGIC_OFFSET):
        q = m.start() - K.MAGIC_OFFSET
        size = S._I32.unpack_from(buf, q + 8)[0]
        magic = buf[q + K.MAGIC_OFFSET]
        if size < (S._MIN_V2_SIZE if magic == 2 else _V0_MIN if magic == 0 else _V1_MIN) \
                or size < K.MIN_RECORD_OVERHEAD or q + 12 + size > n:
            continue
        if S._shape_ok(buf, q, size, magic):
            return q
    return -1


def _finder():
    mod = native.load("kafka")      # None when not built or switched off (MQTOOL_NATIVE, native.switched)
    fn = getattr(mod, "frame_candidate", None)
    if fn is None:
        return _python_candidate
    return lambda buf, lo, hi: fn(buf, lo, hi, FIELDS, CONSTS)


def entry_at(buf, p: int, n: int, image: str) -> Batch | None:
    """The entry at ``p`` when it passes the resync test (shape and CRC), decoded; else None."""
    if p + K.HEADER_SIZE_UP_TO_MAGIC > n or not S._frame_ok(buf, p, n):
        return None
    off, size = S._PREFIX.unpack_from(buf, p)
    if off < 0:                 # no entry of a log has a negative offset
        return None
    return S._decode(buf, image, p, off, size, buf[p + K.MAGIC_OFFSET], False)


def carve(buf, image: str, opts, scope) -> Iterator[tuple[int, Batch]]:
    """``(run, entry)`` for every entry carved from ``buf`` in image order; ``run``: the image position where
    the contiguous run holding it starts. ``scope``: :class:`mqtool.carve.Scope` (the ranges to search,
    progress)."""
    n = len(buf)
    find = _finder()
    win = PageWindow(buf, 0)
    i = 0
    while True:
        i, hi = scope.window(i, n)
        if i >= n:
            return
        if i >= win.next_at:
            win.advance(i)
        hi = min(hi, win.next_at)
        c = find(buf, i, hi)
        if c < 0:
            i = hi
            scope.tick(i)
            continue
        if not scope.afford(K.LOG_OVERHEAD + S._I32.unpack_from(buf, c + 8)[0]):    # its CRC reads them
            i = c + 1
            continue
        b = entry_at(buf, c, n, image)
        if b is None:
            i = c + 1
            continue
        run = c
        while b is not None:
            yield run, b
            p = b.end
            if p >= win.next_at:
                win.advance(p)
            b = entry_at(buf, p, n, image)
        i = p
        scope.tick(i)


def claimed(b: Batch) -> int:
    """The offset an entry claims: a batch's base offset (a legacy wrapper's from its inner messages, else
    its own offset field)."""
    if b.base_offset is not None:
        return b.base_offset
    return S._PREFIX.unpack_from(b._buf, b.position)[0]


def rows(b: Batch, opts=None) -> Iterator[tuple[str, int, dict]]:
    """(kind, claimed offset, dump row) of the entry, then with ``opts.deep`` of each record in it."""
    yield "batch", claimed(b), batch_row(b)
    if getattr(opts, "deep", False):
        try:
            for rec in iter_records(b):
                yield "record", rec.offset, record_row(b, rec, None)
        except DecodeError:                     # CodecError (a bomb past the caps too)
            raise
        except (ValueError, IndexError) as e:
            raise wrap_decode(e, b.file, b.position) from e


class Salvage:
    """Carved runs written back as Kafka log segments: each run is a segment ``<base offset>.log`` (the
    base offset of its first entry, as Kafka names them) in the partition directory ``kafka/carved-0/``; a
    run whose offsets overlap one already written there goes to ``carved-1/``, and so on. ``mqtool dump`` /
    ``verify`` read ``kafka/`` as a log directory (no index files: ``rebuild-index`` makes them)."""

    def __init__(self, out):
        self.out = out
        self.layers = Layers()
        self.files = 0

    def add_run(self, buf, start: int, end: int, first: Batch, last: Batch) -> str:
        lo = claimed(first)
        hi = max(lo, last.last_offset if last.last_offset is not None else claimed(last)) + 1
        k = self.layers.place(lo, hi)
        rel = f"{FAMILY}/carved-{k}/{lo:020d}.log"
        write_span(self.out, rel, buf, start, end)
        self.files += 1
        return rel

    def close(self, failed: bool = False) -> None:
        pass
