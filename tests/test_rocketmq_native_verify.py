"""The compiled verify lane (``mqtool/_native/rmqverify.c``) == the Python lane == no lane.

* building blocks: its UTF-8 check == ``bytes.decode('utf-8')`` (strict); its slicing-by-8 CRC-32 == ``zlib.crc32``;
* the lane itself, call by call, on hypothesis-built runs of units (queue-offset gaps and repeats, PHYSICALOFFSET
  shifts, non-UTF-8 topics and properties, ``__CRC32#`` tails in and out of the last 20 bytes, the
  multi-dispatch name, declining sysFlag bits, bad CRCs, bytes set/inserted/deleted): same ``(new_pos, count)``
  and the same ``expected_next`` / ``dispatched_next`` (same order) / summary / max store timestamp after each
  call, with and without ``known_queues_only`` (and with it, the ``firsts`` list of each queue's first unit),
  with ISA-L called back and with the built-in CRC;
* whole runs of ``verify``: native lane == Python lane == lane off on stores with the awkward units, and
  ``--jobs 2`` == ``--jobs 1`` with the native lane (the store-level equivalence on the fixture store, damaged
  copies and every real store runs both lanes in tests/test_rocketmq_fastpath.py and tests/test_rocketmq_ranges_lane.py).
"""
from __future__ import annotations

import struct
import types
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from builders import rocketmq_unit
from formats import rocketmq as F
from mqtool import native
from mqtool.findings import Summary
from mqtool.options import VerifyOptions
from mqtool.rocketmq import ops
from mqtool.rocketmq.verify import native_lane as verify

NATIVE = verify._native_lane()
needs_native = pytest.mark.skipif(NATIVE is None, reason="compiled helper rmqverify not built (or MQTOOL_NATIVE=0)")
pytestmark = needs_native


# ---- building blocks ------------------------------------------------------------------------------------------

_UTF8_PIECES = [b"a", b"\x00", b"\x7f", b"\x80", b"\xbf", b"\xc0\x80", b"\xc1\xbf", b"\xc2\x80", b"\xdf\xbf",
                b"\xe0\x80\x80", b"\xe0\x9f\xbf", b"\xe0\xa0\x80", b"\xed\x9f\xbf", b"\xed\xa0\x80", b"\xed\xbf\xbf",
                b"\xee\x80\x80", b"\xef\xbf\xbf", b"\xf0\x8f\xbf\xbf", b"\xf0\x90\x80\x80", b"\xf4\x8f\xbf\xbf",
                b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80", b"\xff", b"\xe2\x82", b"\xf0\x9f\x98", b"\xe9",
                "é€😀".encode(), b"abcdefgh"]


@settings(max_examples=1500, deadline=None)
@given(data=st.one_of(st.binary(max_size=40), st.lists(st.sampled_from(_UTF8_PIECES), max_size=12).map(b"".join),
                      st.text(max_size=30).map(lambda s: s.encode("utf-8", "surrogatepass"))))
def test_utf8_check_equals_python_decode(data):
    try:
        data.decode("utf-8")
        ok = True
    except UnicodeDecodeError:
        ok = False
    assert NATIVE.utf8_valid(data) is ok


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=3000), value=st.integers(0, 0xFFFFFFFF), skip=st.integers(0, 7))
def test_builtin_crc32_equals_zlib(data, value, skip):
    assert NATIVE.crc32(data[skip:], value) == zlib.crc32(data[skip:], value)
    assert NATIVE.crc32(memoryview(data)[skip:]) == zlib.crc32(data[skip:])


