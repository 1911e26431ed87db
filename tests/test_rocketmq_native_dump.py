"""The compiled dump-row helper (``mqtool._native.rmqdump``) == the Python path, row for row, byte for byte.

* the lane itself: on hypothesis-built commitlog bytes (odd properties: repeated names, empty names/values, no
  trailing separator, non-UTF-8 and non-ASCII text; binary/text/compressed bodies; v1/v2; IPv6 hosts it must
  decline; transaction flags; negative ports/offsets; random damage), ``rmqdump.rows`` consumes exactly the
  units ``records.decode_common`` accepts and gives ``Message.to_row``'s dicts (same keys, order, types);
* ``dump commitlog --json`` output (stdout and stderr) is byte-identical with the helper on and off, for every
  body mode and option that reaches these rows (offsets, BLANKs, limit, jobs), on the fixture store, on
  hypothesis-built stores and on every real RocketMQ store.
"""
from __future__ import annotations

import base64
import json
import os
import struct
import tempfile
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from formats import rocketmq as F
from mqtool import native, render
from mqtool.options import DumpOptions, ScanStats
from mqtool.rocketmq import nativedump, ops, ranges as R
from mqtool.rocketmq.records import FIXED, FIXED_NAMES, DecodeFailure, decode_common, decode_message

from tests.conftest import require_realdata
from builders import make_message
from rmqgen import _host, _odd, segments, unit

REPO = Path(__file__).resolve().parent.parent
FIXTURE_STORE = REPO / "fixtures" / "rocketmq" / "store"
SEG_NAME = "00000000000000000000"


@pytest.fixture(autouse=True)
def _need_helper():
    if nativedump.helper() is None:
        msg = "compiled helper rmqdump not built (or MQTOOL_NATIVE=0)"
        if os.environ.get("CI", "").lower() == "true" and native.enabled():
            pytest.fail(msg)
        pytest.skip(msg)


# ---- building units from the schema-derived struct ------------------------------------------------------------

def test_unit_builder_matches_construct():
    for v in ("v1", "v2"):
        assert unit(v) == make_message(v, phys=0, born="127.0.0.1:1", store="10.0.0.5:10911")


# ---- the lane == decode_common + to_row ---------------------------------------------------------------------------

def python_lane(buf, pos, limit, end, base, file, max_size, body, cap):
    out = []
    while len(out) < cap and pos < limit:
        m = decode_common(buf, pos, end, base, file, max_size, True, None)
        if m is None or (body != "none" and m.sys_flag & F.COMPRESSED_FLAG):
            break
        row = m.to_row(body)
        if any(k.endswith("_encoding") for k in row):     # not UTF-8: given losslessly, by the Python path only
            break
        out.append(row)
        pos += m.size
    return pos, out


def native_lane(buf, pos, limit, end, base, file, max_size, body, cap):
    out = []
    npos, n = nativedump.helper().rows(buf, pos, limit, end, base, file, max_size, nativedump.BODY_MODES[body],
                                       out, cap)
    assert n == len(out)
    return npos, out


def ndjson_bytes(rows) -> bytes:
    """What write_ndjson writes for ``rows`` (binary layer, as the CLI does)."""
    import io

    class Out(io.StringIO):
        def __init__(self):
            super().__init__()
            self.buffer = io.BytesIO()

    o = Out()
    render.write_ndjson(iter(rows), o)
    return o.buffer.getvalue() + o.getvalue().encode("utf-8", "surrogateescape")


def same_rows(a: list, b: list) -> None:
    """Equal dicts with equal key order and equal JSON bytes (bool vs int, str vs None, list vs ...)."""
    assert [list(r) for r in a] == [list(r) for r in b]
    assert a == b
    assert [render.dumps(r) for r in a] == [render.dumps(r) for r in b]


INT_KEYS = frozenset(n for n, t in R.ROW_FIELDS if t in ("int", "long"))


STR_KEYS = frozenset(n for n, t in R.ROW_FIELDS if t == "string")
LIST_KEYS = frozenset(n for n, t in R.ROW_FIELDS if t == "array<string>")


def new_columns(ints, maps=frozenset(), strs=frozenset()) -> list:
    return [bytearray() if k in ints else nativedump._map_buffers() if k in maps
            else nativedump._list_buffers() if k in LIST_KEYS & strs else nativedump._str_buffers() if k in strs
            else [] for k in nativedump.ROW_KEYS]


