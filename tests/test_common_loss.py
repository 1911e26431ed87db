"""Issue #15: verify and dump never hide loss — bodies that do not inflate, checkpoint garbage, missing middle
segments, orphan index files, CRC-failed rows, and one --salvage-out rule for every family.

Every store here is a damaged copy (in tmp_path) of a fixture or of a real store; the expected finding comes
from the damage the test made (file, position), not from our own output.
"""
from __future__ import annotations

import json
import shutil
import struct
import zlib
from pathlib import Path

import pytest

from conftest import FIXTURES, require_realdata
from formats import rocketmq as F
from mqtool.options import VerifyOptions
from mqtool.rocketmq.store import open_store
from mqtool.rocketmq.records import Message
from mqtool.rocketmq.scan import scan_store_segments
from mqtool.rocketmq.verify import verify_store


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    for p in dst.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    return dst


def _run_verify(path, part="store", **kw):
    findings, summary_fn = verify_store(open_store(path), part, VerifyOptions(progress=False, **kw))
    found = list(findings)
    return found, summary_fn()


def _ndjson(text: str) -> list[dict]:
    return [json.loads(x) for x in text.splitlines() if x.strip()]


# ---- RocketMQ: compressed bodies are inflated by verify ------------------------------------------------

def _compressed(store) -> list[Message]:
    return [m for m in scan_store_segments(open_store(store).segments)
            if isinstance(m, Message) and m.sys_flag & F.COMPRESSED_FLAG]


def _garble_body(m: Message) -> None:
    """Overwrite the stored body with bytes no codec inflates and store the CRC of those bytes, so the CRC
    check alone would call the message sound."""
    garbage = bytes([0xA5]) * m.body_len
    with open(m.file, "r+b") as f:
        f.seek(m.body_start)
        f.write(garbage)
        f.seek(m.position + 8)                 # TOTALSIZE, MAGICCODE, then BODYCRC (reference §1)
        f.write(struct.pack(">i", zlib.crc32(garbage) & 0x7FFFFFFF))


def test_fixture_has_every_rocketmq_codec_and_all_inflate(lane_impl):
    store = FIXTURES / "rocketmq" / "store"
    codecs_seen = {m.compression for m in _compressed(store)}
    assert {"zlib", "lz4", "zstd"} <= codecs_seen
    found, s = _run_verify(store)
    assert not [f for f in found if f.code == "body-inflate-failed"]
    assert s.errors == 0


@pytest.mark.parametrize("codec", ["zlib", "lz4", "zstd"])
@pytest.mark.parametrize("jobs", [1, 2])
def test_body_that_does_not_inflate_is_an_error_at_its_offset(tmp_path, codec, jobs, lane_impl):
    store = _copy(FIXTURES / "rocketmq" / "store", tmp_path / "store")
    victim = next(m for m in _compressed(store) if m.compression == codec)
    _garble_body(victim)
    found, s = _run_verify(store, jobs=jobs, split_size=4096)
    bad = [f for f in found if f.code == "body-inflate-failed"]
    assert [(Path(f.file).name, f.position, f.offset, f.severity) for f in bad] == \
        [(Path(victim.file).name, victim.position, victim.offset, "error")]
    assert not [f for f in found if f.code == "crc-mismatch"]       # the CRC matches the garbage
    assert s.verdict == "damaged"


