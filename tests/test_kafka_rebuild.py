"""rebuild-index: byte-identical to Kafka's own LogSegment.recover output and to the real brokers' indexes."""
from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from conftest import load_json, require_realdata
from mqtool.io import read_input
from mqtool.kafka.rebuild import TxnTracker, recover_segment


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\x00" % len(data) + data).hexdigest()


def test_rebuild_recovered_byte_identical_cli(run_cli, tmp_path):
    src = require_realdata("kafka", "generated-4.0.0-SNAPSHOT", "recovered", "forensics-0")
    out = tmp_path / "out"
    code, stdout, _ = run_cli("rebuild-index", src, "--out", out, "--index-interval-bytes", "300", "--json")
    assert code == 0
    rebuilt = sorted(p.name for p in (out / "forensics-0").iterdir())
    expected = sorted(p.name for p in src.iterdir() if p.suffix in (".index", ".timeindex", ".txnindex"))
    assert rebuilt == expected                       # .txnindex only where Kafka wrote one (80, 93)
    for name in expected:
        assert (out / "forensics-0" / name).read_bytes() == (src / name).read_bytes(), name


def test_rebuild_compare_recovered_is_clean(run_cli):
    src = require_realdata("kafka", "generated-4.0.0-SNAPSHOT", "recovered")
    code, stdout, _ = run_cli("rebuild-index", src, "--compare", "--index-interval-bytes", "300", "--json")
    rows = [json.loads(x) for x in stdout.splitlines()]
    summary = rows[-1]
    assert code == 0 and summary["differing"] == 0 and summary["identical"] == 10


@pytest.mark.parametrize("seg", [37, 80, 93])
def test_rebuild_broker_append_segments(seg):
    """Segments 37/80/93 of the append path equal the recovery rule (reference §5.3). The txnindex of 93 needs
    the open transaction of pid 4000 from segment 80, so the partition is walked in order."""
    src = require_realdata("kafka", "generated-4.0.0-SNAPSHOT", "broker-append", "forensics-0")
    txn = TxnTracker()
    for base in (0, 37, 80, 93):
        data = read_input(src / f"{base:020d}.log")
        res = recover_segment(data, str(base), base, 300, True, txn)
        if base != seg:
            continue
        assert res.index_bytes() == (src / f"{base:020d}.index").read_bytes()
        assert res.timeindex_bytes() == (src / f"{base:020d}.timeindex").read_bytes()
        txi = src / f"{base:020d}.txnindex"
        assert res.txnindex_bytes() == (txi.read_bytes() if txi.exists() else b"")


def test_broker_append_segment0_differs_as_documented(run_cli):
    """Segment 0 was appended as multi-message legacy sets: the append-path index differs (MANIFEST §2)."""
    src = require_realdata("kafka", "generated-4.0.0-SNAPSHOT", "broker-append")
    code, stdout, _ = run_cli("rebuild-index", src, "--compare", "--index-interval-bytes", "300", "--json")
    rows = [json.loads(x) for x in stdout.splitlines()]
    differs = {Path(r["file"]).name for r in rows if r.get("code") == "kafka.rebuild-differs"}
    assert differs == {"00000000000000000000.index", "00000000000000000000.timeindex"}
    assert code == 1


def test_rebuild_refuses_output_inside_input(run_cli, tmp_path):
    src = tmp_path / "logdir"
    shutil.copytree(require_realdata("kafka", "generated-4.0.0-SNAPSHOT", "recovered"), src)
    code, _out, err = run_cli("rebuild-index", src, "--out", src / "x")
    assert code == 2 and "inside the input tree" in err


def _preallocated(matches):
    root = require_realdata("kafka")
    items = load_json(root / "preallocated-missing-files.json")
    return root, [x for x in items if x.get("rebuild_matches") == matches]


def test_preallocated_blob_ids_recover_rule():
    root, items = _preallocated("recover-rule")
    assert len(items) >= 10
    for x in items:
        p = root / x["dir"] / x["path"]
        res = recover_segment(read_input(p.with_suffix(".log")), str(p), 0, 4096, True)
        data = res.index_bytes(True) if p.suffix == ".index" else res.timeindex_bytes(True)
        assert len(data) == x["expected_size"]
        assert git_blob_id(data) == x["git_blob"], x["path"]


def test_preallocated_blob_id_kraft_timeindex_without_final_entry():
    root, items = _preallocated("recover-rule-without-final-entry")
    assert len(items) == 1
    x = items[0]
    p = root / x["dir"] / x["path"]
    res = recover_segment(read_input(p.with_suffix(".log")), str(p), 0, 4096, final_time_entry=False)
    assert git_blob_id(res.timeindex_bytes(True)) == x["git_blob"]
    with_final = recover_segment(read_input(p.with_suffix(".log")), str(p), 0, 4096, final_time_entry=True)
    assert git_blob_id(with_final.timeindex_bytes(True)) != x["git_blob"]


def test_preallocate_option_pads_active_segment(run_cli, tmp_path):
    src = require_realdata("kafka", "ldi-poc-kraft-2026", "8030792", "__cluster_metadata-0")
    out = tmp_path / "out"
    code, _o, _e = run_cli("rebuild-index", src, "--out", out, "--preallocate", "--json")
    assert code == 0
    idx = (out / "__cluster_metadata-0" / "00000000000000000000.index").read_bytes()
    root, items = _preallocated("recover-rule")
    want = next(x for x in items if x["path"] == "__cluster_metadata-0/00000000000000000000.index")
    assert len(idx) == 10485760 and git_blob_id(idx) == want["git_blob"]
