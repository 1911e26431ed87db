#!/usr/bin/env python3
"""What the SIGBUS guard (``mqtool/_native/guard.c``) costs: the same CLI runs with ``MQTOOL_SIGBUS_GUARD=1``
and ``=0`` (median of ``--repeat`` runs each, interleaved), and the price of one lost page (a mapped file
truncated to 0, then read whole through the map: every page faults once and is replaced by zeros).

Not a test. Usage, from the repository root::

    .venv/bin/python bench/guard_bench.py --size-mb 256 --repeat 5
"""
from __future__ import annotations

import argparse
import mmap
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from run import PY, REPO, run_measured  # noqa: E402


def _store(root: Path, size_mb: int) -> tuple[Path, Path]:
    import build_kafka
    import build_rocketmq

    rmq, kafka = root / f"guard-rmq-{size_mb}", root / f"guard-kafka-{size_mb}"
    quiet = lambda *a, **k: None     # noqa: E731
    if not rmq.exists():
        build_rocketmq.build_store(rmq, size_mb << 20, log=quiet)
    if not kafka.exists():
        build_kafka.build_store(kafka, size_mb << 20, log=quiet)
    return rmq, kafka / "bench-0"


def _cli(args: list[str], guard: bool) -> tuple[float, float, int]:
    env = dict(os.environ, PYTHONPATH=str(REPO), MQTOOL_SIGBUS_GUARD="1" if guard else "0")
    wall, cpu, _rss, code, _ = run_measured([PY, "-m", "mqtool", *args], env=env)
    return wall, cpu, code


def lost_page_cost(mb: int = 64) -> dict:
    """Map ``mb`` MiB, truncate the file to 0, read every page through the map (guarded: zeros)."""
    from mqtool import io

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "victim"
        p.write_bytes(os.urandom(1 << 20) * mb)
        mi = io.MappedInput(p, whole_limit=0)
        if io._guard is None:
            return {"na": "guard not built or switched off"}
        os.truncate(p, 0)
        before = io._guard.faults()
        t = time.perf_counter()
        step = mmap.PAGESIZE
        buf = mi.buf
        zeros = sum(buf[i] == 0 for i in range(0, len(buf), step))
        dt = time.perf_counter() - t
        n = io._guard.faults() - before
        mi.close()
        return {"pages": n, "zeros": zeros, "seconds": dt, "us_per_page": dt / max(n, 1) * 1e6}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--dir", default=os.environ.get("MQTOOL_BENCH_DIR", str(Path(tempfile.gettempdir()) / "mqtool-bench")))
    a = ap.parse_args()
    root = Path(a.dir)
    root.mkdir(parents=True, exist_ok=True)
    rmq, kafka = _store(root, a.size_mb)
    ops = [("dump commitlog --json", ["dump", "commitlog", str(rmq), "--json"]),
           ("verify commitlog --jobs 1", ["verify", "commitlog", str(rmq), "--jobs", "1", "--json"]),
           ("dump commitlog --json (MQTOOL_NATIVE=0)", ["dump", "commitlog", str(rmq), "--json", "--limit", "100000"]),
           ("dump kafka --deep --json", ["dump", "kafka", str(kafka), "--deep", "--json"])]
    print(f"store: {a.size_mb} MiB per family, {a.repeat} runs each, median wall / CPU seconds")
    print(f"{'operation':44} {'guard on':>16} {'guard off':>16} {'CPU delta':>10}")
    for name, args in ops:
        if "NATIVE=0" in name:
            os.environ["MQTOOL_NATIVE"] = "0"
        res = {True: [], False: []}
        for _ in range(a.repeat):
            for g in (True, False):
                res[g].append(_cli(args, g))
        os.environ.pop("MQTOOL_NATIVE", None)
        on = [statistics.median(x[i] for x in res[True]) for i in (0, 1)]
        off = [statistics.median(x[i] for x in res[False]) for i in (0, 1)]
        delta = (on[1] - off[1]) / off[1] * 100 if off[1] else 0.0
        print(f"{name:44} {on[0]:7.2f} / {on[1]:6.2f} {off[0]:7.2f} / {off[1]:6.2f} {delta:+9.1f}%")
    c = lost_page_cost()
    if "na" in c:
        print("lost page: n/a,", c["na"])
    else:
        print(f"lost pages: {c['pages']} faults replaced by zeros in {c['seconds']:.3f} s "
              f"({c['us_per_page']:.1f} us per page); {c['zeros']} pages read back as zero")


if __name__ == "__main__":
    main()