def test_dump_exits_1_on_body_error_and_on_crc_mismatch(tmp_path, run_cli):
    store = _copy(FIXTURES / "rocketmq" / "store", tmp_path / "store")
    code, out, err = run_cli("dump", "commitlog", store, "--body", "text", "--json")
    assert code == 0, err
    victim = next(m for m in _compressed(store) if m.compression == "zstd")
    _garble_body(victim)
    code, out, err = run_cli("dump", "commitlog", store, "--body", "text", "--json")
    rows = [r for r in _ndjson(out) if r.get("position") == victim.position and r["file"] == victim.file]
    assert rows and rows[0]["body_error"]
    assert code == 1 and str(victim.position) in err
    # without bodies the row is sound (CRC over the stored bytes matches): exit 0
    code, out, err = run_cli("dump", "commitlog", store, "--json")
    assert code == 0, err

    store2 = _copy(FIXTURES / "rocketmq" / "store", tmp_path / "store2")
    plain = next(m for m in scan_store_segments(open_store(store2).segments)
                 if isinstance(m, Message) and not m.sys_flag & F.COMPRESSED_FLAG and m.body_len)
    with open(plain.file, "r+b") as f:          # one body byte flipped: the stored CRC no longer matches
        f.seek(plain.body_start)
        b = f.read(1)
        f.seek(plain.body_start)
        f.write(bytes([b[0] ^ 0xFF]))
    for extra in ((), ("--body", "base64")):
        code, out, err = run_cli("dump", "commitlog", store2, "--json", *extra)
        assert [r["position"] for r in _ndjson(out) if r.get("crc_ok") is False] == [plain.position]
        assert code == 1 and str(plain.position) in err, (extra, err)


# ---- Kafka: compressed batch payloads are inflated by verify (without --deep) ---------------------------

def _kafka_batches(log: Path):
    from mqtool.kafka.records import Batch
    from mqtool.kafka.scan import scan

    data = log.read_bytes()
    return [b for b in scan(data, str(log)) if isinstance(b, Batch)]


def _kafka_verify(run_cli, path, *args):
    code, out, err = run_cli("verify", "store", path, "--json", *args)
    rows = _ndjson(out)
    return code, [r for r in rows if r["kind"] == "finding"], rows[-1]


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
@pytest.mark.parametrize("deep", [False, True])
def test_kafka_payload_that_does_not_inflate_is_an_error(tmp_path, run_cli, codec, deep):
    from crc32c import crc32c

    from formats import kafka as K

    logdir = _copy(require_realdata("kafka", "generated-4.0.0-SNAPSHOT", "broker-append"), tmp_path / "evidence")
    log = logdir / "forensics-0" / "00000000000000000037.log"       # v2 batches, every codec (MANIFEST §2)
    victim = next(b for b in _kafka_batches(log) if b.magic == 2 and K.CODEC_NAMES[b.codec] == codec)
    code, before, _ = _kafka_verify(run_cli, logdir)
    assert not [f for f in before if f["code"] == "kafka.payload-inflate-failed"]
    buf = bytearray(log.read_bytes())
    start = victim.position + K.V2_HEADER_SIZE
    buf[start:victim.end] = bytes([0xA5]) * (victim.end - start)
    # CRC32C from the attributes to the end (reference: DefaultRecordBatch), recomputed over the garbage
    struct.pack_into(">I", buf, victim.position + 17, crc32c(bytes(buf[victim.position + 21:victim.end])))
    log.write_bytes(bytes(buf))
    code, found, summary = _kafka_verify(run_cli, logdir, *(["--deep"] if deep else []))
    bad = [f for f in found if f["code"] == "kafka.payload-inflate-failed"]
    assert [(Path(f["file"]).name, f["position"], f["severity"]) for f in bad] == [(log.name, victim.position, "error")]
    assert not [f for f in found if f["code"] == "kafka.crc-mismatch"]
    assert code == 1 and summary["verdict"] == "damaged"


# ---- checkpoints: negative, future, past the end of the log --------------------------------------------

def _data_end(store) -> int:
    """Global offset after the last message (an independent scan, not verify)."""
    return max(m.offset + m.size for m in scan_store_segments(open_store(store).segments) if isinstance(m, Message))


def test_rocketmq_checkpoint_of_garbage_is_not_sound(tmp_path, run_cli):
    store = _copy(FIXTURES / "rocketmq" / "store", tmp_path / "store")
    (store / "checkpoint").write_bytes(b"\xa5" * 40)
    code, out, err = run_cli("verify", "store", store, "--json")
    rows = _ndjson(out)
    neg = [r for r in rows if r.get("code") == "checkpoint-negative"]
    # five int64 fields (reference §7), each 0xA5A5... < 0, at 0, 8, 16, 24, 32
    assert sorted(r["position"] for r in neg) == [0, 8, 16, 24, 32]
    assert {r["severity"] for r in neg} == {"error"}
    assert code == 1 and rows[-1]["verdict"] == "damaged"


