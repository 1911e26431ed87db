#!/usr/bin/env python3
"""Long fuzzing run over the decoder entry points of every family (fuzz/targets.py; LiteMQ and Kafka
targets are named litemq.* and kafka.*).

    python fuzz/run.py --seconds 600                 # every target, time shared
    python fuzz/run.py --seconds 300 --target scan   # one target
    python fuzz/run.py --engine hypothesis ...       # force the fallback engine

Engine: atheris (libFuzzer, coverage-guided) when it is importable (``pip install atheris``), seeded with
real segments, index, consume queue, checkpoint and config files from the realdata folder (copied to a
scratch corpus; the originals are only read). Otherwise hypothesis with a large budget, in rounds, until
the time is up. A crash prints the input that caused it (atheris also writes ``crash-*`` files in the
current directory) and exits non-zero.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _realdata() -> Path:
    return Path(os.environ.get("MQTOOL_REALDATA", ROOT.parent / "shared" / "realdata"))


def run_atheris(names: list[str], seconds: int) -> int:
    import atheris

    from fuzz import targets as T

    atheris.instrument_all()      # coverage for everything loaded (mqtool, formats, construct...)
    chosen = [T.TARGETS[n] for n in names]
    corpus = Path(tempfile.mkdtemp(prefix="mqtool-fuzz-corpus-"))
    seeds = T.seeds(_realdata())
    for n in names:
        for i, s in enumerate(seeds.get(n, [])):
            sel = bytes([names.index(n)]) if len(names) > 1 else b""
            (corpus / f"{n}-{i}").write_bytes(sel + s)

    def one(data: bytes) -> None:
        if len(chosen) == 1:
            chosen[0](data)
        elif data:
            chosen[data[0] % len(chosen)](data[1:])

    args = [sys.argv[0], f"-max_total_time={seconds}", "-max_len=70000", "-rss_limit_mb=2048",
            "-timeout=20", str(corpus)]
    print(f"atheris: {', '.join(names)} for {seconds}s, corpus {corpus}", file=sys.stderr)
    atheris.Setup(args, one)
    atheris.Fuzz()          # exits the process; non-zero on a crash
    return 0


def run_hypothesis(names: list[str], seconds: int) -> int:
    from hypothesis import HealthCheck, given, settings, strategies as st

    sys.path.insert(0, str(ROOT / "tests"))
    from fuzz import targets as T
    from fuzzcase import mutated

    seeds = T.seeds(_realdata())
    deadline = time.monotonic() + seconds
    rounds = 0
    while time.monotonic() < deadline:
        for n in names:
            if time.monotonic() >= deadline:
                break
            strat = st.binary(max_size=8192)
            if seeds.get(n):
                strat = st.one_of(strat, mutated(seeds[n]))

            def make(target):
                @settings(max_examples=500, deadline=None, database=None,
                          suppress_health_check=list(HealthCheck))
                @given(data=strat)
                def run(data):
                    target(data)

                return run

            try:
                make(T.TARGETS[n])()
            except Exception as e:          # hypothesis has printed the minimal failing input
                print(f"FAILED target {n}: {type(e).__name__}: {e}", file=sys.stderr)
                return 1
        rounds += 1
        print(f"round {rounds} done ({', '.join(names)})", file=sys.stderr)
    T.cleanup()
    return 0


def main(argv=None) -> int:
    from fuzz.targets import TARGETS

    ap = argparse.ArgumentParser(description="Long fuzzing run over the decoders of every family.")
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--target", action="append", choices=sorted(TARGETS), help="repeatable; default: all")
    ap.add_argument("--engine", choices=["auto", "atheris", "hypothesis"], default="auto")
    args = ap.parse_args(argv)
    names = args.target or sorted(TARGETS)
    engine = args.engine
    if engine == "auto":
        try:
            import atheris  # noqa: F401

            engine = "atheris"
        except ImportError:
            engine = "hypothesis"
    if engine == "atheris":
        return run_atheris(names, args.seconds)
    return run_hypothesis(names, args.seconds)


if __name__ == "__main__":
    sys.exit(main())
