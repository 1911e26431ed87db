"""RocketMQ schemas: parse→build round trips, hand-computed bytes, and fast path == construct."""
from __future__ import annotations

import struct

from construct import Container
from hypothesis import given, settings, strategies as st

from formats import rocketmq as F
from builders import make_message, roundtrip  # noqa: F401  (make_message: other tests import it from here)
from formats.common import java_string_hash
from mqtool.rocketmq.records import FIXED_NAMES, decode_message
from mqtool.rocketmq.indexfiles import index_hash, tags_code


def test_message_v1_hand_computed_header():
    data = make_message()
    # TOTALSIZE = 91 + body + topic + props for IPv4/IPv4 v1 (reference §1.2)
    assert len(data) == 91 + 5 + 6 + len("KEYS\x01k1 k2\x02TAGS\x01t")
    assert data[4:8] == bytes.fromhex("DAA320A7")
    assert struct.unpack_from(">q", data, 20)[0] == 7           # QUEUEOFFSET at 20
    assert data[48:52] == bytes([127, 0, 0, 1])                  # BORNHOST at 48
    assert struct.unpack_from(">q", data, 56)[0] == 2000         # STORETIMESTAMP at 56
    roundtrip(F.MessageV1, data)


def test_message_v2_and_ipv6_roundtrip():
    data = make_message("v2", topic="T" * 150, sysflag=0x30, born="[2001:db8::1]:54321", store="[fd00::5]:10911")
    assert data[4:8] == bytes.fromhex("DAA320AB")
    obj = roundtrip(F.MessageV2, data)
    assert obj.BORNHOST == "[2001:db8::1]:54321" and obj.TOPICLENGTH == 150
    m = decode_message(data, 0, len(data), 0, "f", 1 << 20)
    assert m.born_host == "[2001:db8::1]:54321" and m.store_host == "[fd00::5]:10911" and m.topic == "T" * 150


def test_blank_cq_index_checkpoint_roundtrip():
    roundtrip(F.BlankUnit, struct.pack(">ii", 108, F.BLANK_MAGIC_CODE))
    roundtrip(F.CqUnit, struct.pack(">qiq", 123, 456, -789))
    roundtrip(F.IndexHeader, struct.pack(">qqqqii", 1, 2, 3, 4, 5, 6))
    roundtrip(F.IndexEntry, struct.pack(">iqii", 9, 8, 7, 6))
    cp = struct.pack(">qqqqq", 1, 2, 3, 4, 5) + bytes(4096 - 40)
    roundtrip(F.Checkpoint, cp)
    whole = F.index_file(2, 3)
    data = struct.pack(">qqqqii", 1, 2, 3, 4, 1, 2) + struct.pack(">ii", 1, 0) + bytes(20) + \
        struct.pack(">iqii", 5, 6, 0, 0) + bytes(20)
    assert len(data) == F.index_file_size(2, 3)
    roundtrip(whole, data)


def test_properties_with_and_without_trailing_separator():
    with_sep = "A\x011\x02B\x012\x02"
    assert F.string_to_property_pairs(with_sep) == [("A", "1"), ("B", "2")]
    assert F.string_to_property_pairs(with_sep[:-1]) == [("A", "1"), ("B", "2")]
    # duplicate names are kept in order (a batch's own properties follow the inner message's)
    assert F.string_to_property_pairs("K\x01a\x02K\x01b") == [("K", "a"), ("K", "b")]
    # broker rules: segments < 3 chars skipped, empty names/values dropped
    assert F.string_to_property_pairs("\x01x\x02y\x01\x02ab\x02C\x01=\x01") == [("C", "=\x01")]
    assert F.properties_to_string([("A", "1")]) == "A\x011\x02"


def test_java_hashes_hand_computed():
    assert java_string_hash("") == 0
    assert java_string_hash("a") == 97
    # 'T'*31^3 + 'a'*31^2 + 'g'*31 + 'A' = 84*29791 + 97*961 + 103*31 + 65
    assert java_string_hash("TagA") == 2598919
    assert java_string_hash("polygenelubricants") == -2147483648   # the classic Integer.MIN_VALUE string
    assert index_hash("polygenelubricants") == 0                   # abs(MIN_VALUE) stays negative → 0
    assert tags_code(None) == 0 and tags_code("TagA") == 2598919
    assert java_string_hash("标签") == 0x6807 * 31 + 0x7B7E          # UTF-16 code units, no overflow here
    assert java_string_hash("\U0001F600") == 0xD83D * 31 + 0xDE00    # a surrogate pair counts as two units


def test_prop_crc_digits_reversed():
    assert F.encode_prop_crc(123456789) == "9876543210"
    assert F.encode_prop_crc(5) == "5000000000"
    assert F.decode_prop_crc("9876543210") == 123456789


def test_fast_prefix_is_derived_from_schema():
    assert FIXED_NAMES[:3] == ["TOTALSIZE", "MAGICCODE", "BODYCRC"]
    assert "BORNHOST.addr" in FIXED_NAMES and "STOREHOSTADDRESS.port" in FIXED_NAMES


_txt = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00\x01\x02"),
               min_size=1, max_size=12)


@settings(max_examples=200, deadline=None)
@given(version=st.sampled_from(["v1", "v2"]), body=st.binary(max_size=300), topic=_txt,
       props=st.lists(st.tuples(_txt, _txt), max_size=5), v6=st.sampled_from([0, 0x10, 0x20, 0x30]),
       flag=st.integers(0, 0xF), qo=st.integers(0, 2 ** 40), phys=st.integers(0, 2 ** 40))
def test_fast_decoder_equals_construct(version, body, topic, props, v6, flag, qo, phys):
    ps = F.properties_to_string(props)
    if len(topic.encode()) > 127:
        return
    hosts = {0: ("1.2.3.4:5", "6.7.8.9:10"), 0x10: ("[::1]:5", "6.7.8.9:10"),
             0x20: ("1.2.3.4:5", "[fe80::1]:10"), 0x30: ("[::1]:5", "[fe80::1]:10")}[v6]
    data = make_message(version, body, topic, ps, sysflag=v6 | flag, phys=phys, born=hosts[0], store=hosts[1],
                        queue_offset=qo)
    c = F.MESSAGE_SCHEMAS[version].parse(data)
    m = decode_message(data, 0, len(data), 0, "f", 1 << 20)
    assert (m.size, m.body_crc, m.queue_id, m.queue_offset, m.physical_offset, m.sys_flag) == \
        (c.TOTALSIZE, c.BODYCRC, c.QUEUEID, c.QUEUEOFFSET, c.PHYSICALOFFSET, c.SYSFLAG)
    assert (m.born_host, m.store_host, m.store_timestamp, m.born_timestamp) == \
        (c.BORNHOST, c.STOREHOSTADDRESS, c.STORETIMESTAMP, c.BORNTIMESTAMP)
    assert m.stored_body == c.BODY and m.topic_raw == c.TOPIC and m.props_raw == c.PROPERTIES
    assert m.crc_ok is True
    assert isinstance(c, Container)
