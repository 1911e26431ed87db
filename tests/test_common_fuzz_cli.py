"""A short smoke of the CLI fuzzer (fuzz/cli.py): mutated fixture stores of every family, every verb, helpers
on and off. The long run and its counts are in docs/hardening.md."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fuzz import cli as F  # noqa: E402

def _check(stats):
    assert stats.cases > 0 and stats.runs == stats.cases * 14
    assert set(stats.exits) <= {0, 1, 2}
    assert not stats.failures, "\n\n".join(stats.failures[:5])


def test_cli_fuzz_smoke():
    """~40 s on an idle core: as many cases as fit, deterministic per case (seed 2026 + case number)."""
    budget = float(os.environ.get("MQTOOL_CLI_FUZZ_SECONDS", "40"))
    _check(F.fuzz(seconds=budget, seed=2026))


def test_mutations_change_the_store(tmp_path):
    """The harness can fail: every mutation changes the bytes of the store."""
    import random
    import shutil

    for k in range(30):
        store = shutil.copytree(F.STORES["rocketmq"], tmp_path / f"s{k}")
        before = {p: p.read_bytes() for p in store.rglob("*") if p.is_file()}
        what = F.mutate(random.Random(k), store)
        after = {p: p.read_bytes() for p in store.rglob("*") if p.is_file()}
        assert before != after or "flip" not in what, what


def test_an_uncaught_exception_is_reported(monkeypatch):
    """A verb that raises is a failure with the case and its seed (the checks can fail)."""
    import mqtool.manifest as manifest

    def boom(*a, **k):
        raise KeyError("planted")

    monkeypatch.setattr(manifest, "manifest_rows", boom)
    stats = F.fuzz(cases=1, seed=5, families=("rocketmq",))
    assert any("uncaught KeyError" in f and "seed 5" in f for f in stats.failures), stats.failures


# Regression inputs the fuzzer found (replayed by case number and seed): Kafka tracebacks of issue #16 item 5.
@pytest.mark.parametrize("case", [116, 497])
def test_fuzzer_found_kafka_tracebacks(case):
    stats = F.Stats()
    F.one_case(case, 1, stats)
    assert not stats.failures, stats.failures
