"""Kafka scan throughput: batch-level walk (CRC checked) in MB/s and deep record iteration in records/s.

Usage: python bench/kafka_bench.py [WORKDIR]. Builds two synthetic segments from the fixture builder's
helpers (256 MiB of 256 KiB batches; 20 MiB of 100-record batches) and prints the rates side by side with a
calibration (how many empty Python loop iterations this machine runs per second).
"""
from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.fixture_builders import load  # noqa: E402
from mqtool.io import map_input  # noqa: E402
from mqtool.kafka.records import iter_records  # noqa: E402
from mqtool.kafka.scan import scan  # noqa: E402

batch_v2, record = load("build_kafka").batch_v2, load("build_kafka").record


def build(path: Path, target: int, recs: list[bytes], per: int) -> None:
    out = bytearray()
    base = 0
    while len(out) < target:
        out += batch_v2(base, recs, base_ts=1, max_ts=per)
        base += per
    path.write_bytes(out)


def main() -> None:
    work = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp())
    work.mkdir(parents=True, exist_ok=True)
    big, small = work / "big.log", work / "small.log"
    if not big.exists():
        build(big, 256 << 20, [record(i, i, b"k%d" % i, b"v" * 1000) for i in range(250)], 250)
    if not small.exists():
        build(small, 20 << 20, [record(i, i, b"key-%d" % i, b"value-%d" % i, [(b"h", b"x")]) for i in range(100)],
              100)
    t = time.perf_counter()
    for _ in range(5_000_000):
        pass
    loops = 5_000_000 / (time.perf_counter() - t)
    with map_input(big) as m:
        t = time.perf_counter()
        n = sum(1 for _ in scan(m.buf, str(big)))
        dt = time.perf_counter() - t
        print(f"batch-level scan: {len(m.buf) / dt / 1e6:10.0f} MB/s  ({n} batches)")
    with map_input(small) as m:
        t = time.perf_counter()
        n = 0
        for b in scan(m.buf, str(small)):
            for _r in iter_records(b):
                n += 1
        dt = time.perf_counter() - t
        print(f"deep iteration:   {n / dt:10.0f} records/s")
    print(f"calibration:      {loops:10.0f} empty loop iterations/s")


if __name__ == "__main__":
    main()
