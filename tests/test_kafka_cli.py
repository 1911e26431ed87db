"""CLI: detection, dump (log dir, single files, commitlog alias), query, the committed fixture."""
from __future__ import annotations

import json

import pytest


from conftest import FIXTURES, ROOT, require_realdata
from mqtool.kafka.store import sniff

FIX = FIXTURES / "kafka" / "logdir"


def rows(out: str) -> list[dict]:
    return [json.loads(x) for x in out.splitlines() if x.strip()]


# ---- detection -------------------------------------------------------------------------------

def test_sniff_kafka_paths():
    assert sniff(FIX) >= 90                                      # log dir
    assert sniff(FIX / "fixture-0") >= 90                        # partition dir
    for name in ("00000000000000000000.log", "00000000000000000000.index", "00000000000000000000.timeindex",
                 "00000000000000000009.txnindex", "00000000000000000012.snapshot", "leader-epoch-checkpoint"):
        assert sniff(FIX / "fixture-0" / name) >= 90, name
    assert sniff(FIX / "recovery-point-offset-checkpoint") >= 90


def test_sniff_refuses_rocketmq_and_litemq(tmp_path):
    rmq = tmp_path / "rmq"
    (rmq / "commitlog").mkdir(parents=True)
    (rmq / "commitlog" / "00000000000000000000").write_bytes(bytes(64))
    (rmq / "consumequeue").mkdir()
    (rmq / "checkpoint").write_bytes(bytes(24))
    assert sniff(rmq) == 0 and sniff(rmq / "commitlog") == 0
    assert sniff(rmq / "commitlog" / "00000000000000000000") == 0
    lmq = tmp_path / "lmq"
    for d in ("commitlog", "consumequeue", "checkpoint"):
        (lmq / d).mkdir(parents=True)
    rec = bytearray(64)
    rec[4:8] = (0x4C4D5101).to_bytes(4, "big")
    (lmq / "commitlog" / "00000000000000000000").write_bytes(bytes(rec))
    assert sniff(lmq) == 0


def test_sniff_transient_suffixes_and_layout(tmp_path):
    import shutil

    from mqtool.kafka.store import partition_from_dir
    d = tmp_path / "t-0"
    shutil.copytree(FIX / "fixture-0", d)
    shutil.copy(d / "00000000000000000000.log", d / "00000000000000000000.log.deleted")
    shutil.copy(d / "00000000000000000009.log", d / "00000000000000000009.log.swap")
    p = partition_from_dir(d)
    assert [s.base_offset for s in p.segments] == [0, 9]
    assert sorted((s.base_offset, s.suffix) for s in p.transient) == [(0, ".deleted"), (9, ".swap")]
    assert sniff(d / "00000000000000000000.log.deleted") >= 90


# ---- fixture ----------------------------------------------------------------------------------

def test_fixture_is_reproducible(tmp_path):
    from builders import kafka_builder

    written = kafka_builder().build(tmp_path / "logdir")
    for p in written:
        rel = p.relative_to(tmp_path / "logdir")
        assert (FIX / rel).read_bytes() == p.read_bytes(), rel


def test_fixture_verifies_clean(run_cli):
    code, out, _ = run_cli("verify", "store", FIX, "--deep", "--index-interval-bytes", "100", "--json")
    s = rows(out)[-1]
    assert code == 0 and s["verdict"] == "sound" and s["records"] == 12


# ---- dump ---------------------------------------------------------------------------------------

def test_dump_deep_print_data_fixture(run_cli):
    code, out, _ = run_cli("dump", "kafka", FIX, "--print-data", "--json")
    assert code == 0
    r = rows(out)
    recs = [x for x in r if x["kind"] == "record"]
    assert [x["offset"] for x in recs] == list(range(12))
    by = {x["offset"]: x for x in recs}
    assert by[0]["key"] == "k0" and by[0]["value"] == "legacy-v1-value"
    assert by[1]["headers"] == [["h", "x"], ["n", None]]
    assert by[2]["key"] is None and by[3]["value"] is None            # null key, tombstone
    assert by[5]["value"] == "gzip-1gzip-1gzip-1"
    assert by[9]["control_type"] == "ABORT" and by[9]["coordinator_epoch"] == 3
    assert by[10]["timestamp"] == by[11]["timestamp"] == 1_760_000_000_060   # LogAppendTime: maxTimestamp
    batches = [x for x in r if x["kind"] == "batch"]
    assert [b["offset"] for b in batches] == [0, 1, 4, 7, 9, 10]
    assert all(b["crc_ok"] for b in batches)


def test_dump_commitlog_equals_dump_kafka(run_cli):
    c1, o1, _ = run_cli("dump", "kafka", FIX, "--json")
    c2, o2, _ = run_cli("dump", "commitlog", FIX, "--json")
    assert c1 == c2 == 0 and o1 == o2 and o1


