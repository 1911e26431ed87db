#!/usr/bin/env python3
"""Fuzz the CLI, not only the decoders: mutate a store file of a family's fixture store (bit flips, cuts,
inserted or deleted bytes, hostile length fields, zeroed pages), then run every verb on it (dump, verify,
query, info, rebuild-index into a scratch dir, report, hash), with the compiled helpers on and off.

Checked for every run: no uncaught exception (a traceback), exit code in {0, 1, 2}, wall time under
``--case-timeout`` and peak RSS under ``--max-rss-mb``; and the helpers and the pure-Python paths print the
same thing (stdout and exit code) for dump, verify, query and hash. A failure prints the case number and
seed: ``--seed S --cases N..`` replays it (cases are deterministic).

    python fuzz/cli.py --seconds 600                 # the long run (docs/hardening.md)
    python fuzz/cli.py --cases 50 --seed 7           # a fixed number of cases

tests/test_common_fuzz_cli.py runs a short smoke of it.
"""
from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import struct
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

FIXTURES = ROOT / "fixtures"
STORES = {"rocketmq": FIXTURES / "rocketmq" / "store", "litemq": FIXTURES / "litemq" / "store",
          "kafka": FIXTURES / "kafka" / "logdir"}
HOSTILE_LENGTHS = (0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0, 1, 0x00FFFFFF, 0x40000000)
# verbs whose stdout must not depend on the helpers (info/report carry timings or rendering details)
COMPARED = ("dump", "verify", "query", "hash")


@dataclass
class Stats:
    cases: int = 0
    runs: int = 0
    exits: dict = field(default_factory=dict)
    failures: list = field(default_factory=list)


def _files(store: Path) -> list[Path]:
    """Store files, log segments first and listed twice (they are where the decoders work)."""
    files = sorted(p for p in store.rglob("*") if p.is_file())
    logs = [p for p in files if p.parent.name in ("commitlog",) or p.suffix == ".log"]
    return logs * 2 + files


def mutate(rng: random.Random, store: Path) -> str:
    """Change one file of ``store`` in place; returns what was done (for the failure report)."""
    victim = rng.choice(_files(store))
    data = bytearray(victim.read_bytes())
    n = len(data)
    op = rng.choice(["flip", "cut", "insert", "delete", "length", "zero-page", "flip"])
    i = rng.randrange(n + 1) if n else 0
    if op == "flip" and n:
        for _ in range(rng.randint(1, 8)):
            j = rng.randrange(n)
            data[j] ^= 1 << rng.randrange(8)
    elif op == "cut":
        del data[i:]
    elif op == "insert":
        data[i:i] = rng.randbytes(rng.randint(1, 64))
    elif op == "delete":
        del data[i:i + rng.randint(1, 64)]
    elif op == "length" and n >= 4:
        # a length field: at a record start when the file has a 4-byte-aligned one near i, else anywhere
        j = min(i - i % 4, n - 4)
        struct.pack_into(">I", data, j, rng.choice(HOSTILE_LENGTHS))
    elif op == "zero-page":
        data[i:i + 4096] = bytes(len(data[i:i + 4096]))
    victim.write_bytes(bytes(data))
    return f"{op}@{i} in {victim.relative_to(store)} ({n} -> {len(data)} bytes)"


def commands(family: str, store: Path, scratch: Path) -> list[tuple[str, list[str]]]:
    s = str(store)
    log = str(store / "fixture-0") if family == "kafka" else s
    dump = ["dump", "kafka", log, "--deep", "--json"] if family == "kafka" else ["dump", "commitlog", s, "--json",
                                                                                 "--body", "base64"]
    query = ["query", s, "--offset", "0", "--json"] if family == "kafka" else ["query", s, "--key", "k1", "--json"]
    return [("dump", dump), ("verify", ["verify", "store", s, "--json"]), ("query", query),
            ("info", ["info", s, "--json"]), ("rebuild-index", ["rebuild-index", s, "--out", str(scratch / "rb"),
                                                                "--force", "--json"]),
            ("report", ["report", s, "-o", str(scratch / "r.html"), "--force"]), ("hash", ["hash", s, "--json"])]