def buffers_as_values(by_topic: dict, maps, strs) -> dict:
    """``columns()`` output with its Arrow buffers read back by pyarrow: one dict per row for a map, the
    string or None for a string column."""
    for cols in by_topic.values():
        rows = nativedump._rows(cols[nativedump.ROW_KEYS.index("kind")])
        for i, k in enumerate(nativedump.ROW_KEYS):
            if k in maps:
                cols[i] = [dict(m) for m in nativedump._map_array(cols[i], rows).to_pylist()]
            elif k in LIST_KEYS & strs:
                cols[i] = nativedump._list_array(cols[i], rows).to_pylist()
            elif k in strs:
                cols[i] = nativedump._str_array(cols[i], rows).to_pylist()
    return by_topic


def columns_of(rows: list, ints) -> dict:
    """The rows column-wise as ``columns()`` gives them: topic -> one column per ROW_KEYS key (None if absent),
    a bytearray of native int64 values for the keys in ``ints``."""
    out: dict = {}
    for r in rows:
        cols = out.setdefault(r["topic"], new_columns(ints))
        for k, values in zip(nativedump.ROW_KEYS, cols):
            if k in ints:
                values += struct.pack("=q", r[k])
            else:
                values.append(r.get(k))
    return out


def same_columns(a: dict, b: dict) -> None:
    """Equal topics in equal order, equal values with equal JSON bytes (bool vs int, property order ...)."""
    assert list(a) == list(b)
    assert a == b

    def plain(cols):
        return [c if isinstance(c, list) else list(memoryview(c).cast("q")) for c in cols]

    assert render.dumps([plain(c) for c in a.values()]) == render.dumps([plain(c) for c in b.values()])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=segments(), body=st.sampled_from(sorted(nativedump.BODY_MODES)), cap=st.integers(1, 9),
       max_size=st.sampled_from([1 << 22, 120]), cut=st.integers(0, 300), start=st.integers(0, 40))
def test_lane_equals_decode_common_and_to_row(data, body, cap, max_size, cut, start):
    end = max(0, len(data) - cut)
    for buf in (data, data[:end]):
        pos = min(start, len(buf))
        for limit in (len(buf), pos + 100):
            seen = 0
            while pos < limit:            # a walk: each lane run, then step over the unit it declined
                py = python_lane(buf, pos, limit, len(buf), 4096, "seg", max_size, body, cap)
                nat = native_lane(buf, pos, limit, len(buf), 4096, "seg", max_size, body, cap)
                assert nat[0] == py[0]
                same_rows(nat[1], py[1])
                # the JSON lane: a prefix of the same run, as the bytes write_ndjson writes for those rows
                jpos, jn, data = nativedump.helper().json_rows(buf, pos, limit, len(buf), 4096, b'"seg"',
                                                               max_size, nativedump.BODY_MODES[body], cap)
                assert jn <= len(py[1]) and data == ndjson_bytes(py[1][:jn])
                assert jpos == (py[1][jn]["position"] if jn < len(py[1]) else py[0])
                # the export's column lane: the same run, each row's values appended to its topic's columns
                # (integers as int64 bytes where the column is a bytearray, as objects where it is a list)
                # (and the properties as Arrow map buffers, read back by pyarrow, where they are given so)
                for ints, maps, strs in ((INT_KEYS, frozenset(), frozenset()), (frozenset(),) * 3,
                                         (INT_KEYS, frozenset({"properties"}), STR_KEYS | LIST_KEYS)):
                    by_topic: dict = {}
                    cpos, cn = nativedump.helper().columns(buf, pos, limit, len(buf), 4096, "seg", max_size,
                                                           nativedump.BODY_MODES[body], by_topic,
                                                           lambda: new_columns(ints, maps, strs), cap)
                    assert (cpos, cn) == (py[0], len(py[1]))
                    same_columns(buffers_as_values(by_topic, maps, strs), columns_of(py[1], ints))
                seen += len(py[1])
                if py[0] > pos:
                    pos = py[0]
                    continue
                try:
                    pos += decode_message(buf, pos, len(buf), 0, "seg", max_size).size
                except DecodeFailure:
                    pos += 1
            pos = min(start, len(buf))


_word = st.one_of(_odd, st.text(max_size=6).map(lambda s: s.encode("utf-8")))


