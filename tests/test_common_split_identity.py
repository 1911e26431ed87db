"""Identical output for every --jobs and --split-size, on damaged stores of every family.

The CLI runs in-process; ``--jobs 2`` runs its byte ranges through an in-process runner (the range plan, the
range readers and the merge are the ones a process pool runs; ``tests/test_rocketmq_ranges.py`` covers the pool
itself, and one case below uses the real pool). Expected output: the same command with ``--jobs 1``.
"""
from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

from conftest import FIXTURES, ROOT

STORES = {"rocketmq": FIXTURES / "rocketmq" / "store", "litemq": FIXTURES / "litemq" / "store",
          "kafka": FIXTURES / "kafka" / "logdir"}


@pytest.fixture
def inline_pool(monkeypatch):
    from mqtool import ranges

    class Inline(ranges.InlineRunner):
        def __init__(self, jobs, window=None):
            self.jobs = jobs            # > 1: the commands take their range path, as with a pool

    monkeypatch.setattr(ranges, "PoolRunner", Inline)


def _logs(store: Path) -> list[Path]:
    return sorted(p for p in store.rglob("*") if p.is_file() and (p.parent.name == "commitlog" or p.suffix == ".log")
                  and p.stat().st_size)


def _damage(store: Path, how: str, pick: int, where: float, n: int, seed: int) -> None:
    logs = _logs(store)
    victim = logs[pick % len(logs)]
    data = bytearray(victim.read_bytes())
    end = len(data.rstrip(b"\0")) or len(data)
    i = int(where * end)
    if how == "delete":
        del data[i:i + n]
        data += bytes(n)                 # a preallocated file keeps its size; the hole moves to the end
    elif how == "insert":
        data[i:i] = random.Random(seed).randbytes(n)
    else:                                # zeroed page(s)
        data[i:i + 64 * n] = bytes(len(data[i:i + 64 * n]))
    victim.write_bytes(bytes(data))


def _commands(family: str, store: Path) -> list[list[str]]:
    dump = ["dump", "kafka", str(store / "fixture-0"), "--json"] if family == "kafka" else \
        ["dump", "commitlog", str(store), "--json", "--include-blank"]
    return [dump, ["verify", "store", str(store), "--json"]]


def _run(args):
    from click.testing import CliRunner

    from mqtool.cli import cli

    r = CliRunner().invoke(cli, args, catch_exceptions=False)
    return r.exit_code, r.stdout, r.stderr


@pytest.mark.parametrize("family", sorted(STORES))
@settings(max_examples=40, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(how=st.sampled_from(["delete", "insert", "zero"]), pick=st.integers(0, 7), where=st.floats(0, 1),
       n=st.integers(1, 64), seed=st.integers(0, 1 << 16),
       split=st.one_of(st.integers(64, 600), st.sampled_from([1024, 4096, 65536])))
@example(how="delete", pick=0, where=0.5, n=11, seed=0, split=64)      # the case (RocketMQ)
@example(how="delete", pick=1, where=0.3, n=9, seed=0, split=100)
def test_jobs_and_split_size_do_not_change_output(inline_pool, family, how, pick, where, n, seed, split):
    with tempfile.TemporaryDirectory() as d:
        store = Path(shutil.copytree(STORES[family], Path(d) / "store"))
        _damage(store, how, pick, where, n, seed)
        for args in _commands(family, store):
            one = _run(args + ["--jobs", "1"])
            many = _run(args + ["--jobs", "2", "--split-size", str(split)])
            assert many == one, (args[:2], how, n, split)


def test_eleven_bytes_deleted_mid_segment_real_pool(tmp_path):
    """The issue's case: 11 bytes deleted in the middle of a RocketMQ segment. One process reports bad-magic
    and skips the unit the deletion shifted into its predecessor; a range starting between them must not
    emit that unit (it overlaps the previous one). Real worker processes, several split sizes."""
    store = shutil.copytree(STORES["rocketmq"], tmp_path / "store")
    seg = sorted((store / "commitlog").iterdir())[0]
    data = seg.read_bytes()
    mid = len(data.rstrip(b"\0")) // 2
    seg.write_bytes(data[:mid] + data[mid + 11:] + bytes(11))

    def run(*extra):
        return subprocess.run([sys.executable, "-m", "mqtool", "dump", "commitlog", str(store), "--json", *extra],
                              capture_output=True, text=True, cwd=ROOT, timeout=120)

    one = run("--jobs", "1")
    assert one.returncode == 1 and "bad-magic" in one.stderr
    rows = [json.loads(x) for x in one.stdout.splitlines()]
    assert all(a["offset"] + a["size"] <= b["offset"] for a, b in zip(rows, rows[1:]))      # no overlap
    for split in ("64", "100", "1K"):
        many = run("--jobs", "2", "--split-size", split)
        assert (many.returncode, many.stdout, many.stderr) == (one.returncode, one.stdout, one.stderr), split
