"""verify on real data (named inconsistencies) and a corruption suite on copies in tmp_path."""
from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from conftest import load_json, require_realdata
from mqtool.io import read_input
from mqtool.kafka.rebuild import recover_segment
from mqtool.kafka.records import Batch
from mqtool.kafka.scan import scan


def verify(run_cli, path, *args):
    code, out, _err = run_cli("verify", "store", path, "--json", *args)
    rows = [json.loads(x) for x in out.splitlines()]
    assert rows[-1]["kind"] == "summary"
    return code, rows[:-1], rows[-1]


def codes(findings, severity=None):
    return [f["code"] for f in findings if severity is None or f["severity"] == severity]


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\x00" % len(data) + data).hexdigest()


# ---- real data --------------------------------------------------------------------------------

def test_generated_partition_is_sound(run_cli):
    src = require_realdata("kafka", "generated-4.0.0-SNAPSHOT", "recovered")
    code, findings, s = verify(run_cli, src, "--deep", "--index-interval-bytes", "300")
    assert code == 0 and s["errors"] == 0
    assert s["batches"] == 41 and s["records"] == 127          # expected.json: 41 batches, LEO 127


def test_broker_append_multi_message_index_entry_is_append_path(run_cli):
    """Segment 0's .index has an entry (36 @ 1986) written by a multi-message legacy append: reported as
    kafka.index-append-path (info), where DumpLogSegments would print a mismatch."""
    src = require_realdata("kafka", "generated-4.0.0-SNAPSHOT", "broker-append")
    code, findings, s = verify(run_cli, src, "--index-interval-bytes", "300")
    ap = [f for f in findings if f["code"] == "kafka.index-append-path"]
    assert [(f["offset"], f["expected"]) for f in ap] == [(36, 35)]
    assert s["errors"] == 0


def test_generated_leader_epoch_checkpoint_vs_tail_batches(run_cli):
    """expected.json: batches 97-126 carry partitionLeaderEpoch 3 after epoch 4 began at 75 (leader-epoch-checkpoint
    [3@37, 4@75]); verify names the disagreement."""
    src = require_realdata("kafka", "generated-4.0.0-SNAPSHOT", "broker-append")
    exp = load_json(src / "expected.json")
    assert any(b["partitionLeaderEpoch"] == 3 and b["baseOffset"] > 75 for b in exp["batches"])
    _code, findings, _s = verify(run_cli, src, "--index-interval-bytes", "300")
    le = [f for f in findings if f["code"] == "kafka.leader-epoch-mismatch"]
    assert le and le[0]["severity"] == "warning" and le[0]["expected"] == 3 and le[0]["actual"] == 4


def test_c4_kafka2_time_index_offsets_named(run_cli):
    """MANIFEST §3: c4 __consumer_offsets-32's .timeindex stores offset 43 (a record inside batch 43-45), not 45."""
    src = require_realdata("kafka", "volodymyrzee-kafka-zk-2020", "c4-f6e2174")
    code, findings, s = verify(run_cli, src)
    rec = [f for f in findings if f["code"] == "kafka.timeindex-record-offset"]
    files = {Path(f["file"]).parent.name for f in rec}
    assert files == {"__consumer_offsets-12", "__consumer_offsets-18", "__consumer_offsets-32"}
    f32 = next(f for f in rec if "__consumer_offsets-32" in f["file"])
    assert (f32["actual"], f32["expected"]) == (43, 45)
    assert "Kafka 2.x" in f32["message"]
    assert s["errors"] == 0 and "kafka.timeindex-offset-not-found" not in codes(findings)


@pytest.mark.parametrize("part", ["__consumer_offsets-12", "__consumer_offsets-18"])
def test_c3_stale_index_covers_prefix(run_cli, tmp_path, part):
    """MANIFEST §3: c3's (absent, 10 MiB) .index blobs are c1's. Rebuild c1's index from c1's log, prove it has
    c3's blob id, put it next to c3's grown log: verify reports an index covering only a prefix of the log."""
    root = require_realdata("kafka")
    items = load_json(root / "preallocated-missing-files.json")
    c3 = next(x for x in items if x["dir"].startswith("volodymyrzee-kafka-zk-2020/c3")
              and x["path"] == f"{part}/00000000000000000000.index")
    c1_log = root / "volodymyrzee-kafka-zk-2020" / "c1-7712094" / part / "00000000000000000000.log"
    index = recover_segment(read_input(c1_log), str(c1_log), 0, 4096).index_bytes(preallocate=True)
    assert git_blob_id(index) == c3["git_blob"]            # the very bytes c3 had on disk
    work = tmp_path / part
    shutil.copytree(root / "volodymyrzee-kafka-zk-2020" / "c3-c896d6b" / part, work)
    (work / "00000000000000000000.index").write_bytes(index)
    code, findings, s = verify(run_cli, work)
    assert "kafka.index-covers-prefix" in codes(findings, "warning")
    assert "kafka.index-preallocated" in codes(findings, "info")
    assert s["errors"] == 0
    code, out, _ = run_cli("rebuild-index", work, "--compare", "--json")
    assert code == 1 and "kafka.rebuild-stale-prefix" in out