@st.composite
def text_units(draw):
    """Common units whose text is mostly valid UTF-8 (the JSON lane's domain), with JSON escapes and edge cases."""
    names = draw(st.lists(st.one_of(_word, st.sampled_from([b"KEYS", b"TAGS", b"UNIQ_KEY"])), max_size=5))
    props = b"\x02".join(n + b"\x01" + draw(_word) for n in names) + draw(st.sampled_from([b"", b"\x02"]))
    return unit(draw(st.sampled_from(["v1", "v2"])), draw(_word), draw(_word), props,
                draw(st.sampled_from([0, 4, 8, 12, 0x101, 0x201, 0x301])), phys=draw(st.integers(0, 1 << 40)),
                born=draw(_host), store=draw(_host))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(us=st.lists(text_units(), min_size=1, max_size=6), body=st.sampled_from(sorted(nativedump.BODY_MODES)))
def test_json_lane_equals_written_rows(us, body):
    data = b"".join(us)
    pos = 0
    while pos < len(data):
        py = python_lane(data, pos, len(data), len(data), 0, "seg", 1 << 20, body, 99)
        jpos, jn, out = nativedump.helper().json_rows(data, pos, len(data), len(data), 0, b'"seg"', 1 << 20,
                                                      nativedump.BODY_MODES[body], 99)
        assert jn <= len(py[1]) and out == ndjson_bytes(py[1][:jn])
        if jn:
            assert jpos == (py[1][jn]["position"] if jn < len(py[1]) else py[0])
            pos = jpos
            continue
        step = python_lane(data, pos, len(data), len(data), 0, "seg", 1 << 20, "none", 1)   # a unit it left
        if not step[1]:
            break
        pos = step[0]


def test_lane_consumes_common_units_and_declines_the_rest():
    good = unit("v1") + unit("v2", props=b"KEYS\x01a\x02KEYS\x01b")
    v6 = make_message("v1", sysflag=0x30, born="[2001:db8::1]:5", store="[fd00::5]:10911")
    data = good + v6 + unit("v1")
    pos, rows = native_lane(data, 0, len(data), len(data), 0, "f", 1 << 20, "none", 100)
    assert pos == len(good) and len(rows) == 2
    assert rows[1]["property_pairs"] == [["KEYS", "a"], ["KEYS", "b"]] and rows[1]["keys"] == ["b"]
    comp = unit("v1", body=zlib.compress(b"x" * 50), sys_flag=F.COMPRESSED_FLAG)
    assert native_lane(comp, 0, len(comp), len(comp), 0, "f", 1 << 20, "none", 9)[0] == len(comp)
    assert native_lane(comp, 0, len(comp), len(comp), 0, "f", 1 << 20, "text", 9) == (0, [])   # Python decompresses
    # hostile arguments: an end past the buffer is clamped, a negative position consumes nothing
    assert native_lane(good, 0, 1 << 40, 1 << 40, 0, "f", 1 << 20, "none", 9)[0] == len(good)
    assert native_lane(good, -5, 10, len(good), 0, "f", 1 << 20, "none", 9) == (-5, [])


def test_layout_comes_from_the_schema():
    layout = dict(zip(nativedump._FIELDS, nativedump.field_layout()))
    data = unit("v1", phys=0x0102030405060708, queue_offset=-2, born=(b"\x01\x02\x03\x04", 77))
    for name, (off, size) in layout.items():
        value = dict(zip(FIXED_NAMES, FIXED.unpack_from(data)))[name]
        raw = data[off:off + size]
        assert (raw if isinstance(value, bytes) else int.from_bytes(raw, "big", signed=True)) == value, name


# ---- whole dumps, native on and off ---------------------------------------------------------------------------------

def _dump_rows(path, native_on: bool, monkeypatch, **kw):
    monkeypatch.setenv("MQTOOL_NATIVE", "1" if native_on else "0")
    stats = ScanStats()
    opts = DumpOptions(**kw)
    _, rows, _ = ops.dump("commitlog", str(path), opts, stats)
    rows = list(rows)
    monkeypatch.undo()
    return rows, stats


