"""Fast paths == their reference: each optimised decoder/checker against the schema or the careful path.

* ``selected_format`` (a few fields of a wide header) == the same fields of the full schema-derived struct;
* ``decode_message`` (one-unpack fast path) == ``_decode_checked`` (the careful decoder) on valid and damaged
  units — same fields, or the same failure code;
* ``property_pairs`` == ``formats.rocketmq.string_to_property_pairs``; ``fastcrc.crc32`` == ``zlib.crc32``;
* ``verify`` with the fast lane == ``verify`` without it (same findings, same order, same summary) on
  damaged copies of the fixture store and on the real stores — for the Python lane and for the compiled one
  (``mqtool/_native/rmqverify.c``, fixture ``lane_impl``; more in tests/test_rocketmq_native_verify.py);
* scanning with a tiny window (page release/populate every page) == scanning in one go.
"""
from __future__ import annotations

import shutil
import struct
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from formats import rocketmq as F
from mqtool import fastcrc
from mqtool.options import VerifyOptions
from mqtool.rocketmq import ops, records, scan
from mqtool.rocketmq.verify import native_lane as verify
from mqtool.rocketmq.store import open_store
from mqtool.rocketmq.records import (DecodeFailure, _decode_checked, decode_message, property_dict,
                                     property_pairs)
from mqtool.schema_struct import fixed_prefix_format, selected_format

from tests.conftest import require_realdata
from builders import make_message

REPO = Path(__file__).resolve().parent.parent
FIXTURE_STORE = REPO / "fixtures" / "rocketmq" / "store"

FIELDS = ("size", "version", "body_crc", "queue_id", "flag", "queue_offset", "physical_offset", "sys_flag",
          "born_timestamp", "born_host", "store_timestamp", "store_host", "reconsume_times",
          "prepared_transaction_offset", "body_start", "body_len", "topic_raw", "props_raw", "crc_ok", "file",
          "position", "offset")


def _fields(m):
    return tuple(getattr(m, f) for f in FIELDS)


def _decode_both(data: bytes, pos: int = 0, max_size: int = 1 << 20):
    """(fast result, careful result): each a field tuple or ("fail", code)."""
    out = []
    for fn in (decode_message, _decode_checked):
        try:
            m = fn(data, pos, len(data), 1000, "f", max_size, True, None)
            out.append(_fields(m))
        except DecodeFailure as e:
            out.append(("fail", e.code))
    return out


# ---- schema-derived structs -----------------------------------------------------------------------------------

@settings(max_examples=100, deadline=None)
@given(data=st.binary(min_size=88, max_size=88),
       wanted=st.sets(st.sampled_from(fixed_prefix_format(F.MessageV1, stop_before="BODY")[1]), min_size=1))
def test_selected_format_equals_full_prefix(data, wanted):
    full, names = fixed_prefix_format(F.MessageV1, stop_before="BODY")
    order = [n for n in names if n in wanted]
    sel = selected_format(F.MessageV1, order, stop_before="BODY")
    assert sel.size == full.size == 88
    values = dict(zip(names, full.unpack(data)))
    assert list(sel.unpack(data)) == [values[n] for n in order]


def test_selected_format_rejects_unknown_or_unordered():
    with pytest.raises(KeyError):
        selected_format(F.MessageV1, ["NOPE"], stop_before="BODY")
    with pytest.raises(ValueError):
        selected_format(F.MessageV1, ["BODYCRC", "TOTALSIZE"], stop_before="BODY")


# ---- decode fast path == careful decoder ------------------------------------------------------------------------

_txt = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00\x01\x02"),
               min_size=1, max_size=10)


