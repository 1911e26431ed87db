"""The streaming reader's offsets and batches, driven directly (no JVM): damage met at a batch boundary is
reported once, by the batch in which a valid unit follows it; ``maxBytesPerTrigger`` cuts the same units
into several batches; the ``availableNow`` target is kept; a segment deleted before it was read fails
(``ignoreMissingFiles`` goes on); a log truncated under the stream fails. Stores from tests/stream_writer.py
and hand-built units (tests/builders.py)."""
from __future__ import annotations

import os

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

import stream_writer as W  # noqa: E402
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxBytes  # noqa: E402
from builders import rocketmq_unit as unit  # noqa: E402

from mqtool.spark.source import ReadFailed  # noqa: E402
from mqtool.spark.stream import StreamingDataSource as MqtoolDataSource  # noqa: E402

pytestmark = pytest.mark.spark


def reader(path, family, **opts):
    src = MqtoolDataSource({"path": str(path), "format": family, **opts})
    return src.streamReader(src.schema())


def batch(r, start, end) -> list[dict]:
    rows = []
    for p in r.partitions(start, end):
        for b in r.read(p):
            rows += b.to_pylist()
    return rows


def run_all(r, start=None, limit=None) -> tuple[dict, list[list[dict]]]:
    """latestOffset / partitions / read until nothing new: (last offset, rows of each batch)."""
    off = start if start is not None else r.initialOffset()
    out = []
    while True:
        new = r.latestOffset(off, limit or ReadAllAvailable())
        if new == off:
            return off, out
        out.append(batch(r, off, new))
        off = new


def put(path, pos, data):
    with open(path, "r+b") as f:
        f.seek(pos)
        f.write(data)


def test_damage_at_a_batch_end_is_reported_once_when_a_unit_follows(tmp_path):
    seg = tmp_path / "store" / "commitlog" / ("%020d" % 0)
    seg.parent.mkdir(parents=True)
    seg.write_bytes(bytes(4096))
    at, sizes = 0, []
    for i in range(3):
        u = unit(body=b"m%d" % i, phys=at, queue_offset=i)
        put(seg, at, u)
        at += len(u)
        sizes.append(len(u))
    junk_at = at
    put(seg, junk_at, b"\x7f" * 40)                 # not a unit, nothing valid after it (yet)
    r = reader(tmp_path / "store", "rocketmq", columnNameOfCorruptRecord="_corrupt")
    off, batches = run_all(r)
    rows = [x for b in batches for x in b]
    assert [x["position"] for x in rows] == [0, sizes[0], sizes[0] + sizes[1]]
    assert all(x["_corrupt"] is None for x in rows)        # trailing bytes: maybe a unit being written
    after = junk_at + 40
    put(seg, after, unit(body=b"late", phys=after, queue_offset=3))
    off2, batches2 = run_all(r, off)
    rows2 = [x for b in batches2 for x in b]
    assert len(rows2) == 2
    assert rows2[0]["_corrupt"].startswith(f"{seg}@{junk_at} ")      # the damage, once, where it is
    assert rows2[1]["position"] == after and rows2[1]["_corrupt"] is None
    assert run_all(r, off2)[1] == []


def test_max_bytes_per_trigger_cuts_batches_at_unit_ends(tmp_path):
    W.write_phase("kafka", tmp_path, 0)
    W.write_phase("kafka", tmp_path, 1)
    path = tmp_path / "logs"
    whole = [x for b in run_all(reader(path, "kafka"))[1] for x in b]
    r = reader(path, "kafka", maxBytesPerTrigger="250")
    assert isinstance(r.getDefaultReadLimit(), ReadMaxBytes)
    _, batches = run_all(r, limit=ReadMaxBytes(250))
    assert len(batches) > 3
    assert all(sum(x["size"] for x in b) <= 250 or len(b) == 1 for b in batches)
    assert [x for b in batches for x in b] == whole
    assert len(whole) == len(W.complete_after("kafka", 1))


