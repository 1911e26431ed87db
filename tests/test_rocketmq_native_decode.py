"""The compiled Message decoder (``mqtool._native.rmqdecode``) == the Python path, slot for slot.

* the helper itself: on hypothesis-built commitlog bytes (v1/v2, odd/non-UTF-8 topics and properties, IPv6
  hosts it must decline, bad CRCs, negative fields, random damage and truncation, small max sizes),
  ``rmqdecode.messages`` consumes exactly the units ``records.decode_common`` accepts, stops where it stops,
  and gives Message objects equal on every ``__slots__`` value and every property;
* ``iter_messages`` and ``SegmentScanner.events()`` give the same sequence (Messages, BLANKs, Damage, End) with
  the helper on and off, on the fixture store, on hypothesis-built segments (one-page windows too) and on every
  real RocketMQ store.
"""
from __future__ import annotations

import os
import struct
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from formats import rocketmq as F
from mqtool import native, pages
from mqtool.rocketmq import scan
from mqtool.rocketmq.store import open_store
from mqtool.rocketmq.records import FIXED, FIXED_NAMES, Message, decode_common

from tests.conftest import require_realdata
from rmqgen import segments, unit

REPO = Path(__file__).resolve().parent.parent
FIXTURE_STORE = REPO / "fixtures" / "rocketmq" / "store"
SEG_NAME = "00000000000000000000"


def _helper():
    return scan.native_decoder()


@pytest.fixture(autouse=True)
def _need_helper():
    if _helper() is None:
        msg = "compiled helper rmqdecode not built (or MQTOOL_NATIVE=0)"
        if os.environ.get("CI", "").lower() == "true" and native.enabled():
            pytest.fail(msg)
        pytest.skip(msg)


# ---- comparing Message objects ---------------------------------------------------------------------------------

_PROPS = ("topic", "properties", "property_pairs", "born_host", "store_host", "store_host_raw", "stored_body",
          "compression", "transaction", "keys", "tags", "uniq_key", "msg_id", "kind")


def msg_key(m) -> tuple:
    """Every slot (the buffer by type and by the unit's bytes), then every derived property and the row."""
    out = []
    for s in Message.__slots__:
        v = getattr(m, s)
        if s == "_buf":
            v = (type(v).__name__, bytes(v[m.position:m.position + m.size]))
        out.append((s, type(v).__name__, v))
    for p in _PROPS:
        try:
            out.append((p, getattr(m, p)))
        except Exception as e:      # the same failure on both sides
            out.append((p, type(e).__name__))
    out.append(("row", m.to_row("base64")))
    m._pairs = None                 # property_pairs above cached it: back to the decoder's state
    return tuple(out)


def ev_key(ev) -> tuple:
    if type(ev) is Message:
        return ("message",) + msg_key(ev)
    return (type(ev).__name__, tuple(sorted(vars(ev).items())) if hasattr(ev, "__dict__")
            else tuple(getattr(ev, s) for s in ev.__slots__))


# ---- the helper == decode_common, unit by unit --------------------------------------------------------------------

def python_run(buf, pos, limit, end, base, file, max_size, check_crc, cap):
    out = []
    while len(out) < cap and pos < limit:
        m = decode_common(buf, pos, end, base, file, max_size, check_crc, None)
        if m is None:
            break
        out.append(m)
        pos += m.size
    return pos, out


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=segments(), cap=st.integers(1, 9), max_size=st.sampled_from([1 << 22, 120]), cut=st.integers(0, 300),
       start=st.integers(0, 40), check_crc=st.booleans(), limit_cut=st.integers(0, 400))
def test_helper_equals_decode_common(data, cap, max_size, cut, start, check_crc, limit_cut):
    buf = data[:max(0, len(data) - cut)] if cut < len(data) else data      # truncated units too
    start = min(start, len(buf))
    end = len(buf)
    limit = max(start, end - limit_cut)
    dec = _helper()
    base = 1 << 30
    py_pos, py = python_run(buf, start, limit, end, base, "seg", max_size, check_crc, cap)
    n_pos, nat = dec(buf, start, limit, end, base, "seg", max_size, check_crc, cap)
    assert n_pos == py_pos
    assert [msg_key(m) for m in nat] == [msg_key(m) for m in py]
    for m in nat:
        assert m._buf is buf and type(m) is Message