def test_configure_refuses_odd_layouts():
    from mqtool import native
    from mqtool.rocketmq import layout

    core = native.load("rmqcore")
    fields, framing = layout.native_config()
    names = list(fields)
    with pytest.raises(ValueError):                     # a field missing
        core.configure({n: fields[n] for n in names[:-1]}, **framing, crc32=None)
    with pytest.raises(ValueError):                     # a field moved: not the layout the core was written for
        core.configure({**fields, "QUEUEOFFSET": (fields["QUEUEOFFSET"][0] + 1, 8)}, **framing, crc32=None)
    with pytest.raises(ValueError):                     # a framing constant changed
        core.configure(fields, **{**framing, "tl_v1": 2}, crc32=None)
    with pytest.raises(RuntimeError):                   # the core refused: its parts do not run
        NATIVE.scan(b"", 0, 0, 0, 0, 1 << 20, 0, {}, {}, False)
    layout._core.clear()
    assert layout.native_core() is not None
    with pytest.raises(ValueError):                     # a lane option of the wrong kind
        NATIVE.configure(**{**_configure_args()[1], "versions": (12345,)})
    verify._native_state.clear()
    assert verify._native_lane() is NATIVE              # the real configuration is accepted (and restored)


def _configure_args():
    """(layout, framing) the core gets and the lane's own options, all by name."""
    calls = []

    class Spy:
        def configure(self, *a, **kw):
            calls.append((a, kw))
    mp = pytest.MonkeyPatch()
    mp.setattr(verify.native, "load", lambda name: Spy())
    mp.setattr(verify.layout.native, "load", lambda name: Spy())
    mp.setattr(verify, "_native_state", {})
    mp.setattr(verify.layout, "_core", {})
    try:
        verify._native_lane()
    finally:
        mp.undo()
    (core_args, core_kw), (lane_args, lane_kw) = calls
    assert lane_args == () and len(core_args) == 1
    return (core_args[0], core_kw), lane_kw


def test_configuration_comes_from_the_schema():
    (fields, framing), lane = _configure_args()
    assert (lane["born_before"], lane["born_after"]) == (verify.BORN_BEFORE_STORE_MS, verify.BORN_AFTER_STORE_MS)
    # the offsets are those of the construct schema: build a unit and read each field back at its offset
    unit = _unit(b"Topic", 3, 41, 12345, b"body", b"KEYS\x01k", sys_flag=0x1, store_ts=777)
    obj = F.MessageV1.parse(unit)
    for name in verify._LANE_FIELDS:
        off, size = fields[name]
        assert int.from_bytes(unit[off:off + size], "big", signed=True) == obj[name], name
    assert max(o + s for o, s in fields.values()) == verify._LANE.size
    assert (framing["tl_v1"], framing["tl_v2"], framing["pl_size"]) == (1, 2, 2)
    assert lane["versions"] == (F.MESSAGE_MAGIC_CODE_V1,) and framing["magic_v1"] == F.MESSAGE_MAGIC_CODE_V1
    assert framing["min_size"] == F.MIN_MESSAGE_SIZE and lane["crc_tail"] == F.CRC32_RESERVED_LEN
    assert lane["crc_tag"] == verify._CRC_TAG
    assert lane["multi_dispatch"] == F.PROPERTY_INNER_MULTI_DISPATCH.encode()
    assert lane["decline_flags"] == verify._LANE_DECLINE


def test_a_schema_of_another_shape_keeps_the_python_lane(monkeypatch):
    from construct import Struct

    subs = F.MessageV1.subcons
    monkeypatch.setattr(F, "MessageV1", Struct(*subs[:-1]))                      # PROPERTIES gone
    assert verify._native_lane() is None
    monkeypatch.setattr(F, "MessageV1", Struct(*[s for s in subs if s.name != "TOPIC"]))
    assert verify._native_lane() is None


# ---- the lane, call by call -------------------------------------------------------------------------------------

def _unit(topic: bytes, qid: int, qoff: int, phys: int, body: bytes, props: bytes, sys_flag: int = 0,
          store_ts: int = 2000, bad_crc: bool = False) -> bytes:
    """A v1 unit built with the schema (topic and properties as raw bytes, UTF-8 or not)."""
    crc = zlib.crc32(body) & 0x7FFFFFFF
    return rocketmq_unit(topic, body, props, sysflag=sys_flag, phys=phys, queue_id=qid, queue_offset=qoff,
                         born="[::1]:5" if sys_flag & F.BORNHOST_V6_FLAG else "127.0.0.1:1",
                         store="[fe80::1]:9" if sys_flag & F.STOREHOSTADDRESS_V6_FLAG else "10.0.0.5:10911",
                         born_ts=1000, store_ts=store_ts, body_crc=crc ^ 1 if bad_crc else None)



