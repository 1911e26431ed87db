"""rebuild-index: byte-identical to Kafka's own LogSegment.recover output and to the real brokers' indexes."""
from __future__ import annotations

import hashlib
import json
import shutil
import time
from pathlib import Path

import pytest

from conftest import flush_log, load_json, require_realdata
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


# ---- many small outputs: one flush for all of them, and never a half-written file under its name ----------------

def _partition(root: Path, empty: int, first_empty: int = 200, with_real: bool = True) -> Path:
    """A partition dir: the real recovered segments (their indexes are Kafka's own: the expected bytes) and
    ``empty`` empty segments after them."""
    part = root / "forensics-0"
    part.mkdir(parents=True)
    if with_real:
        src = require_realdata("kafka", "generated-4.0.0-SNAPSHOT", "recovered", "forensics-0")
        for log in src.glob("*.log"):
            shutil.copy(log, part / log.name)
    for i in range(empty):
        (part / f"{first_empty + i:020d}.log").write_bytes(b"")
    return part


def _expected(part: Path) -> dict[str, bytes]:
    """Every output file and its bytes: Kafka's own indexes of the real segments; for an empty segment an empty
    .index and .timeindex (a rolled or cleanly closed segment's indexes are trimmed to their entries, none here:
    shared/reference/kafka.md §5.2; the real brokers' dirs hold such 0-byte files: realdata MANIFEST)."""
    src = require_realdata("kafka", "generated-4.0.0-SNAPSHOT", "recovered", "forensics-0")
    want = {}
    for log in part.glob("*.log"):
        if log.stat().st_size:
            for p in src.glob(log.stem + ".*"):
                if p.suffix in (".index", ".timeindex", ".txnindex"):
                    want[p.name] = p.read_bytes()
        else:
            want[log.stem + ".index"] = want[log.stem + ".timeindex"] = b""
    return want


def test_thousands_of_empty_segments_take_a_few_flushes(run_cli, tmp_path, monkeypatch):
    """3,000 empty segments: 6,000 empty index files, byte-exact, published with a bounded number of flushes
    (each file used to be fsynced, and its directory after it: ~46 s for 20,000 segments)."""
    n = 3000
    part = _partition(tmp_path / "logs", n, first_empty=0, with_real=False)
    events = flush_log(monkeypatch)
    out = tmp_path / "out"
    t = time.perf_counter()
    code, stdout, stderr = run_cli("rebuild-index", part, "--out", out, "--json")
    elapsed = time.perf_counter() - t
    assert code == 0, stderr
    assert json.loads(stdout.splitlines()[-1])["written"] == 2 * n
    got = {p.name: p.read_bytes() for p in (out / part.name).iterdir()}
    assert got == _expected(part)
    flushes = [e for e in events if e[0] != "publish"]
    assert len([e for e in events if e[0] == "publish"]) == 2 * n
    assert len(flushes) <= 8, flushes[:20]
    assert elapsed < 120                        # (a generous bound: creating 6,000 files is the cost left)


@pytest.mark.parametrize("empty", [0, 40])
def test_files_are_published_only_after_their_flush(run_cli, tmp_path, monkeypatch, empty):
    """The write order: every file complete and flushed (one fsync each for a few files, one syncfs for many)
    before the first is renamed into place, and the directories flushed after the last rename."""
    part = _partition(tmp_path / "logs", empty)
    events = flush_log(monkeypatch)
    out = tmp_path / "out"
    code, _, stderr = run_cli("rebuild-index", part, "--out", out, "--index-interval-bytes", "300")
    assert code == 0, stderr
    want = _expected(part)
    assert {p.name: p.read_bytes() for p in (out / part.name).iterdir()} == want
    pubs = [i for i, e in enumerate(events) if e[0] == "publish"]
    assert len(pubs) == len(want)
    before, after = events[:pubs[0]], events[pubs[-1] + 1:]
    if empty:
        assert ("sync",) in before and not any(e[0] == "fsync" and not e[1] for e in events)
    else:
        assert before.count(("fsync", False)) == len(want) and ("sync",) not in events
    assert after and all(e in (("sync",), ("fsync", True)) for e in after)
    assert not [e for e in events[pubs[0]:pubs[-1]] if e[0] != "publish"]       # nothing flushed in between


