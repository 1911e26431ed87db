"""Kafka verify cut into per-segment tasks (mqtool.kafka.verifyplan, what ``verify --engine spark`` runs on the
executors) and folded in order on the driver gives the findings and summary of the one-process verify
(mqtool.kafka.ops.verify), finding by finding: on every real Kafka store, on generated multi-segment partitions
(transactions open across a roll, leader epochs) and on damaged copies (a corrupt batch at the start of the 2nd
segment, an offset gap across a segment boundary, an overlap, a truncated last segment, a missing index).
The tasks run in this process here (tests/test_common_spark_verify.py runs them on Spark). Segments whose start
depends on what came before beyond the fold's rules are checked again on the driver: counted, and required to
be none where nothing crosses a boundary."""
from __future__ import annotations

import contextlib
import json
import shutil
from pathlib import Path

import pytest

from builders import kafka_multisegment_store, kafka_shift_segment
from conftest import require_realdata
from mqtool.kafka import verifyplan as VP
from mqtool.kafka.ops import verify as embedded
from mqtool.kafka.verify import KafkaVerifier
from mqtool.options import VerifyOptions


def _render(findings, summary_fn):
    rows = [f.to_dict() for f in findings]
    return json.dumps(rows, sort_keys=True, default=str), json.dumps(summary_fn().to_dict(), sort_keys=True,
                                                                    default=str)


class Executors:
    """Stands in for Spark's executors (``runner.imap``: the merge's follow-up tasks); while it is not running
    a task, every ``.log`` or ``.txnindex`` check is one the driver runs itself, counted in ``driver_scans``."""

    def __init__(self):
        self.tasks = 0
        self.busy = False
        self.driver_scans = 0

    def imap(self, fn, items):
        items = list(items)
        self.tasks += len(items)
        self.busy = True
        try:
            return [fn(it) for it in items]
        finally:
            self.busy = False

    @contextlib.contextmanager
    def watching(self):
        saved = {name: getattr(KafkaVerifier, name) for name in ("check_log", "check_txn_index")}

        def counted(fn):
            def check(verifier, *a, **kw):
                if not self.busy:
                    self.driver_scans += 1
                return fn(verifier, *a, **kw)
            return check

        for name, fn in saved.items():
            setattr(KafkaVerifier, name, counted(fn))
        try:
            yield self
        finally:
            for name, fn in saved.items():
                setattr(KafkaVerifier, name, fn)


def same(path, part="store", **kw) -> tuple[int, int]:
    """Embedded == per-segment tasks + merge; returns how many segments were checked again (follow-up tasks),
    and in how many the transactions open at their start were fed to the .txnindex check (again, in a
    follow-up task); the driver itself reads no segment file (no .log or .txnindex check outside a task)."""
    opts = VerifyOptions(**kw)
    want = _render(*embedded(part, str(path), opts))
    plan = VP.plan(part, str(path), opts)
    ex = Executors()
    with ex.watching():
        ex.busy = True
        results = [fn(arg) for fn, arg, _ in plan.tasks]
        ex.busy = False
        got = _render(*plan.merge(results, ex))
    assert got[0] == want[0]
    assert got[1] == want[1]
    assert ex.driver_scans == 0 and plan.verifier.driver_checks == 0
    assert ex.tasks == plan.verifier.rechecked + (plan.verifier.replayed if part != "commitlog" else 0)
    return plan.verifier.rechecked, plan.verifier.replayed


def test_every_real_store_folds_without_rechecks():
    root = require_realdata("kafka")
    stores = sorted(p for p in root.iterdir() if p.is_dir())
    assert stores
    for p in stores:
        for part in ("store", "commitlog", "index"):
            assert same(p, part)[0] == 0, (p, part)


def test_generated_partition_and_a_transaction_across_a_roll(tmp_path):
    store = kafka_multisegment_store(tmp_path)
    plan = VP.plan("store", str(store), VerifyOptions())
    assert len(plan.tasks) == 4                    # one task per segment
    assert same(store) == (0, 1)            # the segment the open transaction runs into: its .txnindex again
    assert same(store, deep=True) == (0, 1)
    assert same(store, "commitlog")[0] == 0


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def _logs(store: Path) -> list[Path]:
    return sorted(store.rglob("*.log"))


@pytest.mark.parametrize("damage", ["corrupt-2nd-segment-head", "gap-at-boundary", "overlap-at-boundary",
                                    "overlap-at-every-boundary", "truncated-last", "missing-index",
                                    "zeroed-2nd-segment"])
def test_damaged_generated_partitions(tmp_path, damage):
    store = kafka_multisegment_store(tmp_path / "g")
    logs = _logs(store)
    if damage == "corrupt-2nd-segment-head":
        b = bytearray(logs[1].read_bytes())
        b[70] ^= 0x55                               # the first batch's records: its CRC fails
        logs[1].write_bytes(bytes(b))
    elif damage in ("gap-at-boundary", "overlap-at-boundary"):
        kafka_shift_segment(logs[2], 5 if damage == "gap-at-boundary" else -5)
    elif damage == "overlap-at-every-boundary":
        # each segment overlaps the one before: the 2nd recheck's start state follows from the 1st's
        for k in (1, 2, 3):
            kafka_shift_segment(logs[k], -5 * k)
    elif damage == "truncated-last":
        b = logs[-1].read_bytes()
        logs[-1].write_bytes(b[:len(b) - 30])
    elif damage == "missing-index":
        logs[1].with_suffix(".index").unlink()
    elif damage == "zeroed-2nd-segment":
        b = logs[1].read_bytes()
        logs[1].write_bytes(bytes(len(b)))
    counts = [same(store), same(store, "commitlog"), same(store, "index"), same(store, deep=True)]
    if damage == "overlap-at-every-boundary":
        assert all(c[0] == 3 for c in counts)
    elif damage in ("overlap-at-boundary", "gap-at-boundary", "corrupt-2nd-segment-head"):
        assert all(c[0] == 1 for c in counts)       # the segment starting below the last offset: again
    else:
        assert all(c[0] == 0 for c in counts)


def test_real_store_damaged_copies(tmp_path):
    """A corrupt batch at the start of the 2nd segment of a real multi-segment partition, a missing index, a
    truncated last segment."""
    src = require_realdata("kafka", "generated-4.0.0-SNAPSHOT")
    store = _copy(src, tmp_path / "k")
    for p in [store, *store.rglob("*")]:
        if not p.is_symlink():
            p.chmod(0o755 if p.is_dir() else 0o644)
    parts = {}
    for log in _logs(store):
        parts.setdefault(log.parent, []).append(log)
    multi = [logs for logs in parts.values() if len(logs) >= 2]
    assert multi
    logs = multi[0]
    b = bytearray(logs[1].read_bytes())
    b[min(len(b) - 1, 64)] ^= 0xFF
    logs[1].write_bytes(bytes(b))
    idx = logs[0].with_suffix(".index")
    if idx.exists():
        idx.unlink()
    b = logs[-1].read_bytes()
    logs[-1].write_bytes(b[:max(1, len(b) - 11)])
    same(store)
    same(store, deep=True)
