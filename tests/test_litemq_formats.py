"""LiteMQ schemas: round trips, sizes, hand-computed bytes, and the fast path against construct."""
from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import roundtrip
from formats import litemq as F
from mqtool.litemq import layout as L
from mqtool.litemq import records as R

# ---- hand-computed bytes (reference section 3) ------------------------------------------------


def _s(b: bytes) -> bytes:
    return struct.pack(">H", len(b)) + b


def hand_record(fields) -> bytes:
    """A second, independent encoder written from the reference table, not from the schema."""
    msg = struct.pack(">I", 0x4C4D5101)
    msg += _s(fields["MessageID"].encode()) + _s(fields["Topic"].encode())
    msg += struct.pack(">I", len(fields["Tags"])) + b"".join(_s(t.encode()) for t in fields["Tags"])
    msg += struct.pack(">I", len(fields["Keys"])) + b"".join(_s(k.encode()) for k in fields["Keys"])
    msg += struct.pack(">I", len(fields["Properties"]))
    msg += b"".join(_s(k.encode()) + _s(v.encode()) for k, v in fields["Properties"])
    msg += struct.pack(">I", len(fields["Body"])) + fields["Body"]
    msg += struct.pack(">BBBq", fields["MessageType"], fields["Priority"], fields["Reliability"],
                       fields["DelayTime"])
    msg += _s(fields["TransactionID"].encode()) + bytes([fields["MessageStatus"]])
    msg += _s(fields["ShardingKey"].encode()) + struct.pack(">Bq", fields["Broadcast"], fields["BornTimestamp"])
    msg += _s(fields["BornHost"].encode()) + _s(fields["StoreHost"].encode())
    msg += struct.pack(">IqqIqqqI", fields["QueueID"], fields["QueueOffset"], fields["CommitLogOffset"],
                       fields["StoreSize"], fields["StoreTimestamp"], fields["ConsumeStartTime"],
                       fields["ConsumeEndTime"], fields["ConsumeCount"])
    msg += bytes(6)
    return struct.pack(">I", len(msg)) + msg


SAMPLE = R.new_fields(MessageID="1795339138045364582-0", Topic="orders.v1", Tags=["TagA"], Keys=["order-0001"],
                      Body=b"first message: hello LiteMQ", BornTimestamp=1795339138045,
                      StoreTimestamp=1795339138045)


def test_record_matches_real_first_record_bytes_layout():
    # The first record of clean/ is 4 + 212 bytes (expected.json store_size_incl_prefix 216).
    data = R.encode_record(SAMPLE)
    assert len(data) == 216
    assert data == hand_record(SAMPLE)
    assert data[:8] == bytes.fromhex("000000d44c4d5101")
    assert data[-6:] == bytes(6)


def test_fixed_struct_sizes_match_schema():
    assert L.TAIL.size == F.FIXED_TAIL_SIZE == 52
    assert L.ATTRS.size == 11 and L.BORN.size == 9
    assert L.CQ.size == F.CQEntry.sizeof() == F.CQ_ENTRY_SIZE
    assert L.INDEX_ENTRY.size == F.IndexEntry.sizeof() == F.INDEX_ENTRY_SIZE
    assert F.CheckpointHeader.sizeof() == F.CHECKPOINT_HEADER_SIZE
    assert F.IndexHeader.sizeof() == F.INDEX_HEADER_SIZE
    assert L.MIN_MESSAGE_LEN == len(R.encode_record(R.new_fields(BornHost="", StoreHost=""))) - 4


def test_cq_entry_round_trip():
    raw = bytes.fromhex("00000000000000d8" "00000261" "6d184fbd" "000001a2028d33fd")  # orders.v1/1 entry 0
    e = roundtrip(F.CQEntry, raw)
    assert (e.CommitLogOffset, e.Size, e.TagHash, e.Timestamp) == (216, 609, 0x6D184FBD, 1795339138045)
    assert L.CQ.unpack(raw) == (216, 609, 0x6D184FBD, 1795339138045)