TOPICS = [b"TopicA", b"TopicB", b"T\xc3\xa9", b"T\xff", b"\xed\xa0\x80", b"", b"t" * 127]
PROPS = [b"KEYS\x01k1 k2\x02TAGS\x01t\x02UNIQ_KEY\x01AC11", b"", b"KEYS\x01\xc3\xa9\xe2\x82\xac", b"KEYS\x01\xff\xfe",
         b"KEYS\x01e\x02__CRC32#\x010000000000\x02", b"__CRC32#\x01" + b"x" * 40,
         b"A\x01b\x02__CRC32#\x01123", b"INNER_MULTI_DISPATCH\x01%LMQ%q\x02INNER_MULTI_QUEUE_OFFSET\x010",
         b"X\x01INNER_MULTI_DISPATC", b"TAGS\x01\xf0\x9f\x98\x80", b"P\x01\xe0\x80\x80"]
SYS_FLAGS = [0, 0, 0, 0x1, 0x2, 0x4, 0x8, 0xC, 0x10, 0x20, 0x80]


@st.composite
def unit_runs(draw):
    """(bytes of a run of units, where the scan starts, base, shift, seeded queues, damage applied)."""
    base = draw(st.sampled_from([0, 1 << 30, 7 * (1 << 30)]))
    shift = draw(st.sampled_from([0, 0, 64, -5]))
    data = bytearray()
    nxt: dict = {}
    for _ in range(draw(st.integers(1, 14))):
        topic = draw(st.sampled_from(TOPICS[:3]) if draw(st.integers(0, 4)) else st.sampled_from(TOPICS))
        qid = draw(st.sampled_from([0, 1, 2, -1]))
        qoff = nxt.get((topic, qid), draw(st.sampled_from([0, 5, 1 << 40])))
        jump = draw(st.sampled_from([0] * 8 + [1, -1, 3]))
        phys = base + len(data) + shift + draw(st.sampled_from([0] * 10 + [1, -8]))
        props = draw(st.sampled_from(PROPS[:1]) if draw(st.integers(0, 3)) else st.sampled_from(PROPS))
        body = draw(st.binary(max_size=200))
        unit = _unit(topic, qid, qoff + jump, phys, body, props, sys_flag=draw(st.sampled_from(SYS_FLAGS)),
                     store_ts=draw(st.sampled_from([2000, 1999, 5000, -1])), bad_crc=not draw(st.integers(0, 12)))
        nxt[(topic, qid)] = qoff + jump + 1
        data += unit
    for _ in range(draw(st.integers(0, 3))):        # bytes set, inserted, deleted
        at = draw(st.integers(0, max(0, len(data) - 1)))
        how = draw(st.sampled_from(["set", "insert", "delete"]))
        val = draw(st.integers(0, 255))
        if how == "set" and data:
            data[at] = val
        elif how == "insert":
            data[at:at] = bytes([val])
        elif data:
            del data[at]
    data += bytes(draw(st.sampled_from([0, 3, 100])))
    seeded = draw(st.dictionaries(st.tuples(st.sampled_from(["TopicA", "TopicB", "Té"]), st.sampled_from([0, 1, 2])),
                                  st.sampled_from([0, 5, 6, 1 << 40, 1 << 70]), max_size=4))
    return bytes(data), base, shift, seeded


def _ctx(shift, last_ts, max_size, dispatched):
    return types.SimpleNamespace(opts=VerifyOptions(max_message_size=max_size), summary=Summary(),
                                 dispatched_next=dict(dispatched), last_store_ts=last_ts, shift=shift, queue_end={})


def _make_lane(use_native: bool, ctx, expected: dict, known: bool, firsts: list | None = None):
    with native.switched(use_native):
        return verify._fast_lane(ctx, expected, known, firsts)


def _state(ctx, expected):
    return (list(expected.items()), list(ctx.dispatched_next.items()), ctx.summary.messages, ctx.last_store_ts,
            sorted(ctx.queue_end.items()))


