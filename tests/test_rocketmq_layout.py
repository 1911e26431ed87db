"""The RocketMQ layout object (mqtool/rocketmq/layout.py): field positions, the tail framing rule, the property
splitter and drift detection, checked against units built by the construct schema and hand-computed bytes."""
from __future__ import annotations

import re

import pytest
from construct import Int16ub, Struct

from builders import rocketmq_unit
from formats import rocketmq as F
from mqtool.rocketmq import layout


def _unit(version="v1", sys_flag=0, topic=b"T", props=b"K\x01v\x02", body=b"xyz"):
    return rocketmq_unit(topic, body, props, version=version, sysflag=sys_flag, phys=1234, queue_id=3,
                         queue_offset=41, born="[::1]:5" if sys_flag & F.BORNHOST_V6_FLAG else "127.0.0.1:1",
                         store="[fe80::1]:9" if sys_flag & F.STOREHOSTADDRESS_V6_FLAG else "10.0.0.5:10911",
                         born_ts=1000, store_ts=2000, body_crc=7)


def test_fixed_part_positions_read_back_what_construct_wrote():
    unit = _unit()
    obj = F.MessageV1.parse(unit)
    # reference §1: 4+4+4+4+4+8+8+4+8+8+8+8+4+8+4 = 88 bytes before BODY with IPv4 hosts
    assert layout.FIXED_SIZE == 88
    for name, (off, size) in layout.FIELDS.items():
        if "." in name:
            continue
        assert int.from_bytes(unit[off:off + size], "big", signed=True) == obj[name], name


@pytest.mark.parametrize("flags,start", [(0, 88), (F.BORNHOST_V6_FLAG, 100), (F.STOREHOSTADDRESS_V6_FLAG, 100),
                                         (F.BORNHOST_V6_FLAG | F.STOREHOSTADDRESS_V6_FLAG, 112)])
def test_body_start_of_each_host_variant(flags, start):
    # an IPv6 host is 16+4 bytes instead of 4+4: +12 per IPv6 host
    assert layout.body_start(flags) == start == layout.body_start(flags, "v2")
    unit = _unit(sys_flag=flags, body=b"BODY!")
    assert unit[start:start + 5] == b"BODY!"


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_frame_tail_accepts_the_schema_built_unit(version):
    unit = _unit(version, topic=b"TopicA", props=b"A\x011\x02")
    p = 88 + 3
    tp, tl, pp = layout.frame_tail(unit, 0, p, len(unit), layout.TOPIC_LENGTH_SIZE[version])
    assert unit[tp:tp + tl] == b"TopicA" and unit[pp:] == b"A\x011\x02"


def test_frame_tail_failures_name_the_rule():
    unit = bytearray(_unit(topic=b"T", props=b"ab"))
    p = 88 + 3
    stop = len(unit)
    bad = bytearray(unit)
    bad[p] = 0x80                              # signed byte: -128
    with pytest.raises(layout.DecodeFailure) as e:
        layout.frame_tail(bad, 0, p, stop, 1)
    assert (e.value.code, e.value.actual) == ("bad-length-field", -128)
    with pytest.raises(layout.DecodeFailure) as e:
        layout.frame_tail(unit, 0, p, stop - 1, 1)   # properties one byte past TOTALSIZE
    assert e.value.code == "bad-length-field" and "PROPERTIESLENGTH" in e.value.message
    longer = bytes(unit) + b"\0"
    with pytest.raises(layout.DecodeFailure) as e:
        layout.frame_tail(longer, 0, p, stop + 1, 1)  # one spare byte: TOTALSIZE != computed length
    assert (e.value.code, e.value.expected, e.value.actual) == ("size-mismatch", stop, stop + 1)
    with pytest.raises(layout.DecodeFailure) as e:
        layout.frame_tail(unit, 0, stop, stop, 1)
    assert e.value.message == "topic length runs past TOTALSIZE"