def test_an_error_mid_run_publishes_only_complete_files(run_cli, tmp_path, monkeypatch):
    """A run that fails at a segment publishes the files of the segments before it (complete, as when each was
    published at once) and leaves no temporary file."""
    from mqtool.kafka.rebuild import run as RR

    part = _partition(tmp_path / "logs", 10)
    real = RR.recover_segment
    seen = []

    def failing(buf, path, *a, **kw):
        seen.append(path)
        if len(seen) == 7:
            raise OSError(28, "No space left on device")
        return real(buf, path, *a, **kw)

    monkeypatch.setattr(RR, "recover_segment", failing)
    out = tmp_path / "out"
    code, _, stderr = run_cli("rebuild-index", part, "--out", out, "--index-interval-bytes", "300")
    assert code == 2 and "No space left" in stderr
    want = _expected(part)
    got = {p.name: p.read_bytes() for p in (out / part.name).iterdir()}
    done = {Path(p).stem for p in seen[:6]}
    assert got == {k: v for k, v in want.items() if k.split(".")[0] in done}


@pytest.mark.parametrize("delay", [0.4, 0.8, 1.2])
def test_a_killed_run_shows_no_half_written_file(tmp_path, delay):
    """SIGKILL at some moment of a run: whatever stands under a final name is the complete file (temporary
    files may stay behind, under their own names)."""
    import os
    import signal
    import subprocess
    import sys

    part = _partition(tmp_path / "logs", 1500)
    out = tmp_path / "out"
    repo = Path(__file__).resolve().parent.parent
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(repo), os.environ.get("PYTHONPATH")])))
    p = subprocess.Popen([sys.executable, "-m", "mqtool", "rebuild-index", str(part), "--out", str(out),
                          "--index-interval-bytes", "300"], env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    time.sleep(delay)
    p.send_signal(signal.SIGKILL)
    p.wait()
    want = _expected(part)
    if (out / part.name).is_dir():
        for f in (out / part.name).iterdir():
            if not f.name.startswith(".mqtool-tmp-"):
                assert f.read_bytes() == want[f.name], f.name


def test_an_abort_at_the_end_of_the_offset_range_is_written_as_a_java_long(run_cli, tmp_path):
    """A transaction aborted by a marker at offset 2^63 - 1: the AbortedTxn's lastStableOffset is
    lastOffset + 1, a Java long, so it wraps to -2^63 (it used to stop rebuild-index with struct.error).
    Expected entry written out by hand: version 0, pid 7, first 2^63 - 3, last 2^63 - 1, LSO -2^63."""
    import struct

    from builders import kafka_builder

    B = kafka_builder()
    first = (1 << 63) - 3
    data = B.batch_v2(first, [B.record(0, 0, b"k", b"v")], base_ts=B.T0, max_ts=B.T0, pid=7, epoch=0, seq=0,
                      attrs=0x10)                                  # transactional
    data += B.control((1 << 63) - 1, 0, 7, 0, B.T0 + 1)             # ABORT (control type 0)
    part = tmp_path / "logs" / "t-0"
    part.mkdir(parents=True)
    (part / f"{first:020d}.log").write_bytes(data)
    code, stdout, stderr = run_cli("rebuild-index", part, "--out", tmp_path / "out", "--json")
    assert code in (0, 1) and "Traceback" not in stderr, stderr
    txn = (tmp_path / "out" / "t-0" / f"{first:020d}.txnindex").read_bytes()
    assert txn == struct.pack(">hqqqq", 0, 7, first, (1 << 63) - 1, -(1 << 63))       # 34 bytes (AbortedTxn)
