"""Walk a Kafka ``.log`` (or KRaft ``.checkpoint``) buffer: batches with resync, and the records inside them.

The hot header walk uses ``struct.Struct`` objects derived from the construct schemas in
:mod:`formats.kafka` (:func:`mqtool.schema_struct.exact_format`); ``tests/test_kafka_formats.py`` checks the fast
path against the schemas with hypothesis.

End-of-data rules (``FileLogInputStream`` plus what a forensic reader needs):

* fewer than 17 bytes left → end (non-zero leftovers are a ``partial-tail`` event);
* an all-zero remainder (preallocated segment, ``log.preallocate``) → ``zero-tail`` event, end;
* an entry running past the end of the file with no valid batch after it → ``partial-tail``;
* anything else that does not frame (size < 14, magic > 2, or a bad CRC whose length does not lead to
  another plausible batch) → a ``skipped`` event over the bytes up to the next self-locating batch
  (magic at +16, sane length, valid CRC), and the walk goes on from there.
"""
from __future__ import annotations

import mmap
import os
import re
import struct
import zlib
from dataclasses import dataclass, field

import construct
from crc32c import crc32c

from formats import kafka as K
from mqtool import native
from mqtool.io import first_nonzero
from mqtool.kafka import layout as L
from mqtool.kafka.codecs import CodecError, CodecTooLarge, decompress, decompress_chunks
from mqtool.pages import WINDOW as PAGE_WINDOW
from mqtool.pages import PageWindow

_PREFIX = struct.Struct(">qi")                                   # offset/baseOffset, size (LOG_OVERHEAD)
_HDR_V2, _HDR_V0, _HDR_V1 = L.BATCH_HEADER_V2, L.LEGACY_HEADER_V0, L.LEGACY_HEADER_V1
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_NONZERO = re.compile(rb"[^\x00]")
_MIN_V2_SIZE = K.V2_HEADER_SIZE - K.LOG_OVERHEAD               # 49

# ---- limits -------------------------------------------------------------------------------------
# Records are decoded as a stream (bounded memory whatever the batch inflates to); these caps bound the
# work per batch and per record. Kafka itself sets no count limit, but its default message.max.bytes
# (1048588) lets an uncompressed batch hold at most ~150,000 of the smallest (7-byte) records, and real
# producers put far fewer in a batch; headers are a handful per record in every client. Exceeding a cap
# is a finding (``batch-records-limit`` / ``record-headers-limit``), never an exception to the user.
MAX_BATCH_RECORDS = 1 << 20                 # MQTOOL_KAFKA_MAX_BATCH_RECORDS overrides
MAX_RECORD_HEADERS = 1 << 16                # MQTOOL_KAFKA_MAX_RECORD_HEADERS overrides
_GROUP = 4096                               # records decoded per step (one bounded list at a time)
_WHOLE_RECORDS = 65536                      # ... unless the area is small: then all at once, up to this many
_WHOLE_BYTES = 4 << 20                      # (small: up to this size)


