"""Generative hostile-input harness over every family and verb (``fuzz/cli.py --hostile``): seeded changes of
a fixture store's *shape* — a file replaced by a directory, FIFO, symlink loop or /dev/zero link; truncation
at field boundaries; hostile 4/8-byte fields (2^31-1, 2^31, 2^63-1, 2^63, -1, 0); zero-filled tails;
garbage; directory and file names holding terminal escapes and bytes that are not UTF-8 — then every verb
in-process (every dump kind, verify, query, info, rebuild-index, report, hash, carve, inspect, diff), some as
tables. Asserted for every run: no uncaught exception or traceback, exit code in {0, 1, 2}, an exit 2 is one
``mqtool: `` line on stderr, no raw control character on stderr or in a table.

Budget: ``MQTOOL_HOSTILE_FUZZ_SECONDS`` (default 15 s: about 40 cases, 600 runs on a loaded core); cases are
deterministic per seed and number, so a failure names what to replay (``fuzz/cli.py --hostile --seed S
--first K --cases 1``). The byte-mutation smoke is tests/test_common_fuzz_cli.py.
"""
from __future__ import annotations

import os
import random
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fuzz import cli as F  # noqa: E402


def test_hostile_store_shapes_every_verb():
    budget = float(os.environ.get("MQTOOL_HOSTILE_FUZZ_SECONDS", "15"))
    stats = F.fuzz(seconds=budget, seed=2027, hostile=True)
    assert stats.cases >= 3 and stats.runs > stats.cases * 10
    assert set(stats.exits) <= {0, 1, 2}
    assert not stats.failures, "\n\n".join(stats.failures[:5])


def test_every_hostile_mutation_changes_the_store(tmp_path):
    """The harness can fail: each mutation changes the store (bytes, the set of entries, or their kinds)."""
    def shape(store: Path):
        return {(str(p.relative_to(store)), p.is_symlink(), p.is_dir(),
                 p.read_bytes() if p.is_file() and not p.is_symlink() else None) for p in store.rglob("*")}

    seen = set()
    for k in range(60):
        family = sorted(F.STORES)[k % 3]
        store = shutil.copytree(F.STORES[family], tmp_path / f"s{k}")
        before = shape(store)
        what = F.mutate_hostile(random.Random(k), store)
        seen.add(what.split("@")[0].split(" ")[0])
        assert shape(store) != before or what.startswith(("truncate@0 ", "int@", "zero-tail@")), what
    assert {"dir", "fifo", "loop", "devzero", "truncate", "int", "renamed"} <= seen, seen


def test_the_checks_catch_what_they_promise():
    """A traceback, a second stderr line on exit 2, a raw escape on stderr or in a table: each is a failure."""
    cases = [(2, b"", "mqtool: no\nsecond line\n", ["dump"]), (0, b"", "note: \x1b[2J\n", ["info"]),
             (0, "\u202e evil".encode(), "", ["dump", "--as", "table"]),
             (1, b"", "Traceback (most recent call last):\n", ["verify"])]
    for code, out, err, args in cases:
        stats = F.Stats()
        F.check_run("w", args, code, out, err, None, stats)
        assert len(stats.failures) == 1, (args, err, stats.failures)
    stats = F.Stats()
    F.check_run("w", ["dump", "--as", "table"], 2, "a \\x1b b".encode(), "mqtool: x: \\x1b\n", None, stats)
    assert not stats.failures, stats.failures