@st.composite
def units(draw):
    version = draw(st.sampled_from(["v1", "v1", "v2"]))
    v6 = draw(st.sampled_from([0, 0, 0, 0x10, 0x20, 0x30]))
    hosts = {0: ("1.2.3.4:5", "6.7.8.9:10"), 0x10: ("[::1]:5", "6.7.8.9:10"),
             0x20: ("1.2.3.4:5", "[fe80::1]:10"), 0x30: ("[::1]:5", "[fe80::1]:10")}[v6]
    props = F.properties_to_string(draw(st.lists(st.tuples(_txt, _txt), max_size=4)))
    topic = draw(_txt)
    if len(topic.encode()) > 127:
        topic = "T"
    data = bytearray(make_message(version, draw(st.binary(max_size=200)), topic, props,
                                  sysflag=v6 | draw(st.sampled_from([0, 0x4, 0x8, 0xC, 0x80])),
                                  phys=draw(st.integers(0, 2 ** 40)), born=hosts[0], store=hosts[1],
                                  queue_offset=draw(st.integers(0, 2 ** 40))))
    # damage: overwrite a few bytes anywhere (lengths, magic, CRC, body ...) or truncate
    for _ in range(draw(st.integers(0, 3))):
        i = draw(st.integers(0, len(data) - 1))
        data[i] = draw(st.integers(0, 255))
    if draw(st.booleans()):
        data = data[:draw(st.integers(0, len(data)))]
    return bytes(data) + draw(st.binary(max_size=8))


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=units())
def test_fast_decode_equals_careful_decoder(data):
    fast, careful = _decode_both(data)
    assert fast == careful


def test_fast_decode_length_edges():
    """Hand-made edge cases: negative (signed) topic/properties lengths must fail the same way."""
    good = make_message("v1", b"abc", "T", "K\x01v")
    body_end = 88 + 3
    neg_topic = bytearray(good)
    neg_topic[body_end] = 0x80                      # TOPICLENGTH -128 (Int8sb)
    neg_props = bytearray(good)
    struct.pack_into(">h", neg_props, body_end + 2, -1)
    v2 = bytearray(make_message("v2", b"abc", "T" * 130, "K\x01v"))
    # a 40,000-byte properties section: adds up as unsigned, but PROPERTIESLENGTH is Int16sb (-25,536)
    big = bytearray(make_message("v1", b"abc", "T", ""))
    big += b"k" * 40000
    struct.pack_into(">i", big, 0, len(big))
    struct.pack_into(">H", big, len(big) - 40000 - 2, 40000)
    for data in (good, bytes(neg_topic), bytes(neg_props), bytes(v2), good[:-1], good + b"\x00", bytes(big)):
        fast, careful = _decode_both(bytes(data))
        assert fast == careful
    assert _decode_both(bytes(neg_topic))[0] == ("fail", "bad-length-field")
    assert _decode_both(bytes(neg_props))[0] == ("fail", "bad-length-field")
    assert _decode_both(bytes(big), max_size=1 << 20)[0][0] == "fail"


def test_fast_decode_on_other_buffers_takes_careful_path():
    data = make_message("v1", b"abc", "T", "K\x01v")
    m = decode_message(bytearray(data), 0, len(data), 0, "f", 1 << 20)
    assert isinstance(m.topic_raw, bytes) and m.topic_raw == b"T" and m.crc_ok


# ---- properties and CRC ---------------------------------------------------------------------------------------

@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet=st.sampled_from(["\x01", "\x02", "a", "b", "=", " ", "é"]), max_size=40))
def test_property_pairs_equals_reference(text):
    ref = F.string_to_property_pairs(text)
    assert property_pairs(text) == ref
    assert property_dict(text) == (dict(ref), len(ref))


def test_to_row_properties_with_and_without_repeated_names():
    data = make_message(props="KEYS\x01a b\x02TAGS\x01t")
    plain = decode_message(data, 0, len(data), 0, "f", 1 << 20)
    row = plain.to_row()
    assert row["properties"] == {"KEYS": "a b", "TAGS": "t"} and row["keys"] == ["a", "b"]
    assert "property_pairs" not in row
    data = make_message(props="KEYS\x01a\x02KEYS\x01b\x02TAGS\x01t")
    dup = decode_message(data, 0, len(data), 0, "f", 1 << 20)
    row = dup.to_row()
    assert row["properties"] == {"KEYS": "b", "TAGS": "t"} and row["keys"] == ["b"] and row["tags"] == "t"
    assert row["property_pairs"] == [["KEYS", "a"], ["KEYS", "b"], ["TAGS", "t"]]
    dup.property_pairs                        # parsed before: the same row from the cached pairs
    assert dup.to_row() == row


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=5000), start=st.integers(0, 2 ** 32 - 1))
def test_fastcrc_equals_zlib(data, start):
    assert fastcrc.crc32(data) == zlib.crc32(data)
    assert fastcrc.crc32(memoryview(data)) == zlib.crc32(data)
    assert fastcrc.crc32(data, start) == zlib.crc32(data, start)