class LimitExceeded(ValueError):
    """A cap on records per batch or headers per record was reached; ``code`` names the finding."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    try:
        v = int(raw) if raw else default
    except ValueError:
        v = default
    return v if v > 0 else default


def limits() -> tuple[int, int]:
    """(records per batch, headers per record) now in force (environment overrides, else the defaults)."""
    return (_env_int("MQTOOL_KAFKA_MAX_BATCH_RECORDS", MAX_BATCH_RECORDS),
            _env_int("MQTOOL_KAFKA_MAX_RECORD_HEADERS", MAX_RECORD_HEADERS))


def _records_limit(n: int, cap: int, what: str = "records") -> LimitExceeded:
    return LimitExceeded("batch-records-limit",
                         f"batch holds more than {cap} {what} (cap MQTOOL_KAFKA_MAX_BATCH_RECORDS; "
                         f"the first {n} were read, the rest not)")


def _headers_limit(n: int, cap: int) -> LimitExceeded:
    return LimitExceeded("record-headers-limit",
                         f"record with {n} headers, more than {cap} (cap MQTOOL_KAFKA_MAX_RECORD_HEADERS)")


@dataclass(slots=True)
class Damage:
    """A byte range the walk could not read as batches. kind: skipped | partial-tail | zero-tail | max-bytes."""

    kind: str
    start: int
    end: int
    message: str

    @property
    def length(self) -> int:
        return self.end - self.start


@dataclass(slots=True)
class Batch:
    """One shallow entry of a log: a v2 record batch, a legacy wrapper, or an uncompressed legacy message."""

    file: str
    position: int
    size: int                   # total bytes incl. the 12-byte log overhead
    magic: int
    base_offset: int | None     # legacy wrappers: from the inner messages (None if undecodable)
    last_offset: int
    crc: int
    crc_ok: bool
    attributes: int
    codec: int
    timestamp_type: int         # -1 none, 0 CreateTime, 1 LogAppendTime
    max_timestamp: int
    base_timestamp: int = -1
    partition_leader_epoch: int = -1
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    count: int | None = 1
    last_offset_delta: int = 0
    is_transactional: bool = False
    is_control: bool = False
    delete_horizon_ms: int | None = None
    error: str | None = None    # e.g. a legacy wrapper whose payload does not decompress
    _buf: object = field(default=None, repr=False)
    error_code: str = "records-undecodable"     # the finding for ``error`` (or a LimitExceeded code)
    inner_last: int | None = None   # legacy wrappers: offset field of the last inner message

    @property
    def end(self) -> int:
        return self.position + self.size

    @property
    def last_sequence(self) -> int:
        if self.base_sequence < 0:
            return -1
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF

    def to_row(self) -> dict:
        return {
            "kind": "batch",
            "file": self.file,
            "position": self.position,
            "size": self.size,
            "magic": self.magic,
            "offset": self.base_offset,
            "last_offset": self.last_offset,
            "count": self.count,
            "codec": K.CODEC_NAMES.get(self.codec, str(self.codec)),
            "timestamp_type": K.TIMESTAMP_TYPES.get(self.timestamp_type, str(self.timestamp_type)),
            "timestamp": self.max_timestamp,
            "base_timestamp": self.base_timestamp if self.magic >= 2 else None,
            "partition_leader_epoch": self.partition_leader_epoch,
            "producer_id": self.producer_id,
            "producer_epoch": self.producer_epoch,
            "base_sequence": self.base_sequence,
            "last_sequence": self.last_sequence,
            "is_transactional": self.is_transactional,
            "is_control": self.is_control,
            "delete_horizon_ms": self.delete_horizon_ms,
            "crc": self.crc,
            "crc_ok": self.crc_ok,
            "error": self.error,
        }


class Record:
    """One record (v2) or message (legacy) with its absolute offset. ``headers``: [(key bytes, value|None)]."""

    __slots__ = ("batch", "offset", "timestamp", "key", "value", "headers", "size", "sequence", "crc_ok",
                 "control_type", "coordinator_epoch")

    def __init__(self, batch, offset, timestamp, key, value, headers=(), size=0, sequence=-1, crc_ok=None):
        self.batch = batch
        self.offset = offset
        self.timestamp = timestamp
        self.key = key
        self.value = value
        self.headers = headers
        self.size = size
        self.sequence = sequence
        self.crc_ok = crc_ok              # legacy inner messages have their own CRC
        self.control_type = None
        self.coordinator_epoch = None


# ---- framing ------------------------------------------------------------------------------------

_V2_ATTR_UNUSED = ~(K.CODEC_MASK | K.TIMESTAMP_TYPE_MASK | K.TRANSACTIONAL_FLAG_MASK | K.CONTROL_FLAG_MASK
                    | K.DELETE_HORIZON_FLAG_MASK)
_LEGACY_ATTR_UNUSED = ~(K.CODEC_MASK | K.LEGACY_TIMESTAMP_TYPE_MASK)
_MAX_CODEC = max(K.CODEC_NAMES)


def _shape_ok(buf, p: int, size: int, magic: int) -> bool:
    """Cheap structure test of a candidate entry at p (``size``, ``magic`` read and the entry inside the
    buffer), before its CRC is computed: the CRC of a false candidate inside compressed bytes can span the
    rest of the file (hundreds of MB per candidate, so every byte-range start cost seconds).

    v2: no attribute bit Kafka never sets (bits 7-15), a known codec, baseOffset >= 0, 0 <= recordsCount <=
    lastOffsetDelta + 1, and partitionLeaderEpoch, both timestamps, producerId, producerEpoch, baseSequence
    >= -1. Legacy: no unused attribute bit, a known codec, and the key and value lengths add up to the
    message size exactly (as :func:`_legacy_fields` requires to read it at all)."""
    end = p + 12 + size
    if magic == 2:
        attrs = _I16.unpack_from(buf, p + K.V2_ATTRIBUTES_OFFSET)[0]
        if attrs & _V2_ATTR_UNUSED or attrs & K.CODEC_MASK > _MAX_CODEC:
            return False
        (base, _len, ple, _m, _crc, _a, lod, bts, mts, pid, pepoch, bseq, count) = _HDR_V2.unpack_from(buf, p)
        # offsets are not negative, the "none" values are -1 (timestamps too: producers refuse negative
        # ones), and the distinct offset deltas of the records lie in [0, lastOffsetDelta] (count ==
        # lastOffsetDelta + 1 until compaction removes records)
        return (base >= 0 and 0 <= count <= lod + 1 and ple >= -1 and pid >= -1 and pepoch >= -1
                and bseq >= -1 and bts >= -1 and mts >= -1)
    attrs = buf[p + 17]
    if attrs & _LEGACY_ATTR_UNUSED or attrs & K.CODEC_MASK > _MAX_CODEC:
        return False
    q = p + (K.V1_HEADER_SIZE if magic == 1 else K.V0_HEADER_SIZE)
    if q + 8 > end:
        return False
    klen = _I32.unpack_from(buf, q)[0]
    q += 4 + max(klen, 0)
    if q + 4 > end:
        return False
    vlen = _I32.unpack_from(buf, q)[0]
    return q + 4 + max(vlen, 0) == end


_DONTNEED = getattr(mmap, "MADV_DONTNEED", None)


def _span_crc(fn, buf, start: int, end: int) -> int:
    """``fn`` (crc32c or zlib.crc32) of buf[start:end]; a span longer than a page window of a mapped file is
    taken a window at a time, releasing its pages after use (MADV_DONTNEED; they stay in the page cache),
    so that a resync candidate claiming hundreds of MB does not leave them resident in this process."""
    mv = memoryview(buf)
    if end - start <= PAGE_WINDOW or _DONTNEED is None or not isinstance(buf, mmap.mmap):
        return fn(mv[start:end])
    crc = 0
    a = start
    while a < end:
        b = min(end, a + PAGE_WINDOW)
        crc = fn(mv[a:b], crc)
        lo = -(-a // mmap.PAGESIZE) * mmap.PAGESIZE           # whole pages inside [a, b)
        hi = b - b % mmap.PAGESIZE
        if hi > lo:
            buf.madvise(_DONTNEED, lo, hi - lo)
        a = b
    return crc


def _frame_ok(buf, p: int, n: int) -> bool:
    """Is there a complete entry at p of a sane shape (:func:`_shape_ok`) whose CRC is valid? (the resync
    test)"""
    if p + K.HEADER_SIZE_UP_TO_MAGIC > n:
        return False
    size = _I32.unpack_from(buf, p + 8)[0]
    magic = buf[p + 16]
    if size < K.MIN_RECORD_OVERHEAD or magic > 2 or p + 12 + size > n:
        return False
    if magic == 2:
        if size < _MIN_V2_SIZE or not _shape_ok(buf, p, size, magic):
            return False
        return _span_crc(crc32c, buf, p + 21, p + 12 + size) == _I32.unpack_from(buf, p + 17)[0] & 0xFFFFFFFF
    if size < (14 if magic == 0 else 22) or not _shape_ok(buf, p, size, magic):
        return False
    return _span_crc(zlib.crc32, buf, p + 16, p + 12 + size) == _I32.unpack_from(buf, p + 12)[0] & 0xFFFFFFFF


def resync(buf, p: int, n: int, fd: int | None = None, until: int | None = None) -> int | None:
    """First position > p (and < ``until`` when given) where a self-locating batch with a valid CRC starts,
    or None."""
    q = p + 1
    stop = n - K.HEADER_SIZE_UP_TO_MAGIC + 1 if until is None else min(until, n - K.HEADER_SIZE_UP_TO_MAGIC + 1)
    while q < stop:
        # The size field (q+8..q+12) of a real entry is never zero: skip zero runs in one step.
        if buf[q + 8] == 0 and buf[q + 9] == 0 and buf[q + 10] == 0 and buf[q + 11] == 0:
            nz = _first_nonzero(buf, q + 8, min(n, stop + 11), fd)
            if nz < 0:
                return None
            q = max(q + 1, nz - 11)
            continue
        if buf[q + 16] <= 2 and _frame_ok(buf, q, n):
            return q
        q += 1
    return None


def scan_range(buf, path: str, start: int, stop: int, check_crc: bool = True, fd: int | None = None):
    """The events of :func:`scan` that a byte-range reader of ``[start, stop)`` owns.

    A range begins at the scanner's resync point at or after ``start`` (byte 0 for the first range; no
    self-locating batch with a valid CRC in ``[start, stop)`` means the range owns nothing) and owns every
    event of the walk from there until the resync point at or after ``stop``, reading its last entry past
    ``stop``. The whole-file walk passes through every such point (a resync lands on the first one, a batch
    ends where the next entry frames), so consecutive ranges meet exactly; the exception is a valid batch
    image *inside* another batch's payload, which a range start would take for a batch.
    """
    n = len(buf)
    if start > 0:
        q = resync(buf, start - 1, n, fd, until=stop)
        if q is None:
            return
        start = q
    checked = stop          # no resync point in [stop, checked)
    for ev in scan(buf, path, start=start, check_crc=check_crc, fd=fd):
        pos = ev.start if isinstance(ev, Damage) else ev.position
        if pos >= stop:
            if isinstance(ev, Batch) and ev.crc_ok and check_crc and _shape_ok(buf, pos, ev.size - 12, ev.magic):
                return      # a valid batch at or after stop: the next range's (a resync point)
            if resync(buf, checked - 1, n, fd, until=pos + 1) is not None:
                return
            checked = pos + 1
        yield ev


def _first_nonzero(buf, start: int, end: int, fd: int | None = None) -> int:
    """First non-zero byte in buf[start:end] or -1: chunked compares, holes of a sparse file (``fd`` of a
    mapped file) skipped with SEEK_DATA, so a 2 GiB preallocated or sparse tail costs milliseconds."""
    if isinstance(buf, (bytes, mmap.mmap)):
        return first_nonzero(buf, start, end, fd)
    m = _NONZERO.search(buf, start, end)
    return -1 if m is None else m.start()


def _is_zero(buf, start: int, end: int, fd: int | None = None) -> bool:
    return _first_nonzero(buf, start, end, fd) < 0


def scan(buf, path: str = "", start: int = 0, end: int | None = None, max_bytes: int | None = None,
         check_crc: bool = True, fd: int | None = None):
    """Yield :class:`Batch` and :class:`Damage` objects in file order.

    ``max_bytes`` mimics DumpLogSegments ``--max-bytes``: a batch crossing the limit is not read and a
    ``max-bytes`` event marks where reading stopped. ``fd``: descriptor of the mapped file, to jump over
    holes of a sparse file (see :func:`mqtool.io.first_nonzero`).
    """
    n = len(buf) if end is None else min(end, len(buf))
    limit = n if max_bytes is None else min(n, start + max_bytes)
    p = start
    unpack_prefix = _PREFIX.unpack_from
    # bounded RSS on mapped files (mqtool.pages): pages before the current batch are released as the scan
    # moves on (a batch read again later faults its pages back in from the page cache)
    win = PageWindow(buf, start, end=limit)
    while True:
        if p >= win.next_at:
            win.advance(p)
        if p >= limit:
            if limit < n:
                yield Damage("max-bytes", p, n, f"stopped at --max-bytes ({max_bytes})")
            return
        if n - p < K.HEADER_SIZE_UP_TO_MAGIC:
            if _is_zero(buf, p, n, fd):
                yield Damage("zero-tail", p, n, f"{n - p} zero bytes at the end (end of data)")
            else:
                yield Damage("partial-tail", p, n, f"{n - p} bytes at the end are too short for a batch")
            return
        off, size = unpack_prefix(buf, p)
        magic = buf[p + 16]
        bad = None
        if size < K.MIN_RECORD_OVERHEAD:
            if size == 0 and _is_zero(buf, p, n, fd):
                yield Damage("zero-tail", p, n, f"{n - p} zero bytes at the end (end of data, preallocated)")
                return
            bad = f"record size {size} smaller than minimum record overhead ({K.MIN_RECORD_OVERHEAD})"
        elif magic > 2:
            bad = f"unknown magic {magic}"
        elif magic == 2 and size < _MIN_V2_SIZE:
            bad = f"batch length {size} smaller than the v2 header"
        elif p + 12 + size > n:
            q = resync(buf, p, n, fd)
            if q is None:
                yield Damage("partial-tail", p, n,
                             f"entry of {12 + size} bytes at {p} runs past the end of the file ({n - p} bytes left)")
                return
            yield Damage("skipped", p, q, f"entry length {size} at {p} runs past the end; resynced at {q}")
            p = q
            continue
        if bad is None:
            if p + 12 + size > limit:
                yield Damage("max-bytes", p, n, f"stopped at --max-bytes ({max_bytes})")
                return
            b = _decode(buf, path, p, off, size, magic, check_crc)
            if b.crc_ok or _next_plausible(buf, p + 12 + size, n, fd):
                yield b
                p += 12 + size
                continue
            bad = f"CRC mismatch and the length {size} does not lead to another batch"
        q = resync(buf, p, n, fd)
        if q is None:
            yield Damage("skipped", p, n, f"{bad}; no valid batch after {p}")
            return
        yield Damage("skipped", p, q, f"{bad}; resynced at {q}")
        p = q


def _next_plausible(buf, q: int, n: int, fd: int | None = None) -> bool:
    if q >= n or n - q < K.HEADER_SIZE_UP_TO_MAGIC:
        return True
    if _I32.unpack_from(buf, q + 8)[0] == 0 and _is_zero(buf, q, n, fd):
        return True
    return _frame_ok(buf, q, n)


def _decode(buf, path, p, off, size, magic, check_crc) -> Batch:
    end = p + 12 + size
    if magic == 2:
        (base, _len, ple, _m, crc, attrs, lod, base_ts, max_ts, pid, pepoch, bseq,
         count) = _HDR_V2.unpack_from(buf, p)
        crc_ok = (crc32c(memoryview(buf)[p + 21:end]) == crc) if check_crc else True
        ts_type = 1 if attrs & K.TIMESTAMP_TYPE_MASK else 0
        return Batch(path, p, size + 12, 2, base, base + lod, crc, crc_ok, attrs, attrs & K.CODEC_MASK,
                     ts_type, max_ts, base_ts, ple, pid, pepoch, bseq, count, lod,
                     bool(attrs & K.TRANSACTIONAL_FLAG_MASK), bool(attrs & K.CONTROL_FLAG_MASK),
                     base_ts if attrs & K.DELETE_HORIZON_FLAG_MASK else None, None, buf)
    if magic == 1 and size >= 22:
        _o, _s, crc, _m, attrs, ts = _HDR_V1.unpack_from(buf, p)
        ts_type = 1 if attrs & K.LEGACY_TIMESTAMP_TYPE_MASK else 0
    else:
        _o, _s, crc, _m, attrs = _HDR_V0.unpack_from(buf, p)
        ts, ts_type = -1, -1
    crc_ok = (zlib.crc32(memoryview(buf)[p + 16:end]) == crc) if check_crc else True
    codec = attrs & K.CODEC_MASK
    b = Batch(path, p, size + 12, magic, off, off, crc, crc_ok, attrs, codec, ts_type, ts, _buf=buf)
    if codec != K.CODEC_NONE:
        # A wrapper: base offset and count come from the inner messages.
        first = None
        try:
            n = 0
            for f in _legacy_walk(b):
                if first is None:
                    first = f[0]
                b.inner_last = f[0]
                n += 1
            b.count = n
            if first is not None:
                b.base_offset = first if magic == 0 else off - b.inner_last + first
        except (CodecError, ValueError, struct.error, IndexError) as e:
            b.base_offset, b.count, b.inner_last = None, None, None
            if isinstance(e, LimitExceeded):
                b.error, b.error_code = str(e), e.code
                if magic == 0:
                    b.base_offset = first
            else:
                b.error = f"inner messages unreadable: {e}"
    return b


# ---- records ------------------------------------------------------------------------------------

def _varint(b, i: int):
    """Zigzag varint/varlong at b[i]; returns (value, next index)."""
    v = 0
    shift = 0
    while True:
        x = b[i]
        i += 1
        v |= (x & 0x7F) << shift
        if x < 0x80:
            return (v >> 1) ^ -(v & 1), i
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")


def records_area(batch: Batch, limit: int = 256 * 1024 * 1024) -> bytes:
    """The (decompressed) records bytes of a v2 batch."""
    raw = memoryview(batch._buf)[batch.position + K.V2_HEADER_SIZE:batch.end]
    if batch.codec == K.CODEC_NONE:
        return bytes(raw)
    return decompress(batch.codec, raw, limit)


NATIVE_AREA_MAX = 16 << 20      # whole-batch compiled walks (dump) take areas up to this size


def small_records_area(batch: Batch) -> bytes | None:
    """The records area when it is at most ``NATIVE_AREA_MAX`` bytes and the batch within the record cap,
    else None (the caller streams with :func:`iter_records`). Raises CodecError for undecodable bytes."""
    if batch.count is None or batch.count > limits()[0] or (
            batch.codec == K.CODEC_NONE and batch.size - K.V2_HEADER_SIZE > NATIVE_AREA_MAX):
        return None
    try:
        return records_area(batch, NATIVE_AREA_MAX)
    except CodecTooLarge:
        return None


class _Feed:
    """Bytes from an iterator of chunks, read front to back: ``buf[pos:]`` is what is not consumed yet."""

    __slots__ = ("it", "buf", "pos", "done")

    def __init__(self, chunks):
        self.it = iter(chunks)
        self.buf = b""
        self.pos = 0
        self.done = False

    def have(self, n: int) -> bool:
        """At least ``n`` unconsumed bytes in ``buf`` (pulling chunks as needed)? False at the end of data."""
        left = len(self.buf) - self.pos
        if left >= n:
            return True
        parts = [self.buf[self.pos:]]
        while left < n and not self.done:
            c = next(self.it, None)
            if c is None:
                self.done = True
                break
            parts.append(c)
            left += len(c)
        self.buf = b"".join(parts)
        self.pos = 0
        return left >= n

    def rest(self) -> int:
        """Drain: the number of bytes not consumed."""
        n = len(self.buf) - self.pos
        self.buf, self.pos = b"", 0
        for c in self.it:
            n += len(c)
        self.done = True
        return n


def _zz(b, i: int):
    """Zigzag varint at b[i] → (value, next index); None when b ends inside it."""
    try:
        return _varint(b, i)
    except IndexError:
        return None


def _header_count_of(buf, i: int, max_headers: int):
    """For a record at buf[i] that is not all in ``buf`` yet: raise the header cap finding as soon as the
    header count is readable (before the rest of a huge record is gathered)."""
    j = i
    for k in range(3):                      # length (then the 1-byte attributes), ts delta, offset delta
        got = _zz(buf, j)
        if got is None:
            return
        j = got[1] + (1 if k == 0 else 0)
    for _ in range(2):                      # key, value
        got = _zz(buf, j)
        if got is None:
            return
        j = got[1] + max(got[0], 0)
    got = _zz(buf, j)
    if got is not None and got[0] > max_headers:
        raise _headers_limit(got[0], max_headers)


def _record_groups(feed: _Feed, count: int, max_headers: int):
    """The tuples of ``parse_records`` for ``count`` records read from ``feed``, a bounded group at a time."""
    parse = _native.parse_records if _native is not None else None
    if count <= _WHOLE_RECORDS and not feed.have(_WHOLE_BYTES + 1):
        # the common case, a small area read whole: one call for all its records (as many as the compiled
        # walker builds in one call at most), no framing walk
        data = feed.buf[feed.pos:]
        got = parse(data, count, max_headers) if parse is not None else None
        if got is None:
            try:
                got = parse_records(data, count, max_headers)
            except (IndexError, ValueError):
                got = None          # damaged: the walk below gives the records before the damage, then why
        if got is not None:
            feed.pos += got[1]
            yield got[0]
            return
    done = 0
    while done < count:
        buf, i = feed.buf, feed.pos
        n = len(buf)
        j = i
        k = 0
        need = None
        while k < _GROUP and done + k < count:
            got = _zz(buf, j)
            if got is None:
                need = n - i + 1            # the length varint is cut: one more chunk
                break
            length, h = got
            if length < 0:
                raise ValueError(f"record {done + k}: negative record length {length}")
            if h + length > n:
                need = h + length - i
                break
            j = h + length
            k += 1
        if k == 0:
            if need > (n - i) and need > 1 << 16:
                _header_count_of(buf, i, max_headers)
            if not feed.have(need):
                raise ValueError(f"the records area ends inside record {done} of {count}")
            continue
        data = buf[i:j]
        got = parse(data, k, max_headers) if parse is not None else None
        if got is None:
            try:
                got = parse_records(data, k, max_headers)
            except IndexError:
                raise ValueError(f"record fields past the end of a record (records {done}..{done + k - 1})") from None
        feed.pos = j
        done += k
        yield got[0]


def iter_records(batch: Batch, limit: int = 256 * 1024 * 1024):
    """Records of one batch with absolute offsets and effective timestamps, decoded as a stream (memory
    bounded whatever the batch inflates to). Raises CodecError/ValueError (LimitExceeded at a cap) when
    the bytes run out or do not parse; the records before that point have been yielded.
    Header keys stay bytes here (``Record.headers``); renderers decode them."""
    max_records, max_headers = limits()
    if batch.magic < 2:
        if batch.codec == K.CODEC_NONE:
            yield _legacy_single(batch)
        else:
            yield from _legacy_inner(batch, limit)
        return
    if batch.count < 0:
        raise ValueError(f"negative record count {batch.count}")
    raw = memoryview(batch._buf)[batch.position + K.V2_HEADER_SIZE:batch.end]
    if batch.count > len(raw) and batch.codec == K.CODEC_NONE:
        raise ValueError(f"record count {batch.count} larger than the records area ({len(raw)} bytes)")
    feed = _Feed(decompress_chunks(batch.codec, raw, limit))
    count = min(batch.count, max_records)
    base = batch.base_offset
    seq = batch.base_sequence
    if batch.timestamp_type == 1:          # LogAppendTime: every record reports the batch's max timestamp
        ts0, tsk = batch.max_timestamp, 0
    else:
        ts0, tsk = batch.base_timestamp, 1
    control = batch.is_control
    for recs in _record_groups(feed, count, max_headers):
        for (length, _a, tsd, od, key, value, headers) in recs:
            r = Record(batch, base + od, ts0 + tsk * tsd, key, value, headers, length,
                       (seq + od) & 0x7FFFFFFF if seq >= 0 else -1)
            if control and key is not None and len(key) >= 4:
                r.control_type = _I16.unpack_from(key, 2)[0]
                if r.control_type in (K.CONTROL_ABORT, K.CONTROL_COMMIT) and value is not None and len(value) >= 6:
                    r.coordinator_epoch = _I32.unpack_from(value, 2)[0]
            yield r
    if count < batch.count:
        raise _records_limit(count, max_records)
    left = feed.rest()
    if left:
        raise ValueError(f"{left} bytes left after {batch.count} records")


def _layout(sc) -> str:
    """The field sequence of a construct schema as a string (names, integer formats, zigzag varints, the
    conditions and lengths of byte fields and arrays): what the compiled walker must implement."""
    if sc is construct.ZigZag:
        return "zigzag"
    if isinstance(sc, construct.Renamed):
        return f"{sc.name}={_layout(sc.subcon)}"
    if isinstance(sc, construct.FormatField):
        return f"int{sc.fmtstr}"
    if isinstance(sc, construct.Prefixed):
        return f"prefixed({_layout(sc.lengthfield)},{_layout(sc.subcon)})"
    if isinstance(sc, construct.Struct):
        return "{" + ",".join(_layout(s) for s in sc.subcons) + "}"
    if isinstance(sc, construct.IfThenElse):
        return f"if({sc.condfunc!r},{_layout(sc.thensubcon)},{_layout(sc.elsesubcon)})"
    if isinstance(sc, construct.Bytes):
        return f"bytes({sc.length!r})"
    if isinstance(sc, construct.Array):
        return f"array({sc.count!r},{_layout(sc.subcon)})"
    if sc is construct.Pass:
        return "pass"
    raise TypeError(f"no layout notation for {type(sc).__name__}")


RECORD_LAYOUT = _layout(K.Record)


def _load_native():
    """The compiled records-area walker (``mqtool/_native/kafka.c``) when it is built, switched on, and
    implements exactly the field sequence of ``K.Record``; else None (the Python walk below)."""
    mod = native.load("kafka")
    if mod is None or getattr(mod, "RECORD_LAYOUT", None) != RECORD_LAYOUT:
        return None
    return mod


# Tests set this to None to run the Python path (tests/test_native_kafka.py runs both on the same bytes).
_native = _load_native()


def parse_records(data: bytes, count: int, max_headers: int | None = None):
    """Fast decoder for ``count`` v2 records in ``data``: a list of tuples
    (size, attributes, timestampDelta, offsetDelta, key, value, headers) and the end index.
    Equivalent to ``K.Record`` (hypothesis-tested); raises ValueError/IndexError on bad bytes, and
    LimitExceeded for a record with more than ``max_headers`` headers (default: :func:`limits`)."""
    if max_headers is None:
        max_headers = limits()[1]
    out = []
    append = out.append
    i = 0
    n = len(data)
    vi = _varint
    for _ in range(count):
        x = data[i]
        if x < 0x80:
            length = (x >> 1) ^ -(x & 1)
            i += 1
        else:
            length, i = vi(data, i)
        end = i + length
        if length < 0 or end > n:
            raise ValueError(f"record length {length} past the end of the records area")
        attrs = data[i]
        x = data[i + 1]
        if x < 0x80:
            ts_delta = (x >> 1) ^ -(x & 1)
            i += 2
        elif data[i + 2] < 0x80:                    # two-byte varint: common for timestamp deltas
            x = (x & 0x7F) | (data[i + 2] << 7)
            ts_delta = (x >> 1) ^ -(x & 1)
            i += 3
        else:
            ts_delta, i = vi(data, i + 1)
        x = data[i]
        if x < 0x80:
            off_delta = (x >> 1) ^ -(x & 1)
            i += 1
        elif data[i + 1] < 0x80:
            x = (x & 0x7F) | (data[i + 1] << 7)
            off_delta = (x >> 1) ^ -(x & 1)
            i += 2
        else:
            off_delta, i = vi(data, i)
        x = data[i]
        if x < 0x80:
            klen = (x >> 1) ^ -(x & 1)
            i += 1
        else:
            klen, i = vi(data, i)
        if klen >= 0:
            key = data[i:i + klen]
            i += klen
        else:
            key = None
        x = data[i]
        if x < 0x80:
            vlen = (x >> 1) ^ -(x & 1)
            i += 1
        else:
            vlen, i = vi(data, i)
        if vlen >= 0:
            value = data[i:i + vlen]
            i += vlen
        else:
            value = None
        x = data[i]
        if x == 0:
            headers = ()
            i += 1
        else:
            if x < 0x80:
                hcount = (x >> 1) ^ -(x & 1)
                i += 1
            else:
                hcount, i = vi(data, i)
            if hcount < 0 or hcount > length:
                raise ValueError(f"bad header count {hcount}")
            if hcount > max_headers:
                raise _headers_limit(hcount, max_headers)
            headers = []
            for _h in range(hcount):
                x = data[i]
                if x < 0x80:
                    hk = (x >> 1) ^ -(x & 1)
                    i += 1
                else:
                    hk, i = vi(data, i)
                if hk < 0:
                    raise ValueError("negative header key length")
                hkey = data[i:i + hk]
                i += hk
                x = data[i]
                if x < 0x80:
                    hv = (x >> 1) ^ -(x & 1)
                    i += 1
                else:
                    hv, i = vi(data, i)
                if hv >= 0:
                    hval = data[i:i + hv]
                    i += hv
                else:
                    hval = None
                headers.append((hkey, hval))
        if i != end:
            # also catches key/value/header lengths running past the record (slices never raise)
            raise ValueError(f"record fields end at {i}, its length says {end}")
        append((length, attrs, ts_delta, off_delta, key, value, headers))
    return out, i


def header_records(batch: Batch) -> int:
    """How many records a batch holds by its header (no decoding): v2 the record count, capped by what its
    bytes could hold (each record takes at least one byte) and 0 when the CRC fails (the count is then no
    reference); legacy entries their message count. What ``messages`` counts in verify, info and report."""
    n = batch.count if batch.count and batch.count > 0 else 0
    if batch.magic == 2:
        room = max(0, batch.size - K.V2_HEADER_SIZE)
        n = min(n, room) if batch.crc_ok else 0
    return n


def _legacy_fields(buf, p: int, n: int):
    """(offset, size, crc, magic, attrs, ts, key, value, crc_ok) of a legacy message at p; ValueError if bad."""
    if p + 26 > n:
        raise ValueError("legacy message header past the end")
    off, size, crc, magic, attrs = _HDR_V0.unpack_from(buf, p)
    end = p + 12 + size
    if size < (22 if magic == 1 else 14) or end > n or magic > 1 or magic < 0:
        raise ValueError(f"bad message at {p} (size {size}, magic {magic})")
    q = p + 18
    ts = -1
    if magic == 1:
        ts = struct.unpack_from(">q", buf, q)[0]
        q += 8
    klen = _I32.unpack_from(buf, q)[0]
    q += 4
    key = None
    if klen >= 0:
        if q + klen + 4 > end:
            raise ValueError(f"message at {p}: key length {klen} past the end of the message")
        key = bytes(buf[q:q + klen])
        q += klen
    vlen = _I32.unpack_from(buf, q)[0]
    q += 4
    value = None
    if vlen >= 0:
        if q + vlen > end:
            raise ValueError(f"message at {p}: value length {vlen} past the end of the message")
        value = bytes(buf[q:q + vlen])
        q += vlen
    if q != end:
        raise ValueError(f"message at {p}: fields end at {q}, size says {end}")
    crc_ok = zlib.crc32(memoryview(buf)[p + 16:end]) == crc
    return off, size, crc, magic, attrs, ts, key, value, crc_ok


def _legacy_single(batch: Batch) -> Record:
    f = _legacy_fields(batch._buf, batch.position, batch.end)
    return Record(batch, f[0], f[5], f[6], f[7], [], f[1] + 12, -1, f[8])


def _legacy_walk(batch: Batch, limit: int = 256 * 1024 * 1024):
    """The fields (as :func:`_legacy_fields`) of a wrapper's inner messages, decompressed as a stream."""
    w = _legacy_fields(batch._buf, batch.position, batch.end)
    value = w[7]
    if value is None:
        raise ValueError("compressed wrapper without a value")
    max_records = limits()[0]
    feed = _Feed(decompress_chunks(batch.codec, value, limit))
    at = 0                                  # position of feed.buf[feed.pos] in the decompressed bytes
    n = 0
    while feed.have(1):
        if not feed.have(12):
            raise ValueError(f"{len(feed.buf) - feed.pos} stray bytes after the inner messages")
        size = _I32.unpack_from(feed.buf, feed.pos + 8)[0]
        if size < 0 or not feed.have(12 + size):
            raise ValueError(f"inner message at {at}: size {size} past the end of the wrapper's data")
        if n >= max_records:
            raise _records_limit(n, max_records, "inner messages")
        p = feed.pos
        try:
            f = _legacy_fields(feed.buf, p, p + 12 + size)
        except ValueError as e:
            raise ValueError(f"inner message at {at}: {e}") from None
        yield f
        n += 1
        feed.pos = p + 12 + size
        at += 12 + size


def _legacy_inner(batch: Batch, limit: int = 256 * 1024 * 1024):
    last_inner = batch.inner_last
    if batch.magic == 1 and last_inner is None:
        for f in _legacy_walk(batch, limit):          # magic 1: offsets are relative to the last one
            last_inner = f[0]
    wrapper_off = batch.last_offset
    log_append = batch.magic == 1 and batch.timestamp_type == 1
    for f in _legacy_walk(batch, limit):
        off = f[0] if batch.magic == 0 else wrapper_off - last_inner + f[0]
        ts = batch.max_timestamp if log_append else f[5]
        yield Record(batch, off, ts, f[6], f[7], [], f[1] + 12, -1, f[8])
