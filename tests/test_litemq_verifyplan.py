"""LiteMQ verify cut into commitlog range tasks (mqtool.litemq.verifyplan, what ``verify --engine spark`` runs on
the executors) and folded in order on the driver gives the findings and summary of the one-process verify
(mqtool.litemq.ops.verify), finding by finding: on every real LiteMQ store, each verify part, ranges down to
4 KiB (so several per file, every range hopping to its first record), and on damaged copies made by the
corruption matrix's damage makers (tools/corruption: bit flips, a record cut mid-way, zeroed pages, inserted
garbage, a deleted middle segment, a restart's stale overwrite, consume-queue damage). The tasks run in this
process here (tests/test_common_spark_verify.py runs them on Spark)."""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from conftest import ROOT, require_realdata
from mqtool.litemq import verifyplan as VP
from mqtool.litemq.ops import verify as embedded
from mqtool.options import VerifyOptions

sys.path.insert(0, str(ROOT))


def _render(findings, summary_fn):
    return (json.dumps([f.to_dict() for f in findings], sort_keys=True, default=str),
            json.dumps(summary_fn().to_dict(), sort_keys=True, default=str))


def same(path, part="store", split=None) -> int:
    """Embedded == range tasks + fold; returns the number of tasks."""
    opts = VerifyOptions(split_size=split)
    want = _render(*embedded(part, str(path), VerifyOptions()))
    plan = VP.plan(part, str(path), opts)
    got = _render(*plan.merge([fn(arg) for fn, arg, _ in plan.tasks], None))
    assert got[0] == want[0], (path, part, split)
    assert got[1] == want[1], (path, part, split)
    return len(plan.tasks)


def _stores() -> list[Path]:
    return [require_realdata("litemq", n, "data", "broker") for n in ("clean", "crash")]


@pytest.mark.parametrize("part", ["store", "commitlog", "consumequeue", "index"])
def test_every_real_store(part):
    for p in _stores():
        files = len(list((p / "commitlog").iterdir()))
        assert same(p, part) >= files                  # at least one task per commitlog file
        assert same(p, part, 4096) > files             # several per file


def test_damaged_copies(tmp_path):
    from tools.corruption import load_adapter

    adapter = load_adapter("litemq")
    for src in _stores():
        msgs = adapter.messages(src)
        kinds: dict = {}
        for ev in adapter.events(src, msgs):
            if kinds.get(ev.kind, 0) >= 2:          # two events of every kind per store
                continue
            kinds[ev.kind] = kinds.get(ev.kind, 0) + 1
            copy = tmp_path / f"{src.parent.parent.name}-{ev.kind}-{kinds[ev.kind]}"
            shutil.copytree(src, copy, symlinks=True)
            for p in [copy, *copy.rglob("*")]:
                if not p.is_symlink():
                    p.chmod(0o755 if p.is_dir() else 0o644)
            ev.apply(copy)
            same(copy)
            same(copy, "commitlog", 4096)
        assert {"truncate-mid-record", "zero-page", "stale-overwrite", "delete-middle-segment"} <= set(kinds), kinds
