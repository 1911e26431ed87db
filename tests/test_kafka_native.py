"""The compiled Kafka records-area walker (mqtool/_native/kafka.c) gives exactly what the Python path gives.

* ``parse_records``: on hypothesis-generated records areas (built by the fixture builder's ``record`` from
  ``K.Record``: null and empty keys and values, negative/large/over-64-bit deltas, headers) and on damaged
  copies of them (truncated, bytes set, inserted, deleted, a wrong count), the helper returns the Python
  result or declines (None), and it never accepts what Python rejects. On clean areas with 64-bit values it
  must not decline.
* ``record_rows``: the ``dump kafka --deep`` / ``--print-data`` rows of a batch equal ``record_row`` over
  ``iter_records`` (Python path), same keys in the same order.
* CLI: ``dump kafka --deep --json`` and ``--print-data --json`` are byte-identical with the helper on and off on
  every real Kafka store, the fixtures and a small bench build (in-process with ``--jobs 1``, and as a user
  runs it, default ``--jobs``, with ``MQTOOL_NATIVE=0``).
* The schema tie: the layout string derived from ``K.Record`` equals the helper's, and a helper whose layout
  differs is not used.
"""
from __future__ import annotations

import os
import subprocess
import sys

import construct
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from builders import kafka_builder
from conftest import FIXTURES, ROOT, realdata_root, require_realdata
from formats import kafka as K
from mqtool import native
from mqtool.kafka import dump as D
from mqtool.kafka import records as R
from mqtool.kafka import scan as S
from mqtool.options import DumpOptions
from mqtool.schema_struct import layout_notation

BK = kafka_builder()
NAT = D._native_walker()       # configured with the row keys; None when not built or MQTOOL_NATIVE=0

needs_native = pytest.mark.skipif(NAT is None, reason="compiled kafka helper not built, or MQTOOL_NATIVE=0 "
                                                      "(tests/test_common_native.py fails under CI when it is missing)")
I64 = st.integers(-(1 << 63), (1 << 63) - 1)
SMALL = st.integers(-300, 300)


# ---- generated records areas -------------------------------------------------------------------

def _nullable(length_of_null=st.integers(-3, -1)):
    """(length, bytes|None): a null may be stored with any negative length (Python reads it as null too)."""
    return st.one_of(st.binary(max_size=40).map(lambda b: (len(b), b)),
                     length_of_null.map(lambda n: (n, None)))


@st.composite
def record(draw, wide=False):
    delta = st.one_of(SMALL, I64, st.integers(-(1 << 68), 1 << 68)) if wide else st.one_of(SMALL, I64)
    klen, key = draw(_nullable())
    vlen, value = draw(_nullable())
    headers = []
    for _ in range(draw(st.integers(0, 3))):
        hk = draw(st.binary(max_size=12) | st.sampled_from([b"traceparent", "caf\u00e9".encode(), b"\xff\xfe"]))
        hvlen, hv = draw(_nullable())
        headers.append((hk, hv, hvlen))
    attributes, ts_delta = draw(st.integers(-128, 127)), draw(delta)
    return BK.record(draw(delta), ts_delta, key, value, headers, attributes=attributes, key_length=klen,
                     value_length=vlen)


def area(wide=False):
    return st.lists(record(wide), max_size=6).map(lambda recs: (b"".join(recs), len(recs)))


def _py_parse(data, count):
    try:
        return R.parse_records(data, count)
    except (ValueError, IndexError):
        return "error"


def _same_or_declined(data, count):
    got = NAT.parse_records(data, count)
    if got is not None:
        want = _py_parse(data, count)
        assert want != "error", "the helper accepted an area the Python walk rejects"
        assert got == want
    return got


@needs_native
@settings(max_examples=300, deadline=None)
@given(area())
def test_parse_records_equals_python_on_clean_areas(a):
    data, count = a
    got = _same_or_declined(data, count)
    assert got is not None, "a clean area with 64-bit values must not be declined"
    assert got == R.parse_records(data, count)


@needs_native
@settings(max_examples=200, deadline=None)
@given(area(wide=True))
def test_parse_records_wide_varints_declined_or_equal(a):
    _same_or_declined(*a)


@st.composite
def damaged(draw):
    data, count = draw(area())
    assume(data)
    b = bytearray(data)
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, max(0, len(b) - 1)))
        op = draw(st.sampled_from(["set", "insert", "delete", "truncate"]))
        if op == "set" and b:
            b[i] = draw(st.integers(0, 255))
        elif op == "insert":
            b[i:i] = bytes([draw(st.integers(0, 255))])
        elif op == "delete" and b:
            del b[i]
        elif op == "truncate":
            del b[i:]
    return bytes(b), count + draw(st.sampled_from([0, 0, 0, -1, 1]))