def test_helper_declines_what_decode_common_declines():
    dec = _helper()
    good = unit("v2", body=b"x" * 50, topic=b"\xff\xfeT", props=b"KEYS\x01a\x02TAGS\x01\xc3")
    v6 = bytearray(unit("v1"))
    struct.pack_into(">i", v6, FIXED.size - 4 - 4 * 12, 0)    # harmless field; the flag below makes it IPv6
    sys_off = scan.native_layout()[FIXED_NAMES.index("SYSFLAG")][0]
    struct.pack_into(">i", v6, sys_off, F.BORNHOST_V6_FLAG)
    bad_crc = unit("v1", body=b"abc", body_crc=12345)
    buf = good + bad_crc + bytes(v6) + good
    pos, ms = dec(buf, 0, len(buf), len(buf), 0, "f", 1 << 22, True, 100)
    assert pos == len(good) + len(bad_crc) and len(ms) == 2          # stops at the IPv6 unit
    assert [m.crc_ok for m in ms] == [True, False]
    assert ms[0].version == "v2" and ms[0].topic_raw == b"\xff\xfeT" and ms[1].version == "v1"
    # every length is checked against the real buffer: a caller's end past it changes nothing
    pos2, ms2 = dec(good[:-1], 0, 10, 1 << 40, 0, "f", 1 << 22, True, 100)
    assert (pos2, ms2) == (0, [])
    # positions/limits that admit nothing
    assert dec(good, 5, 100, len(good), 0, "f", 1 << 22, True, 9) == (5, [])
    assert dec(good, 0, 0, len(good), 0, "f", 1 << 22, True, 9) == (0, [])
    assert dec(good, 0, len(good), len(good), 0, "f", 1 << 22, True, 0) == (0, [])
    assert dec(good, -1, len(good), len(good), 0, "f", 1 << 22, True, 9) == (-1, [])
    # the file name is stored as given, whatever its type (decode_common does not look at it either)
    name = Path("seg")
    assert dec(good, 0, 1, len(good), 7, name, 1 << 22, False, 9)[1][0].file is name
    assert msg_key(dec(good, 0, 1, len(good), 7, name, 1 << 22, False, 9)[1][0]) == \
        msg_key(decode_common(good, 0, len(good), 7, name, 1 << 22, False))


def test_layout_comes_from_the_schema():
    from mqtool.schema_struct import fixed_prefix_fields
    layout = scan.native_layout()
    fields = fixed_prefix_fields(F.MessageV1, stop_before="BODY")
    assert [n for n, _ in fields] == list(FIXED_NAMES) and len(layout) == len(FIXED_NAMES)
    off = 0
    for (o, size), (_, code) in zip(layout, fields):
        assert o == off and size == struct.calcsize(">" + code)
        off += size
    assert off == FIXED.size


# ---- whole walks: helper on == off --------------------------------------------------------------------------------

def _walk(store, native_on: bool, monkeypatch, events: bool = False, **kw):
    monkeypatch.setenv("MQTOOL_NATIVE", "1" if native_on else "0")
    try:
        segs = open_store(str(store)).segments
        if events:
            return [ev_key(ev) for seg in segs for ev in scan.SegmentScanner(seg, **kw).events()]
        damage = []
        got = [ev_key(m) for m in scan.iter_messages(segs, on_damage=damage.append, include_blank=True, **kw)]
        return got + [ev_key(d) for d in damage]
    finally:
        monkeypatch.undo()


def _assert_same(store, monkeypatch, **kw):
    for events in (False, True):
        a = _walk(store, True, monkeypatch, events, **kw)
        b = _walk(store, False, monkeypatch, events, **kw)
        assert a == b


def test_native_used_and_equal_on_fixture(monkeypatch):
    calls = []
    dec = _helper()
    monkeypatch.setattr(scan, "native_decoder", lambda: lambda *a: calls.append(1) or dec(*a))
    n = sum(1 for _ in scan.iter_messages(open_store(str(FIXTURE_STORE)).segments))
    monkeypatch.undo()
    assert n > 0 and calls
    _assert_same(FIXTURE_STORE, monkeypatch)
    _assert_same(FIXTURE_STORE, monkeypatch, check_crc=False)


def test_offset_bounds_equal_on_fixture(monkeypatch):
    segs = open_store(str(FIXTURE_STORE)).segments
    offs = [m.offset for m in scan.iter_messages(segs)]
    for lo, hi in [(offs[1], None), (None, offs[-2]), (offs[2] + 1, offs[5]), (offs[-1] + 1, None)]:
        kw = dict(from_offset=lo, to_offset=hi)
        a = _walk(FIXTURE_STORE, True, monkeypatch, **kw)
        b = _walk(FIXTURE_STORE, False, monkeypatch, **kw)
        assert a == b


def _store_of(data: bytes, root: str) -> Path:
    d = Path(root) / "store" / "commitlog"
    d.mkdir(parents=True)
    (d / SEG_NAME).write_bytes(data)
    return d.parent


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=segments(), small_window=st.booleans(), mapped=st.booleans(), check_crc=st.booleans())
def test_walks_equal_on_built_segments(data, small_window, mapped, check_crc):
    from mqtool import io
    with tempfile.TemporaryDirectory() as root, pytest.MonkeyPatch.context() as mp:
        store = _store_of(data, root)
        if small_window:
            mp.setattr(scan, "WINDOW", pages.PAGE)         # one-page windows: runs end at every page
        if mapped:
            mp.setattr(io, "READ_WHOLE_LIMIT", 0)
        for events in (False, True):
            with pytest.MonkeyPatch.context() as on, pytest.MonkeyPatch.context() as off:
                assert _walk(store, True, on, events, check_crc=check_crc) == \
                    _walk(store, False, off, events, check_crc=check_crc)


