"""Benchmark (not a test): ``verify store`` on Spark (distributed verify, :mod:`mqtool.spark.verify`) against
the embedded runner, on the bench inputs of ``bench/run.py`` (built once and cached there).

For one family and size it prints, in one run, the wall time of: embedded ``verify store`` with ``--jobs 1``
and ``--jobs N``; the Spark fixed cost (a tiny real store on the warm session, median); Spark ``verify store``
on the bench store. The Spark rate "once the fixed cost is paid" is size / (time - fixed cost).

    python bench/spark_verify_bench.py --family rocketmq --size-mb 256
    python bench/spark_verify_bench.py --family kafka --size-mb 1024 --master 'local[2]'
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _consume(findings, summary_fn) -> int:
    n = sum(1 for _ in findings)
    summary_fn()
    return n


def embedded(family: str, store: str, jobs: int) -> float:
    from mqtool.detect import family_module
    from mqtool.options import VerifyOptions

    t = time.perf_counter()
    _consume(*family_module(family, "ops").verify("store", store, VerifyOptions(jobs=jobs)))
    return time.perf_counter() - t


def on_spark(spark, store: str) -> float:
    from mqtool.options import VerifyOptions
    from mqtool.spark.verify import merged, verify_plans

    t = time.perf_counter()
    for p in verify_plans(spark, "store", [store], None, VerifyOptions()):
        _consume(*merged(p))
    return time.perf_counter() - t


def main(argv=None) -> int:
    from bench.run import ensure_store

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--family", choices=["rocketmq", "kafka"], default="rocketmq")
    ap.add_argument("--size-mb", type=int, default=256)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--tiny", help="a tiny store for the fixed cost (default: a real store of the family)")
    ap.add_argument("--dir", default=os.environ.get("MQTOOL_BENCH_DIR", "/tmp/mqtool-bench"))
    a = ap.parse_args(argv)
    store, info, _ = ensure_store(a.family, Path(a.dir), a.size_mb, False)
    size = sum(f.stat().st_size for f in Path(store).rglob("*") if f.is_file() and f.stat().st_blocks)
    log = info.get("data_bytes", size)
    tiny = a.tiny or str(Path(__file__).resolve().parent.parent.parent / "shared" / "realdata" / (
        "rocketmq/gen-4.9.7-clean/store" if a.family == "rocketmq" else "kafka/kafka-python-3.0.12-patched"))
    from mqtool.spark.session import get_session

    spark = get_session(a.master)
    on_spark(spark, tiny)                                   # warm: JVM, Python workers
    fixed = statistics.median(on_spark(spark, tiny) for _ in range(5))
    rows = [("embedded --jobs 1", embedded(a.family, store, 1)),
            (f"embedded --jobs {a.jobs}", embedded(a.family, store, a.jobs)),
            (f"spark {a.master}", on_spark(spark, store))]
    gb = log / 1e9
    print(f"\n{a.family} bench store {store}: {log / 1e6:,.0f} MB of log; Spark fixed cost {fixed:.2f} s "
          f"(tiny store, warm session); load {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    best = min(s for n, s in rows if n.startswith("embedded"))
    for name, secs in rows:
        paid = secs - fixed if name.startswith("spark") else secs
        print(f"  {name:24s} {secs:7.2f} s  {gb / secs:6.2f} GB/s  after fixed cost {gb / max(paid, 1e-9):6.2f} GB/s"
              f"  ({best / max(paid, 1e-9):.2f}x the best embedded)")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
