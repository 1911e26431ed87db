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
