"""Byte-range splitters of LiteMQ and Kafka: the union of the rows of all ranges equals the whole-store
``dump`` (real stores, several split sizes incl. 1 KiB, random split sizes, damaged copies), and
``dump --jobs`` gives the output of one process."""
from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import realdata_root, require_realdata
from mqtool.kafka import ranges as KR
from mqtool.litemq import ranges as LR
from mqtool.options import DumpOptions, ScanStats
from mqtool.ranges import InlineRunner

LITE_STORES = ["clean", "crash"]
KAFKA_STORES = sorted(p.name for p in (realdata_root() / "kafka").iterdir() if p.is_dir()) \
    if (realdata_root() / "kafka").exists() else ["generated-4.0.0-SNAPSHOT"]
SPLITS = [64, 1024, 4096, 64 * 1024, None]


def lite_path(name: str) -> Path:
    return require_realdata("litemq", name, "data", "broker")


def lite_whole(path, opts: DumpOptions) -> list[dict]:
    from mqtool.litemq.ops import dump

    return list(dump("commitlog", path, opts, ScanStats())[1])


def lite_union(path, split, opts: DumpOptions) -> list[dict]:
    return [r for rng in LR.plan(path, split) for r in LR.iter_range_rows(rng, opts)]


def lite_jobs_inline(path, split, opts: DumpOptions) -> list[dict]:
    """The --jobs merge (chain end reported by a range drops the ranges after it), run inline."""
    import dataclasses

    o = dataclasses.replace(opts, runner=InlineRunner(), split_size=split)
    rows = LR.parallel_dump_rows(path, o, ScanStats())
    assert rows is not None
    return list(rows)


def kafka_whole(path, opts: DumpOptions) -> list[dict]:
    from mqtool.kafka.ops import dump

    return list(dump("kafka", path, opts, ScanStats())[1])


def kafka_union(path, split, opts: DumpOptions) -> list[dict]:
    out = []
    for rng in KR.plan(path, split):
        for r in KR.iter_range_rows(rng, opts):
            assert "topic" in r and "partition" in r
            r.pop("topic")
            r.pop("partition")
            out.append(r)
    return out