def test_rocketmq_checkpoint_future_and_beyond_log_end(tmp_path, run_cli):
    import time

    store = _copy(FIXTURES / "rocketmq" / "store", tmp_path / "store")
    end = _data_end(store)
    now = int(time.time() * 1000)
    ts = 1795338600000 - 10**6                   # a past time: no finding
    (store / "checkpoint").write_bytes(struct.pack(">5q", ts, now + 3 * 86400_000, ts, 0, end + 4096).ljust(4096, b"\0"))
    found, s = _run_verify(store)
    got = {(f.code, f.position, f.severity) for f in found if f.code.startswith("checkpoint-")
           and f.code not in ("checkpoint-behind", "checkpoint-ahead")}
    assert got == {("checkpoint-future", 8, "warning"), ("checkpoint-beyond-log-end", 32, "warning")}
    # at the end exactly: fine
    (store / "checkpoint").write_bytes(struct.pack(">5q", ts, ts, ts, 0, end).ljust(4096, b"\0"))
    found, s = _run_verify(store)
    assert not [f for f in found if f.code in ("checkpoint-future", "checkpoint-beyond-log-end", "checkpoint-negative")]


def test_litemq_checkpoint_values(tmp_path, run_cli):
    import time

    from formats import litemq as L

    store = _copy(require_realdata("litemq", "clean", "data", "broker"), tmp_path / "broker")
    cp = store / "checkpoint" / "checkpoint"
    doc = L.Checkpoint.parse(cp.read_bytes())
    doc.header.lastFlushTime = -1
    doc.header.lastUpdateTime = int(time.time() * 1000) + 3 * 86400_000
    doc.header.commitLogFlushedOffset = sum(p.stat().st_size for p in (store / "commitlog").iterdir()) + 1
    doc.consumers[0].topics[0].queues[0].offset = -7
    cp.write_bytes(L.Checkpoint.build(doc))
    code, out, err = run_cli("verify", "store", store, "--json")
    rows = _ndjson(out)
    got = sorted(((r["code"], r["severity"], r["position"]) for r in rows
                  if r.get("code") in ("checkpoint-negative", "checkpoint-future", "checkpoint-beyond-log-end")),
                 key=str)
    # header: magic 4, version 2, then commitLogFlushedOffset @6 (8), cqFlushedCount @14, consumerOffsetCount @18,
    # lastFlushTime @22 (8), lastUpdateTime @30 (formats/litemq.py, pkg/storage/checkpoint.go)
    assert got == sorted([("checkpoint-beyond-log-end", "warning", 6), ("checkpoint-future", "warning", 30),
                          ("checkpoint-negative", "error", None), ("checkpoint-negative", "error", 22)], key=str)
    assert code == 1


def test_kafka_negative_checkpoint_values(tmp_path, run_cli):
    logdir = _copy(require_realdata("kafka", "generated-4.0.0-SNAPSHOT", "broker-append"), tmp_path / "evidence")
    (logdir / "recovery-point-offset-checkpoint").write_text("0\n1\nforensics 0 -5\n")
    (logdir / "forensics-0" / "leader-epoch-checkpoint").write_text("0\n2\n3 37\n-1 75\n")
    code, found, summary = _kafka_verify(run_cli, logdir)
    neg = sorted(Path(f["file"]).name for f in found if f["code"] == "kafka.checkpoint-negative")
    assert neg == ["leader-epoch-checkpoint", "recovery-point-offset-checkpoint"]
    assert code == 1
    (logdir / "recovery-point-offset-checkpoint").write_text("0\n1\nforensics 0 200\n")    # LEO is 127
    (logdir / "forensics-0" / "leader-epoch-checkpoint").write_text("0\n2\n3 37\n4 75\n")
    code, found, summary = _kafka_verify(run_cli, logdir)
    assert [f["severity"] for f in found if f["code"] == "kafka.checkpoint-beyond-log-end"] == ["warning"]


# ---- a missing middle segment: an error in verify, a note and exit 1 in dump ---------------------------

