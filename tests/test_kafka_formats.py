"""Schemas in formats/kafka.py: parse → build gives the same bytes (real broker bytes and hand-made ones),
and the struct fast paths in mqtool.kafka.records agree with the construct schemas (hypothesis)."""
from __future__ import annotations

import struct
import zlib

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from formats import kafka as K
from mqtool.kafka import records as R
from mqtool.kafka import scan as S
from builders import kafka_builder, roundtrip
from conftest import require_realdata

GEN = ("kafka", "generated-4.0.0-SNAPSHOT", "broker-append", "forensics-0")


def _read(*parts) -> bytes:
    return require_realdata(*parts).read_bytes()


def test_record_batch_v2_roundtrip_real():
    log = _read(*GEN, "00000000000000000037.log")
    p = 0
    while p < len(log):
        size = struct.unpack_from(">i", log, p + 8)[0]
        data = log[p:p + 12 + size]
        obj = roundtrip(K.RecordBatch, data)
        assert obj.header.magic == 2
        # CRC32C over [21, end), checked independently of our scanner
        assert crc32c(data[21:]) == obj.header.crc
        p += 12 + size
    assert p == len(log)


def test_record_v2_roundtrip_uncompressed_batch():
    log = _read(*GEN, "00000000000000000037.log")   # first batch: v2 none with headers, offsets 37-42
    hdr = K.RecordBatchHeader.parse(log)
    area = log[61:12 + hdr.batchLength]
    i = 0
    seen = 0
    while i < len(area):
        rec = K.Record.parse(area[i:])
        n = len(K.Record.build(rec))
        assert K.Record.build(rec) == area[i:i + n]
        i += n
        seen += 1
    assert seen == hdr.recordsCount == 6
    assert hdr.lastOffsetDelta == 5


def test_legacy_messages_roundtrip_real():
    log = _read(*GEN, "00000000000000000000.log")
    p = 0
    magics = set()
    while p < len(log):
        size = struct.unpack_from(">i", log, p + 8)[0]
        data = log[p:p + 12 + size]
        obj = roundtrip(K.LegacyMessage, data)
        assert zlib.crc32(data[16:]) == obj.crc
        magics.add(obj.magic)
        p += 12 + size
    assert magics == {0, 1}


def test_index_entries_roundtrip_real():
    idx = _read(*GEN, "00000000000000000037.index")
    tix = _read(*GEN, "00000000000000000037.timeindex")
    for i in range(0, len(idx), 8):
        roundtrip(K.OffsetIndexEntry, idx[i:i + 8])
    for i in range(0, len(tix), 12):
        roundtrip(K.TimeIndexEntry, tix[i:i + 12])


def test_txnindex_roundtrip_real():
    data = _read(*GEN, "00000000000000000080.txnindex")
    e = roundtrip(K.AbortedTxn, data)
    # reference §4.3 / MANIFEST: pid 3000 aborted 83..87, LSO 80
    assert (e.version, e.producerId, e.firstOffset, e.lastOffset, e.lastStableOffset) == (0, 3000, 83, 87, 80)


def test_producer_snapshot_roundtrip_real():
    data = _read(*GEN, "00000000000000000080.snapshot")
    s = roundtrip(K.ProducerSnapshot, data)
    assert s.version == 1 and len(s.producerEntries) == 1 and s.producerEntries[0].producerId == 1000
    assert crc32c(data[6:]) == s.crc
    empty = bytes.fromhex("0001 48674bc7 00000000")       # reference §8
    e = roundtrip(K.ProducerSnapshot, empty)
    assert e.producerEntries == [] and crc32c(empty[6:]) == e.crc


def test_control_record_schemas_handmade():
    key = bytes.fromhex("0000 0001")                       # version 0, COMMIT
    val = bytes.fromhex("0000 00000005")                   # version 0, coordinatorEpoch 5
    assert roundtrip(K.ControlRecordKey, key).type == K.CONTROL_COMMIT
    assert roundtrip(K.EndTxnMarker, val).coordinatorEpoch == 5


def test_coordinator_schemas_handmade():
    # OffsetCommitKey: group "g", topic "t", partition 3 (int16-length strings)
    key = b"\x00\x01g" + b"\x00\x01t" + b"\x00\x00\x00\x03"
    k = roundtrip(K.OffsetCommitKey, key)
    assert (k.group.data, k.topic.data, k.partition) == (b"g", b"t", 3)
    v1 = struct.pack(">q", 42) + b"\x00\x00" + struct.pack(">qq", 1000, 2000)   # offset, metadata "", ts, expire
    o = roundtrip(K.OffsetCommitValue(1), v1)
    assert (o.offset, o.commitTimestamp, o.expireTimestamp) == (42, 1000, 2000)
    v4 = struct.pack(">qi", 42, 7) + b"\x01" + struct.pack(">q", 1000) + b"\x00"  # compact "" + no tags
    o4 = roundtrip(K.OffsetCommitValueV4, v4)
    assert (o4.leaderEpoch, o4.metadata.data) == (7, b"")
    frame = bytes([1, 20, 0]) + b"\x00"                   # NoOpRecord v0, empty tagged fields
    f = roundtrip(K.MetadataRecordFrame, frame)
    assert (f.frameVersion, f.apiKey, f.version) == (1, 20, 0)


