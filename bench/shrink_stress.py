#!/usr/bin/env python3
"""Truncate a large segment while `dump` / `verify` read it, at a random moment, many times; count how runs
end (exit code, signal, traceback, whether the shrink was reported), with the SIGBUS guard on and off and the
helpers on and off. Not a test (timing-dependent); figures in docs/hardening.md.

    .venv/bin/python bench/shrink_stress.py --size-mb 128 --runs 20
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=int, default=128)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--dir", default=os.environ.get("MQTOOL_BENCH_DIR", str(Path(tempfile.gettempdir()) / "mqtool-bench")))
    a = ap.parse_args()
    from bench import build_rocketmq

    src = Path(a.dir) / f"guard-rmq-{a.size_mb}"
    if not src.exists():
        build_rocketmq.build_store(src, a.size_mb << 20, log=lambda *x, **k: None)
    rng = random.Random(16)
    print(f"{'command':10} {'guard':6} {'helpers':8} runs  outcomes")
    with tempfile.TemporaryDirectory() as d:
        for verb in ("dump", "verify"):
            for guard in ("1", "0"):
                for native in ("1", "0"):
                    out = Counter()
                    for _ in range(a.runs):
                        store = Path(d) / "s"
                        shutil.rmtree(store, ignore_errors=True)
                        shutil.copytree(src, store)
                        seg = sorted((store / "commitlog").iterdir())[0]
                        args = ["dump", "commitlog", str(store), "--json"] if verb == "dump" else \
                            ["verify", "commitlog", str(store), "--json", "--jobs", "1"]
                        env = dict(os.environ, PYTHONPATH=str(REPO), MQTOOL_SIGBUS_GUARD=guard, MQTOOL_NATIVE=native)
                        p = subprocess.Popen([sys.executable, "-m", "mqtool", *args],
                                             stdout=subprocess.DEVNULL if verb == "dump" else subprocess.PIPE,
                                             stderr=subprocess.PIPE, env=env)
                        time.sleep(rng.uniform(0.15, 0.6 if native == "1" else 2.0))
                        os.truncate(seg, rng.randrange(seg.stat().st_size // 2))
                        so, se = p.communicate()
                        err = (so or b"").decode(errors="replace") + se.decode(errors="replace")
                        rc = p.returncode
                        if rc < 0:
                            out[signal.Signals(-rc).name] += 1
                        elif "Traceback" in err:
                            out["traceback"] += 1
                        elif "file-changed" in err or "shrank" in err:
                            out[f"exit {rc}, file-changed"] += 1
                        else:
                            out[f"exit {rc}, finished before the cut"] += 1
                    print(f"{verb:10} {'on' if guard == '1' else 'off':6} {'on' if native == '1' else 'off':8} "
                          f"{a.runs:4}  {dict(out)}", flush=True)


if __name__ == "__main__":
    main()