def _assert_same_dump(path, monkeypatch, **kw):
    a, sa = _dump_rows(path, True, monkeypatch, **kw)
    b, sb = _dump_rows(path, False, monkeypatch, **kw)
    same_rows(a, b)
    assert (sa.messages, sa.damaged, sa.notes) == (sb.messages, sb.damaged, sb.notes)
    # NDJSON output (the JSON lane: blocks of lines written in C where it can)
    c, sc = _dump_rows(path, True, monkeypatch, ndjson=True, **kw)
    d, sd = _dump_rows(path, False, monkeypatch, ndjson=True, **kw)
    assert ndjson_bytes(c) == ndjson_bytes(d) == ndjson_bytes(b)
    assert (sc.messages, sc.damaged, sc.notes) == (sd.messages, sd.damaged, sd.notes) == (sb.messages, sb.damaged,
                                                                                            sb.notes)
    return a


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                                   HealthCheck.function_scoped_fixture])
@given(data=segments(), body=st.sampled_from(sorted(nativedump.BODY_MODES)), blank=st.booleans(),
       lo=st.one_of(st.none(), st.integers(0, 600)), hi=st.one_of(st.none(), st.integers(0, 900)))
def test_dump_equal_on_built_segments(monkeypatch, data, body, blank, lo, hi):
    with tempfile.TemporaryDirectory() as d:
        seg = Path(d) / "commitlog" / SEG_NAME
        seg.parent.mkdir()
        seg.write_bytes(data)
        _assert_same_dump(seg.parent, monkeypatch, body=body, include_blank=blank, from_offset=lo, to_offset=hi)


def test_native_rows_used_on_fixture(monkeypatch):
    """The helper really serves the fixture's units (so the equality tests above compare two paths)."""
    calls = []
    mod = nativedump.helper()

    class Spy:
        def rows(self, *a):
            r = mod.rows(*a)
            calls.append(r[1])
            return r

    monkeypatch.setattr(nativedump, "helper", lambda: Spy())
    opts = DumpOptions(jobs=1)
    _, rows, _ = ops.dump("commitlog", str(FIXTURE_STORE), opts, ScanStats())
    rows = list(rows)
    assert sum(calls) > len(rows) // 2 > 0


def test_json_lane_used_on_fixture_and_real_stores(monkeypatch):
    """With NDJSON output most rows come as blocks written by json_rows (and the output is the same)."""
    for store in [FIXTURE_STORE] + _rocketmq_stores():
        rows, stats = _dump_rows(store, True, monkeypatch, ndjson=True, jobs=1)
        in_blocks = sum(r.count(b"\n") for r in rows if type(r) is render.PreRenderedLines)
        assert stats.messages == in_blocks + sum(1 for r in rows if type(r) is not render.PreRenderedLines)
        if store == FIXTURE_STORE:
            assert in_blocks > stats.messages // 2 > 0


@pytest.mark.parametrize("args", [
    [], ["--body", "text"], ["--body", "hex"], ["--body", "base64"], ["--include-blank"],
    ["--from-offset", "5000", "--to-offset", "12000"], ["--limit", "3"], ["--jobs", "2", "--split-size", "4K"],
    ["--jobs", "2", "--split-size", "4K", "--limit", "30"], ["--jobs", "2", "--split-size", "4K", "--body", "base64"],
    ["--jobs", "2", "--split-size", "4K", "--from-offset", "5000", "--to-offset", "12000", "--include-blank"],
    ["--topic", "Orders"], ["--key", "order-1"], ["--tag", "TagZip", "--body", "text"],
])
def test_cli_output_identical_on_fixture(run_cli, monkeypatch, args):
    out = []
    for on in (True, False):
        monkeypatch.setenv("MQTOOL_NATIVE", "1" if on else "0")
        out.append(run_cli("dump", "commitlog", FIXTURE_STORE, "--json", *args))
    assert out[0] == out[1]
    assert out[0][1].count("\n") > 0


def _rocketmq_stores():
    root = require_realdata("rocketmq")
    return sorted(p.parent for p in root.glob("*/store/commitlog") if p.is_dir())


@pytest.mark.parametrize("body", ["none", "text", "base64"])
def test_dump_equal_on_real_stores(monkeypatch, body):
    stores = _rocketmq_stores()
    assert stores
    total = 0
    for store in stores:
        total += len(_assert_same_dump(store, monkeypatch, body=body, include_blank=True))
    assert total > 0