@needs_native
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(damaged())
def test_parse_records_damaged_areas(a):
    _same_or_declined(*a)


@needs_native
def test_parse_records_edge_cases():
    one = BK.record(0, 0, None, b"x")
    assert NAT.parse_records(one, 1) == R.parse_records(one, 1)
    assert NAT.parse_records(one, 1)[0][0][6] == ()                      # header count byte 0: ()
    two_byte_zero = one[:-1] + b"\x80\x00"                               # a header count of 0 in two bytes
    two_byte_zero = bytes([one[0] + 2]) + two_byte_zero[1:]              # length + 1 (zigzag +2)
    assert NAT.parse_records(two_byte_zero, 1) == R.parse_records(two_byte_zero, 1)
    assert NAT.parse_records(two_byte_zero, 1)[0][0][6] == []
    for data, count in [(b"", 1), (one, 2), (one, -1), (one[:-1], 1), (one + b"\x00", 2), (b"\x00", 1),
                        (b"\x01\x00", 1), (bytes([0xFF] * 11), 1)]:
        assert NAT.parse_records(data, count) is None or _py_parse(data, count) != "error", (data, count)
    assert NAT.parse_records(b"", 0) == ([], 0) == R.parse_records(b"", 0)
    assert NAT.parse_records(memoryview(one), 1) == R.parse_records(one, 1)    # any buffer
    with pytest.raises(TypeError):
        NAT.parse_records("not a buffer", 1)


# ---- rows of one batch ----------------------------------------------------------------------------

def _batch(data, count, base_offset, base_ts, max_ts, ts_type, seq, txn, pid=7):
    buf = bytes(K.V2_HEADER_SIZE) + data
    return R.Batch("/x/00000000000000000000.log", 0, len(buf), 2, base_offset, base_offset, 0, True,
                   0x10 if txn else 0, K.CODEC_NONE, ts_type, max_ts, base_ts, 0, pid, 0, seq, count, 0, txn,
                   False, None, None, buf)


OPTS = {0: DumpOptions(deep=True), 1: DumpOptions(print_data=True)}


def _py_rows(b, opts, monkeypatch):
    with monkeypatch.context() as m:
        m.setenv("MQTOOL_NATIVE", "0")
        try:
            return [D.record_row(b, rec, opts) for rec in R.iter_records(b)]
        except (ValueError, IndexError):
            return "error"


@needs_native
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(area(), area(wide=True), damaged()), I64, I64, I64, st.sampled_from([0, 1]),
       st.one_of(st.just(-1), st.integers(0, (1 << 31) - 1)), st.booleans(), st.sampled_from([0, 1]))
def test_record_rows_equal_python(monkeypatch, a, base, base_ts, max_ts, ts_type, seq, txn, text):
    data, count = a
    b = _batch(data, count, base, base_ts, max_ts, ts_type, seq, txn)
    got = D._native_record_rows(NAT, b, OPTS[text], text)
    want = _py_rows(b, OPTS[text], monkeypatch)
    if got is None:
        return
    assert want != "error"
    assert got == want
    assert [list(r) for r in got] == [list(r) for r in want]              # same key order


TEXTS = st.one_of(st.binary(max_size=30), st.sampled_from([b'"q"\\', b"\x00\x01\x1f\x7f\n\r\t\x08\x0c",
                                                          "caf\u00e9 \u2028 \U0001F600".encode(),
                                                          "\u009b\u00a0\u061c\u200e\u202e\u202f\u2069\u206a".encode(),
                                                          b"\xc3\x28\xed\xa0\x80\xf4\x90\x80\x80\xe0\x80"]))


@st.composite
def text_record(draw):
    def nullable():
        return draw(st.one_of(TEXTS.map(lambda b: (len(b), b)), st.just((-1, None))))

    klen, key = nullable()
    vlen, value = nullable()
    headers = []
    for _ in range(draw(st.integers(0, 3))):
        hk = draw(TEXTS | st.sampled_from([b"dup", b"dup"]))
        hvlen, hv = nullable()
        headers.append((hk, hv))
    ts_delta = draw(SMALL)
    return BK.record(draw(SMALL), ts_delta, key, value, headers)


