"""Hostile Kafka input (issue 16): memory bounded under inflation, caps reported as findings, no traceback on
crafted offsets, counts and index positions.

Inputs are built here from the construct schemas (fixtures/build_kafka.py); the expected values are hand-derived
from how the bytes were built (record counts, offsets, positions). Small variants run in-process with the caps
lowered (``MQTOOL_KAFKA_MAX_*``); one full-size input per kind runs the CLI in a subprocess under an address-space
limit and checks its peak RSS.
"""
from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
import zstandard

from conftest import ROOT
from builders import kafka_builder
from formats import kafka as K
from mqtool.kafka import records as R
from mqtool.kafka import scan as S

batch_v2, record = kafka_builder().batch_v2, kafka_builder().record

MiB = 1 << 20
SEG0 = "00000000000000000000"
RSS_LIMIT_KB = 300 * 1024          # the promise: peak RSS under 300 MB for any input
AS_LIMIT = 1536 * MiB              # address space for the subprocess (a 4-8 GB blow-up dies early)


# ---- builders -----------------------------------------------------------------------------------

def _zz(v: int) -> bytes:
    """Zigzag varint, as K.Record encodes lengths and deltas."""
    v = (v << 1) ^ (v >> 63)
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def v2_batch(area: bytes, count: int, codec: int, base: int = 0, last_delta: int = 0) -> bytes:
    """A v2 batch around an already encoded (compressed) records area, with a valid CRC."""
    return kafka_builder().frame_v2(base, area, count, base_ts=0, max_ts=0, codec=codec, last_delta=last_delta)


def zstd_stream(pieces) -> bytes:
    c = zstandard.ZstdCompressor(level=3).compressobj()
    return b"".join([c.compress(p) for p in pieces] + [c.flush()])