def test_dump_single_files(run_cli):
    part = FIX / "fixture-0"
    _, out, _ = run_cli("dump", "kafka", part / "00000000000000000009.txnindex", "--json")
    assert [(x["producer_id"], x["first_offset"], x["last_offset"], x["last_stable_offset"]) for x in rows(out)] == \
        [(7000, 7, 9, 10)]
    _, out, _ = run_cli("dump", "kafka", part / "00000000000000000012.snapshot", "--json")
    r = rows(out)
    assert r[0]["crc_ok"] and r[1]["producer_id"] == 7000
    _, out, _ = run_cli("dump", "kafka", part / "leader-epoch-checkpoint", "--json")
    assert [(x["epoch"], x["offset"]) for x in rows(out)] == [(0, 0), (1, 9)]
    _, out, _ = run_cli("dump", "kafka", FIX / "recovery-point-offset-checkpoint", "--json")
    assert [(x["topic"], x["partition"], x["offset"]) for x in rows(out)] == [("fixture", 0, 12)]


def test_dump_index_files_real(run_cli):
    src = require_realdata("kafka", "generated-4.0.0-SNAPSHOT", "recovered", "forensics-0")
    raw = (src / "00000000000000000037.index").read_bytes()
    _, out, _ = run_cli("dump", "kafka", src / "00000000000000000037.index", "--json")
    r = rows(out)
    assert len(r) == len(raw) // 8
    assert [(x["offset"] - 37, x["log_position"]) for x in r] == \
        [(int.from_bytes(raw[i:i + 4], "big"), int.from_bytes(raw[i + 4:i + 8], "big")) for i in range(0, len(raw), 8)]
    _, out, _ = run_cli("dump", "kafka", src / "00000000000000000093.timeindex", "--json")
    assert all(x["kind"] == "time_index_entry" for x in rows(out))


def test_dump_max_bytes(run_cli):
    log = FIX / "fixture-0" / "00000000000000000000.log"
    _, out, _ = run_cli("dump", "kafka", log, "--max-bytes", "160", "--json")
    assert [x["offset"] for x in rows(out) if x["kind"] == "batch"] == [0, 1]   # the 3rd batch crosses 160


def test_dump_internal_topic_decoded(run_cli):
    src = require_realdata("kafka", "generated-4.0.0-SNAPSHOT", "coordinator", "__consumer_offsets-0")
    _, out, _ = run_cli("dump", "kafka", src, "--print-data", "--json")
    dec = [x["decoded"] for x in rows(out) if x["kind"] == "record"]
    assert dec[0]["key"] == {"group": "g-v0", "topic": "orders", "partition": 0}
    assert sum(1 for d in dec if d["value"] == "<DELETE>") == 2


def test_dump_table_rendering(monkeypatch, capsys):
    from mqtool import render
    from mqtool.kafka.ops import dump
    from mqtool.options import DumpOptions, ScanStats

    cols, rws, title = dump("kafka", FIX / "fixture-0", DumpOptions(print_data=True), ScanStats())
    monkeypatch.setattr(render, "stdout_console", lambda: render.Console(width=200, no_color=True))
    n = render.emit(rws, cols, as_json=False, title=title) if False else render.render_table(rws, cols, title=title)
    out = capsys.readouterr().out
    assert n == 6 + 12 and "legacy-v1-value" in out and "ABORT" in out


# ---- query --------------------------------------------------------------------------------------

def test_query_offset_timestamp_key_pid(run_cli):
    code, out, _ = run_cli("query", FIX, "--offset", "5", "--json", "--body", "text")
    r = rows(out)
    assert code == 0 and [(x["offset"], x["value"]) for x in r] == [(5, "gzip-1gzip-1gzip-1")]
    code, out, _ = run_cli("query", FIX, "--timestamp", str(1_760_000_000_021), "--json")
    assert [x["offset"] for x in rows(out)] == [5]
    code, out, _ = run_cli("query", FIX, "--key", "t8", "--json")
    assert [x["offset"] for x in rows(out)] == [8]
    code, out, _ = run_cli("query", FIX, "--producer-id", "7000", "--json")
    r = rows(out)
    assert [(x["offset"], x["txn_state"]) for x in r] == [(7, "aborted"), (9, "marker")]
    code, out, err = run_cli("query", FIX, "--offset", "999", "--json")
    assert code == 1 and "no message found" in err


def test_query_by_producer_names_control_types_as_dump_does(tmp_path, run_cli):
    """A marker of a type Kafka does not define is UNKNOWN(9) in query as in dump and info (was "9"), and one
    whose records do not decode has no type (was "None")."""
    from builders import kafka_batch, kafka_control_batch

    from formats import kafka as K

    txn = dict(attrs=K.TRANSACTIONAL_FLAG_MASK, epoch=0, seq=0)
    broken = bytearray(kafka_control_batch(3, [K.CONTROL_COMMIT], pid=5, epoch=0))
    broken[K.V2_CRC_OFFSET] ^= 0xFF
    log = b"".join([kafka_batch(0, 2, pid=5, **txn), kafka_control_batch(2, [9], pid=5, epoch=0), bytes(broken)])
    part = tmp_path / "logdir" / "orders-0"
    part.mkdir(parents=True)
    (part / f"{0:020d}.log").write_bytes(log)
    code, out, _ = run_cli("query", part.parent, "--producer-id", "5", "--json")
    markers = [x["control_type"] for x in rows(out) if x.get("txn_state") == "marker"]
    assert markers[0] == "UNKNOWN(9)"
    assert "None" not in markers and "9" not in markers


