"""RocketMQ verify cut into Spark tasks (mqtool.rocketmq.verifyplan, what ``verify --engine spark`` runs on the
executors) and merged on the driver gives the findings and summary of the one-process verify, finding by
finding. The tasks run in this process here (tests/test_common_spark_verify.py runs them on Spark), so every
per-entry Python loop of the consume-queue and index checks is counted wherever the plan puts it: on a clean
store they run exactly where the embedded verify runs them (the range tasks bring the commitlog pass's
cross-reference table back and the driver checks the files against it, as the embedded verify does): on no
index file and on no queue the table proves clean, only on those it does not cover (the schedule topic's and
LMQ queues, and here one queue of messages the table does not prove). Ranges that bring no table back (an
executor without the compiled lane) send the files to tasks, with the same findings. A store of at most
WHOLE_STORE_MAX bytes of commitlog is one task (the embedded verify itself) unless a split size is asked for;
the tests of the ranges set it to 0."""
from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from conftest import require_realdata
from formats import rocketmq as F
from mqtool.options import VerifyOptions
from mqtool.rocketmq import indexfiles
from mqtool.rocketmq import verifyplan as VP
from mqtool.rocketmq.ops import verify as embedded
from mqtool.rocketmq.verify import index as VIDX, native_lane

pytestmark = pytest.mark.skipif(native_lane.new_xref() is None,
                                reason="compiled helper rmqverify not built (tests/test_common_native.py fails "
                                       "under CI when it is missing)")


class _InProcess:
    """The runner the merge gets for follow-up tasks (Spark's TaskRunner.imap), here in this process."""

    jobs = 2

    def __init__(self):
        self.follow_ups = 0

    def imap(self, fn, items):
        items = list(items)
        self.follow_ups += len(items)
        return map(fn, items)


class _Loops:
    """Per-entry Python loops: consume-queue unit iterations by topic, index entry checks by file."""

    def __init__(self, monkeypatch):
        self.queues: Counter = Counter()
        self.index_files = 0
        units, entries = indexfiles.iter_cq_units, VIDX._check_entries

        def counted_units(qf, *a, **kw):
            self.queues[qf.topic] += 1
            return units(qf, *a, **kw)

        def counted_entries(*a):
            self.index_files += 1
            return (yield from entries(*a))

        monkeypatch.setattr(indexfiles, "iter_cq_units", counted_units)
        monkeypatch.setattr(VIDX, "_check_entries", counted_entries)

    def take(self) -> tuple[Counter, int]:
        got = self.queues.copy(), self.index_files
        self.queues.clear()
        self.index_files = 0
        return got


def _render(findings, summary_fn):
    rows = [f.to_dict() for f in findings]
    return json.dumps(rows, sort_keys=True, default=str), json.dumps(summary_fn().to_dict(), sort_keys=True,
                                                                    default=str)


def same(path, part="store", strip_tables=False, **kw) -> _InProcess:
    """Embedded (one process) == the plan's tasks run here + the merge; returns the merge's runner."""
    opts = VerifyOptions(**kw)
    want = _render(*embedded(part, str(path), VerifyOptions(jobs=1, **kw)))
    plan = VP.plan(part, str(path), opts)
    plan.ahead(64)              # (what the Spark job does before its tasks: a no-op below AHEAD_MIN_BYTES)
    results = [fn(arg) for fn, arg, _ in plan.tasks]
    if strip_tables:
        for r in results:
            if hasattr(r, "xref"):
                r.xref = None
    runner = _InProcess()
    got = _render(*plan.merge(results, runner))
    assert got[0] == want[0], path
    assert got[1] == want[1], path
    return runner


def _real_stores() -> list[Path]:
    stores = sorted(p for p in require_realdata("rocketmq").glob("*/store") if p.is_dir())
    assert len(stores) >= 10
    return stores


