"""Structured Streaming: ``spark.readStream.format("mqtool")`` tails a store that a separate process appends
to (tests/stream_writer.py: RocketMQ units, LiteMQ records, Kafka batches from the construct schemas, written
in phases that end inside a unit, with segment rollovers and a Kafka partition that appears later).

Each phase is followed by an ``availableNow`` query that resumes from the same checkpoint: it must give
exactly the units the writer has completed since the previous query (its own list, not our reader's), in
log order per stream, and nothing twice; ``mode=FAILFAST`` proves that a unit still being written is never
taken for damage. The rows of all runs together equal the embedded ``dump`` of the final store. A second
test streams with a processing-time trigger while the writer is still writing, in small pieces.

Skips like tests/test_spark.py without pyspark/pyarrow/Java (fails under CI=true)."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest


from conftest import require_spark  # noqa: E402

require_spark()     # the session-scoped local[2] fixture `spark` is in conftest
import stream_writer as W  # noqa: E402
from mqtool.detect import family_module  # noqa: E402
from mqtool.options import DumpOptions, ScanStats  # noqa: E402
from mqtool.spark.fleet import spark_row_to_dump_row  # noqa: E402

pytestmark = pytest.mark.spark

WRITER = Path(__file__).with_name("stream_writer.py")
FAMILIES = ["rocketmq", "litemq", "kafka"]


def write(family, root, phase, chunk=1 << 20, delay=0.0, wait=True):
    cmd = [sys.executable, str(WRITER), family, str(root), str(phase), str(chunk), str(delay)]
    if wait:
        subprocess.run(cmd, check=True, timeout=60)
        return None
    return subprocess.Popen(cmd)


def store_of(family, root) -> str:
    return str(Path(root) / W.STORE_DIR[family].split("/")[0])


def stream_df(spark, family, root):  # noqa: F811
    return (spark.readStream.format("mqtool").option("format", family).option("mode", "FAILFAST")
            .option("splitSize", "700").option("body", "text").load(store_of(family, root)))


def unit_id(family, row: dict) -> tuple:
    stream = "commitlog" if family != "kafka" else f"{row['topic']}-{row['partition']}"
    return stream, Path(row["file"]).name, row["position"]


def expected_ids(family, phase) -> list[tuple]:
    return [(u["stream"], u["file"], u["position"]) for u in W.complete_after(family, phase)]


def per_stream(ids):
    out: dict = {}
    for i in ids:
        out.setdefault(i[0], []).append(i)
    return out


def start_available_now(spark, family, root, ckpt, batches: list):  # noqa: F811
    """Start one availableNow run from the checkpoint; the rows of each micro-batch go to ``batches``."""
    return (stream_df(spark, family, root).writeStream
            .foreachBatch(lambda df, _id: batches.append([r.asDict(recursive=True) for r in df.collect()]))
            .option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start())


def embedded(family, path) -> list[dict]:
    part = "kafka" if family == "kafka" else "commitlog"
    rows = family_module(family, "ops").dump(part, path, DumpOptions(body="text"), ScanStats())[1]
    return [r for r in rows if r.get("kind") in ("message", "batch")]


def same_as_embedded(family, got: list[dict], want: list[dict]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        if family != "kafka":
            g = spark_row_to_dump_row(g, "text", sorted_maps=("properties",) if family == "litemq" else ())
        assert {k: g.get(k) for k in w} == w


def test_stream_resumes_from_checkpoint(spark, tmp_path):  # noqa: F811
    """The three families side by side (one query each, run at the same time to save the wait)."""
    seen: dict[str, list[dict]] = {f: [] for f in FAMILIES}
    for phase in range(3):
        runs = {}
        for family in FAMILIES:
            write(family, tmp_path / family, phase)
            batches: list[list[dict]] = []
            runs[family] = (start_available_now(spark, family, tmp_path / family, tmp_path / f"{family}.ckpt",
                                                batches), batches)
        for family, (q, batches) in runs.items():
            q.awaitTermination(120)
            assert q.exception() is None, q.exception()
            rows = [r for b in batches for r in b]
            new = [unit_id(family, r) for r in rows]
            before = set(expected_ids(family, phase - 1)) if phase else set()
            want = [i for i in expected_ids(family, phase) if i not in before]
            # exactly the units completed since the last run, each once, in log order per stream
            assert per_stream(new) == per_stream(want), (family, phase)
            seen[family] += rows
    for family in FAMILIES:
        check_final(family, tmp_path / family, seen[family])


def check_final(family, root, seen: list[dict]) -> None:
    by_id = {unit_id(family, r): r for r in seen}
    assert len(by_id) == len(seen)
    units = W.complete_after(family, 2)
    field = "offset" if family == "kafka" else "body"
    assert [by_id[(u["stream"], u["file"], u["position"])][field] for u in units] == [u[field] for u in units]
    # the union of every run equals the embedded dump of the final store, row for row
    final = embedded(family, store_of(family, root))
    got = sorted(seen, key=lambda r: unit_id(family, r))
    stream = (lambda r: Path(r["file"]).parent.name) if family == "kafka" else (lambda r: "commitlog")
    same_as_embedded(family, got, sorted(final, key=lambda r: (stream(r), Path(r["file"]).name, r["position"])))


def test_stream_tails_a_store_being_written(spark, tmp_path):  # noqa: F811
    """A processing-time query runs while the writer appends in 97-byte pieces (RocketMQ, through two
    rollovers): every unit arrives exactly once, in order."""
    family = "rocketmq"
    root, ckpt = tmp_path / "live", tmp_path / "ckpt"
    write(family, root, 0)
    batches: list[list[dict]] = []
    q = (stream_df(spark, family, root).writeStream
         .foreachBatch(lambda df, _id: batches.append([r.asDict(recursive=True) for r in df.collect()]))
         .option("checkpointLocation", str(ckpt)).trigger(processingTime="300 milliseconds").start())
    try:
        deadline = time.time() + 60
        while not batches and time.time() < deadline:      # the first batch: what was there at the start
            time.sleep(0.2)
        for phase in (1, 2):
            w = write(family, root, phase, chunk=97, delay=0.03, wait=False)
            assert w.wait(60) == 0
        q.processAllAvailable()
        deadline = time.time() + 30
        while sum(map(len, batches)) < len(expected_ids(family, 2)) and time.time() < deadline:
            time.sleep(0.3)
    finally:
        q.stop()
    assert q.exception() is None
    ids = [unit_id(family, r) for b in batches for r in b]
    assert ids == expected_ids(family, 2)
    assert sum(1 for b in batches if b) >= 2       # it did tail: the rows came in several batches
