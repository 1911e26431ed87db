"""Distributed verify (``verify --engine spark``, issue #19 item 5) on Spark ``local[2]``: for every family the
NDJSON (findings with ids and causes, summaries, the total line) and the exit code equal those of the
embedded one-process verify (``--jobs 1``, the reference), byte for byte — on every real store, all stores
of a family in one run (one Spark job), each verify part, several split sizes, and on damaged copies made by
the corruption matrix's damage makers (tools/corruption). Skips like tests/test_spark.py without
pyspark/Java (fails under CI=true)."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from conftest import ROOT, require_realdata, require_spark

require_spark()     # the session-scoped local[2] fixture `spark` is in conftest

sys.path.insert(0, str(ROOT))

pytestmark = pytest.mark.spark


def _stores(family: str) -> list[str]:
    root = require_realdata(family)
    if family == "rocketmq":
        found = sorted(root.glob("*/store"))
    elif family == "litemq":
        found = sorted(root.glob("*/data/broker"))
    else:
        found = sorted(p for p in root.iterdir() if p.is_dir())
    assert found, f"no real {family} store"
    return [str(p) for p in found]


def same(run_cli, *args, split=None):
    """Embedded (one process) and Spark give the same exit code and stdout; returns them."""
    want = run_cli("verify", *args, "--json", "--jobs", "1")
    extra = ["--split-size", split] if split else []
    got = run_cli("verify", *args, "--json", "--engine", "spark", *extra)
    assert got[0] == want[0], (got[0], want[0], got[2][-2000:])
    assert got[1] == want[1]
    return want


@pytest.mark.parametrize("family", ["rocketmq", "litemq", "kafka"])
def test_every_real_store_one_run(run_cli, spark, family):  # noqa: F811
    paths = _stores(family)
    code, out, _ = same(run_cli, "store", *paths)
    assert out.count('"kind": "summary"') + out.count('"kind":"summary"') == len(paths)


@pytest.mark.parametrize("family", ["rocketmq", "litemq", "kafka"])
def test_every_real_store_alone(run_cli, spark, family):  # noqa: F811
    for p in _stores(family):
        same(run_cli, "store", p)


@pytest.mark.parametrize("part", ["commitlog", "consumequeue", "index"])
def test_rocketmq_parts_and_small_ranges(run_cli, spark, part):  # noqa: F811
    paths = _stores("rocketmq")
    same(run_cli, part, *paths, split="40K")


def test_rocketmq_store_small_ranges(run_cli, spark):  # noqa: F811
    same(run_cli, "store", *_stores("rocketmq"), split="4K")


def _damaged(family: str, tmp_path: Path, store: Path) -> list[str]:
    """Copies of ``store``, each damaged by the first event of every damage kind the family's corruption
    adapter offers (tools/corruption/<family>.py)."""
    from tools.corruption import load_adapter

    adapter = load_adapter(family)
    msgs = adapter.messages(store)
    kinds: set = set()
    out = []
    for ev in adapter.events(store, msgs):
        if ev.kind in kinds:
            continue
        kinds.add(ev.kind)
        copy = tmp_path / f"{len(out):02d}-{ev.kind}"
        shutil.copytree(store, copy, symlinks=True)
        for p in [copy, *copy.rglob("*")]:
            if not p.is_symlink():
                p.chmod(0o755 if p.is_dir() else 0o644)
        ev.apply(copy)
        out.append(str(copy))
    assert len(out) >= 6, kinds
    return out


@pytest.mark.parametrize("family,store", [
    ("rocketmq", ("rocketmq", "gen-4.9.7-kill", "store")),
    ("rocketmq", ("rocketmq", "gen-5.1.4-clean", "store")),
    ("litemq", ("litemq", "crash", "data", "broker")),
    ("kafka", ("kafka", "kafka-python-3.0.12-patched", "kp-0")),
    ("kafka", ("kafka", "generated-4.0.0-SNAPSHOT", "broker-append")),
])
def test_damaged_copies(run_cli, spark, tmp_path, family, store):  # noqa: F811
    paths = _damaged(family, tmp_path, require_realdata(*store))
    code, out, _ = same(run_cli, "store", *paths, split="16K" if family == "rocketmq" else None)
    assert code == 1 and '"severity": "error"' in out.replace('"severity":"error"', '"severity": "error"')


@pytest.mark.parametrize("split", [None, "64K"])
def test_cq_past_end_of_data_is_checked_again(run_cli, spark, tmp_path, split):  # noqa: F811
    """A commitlog cut short: consume-queue units past the new end of data are ``cq-dangling`` (the queue
    is checked a second time once the end is known), the same findings as embedded -- as one task, and as
    ranges whose tables the driver checks the queues against."""
    store = tmp_path / "store"
    shutil.copytree(require_realdata("rocketmq", "gen-5.1.4-clean", "store"), store)
    seg = sorted((store / "commitlog").iterdir())[-1]
    data = seg.read_bytes()
    seg.write_bytes(data[:len(data) // 3] + bytes(len(data) - len(data) // 3))
    code, out, _ = same(run_cli, "store", str(store), split=split)
    assert code == 1 and "cq-dangling" in out


def test_not_a_store_among_stores(run_cli, spark, tmp_path):  # noqa: F811
    """A path that is no store stops the run at its turn, as embedded: earlier stores' output, then exit 2."""
    paths = _stores("rocketmq")[:1] + [str(tmp_path)]
    want = run_cli("verify", "store", *paths, "--json", "--jobs", "1")
    got = run_cli("verify", "store", *paths, "--json", "--engine", "spark")
    assert got[:2] == want[:2] and want[0] == 2