def test_available_now_stops_at_its_target(tmp_path):
    W.write_phase("litemq", tmp_path, 0)
    path = tmp_path / "broker"
    r = reader(path, "litemq")
    r.prepareForTriggerAvailableNow()
    start = r.initialOffset()
    first = r.latestOffset(start, ReadAllAvailable())
    W.write_phase("litemq", tmp_path, 1)                # written after the target was taken
    assert r.latestOffset(first, ReadAllAvailable()) == first
    assert len(batch(r, start, first)) == len(W.complete_after("litemq", 0))


def test_deleted_segment_fails_unless_ignore_missing_files(tmp_path):
    W.write_phase("kafka", tmp_path, 0)
    path = tmp_path / "logs"
    off, _ = run_all(reader(path, "kafka"))
    W.write_phase("kafka", tmp_path, 1)
    os.remove(path / "Stream-0" / ("%020d.log" % 0))       # retention, before the stream read its end
    gone = f'"file": "{path}/Stream-0/{"0" * 20}.log".*deleted before it was read to its end'
    with pytest.raises(ReadFailed, match=gone):
        reader(path, "kafka").latestOffset(off, ReadAllAvailable())
    _, batches = run_all(reader(path, "kafka", ignoreMissingFiles="true"), off)
    got = {(os.path.basename(os.path.dirname(x["file"])), os.path.basename(x["file"]), x["position"])
           for b in batches for x in b}
    want = {(u["stream"], u["file"], u["position"]) for u in W.complete_after("kafka", 1)
            if u["file"] != "%020d.log" % 0 or u["stream"] != "Stream-0"}
    assert got == want


def test_truncated_log_fails(tmp_path):
    W.write_phase("kafka", tmp_path, 0)
    path = tmp_path / "logs"
    off, _ = run_all(reader(path, "kafka"))
    seg = path / "Stream-0" / ("%020d.log" % 0)
    os.truncate(seg, 100)
    with pytest.raises(ReadFailed, match="rewritten or truncated"):
        reader(path, "kafka").latestOffset(off, ReadAllAvailable())


def test_starting_offsets_latest_skips_what_is_there(tmp_path):
    W.write_phase("rocketmq", tmp_path, 0)
    path = tmp_path / "store"
    r = reader(path, "rocketmq", startingOffsets="latest")
    start = r.initialOffset()
    assert r.latestOffset(start, ReadAllAvailable()) == start
    W.write_phase("rocketmq", tmp_path, 1)
    _, batches = run_all(r, start)
    got = [(os.path.basename(x["file"]), x["position"]) for b in batches for x in b]
    old = W.complete_after("rocketmq", 0)
    assert got == [(u["file"], u["position"]) for u in W.complete_after("rocketmq", 1)[len(old):]]


def test_kafka_preallocated_zero_tail_is_not_data(tmp_path):
    """log.preallocate=true: the active segment is a zero-filled file that batches overwrite from byte 0."""
    from builders import kafka_builder

    batch_v2, record = kafka_builder().batch_v2, kafka_builder().record

    seg = tmp_path / "logs" / "t-0" / ("%020d.log" % 0)
    seg.parent.mkdir(parents=True)
    seg.write_bytes(bytes(4096))
    batches = [batch_v2(2 * i, [record(0, 0, b"k", b"v%d" % i), record(1, 0, b"k", b"w")], base_ts=1, max_ts=1)
               for i in range(4)]
    at = []
    for b in batches[:2]:
        at.append(sum(map(len, batches[:len(at)])))
        put(seg, at[-1], b)
    r = reader(tmp_path / "logs", "kafka", mode="FAILFAST")
    off, got = run_all(r)
    assert [(x["kind"], x["position"]) for b in got for x in b] == [("batch", p) for p in at]
    state = off[str(tmp_path / "logs")]["t-0"]
    assert (state["file"], state["position"], state["offset"]) == (seg.name, at[1] + len(batches[1]), 4)
    for b in batches[2:]:
        at.append(sum(map(len, batches[:len(at)])))
        put(seg, at[-1], b)
    _, got = run_all(r, off)
    assert [(x["kind"], x["offset"]) for b in got for x in b] == [("batch", 4), ("batch", 6)]