def repeated(piece: bytes, n: int):
    """``piece * n`` in ~1 MiB pieces (never the whole thing in memory)."""
    per = max(1, MiB // len(piece))
    block = piece * per
    while n:
        k = min(per, n)
        yield block if k == per else piece * k
        n -= k


# the smallest record: length 6, attributes 0, timestampDelta 0, offsetDelta 0, null key, null value, no headers
TINY = record(0, 0, None, None)
assert TINY == b"\x0c\x00\x00\x00\x01\x01\x00"


def many_records(n: int) -> bytes:
    """One zstd batch claiming and holding ``n`` seven-byte records (lastOffsetDelta n-1)."""
    return v2_batch(zstd_stream(repeated(TINY, n)), n, K.CODEC_ZSTD, last_delta=n - 1)


def many_headers(n: int) -> bytes:
    """One zstd batch of one record with ``n`` headers (empty key, null value: 2 bytes each)."""
    body = b"\x00" + _zz(0) + _zz(0) + _zz(-1) + _zz(-1) + _zz(n)
    head = _zz(len(body) + 2 * n) + body
    return v2_batch(zstd_stream([head, *repeated(b"\x00\x01", n)]), 1, K.CODEC_ZSTD)


def big_values(n: int, size: int) -> bytes:
    """One zstd batch of ``n`` records with ``size``-byte values and offsets 0..n-1 (under every cap)."""
    val = b"v" * size
    recs = (record(i, 0, None, val) for i in range(n))
    return v2_batch(zstd_stream(recs), n, K.CODEC_ZSTD, last_delta=n - 1)


def legacy_inner_v0(offset: int) -> bytes:
    return kafka_builder().legacy_message(offset, None, None, magic=0)


def legacy_gzip_wrapper(n: int) -> bytes:
    """A magic-0 gzip wrapper at offset 0 holding ``n`` identical 26-byte inner messages (offset 0)."""
    c = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    value = b"".join([c.compress(p) for p in repeated(legacy_inner_v0(0), n)] + [c.flush()])
    return kafka_builder().legacy_message(0, None, value, magic=0, attributes=K.CODEC_GZIP)


def logdir(tmp_path: Path, log: bytes, name: str = SEG0, index: bytes | None = None) -> Path:
    part = tmp_path / "logs" / "t-0"
    part.mkdir(parents=True, exist_ok=True)
    (part / f"{name}.log").write_bytes(log)
    if index is not None:
        (part / f"{name}.index").write_bytes(index)
    return tmp_path / "logs"


def ndjson(out: str) -> list[dict]:
    return [json.loads(x) for x in out.splitlines() if x.strip()]


# The process's own peak RSS in KiB (VmHWM), not ru_maxrss: Linux carries ru_maxrss over execve, so a child of
# a big pytest process would report pytest's size.
PEAK_RSS = "int(next(x for x in open('/proc/self/status') if x.startswith('VmHWM:')).split()[1])"


def no_traceback(err: str):
    assert "Traceback" not in err and "MemoryError" not in err and "Error:" not in err.replace("mqtool: ", ""), err


@pytest.fixture
def caps(monkeypatch):
    def set_caps(records=None, headers=None):
        if records is not None:
            monkeypatch.setenv("MQTOOL_KAFKA_MAX_BATCH_RECORDS", str(records))
        if headers is not None:
            monkeypatch.setenv("MQTOOL_KAFKA_MAX_RECORD_HEADERS", str(headers))
    return set_caps


# ---- the decoder itself -------------------------------------------------------------------------

@pytest.mark.parametrize("impl", ["python", "native"])
def test_records_stream_in_bounded_groups(tmp_path, monkeypatch, impl):
    """More records than one group, over several decompressed chunks (an area above the 4 MiB read whole):
    every record, in order, none lost at a chunk or group boundary (400-byte values straddle the chunks)."""
    if impl == "python":
        monkeypatch.setenv("MQTOOL_NATIVE", "0")
    elif R._load_native() is None:
        pytest.skip("compiled kafka helper not built")
    n = 3 * R._GROUP + 17
    raw = big_values(n, 400)
    b = next(S.scan(raw, "x.log"))
    assert len(R.records_area(b)) > R._WHOLE_BYTES
    got = [(r.offset, len(r.value)) for r in R.iter_records(b)]
    assert got == [(i, 400) for i in range(n)]


def test_record_cap_in_python_and_native_agree(monkeypatch, caps):
    caps(records=5)
    b = next(S.scan(many_records(12), "x.log"))
    with pytest.raises(R.LimitExceeded) as e:
        list(R.iter_records(b))
    assert e.value.code == "batch-records-limit"
    seen = []
    with pytest.raises(R.LimitExceeded):
        for r in R.iter_records(b):
            seen.append(r.offset)
    assert seen == [0] * 5                      # the first 5 (all offsetDelta 0), then the finding


def test_header_cap_python_and_native(monkeypatch, caps):
    caps(headers=100)
    b = next(S.scan(many_headers(101), "x.log"))
    for on in ("1", "0"):
        monkeypatch.setenv("MQTOOL_NATIVE", on)
        with pytest.raises(R.LimitExceeded) as e:
            list(R.iter_records(b))
        assert e.value.code == "record-headers-limit" and "101 headers" in str(e.value)
    b = next(S.scan(many_headers(100), "x.log"))            # at the cap: read
    assert len(next(R.iter_records(b)).headers) == 100


def test_native_declines_oversized_calls():
    nat = R._load_native()
    if nat is None:
        pytest.skip("compiled kafka helper not built")
    area = TINY * 70000
    assert nat.parse_records(area, 70000) is None            # more than one call may build
    assert nat.parse_records(TINY * 10, 10)[1] == 70
    hdr = many_headers(3)
    b = next(S.scan(hdr, "x.log"))
    data = R.records_area(b)
    assert nat.parse_records(data, 1, 2) is None             # above max_headers: declined to Python
    assert len(nat.parse_records(data, 1, 3)[0][0][6]) == 3


# ---- CLI: small variants, in-process ------------------------------------------------------------

def test_many_records_small_all_verbs(tmp_path, run_cli, caps):
    caps(records=1000)
    store = logdir(tmp_path, many_records(5000))
    code, out, err = run_cli("verify", "store", store, "--deep", "--json")
    no_traceback(err)
    rows = ndjson(out)
    lim = [r for r in rows if r.get("code") == "kafka.batch-records-limit"]
    assert [(r["severity"], r["position"], r["file"].endswith(f"{SEG0}.log")) for r in lim] == [("warning", 0, True)]
    assert rows[-1]["records"] == 1000
    verify_messages = rows[-1]["messages"]
    code, out, err = run_cli("dump", "kafka", store, "--deep", "--json")
    no_traceback(err)
    rows = ndjson(out)
    assert code == 1
    assert sum(r["kind"] == "record" for r in rows) == 1000
    assert [r["damage"] for r in rows if r["kind"] == "damage"] == ["batch-records-limit"]
    code, out, err = run_cli("query", store, "--offset", "5")
    no_traceback(err)
    assert code == 1 and "batch-records-limit" not in out
    assert "more than 1000 records" in err
    code, out, err = run_cli("info", store, "--json")
    no_traceback(err)
    # a cap of the reader is no damage (verify: a warning): info counts the batch's records by its header, as
    # verify does, and says it did not read them all (it was damage, and exit 1, where verify saw none)
    got = json.loads(out)
    assert code == 0 and got["family"] == "kafka" and got["damage_total"] == 0
    assert got["messages"] == verify_messages
    assert any("batch-records-limit" in n and "more than 1000 records" in n for n in got["notes"]), got["notes"]


def test_many_headers_small(tmp_path, run_cli, caps):
    caps(headers=64)
    store = logdir(tmp_path, many_headers(1000))
    code, out, err = run_cli("verify", "store", store, "--deep", "--json")
    no_traceback(err)
    lim = [r for r in ndjson(out) if r.get("code") == "kafka.record-headers-limit"]
    assert [(r["severity"], r["position"]) for r in lim] == [("warning", 0)]
    for args in (("--deep",), ("--print-data",)):
        code, out, err = run_cli("dump", "kafka", store, *args, "--json")
        no_traceback(err)
        assert [r["damage"] for r in ndjson(out) if r["kind"] == "damage"] == ["record-headers-limit"]


def test_legacy_wrapper_small(tmp_path, run_cli, caps):
    caps(records=100)
    store = logdir(tmp_path, legacy_gzip_wrapper(1000))
    code, out, err = run_cli("verify", "store", store, "--deep", "--json")
    no_traceback(err)
    lim = [r for r in ndjson(out) if r.get("code") == "kafka.batch-records-limit"]
    assert [(r["severity"], r["position"]) for r in lim] == [("warning", 0)]      # once, with the batch
    caps(records=2000)
    code, out, err = run_cli("dump", "kafka", store, "--deep", "--json")
    no_traceback(err)
    rows = ndjson(out)
    assert sum(r["kind"] == "record" for r in rows) == 1000 and not [r for r in rows if r["kind"] == "damage"]
    assert [r["count"] for r in rows if r["kind"] == "batch"] == [1000]


# ---- crafted offsets, counts, index positions, lengths (no traceback) ----------------------------

def test_rebuild_index_offset_beyond_32_bits(tmp_path, run_cli):
    """Segment 0 with a batch at base offset 2^32: no index entry can hold it (relative offset > 2^31-1)."""
    big = 1 << 32
    log = b"".join(batch_v2(big + i, [record(0, 0, b"k", b"v" * 200)], base_ts=1, max_ts=1) for i in range(40))
    store = logdir(tmp_path, log)
    code, out, err = run_cli("rebuild-index", store, "--out", tmp_path / "out", "--json")
    no_traceback(err)
    rows = ndjson(out)
    over = [r for r in rows if r.get("code") == "kafka.rebuild-offset-overflow"]
    assert over and all(r["file"].endswith(f"{SEG0}.log") and r["offset"] >= big for r in over)
    idx = tmp_path / "out" / "logs" / "t-0" / f"{SEG0}.index"
    assert idx.read_bytes() == b""                     # nothing that would wrap around


def test_query_count_larger_than_records(tmp_path, run_cli):
    """recordsCount says 2, the area holds 1 record: offset 0 is readable and shown; asking for offset 1 is one
    damage line on stderr and exit 1 (was an IndexError traceback)."""
    area = record(0, 0, b"k", b"v")
    store = logdir(tmp_path, v2_batch(area, 2, K.CODEC_NONE, last_delta=1))
    code, out, err = run_cli("query", store, "--offset", "0", "--json")
    no_traceback(err)
    assert code == 0 and [(r["offset"], r["key"]) for r in ndjson(out)] == [(0, "k")]
    code, out, err = run_cli("query", store, "--offset", "1")
    no_traceback(err)
    assert code == 1 and "records area ends inside record 1 of 2" in err


@pytest.mark.parametrize("pos", [-4096, 1 << 30, 7])
def test_query_index_position_outside_log(tmp_path, run_cli, pos):
    """An .index entry at a negative, past-the-end or mid-batch position: the scan starts from 0 instead."""
    log = b"".join(batch_v2(i, [record(0, 0, b"k%d" % i, b"v")], base_ts=1, max_ts=1) for i in range(10))
    index = struct.pack(">ii", 3, pos)
    store = logdir(tmp_path, log, index=index)
    code, out, err = run_cli("query", store, "--offset", "5", "--json")
    no_traceback(err)
    assert code == 0
    assert [(r["offset"], r["key"]) for r in ndjson(out)] == [(5, "k5")]


def test_only_batch_claims_2gib(tmp_path, run_cli):
    """The partition's only batch claims length 2^31-1: nothing readable, an error naming file and position."""
    raw = bytearray(batch_v2(0, [record(0, 0, b"k", b"v")], base_ts=1, max_ts=1))
    raw[8:12] = struct.pack(">i", 0x7FFFFFFF)
    store = logdir(tmp_path, bytes(raw) + bytes(32 * 1024 - len(raw)).replace(b"\x00", b"\x01"))
    code, out, err = run_cli("verify", "store", store, "--json")
    no_traceback(err)
    rows = ndjson(out)
    assert code == 1 and rows[-1]["verdict"] == "damaged"
    bad = [r for r in rows if r.get("code") == "kafka.no-readable-batch"]
    assert [(r["severity"], r["position"], Path(r["file"]).name) for r in bad] == [("error", 0, f"{SEG0}.log")]


# ---- full size, in a subprocess under a memory limit ----------------------------------------------

def _run_limited(args, env_extra=None, timeout=120):
    """Run the CLI in a child with RLIMIT_AS; returns (code, stdout, stderr, peak RSS of the child in KB)."""
    code = (
        "import resource, sys\n"
        f"resource.setrlimit(resource.RLIMIT_AS, ({AS_LIMIT}, {AS_LIMIT}))\n"
        "from mqtool.cli import main\n"
        "try:\n"
        "    main(sys.argv[1:])\n"
        "finally:\n"
        "    sys.stdout.flush()\n"
        f"    sys.stderr.write('\\nRSS %d\\n' % {PEAK_RSS})\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT), NO_COLOR="1", **(env_extra or {}))
    p = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True,
                       env=env, timeout=timeout, cwd=ROOT)
    tail = p.stderr.rstrip().rsplit("\n", 1)
    rss = int(tail[-1].split()[1]) if tail[-1].startswith("RSS ") else None
    return p.returncode, p.stdout, tail[0] if len(tail) > 1 else "", rss


def test_full_size_many_tiny_records(tmp_path):
    """37 M seven-byte records in one zstd batch (247 MiB inflated, under the 256 MiB cap) in a 32 KB-class
    segment: streamed, stopped at the default record cap with a finding; bounded RSS."""
    n = 37_000_000
    raw = many_records(n)
    assert len(raw) < 64 * 1024
    store = logdir(tmp_path, raw)
    code, out, err, rss = _run_limited(["query", store, "--offset", "5"])
    no_traceback(err)
    assert code == 1 and f"more than {R.MAX_BATCH_RECORDS} records" in err
    assert rss is not None and rss < RSS_LIMIT_KB, rss


def test_full_size_big_area_under_the_caps(tmp_path):
    """A batch that inflates to ~250 MiB of 1 KiB-valued records, within every cap: all read, streamed."""
    n = 250_000
    store = logdir(tmp_path, big_values(n, 1024))
    code, out, err, rss = _run_limited(["verify", "store", store, "--deep", "--json"])
    no_traceback(err)
    summary = ndjson(out)[-1]
    assert summary["records"] == n and summary["errors"] == 0
    assert rss is not None and rss < RSS_LIMIT_KB, rss


def test_full_size_many_headers(tmp_path):
    """One record with 104 M headers (208 MB inflated): the cap stops it as soon as the count is read."""
    store = logdir(tmp_path, many_headers(104_000_000))
    code, out, err, rss = _run_limited(["dump", "kafka", store, "--print-data", "--json"])
    no_traceback(err)
    assert code == 1
    assert [r["damage"] for r in ndjson(out) if r["kind"] == "damage"] == ["record-headers-limit"]
    assert rss is not None and rss < RSS_LIMIT_KB, rss


def test_full_size_legacy_wrapper(tmp_path):
    """A gzip wrapper of 10 M inner messages (260 MB inflated): counted as a stream, capped with a finding."""
    store = logdir(tmp_path, legacy_gzip_wrapper(10_000_000))
    code, out, err, rss = _run_limited(["verify", "store", store, "--json"])
    no_traceback(err)
    rows = ndjson(out)
    assert [r["severity"] for r in rows if r.get("code") == "kafka.batch-records-limit"] == ["warning"]
    assert rss is not None and rss < RSS_LIMIT_KB, rss


@pytest.mark.parametrize("jobs", [[], ["--jobs", "2", "--split-size", "1K"]], ids=["auto", "jobs2"])
def test_full_size_rocketmq_compressed_bodies_as_text(tmp_path, jobs):
    """RocketMQ `dump --body text` over 4 zlib bodies of 60 MiB each: one body's line at a time is held, so
    the peak does not grow with the number of bodies (it did: the writer batched 32 lines whatever their size)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from formats import rocketmq as F
    from builders import rocketmq_unit as unit

    body = zlib.compress(b"a" * (60 * MiB), 9)
    data = bytearray()
    for i in range(4):
        data += unit(body=body, phys=len(data), queue_offset=i, sysflag=F.COMPRESSED_FLAG)
    (tmp_path / "store" / "commitlog").mkdir(parents=True)
    (tmp_path / "store" / "commitlog" / SEG0).write_bytes(bytes(data))
    out = tmp_path / "out.ndjson"
    code = ("import resource, sys\n"
            f"resource.setrlimit(resource.RLIMIT_AS, ({AS_LIMIT}, {AS_LIMIT}))\n"
            "from mqtool.cli import main\n"
            "try:\n"
            "    main(sys.argv[1:])\n"
            "finally:\n"
            f"    sys.stderr.write('\\nRSS %d\\n' % max({PEAK_RSS},\n"
            "                                             resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))\n")
    with open(out, "wb") as fh:
        p = subprocess.run([sys.executable, "-c", code, "dump", "commitlog", str(tmp_path / "store"), "--body",
                            "text", "--json", *jobs], stdout=fh, stderr=subprocess.PIPE, text=True, timeout=120,
                           env=dict(os.environ, PYTHONPATH=str(ROOT)), cwd=ROOT)
    no_traceback(p.stderr)
    assert p.returncode == 0
    rss = int(p.stderr.rstrip().rsplit("\n", 1)[-1].split()[1])
    assert rss < RSS_LIMIT_KB, rss
    with open(out, "rb") as fh:
        lines = [len(line) for line in fh]
    assert len(lines) == 4 and all(n > 60 * MiB for n in lines)


def test_rows_with_bodies_are_made_in_one_process():
    """--body / --print-data rows are never gathered per range by pool workers (a range of inflated bodies
    would be unbounded): they stream from this process whatever --jobs says; a Spark runner is exempt."""
    from mqtool.options import DumpOptions
    from mqtool.ranges import rows_stay_in_one_process

    assert rows_stay_in_one_process(DumpOptions(body="text", jobs=2))
    assert rows_stay_in_one_process(DumpOptions(print_data=True, jobs=2))
    assert not rows_stay_in_one_process(DumpOptions(jobs=2))
    assert not rows_stay_in_one_process(DumpOptions(body="text", jobs=2, runner=object()))


# ---- .index / .timeindex preallocated far past 64 MiB: read up to their entries (helper "kafka", session 10) ----

def _indexed_partition(tmp_path):
    """One segment of five equal v2 batches of three records, each over index.interval.bytes (4096) long, and
    the recovery rule's .index by hand: Kafka appends (batch lastOffset - base, position) once more than the
    interval has gone by since the last entry, i.e. before every batch but the first: entries for batches 1..4
    at relative offset 3k+2, position k * batch size. Returns (partition dir, entries)."""
    from builders import kafka_batch, kafka_index_entries

    batches = [kafka_batch(3 * k, 3, pad=1500) for k in range(5)]
    size = len(batches[0])
    assert all(len(b) == size for b in batches) and size > 4096
    entries = [(3 * k + 2, k * size) for k in range(1, 5)]
    part = tmp_path / "logs" / "t-0"
    part.mkdir(parents=True)
    (part / f"{SEG0}.log").write_bytes(b"".join(batches))
    (part / f"{SEG0}.index").write_bytes(kafka_index_entries(entries))
    return part, entries


def test_preallocated_index_past_the_cap_is_read(tmp_path, run_cli):
    """A live segment's .index preallocated to 100 MiB (segment.index.bytes set large; sparse, zero after the
    entries): it was refused whole ('larger than 67108864 bytes', file-unreadable), though Kafka writes exactly
    that. Now its entries are read up to Kafka's end-of-data rule and the zero tail is an index-preallocated
    note; dump gives the hand-computed entries."""
    part, entries = _indexed_partition(tmp_path)
    idx = part / f"{SEG0}.index"
    with open(idx, "r+b") as f:
        f.truncate(100 * MiB)
    code, out, err = run_cli("dump", "kafka", idx, "--json")
    assert code == 0, err
    got = [(r["relative_offset"], r["log_position"]) for r in ndjson(out) if r["kind"] == "index_entry"]
    assert got == entries
    code, out, err = run_cli("verify", "store", part.parent, "--json")
    fs = [r for r in ndjson(out) if r["kind"] == "finding"]
    assert code == 0 and not [f for f in fs if f["severity"] == "error"], out
    pre = [f for f in fs if f["code"] == "kafka.index-preallocated"]
    assert len(pre) == 1 and pre[0]["position"] == 8 * len(entries)
    assert f"{len(entries)} entries then {100 * MiB - 8 * len(entries)} zero bytes" in pre[0]["message"]
    # rebuild-index --compare: the rebuild's entries, padded with zeros on disk
    code, out, err = run_cli("rebuild-index", part.parent, "--compare", "--json")
    cmp = {r["code"]: r for r in ndjson(out) if r.get("file", "").endswith(".index")}
    assert "kafka.rebuild-identical-but-preallocated" in cmp, out
    assert f"padded with {100 * MiB - 8 * len(entries)} zero bytes" in cmp["kafka.rebuild-identical-but-preallocated"][
        "message"]


def test_hostile_sparse_index_with_garbage_at_its_end_costs_bounded_memory(tmp_path):
    """The same index grown (sparse) to 1.5 GB with one non-zero byte at its very end: entries up to the first
    zero slot, then 1.5 GB that is not all zero (index-garbage-tail), the holes skipped unread: bounded RSS and
    time, under an address-space limit smaller than the file (nothing maps it)."""
    part, entries = _indexed_partition(tmp_path)
    idx = part / f"{SEG0}.index"
    size = 1_500_000_000
    with open(idx, "r+b") as f:
        f.truncate(size)
        f.seek(size - 1)
        f.write(b"\x01")
    code, out, err, rss = _run_limited(["verify", "store", part.parent, "--json"], timeout=60)
    no_traceback(err)
    fs = [r for r in ndjson(out) if r["kind"] == "finding"]
    tail = [f for f in fs if f["code"] == "kafka.index-garbage-tail"]
    assert code == 1 and len(tail) == 1 and tail[0]["position"] == 8 * len(entries), out[-800:]
    assert tail[0]["message"].startswith(f"{size - 8 * len(entries)} ")
    assert not [f for f in fs if f["code"] == "kafka.file-unreadable"]
    assert rss < RSS_LIMIT_KB, rss


def test_index_entries_past_the_cap_are_refused(tmp_path, monkeypatch):
    """Entries (not a zero tail) past MAX_INDEX_ENTRY_BYTES: a file-unreadable finding naming the file, as a
    hostile size was before; the cap lowered to 16 bytes here, the index holding 4 entries (32 bytes)."""
    from mqtool.kafka import indexfiles as F
    from mqtool.kafka import ops
    from mqtool.options import VerifyOptions

    part, entries = _indexed_partition(tmp_path)
    monkeypatch.setattr(F, "MAX_INDEX_ENTRY_BYTES", 16)
    with pytest.raises(Exception) as e:
        F.read_offset_index(part / f"{SEG0}.index")
    assert type(e.value).__name__ == "InputError" and e.value.offset == 16
    findings, _ = ops.verify("store", str(part.parent), VerifyOptions(progress=False))
    bad = [f for f in findings if f.code == "kafka.file-unreadable"]
    assert [Path(f.file).name for f in bad] == [f"{SEG0}.index"]


def test_a_full_index_of_real_looking_entries_costs_its_bytes_not_a_tuple_each(tmp_path):
    """An .index that is all entries up to the cap (64 MiB: 8 Mi increasing entries, no zero tail): kept as
    their bytes (indexfiles.Entries) and searched in place, a query's peak RSS stays under the promise; as a
    list of tuples (and a list of offsets for the search) it was over 1 GB."""
    from array import array

    from mqtool.kafka import indexfiles as F

    part, _entries = _indexed_partition(tmp_path)
    n = F.MAX_INDEX_ENTRY_BYTES // 8
    cells = array("i", bytes(8 * n))
    cells[0::2] = array("i", range(1, n + 1))            # relative offsets 1..n, every position 0
    if sys.byteorder == "little":
        cells.byteswap()
    (part / f"{SEG0}.index").write_bytes(cells.tobytes())
    code, out, err, rss = _run_limited(["query", part.parent, "--offset", "7", "--json"], timeout=120)
    no_traceback(err)
    assert code == 0 and [r["offset"] for r in ndjson(out) if r.get("kind") != "summary"][:1] == [7], err[-800:]
    assert rss < RSS_LIMIT_KB, rss
    ix = F.read_offset_index(part / f"{SEG0}.index")
    assert len(ix.entries) == n and ix.entries[0] == (1, 0) and ix.entries[-1] == (n, 0) and ix.zero_tail == 0