def _run_both(data: bytes, base: int, shift, seeded: dict, known, limit_cut: int = 0,
              max_size: int = 1 << 22):
    """Drive the two lanes with the same calls (after a decline, step over the unit by its TOTALSIZE as a
    scanner would, or by one byte) and compare everything after each call. Returns units consumed.
    known: False, True (known_queues_only) or "firsts" (known_queues_only with a firsts list each)."""
    lanes, firsts = [], ([], [])
    for use_native in (False, True):
        ctx = _ctx(shift, 1999, max_size, {k: v + 1 for k, v in seeded.items()})
        expected = dict(seeded)
        lanes.append((ctx, expected, _make_lane(use_native, ctx, expected, bool(known),
                                                firsts[use_native] if known == "firsts" else None)))
    pos, end, consumed = 0, len(data), 0
    limit = max(0, end - limit_cut)
    while pos < end:
        results = [lane(data, memoryview(data), pos, limit, end, base) for _, _, lane in lanes]
        assert results[0] == results[1], pos
        assert _state(*lanes[0][:2]) == _state(*lanes[1][:2]), pos
        assert firsts[0] == firsts[1], pos
        npos, n = results[0]
        consumed += n
        if n:
            pos = npos
            continue
        total = int.from_bytes(data[pos:pos + 4], "big", signed=True) if end - pos >= 4 else 0
        pos += total if 0 < total <= end - pos else 1
    return consumed


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(run=unit_runs(), known=st.sampled_from([False, True, "firsts"]), cut=st.sampled_from([0, 0, 50, 400]))
def test_native_lane_equals_python_lane(run, known, cut):
    data, base, shift, seeded = run
    _run_both(data, base, shift, seeded, known, cut)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(run=unit_runs(), known=st.sampled_from([False, True, "firsts"]))
def test_native_lane_with_builtin_crc_equals_python_lane(run, known):
    data, base, shift, seeded = run
    verify._native_lane(crc=None)            # slicing-by-8 in C instead of calling ISA-L back (kept until...
    try:
        _run_both(data, base, shift, seeded, known)
    finally:
        verify._native_lane(crc="auto")      # ...the default choice is given back)


def test_lane_consumes_clean_runs_and_carries_state_between_calls():
    units, pos, qoff, ends = [], 0, {}, {}
    for i in range(40):
        key = (b"TopicA" if i % 3 else b"T\xc3\xa9", i % 2)
        qoff[key] = qoff.get(key, -1) + 1
        u = _unit(key[0], key[1], qoff[key], pos + 100, b"b" * i, b"KEYS\x01k%d" % i, store_ts=3000 + i)
        units.append(u)
        pos += len(u)
        ends[(key[0].decode(), key[1])] = pos          # where each queue's last unit ends
    data = b"".join(units)
    assert _run_both(data, 0, 100, {}, False) == 40                # one call takes all 40
    # one call per unit (limit just past its start): the state carries over from call to call
    ctx = _ctx(100, 0, 1 << 22, {})
    expected: dict = {}
    lane = _make_lane(True, ctx, expected, False)
    at = 0
    for u in units:
        assert lane(data, memoryview(data), at, at + 1, len(data), 0) == (at + len(u), 1)
        at += len(u)
    assert ctx.summary.messages == 40 and ctx.last_store_ts == 3039
    want = {(k[0].decode(), k[1]): v + 1 for k, v in qoff.items()}
    assert expected == want and ctx.dispatched_next == want and ctx.queue_end == ends
    # known_queues_only: a queue not seeded stops the lane at its first unit
    ctx = _ctx(100, 0, 1 << 22, {})
    expected = {("TopicA", 1): 0}
    lane = _make_lane(True, ctx, expected, True)
    assert lane(data, memoryview(data), 0, len(data), len(data), 0) == (0, 0)      # unit 0 is ("Té", 0)
    assert lane(data, memoryview(data), len(units[0]), len(data), len(data), 0) == (len(units[0]) + len(units[1]), 1)
    # ... and with a firsts list it takes every unit, listing each queue's first: (key, queue offset, offset)
    for use_native in (False, True):
        ctx, firsts = _ctx(100 - 7, 0, 1 << 22, {}), []        # (PHYSICALOFFSET - global offset; buf[0] is 7)
        expected = {("TopicA", 1): 0}
        lane = _make_lane(use_native, ctx, expected, True, firsts)
        assert lane(data, memoryview(data), 0, len(data), len(data), 7) == (len(data), 40)
        starts = [sum(map(len, units[:i])) for i in range(4)]      # units 0, 2, 3: ("Té", 0), ("TopicA", 0), ("Té", 1)
        assert firsts == [(("Té", 0), 0, 7 + starts[0]), (("TopicA", 0), 0, 7 + starts[2]),
                          (("Té", 1), 0, 7 + starts[3])], use_native
        assert expected == want