def test_fastcrc_known_value():
    assert fastcrc.crc32(b"123456789") == 0xCBF43926        # the CRC-32 check value


# ---- verify with and without the fast lane (fixture lane_impl: tests/conftest.py) ---------------------------------


def _verify(path, lane: bool, monkeypatch) -> tuple[list, dict]:
    monkeypatch.setattr(verify, "USE_FAST_LANE", lane)
    findings, summary_fn = ops.verify("store", str(path), VerifyOptions(progress=False))
    got = [f.to_dict() for f in findings]
    return got, summary_fn().to_dict()


def _assert_same_verify(path, monkeypatch):
    slow = _verify(path, False, monkeypatch)
    fast = _verify(path, True, monkeypatch)
    assert fast == slow
    return fast


def test_lane_equals_full_path_on_fixture(monkeypatch, lane_impl):
    consumed = []
    make = verify._fast_lane

    def counting(ctx, expected_next):
        lane = make(ctx, expected_next)
        assert (lane.__name__ == "native_lane") == (lane_impl == "native")

        def wrapped(*a):
            r = lane(*a)
            consumed.append(r[1])
            return r
        return wrapped

    monkeypatch.setattr(verify, "_fast_lane", counting)
    findings, summary = _assert_same_verify(FIXTURE_STORE, monkeypatch)
    assert summary["messages"] > 40
    assert sum(consumed) > summary["messages"] // 2     # the lane did take the common units


@st.composite
def damage_plans(draw):
    n = draw(st.integers(1, 4))
    return [(draw(st.integers(0, 4095)), draw(st.integers(0, 255)), draw(st.sampled_from(["set", "insert",
                                                                                          "delete"])))
            for _ in range(n)]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(plan=damage_plans(), seg=st.integers(0, 2))
def test_lane_equals_full_path_on_damaged_copies(tmp_path_factory, monkeypatch, lane_impl, plan, seg):
    store = tmp_path_factory.mktemp("dmg") / "store"
    shutil.copytree(FIXTURE_STORE, store)
    segs = sorted((store / "commitlog").iterdir())
    target = segs[seg % len(segs)]
    data = bytearray(target.read_bytes())
    for pos, val, how in plan:
        pos %= len(data)
        if how == "set":
            data[pos] = val
        elif how == "insert":
            data[pos:pos] = bytes([val])
            del data[-1]
        else:
            del data[pos]
            data.append(0)
    target.write_bytes(bytes(data))
    _assert_same_verify(store, monkeypatch)


def test_lane_sees_queue_offset_gap_and_shift(tmp_path, monkeypatch, lane_impl):
    """A queue offset rewritten and a PHYSICALOFFSET off: the lane must hand both units to the full path."""
    store = tmp_path / "store"
    shutil.copytree(FIXTURE_STORE, store)
    seg = sorted((store / "commitlog").iterdir())[0]
    data = bytearray(seg.read_bytes())
    m0 = decode_message(bytes(data), 0, len(data), 0, str(seg), 1 << 22)
    m1 = decode_message(bytes(data), m0.size, len(data), 0, str(seg), 1 << 22)
    struct.pack_into(">q", data, m1.position + 20, m1.queue_offset + 5)      # QUEUEOFFSET
    m2 = decode_message(bytes(data), m1.position + m1.size, len(data), 0, str(seg), 1 << 22)
    struct.pack_into(">q", data, m2.position + 28, m2.physical_offset + 7)   # PHYSICALOFFSET
    seg.write_bytes(bytes(data))
    findings, _ = _assert_same_verify(store, monkeypatch)
    codes = {f["code"] for f in findings}
    assert codes & {"queue-offset-gap", "queue-offset-repeat"} and "physical-offset-mismatch" in codes


def _rocketmq_stores():
    root = require_realdata("rocketmq")
    return sorted(p.parent for p in root.glob("*/store/commitlog") if p.is_dir())