@needs_native
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(st.lists(text_record(), max_size=5).map(lambda r: (b"".join(r), len(r))), area(), damaged()),
       I64, I64, st.sampled_from([0, 1]), st.one_of(st.just(-1), st.integers(0, (1 << 31) - 1)), st.booleans(),
       st.sampled_from([0, 1]), st.sampled_from(["/x/00000000000000000000.log", "/d\u00e9j\u00e0/\"q\"\n.log",
                                                            "/t\u202e\u0085/0.log"]))
def test_record_json_equals_rendered_python_rows(monkeypatch, a, base, ts, ts_type, seq, txn, text, file):
    from mqtool.render import dumps

    data, count = a
    b = _batch(data, count, base, ts, min(ts + 7, (1 << 63) - 1), ts_type, seq, txn)
    b.file = file
    got = D._native_record_json(NAT, b, OPTS[text])
    want = _py_rows(b, OPTS[text], monkeypatch)
    if got is None:
        return
    assert want != "error"
    assert got == "\n".join(dumps(r) for r in want)


@needs_native
def test_record_json_keeps_repeated_header_keys_and_declines_odd_names(monkeypatch):
    from mqtool.render import dumps

    rec = BK.record(0, 0, None, None, [(b"a", b"1"), (b"a", b"2")])
    b = _batch(rec, 1, 0, 0, 0, 0, -1, False)
    want = _py_rows(b, OPTS[1], monkeypatch)
    assert want[0]["headers"] == [["a", "1"], ["a", "2"]]                     # Kafka's ordered list, both kept
    assert D._native_record_json(NAT, b, OPTS[1]) == dumps(want[0])
    assert D._native_record_rows(NAT, b, OPTS[1], 1) == want
    b.file = "/x/\udcff.log"                                                 # a non-UTF-8 file name
    assert D._json_pieces(b, OPTS[0]) is None
    b2 = _batch(BK.record(0, 0, b"", b""), 1, 5, 0, 0, 0, -1, False)
    assert D._native_record_json(NAT, b2, OPTS[1]) == dumps(_py_rows(b2, OPTS[1], monkeypatch)[0])