def test_hostile_arguments_decline():
    u = _unit(b"TopicA", 0, 0, 0, b"body", b"")
    ctx = _ctx(0, 0, 1 << 22, {})
    lane = _make_lane(True, ctx, {}, False)
    assert lane(u, memoryview(u), 0, len(u), len(u), 0) == (len(u), 1)
    scan = NATIVE.scan
    assert scan(u, 0, 10 ** 6, len(u) + 1, 0, 1 << 22, 0, {}, {}, False)[:2] == (0, 0)    # end past the buffer
    assert scan(u, -5, 10, len(u), 0, 1 << 22, 0, {}, {}, False)[:2] == (-5, 0)
    assert scan(u, 0, len(u), len(u), 1 << 70, 1 << 22, 0, {}, {}, False)[:2] == (0, 0)  # shift beyond int64
    assert scan(u, 0, len(u), len(u), 0, 1 << 70, 0, {}, {}, False)[:2] == (len(u), 1)  # max size beyond int64
    assert scan(u, 0, len(u), len(u), 0, -(1 << 70), 0, {}, {}, False)[:2] == (0, 0)
    assert scan(u, 0, len(u), len(u), 0, 100, 0, {}, {}, False)[:2] == (0, 0)            # unit above max size
    for cut in range(len(u)):                                                               # truncated unit
        assert scan(u[:cut], 0, cut, cut, 0, 1 << 22, 0, {}, {}, False)[:2] == (0, 0)
    assert scan(u, 0, len(u), len(u), 0, 1 << 22, 0, {("TopicA", 0): 1 << 64}, {}, False)[:2] == (0, 0)
    q = bytearray(u)
    qoff_at = _configure_args()[0][0]["QUEUEOFFSET"][0]
    struct.pack_into(">q", q, qoff_at, (1 << 63) - 1)                                       # QUEUEOFFSET = max
    assert scan(bytes(q), 0, len(q), len(q), 0, 1 << 22, 0, {}, {}, False)[:2] == (0, 0)
    with pytest.raises(TypeError):
        scan(u, 0, len(u), len(u), 0, 1 << 22, 0, [], {}, False)


# ---- whole verify runs ---------------------------------------------------------------------------------------------

def _verify(path, native_on: bool, lane_on: bool, monkeypatch, **kw):
    monkeypatch.setenv("MQTOOL_NATIVE", "1" if native_on else "0")
    monkeypatch.setattr(verify, "USE_FAST_LANE", lane_on)
    findings, summary_fn = ops.verify("commitlog", str(path), VerifyOptions(progress=False, **kw))
    return [dict(f.to_dict(), lost_from=f.lost_from) for f in findings], summary_fn().to_dict()