def run_cli(args: list[str], native: bool) -> tuple[int, bytes, str, BaseException | None, float]:
    """One in-process CLI run: (exit code, stdout, stderr, uncaught exception, seconds)."""
    from click.testing import CliRunner

    from mqtool.cli import cli

    saved = os.environ.get("MQTOOL_NATIVE")
    os.environ["MQTOOL_NATIVE"] = "1" if native else "0"
    t = time.monotonic()
    try:
        r = CliRunner().invoke(cli, args, catch_exceptions=True)
    finally:
        if saved is None:
            os.environ.pop("MQTOOL_NATIVE", None)
        else:
            os.environ["MQTOOL_NATIVE"] = saved
    dt = time.monotonic() - t
    exc = r.exception if r.exception is not None and not isinstance(r.exception, SystemExit) else None
    return r.exit_code, r.stdout_bytes, r.stderr, exc, dt


def one_case(k: int, seed: int, stats: Stats, families=tuple(STORES), case_timeout: float = 30.0,
             max_rss_mb: int = 2048) -> None:
    rng = random.Random(f"{seed}:{k}")
    family = families[k % len(families)]
    with tempfile.TemporaryDirectory(prefix="mqtool-cli-fuzz-") as d:
        store = Path(d) / "store"
        shutil.copytree(STORES[family], store)
        what = mutate(rng, store)
        if rng.random() < 0.3:      # sometimes a second change
            what += "; " + mutate(rng, store)
        for verb, args in commands(family, store, Path(d) / "out"):
            got = {}
            for native in (True, False):
                code, out, err, exc, dt = run_cli(args, native)
                stats.runs += 1
                stats.exits[code] = stats.exits.get(code, 0) + 1
                got[native] = (code, out)
                where = f"case {k} seed {seed} {family} [{what}] {' '.join(args[:2])} helpers={'on' if native else 'off'}"
                if exc is not None:
                    import traceback

                    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
                    stats.failures.append(f"{where}: uncaught {type(exc).__name__}: {exc}\n{tb[-1500:]}")
                elif code not in (0, 1, 2):
                    stats.failures.append(f"{where}: exit code {code}")
                if dt > case_timeout:
                    stats.failures.append(f"{where}: took {dt:.1f} s")
            if verb in COMPARED and got[True] != got[False]:
                stats.failures.append(f"case {k} seed {seed} {family} [{what}] {verb}: helpers on/off differ "
                                      f"(exit {got[True][0]} vs {got[False][0]}, stdout "
                                      f"{len(got[True][1])} vs {len(got[False][1])} bytes)")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    if rss > max_rss_mb:
        stats.failures.append(f"case {k} seed {seed}: peak RSS {rss} MB")
    stats.cases += 1


def fuzz(seconds: float | None = None, cases: int | None = None, seed: int = 1, first: int = 0,
         families=tuple(STORES), stop_on_failure: bool = False, **kw) -> Stats:
    stats = Stats()
    deadline = None if seconds is None else time.monotonic() + seconds
    k = first
    while (cases is None or k < first + cases) and (deadline is None or time.monotonic() < deadline):
        one_case(k, seed, stats, families, **kw)
        k += 1
        if stop_on_failure and stats.failures:
            break
    return stats


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Fuzz every mqtool verb over mutated fixture stores.")
    ap.add_argument("--seconds", type=float, default=None)
    ap.add_argument("--cases", type=int, default=None)
    ap.add_argument("--first", type=int, default=0, help="first case number (replay)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--family", action="append", choices=sorted(STORES))
    ap.add_argument("--case-timeout", type=float, default=30.0)
    ap.add_argument("--max-rss-mb", type=int, default=2048)
    a = ap.parse_args(argv)
    if a.seconds is None and a.cases is None:
        a.seconds = 60
    t = time.monotonic()
    st = fuzz(a.seconds, a.cases, a.seed, a.first, tuple(a.family or STORES), case_timeout=a.case_timeout,
              max_rss_mb=a.max_rss_mb)
    for f in st.failures:
        print("FAIL", f, file=sys.stderr)
    kinds = {}
    for f in st.failures:
        key = f.split(": ", 1)[1].split("\n")[0][:80] if ": " in f else f[:80]
        kinds[key] = kinds.get(key, 0) + 1
    print(f"{st.cases} cases, {st.runs} CLI runs in {time.monotonic() - t:.0f} s; exit codes "
          f"{dict(sorted(st.exits.items()))}; {len(st.failures)} failures; peak RSS "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024} MB")
    for key, n in sorted(kinds.items(), key=lambda x: -x[1]):
        print(f"  {n:5}  {key}")
    return 1 if st.failures else 0


if __name__ == "__main__":
    sys.exit(main())
