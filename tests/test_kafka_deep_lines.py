"""``dump kafka --deep/--print-data --json`` through whole-batch blocks (mqtool.kafka.dump.BatchLines, the
compiled ``group_lines`` of mqtool/_native/kafka.c, which inflates snappy, lz4 and zstd areas itself) and decoding lanes (``--jobs N`` threads): the bytes are
those of the row-by-row Python path.

* Every real Kafka store, the fixture, the bench builder's store and a generated partition (every codec in the
  clients' framings, v1 legacy messages, transactional and control batches, LogAppendTime, header keys and
  values with quotes, control characters, U+2028, placeholder-like text and bytes that are not UTF-8, and
  damage: a bad CRC, a payload that does not inflate under a valid CRC, a record count that lies, a negative
  record count over a payload that does not inflate, garbage to resync over, a cut tail): stdout, stderr and exit code are equal with the helper off (``MQTOOL_NATIVE=0``),
  ``--jobs 1``, ``--jobs 2``, three lanes with one-batch tasks, and the process pool (``--split-size``).
* The record offsets of each batch of the generated 4.0.0 store are those its expected.json states (written
  by the broker run, not by mqtool).
* A block equals the Python rendering of the batch row and its record rows (hypothesis); CleanLines only
  for a batch with a valid CRC; the template depends on no Batch field but TEMPLATE_FIELDS and the two
  numbers written per batch.
* Lanes keep at most LANE_AHEAD groups per lane in flight.
"""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builders import kafka_builder, kafka_codec_batch
from conftest import FIXTURES, ROOT, realdata_root, require_realdata
from formats import kafka as K
from mqtool import ndjson
from mqtool.kafka import dump as D
from mqtool.kafka import records as R
from mqtool.options import DumpOptions

NAT = D._native_walker()
needs_native = pytest.mark.skipif(NAT is None, reason="compiled kafka helper not built, or MQTOOL_NATIVE=0 "
                                                      "(tests/test_common_native.py fails under CI when it is missing)")
CODECS = [K.CODEC_NONE, K.CODEC_GZIP, K.CODEC_SNAPPY, K.CODEC_LZ4, K.CODEC_ZSTD]
HOSTILE = [b'"q"\\', b"\x00\x01\x1f\x7f\n\r\t", "caf\u00e9 \u2028 \U0001F600".encode(),
           "\u009b\u0085\u061c\u200f\u202e\u2066\u00a0\u202f".encode(),
           b"\x01mqtool-native-0\x01", b"\x01mqtool-batch-position\x01", b'"crc_ok":false', b'"body_error":"x']


def _crc(raw: bytearray) -> bytes:
    return kafka_builder().restamp_crc(raw)


def _records(n: int, salt: int, hostile: bool = True) -> list[bytes]:
    B = kafka_builder()
    out = []
    for i in range(n):
        h = HOSTILE[(i + salt) % len(HOSTILE)] if hostile else b"h"
        headers = [(b"traceparent", b"00-%032x-01" % (i + salt)), (h, h if i % 3 else None), (b"dup", b"1"),
                   (b"dup", b"2")][: 1 + (i + salt) % 4]
        key = None if i % 4 == 1 else b"k-%d" % i
        value = b"" if i % 5 == 2 else b'{"n":%d,"s":"%s"}' % (i, h.hex().encode())
        out.append(B.record(i, i * 3, key, value, headers))
    return out