@needs_native
@pytest.mark.parametrize("size", [65_400, 70_000])
def test_record_json_of_long_records_with_worst_case_escapes(monkeypatch, size):
    """Lines of records near and past the size the walker reserves a whole line for at once (64 KiB: beyond it,
    field by field), every byte of the value, the key and the header keys escaped to six characters (the worst
    case), header keys shown twice with --print-data: the same text as the rendered Python rows."""
    from mqtool.render import dumps

    ctl = bytes(range(0x20)) * (size // 32)
    h = [(ctl[:300], ctl[:200]), (b'"\\' * 50, ctl[:10])]
    recs = [BK.record(i, i, key, value, h)
            for i, (key, value) in enumerate(((ctl[:100], ctl), (b"k", b"v"), (ctl[:5000], ctl[:size - 9000])))]
    b = _batch(b"".join(recs), len(recs), 10, 1000, 1002, 0, 5, False)
    for text in (0, 1):
        want = _py_rows(b, OPTS[text], monkeypatch)
        assert D._native_record_json(NAT, b, OPTS[text]) == "\n".join(dumps(r) for r in want)


@needs_native
def _text_batch(value=b"v\xc3\xa9%02d", header_key=b"h\xc3\xa9"):
    recs = [BK.record(i, i * 3, b"k-%d" % i, None if i == 2 else value % i, [(header_key, b"z")]) for i in range(5)]
    return _batch(b"".join(recs), 5, 1000, 5000, 5012, 0, 2147483646, True)


def test_record_rows_clean_batch_not_declined(monkeypatch):
    b = _text_batch()
    for text in (0, 1):
        got = D._native_record_rows(NAT, b, OPTS[text], text)
        assert got is not None and got == _py_rows(b, OPTS[text], monkeypatch)
    rows = D._native_record_rows(NAT, b, OPTS[1], 1)
    assert [r["sequence"] for r in rows] == [2147483646, 2147483647, 0, 1, 2]     # wraps like Kafka's
    assert rows[2]["value"] is None and rows[2]["value_size"] == -1
    assert rows[0]["headers"] == [["h\u00e9", "z"]] and rows[0]["flags"] == "txn"


def test_record_rows_leave_bytes_that_are_not_text_to_python(monkeypatch):
    """Not UTF-8: the helper declines the batch and the Python rows give every byte back (base64 + marker)."""
    import base64

    b = _text_batch(value=b"v\xff\xfe%02d")
    assert D._native_record_rows(NAT, b, OPTS[1], 1) is None
    assert D._native_record_rows(NAT, b, OPTS[0], 0) is not None          # --deep rows show no values
    rows = _py_rows(b, OPTS[1], monkeypatch)
    assert base64.b64decode(rows[0]["value"]) == b"v\xff\xfe00" and rows[0]["value_encoding"] == "base64"
    assert "key_encoding" not in rows[0] and rows[0]["key"] == "k-0"
    b = _text_batch(header_key=b"h\xc3")
    assert D._native_record_rows(NAT, b, OPTS[0], 0) is None
    rows = _py_rows(b, OPTS[1], monkeypatch)
    assert rows[0]["headers"] == [[base64.b64encode(b"h\xc3").decode(), base64.b64encode(b"z").decode()]]
    assert rows[0]["headers_encoding"] == "base64" and rows[0]["header_keys_encoding"] == "base64"


def test_native_mode_choice():
    assert D._native_mode(DumpOptions(deep=True), None) == 0
    assert D._native_mode(DumpOptions(deep=True, body="hex"), None) == 0      # --deep rows carry no bodies
    assert D._native_mode(DumpOptions(print_data=True), None) == 1
    assert D._native_mode(DumpOptions(print_data=True, body="text"), None) == 1
    assert D._native_mode(DumpOptions(print_data=True, body="hex"), None) is None
    assert D._native_mode(DumpOptions(print_data=True), lambda k, v: None) is None


# ---- the schema tie -------------------------------------------------------------------------------

def test_layout_is_derived_from_the_schema(monkeypatch):
    if NAT is not None:
        assert NAT.RECORD_LAYOUT == R.RECORD_LAYOUT
    assert R.RECORD_LAYOUT == layout_notation(K.Record)     # (the schema cache serves it at start-up)
    # a schema that differs in any field gives another layout string
    body = K.RecordBody
    changed = construct.Prefixed(construct.ZigZag, construct.Struct(
        *[("attributes" / construct.Int16sb) if sc.name == "attributes" else sc for sc in body.subcons]))
    assert layout_notation(changed) != R.RECORD_LAYOUT
    swapped = construct.Prefixed(construct.ZigZag, construct.Struct(*body.subcons[:1], body.subcons[2],
                                                                     body.subcons[1], *body.subcons[3:]))
    assert layout_notation(swapped) != R.RECORD_LAYOUT

    class Other:
        RECORD_LAYOUT = layout_notation(changed)

    monkeypatch.setattr(native, "load", lambda name: Other)
    assert R._load_native() is None                # a helper for another layout is not used
    monkeypatch.setattr(native, "load", lambda name: None)
    assert R._load_native() is None


def test_switch_off_env(monkeypatch):
    monkeypatch.setenv("MQTOOL_NATIVE", "0")
    assert R._load_native() is None


# ---- whole stores, native on and off -------------------------------------------------------------

class _Counting:
    """Wraps the helper and counts the batches it answered (so a silently unused helper fails the test)."""

    def __init__(self, mod):
        self.mod, self.answered, self.declined, self.lines = mod, 0, 0, 0

    def record_rows(self, *a):
        r = self.mod.record_rows(*a)
        if r is None:
            self.declined += 1
        else:
            self.answered += 1
        return r

    def record_json(self, *a):
        r = self.mod.record_json(*a)
        if r is None:
            self.declined += 1
        else:
            self.answered += 1
            self.lines += 1
        return r

    def group_lines(self, *a):      # each batch's line and its records' lines as bytes: counted as record_json
        out = self.mod.group_lines(*a)
        for r in out:
            if r is None:
                self.declined += 1
            else:
                self.answered += 1
                self.lines += 1
        return out

    def configure_codecs(self, *a):
        return self.mod.configure_codecs(*a)

    def parse_records(self, *a):
        return self.mod.parse_records(*a)


def _dump(run_cli, monkeypatch, store, mode, nat):
    with monkeypatch.context() as m:
        if nat is None:
            m.setenv("MQTOOL_NATIVE", "0")
        else:
            m.setattr(D, "_native_walker", lambda: nat)
            m.setattr(R, "_load_native", lambda: nat)
        return run_cli("dump", "kafka", store, mode, "--json", "--jobs", "1")


def _kafka_stores():
    root = realdata_root() / "kafka"
    return sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []


@pytest.fixture(scope="module")
def bench_store(tmp_path_factory):
    sys.path.insert(0, str(ROOT))
    from bench.build_kafka import build_store

    d = tmp_path_factory.mktemp("kbench") / "store"
    build_store(d, 2 << 20, segment_bytes=1 << 20, log=lambda s: None)
    return d


def _stores(name, bench_store):
    if name == "bench":
        return bench_store
    if name == "fixture":
        return FIXTURES / "kafka" / "logdir"
    return require_realdata("kafka", name)


@needs_native
@pytest.mark.parametrize("mode", ["--deep", "--print-data"])
@pytest.mark.parametrize("name", ["fixture", "bench"] + (_kafka_stores() or ["(no real kafka data)"]))
def test_dump_identical_native_on_off(run_cli, monkeypatch, bench_store, name, mode):
    store = _stores(name, bench_store)
    counting = _Counting(NAT)
    on = _dump(run_cli, monkeypatch, store, mode, counting)
    off = _dump(run_cli, monkeypatch, store, mode, None)
    assert on == off
    assert on[1].count('"kind":"record"') > 0 or name.startswith("codecrafters")
    if name in ("fixture", "bench"):
        assert counting.answered > 0
    if name == "bench":
        assert counting.declined == 0
        assert counting.lines > 0                  # --json without --limit: whole batches as NDJSON lines


@needs_native
@pytest.mark.parametrize("mode", ["--deep", "--print-data"])
def test_dump_default_jobs_identical_with_native_off(bench_store, mode):
    """As a user runs it (default --jobs: worker processes load the helper themselves)."""
    def run(env_native):
        env = dict(os.environ, MQTOOL_NATIVE=env_native)
        return subprocess.run([sys.executable, "-m", "mqtool", "dump", "kafka", str(bench_store), mode, "--json",
                               "--split-size", "256K"], capture_output=True, env=env, cwd=ROOT, check=False)

    on, off = run("1"), run("0")
    assert on.returncode == off.returncode == 0
    assert on.stdout == off.stdout and on.stdout.count(b'"kind":"record"') > 1000


# ---- resync candidates: shape before CRC -----------------------------------------------------------

def _all_logs(name, bench_store):
    from mqtool.kafka.ranges import log_files

    return log_files(_stores(name, bench_store))


@pytest.mark.parametrize("name", ["fixture", "bench"] + (_kafka_stores() or ["(no real kafka data)"]))
def test_every_real_entry_has_a_sane_shape(bench_store, name):
    """The shape test that resync runs before a CRC accepts every entry of every store we have."""
    from mqtool.io import map_input

    seen = 0
    for f in _all_logs(name, bench_store):
        with map_input(f) as m:
            for ev in S.scan(m.buf, str(f)):
                if isinstance(ev, R.Batch) and ev.crc_ok:
                    assert S._shape_ok(m.buf, ev.position, ev.size - 12, ev.magic), (f, ev.position)
                    assert S._frame_ok(m.buf, ev.position, len(m.buf))
                    seen += 1
    assert seen > 0 or name.startswith("ldi")


def test_false_candidates_cost_no_crc(monkeypatch):
    """A candidate whose lengths do not add up is refused before its CRC (which could span the whole file)."""
    def no_crc(*a):
        raise AssertionError("CRC computed for a candidate of the wrong shape")

    monkeypatch.setattr(R.zlib, "crc32", no_crc)
    monkeypatch.setattr(S, "crc32c", no_crc)
    big = 1 << 20
    legacy = bytearray(12 + big)
    legacy[8:12] = (big).to_bytes(4, "big")          # size: the rest of the buffer
    legacy[16] = 0                                   # magic 0, attributes 0, key length 0, value length 0
    assert not S._frame_ok(bytes(legacy), 0, len(legacy))
    v2 = bytearray(12 + big)
    v2[8:12] = (big).to_bytes(4, "big")
    v2[16] = 2
    v2[21:23] = (0x0100).to_bytes(2, "big")          # attribute bit 8: never set by Kafka
    assert not S._frame_ok(bytes(v2), 0, len(v2))
    v2[21:23] = bytes(2)
    v2[57:61] = (-1).to_bytes(4, "big", signed=True)  # negative record count
    assert not S._frame_ok(bytes(v2), 0, len(v2))


# ---- codec fast paths == the careful code ------------------------------------------------------------

def _outcome(fn, data, limit):
    from mqtool.codecs import CodecError

    try:
        return fn(data, limit)
    except CodecError:
        return "CodecError"


@st.composite
def _mangled(draw, streams):
    b = bytearray(b"".join(streams))
    if draw(st.booleans()) and b:
        for _ in range(draw(st.integers(1, 3))):
            i = draw(st.integers(0, len(b) - 1))
            op = draw(st.sampled_from(["set", "truncate", "append"]))
            if op == "set":
                b[i] = draw(st.integers(0, 255))
            elif op == "truncate":
                del b[i:]
                if not b:
                    break
            else:
                b += draw(st.sampled_from([b"\x00\x00", b"junk", b"\x1f\x8b", bytes(8)]))
    return bytes(b)


PAYLOAD = st.binary(max_size=3000) | st.text(max_size=2000).map(lambda t: (t * 3).encode())


@settings(max_examples=200, deadline=None)
@given(st.data(), st.lists(PAYLOAD, min_size=1, max_size=3), st.sampled_from([1 << 20, 5000, 0]))
def test_gunzip_fast_equals_careful(data, parts, limit):
    import gzip

    from mqtool import codecs as C

    blob = data.draw(_mangled([gzip.compress(p, mtime=0) for p in parts]))
    assert _outcome(C.gunzip, blob, limit) == _outcome(C._gunzip_careful, blob, limit)


@settings(max_examples=200, deadline=None)
@given(st.data(), st.lists(PAYLOAD, min_size=1, max_size=3), st.booleans(), st.sampled_from([1 << 20, 5000, 0]))
def test_unzstd_fast_equals_careful(data, parts, sized, limit):
    import zstandard

    from mqtool import codecs as C

    cctx = zstandard.ZstdCompressor(write_content_size=sized)
    frames = [cctx.compress(p) for p in parts]
    if data.draw(st.booleans()):                   # a skippable frame between them
        frames.insert(1, b"\x50\x2a\x4d\x18" + (4).to_bytes(4, "little") + b"skip")
    blob = data.draw(_mangled(frames))
    assert _outcome(C.unzstd, blob, limit) == _outcome(C._unzstd_careful, blob, limit)


def test_zstd_lying_content_size_is_refused():
    import zstandard

    from mqtool import codecs as C

    c = bytearray(zstandard.ZstdCompressor().compress(bytes(1 << 20)))
    assert zstandard.get_frame_parameters(bytes(c)).content_size == 1 << 20
    fcs_at = zstandard.frame_header_size(bytes(c)) - 4
    c[fcs_at:fcs_at + 4] = (1000).to_bytes(4, "little")
    assert zstandard.get_frame_parameters(bytes(c)).content_size == 1000
    with pytest.raises(zstandard.ZstdError):       # stops at the stated size, does not grow
        C._zstd_sized_frames(bytes(c), 1 << 30)
    assert _outcome(C.unzstd, bytes(c), 1 << 30) == _outcome(C._unzstd_careful, bytes(c), 1 << 30)


def test_span_crc_in_windows_equals_whole(tmp_path, monkeypatch):
    import mmap
    import random
    import zlib

    from crc32c import crc32c

    monkeypatch.setattr(S, "PAGE_WINDOW", 3 * mmap.PAGESIZE + 5)      # many windows on a small file
    data = random.Random(9).randbytes(20 * mmap.PAGESIZE + 77)
    f = tmp_path / "x.log"
    f.write_bytes(data)
    with open(f, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as m:
        for start, end in [(0, len(data)), (1, len(data) - 1), (4095, 4097 + 9 * mmap.PAGESIZE), (7, 9)]:
            assert S._span_crc(crc32c, m, start, end) == crc32c(data[start:end])
            assert S._span_crc(zlib.crc32, m, start, end) == zlib.crc32(data[start:end])
            assert S._span_crc(zlib.crc32, data, start, end) == zlib.crc32(data[start:end])


def test_default_jobs_choose_one_process_for_native_lines(monkeypatch, bench_store):
    from mqtool.kafka import ranges as KR
    from mqtool.options import ScanStats

    opts = DumpOptions(deep=True, ndjson=True, jobs=0)
    assert D.native_lines(opts) == (NAT is not None)
    if NAT is not None:
        assert KR.parallel_dump_rows(bench_store, opts, ScanStats()) is None      # one process
    for other in (DumpOptions(deep=True, ndjson=True, jobs=0, limit=3), DumpOptions(deep=True, jobs=0),
                  DumpOptions(ndjson=True, jobs=0), DumpOptions(deep=True, ndjson=True, key="k"),
                  DumpOptions(print_data=True, body="hex", ndjson=True)):
        assert not D.native_lines(other)
    monkeypatch.setenv("MQTOOL_NATIVE", "0")
    assert not D.native_lines(opts)