def test_real_logdirs_verdicts(run_cli):
    for d in ("c2-d3d696a", "c3-c896d6b", "c9-03fa91f"):
        code, findings, s = verify(run_cli, require_realdata("kafka", "volodymyrzee-kafka-zk-2020", d))
        assert s["errors"] == 0, (d, [f for f in findings if f["severity"] == "error"])
    # c1: the replication checkpoint (high watermark 293) is ahead of the log copied with it
    code, findings, s = verify(run_cli, require_realdata("kafka", "volodymyrzee-kafka-zk-2020", "c1-7712094"))
    beyond = [f for f in findings if f["code"] == "kafka.checkpoint-beyond-log-end"]
    assert beyond and all("__consumer_offsets-12" in f["message"] for f in beyond) and beyond[0]["actual"] == 293


def test_kafka_python_missing_txnindex_is_an_error(run_cli):
    """MANIFEST: kafka-python data has ABORT markers but no .txnindex (the script could not write one)."""
    code, findings, s = verify(run_cli, require_realdata("kafka", "kafka-python-3.0.12-patched"), "--deep")
    assert codes(findings, "error") == ["kafka.txnindex-missing-entry"]
    assert code == 1


# ---- corruption suite (copies) ------------------------------------------------------------------

SEG37 = [0, 493, 715, 980, 1242, 1469, 1640, 1867, 2048]     # expected.json positions of segment 37
SEG37_BASES = [37, 43, 49, 55, 61, 67, 72, 75, 78]


@pytest.fixture
def part(tmp_path):
    src = require_realdata("kafka", "generated-4.0.0-SNAPSHOT", "broker-append", "forensics-0")
    dst = tmp_path / "forensics-0"
    shutil.copytree(src, dst)
    for p in dst.iterdir():
        p.chmod(0o644)
    return dst


def _patch(p: Path, pos: int, data: bytes):
    b = bytearray(p.read_bytes())
    b[pos:pos + len(data)] = data
    p.write_bytes(bytes(b))


def _bases(p: Path):
    return [ev.base_offset for ev in scan(read_input(p), str(p)) if isinstance(ev, Batch)]


def test_flipped_byte_in_batch(run_cli, part):
    log = part / "00000000000000000037.log"
    orig = log.read_bytes()
    _patch(log, 493 + 100, bytes([orig[593] ^ 0x40]))
    code, findings, s = verify(run_cli, part, "--index-interval-bytes", "300")
    crc = [f for f in findings if f["code"] == "kafka.crc-mismatch"]
    assert [(f["position"], f["offset"]) for f in crc] == [(493, 43)]
    assert _bases(log) == SEG37_BASES                 # every batch still read, the damaged one flagged
    assert code == 1 and s["verdict"] == "damaged"


def test_truncated_segment(run_cli, part):
    log = part / "00000000000000000037.log"
    log.write_bytes(log.read_bytes()[:2048 + 70])
    code, findings, s = verify(run_cli, part, "--index-interval-bytes", "300")
    tail = [f for f in findings if f["code"] == "kafka.partial-tail"]
    assert [(f["position"], f["severity"]) for f in tail] == [(2048, "warning")]
    assert _bases(log) == SEG37_BASES[:-1]


def test_zeroed_page(run_cli, part):
    log = part / "00000000000000000037.log"
    _patch(log, 512, bytes(512))                       # zero [512, 1024): hits batches at 493, 715 and 980
    code, findings, s = verify(run_cli, part, "--index-interval-bytes", "300")
    sk = [f for f in findings if f["code"] == "kafka.skipped-bytes"]
    assert [(f["position"], f["actual"]) for f in sk] == [(493, 1242 - 493)]
    assert s["skipped_ranges"] == 1 and s["skipped_bytes"] == 1242 - 493
    assert _bases(log) == [37] + SEG37_BASES[4:]       # every untouched batch still read
    assert "kafka.index-position-not-batch" in codes(findings, "error")   # the index pointed into the hole


def test_garbage_between_batches(run_cli, part):
    log = part / "00000000000000000037.log"
    data = log.read_bytes()
    log.write_bytes(data[:980] + b"\xde\xad\xbe\xef" * 10 + data[980:])
    code, findings, s = verify(run_cli, part, "--index-interval-bytes", "300")
    sk = [f for f in findings if f["code"] == "kafka.skipped-bytes"]
    assert [(f["position"], f["actual"]) for f in sk] == [(980, 40)]
    assert _bases(log) == SEG37_BASES
    # dump shows the skipped range inline and keeps going
    code, out, err = run_cli("dump", "kafka", log, "--json")
    rows = [json.loads(x) for x in out.splitlines()]
    assert [r["kind"] for r in rows].count("batch") == 9
    assert [(r["position"], r["size"]) for r in rows if r["kind"] == "damage"] == [(980, 40)]
    assert code == 1 and "skipped" in err