def test_lane_equals_full_path_on_real_stores(monkeypatch, lane_impl):
    stores = _rocketmq_stores()
    assert stores
    for store in stores:
        _assert_same_verify(store, monkeypatch)


# ---- windowed scanning ----------------------------------------------------------------------------------------------

def _events(store, lane=None):
    out = []
    for seg in open_store(str(store)).segments:
        for ev in scan.SegmentScanner(seg, fast_lane=lane).events():
            out.append((type(ev).__name__, getattr(ev, "position", None), getattr(ev, "size", None)))
    return out


def test_small_window_scan_equals_default(monkeypatch, lane_impl):
    stores = [FIXTURE_STORE] + _rocketmq_stores()
    for store in stores:
        before = _events(store)
        verified = _verify(store, True, monkeypatch)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(scan, "WINDOW", records.mmap.PAGESIZE)     # release/populate at every page: lane
            assert _events(store) == before                      # limits at every page
            assert _verify(store, True, monkeypatch) == verified


def test_lane_equals_full_path_on_hand_made_edge_units(tmp_path, monkeypatch, lane_impl):
    """Units the lane must decline: 32K+ properties (negative Int16sb), v2 magic, IPv6, PREPARED, a bad CRC,
    non-UTF-8 properties, a __CRC32# tail, multi-dispatch; each followed by a clean unit."""
    units = []
    big = bytearray(make_message("v1", b"abc", "T", ""))
    big += b"k" * 40000
    struct.pack_into(">i", big, 0, len(big))
    struct.pack_into(">H", big, len(big) - 40000 - 2, 40000)
    units.append(bytes(big))
    units.append(make_message("v2", b"v2 body", "T2", "KEYS\x01a"))
    units.append(make_message("v1", b"v6", "T", "KEYS\x01b", sysflag=0x30, born="[::1]:5", store="[fe80::1]:9"))
    units.append(make_message("v1", b"half", "T", "KEYS\x01c", sysflag=F.TRANSACTION_PREPARED_TYPE))
    bad_crc = bytearray(make_message("v1", b"crc", "T", "KEYS\x01d"))
    bad_crc[88] ^= 0xFF
    units.append(bytes(bad_crc))
    units.append(make_message("v1", b"x", "T", "KEYS\x01\xe9"))                                 # UTF-8, not ASCII
    units.append(make_message("v1", b"x", "T", "KEYS\x01zz").replace(b"zz", b"\xff\xfe"))       # not UTF-8
    units.append(make_message("v1", b"x", "T", "KEYS\x01e\x02" + F.PROPERTY_CRC32 + "\x010000000000\x02"))
    units.append(make_message("v1", b"x", "T", F.PROPERTY_INNER_MULTI_DISPATCH + "\x01%LMQ%q\x02"
                              + F.PROPERTY_INNER_MULTI_QUEUE_OFFSET + "\x010"))
    data = bytearray()
    for i, u in enumerate(units):
        for unit in (u, make_message("v1", b"clean", "C", "KEYS\x01k", queue_offset=i)):
            unit = bytearray(unit)
            struct.pack_into(">q", unit, 28, len(data))                 # PHYSICALOFFSET = real offset
            data += unit
    seg = tmp_path / "store" / "commitlog" / f"{0:020d}"
    seg.parent.mkdir(parents=True)
    seg.write_bytes(bytes(data) + bytes(65536 - len(data) % 65536))
    findings, summary = _assert_same_verify(tmp_path / "store", monkeypatch)
    assert summary["messages"] >= 2 * len(units) - 1
    codes = {f["code"] for f in findings}
    assert {"crc-mismatch", "not-utf8", "prop-crc-mismatch"} <= codes


# ---- Java String.hashCode ----------------------------------------------------------------------------------------

def _java_hash_reference(s: str) -> int:
    """Second implementation: the textbook per-unit loop over UTF-16 code units."""
    h = 0
    data = s.encode("utf-16-be", errors="surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


@settings(max_examples=300, deadline=None)
@given(s=st.one_of(st.text(max_size=60), st.text(alphabet="abcXYZ09#-_", min_size=1000, max_size=1100)))
def test_java_string_hash_equals_reference(s):
    from formats.common import java_string_hash
    assert java_string_hash(s) == _java_hash_reference(s)