def test_fnv_and_tag_hash():
    # FNV-1a 32 published test vectors
    assert R.fnv1a32(b"") == 0x811C9DC5
    assert R.fnv1a32(b"a") == 0xE40C292C
    assert R.fnv1a32(b"foobar") == 0xBF9CF968
    assert R.tag_hash([]) == 0
    assert R.tag_hash([b"TagA"]) == R.fnv1a32(b"TagA\x00") == 419428034   # clean/ expected.json seq 1


def test_checkpoint_parses_until_eof_despite_count():
    groups = [dict(group="cg-orders", topicCount=1, topics=[dict(topic="orders.v1", queueCount=2,
                                                                  queues=[dict(queueId=0, offset=12),
                                                                          dict(queueId=1, offset=4)])]),
              dict(group="cg-pay", topicCount=1, topics=[dict(topic="payments-eu", queueCount=1,
                                                              queues=[dict(queueId=0, offset=3)])])]
    hdr = dict(version=1, commitLogFlushedOffset=0, cqFlushedCount=0, consumerOffsetCount=3,
               lastFlushTime=1, lastUpdateTime=2)
    data = F.Checkpoint.build(dict(header=hdr, consumequeue=None, consumers=groups, trailing=b""))
    assert len(data) == 133  # the size of clean/ checkpoint (MANIFEST)
    cp = F.Checkpoint.parse(data)
    assert cp.header.consumerOffsetCount == 3 and len(cp.consumers) == 2 and cp.trailing == b""


def test_index_header_and_entry():
    hdr = F.IndexHeader.build(dict(version=1, createTime=5, lastUpdate=6, hashSlotCount=F.INDEX_HASH_SLOTS,
                                   indexCount=2))
    assert len(hdr) == 40 and hdr[:4] == bytes.fromhex("4c4d5104")
    e = F.IndexEntry.build(dict(keyHash=7, phyOffset=216, timeDiff=-1, next=-1))
    assert L.INDEX_ENTRY.unpack(e) == (7, 216, -1, -1)


# ---- property tests: schema round trip and fast path == construct -----------------------------

text = st.text(max_size=12)
u8 = st.integers(0, 255)
i64 = st.integers(-(1 << 63), (1 << 63) - 1)
u32 = st.integers(0, (1 << 32) - 1)

messages = st.builds(
    R.new_fields,
    MessageID=text, Topic=text, Tags=st.lists(text, max_size=4), Keys=st.lists(text, max_size=4),
    Properties=st.lists(st.tuples(text, text), max_size=4), Body=st.binary(max_size=64),
    MessageType=u8, Priority=u8, Reliability=u8, DelayTime=i64, TransactionID=text, MessageStatus=u8,
    ShardingKey=text, Broadcast=u8, BornTimestamp=i64, BornHost=text, StoreHost=text, QueueID=u32,
    QueueOffset=i64, CommitLogOffset=i64, StoreSize=u32, StoreTimestamp=i64, ConsumeStartTime=i64,
    ConsumeEndTime=i64, ConsumeCount=u32,
)


@settings(max_examples=200, deadline=None)
@given(messages)
def test_fast_decoder_equals_construct(fields):
    data = R.encode_record(fields)
    assert data == hand_record(fields)
    parsed = F.Record.parse(data)
    m, raw_tags, raw_keys, consumed, bad, b0, b1 = R.decode_message(data, 4, len(data))
    assert not bad
    assert len(data) - 4 == consumed + F.TRAILING_PAD == R.encoded_length(fields)
    assert data[b0:b1] == parsed.Body == fields["Body"]
    for k, v in m.items():
        if k == "Properties":
            assert v == [(p.key, p.value) for p in parsed.Properties]
        else:
            assert v == parsed[k], k
    assert raw_tags == [t.encode() for t in fields["Tags"]]


@settings(max_examples=100, deadline=None)
@given(st.tuples(i64, st.integers(-(1 << 31), (1 << 31) - 1), u32, i64))
def test_cq_fast_equals_construct(t):
    raw = L.CQ.pack(*t)
    e = F.CQEntry.parse(raw)
    assert (e.CommitLogOffset, e.Size, e.TagHash, e.Timestamp) == t
    assert F.CQEntry.build(dict(zip(L.CQ_NAMES, t))) == raw