def test_struct_format_derivation():
    assert K.struct_format(K.RecordBatchHeader) == ">qllbLhlqqqhll"
    assert struct.calcsize(K.struct_format(K.RecordBatchHeader)) == K.V2_HEADER_SIZE
    assert struct.calcsize(K.struct_format(K.AbortedTxn)) == K.TXN_INDEX_ENTRY_SIZE
    assert struct.calcsize(K.struct_format(K.ProducerSnapshotEntry)) == K.PRODUCER_SNAPSHOT_ENTRY_SIZE
    with pytest.raises(TypeError):
        K.struct_format(K.LegacyMessage)


# ---- fast path == construct -------------------------------------------------------------------

_i64 = st.integers(-(1 << 63), (1 << 63) - 1)
_i32 = st.integers(-(1 << 31), (1 << 31) - 1)
_i16 = st.integers(-(1 << 15), (1 << 15) - 1)
_opt_bytes = st.one_of(st.none(), st.binary(max_size=40))


@st.composite
def record_bodies(draw):
    key = draw(_opt_bytes)
    value = draw(_opt_bytes)
    headers = draw(st.lists(st.tuples(st.binary(max_size=8), _opt_bytes), max_size=3))
    ts_delta = draw(st.integers(-(1 << 62), 1 << 62))
    return kafka_builder().record(draw(st.integers(0, (1 << 31) - 1)), ts_delta, key, value, headers)


@settings(max_examples=200, deadline=None)
@given(st.lists(record_bodies(), min_size=1, max_size=5))
def test_fast_record_parser_matches_construct(bodies):
    data = b"".join(bodies)
    fast, used = R.parse_records(data, len(bodies))
    assert used == len(data)
    i = 0
    for length, attrs, tsd, od, key, value, headers in fast:
        c = K.Record.parse(data[i:])
        i += len(K.Record.build(c))
        assert (attrs, tsd, od, key, value) == (c.attributes, c.timestampDelta, c.offsetDelta, c.key, c.value)
        assert list(headers) == [(h.headerKey, h.headerValue) for h in c.headers]


@settings(max_examples=200, deadline=None)
@given(_i64, _i32, st.integers(0, 0x7F), _i16, _i32, _i64, _i64, _i64, _i16, _i32, _i32)
def test_fast_header_matches_construct(base, ple, attrs, epoch, lod, bts, mts, pid, pep, bseq, cnt):
    raw = kafka_builder().frame_v2(base, b"", cnt, base_ts=bts, max_ts=mts, attrs=attrs, pid=pid, epoch=pep,
                                   seq=bseq, ple=ple, last_delta=lod)      # a batch of a header only
    assert len(raw) == K.V2_HEADER_SIZE and raw[17:21] == struct.pack(">I", crc32c(raw[21:]))
    b = next(iter(S.scan(bytes(raw), "x")))
    c = K.RecordBatchHeader.parse(bytes(raw))
    assert isinstance(b, R.Batch) and b.crc_ok
    assert (b.base_offset, b.partition_leader_epoch, b.attributes, b.last_offset_delta, b.base_timestamp,
            b.max_timestamp, b.producer_id, b.producer_epoch, b.base_sequence, b.count, b.crc) == \
        (c.baseOffset, c.partitionLeaderEpoch, c.attributes, c.lastOffsetDelta, c.baseTimestamp,
         c.maxTimestamp, c.producerId, c.producerEpoch, c.baseSequence, c.recordsCount, c.crc)


def test_legacy_fast_path_matches_construct():
    log = _read(*GEN, "00000000000000000000.log")
    p = 0
    while p < len(log):
        size = struct.unpack_from(">i", log, p + 8)[0]
        c = K.LegacyMessage.parse(log[p:p + 12 + size])
        off, sz, crc, magic, attrs, ts, key, value, crc_ok = R._legacy_fields(log, p, len(log))
        assert (off, sz, crc, magic, attrs, key, value) == (c.offset, c.size, c.crc, c.magic, c.attributes, c.key,
                                                            c.value)
        assert ts == (c.timestamp if c.magic == 1 else -1) and crc_ok
        p += 12 + size