def test_prerendered_lines_written_as_rows_would_be():
    """render.PreRenderedLines (blocks from --jobs workers) == the rows written one by one, binary or text."""
    import io

    rows = [{"a": 1, "file": "x\udcff"}, {"b": [1, 2], "c": "é"}, {"big": 1 << 70}]
    blocks = render.ndjson_blocks(iter(rows), size=1)
    assert len(blocks) == 3
    block = render.PreRenderedLines(b"".join(render.ndjson_blocks(iter(rows))))

    class Binary(io.StringIO):
        def __init__(self):
            super().__init__()
            self.buffer = io.BytesIO()

    outs = []
    for items in (rows, [block], [rows[0], block, render.PreRendered(render.dumps(rows[1]))]):
        o = Binary()
        render.write_ndjson(iter(items), o)
        t = io.StringIO()
        render.write_ndjson(iter(items), t)
        assert t.getvalue().encode("utf-8", "surrogateescape") == o.buffer.getvalue()
        outs.append(o.buffer.getvalue())
    assert outs[0] == outs[1] and outs[2] == outs[0][:outs[0].index(b"\n") + 1] + outs[0] + \
        outs[0].split(b"\n")[1] + b"\n"


def test_automatic_jobs_prefers_one_process(monkeypatch):
    """--jobs 0 with the helper: one process; an explicit --jobs N is obeyed; without the helper: as before."""
    assert nativedump.one_process(DumpOptions(jobs=0, ndjson=True))
    assert not nativedump.one_process(DumpOptions(jobs=2, ndjson=True))
    assert not nativedump.one_process(DumpOptions(jobs=0, ndjson=True, topic="T"))     # no helper rows: as before
    monkeypatch.setenv("MQTOOL_NATIVE", "0")
    assert not nativedump.one_process(DumpOptions(jobs=0, ndjson=True))


# ---- a body that does not inflate: dump says so wherever verify does ----------------------------------------------

def _packed(codec: str, data: bytes) -> bytes:
    """``data`` compressed by the codec's own library (not mqtool.codecs)."""
    if codec == "zlib":
        return zlib.compress(data)
    if codec == "lz4":
        import lz4.frame
        return lz4.frame.compress(data)
    import zstandard
    return zstandard.ZstdCompressor().compress(data)


_CODEC_BITS = {"zlib": 0x000, "lz4": 0x100, "zstd": 0x200}     # sysFlag bits 8-10 (reference: rocketmq.md §1)
_PLAIN = b"body inflated " * 40


def _bad_bodies():
    for codec in _CODEC_BITS:
        whole = _packed(codec, _PLAIN)
        yield codec, "truncated", whole[:len(whole) // 2]
        yield codec, "garbage-after", whole + b"\x00junk"
        yield codec, "not-a-stream", b"\xa5" * 24
    yield "lz4", "empty", b""        # a frame has at least a magic number and a header
    yield "zlib", "empty", b""


@pytest.mark.parametrize("codec,kind,body", [pytest.param(*c, id=f"{c[0]}-{c[1]}") for c in _bad_bodies()])
def test_dump_flags_a_body_that_does_not_inflate_like_verify(tmp_path, run_cli, monkeypatch, codec, kind, body):
    """Every stream verify calls ``body-inflate-failed`` (truncated, followed by garbage, no stream at all) gives
    a row with ``body`` null and a ``body_error``, a damage note and exit 1 -- with the helper and without; a sound
    compressed neighbour still gives its body."""
    good = unit("v1", body=_packed(codec, _PLAIN), sys_flag=F.COMPRESSED_FLAG | _CODEC_BITS[codec])
    bad = unit("v1", body=body, sys_flag=F.COMPRESSED_FLAG | _CODEC_BITS[codec], phys=len(good))
    seg = tmp_path / "commitlog" / SEG_NAME
    seg.parent.mkdir()
    seg.write_bytes(good + bad + bytes(4096 - len(good) - len(bad)))
    outs = []
    for on in (True, False):
        monkeypatch.setenv("MQTOOL_NATIVE", "1" if on else "0")
        for mode in ("text", "base64"):
            code, out, err = run_cli("dump", "commitlog", tmp_path, "--body", mode, "--json")
            rows = [json.loads(x) for x in out.splitlines()]
            assert [r["position"] for r in rows] == [0, len(good)]
            assert rows[0]["body"] == (_PLAIN.decode() if mode == "text" else base64.b64encode(_PLAIN).decode())
            assert "body_error" not in rows[0]
            assert rows[1]["body"] is None and rows[1]["body_error"].startswith(codec + ":"), rows[1]
            assert code == 1 and f"position {len(good)}: body does not decode" in err, err
            outs.append((mode, out, err))
        code, out, err = run_cli("verify", "store", tmp_path, "--json")
        found = [json.loads(x) for x in out.splitlines() if '"code"' in x]
        assert [f["position"] for f in found if f["code"] == "body-inflate-failed"] == [len(good)], found
    assert outs[:2] == outs[2:]
