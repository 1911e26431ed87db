"""The RocketMQ unit builders of tests/builders.py: the struct-packed twin writes the construct schema's bytes."""
from __future__ import annotations

from hypothesis import given, settings, strategies as st

from builders import rocketmq_packed_unit, rocketmq_unit
from formats import rocketmq as F

I32 = st.integers(-(1 << 31), (1 << 31) - 1)
I64 = st.integers(-(1 << 63), (1 << 63) - 1)
_ipv4 = st.tuples(st.integers(0, 255), st.integers(0, 255), st.integers(0, 255), st.integers(0, 255),
                  st.integers(0, 65535)).map(lambda t: "%d.%d.%d.%d:%d" % t)


@settings(max_examples=200, deadline=None)
@given(version=st.sampled_from(["v1", "v2"]), topic=st.binary(max_size=127), body=st.binary(max_size=64),
       props=st.binary(max_size=80), sysflag=I32.map(lambda f: f & ~(F.BORNHOST_V6_FLAG | F.STOREHOSTADDRESS_V6_FLAG)),
       phys=I64, queue_id=I32, queue_offset=I64, born=_ipv4, store=_ipv4, born_ts=st.one_of(st.none(), I64),
       store_ts=I64.filter(lambda t: t - 3 >= -(1 << 63)), body_crc=st.one_of(st.none(), I32), flag=I32,
       prepared=I64)
def test_packed_unit_is_the_construct_unit(version, topic, body, props, **kw):
    built = rocketmq_unit(topic, body, props, version=version, **kw)
    assert rocketmq_packed_unit(topic, body, props, version=version, **kw) == built
    assert F.MESSAGE_SCHEMAS[version].parse(built).TOTALSIZE == len(built)


def test_packed_unit_takes_raw_hosts_and_writes_overlong_lengths_as_the_readers_must_meet_them():
    base = rocketmq_packed_unit(b"T", b"b", b"", born="1.2.3.4:5", store="6.7.8.9:10")
    assert rocketmq_packed_unit(b"T", b"b", b"", born=(bytes([1, 2, 3, 4]), 5), store=(bytes([6, 7, 8, 9]), 10)) == base
    odd = rocketmq_packed_unit(b"t" * 200, b"", b"p" * 0x8000)
    body_end = 4 * 5 + 8 * 2 + 4 + 8 + 8 + 8 + 8 + 4 + 8 + 4          # 88: the IPv4 fixed part, an empty body
    assert odd[body_end] == 0                                             # a v1 topic of 200 bytes: length 0
    assert odd[body_end + 1 + 200:body_end + 1 + 200 + 2] == b"\xff\xff"  # 32768 properties bytes: length -1