def test_rocketmq_missing_middle_segment(tmp_path, run_cli):
    store = _copy(FIXTURES / "rocketmq" / "store", tmp_path / "store")
    segs = sorted((store / "commitlog").iterdir())
    victim = segs[1]
    victim.unlink()
    found, s = _run_verify(store)
    miss = [(Path(f.file).name, f.severity, f.expected, f.actual) for f in found if f.code == "segment-missing"]
    size = segs[0].stat().st_size        # names are global offsets: the gap is the lost file's size
    assert miss == [(segs[2].name, "error", int(segs[0].name) + size, int(segs[2].name))]
    for jobs in ("1", "2"):
        code, out, err = run_cli("dump", "commitlog", store, "--json", "-j", jobs, "--split-size", "4K")
        assert code == 1 and "segment-missing" in err and segs[2].name in err, err
        assert _ndjson(out)                      # the rows of the remaining files are still printed


def test_litemq_missing_middle_segment(tmp_path, run_cli):
    store = _copy(require_realdata("litemq", "clean", "data", "broker"), tmp_path / "broker")
    (store / "commitlog" / "00000000000000000001").unlink()
    code, out, err = run_cli("verify", "store", store, "--json")
    miss = [r for r in _ndjson(out) if r.get("code") == "segment-missing"]
    assert [(Path(r["file"]).name, r["severity"]) for r in miss] == [("00000000000000000002", "error")]
    assert code == 1
    for jobs in ("1", "2"):
        code, out, err = run_cli("dump", "commitlog", store, "--json", "-j", jobs)
        assert code == 1 and "segment-missing" in err, err


def _kafka_copy(tmp_path) -> Path:
    return _copy(require_realdata("kafka", "generated-4.0.0-SNAPSHOT", "broker-append"), tmp_path / "evidence")


def test_kafka_missing_middle_log_with_its_index_files_left(tmp_path, run_cli):
    logdir = _kafka_copy(tmp_path)
    part = logdir / "forensics-0"
    (part / "00000000000000000037.log").unlink()         # segment 37 holds offsets 37..79 (MANIFEST §2)
    code, found, summary = _kafka_verify(run_cli, logdir)
    got = {(f["code"], Path(f["file"]).name, f["severity"]) for f in found
           if f["code"] in ("kafka.segment-gap", "kafka.segment-log-missing", "kafka.snapshot-stray")}
    assert got == {("kafka.segment-gap", "00000000000000000080.log", "error"),
                   ("kafka.segment-log-missing", "00000000000000000037.index", "error"),
                   ("kafka.snapshot-stray", "00000000000000000037.snapshot", "warning")}
    assert code == 1
    for jobs in ("1", "2"):
        code, out, err = run_cli("dump", "kafka", logdir, "--json", "-j", jobs)
        assert code == 1 and "segment-log-missing" in err and "offsets 37..79" in err, err


def test_kafka_missing_middle_segment_all_files(tmp_path, run_cli):
    logdir = _kafka_copy(tmp_path)
    for f in (logdir / "forensics-0").glob("00000000000000000037.*"):
        f.unlink()
    code, found, summary = _kafka_verify(run_cli, logdir)
    assert [(f["severity"], f["expected"], f["actual"]) for f in found if f["code"] == "kafka.segment-gap"] == \
        [("error", 37, 80)]
    code2, out, err = run_cli("dump", "kafka", logdir, "--json")
    assert code == 1 and code2 == 1 and "offsets 37..79" in err


def test_kafka_broker_normal_files_are_not_orphans(run_cli):
    """broker-append has 00000000000000000127.snapshot (the clean-shutdown snapshot at the log end, no
    segment 127): Kafka keeps it, so must we."""
    logdir = require_realdata("kafka", "generated-4.0.0-SNAPSHOT", "broker-append")
    code, found, summary = _kafka_verify(run_cli, logdir)
    assert not [f for f in found if f["code"] in ("kafka.snapshot-stray", "kafka.orphan-index",
                                                   "kafka.segment-log-missing", "kafka.segment-gap")]
    code, out, err = run_cli("dump", "kafka", logdir, "--json")
    assert code == 0, err