def _awkward_store(root):
    """Clean units interleaved with every unit kind the lane must hand over (topics and properties not UTF-8,
    __CRC32# tails, gaps, shifts, declining sysFlags), PHYSICALOFFSET = real offset unless shifted."""
    data = bytearray()
    qoff: dict = {}
    for i in range(300):
        topic = TOPICS[i % len(TOPICS)] if i % 5 == 0 else TOPICS[i % 2]
        props = PROPS[i % len(PROPS)] if i % 7 == 0 else PROPS[0]
        key = (topic, i % 3)
        qo = qoff.get(key, 0) + (2 if i % 53 == 0 else 0)
        qoff[key] = qo + 1
        shift = 16 if 100 <= i < 130 else 0
        data += _unit(topic, i % 3, qo, len(data) + shift, bytes([i % 256]) * (i % 50), props,
                      sys_flag=SYS_FLAGS[i % len(SYS_FLAGS)] if i % 11 == 0 else 0, store_ts=5000 + i % 17,
                      bad_crc=i % 97 == 0)
    seg = root / "commitlog" / f"{0:020d}"
    seg.parent.mkdir(parents=True)
    seg.write_bytes(bytes(data) + bytes(65536 - len(data) % 65536))
    return root


def test_verify_native_equals_python_equals_off_on_awkward_units(tmp_path, monkeypatch):
    store = _awkward_store(tmp_path / "store")
    off = _verify(store, True, False, monkeypatch)
    py = _verify(store, False, True, monkeypatch)
    nat = _verify(store, True, True, monkeypatch)
    assert nat == py == off
    codes = {f["code"] for f in off[0]}
    assert {"not-utf8", "crc-mismatch", "queue-offset-gap", "physical-offset-mismatch"} <= codes
    # split into ranges (--jobs code path, run inline and in a pool): the same again
    from mqtool.ranges import InlineRunner
    assert _verify(store, True, True, monkeypatch, runner=InlineRunner(), split_size=4096) == off
    assert _verify(store, True, True, monkeypatch, jobs=2, split_size=8192) == off


def test_jobs_2_equals_jobs_1_with_native_lane_on_real_store(monkeypatch):
    from tests.conftest import require_realdata

    store = require_realdata("rocketmq", "gen-5.1.4-kill", "store")
    one = _verify(store, True, True, monkeypatch, jobs=1)
    assert _verify(store, True, True, monkeypatch, jobs=2, split_size=65536) == one
    assert _verify(store, False, False, monkeypatch, jobs=1) == one


def test_pool_threshold_follows_the_lane(tmp_path, monkeypatch):
    """With the compiled lane one process checks a 160 MiB store faster than a pool starts; with the Python
    lane the pool pays (mqtool.ranges.PARALLEL_MIN_BYTES). Same findings either way."""
    from mqtool.rocketmq import ranges as RR

    root = _awkward_store(tmp_path / "store")
    seg = root / "commitlog" / f"{0:020d}"
    with open(seg, "r+b") as f:
        f.truncate(160 << 20)                    # sparse zero fill: two default ranges, < 256 MiB
    chosen = []
    real = RR.runner_for

    def spy(*a, **kw):
        chosen.append(real(*a, **kw))
        return chosen[-1]

    monkeypatch.setattr(RR, "runner_for", spy)
    nat = _verify(root, True, True, monkeypatch, jobs=2)
    assert chosen[-1].jobs == 1
    py = _verify(root, False, True, monkeypatch, jobs=2)
    assert chosen[-1].jobs == 2
    assert nat == py


def test_the_crc_choice_reaches_the_lane_runs(monkeypatch):
    """The core's CRC-32 chosen for a test (None: the C slicing-by-8) is the one the lane's runs use."""
    from mqtool.rocketmq import layout

    calls = []
    verify._native_lane(crc=lambda b, v=0: calls.append(1) or zlib.crc32(b, v))
    try:
        u = _unit(b"TopicA", 0, 0, 0, b"body", b"")
        ctx = _ctx(0, 0, 1 << 22, {})
        assert _make_lane(True, ctx, {}, False)(u, memoryview(u), 0, len(u), len(u), 0) == (len(u), 1)
        assert calls == [1]
    finally:
        verify._native_lane(crc="auto")
    assert layout._crc_choice == ["auto"]


# ---- the lane's one pass over a message's properties (rmqunit.h rmq_props_scan) --------------------------------