@settings(max_examples=100, deadline=None)
@given(messages, st.integers(1, 200))
def test_truncated_message_raises_decode_error_not_crash(fields, cut):
    data = R.encode_record(fields)
    end = max(4, len(data) - F.TRAILING_PAD - cut)
    try:
        R.decode_message(data, 4, end)
    except R.DecodeError:
        return
    raise AssertionError("decoder accepted a truncated message")


def test_checkpoint_consumequeue_section_read_by_its_queue_count():
    cqs = [dict(topic="a", queueCount=2, queues=[dict(queueId=0, offset=5), dict(queueId=1, offset=6)]),
           dict(topic="b", queueCount=1, queues=[dict(queueId=3, offset=7)])]
    groups = [dict(group="g", topicCount=1, topics=[dict(topic="a", queueCount=1,
                                                         queues=[dict(queueId=0, offset=1)])])]
    # LiteMQ's counts: cqFlushedCount = 3 (topic,queue) pairs for 2 topic records
    hdr = dict(version=1, commitLogFlushedOffset=0, cqFlushedCount=3, consumerOffsetCount=1,
               lastFlushTime=0, lastUpdateTime=0)
    data = F.Checkpoint.build(dict(header=hdr, consumequeue=cqs, consumers=groups, trailing=b""))
    cp = F.Checkpoint.parse(data)
    assert [t.topic for t in cp.consumequeue] == ["a", "b"]
    assert [g.group for g in cp.consumers] == ["g"] and cp.trailing == b""


def test_layout_places_the_fixed_fields_as_the_go_encoder_writes_them():
    """pkg/protocol/message.go Encode: after StoreHost, QueueID u32, QueueOffset/CommitLogOffset u64, StoreSize
    u32, StoreTimestamp/ConsumeStartTime/ConsumeEndTime u64, ConsumeCount u32 (offsets counted by hand)."""
    assert [L.FIELDS[n] for n in L.TAIL_NAMES] == [(0, 4), (4, 8), (12, 8), (20, 4), (24, 8), (32, 8), (40, 8),
                                                   (48, 4)]
    assert L.FIELDS["DelayTime"] == (3, 8) and L.FIELDS["BornTimestamp"] == (1, 8)
    assert L.CQ_FIELDS == {"CommitLogOffset": (0, 8), "Size": (8, 4), "TagHash": (12, 4), "Timestamp": (16, 8)}
    assert (L.LENGTH.size, L.STRING_LENGTH_SIZE, L.COUNT_SIZE) == (4, 2, 4)
    # the smallest message by hand: magic 4, two empty strings 2+2, three empty lists 4*3, empty body 4, attrs 11,
    # TransactionID 2, MessageStatus 1, ShardingKey 2, born 9, two hosts 2+2, tail 52, padding 6
    assert L.MIN_MESSAGE_LEN == 4 + 2 + 2 + 12 + 4 + 11 + 2 + 1 + 2 + 9 + 2 + 2 + 52 + 6


def test_layout_refuses_a_schema_the_readers_are_not_written_for(monkeypatch):
    from construct import Int16ub, PascalString

    before = L.RecordLayout().fingerprint()
    assert before == L.fingerprint()
    text = "ConsumeCount" / PascalString(Int16ub, "utf8")
    monkeypatch.setattr(F, "MESSAGE_TAIL_FIELDS", F.MESSAGE_TAIL_FIELDS[:-1] + [text])
    with pytest.raises(L.LayoutError):
        L.RecordLayout()
    monkeypatch.undo()
    monkeypatch.setattr(F, "MESSAGE_TAIL_FIELDS", F.MESSAGE_TAIL_FIELDS[:-1] + ["ConsumeCount" / Int16ub])
    assert L.RecordLayout().fingerprint() != before           # a drifted field, a different fingerprint