def test_kafka_orphan_files_before_the_first_log(tmp_path, run_cli):
    """Index files and a snapshot of a segment below the first .log: an unfinished retention delete."""
    logdir = _kafka_copy(tmp_path)
    part = logdir / "forensics-0"
    for f in part.glob("00000000000000000000.*"):
        f.unlink()
    shutil.copy(part / "00000000000000000037.index", part / "00000000000000000000.index")
    shutil.copy(part / "00000000000000000037.snapshot", part / "00000000000000000000.snapshot")
    code, found, summary = _kafka_verify(run_cli, logdir)
    got = {(f["code"], Path(f["file"]).name, f["severity"]) for f in found
           if f["code"] in ("kafka.orphan-index", "kafka.snapshot-stray", "kafka.segment-log-missing")}
    assert got == {("kafka.orphan-index", "00000000000000000000.index", "warning"),
                   ("kafka.snapshot-stray", "00000000000000000000.snapshot", "info")}


# ---- --salvage-out: one rule for every family ----------------------------------------------------------

def _family_case(family: str, tmp_path: Path) -> Path:
    """A store copied to case/evidence (the layout of issue #15)."""
    src = {"rocketmq": FIXTURES / "rocketmq" / "store",
           "litemq": require_realdata("litemq", "clean", "data", "broker"),
           "kafka": require_realdata("kafka", "generated-4.0.0-SNAPSHOT", "broker-append")}[family]
    return _copy(src, tmp_path / "case" / "evidence")


@pytest.mark.parametrize("family", ["rocketmq", "litemq", "kafka"])
def test_salvage_out_beside_the_store_is_accepted(tmp_path, run_cli, family):
    store = _family_case(family, tmp_path)
    before = sorted((p.relative_to(store), p.stat().st_size) for p in store.rglob("*"))
    target = tmp_path / "case" / "salvage.ndjson"
    code, out, err = run_cli("verify", "store", store, "--json", "--salvage-out", target)
    assert code in (0, 1), err
    assert target.is_file() and target.read_text().strip()
    # a directory: the file goes inside it, under the same name for every family
    code, out, err = run_cli("verify", "store", store, "--json", "--salvage-out", tmp_path / "case" / "out")
    assert (tmp_path / "case" / "out" / "salvaged-messages.ndjson").is_file(), err
    # an existing file needs --force
    code, out, err = run_cli("verify", "store", store, "--json", "--salvage-out", target)
    assert code == 2 and "exists" in err
    code, out, err = run_cli("verify", "store", store, "--json", "--salvage-out", target, "--force")
    assert code in (0, 1), err
    assert sorted((p.relative_to(store), p.stat().st_size) for p in store.rglob("*")) == before


@pytest.mark.parametrize("family", ["rocketmq", "litemq", "kafka"])
def test_salvage_out_inside_the_store_is_refused(tmp_path, run_cli, family):
    store = _family_case(family, tmp_path)
    inner = next(p for p in sorted(store.iterdir()) if p.is_dir())
    before = sorted((p.relative_to(store), p.stat().st_size) for p in store.rglob("*"))
    for out in (store / "salvage.ndjson", inner / "salvage.ndjson", store, inner):
        code, stdout, err = run_cli("verify", "store", store, "--json", "--salvage-out", out, "--force")
        assert code == 2 and "input tree" in err, (out, err)
    assert sorted((p.relative_to(store), p.stat().st_size) for p in store.rglob("*")) == before


@pytest.mark.parametrize("codec", ["zlib", "lz4", "zstd"])
def test_inflate_check_keeps_memory_bounded(codec):
    """verify's check holds one chunk, not the body: 16 MiB of zeros against a 4 MiB cap, and in full."""
    import tracemalloc

    from mqtool import codecs

    bomb = codecs.compress(codec, bytes(16 << 20))
    tracemalloc.start()
    try:
        with pytest.raises(codecs.CodecError, match="exceeds"):
            codecs.check_inflates(codec, bomb, max_size=4 << 20)
        assert codecs.check_inflates(codec, bomb, max_size=32 << 20) == 16 << 20
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2 << 20, peak
    for bad in (bomb[:-7], bomb + b"tail", bytes([0xA5]) * 40):
        with pytest.raises(codecs.CodecError):
            codecs.check_inflates(codec, bad)