def test_property_splitter_keeps_what_the_broker_keeps():
    # MessageDecoder#string2messageProperties: split on \x02, name up to the first \x01, empty name/value dropped
    assert layout.property_pairs("A\x011\x02\x01x\x02B\x01\x02C\x01=\x01\x02A\x012") == \
        [("A", "1"), ("C", "=\x01"), ("A", "2")]
    assert layout.property_dict("A\x011\x02A\x012\x02") == ({"A": "2"}, 2)


def test_a_drifted_schema_gives_no_current_layout(monkeypatch):
    assert layout.current() is not None and layout.current().fingerprint() == layout.fingerprint()
    subs = F.MessageV2.subcons
    monkeypatch.setattr(F, "MessageV2", Struct(*[s for s in subs if s.name != "TOPIC"]))
    assert layout.current() is None
    monkeypatch.undo()
    assert layout.current() is not None


def test_a_drifted_layout_turns_every_rocketmq_helper_off_and_the_answers_stay(monkeypatch, run_cli, tmp_path):
    from conftest import FIXTURES
    from mqtool.rocketmq import nativedump, rebuild, scan, verify

    store = FIXTURES / "rocketmq" / "store"
    before = [run_cli("dump", "commitlog", store, "--json"), run_cli("verify", "store", store, "--json")]
    subs = F.MessageV2.subcons                    # PROPERTIESLENGTH read unsigned: not the layout C was given
    drifted = Struct(*[s if s.name != "PROPERTIESLENGTH" else "PROPERTIESLENGTH" / Int16ub
                       for s in subs])
    monkeypatch.setattr(F, "MessageV2", drifted)
    assert not layout.native_ok()
    assert scan.native_decoder() is None and nativedump.helper() is None and rebuild.native_lib() is None
    assert verify._native_lane() is None
    after = [run_cli("dump", "commitlog", store, "--json"), run_cli("verify", "store", store, "--json")]
    assert after == before
    monkeypatch.undo()
    assert layout.native_ok()


def test_a_layout_the_core_was_not_written_for_is_refused_in_c_and_the_answers_stay(monkeypatch, run_cli):
    """The C core checks the fingerprint of the layout it is given by name (rmqcore.configure): a perturbed
    layout (one field moved) is refused there, every RocketMQ helper stays off, and the answers do not change."""
    from conftest import FIXTURES
    from mqtool import native
    from mqtool.rocketmq import nativedump, rebuild, scan, verify

    core = native.load("rmqcore")
    if core is None:
        pytest.skip("compiled core not built")
    store = FIXTURES / "rocketmq" / "store"
    before = [run_cli("dump", "commitlog", store, "--json"), run_cli("verify", "store", store, "--json"),
              run_cli("rebuild-index", store, "--compare", "--json")]
    real = layout.native_config

    def perturbed():
        fields, framing = real()
        at, size = fields["BORNTIMESTAMP"]
        return {**fields, "BORNTIMESTAMP": (at + 4, size)}, framing

    monkeypatch.setattr(layout, "native_config", perturbed)
    with pytest.raises(ValueError, match="fingerprint"):
        core.configure(*perturbed()[:1], **perturbed()[1], crc32=None)
    assert layout.native_ok()                        # the Python side sees no drift: the C side refuses
    assert layout.native_core() is None
    assert scan.native_decoder() is None and nativedump.helper() is None and rebuild.native_lib() is None
    assert verify._native_lane() is None
    after = [run_cli("dump", "commitlog", store, "--json"), run_cli("verify", "store", store, "--json"),
             run_cli("rebuild-index", store, "--compare", "--json")]
    def answers(runs):           # rebuild-index's summary line carries its run time ("seconds")
        return [(code, re.sub(r'"seconds":[0-9.e+-]+', "", out)) for code, out, _ in runs]

    assert answers(after) == answers(before)
    monkeypatch.undo()
    assert layout.native_core() is not None