def test_kafka_per_segment_tasks_on_generated_and_damaged_partitions(run_cli, spark, tmp_path):  # noqa: F811
    """Kafka verify runs one task per segment (mqtool.kafka.verifyplan): a generated four-segment partition
    (a transaction open across a roll), and copies with a corrupt batch at the start of the 2nd segment, an
    offset gap across a segment boundary, a truncated last segment and a missing index, all in one run: the
    NDJSON and exit code of embedded verify."""
    from builders import kafka_multisegment_store

    paths = []
    for damage in ("none", "corrupt", "gap", "truncated", "no-index"):
        store = kafka_multisegment_store(tmp_path / damage)
        logs = sorted(store.rglob("*.log"))
        if damage == "corrupt":
            b = bytearray(logs[1].read_bytes())
            b[70] ^= 0x55
            logs[1].write_bytes(bytes(b))
        elif damage == "gap":
            logs[2].with_suffix(".index").unlink()
            logs[2].with_suffix(".timeindex").unlink()
            base = int(logs[2].stem)
            data = bytearray(logs[2].read_bytes())
            pos = 0
            while pos < len(data):
                data[pos:pos + 8] = (int.from_bytes(data[pos:pos + 8], "big") + 5).to_bytes(8, "big")
                pos += 12 + int.from_bytes(data[pos + 8:pos + 12], "big")
            logs[2].unlink()
            logs[2].with_name(f"{base + 5:020d}.log").write_bytes(bytes(data))
        elif damage == "truncated":
            b = logs[-1].read_bytes()
            logs[-1].write_bytes(b[:len(b) - 30])
        elif damage == "no-index":
            logs[1].with_suffix(".index").unlink()
        paths.append(str(store))
    code, out, _ = same(run_cli, "store", *paths)
    assert code == 1 and "kafka.segment-gap" in out and "kafka.crc-mismatch" in out


def test_kafka_rechecks_run_on_executors(run_cli, spark, tmp_path, monkeypatch):  # noqa: F811
    """Kafka segments whose checks depend on the segments before them — each overlapping the previous one, a
    corrupt first batch, a gap — are checked again by follow-up tasks, and KRaft snapshots by tasks of their
    own: the driver (this process; local[2]'s tasks run in Spark's Python workers) walks no ``.log`` and reads
    no ``.txnindex`` (both checks counted here), and the NDJSON is the embedded one byte for byte."""
    from builders import kafka_multisegment_store, kafka_shift_segment
    from mqtool.kafka.verify import KafkaVerifier

    paths = []
    for damage in ("overlaps", "corrupt", "gap"):
        store = kafka_multisegment_store(tmp_path / damage)
        logs = sorted(store.rglob("*.log"))
        if damage == "overlaps":
            for k in (1, 2, 3):
                kafka_shift_segment(logs[k], -5 * k)
        elif damage == "corrupt":
            b = bytearray(logs[1].read_bytes())
            b[70] ^= 0x55
            logs[1].write_bytes(bytes(b))
        else:
            kafka_shift_segment(logs[2], 5)
        paths.append(str(store))
    paths += _stores("kafka")
    scans = []
    for name in ("check_log", "check_txn_index"):
        def counted(self, *a, _fn=getattr(KafkaVerifier, name), _name=name, **kw):
            scans.append(_name)
            return _fn(self, *a, **kw)
        monkeypatch.setattr(KafkaVerifier, name, counted)
    want = run_cli("verify", "store", *paths, "--json", "--jobs", "1")
    assert "check_log" in scans and "check_txn_index" in scans     # the embedded walk, counted
    scans.clear()
    got = run_cli("verify", "store", *paths, "--json", "--engine", "spark")
    assert got[:2] == want[:2]
    assert want[0] == 1 and "kafka.offset-not-increasing" in want[1] and "kafka.crc-mismatch" in want[1]
    assert scans == []