def test_bad_length_field_resyncs(run_cli, part):
    log = part / "00000000000000000037.log"
    _patch(log, 980 + 8, (0x7FFFFF00).to_bytes(4, "big"))
    code, findings, s = verify(run_cli, part, "--index-interval-bytes", "300")
    sk = [f for f in findings if f["code"] == "kafka.skipped-bytes"]
    assert [(f["position"], f["actual"]) for f in sk] == [(980, 1242 - 980)]
    assert _bases(log) == SEG37_BASES[:3] + SEG37_BASES[4:]


def test_zero_filled_tail_is_end_of_data(run_cli, part):
    log = part / "00000000000000000093.log"
    log.write_bytes(log.read_bytes() + bytes(8192))
    code, findings, s = verify(run_cli, part, "--index-interval-bytes", "300")
    assert "kafka.zero-tail" in codes(findings, "info")
    assert s["errors"] == 0


def test_snapshot_crc_and_txnindex_damage(run_cli, part):
    snap = part / "00000000000000000080.snapshot"
    _patch(snap, 20, b"\xff")
    (part / "00000000000000000080.txnindex").write_bytes(b"")
    code, findings, s = verify(run_cli, part, "--index-interval-bytes", "300")
    errs = codes(findings, "error")
    assert "kafka.snapshot-crc" in errs
    miss = [f for f in findings if f["code"] == "kafka.txnindex-missing-entry"]
    assert [f["offset"] for f in miss] == [87]          # ABORT of pid 3000 at 87 (reference §4.3)


def test_index_entry_pointing_mid_batch(run_cli, part):
    idx = part / "00000000000000000037.index"
    _patch(idx, 4, (500).to_bytes(4, "big"))            # first entry's position → 500 (inside batch 493)
    code, findings, s = verify(run_cli, part, "--index-interval-bytes", "300")
    bad = [f for f in findings if f["code"] == "kafka.index-position-not-batch"]
    assert [(f["position"], f["actual"]) for f in bad] == [(0, 500)]


def test_verify_a_single_log_file(run_cli, part):
    code, findings, s = verify(run_cli, part / "00000000000000000080.log", "--deep")
    assert s["segments"] == 1 and s["batches"] == 6 and s["errors"] == 0


def test_salvage_out_writes_readable_records(run_cli, part, tmp_path):
    log = part / "00000000000000000037.log"
    _patch(log, 512, bytes(512))
    out = tmp_path / "salvage" / "records.ndjson"
    code, findings, s = verify(run_cli, part, "--salvage-out", out, "--index-interval-bytes", "300")
    recs = [json.loads(x) for x in out.read_text().splitlines()]
    offsets = [r["offset"] for r in recs]
    assert 37 in offsets and 43 not in offsets and 61 in offsets    # batch 43-48 was in the zeroed page
    assert len(offsets) == len(set(offsets))


def test_deep_record_offsets_one_finding_per_batch(run_cli, tmp_path):
    """A batch whose records all carry offsetDelta 0 (and one past lastOffsetDelta) is one damaged batch: --deep
    reports the first record that does not increase and how many more, once per batch and kind, not once per
    record (built here: 6 records with deltas 0,0,0,0,0,9, lastOffsetDelta 5)."""
    from builders import kafka_builder

    B = kafka_builder()
    recs = [B.record(d, i, b"k", b"v") for i, d in enumerate((0, 0, 0, 0, 0, 9))]
    part = tmp_path / "t-0"
    part.mkdir()
    (part / "00000000000000000000.log").write_bytes(
        B.batch_v2(0, recs, base_ts=B.T0, max_ts=B.T0 + 6, last_delta=5) + B.batch_v2(6, recs, base_ts=B.T0,
                                                                                      max_ts=B.T0 + 6, last_delta=5))
    code, findings, _ = verify(run_cli, part, "--deep")
    bad = [f for f in findings if f["code"] == "kafka.record-offsets"]
    assert code == 1
    # per batch: deltas 0,0,0,0 after the first do not increase (4: the first + 3 more); 9 > 5 lies beyond
    assert [(f["offset"], f["message"]) for f in bad] == [
        (0, "record offset 0 does not increase (previous 0); 3 more record(s) of this batch do not increase"),
        (9, "record offset 9 beyond the batch's last offset 5"),
        (6, "record offset 6 does not increase (previous 6); 3 more record(s) of this batch do not increase"),
        (15, "record offset 15 beyond the batch's last offset 11"),
    ]
