"""Generated RocketMQ commitlog bytes for the property tests of the compiled helpers (dump rows, decode): a unit
by builders' struct-packed builder (``rocketmq_packed_unit``, tested equal to the construct build in
tests/test_rocketmq_builders.py and tests/test_rocketmq_native_dump.py) and hypothesis strategies for odd units
and damaged segments."""
from __future__ import annotations

import zlib

from hypothesis import strategies as st

from builders import make_message, rocketmq_builder, rocketmq_packed_unit
from formats import rocketmq as F


def unit(version="v1", body=b"hello", topic=b"TopicA", props=b"KEYS\x01k1 k2\x02TAGS\x01t", sys_flag=0,
         phys=0, born=(b"\x7f\x00\x00\x01", 1), store=(b"\x0a\x00\x00\x05", 10911), queue_offset=7,
         body_crc=None) -> bytes:
    """One IPv4 unit with :func:`builders.make_message`'s defaults, by the struct-packed builder (any 32-bit
    port, any sysFlag: v6 bits do not change the IPv4 layout)."""
    return rocketmq_packed_unit(topic, body, props, version=version, sysflag=sys_flag, phys=phys, queue_id=1,
                                queue_offset=queue_offset, born=born, store=store, born_ts=1000, store_ts=2000,
                                body_crc=body_crc)


# JSON escapes and UTF-8 edge cases: surrogates, overlong forms, > U+10FFFF, truncated sequences, U+2028
_ODD = [b'q"uo\\te', b"\x08\x0c\n\r\t\x00\x1f\x7f", b"\xed\xa0\x80", b"\xed\x9f\xbf", b"\xf4\x90\x80\x80",
        b"\xf4\x8f\xbf\xbf", b"\xe0\x80\x80", b"\xe0\xa0\x80", b"\xc0\xaf", b"\xc2\x80", b"\xe4\xb8",
        b"\xf0\x8f\xbf\xbf", b"\xf0\x90\x80\x80", "\u2028é😀".encode(),
        # what a terminal acts on (escaped as \\uXXXX by every writer) next to neighbours written as they are
        "\u009b\u009f\u00a0\u061b\u061c".encode(), "\u200d\u200e\u200f\u2027\u2029".encode(),
        "\u202a\u202e\u202f\u2065\u2066\u2069\u206a".encode(), b"\xe2\x80\xa8\xc2"]
_odd = st.lists(st.sampled_from(_ODD + [b"a", b" "]), max_size=4).map(b"".join)
_text = st.one_of(st.binary(max_size=12), st.text(max_size=8).map(lambda s: s.encode("utf-8")), _odd,
                  st.sampled_from([b"KEYS", b"TAGS", b"UNIQ_KEY", b"", b"\xff\xfe", "ключ".encode(), b"a\x01b"]))
_pair = st.tuples(_text, st.sampled_from([b"\x01", b"", b"\x01\x01"]), _text).map(lambda t: b"".join(t))
_props = st.one_of(
    st.lists(_pair, max_size=6).flatmap(
        lambda ps: st.sampled_from([b"\x02".join(ps), b"\x02".join(ps) + b"\x02", b"\x02" + b"\x02".join(ps)])),
    st.binary(max_size=40),
    st.just(b"KEYS\x01 a  b \x02KEYS\x01c\x02TAGS\x01x\x02UNIQ_KEY\x01u\x02TAGS\x01y\x02"),
    st.just(b"\x02".join(b"p%d\x01v" % i for i in range(70))))      # more pairs than the JSON lane takes
_body = st.one_of(st.binary(max_size=64), st.text(max_size=30).map(lambda s: s.encode("utf-8")), _odd,
                  st.just(zlib.compress(b"compressed body " * 4)), st.just(b""))
_V6 = F.BORNHOST_V6_FLAG | F.STOREHOSTADDRESS_V6_FLAG
_sys_flag = st.one_of(st.sampled_from([0, 0, 0, 1, 4, 8, 12, 0x101, 0x201, 0x301, 0x701, 0x10, 0x30]),
                      st.integers(-(1 << 31), (1 << 31) - 1).map(lambda f: f & ~_V6))
_host = st.tuples(st.binary(min_size=4, max_size=4), st.one_of(st.integers(0, 65535),
                                                               st.integers(-(1 << 31), (1 << 31) - 1)))


@st.composite
def units(draw):
    version = draw(st.sampled_from(["v1", "v2"]))
    topic = draw(st.one_of(st.sampled_from([b"TopicA", "主题".encode(), b"\xc3", b""]), st.binary(max_size=10), _odd,
                           st.just(b"T" * 200)))
    sys_flag = draw(_sys_flag)
    if sys_flag & _V6 and draw(st.booleans()):
        return make_message(version, b"v6 body", "T6", "KEYS\x01k", sysflag=0x30, born="[2001:db8::1]:5",
                            store="[fd00::5]:10911")
    return unit(version, draw(_body), topic, draw(_props), sys_flag,
                phys=draw(st.one_of(st.integers(0, 1 << 40), st.integers(-(1 << 63), (1 << 63) - 1))),
                born=draw(_host), store=draw(_host), queue_offset=draw(st.integers(-(1 << 63), (1 << 63) - 1)),
                body_crc=draw(st.one_of(st.none(), st.integers(-(1 << 31), (1 << 31) - 1))))


@st.composite
def segments(draw):
    data = bytearray(b"".join(draw(st.lists(units(), min_size=1, max_size=8))))
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 2, 3]))):     # damage: set, insert or delete bytes
        at = draw(st.integers(0, len(data) - 1))
        op = draw(st.sampled_from(["set", "insert", "delete"]))
        if op == "set":
            data[at] = draw(st.integers(0, 255))
        elif op == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=4))
        else:
            del data[at:at + draw(st.integers(1, 4))]
    tail = draw(st.sampled_from([b"", bytes(16), rocketmq_builder().blank(64) + bytes(56)]))
    return bytes(data) + tail
