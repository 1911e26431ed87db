"""Kafka batches and records: the :class:`Batch` and :class:`Record` types and the decoding of the records
inside a batch (streamed, bounded; compiled lane in ``_native/kafka.c`` with the same results). The walk
over a segment's bytes is :mod:`mqtool.kafka.scan`.

The hot header reads use ``struct.Struct`` objects derived from the construct schemas in
:mod:`formats.kafka` (:mod:`mqtool.kafka.layout`, :func:`mqtool.schema_struct.exact_format`);
``tests/test_kafka_formats.py`` checks the fast
path against the schemas with hypothesis.
"""
from __future__ import annotations

import os
import struct
import zlib
from dataclasses import dataclass, field

from formats import kafka as K
from mqtool import native, schemacache
from mqtool.codecs import CodecTooLarge, decompress_kafka, decompress_kafka_chunks
from mqtool.kafka import layout as L

_HDR_V0 = L.LEGACY_HEADER_V0
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")

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
    inner_crc_bad: int = 0          # legacy wrappers: inner messages whose own CRC-32 fails (the walk reads them)
    inner_crc_first: int | None = None  # ... the offset of the first of them

    @property
    def end(self) -> int:
        return self.position + self.size

    @property
    def last_sequence(self) -> int:
        if self.base_sequence < 0:
            return -1
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF

    def to_row(self) -> dict:
        """The dump row (but ``flags``): the keys of ``mqtool.kafka.rows.BATCH``, in its order."""
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
    return decompress_kafka(batch.codec, raw, limit)


NATIVE_AREA_MAX = 16 << 20      # whole-batch compiled walks (dump) take areas up to this size


def small_records_area(batch: Batch, max_records: int | None = None, view: bool = False):
    """The records area when it is at most ``NATIVE_AREA_MAX`` bytes and the batch within the record cap
    (``max_records``: the cap of :func:`limits`, looked up when not given), else None (the caller streams with
    :func:`iter_records`, which also says what is wrong with a negative count before inflating anything).
    Raises CodecError for undecodable bytes. ``view``: an uncompressed area comes as a
    memoryview of the segment's bytes (no copy; the caller must not keep it)."""
    if batch.count is None or not 0 <= batch.count <= (limits()[0] if max_records is None else max_records) or (
            batch.codec == K.CODEC_NONE and batch.size - K.V2_HEADER_SIZE > NATIVE_AREA_MAX):
        return None
    if view and batch.codec == K.CODEC_NONE:
        return memoryview(batch._buf)[batch.position + K.V2_HEADER_SIZE:batch.end]
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
    nat = _load_native()        # asked per area: mqtool.native's switch decides (tests run both paths)
    parse = nat.parse_records if nat is not None else None
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
    feed = _Feed(decompress_kafka_chunks(batch.codec, raw, limit))
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


def control_type_name(code: int) -> str:
    """A control record's type as dump, info and query name it (``UNKNOWN(n)`` for a type Kafka does not define)."""
    return K.CONTROL_TYPES.get(code, f"UNKNOWN({code})")


# the field sequence of K.Record (mqtool.schema_struct.layout_notation, from the schema cache at start-up)
RECORD_LAYOUT = schemacache.notation(K, "Record")


def _load_native():
    """The compiled records-area walker (``mqtool/_native/kafka.c``) when it is built, switched on, and
    implements exactly the field sequence of ``K.Record``; else None (the Python walk below)."""
    mod = native.load("kafka")
    if mod is None or getattr(mod, "RECORD_LAYOUT", None) != RECORD_LAYOUT:
        return None
    return mod




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
    feed = _Feed(decompress_kafka_chunks(batch.codec, value, limit))
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