def test_clean_store_loops_only_where_embedded_does(monkeypatch):
    monkeypatch.setattr(VP, "WHOLE_STORE_MAX", 0)
    store = require_realdata("rocketmq", "gen-5.1.4-clean", "store")
    plan = VP.plan("store", str(store), VerifyOptions())
    queues = [qf.topic for qf in plan.store.queues()]
    assert plan.store.index_files and any(t != F.SCHEDULE_TOPIC for t in queues)
    loops = _Loops(monkeypatch)
    _render(*embedded("store", str(store), VerifyOptions(jobs=1)))
    want = loops.take()
    assert want[1] == 0 and sum(want[0].values()) <= len(queues) // 2, want      # the table proves most files
    assert F.SCHEDULE_TOPIC in want[0]
    for split in (None, 16 << 10):           # one range per segment, and many (their tables merged in order)
        same(store, split_size=split)
        loops.take()
        plan = VP.plan("store", str(store), VerifyOptions(split_size=split))
        results = [fn(arg) for fn, arg, _ in plan.tasks]
        _render(*plan.merge(results, _InProcess()))
        assert loops.take() == want, split
    # the count sees the loops when they run: without the table the plan checks every file entry by entry
    monkeypatch.setattr(native_lane, "USE_FAST_LANE", False)
    plan = VP.plan("store", str(store), VerifyOptions())
    _render(*plan.merge([fn(arg) for fn, arg, _ in plan.tasks], _InProcess()))
    q, idx = loops.take()
    assert idx == len(plan.store.index_files) and sum(q.values()) >= len(queues)


@pytest.mark.parametrize("strip_tables", [False, True])
def test_every_real_store_and_part(strip_tables, monkeypatch):
    monkeypatch.setattr(VP, "WHOLE_STORE_MAX", 0)
    monkeypatch.setattr(VIDX, "AHEAD_MIN_BYTES", 0)      # the index chains ahead on every store (and embedded)
    for p in _real_stores():
        for part in ("store", "commitlog", "consumequeue", "index"):
            runner = same(p, part, strip_tables=strip_tables, split_size=64 << 10)
            if part == "store" and not strip_tables:
                assert runner.follow_ups == 0, p         # nothing checked again in another job


def test_small_store_is_one_task_unless_a_split_size_is_asked_for():
    for p in _real_stores():
        for part in ("store", "commitlog", "consumequeue", "index"):
            plan = VP.plan(part, str(p), VerifyOptions())
            if plan.store.segments:        # (a store of only queue files has no commitlog to size)
                assert [fn for fn, _, _ in plan.tasks] == [VP.whole_task], (p, part)
                assert same(p, part).follow_ups == 0
            plan = VP.plan(part, str(p), VerifyOptions(split_size=1 << 20))
            assert VP.whole_task not in [fn for fn, _, _ in plan.tasks]


