"""Benchmark (not a test): ``verify store`` on Spark (distributed verify, :mod:`mqtool.spark.verify`) against
the embedded runner, on the bench inputs of ``bench/run.py`` (built once and cached there).

For one family and size it prints, in one run, the wall time of: embedded ``verify store`` with ``--jobs 1``
and ``--jobs N``; the Spark fixed cost (a tiny real store on the warm session, median); Spark ``verify store``
on the bench store; wall and CPU (this process and everything under it: the JVM, its Python workers). The
Spark rate "once the fixed cost is paid" is size / (time - fixed cost), in wall time and in CPU.

    python bench/spark_verify_bench.py --family rocketmq --size-mb 256 --ranges --repeat 5
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


def _measured(fn) -> tuple[float, float]:
    """(wall, CPU) seconds of ``fn()``: CPU of this process and everything under it (the Spark JVM, its Python
    workers: bench/spark_bench.cpu_now)."""
    from bench.spark_bench import cpu_now

    c, t = cpu_now(), time.perf_counter()
    fn()
    return time.perf_counter() - t, cpu_now() - c


def embedded(family: str, store: str, jobs: int) -> tuple[float, float]:
    from mqtool.detect import family_module
    from mqtool.options import VerifyOptions

    return _measured(lambda: _consume(*family_module(family, "ops").verify("store", store, VerifyOptions(jobs=jobs))))


def on_spark(spark, store: str) -> tuple[float, float]:
    from mqtool.options import VerifyOptions
    from mqtool.spark.verify import merged, verify_plans

    def run():
        for p in verify_plans(spark, "store", [store], None, VerifyOptions()):
            _consume(*merged(p))

    return _measured(run)


def main(argv=None) -> int:
    from bench.run import ensure_store

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--family", choices=["rocketmq", "kafka"], default="rocketmq")
    ap.add_argument("--size-mb", type=int, default=256)
    ap.add_argument("--store", help="this store instead of the bench input of --size-mb")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--repeat", type=int, default=1, help="runs of each engine, alternated (median kept)")
    ap.add_argument("--ranges", action="store_true",
                    help="RocketMQ: plan commitlog ranges and the driver's checks even for a store of at most "
                         "WHOLE_STORE_MAX (what a bigger store gets), not the one whole-store task")
    ap.add_argument("--tiny", help="a tiny store for the fixed cost (default: a real store of the family)")
    ap.add_argument("--dir", default=os.environ.get("MQTOOL_BENCH_DIR", "/tmp/mqtool-bench"))
    a = ap.parse_args(argv)
    if a.store:
        store = a.store
        size = sum(f.stat().st_size for f in Path(store).rglob("*") if f.is_file() and f.stat().st_blocks)
        log = sum(f.stat().st_size for f in Path(store).glob("commitlog/*")) or size
    else:
        store, info, _ = ensure_store(a.family, Path(a.dir), a.size_mb, False)
        size = sum(f.stat().st_size for f in Path(store).rglob("*") if f.is_file() and f.stat().st_blocks)
        log = info.get("data_bytes", size)
    if a.ranges:
        from mqtool.rocketmq import verifyplan

        verifyplan.WHOLE_STORE_MAX = 0
    tiny = a.tiny or str(Path(__file__).resolve().parent.parent.parent / "shared" / "realdata" / (
        "rocketmq/gen-4.9.7-clean/store" if a.family == "rocketmq" else "kafka/kafka-python-3.0.12-patched"))
    from mqtool.spark.session import get_session

    spark = get_session(a.master)
    on_spark(spark, tiny)                                   # warm: JVM, Python workers
    on_spark(spark, store)
    fixed = [on_spark(spark, tiny) for _ in range(5)]
    runs: dict = {}
    load = [os.getloadavg()[0]]
    for _ in range(a.repeat):
        for name, fn in ((f"embedded --jobs {a.jobs}", lambda: embedded(a.family, store, a.jobs)),
                         (f"spark {a.master}", lambda: on_spark(spark, store))):
            runs.setdefault(name, []).append(fn())
            load.append(os.getloadavg()[0])
        fixed.append(on_spark(spark, tiny))
    runs["embedded --jobs 1"] = [embedded(a.family, store, 1)]
    med = lambda xs, k: statistics.median(x[k] for x in xs)  # noqa: E731
    fw, fc = med(fixed, 0), med(fixed, 1)
    gb = log / 1e9
    print(f"\n{a.family} bench store {store}: {log / 1e6:,.0f} MB of log{' (as ranges)' if a.ranges else ''}; "
          f"Spark fixed cost {fw:.3f} s, {fc:.3f} s CPU (tiny store, warm session, median); "
          f"load {min(load):.2f}-{max(load):.2f}")
    best = min((med(v, 0), med(v, 1)) for n, v in runs.items() if n.startswith("embedded"))
    for name, rs in runs.items():
        w, c = med(rs, 0), med(rs, 1)
        spark_row = name.startswith("spark")
        pw, pc = (w - fw, c - fc) if spark_row else (w, c)
        print(f"  {name:24s} {w:7.3f} s ({c:6.3f} s CPU; median of {len(rs)})  {gb / w:6.2f} GB/s"
              f"  after fixed cost {gb / max(pw, 1e-9):6.2f} GB/s"
              f"  ({best[0] / max(pw, 1e-9):.2f}x wall, {best[1] / max(pc, 1e-9):.2f}x CPU of the best embedded)")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