def _segment(base: int) -> tuple[bytes, int]:
    """A segment of every kind of entry (see the module docstring); returns (bytes, next offset)."""
    B = kafka_builder()
    parts = [B.legacy_v1(base, B.T0, b"old", b"legacy v1")]
    off = base + 1
    for j, codec in enumerate(CODECS * 2):
        n = 3 + j
        txn = K.TRANSACTIONAL_FLAG_MASK if j % 3 == 1 else 0
        parts.append(kafka_codec_batch(off, _records(n, j), codec, base_ts=B.T0 + j, max_ts=B.T0 + j + 3 * n,
                                       attrs=txn, pid=7000 + j % 2 if txn or j % 2 else -1, epoch=0 if txn else -1,
                                       seq=(1 << 31) - 2 if j == 4 else (j if j % 2 else -1)))
        off += n
    # LogAppendTime
    parts.append(kafka_codec_batch(off, _records(4, 9), K.CODEC_LZ4, base_ts=B.T0, max_ts=B.T0 + 99,
                                   attrs=K.TIMESTAMP_TYPE_MASK))
    off += 4
    # a header key that is not UTF-8 (the Python rows give it in base64)
    parts.append(kafka_codec_batch(off, [B.record(0, 0, b"k", b"v", [(b"h\xff", b"z")])], K.CODEC_ZSTD,
                                   base_ts=B.T0, max_ts=B.T0))
    off += 1
    parts.append(B.control(off, 1, 7001, 0, B.T0 + 50))                 # COMMIT marker
    off += 1
    # damage 1: a bad CRC (one byte of a gzip payload changed)
    bad = bytearray(kafka_codec_batch(off, _records(6, 3), K.CODEC_GZIP, base_ts=B.T0, max_ts=B.T0 + 20))
    bad[-9] ^= 0x55
    parts.append(bytes(bad))
    off += 6
    # damage 2: a zstd payload that does not inflate, under a valid CRC
    bad = bytearray(kafka_codec_batch(off, _records(5, 4), K.CODEC_ZSTD, base_ts=B.T0, max_ts=B.T0 + 20))
    bad[K.V2_HEADER_SIZE + 8:K.V2_HEADER_SIZE + 14] = b"\xff" * 6
    parts.append(_crc(bad))
    off += 5
    # damage 2b: snappy and lz4 payloads that do not inflate (a block cut short), under a valid CRC
    for codec in (K.CODEC_SNAPPY, K.CODEC_LZ4):
        bad = bytearray(kafka_codec_batch(off, _records(4, 6), codec, base_ts=B.T0, max_ts=B.T0 + 20))
        del bad[-6:-3]
        bad[8:12] = (len(bad) - 12).to_bytes(4, "big")
        parts.append(_crc(bad))
        off += 4
    # damage 3: recordsCount says 6, the area holds 5 (valid CRC): the 5 records, then the error
    lie = bytearray(kafka_codec_batch(off, _records(5, 5), K.CODEC_NONE, base_ts=B.T0, max_ts=B.T0 + 20))
    lie[K.V2_HEADER_SIZE - 4:K.V2_HEADER_SIZE] = (6).to_bytes(4, "big")
    lie[K.V2_HEADER_SIZE - 4 - 32:K.V2_HEADER_SIZE - 32] = (5).to_bytes(4, "big")    # lastOffsetDelta
    parts.append(_crc(lie))
    off += 6
    # damage 4: recordsCount -1 over a compressed payload that does not inflate (valid CRC): the count is what
    # is wrong first (the Python rows say so before inflating; the compiled lanes must say the same)
    for codec in (K.CODEC_GZIP, K.CODEC_LZ4, K.CODEC_ZSTD):
        neg = bytearray(kafka_codec_batch(off, _records(3, 7), codec, base_ts=B.T0, max_ts=B.T0 + 9))
        neg[K.V2_HEADER_SIZE - 4:K.V2_HEADER_SIZE] = (-1).to_bytes(4, "big", signed=True)
        neg[K.V2_HEADER_SIZE:K.V2_HEADER_SIZE + 4] = b"\x00\x11\x22\x33"
        parts.append(_crc(neg))
        off += 3
    parts.append(b"\x07garbage between batches\x00\x13" * 3)                       # resync over this
    for j in range(30):                                                            # many small batches
        parts.append(kafka_codec_batch(off, _records(2, j, hostile=False), CODECS[j % 5], base_ts=B.T0,
                                       max_ts=B.T0 + 3, pid=4000 + j % 3, epoch=0, seq=j * 2))
        off += 2
    return b"".join(parts), off


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("kdeep") / "logs"
    part = root / "mix-0"
    part.mkdir(parents=True)
    seg0, nxt = _segment(0)
    (part / "00000000000000000000.log").write_bytes(seg0)
    seg1, _ = _segment(nxt)
    (part / f"{nxt:020d}.log").write_bytes(seg1 + seg1[:100])                   # a cut tail
    weird = root / 'we"ird\\\u2028-0'
    weird.mkdir()
    (weird / "00000000000000000000.log").write_bytes(seg0[: len(seg0) // 2 + 7])
    return root


@pytest.fixture(scope="module")
def bench_store(tmp_path_factory):
    sys.path.insert(0, str(ROOT))
    from bench.build_kafka import build_store

    d = tmp_path_factory.mktemp("kbench2") / "store"
    build_store(d, 3 << 20, segment_bytes=1 << 20, log=lambda s: None)
    return d


def _kafka_stores():
    root = realdata_root() / "kafka"
    return sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []


def _store(name, generated, bench_store):
    return {"generated": generated, "bench": bench_store, "fixture": FIXTURES / "kafka" / "logdir"}.get(name) \
        or require_realdata("kafka", name)


class _Used:
    """Counts the blocks BatchLines made (so a silently unused fast path fails the test)."""

    def __init__(self, monkeypatch):
        self.blocks = 0
        self.lock = threading.Lock()
        run = D.BatchLines.run

        def counted(bl, b, job):
            blk = run(bl, b, job)
            if blk is not None:
                with self.lock:
                    self.blocks += 1
            return blk

        monkeypatch.setattr(D.BatchLines, "run", counted)


def _runs(run_cli, monkeypatch, store, mode):
    out = {}
    with monkeypatch.context() as m:
        m.setenv("MQTOOL_NATIVE", "0")
        out["python"] = run_cli("dump", "kafka", store, mode, "--json", "--jobs", "1")
    used = _Used(monkeypatch)
    out["jobs1"] = run_cli("dump", "kafka", store, mode, "--json", "--jobs", "1")
    out["jobs2"] = run_cli("dump", "kafka", store, mode, "--json", "--jobs", "2")
    with monkeypatch.context() as m:
        m.setattr(D, "GROUP_BATCHES", 1)
        m.setattr(D, "GROUP_BYTES", 1)         # (lanes start only for a file of more than one group's bytes)
        m.setattr(D, "LANE_AHEAD", 1)
        out["tiny-lanes"] = run_cli("dump", "kafka", store, mode, "--json", "--jobs", "3")
    return out, used


@needs_native
@pytest.mark.parametrize("mode", ["--deep", "--print-data"])
@pytest.mark.parametrize("name", ["generated", "fixture", "bench"] + (_kafka_stores() or ["(no real kafka data)"]))
def test_blocks_and_lanes_equal_python_rows(run_cli, monkeypatch, generated, bench_store, name, mode):
    store = _store(name, generated, bench_store)
    out, used = _runs(run_cli, monkeypatch, store, mode)
    want = out.pop("python")
    for how, got in out.items():
        assert got[0] == want[0], how
        assert got[2] == want[2], how                           # the same damage notes
        assert got[1] == want[1], how
    if name in ("generated", "fixture", "bench"):
        assert used.blocks > 0
    if name == "generated":
        assert want[0] == 1 and '"kind":"damage"' in want[1] and "base64" in want[1]
        assert want[1].count('"kind":"record"') > 200


@needs_native
def test_areas_past_the_limit_fall_back_to_python(run_cli, monkeypatch, generated):
    """With a tiny area limit the helper declines every batch but the smallest plain ones: the same output."""
    with monkeypatch.context() as m:
        m.setenv("MQTOOL_NATIVE", "0")
        want = run_cli("dump", "kafka", generated, "--deep", "--json", "--jobs", "1")
    monkeypatch.setattr(R, "NATIVE_AREA_MAX", 64)
    for jobs in ("1", "2"):
        assert run_cli("dump", "kafka", generated, "--deep", "--json", "--jobs", jobs) == want


@needs_native
@pytest.mark.parametrize("mode", ["--deep", "--print-data"])
def test_process_pool_and_default_jobs_equal(generated, mode):
    """As a user runs it: default --jobs (lanes), the process pool (--split-size) and the helper off."""
    def run(*extra, native="1"):
        env = dict(os.environ, MQTOOL_NATIVE=native)
        r = subprocess.run([sys.executable, "-m", "mqtool", "dump", "kafka", str(generated), mode, "--json", *extra],
                           capture_output=True, env=env, cwd=ROOT, check=False)
        return r.returncode, r.stdout, r.stderr

    off = run("--jobs", "1", native="0")
    assert off[0] == 1 and off[1].count(b'"kind":"record"') > 200
    assert run() == off
    assert run("--jobs", "2", "--split-size", "4K") == off


def test_record_offsets_are_those_of_expected_json(run_cli):
    """Per batch of the broker-written store, the record rows' offsets are baseOffset..lastOffset (expected.json)."""
    root = require_realdata("kafka", "generated-4.0.0-SNAPSHOT", "broker-append")
    exp = json.loads((root / "expected.json").read_text())
    code, out, _err = run_cli("dump", "kafka", root / "forensics-0", "--deep", "--json", "--jobs", "2")
    assert code == 0
    got: dict = {}
    for line in out.splitlines():
        r = json.loads(line)
        if r["kind"] == "record":
            got.setdefault((Path(r["file"]).name, r["position"]), []).append(r["offset"])
    seen = 0
    for b in exp["batches"]:
        name = f"{b['segment']:020d}.log"
        assert got[(name, b["position"])] == list(range(b["baseOffset"], b["lastOffset"] + 1)), b["desc"]
        seen += 1
    assert seen == len(got) and seen > 30


# ---- blocks against the Python rendering ---------------------------------------------------------------

def _batch_of(raw: bytes, crc_ok=True):
    from mqtool.kafka.scan import scan

    evs = [e for e in scan(raw, "/x/00000000000000000000.log") if isinstance(e, R.Batch)]
    assert len(evs) == 1
    b = evs[0]
    if not crc_ok:
        b.crc_ok = False
    return b


def _py_block(b, opts, monkeypatch):
    with monkeypatch.context() as m:
        m.setenv("MQTOOL_NATIVE", "0")
        try:
            rows = [D.batch_row(b)] + [D.record_row(b, rec, opts) for rec in R.iter_records(b)]
        except (ValueError, IndexError):
            return "error"
    return ndjson.ndjson_blocks(rows, size=1 << 30)[0]


@needs_native
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(1, 8), st.integers(0, 50), st.sampled_from(CODECS), st.booleans(), st.booleans(),
       st.sampled_from([0, 1]))
def test_block_equals_python_rendering(monkeypatch, n, salt, codec, txn, crc_ok, text):
    B = kafka_builder()
    raw = kafka_codec_batch(123, _records(n, salt), codec, base_ts=B.T0, max_ts=B.T0 + 3 * n,
                            attrs=K.TRANSACTIONAL_FLAG_MASK if txn else 0, pid=5 if txn else -1)
    b = _batch_of(raw, crc_ok)
    opts = DumpOptions(deep=True) if text == 0 else DumpOptions(print_data=True)
    got = D.BatchLines(NAT, opts).block(b)
    want = _py_block(b, opts, monkeypatch)
    assert got is not None                  # (every string here is text: never declined)
    assert bytes(got) == want
    assert type(got) is (ndjson.CleanLines if crc_ok else ndjson.PreRenderedLines)
    assert (ndjson.DAMAGED_MARKS[0] in got) == (not crc_ok)


@needs_native
def test_clean_text_batches_are_not_declined(monkeypatch):
    B = kafka_builder()
    for codec in CODECS:
        b = _batch_of(kafka_codec_batch(0, _records(9, 0, hostile=False), codec, base_ts=B.T0, max_ts=B.T0 + 30))
        for opts in (DumpOptions(deep=True), DumpOptions(print_data=True)):
            got = D.BatchLines(NAT, opts).block(b)
            assert got is not None and bytes(got) == _py_block(b, opts, monkeypatch)


def test_template_depends_only_on_its_fields():
    """Batches equal in TEMPLATE_FIELDS get the same cut line, whatever their other fields (position and base
    offset are written per batch): record_row reads no other Batch field."""
    B = kafka_builder()
    b = _batch_of(kafka_codec_batch(0, _records(2, 0, hostile=False), K.CODEC_NONE, base_ts=B.T0, max_ts=B.T0))
    opts = DumpOptions(deep=True)
    want = D._json_pieces(b, opts)
    assert want is not None
    changes = {"position": 77, "size": 999, "base_offset": 5, "last_offset": 9, "crc": 1, "attributes": 0x20,
               "codec": 4, "max_timestamp": 3, "base_timestamp": 4, "partition_leader_epoch": 8,
               "producer_epoch": 2, "base_sequence": 11, "count": 40, "last_offset_delta": 39,
               "delete_horizon_ms": 5, "error": "x", "error_code": "y", "inner_last": 3, "magic": 1,
               "inner_crc_bad": 2, "inner_crc_first": 4}
    fields = {f.name for f in dataclasses.fields(R.Batch)}
    assert set(changes) | set(D.TEMPLATE_FIELDS) | {"_buf"} == fields, "a new Batch field: add it to one side"
    for name, value in changes.items():
        assert D._json_pieces(dataclasses.replace(b, **{name: value}), opts) == want, name
    for name, value in {"file": "/y/1.log", "timestamp_type": 1, "producer_id": 9, "is_transactional": True,
                        "is_control": True, "crc_ok": False}.items():
        assert D._json_pieces(dataclasses.replace(b, **{name: value}), opts) != want, name


# ---- the batch line from its template ------------------------------------------------------------------------

_I64 = st.integers(-(1 << 63), (1 << 63) - 1)
_SMALL = st.integers(-5, 1 << 40)


@st.composite
def _batch_fields(draw):
    """Every Batch field but ``_buf``: numbers from everywhere in their range, names with JSON and terminal
    specials, each nullable number null or not."""
    nullable = {name: st.one_of(st.none(), _I64) for name in D.NULLABLE_NUMBERS}
    return dict(
        file=draw(st.sampled_from(["/d/orders-0/0.log", 'x"%d%%\\.log', "caf\u00e9\u2028\x1b[1m.log"])),
        position=draw(_SMALL), size=draw(_SMALL), magic=draw(st.integers(0, 2)), base_offset=draw(nullable["base_offset"]),
        last_offset=draw(_I64), crc=draw(st.integers(0, (1 << 32) - 1)), crc_ok=draw(st.booleans()),
        attributes=draw(st.integers(-(1 << 15), (1 << 15) - 1)), codec=draw(st.integers(0, 7)),
        timestamp_type=draw(st.integers(-1, 1)), max_timestamp=draw(_I64), base_timestamp=draw(_I64),
        partition_leader_epoch=draw(_I64), producer_id=draw(_I64), producer_epoch=draw(_I64),
        base_sequence=draw(st.integers(-(1 << 31), (1 << 31) - 1)), count=draw(nullable["count"]),
        last_offset_delta=draw(st.integers(-(1 << 31), (1 << 31) - 1)), is_transactional=draw(st.booleans()),
        is_control=draw(st.booleans()), delete_horizon_ms=draw(nullable["delete_horizon_ms"]),
        error=draw(st.sampled_from([None, "inner messages unreadable: x"])), error_code="records-undecodable",
        inner_last=draw(st.one_of(st.none(), _I64)), inner_crc_bad=draw(_SMALL),
        inner_crc_first=draw(st.one_of(st.none(), _I64)))


@settings(max_examples=1, deadline=None)
@given(drawn=_batch_fields())
def test_the_head_fields_are_classified(drawn):
    fields = {f.name for f in dataclasses.fields(R.Batch)}
    assert set(drawn) | {"_buf"} == fields, "a new Batch field: give the test a value for it"
    assert set(D.HEAD_FIELDS) <= fields and set(D.NULLABLE_NUMBERS) <= fields


@settings(max_examples=400, deadline=None)
@given(first=_batch_fields(), other=_batch_fields())
def test_a_batch_line_from_the_template_of_its_shape(first, other):
    """The template made from one batch, filled with the numbers of another of the same shape (HEAD_FIELDS equal,
    the same NULLABLE_NUMBERS null), is that other batch's line as the writer writes it."""
    for name in D.HEAD_FIELDS:
        other[name] = first[name]
    for name in D.NULLABLE_NUMBERS:
        if (first[name] is None) != (other[name] is None):
            other[name] = None if first[name] is None else 5
    a, b = R.Batch(**first), R.Batch(**other)
    assert D._head_shape(a) == D._head_shape(b)
    made = D._head_template(a)
    want = ndjson.encode_row_fast(D.batch_row(b))
    if made is None:                    # only where the row has a number no field holds, or orjson refuses it
        assert want is None or not ndjson.CAN_PRERENDER_LINES
        return
    template, getter, unmarked = made
    assert template % getter(b) == want + b"\n"
    assert unmarked == D._unmarked(want)


def test_the_template_is_used(monkeypatch):
    """Batches of one shape: the row is rendered once, for the template."""
    B = kafka_builder()
    opts = DumpOptions(deep=True)
    lines = D.BatchLines(NAT, opts)
    batches = [_batch_of(kafka_codec_batch(10 * k, _records(2, k, hostile=False), K.CODEC_NONE, base_ts=B.T0 + k,
                                           max_ts=B.T0 + 5 * k)) for k in range(20)]
    calls = []
    real = ndjson.encode_row_fast
    monkeypatch.setattr(ndjson, "encode_row_fast", lambda row: calls.append(row.get("kind")) or real(row))
    for b in batches:
        job = lines.prepare(b)
        assert job is not None and job[1] == real(D.batch_row(b)) + b"\n"
    assert calls.count("batch") <= 2     # the template, and its check


@needs_native
def test_lanes_keep_a_bounded_window(monkeypatch, generated):
    """At most LANE_AHEAD groups per lane are in flight at once."""
    from concurrent.futures import ThreadPoolExecutor

    from mqtool.options import ScanStats

    monkeypatch.setattr(D, "GROUP_BATCHES", 1)
    monkeypatch.setattr(D, "GROUP_BYTES", 1)          # lanes start only for a file of more than one group's bytes
    live, peak = [0], [0]
    lock = threading.Lock()
    submit = ThreadPoolExecutor.submit

    def done(_fut):
        with lock:
            live[0] -= 1

    def counted(ex, fn, *a):
        with lock:
            live[0] += 1
            peak[0] = max(peak[0], live[0])
        fut = submit(ex, fn, *a)
        fut.add_done_callback(done)     # made by its lane, or taken back by the scanning thread
        return fut

    monkeypatch.setattr(ThreadPoolExecutor, "submit", counted)
    log = generated / "mix-0" / "00000000000000000000.log"
    rows = list(D.log_rows(log, DumpOptions(deep=True, ndjson=True, jobs=2), ScanStats(), "mix"))
    assert any(type(r) is ndjson.CleanLines for r in rows)
    assert 1 < peak[0] <= D.LANE_AHEAD * 2 + 1          # (+1: a group is submitted before the oldest is handed on)


@needs_native
def test_groups_no_lane_starts_are_made_by_the_scanning_thread(monkeypatch, generated):
    """A group still queued when the scanning thread needs it is taken back (its Future cancelled) and made by that
    thread: with lanes that never start anything, every group is made there, and the rows are those of --jobs 1."""
    from concurrent.futures import Future, ThreadPoolExecutor

    from mqtool.options import ScanStats

    def text(rows) -> bytes:
        return b"".join(bytes(r) if isinstance(r, bytes) else (r if isinstance(r, str) else ndjson.dumps(r)).encode()
                        + b"\n" for r in rows)

    log = generated / "mix-0" / "00000000000000000000.log"
    want = text(D.log_rows(log, DumpOptions(deep=True, ndjson=True, jobs=1), ScanStats(), "mix"))
    queued: list = []

    def never_started(ex, fn, *a):
        queued.append(Future())
        return queued[-1]

    def give_up():                      # (without the taking back, waiting for such a group would never end)
        for f in queued:
            if f.set_running_or_notify_cancel():
                f.set_exception(TimeoutError("a group no lane started was waited for"))

    monkeypatch.setattr(ThreadPoolExecutor, "submit", never_started)
    monkeypatch.setattr(D, "GROUP_BYTES", 1)          # lanes start only for a file of more than one group's bytes
    timer = threading.Timer(60, give_up)
    timer.start()
    try:
        got = text(D.log_rows(log, DumpOptions(deep=True, ndjson=True, jobs=2), ScanStats(), "mix"))
    finally:
        timer.cancel()
    assert len(queued) > 1 and all(f.cancelled() for f in queued)
    assert got == want and b'"kind":"record"' in got


def test_isal_gzip_is_used_and_equals_zlib(monkeypatch):
    """With the ``fast`` extra, gzip batches inflate through ISA-L (not the zlib fallback), to zlib's bytes."""
    import gzip
    import random
    import zlib

    isal_zlib = pytest.importorskip("isal.isal_zlib")
    from mqtool import codecs as C

    C._load()
    assert C._fast_zlib is isal_zlib
    rnd = random.Random(5)
    texts = [b"", b"x", bytes(rnd.getrandbits(8) for _ in range(70_000)), b"abc" * 300_000,
             json.dumps([{"k": i, "v": "w" * (i % 50)} for i in range(5000)]).encode()]
    blobs = [gzip.compress(t, compresslevel=lvl, mtime=0) for t in texts for lvl in (1, 6, 9)]
    blobs += [blobs[2] + blobs[5], blobs[8] + bytes(16)]                          # two members; zero padding
    want = [zlib.decompressobj(zlib.MAX_WBITS | 32).decompress(b) for b in blobs[:-2]]
    want += [texts[0] + texts[1], texts[2]]
    careful = C._gunzip_careful

    def no_fallback(*a):
        raise AssertionError("the zlib fallback ran for a clean stream")

    monkeypatch.setattr(C, "_gunzip_careful", no_fallback)
    for blob, w in zip(blobs, want):
        assert C.gunzip(blob, 1 << 24) == w == careful(blob, 1 << 24)


_CUT_IN_A_LANE = r"""
import os, sys, threading
from mqtool import io
from mqtool.kafka import dump as D
io.READ_WHOLE_LIMIT = 0                      # map every file, as files > 16 MiB are
run, calls, lock = D.BatchLines.run_group, [0], threading.Lock()
def cutting(self, group):
    with lock:
        calls[0] += 1
        if calls[0] == 2:                    # a lane cuts the file at the first batch of the group it decodes
            os.truncate(group[0][0].file, group[0][0].position)
    return run(self, group)
D.BatchLines.run_group = cutting
from mqtool.cli import main
main(sys.argv[1:])
"""


@needs_native
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_file_cut_while_lanes_read_it(bench_store, tmp_path, jobs):
    """Truncated while the lanes decode ahead: a file-changed note and exit 1, no SIGBUS, no traceback."""
    import shutil

    store = shutil.copytree(bench_store, tmp_path / "store")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MQTOOL_NATIVE": "1"}
    r = subprocess.run([sys.executable, "-c", _CUT_IN_A_LANE, "dump", "kafka", str(store / "bench-0"), "--deep",
                        "--json", "--jobs", jobs], capture_output=True, text=True, timeout=300, cwd=ROOT, env=env)
    assert r.returncode == 1, (r.returncode, r.stderr[-2000:])
    assert "Traceback" not in r.stderr and "file-changed" in r.stderr, r.stderr[-2000:]
    assert r.stdout.count('"kind":"record"') > 1000


def test_deep_dump_leaves_construct_unloaded():
    """``dump kafka --deep --json`` of the fixture starts without construct (issue #20, start-up): its structs and
    the record layout come from the schema cache (whose values tests/test_common_architecture.py checks against
    the schemas); --print-data loads it for the internal topics' decoders."""
    code = ("import runpy, sys\n"
            "sys.argv = ['mqtool', 'dump', 'kafka', sys.argv[1], '--deep', '--json']\n"
            "try:\n"
            "    runpy.run_module('mqtool', run_name='__main__')\n"
            "except SystemExit as e:\n"
            "    assert e.code in (0, 1), e.code\n"
            "print('construct' in sys.modules, file=sys.stderr)\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("MQTOOL_CHECK_CODES", None)
    r = subprocess.run([sys.executable, "-c", code, str(FIXTURES / "kafka" / "logdir")], capture_output=True,
                       text=True, cwd=ROOT, env=env, timeout=120)
    assert '"kind":"record"' in r.stdout, r.stderr[-2000:]
    assert r.stderr.strip().splitlines()[-1] == "False", r.stderr[-2000:]