def test_cut_commitlog_without_tables(tmp_path, monkeypatch):
    monkeypatch.setattr(VP, "WHOLE_STORE_MAX", 0)
    """Units past the end of data (cq-dangling) when the files go to tasks (ranges without tables): the
    queues are checked with the end known, the index files in one more job, as embedded."""
    store = tmp_path / "store"
    shutil.copytree(require_realdata("rocketmq", "gen-5.1.4-clean", "store"), store)
    seg = sorted((store / "commitlog").iterdir())[-1]
    data = seg.read_bytes()
    seg.write_bytes(data[:len(data) // 3] + bytes(len(data) - len(data) // 3))
    for strip in (False, True):
        runner = same(store, strip_tables=strip)
        assert (runner.follow_ups > 0) == strip


def _range_tasks(plan) -> list:
    return [(fn, arg) for (fn, arg, _), (kind, _) in zip(plan.tasks, plan.kinds) if kind == "range"]


@pytest.mark.parametrize("reachable", [True, False, "mixed"])
def test_tables_left_as_files_or_sent_compressed(reachable, monkeypatch):
    """A range task that sees the driver's handoff directory (its token there: local executors) leaves its
    table there as a file and sends back only its name; one that does not (an executor on another machine,
    simulated by a copy of the handoff whose token the directory does not hold) sends it zstd-compressed;
    a cluster with executors on both kinds of machine mixes the two. Every way the merged table is the one
    the plain exports give, byte for byte, the findings are the embedded ones, and the directory is gone
    after the merge."""
    import pickle

    monkeypatch.setattr(VP, "WHOLE_STORE_MAX", 0)
    store = require_realdata("rocketmq", "gen-5.1.4-clean", "store")
    want = _render(*embedded("store", str(store), VerifyOptions(jobs=1)))
    plan = VP.plan("store", str(store), VerifyOptions(split_size=16 << 10))
    tasks = _range_tasks(plan)
    assert len(tasks) > 2 and all(fn is VP.range_task for fn, _ in tasks)
    near = pickle.loads(pickle.dumps(plan.handoff))      # what an executor gets
    far = pickle.loads(pickle.dumps(plan.handoff))
    far.token = "not-the-driver-s"
    away = [near if reachable is True or (reachable == "mixed" and i % 2) else far for i in range(len(tasks))]
    results = [fn((targs, h)) for (fn, (targs, _)), h in zip(tasks, away)]
    plain = [VP.verify_range_task(targs) for _, (targs, _) in tasks]
    assert [type(r.xref) for r in results] == [VP.LeftTable if h is near else VP.PackedTable for h in away]
    left = sorted(Path(plan.handoff.dir).iterdir())
    assert len(left) == 1 + away.count(near)          # the token, and one file per table left
    want_table = native_lane.new_xref(plan.store.segments)
    for r in plain:
        want_table.merge(r.xref)
    kept = [r.xref for r in results]
    got_table = VP._merged_xref(plan.store, results, plan.handoff)
    assert got_table.export() == want_table.export()
    # each file is taken once: the directory holds only the token now
    assert sorted(Path(plan.handoff.dir).iterdir()) == [Path(plan.handoff.dir) / "token"]
    for t, r in zip(kept, plain):
        if isinstance(t, VP.LeftTable):
            assert t.size == len(r.xref)
        else:
            assert len(t.data) < len(r.xref)
    # the whole merge (the tasks again: the merge above took the files)
    results = [fn((targs, h)) for (fn, (targs, _)), h in zip(tasks, away)]
    assert _render(*plan.merge(results, _InProcess())) == want
    assert not Path(plan.handoff.dir).exists()


def test_a_vanished_table_file_sends_the_files_to_tasks(monkeypatch):
    """A table file that is gone when the driver merges (e.g. a cleaner emptied the temp directory) is no
    table: the queue and index files go to tasks, with the embedded findings."""
    monkeypatch.setattr(VP, "WHOLE_STORE_MAX", 0)
    store = require_realdata("rocketmq", "gen-5.1.4-clean", "store")
    want = _render(*embedded("store", str(store), VerifyOptions(jobs=1)))
    plan = VP.plan("store", str(store), VerifyOptions(split_size=16 << 10))
    results = [fn(arg) for fn, arg, _ in plan.tasks]
    left = [r.xref for r in results if isinstance(getattr(r, "xref", None), VP.LeftTable)]
    assert len(left) > 2
    (Path(plan.handoff.dir) / left[len(left) // 2].name).unlink()
    runner = _InProcess()
    assert _render(*plan.merge(results, runner)) == want
    assert runner.follow_ups > 0
    assert not Path(plan.handoff.dir).exists()


def test_index_chains_run_ahead_on_the_driver_while_the_tasks_run(monkeypatch):
    """``plan.ahead()`` (called by the Spark job before its tasks) starts the index files' geometry and chain
    checks on a driver thread; the merge takes them (and runs the entry checks on that thread during the
    queue checks, against the merged table), as the embedded verify does during its commitlog pass: every
    index file is taken from it, proven clean there, and the findings are the embedded ones. Without the
    tables (an executor without the compiled lane) nothing is started."""
    monkeypatch.setattr(VP, "WHOLE_STORE_MAX", 0)
    monkeypatch.setattr(VIDX, "AHEAD_MIN_BYTES", 0)
    store = require_realdata("rocketmq", "gen-5.1.4-clean", "store")
    taken, real = [], VIDX.ChainsAhead.take
    monkeypatch.setattr(VIDX.ChainsAhead, "take", lambda self, p: taken.append((self, real(self, p))) or taken[-1][1])
    want = _render(*embedded("store", str(store), VerifyOptions(jobs=1)))
    embedded_ahead = {id(a) for a, _ in taken}
    taken.clear()
    plan = VP.plan("store", str(store), VerifyOptions(split_size=16 << 10))
    assert plan.ahead(0) == 0 and plan.index_ahead is None                  # over the file budget
    assert plan.ahead(64) == len(plan.store.index_files) > 0
    ahead = plan.index_ahead
    results = [fn(arg) for fn, arg, _ in plan.tasks]
    assert _render(*plan.merge(results, _InProcess())) == want
    assert embedded_ahead and len(taken) == len(plan.store.index_files)
    assert all(a is ahead and t is not None and t[2] not in (VIDX.UNCHECKED, None) for a, t in taken)
    monkeypatch.setattr(native_lane, "USE_FAST_LANE", False)
    plan = VP.plan("store", str(store), VerifyOptions(split_size=16 << 10))
    assert plan.ahead(64) == 0 and plan.index_ahead is None