def _rocketmq_stores():
    root = require_realdata("rocketmq")
    return sorted(p.parent for p in root.glob("*/store/commitlog") if p.is_dir())


def test_walks_equal_on_real_stores(monkeypatch):
    stores = _rocketmq_stores()
    assert stores
    for store in stores:
        _assert_same(store, monkeypatch)


_SHRINK_SCRIPT = r"""
import os, sys
from mqtool import io
os.environ["MQTOOL_NATIVE"] = sys.argv[2]   # the one switch of the compiled helpers (mqtool.native)
from mqtool.rocketmq import scan
from mqtool.rocketmq.store import open_store
io.READ_WHOLE_LIMIT = 0                      # mapped: reading a lost page would be SIGBUS
seg = open_store(sys.argv[1]).segments[0]
out, damage = [], []
for i, m in enumerate(scan.iter_messages([seg], on_damage=damage.append)):
    out.append(m.offset)
    if i == 0:
        os.truncate(seg.path, 300)
print(len(out), " ".join(d.code for d in damage))
"""


@pytest.mark.parametrize("native_on", ["1", "0"])
def test_iter_messages_stops_cleanly_when_the_file_shrinks(tmp_path, native_on):
    """A mapped segment truncated while iter_messages runs: one file-changed damage and a clean stop, with
    the helper's runs (one shrink check per run: the run's units were read before it was handed over) and
    without (one check per message). A separate process: a lost page would kill it with SIGBUS, not pytest."""
    import subprocess
    import sys

    data = b"".join(unit("v1", body=b"x" * 300, phys=i) for i in range(40)) + bytes(8192)
    store = _store_of(data, str(tmp_path))
    r = subprocess.run([sys.executable, "-c", _SHRINK_SCRIPT, str(store), native_on], capture_output=True,
                       text=True, timeout=60, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
    n, codes = r.stdout.split(None, 1)
    assert codes.split() == ["file-changed"]
    assert int(n) == (1 if native_on == "0" else 40)     # the helper's run of 40 was read before the change


@st.composite
def _covering_inputs(draw):
    """Bytes with magic codes planted (whole, and cut after each of their leading bytes: the search for the
    prefix both codes share must not stop on half of one), each under a TOTALSIZE drawn around the distances
    that decide "reaches past p"; plus lo, p and max_size."""
    n = draw(st.integers(40, 600))
    data = bytearray(draw(st.binary(min_size=n, max_size=n)))
    v1 = F.MESSAGE_MAGIC_CODE_V1.to_bytes(4, "big", signed=True)
    v2 = F.MESSAGE_MAGIC_CODE_V2.to_bytes(4, "big", signed=True)
    lo = draw(st.integers(0, n))
    p = draw(st.integers(lo, n + 5))
    for _ in range(draw(st.integers(0, 12))):      # anywhere, or just before p (where a search may stop short)
        at = draw(st.one_of(st.integers(0, n - 8), st.integers(max(0, min(p, n - 8) - 6), min(p, n - 8))))
        magic = draw(st.sampled_from([v1, v2, v1[:3] + b"\x00", v1[:2] + b"\x00\x00", v1[:1] + b"\x00" * 3]))
        data[at + 4:at + 8] = magic
        data[at:at + 4] = draw(st.integers(-5, n + 50)).to_bytes(4, "big", signed=True)
    return bytes(data), lo, p, draw(st.integers(0, n + 60))


@settings(max_examples=400, deadline=None)
@given(_covering_inputs())
def test_covering_equals_its_definition(args):
    """rmqdecode.covering (the scanner's prefilter of units that could cover a range start) == the positions
    c in [lo, p) with a v1/v2 magic code at c + 4, TOTALSIZE in [MIN_MESSAGE_SIZE, max_size], c + TOTALSIZE > p
    (and the fixed header inside the buffer)."""
    data, lo, p, max_size = args
    mod = native.load("rmqdecode")
    need = 8
    want = []
    for c in range(lo, min(p, len(data))):
        if c + need > len(data):
            break
        magic = int.from_bytes(data[c + 4:c + 8], "big", signed=True)
        total = int.from_bytes(data[c:c + 4], "big", signed=True)
        if magic in (F.MESSAGE_MAGIC_CODE_V1, F.MESSAGE_MAGIC_CODE_V2) and \
                F.MIN_MESSAGE_SIZE <= total <= max_size and c + total > p:
            want.append(c)
    assert mod.covering(data, lo, p, max_size) == want