_MULTI = F.PROPERTY_INNER_MULTI_DISPATCH.encode()
_TAG = (F.PROPERTY_CRC32 + F.NAME_VALUE_SEPARATOR).encode()
_SCAN_NAMES = (F.PROPERTY_TAGS.encode(), F.PROPERTY_KEYS.encode(), F.PROPERTY_UNIQ_KEY.encode())
_SCAN_PARTS = st.sampled_from([*_SCAN_NAMES, _MULTI, _MULTI[:-1], _MULTI[1:], _TAG, _TAG[:-1], b"TAGSX", b"a",
                               b"0123456789abcdef", b"x y", "é".encode(), b"\xff", b"", b"\x01", b"\x02", b"I", b"_"])


def _python_scan(props: bytes, names, skip_empty: bool, needles):
    """The answers the lane had from Python's own operations: `in` / find for the needles, the last pair of each
    name split at the separators (empty values passed over when skip_empty), and whether every byte is ASCII."""
    if any(s in props[frm:] for s, frm in needles):
        return True, None, None
    sep, nv = F.PROPERTY_SEPARATOR.encode(), F.NAME_VALUE_SEPARATOR.encode()
    values = [None] * len(names)
    for pair in props.split(sep):
        name, has, value = pair.partition(nv)
        if has and name in names and (value or not skip_empty):
            values[names.index(name)] = value
    return False, tuple(values), all(b < 0x80 for b in props)


def _scan_widths() -> tuple:
    """The steps of the properties pass this build and CPU can take (16: SSE2, 32: AVX2; 1: no SIMD)."""
    best = NATIVE.props_scan_width()
    if best == 1:
        return (1,)
    return (16, 32) if best == 32 else (16,)


_SCAN_WIDTHS = _scan_widths() if NATIVE is not None else ()


def test_the_properties_pass_takes_the_widest_step_the_cpu_has():
    """The module picks AVX2 where the CPU has it (the tests below then compare both steps with Python)."""
    import platform

    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    if platform.machine() in ("x86_64", "AMD64") and " avx2" in flags:
        assert NATIVE.props_scan_width() == 32 and _SCAN_WIDTHS == (16, 32)
    with pytest.raises(ValueError):
        NATIVE.props_scan_width(8)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parts=st.lists(_SCAN_PARTS, max_size=40), after=st.lists(_SCAN_PARTS, max_size=6), skip=st.booleans(),
       k=st.integers(0, 3), tail=st.integers(0, 40), which=st.sampled_from(["both", "multi", "tag", "none"]))
def test_one_pass_over_the_properties_equals_python(parts, after, skip, k, tail, which):
    """Values, needles and ASCII from the one pass == Python's, at every length (across the 16-byte steps), with
    bytes after the properties that look like separators, needles or non-ASCII (they must not count: the pass
    reads past the properties when the buffer has room, and copies the last step when it has not)."""
    assert verify.new_xref() is not None                # (configures the table's names and separators)
    props = b"".join(parts)
    rest = b"".join(after)
    needles = {"both": ((_MULTI, 0), (_TAG, max(0, len(props) - tail))), "multi": ((_MULTI, 0),),
               "tag": ((_TAG, max(0, len(props) - tail)),), "none": ()}[which]
    names = _SCAN_NAMES[:k]
    want = _python_scan(props, names, skip, needles)
    for width in _SCAN_WIDTHS:
        before = NATIVE.props_scan_width(width)
        try:
            for data in (props + rest, props + rest + b"\x02" * 32, props):
                assert NATIVE.props_scan(data, names, skip, needles, len(props)) == want, width
        finally:
            NATIVE.props_scan_width(before)


def test_one_pass_finds_an_empty_needle_and_sees_non_ascii_anywhere():
    assert verify.new_xref() is not None
    for width in _SCAN_WIDTHS:
        before = NATIVE.props_scan_width(width)
        try:
            assert NATIVE.props_scan(b"TAGS\x01a", (), True, ((b"", 0),), 6)[0] is True
            for at in range(72):
                props = bytearray(b"k" * 72)
                props[at] = 0xC3
                assert NATIVE.props_scan(bytes(props) + b"\xff", (), True, (), 72) == (False, (), False), width
                assert NATIVE.props_scan(bytes(props[:at]) + b"\xff" * 8, (), True, (), at) == (False, (), True)
        finally:
            NATIVE.props_scan_width(before)