def test_query_offset_real_uses_index(run_cli):
    src = require_realdata("kafka", "generated-4.0.0-SNAPSHOT", "recovered")
    for off in (0, 15, 33, 36, 37, 66, 90, 94, 126):
        code, out, _ = run_cli("query", src, "--offset", str(off), "--json")
        assert [x["offset"] for x in rows(out)] == [off], off


def test_verify_refuses_consumequeue(run_cli):
    code, _out, err = run_cli("verify", "consumequeue", FIX, "--json")
    assert code == 2 and "does not apply" in err


def test_dump_commitlog_filters(run_cli):
    code, out, _ = run_cli("dump", "commitlog", FIX, "--from-offset", "4", "--to-offset", "9", "--json")
    assert [x["offset"] for x in rows(out) if x["kind"] == "batch"] == [4, 7]
    code, out, _ = run_cli("dump", "commitlog", FIX, "--key", "g1", "--body", "text", "--json")
    assert [(x["kind"], x["offset"]) for x in rows(out)] == [("record", 5)]
    code, out, _ = run_cli("dump", "commitlog", FIX, "--topic", "other", "--json")
    assert rows(out) == []


def test_query_time_range(run_cli):
    code, out, _ = run_cli("query", FIX, "--time-from", str(1_760_000_000_019), "--time-to", str(1_760_000_000_022),
                           "--json")
    assert [x["offset"] for x in rows(out)] == [3, 4, 5]


def test_dump_jobs_workers_spool_their_lines(tmp_path, monkeypatch):
    """`dump kafka --deep --json -j 2`: the workers write their ranges to spool pieces that reach stdout in
    order; the bytes and exit code of --jobs 1 (to a file), and the pool path hands over pieces, not lines."""
    import os
    import subprocess
    import sys
    import tempfile

    from mqtool.kafka.ranges import parallel_dump_rows
    from mqtool.options import DumpOptions, ScanStats

    logdir = ROOT / "fixtures" / "kafka" / "logdir"
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    rows = parallel_dump_rows(logdir, DumpOptions(deep=True, ndjson=True, jobs=2, split_size=1024), ScanStats())
    items = list(rows)
    assert items and all(type(r).__name__ == "Spooled" for r in items) and sum(r.count for r in items) > 10
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def run(*jobs):
        out = tmp_path / "out.ndjson"
        with out.open("wb") as f:
            p = subprocess.run([sys.executable, "-m", "mqtool", "dump", "kafka", str(logdir), "--deep", "--json",
                                *jobs], stdout=f, stderr=subprocess.PIPE, env=env, cwd=ROOT, timeout=120)
        return p.returncode, out.read_bytes(), p.stderr

    ref = run("--jobs", "1")
    assert run("--jobs", "2", "--split-size", "1K") == ref and ref[1].count(b"\n") > 10


def test_export_counts_a_segment_gap_as_dump_does(run_cli, tmp_path):
    """A partition whose middle segment was deleted: ``dump kafka`` counted the offsets in no segment
    (segment-gap, exit 1) while ``export`` wrote the rest and said nothing (exit 0, damaged 0). Now both name it
    in the same words and count it once. Expected gap: the deleted segment's base offset up to the next
    segment's base offset less one, read from the file names."""
    pytest.importorskip("pyarrow")
    from builders import kafka_multisegment_store

    store = kafka_multisegment_store(tmp_path)
    logs = sorted((store / "orders-0").glob("*.log"))
    gone, after = int(logs[1].stem), int(logs[2].stem)
    for f in (store / "orders-0").glob(f"{logs[1].stem}.*"):
        f.unlink()
    want = f"{logs[2]}: segment-gap: offsets {gone}..{after - 1} are in no segment (a deleted or lost segment)"
    code, _, err = run_cli("dump", "kafka", store, "--json")
    assert code == 1 and [ln for ln in err.splitlines() if "segment-gap" in ln] == [f"mqtool: {want}"], err
    code, out, err2 = run_cli("export", store, "--to", tmp_path / "out.parquet", "--json", "--jobs", "1")
    assert code == 1, err2
    assert json.loads(out.splitlines()[-1])["damaged"] == 1
    said = [ln for ln in err2.splitlines() if "segment-gap" in ln]
    assert said == [ln for ln in err.splitlines() if "segment-gap" in ln] and len(said) == 1