def test_litemq_small_ranges(run_cli, spark):  # noqa: F811
    """LiteMQ verify as range tasks of 4 KiB (several per commitlog file, each hopping to its first record)."""
    same(run_cli, "store", *_stores("litemq"), split="4K")


def test_stores_in_several_jobs_when_their_tables_exceed_the_budget(run_cli, spark, monkeypatch):  # noqa: F811
    """A run whose results would hold more than JOB_DRIVER_BYTES on the driver (RocketMQ's cross-reference
    tables) runs in several jobs, each when the merge reaches it: the same output as embedded."""
    from mqtool.spark import verify as SV

    runs = []
    run = SV._Job.run

    def counted(job):
        runs.append(len(job.planned))
        return run(job)

    monkeypatch.setattr(SV._Job, "run", counted)
    monkeypatch.setattr(SV, "JOB_DRIVER_BYTES", 1)
    paths = _stores("rocketmq")[:3] + _stores("kafka")[:1]
    same(run_cli, "store", *paths, split="40K")   # (ranges: a small store without a split size is one task)
    assert runs == [1, 1, 1, 1]            # one store a job (a store alone may exceed the budget)
    runs.clear()
    monkeypatch.setattr(SV, "JOB_DRIVER_BYTES", 512 << 20)
    same(run_cli, "store", *paths, split="40K")
    assert runs == [4]


def test_partition_count_follows_the_work_not_only_the_cores():
    """Few big tasks are not cut into more partitions than their work pays for (each partition costs Spark
    ~40 ms of CPU of its own); small runs still get one partition per core; many tasks stop at 4 per core."""
    from mqtool.spark.verify import PARTITION_MIN_WEIGHT as M, pack, partitions_for

    big = [(None, i, 128 << 20) for i in range(16)]          # a 2 GiB commitlog in 128 MiB ranges
    assert partitions_for(big, 2) == 2                        # 2 GiB / 1 GiB: one per core, one wave
    assert len(pack(big, partitions_for(big, 2))) == 2
    assert partitions_for(big * 2, 2) == 4 and partitions_for(big, 8) == 8
    assert partitions_for([(None, 0, 10)], 2) == 2            # tiny: one per core (pack makes one group)
    assert partitions_for([(None, i, M) for i in range(100)], 2) == 8          # capped at 4 per core
    assert partitions_for([(None, i, M) for i in range(100)], 0) == 4          # unknown cores count as 1


def test_range_tables_come_back_as_files_on_local_executors(spark, monkeypatch):  # noqa: F811
    """On ``local[2]`` the executors share the driver's filesystem: every range task leaves its table in the
    driver's handoff directory and sends back only its name (nothing of the table crosses Spark); the
    output is the embedded one (test_rocketmq_verifyplan.py: the compressed way when the directory is out of
    reach, and a table file gone before the merge); the directory is gone afterwards."""
    from mqtool.options import VerifyOptions
    from mqtool.rocketmq import verifyplan as VP
    from mqtool.spark.verify import merged, verify_plans

    monkeypatch.setattr(VP, "WHOLE_STORE_MAX", 0)
    seen, merge = [], VP._merged_xref
    monkeypatch.setattr(VP, "_merged_xref", lambda store, ranges, handoff=None: (
        seen.append(([type(r.xref) for r in ranges], handoff.dir)) or merge(store, ranges, handoff)))
    import json

    from mqtool.rocketmq.ops import verify as embedded

    store = str(require_realdata("rocketmq", "gen-5.1.4-clean", "store"))
    opts = VerifyOptions(split_size=16 << 10)
    (p,) = verify_plans(spark, "store", [store], None, opts)
    findings, summary = merged(p)
    got = [json.dumps(f.to_dict(), sort_keys=True, default=str) for f in findings]
    want_f, want_s = embedded("store", store, VerifyOptions(jobs=1))
    assert got == [json.dumps(f.to_dict(), sort_keys=True, default=str) for f in want_f]
    assert summary().to_dict() == want_s().to_dict()
    (kinds, where), = seen
    assert len(kinds) > 2 and set(kinds) == {VP.LeftTable}
    assert not Path(where).exists()


def test_rocketmq_tables_merged_on_the_driver_past_the_memory_budget(run_cli, spark, monkeypatch):  # noqa: F811
    """The driver merges the range tasks' exported tables into one past its memory budget (budget 0: every
    array in the spill file, tests/test_rocketmq_verify_memory.py): the same output as embedded."""
    from mqtool.rocketmq.verify import native_lane

    made, new = [], native_lane.new_xref
    monkeypatch.setattr(native_lane, "new_xref", lambda *a, **k: made.append(new(*a, **k)) or made[-1])
    monkeypatch.setenv("MQTOOL_XREF_BUDGET_MB", "0")
    same(run_cli, "store", *_stores("rocketmq"), split="40K")
    assert any(x is not None and x.stats()["spilled"] for x in made)