def copy_tree(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    for p in dst.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    return dst


# ---- LiteMQ ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", LITE_STORES)
def test_litemq_union_equals_whole_scan(name):
    path = lite_path(name)
    opts = DumpOptions(body="base64")
    whole = lite_whole(path, opts)
    expected = json.loads((path.parent.parent / "expected.json").read_text())
    # ground truth independent of our scanner: the messages the broker accepted, in write order
    accepted = [m for m in expected["messages"] if m["accepted"]]
    assert sorted(r["msg_id"] for r in whole) == sorted(m["message_id"] for m in accepted)
    for split in SPLITS:
        assert lite_union(path, split, opts) == whole, split


def test_litemq_plan_and_ranges_cut_records():
    path = lite_path("clean")
    ranges = LR.plan(path, 1024)
    segs = {(r.file, r.size) for r in ranges}
    assert len(segs) == 4 and all(size == 131072 for _, size in segs)      # MANIFEST: 4 files of 128 KiB
    for f, size in segs:
        mine = [r for r in ranges if r.file == f]
        assert mine[0].start == 0 and mine[-1].stop == size
        assert all(a.stop == b.start for a, b in zip(mine, mine[1:]))
    # the 100 KiB body record straddles many 1 KiB ranges: exactly one range yields it
    big = [r for r in lite_whole(path, DumpOptions()) if r["body_size"] == 100 * 1024]
    assert len(big) == 1
    owners = [rng for rng in ranges for r in LR.iter_range_rows(rng, DumpOptions())
              if r["offset"] == big[0]["offset"]]
    assert len(owners) == 1


def test_litemq_filters_in_range_mode():
    path = lite_path("clean")
    for opts in (DumpOptions(topic="orders.v1"), DumpOptions(tag="TagA"),
                 DumpOptions(from_offset=100000, to_offset=300000)):
        whole = lite_whole(path, opts)
        assert whole
        assert lite_union(path, 1024, opts) == whole


@given(split=st.integers(min_value=64, max_value=200_000))
@settings(max_examples=25, deadline=None)
def test_litemq_random_split_sizes(split):
    path = lite_path("crash")
    assert lite_union(path, split, DumpOptions()) == lite_whole(path, DumpOptions())


def _damage(path: Path, seg: int, pos: int, data: bytes) -> None:
    f = sorted((path / "commitlog").iterdir())[seg]
    with open(f, "r+b") as fh:
        fh.seek(pos)
        fh.write(data)


def _lite_rec(path: Path, seg: int, n: int) -> dict:
    """The n-th record of segment ``seg`` (from the whole scan)."""
    recs = [r for r in lite_whole(path, DumpOptions()) if r["file"].endswith(f"{seg:020d}")]
    return recs[n]


@pytest.mark.parametrize("how", ["bad-length", "bad-magic", "zero-length", "field-overrun", "short-file"])
def test_litemq_damaged_copies(tmp_path, how):
    path = copy_tree(lite_path("clean").parent, tmp_path / "data") / "broker"
    rec = _lite_rec(path, 1, 5)
    pos = rec["position"]
    if how == "bad-length":
        _damage(path, 1, pos, (0x7FFFFFF0).to_bytes(4, "big"))
    elif how == "bad-magic":
        _damage(path, 1, pos + 4, b"XXXX")
    elif how == "zero-length":
        _damage(path, 1, pos, b"\0\0\0\0")
    elif how == "field-overrun":
        _damage(path, 1, pos + 8, b"\xff\xff")          # MessageID length (u16) far past the record
    else:
        f = sorted((path / "commitlog").iterdir())[1]
        with open(f, "r+b") as fh:
            fh.truncate(pos + 10)
    opts = DumpOptions()
    whole = lite_whole(path, opts)
    assert 0 < len(whole) < 133
    assert whole[-1]["offset"] < 131072 + pos                 # the live data ends at the damage
    for split in (64, 1024, 8192, None):
        assert lite_jobs_inline(path, split, opts) == whole, split
        if how != "field-overrun":      # documented limit of independent ranges (docs/spark.md)
            assert lite_union(path, split, opts) == whole, split


@given(data=st.data())
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_litemq_random_damage(data):
    src = lite_path("crash").parent
    with tempfile.TemporaryDirectory() as td:
        path = copy_tree(src, Path(td) / "data") / "broker"
        files = sorted((path / "commitlog").iterdir())
        for _ in range(data.draw(st.integers(1, 4))):
            f = data.draw(st.sampled_from(files))
            size = f.stat().st_size
            pos = data.draw(st.integers(0, size - 1))
            blob = data.draw(st.binary(min_size=1, max_size=8))
            with open(f, "r+b") as fh:
                fh.seek(pos)
                fh.write(blob[:size - pos])
        split = data.draw(st.integers(64, 70_000))
        whole = lite_whole(path, DumpOptions())
        assert lite_jobs_inline(path, split, DumpOptions()) == whole
        # and the same notes / damage count (exit code) as one process
        assert _notes(path, DumpOptions(runner=InlineRunner(), split_size=split))[1:] == \
            _notes(path, DumpOptions())[1:]


def test_litemq_cli_jobs_equal_one_process(run_cli):
    path = lite_path("clean")
    code1, out1, _ = run_cli("dump", "commitlog", path, "--json", "--jobs", "1", "--body", "hex")
    code2, out2, _ = run_cli("dump", "commitlog", path, "--json", "--jobs", "2", "--split-size", "1K",
                             "--body", "hex")
    assert code1 == code2 == 0
    assert out1 == out2 and out1.count("\n") == 133


# ---- Kafka ----------------------------------------------------------------------------------------

DEEP = DumpOptions(deep=True, print_data=True, body="base64")


@pytest.mark.parametrize("name", KAFKA_STORES)
def test_kafka_union_equals_whole_scan(name):
    path = require_realdata("kafka", name)
    for opts in (DumpOptions(), DEEP):
        whole = kafka_whole(path, opts)
        for split in (64, 1024, 64 * 1024, None):
            assert kafka_union(path, split, opts) == whole, (split, opts.deep)


def test_kafka_rows_carry_topic_and_partition():
    path = require_realdata("kafka", "generated-4.0.0-SNAPSHOT")
    rows = [r for rng in KR.plan(path, 4096) for r in KR.iter_range_rows(rng, DumpOptions())]
    tp = {(r["topic"], r["partition"]) for r in rows}
    assert ("forensics", 0) in tp and ("__consumer_offsets", 0) in tp


@given(split=st.integers(min_value=64, max_value=100_000))
@settings(max_examples=20, deadline=None)
def test_kafka_random_split_sizes(split):
    path = require_realdata("kafka", "kaipasubhash-kafka-logs-2022")
    assert kafka_union(path, split, DEEP) == kafka_whole(path, DEEP)


@given(data=st.data())
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_kafka_random_damage(data):
    src = require_realdata("kafka", "kafka-python-3.0.12-patched")
    with tempfile.TemporaryDirectory() as td:
        path = copy_tree(src, Path(td) / "k")
        logs = sorted(p for p in path.rglob("*.log") if p.stat().st_size > 0)
        for _ in range(data.draw(st.integers(1, 4))):
            f = data.draw(st.sampled_from(logs))
            size = f.stat().st_size
            pos = data.draw(st.integers(0, size - 1))
            blob = data.draw(st.binary(min_size=1, max_size=12))
            with open(f, "r+b") as fh:
                fh.seek(pos)
                fh.write(blob[:size - pos])
        if data.draw(st.booleans()):
            f = data.draw(st.sampled_from(logs))
            with open(f, "r+b") as fh:
                fh.truncate(data.draw(st.integers(0, f.stat().st_size)))
        split = data.draw(st.integers(64, 20_000))
        for opts in (DumpOptions(), DEEP):
            assert kafka_union(path, split, opts) == kafka_whole(path, opts)


def test_kafka_damaged_copy_has_damage_rows(tmp_path):
    src = require_realdata("kafka", "kaipasubhash-kafka-logs-2022")
    path = copy_tree(src, tmp_path / "k")
    log = max(path.rglob("*.log"), key=lambda p: p.stat().st_size)
    batches = [r for r in kafka_whole(log, DumpOptions()) if r["kind"] == "batch"]
    mid = batches[len(batches) // 2]
    with open(log, "r+b") as fh:
        fh.seek(mid["position"] + 8)                         # batchLength (after baseOffset)
        fh.write(b"\x00\x00\x00\x05")
        fh.seek(mid["position"] + mid["size"] + 30)          # and a bad CRC in the next batch's payload
        fh.write(b"\xde\xad\xbe\xef")
    whole = kafka_whole(path, DumpOptions())
    assert any(r["kind"] == "damage" and r["position"] == mid["position"] for r in whole)
    for split in (64, 1024, 4096):
        assert kafka_union(path, split, DumpOptions()) == whole


def test_kafka_bad_crc_run_across_range_boundaries(tmp_path):
    """Three adjoining batches whose CRCs fail (a flipped byte in the last byte of each: records area), in
    the middle of a real segment: the whole walk reads each (crc_ok false, no damage row), and the ranges of
    every split (boundaries inside and between the three) give the same rows."""
    src = require_realdata("kafka", "kaipasubhash-kafka-logs-2022")
    path = copy_tree(src, tmp_path / "k")
    log = max(path.rglob("*.log"), key=lambda p: p.stat().st_size)
    batches = [r for r in kafka_whole(log, DumpOptions()) if r["kind"] == "batch"]
    k = len(batches) // 2
    run = batches[k:k + 3]
    assert [a["position"] + a["size"] for a in run[:2]] == [b["position"] for b in run[1:]]    # adjoining
    with open(log, "r+b") as fh:
        for b in run:
            fh.seek(b["position"] + b["size"] - 1)
            last = fh.read(1)[0]
            fh.seek(b["position"] + b["size"] - 1)
            fh.write(bytes([last ^ 0x10]))
    whole = kafka_whole(path, DumpOptions())
    got = [(r["position"], r["crc_ok"]) for r in whole if r["kind"] == "batch" and r["file"] == str(log)]
    assert got == [(b["position"], b not in run) for b in batches]
    assert not [r for r in whole if r["kind"] == "damage"]
    for split in (64, 1024, 4096, run[1]["position"] - run[0]["position"] + 3):
        assert kafka_union(path, split, DumpOptions()) == whole, split


def test_kafka_cli_jobs_equal_one_process(run_cli):
    path = require_realdata("kafka", "volodymyrzee-kafka-zk-2020")
    code1, out1, _ = run_cli("dump", "kafka", path, "--json", "--deep", "--jobs", "1")
    code2, out2, _ = run_cli("dump", "kafka", path, "--json", "--deep", "--jobs", "2", "--split-size", "4K")
    assert code1 == code2
    assert out1 == out2 and out1.count("\n") > 2000


def _notes(path, jobs_opts) -> tuple[list, int, list]:
    stats = ScanStats()
    from mqtool.litemq.ops import dump

    rows = list(dump("commitlog", path, jobs_opts, stats)[1])
    return rows, stats.damaged, stats.notes


@pytest.mark.parametrize("how", ["bad-length", "zero-length", "length-mismatch", "regression", "clean"])
def test_litemq_jobs_notes_equal_one_process(tmp_path, how):
    """--jobs gives the walk's notes and damage count too (so the exit code), not only its rows."""
    path = copy_tree(lite_path("crash").parent, tmp_path / "data") / "broker"
    rec = _lite_rec(path, 2, 3)
    pos = rec["position"]
    if how == "bad-length":
        _damage(path, 2, pos, (0x7FFFFFF0).to_bytes(4, "big"))
    elif how == "zero-length":
        _damage(path, 2, pos, b"\0\0\0\0")
    elif how == "length-mismatch":
        _damage(path, 2, pos, (rec["size"] - 4 + 6).to_bytes(4, "big"))
    elif how == "regression":
        # StoreTimestamp lies 32 bytes before the end of the encoded fields (QueueID..ConsumeCount tail)
        from formats import litemq as F
        end = pos + rec["size"] - F.TRAILING_PAD
        _damage(path, 2, end - 4 - 8 - 8 - 8, (1).to_bytes(8, "big"))
    whole, dmg1, notes1 = _notes(path, DumpOptions(ndjson=True))
    for split in (64, 1000, 16384):
        rows, dmg2, notes2 = _notes(path, DumpOptions(runner=InlineRunner(), split_size=split))
        assert [r for r in rows] == lite_whole(path, DumpOptions())
        assert (dmg2, notes2) == (dmg1, notes1), split
    if how == "clean":
        assert dmg1 == 0
    else:
        assert dmg1 > 0


def test_kafka_jobs_unreadable_file_is_a_note(tmp_path, run_cli):
    import os

    path = copy_tree(require_realdata("kafka", "kafka-python-3.0.12-patched"), tmp_path / "k")
    os.mkfifo(path / "kp-0" / "00000000000000000099.log")
    c1, out1, err1 = run_cli("dump", "kafka", path, "--json", "--jobs", "1")
    c2, out2, err2 = run_cli("dump", "kafka", path, "--json", "--jobs", "2", "--split-size", "1K")
    assert c1 == c2 == 1 and out1 == out2 and err1 == err2 and "file-unreadable" in err1
