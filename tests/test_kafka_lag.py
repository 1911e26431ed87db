"""`mqtool query --unconsumed-by GROUP` and `info`'s lag per group for Kafka.

Ground truth: for the real ZooKeeper-mode broker (volodymyrzee-*), a second reading done here: batches walked
with ``struct`` (baseOffset, batchLength, lastOffsetDelta), records and OffsetCommit keys/values parsed with
the construct schemas of formats/kafka.py, the last commit per (group, topic, partition) kept; for the log
dirs built here, the offsets the test committed (records built with the same schemas, key v1 and value
v1/v3/v4, a tombstone).
"""
from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from formats import kafka as K
from tests.builders import kafka_batch, kafka_builder
from tests.conftest import require_realdata


def _ndjson(out: str):
    rows = [json.loads(x) for x in out.splitlines() if x.strip()]
    return [r for r in rows if r["kind"] != "unconsumed-summary"], [r for r in rows if r["kind"] == "unconsumed-summary"]


# ---- an independent reading of a log dir ------------------------------------------------------------------

def _batches(log: bytes):
    pos = 0
    while pos + K.V2_HEADER_SIZE <= len(log):
        base, length = struct.unpack_from(">qi", log, pos)
        if length <= 0:
            break
        magic = log[pos + 16]
        assert magic == 2                       # MANIFEST: all batches are v2, uncompressed
        last_delta, = struct.unpack_from(">i", log, pos + 23)
        count, = struct.unpack_from(">i", log, pos + 57)
        attrs, = struct.unpack_from(">h", log, pos + 21)
        yield base, base + last_delta, count, attrs, log[pos + K.V2_HEADER_SIZE:pos + K.LOG_OVERHEAD + length]
        pos += K.LOG_OVERHEAD + length


def _leo(part: Path) -> int:
    end = 0
    for f in sorted(part.glob("*.log")):
        for _, last, _, _, _ in _batches(f.read_bytes()):
            end = last + 1
    return end


def _commits(logdir: Path) -> dict:
    out = {}
    for part in sorted(logdir.glob("__consumer_offsets-*"), key=lambda p: int(p.name.rsplit("-", 1)[1])):
        for f in sorted(part.glob("*.log")):
            for _, _, count, attrs, area in _batches(f.read_bytes()):
                if attrs & 0x20:                # control batch
                    continue
                rest = area
                for _ in range(count):
                    r = K.Record.parse(rest)
                    rest = rest[len(K.Record.build(r)):]
                    key, value = r.key, r.value
                    kv, = struct.unpack_from(">h", key)
                    if kv not in (0, 1):
                        continue
                    k = K.OffsetCommitKey.parse(key[2:])
                    ident = (k.group.data.decode(), k.topic.data.decode(), k.partition)
                    if value is None:
                        out.pop(ident, None)
                        continue
                    vv, = struct.unpack_from(">h", value)
                    v = (K.OffsetCommitValue(vv) if vv <= 3 else K.OffsetCommitValueV4).parse(value[2:])
                    out[ident] = v.offset
    return out


@pytest.mark.parametrize("commit", ["c1-7712094", "c4-f6e2174"])
def test_real_broker_unconsumed_per_partition(run_cli, commit):
    d = require_realdata("kafka", "volodymyrzee-kafka-zk-2020", commit)
    commits = _commits(d)
    groups = sorted({g for g, _, _ in commits})
    assert "my-first-application" in groups
    for group in groups:
        code, out, err = run_cli("query", d, "--unconsumed-by", group, "--json")
        assert code == 0, err
        rows, summary = _ndjson(out)
        mine = {(t, p): off for (g, t, p), off in commits.items() if g == group}
        assert {(s["topic"], s["queue"]): s["committed_offset"] for s in summary} == mine
        for s in summary:
            leo = _leo(d / f"{s['topic']}-{s['queue']}")
            assert s["max_offset"] == leo and s["unconsumed"] == max(0, leo - s["committed_offset"])
        want = sorted((f"{t}-{p}", o) for (t, p), c in mine.items() for o in range(c, _leo(d / f"{t}-{p}")))
        assert sorted((r["partition"], r["offset"]) for r in rows) == want
    code, out, _ = run_cli("info", d, "--json")
    lag = {(g["group"], g["topic"]): g for g in json.loads(out)["consumer_groups"]}
    for group in groups:
        mine = {(t, p): off for (g, t, p), off in commits.items() if g == group}
        for topic in {t for t, _ in mine}:
            parts = [(p, off) for (t, p), off in mine.items() if t == topic]
            g = lag[(group, topic)]
            assert g["queues"] == len(parts) and g["committed"] == sum(off for _, off in parts)
            assert g["lag"] == sum(max(0, _leo(d / f"{topic}-{p}") - off) for p, off in parts)


def test_real_broker_c1_has_unconsumed_records():
    # the running-broker state c1 is behind its log ends: the test above compares something non-empty
    d = require_realdata("kafka", "volodymyrzee-kafka-zk-2020", "c1-7712094")
    commits = _commits(d)
    assert any(_leo(d / f"{t}-{p}") > off for (_, t, p), off in commits.items())


# ---- a log dir built here -------------------------------------------------------------------------------

def _key(group: str, topic: str, partition: int) -> bytes:
    s16 = lambda s: {"length": len(s), "data": s.encode()}          # noqa: E731
    return struct.pack(">h", 1) + K.OffsetCommitKey.build({"group": s16(group), "topic": s16(topic),
                                                           "partition": partition})


def _value(offset: int, version: int) -> bytes:
    meta = {"length": 0, "data": b""}
    if version == 4:
        return struct.pack(">h", 4) + K.OffsetCommitValueV4.build(
            {"offset": offset, "leaderEpoch": 0, "metadata": {"lengthPlusOne": 1, "data": b""},
             "commitTimestamp": 1, "taggedFields": []})
    return struct.pack(">h", version) + K.OffsetCommitValue(version).build(
        {"offset": offset, "leaderEpoch": 0 if version >= 3 else None, "metadata": meta, "commitTimestamp": 1,
         "expireTimestamp": 2 if version == 1 else None})


COMMITS = [("g", "orders", 0, 3, 1), ("g", "orders", 1, 1, 4), ("g", "orders", 0, 6, 3),   # latest wins
           ("g", "orders", 1, None, 0),                                                        # tombstone
           ("g", "orders", 2, 1, 3),
           ("g2", "orders", 1, 50, 3), ("neg", "orders", 0, -1, 3)]


def _logdir(root: Path, with_offsets: bool = True) -> None:
    B = kafka_builder()
    (root / "orders-0").mkdir(parents=True)
    (root / "orders-0" / f"{0:020d}.log").write_bytes(kafka_batch(0, 5) + kafka_batch(5, 3))
    (root / "orders-0" / f"{8:020d}.log").write_bytes(kafka_batch(8, 2))
    (root / "orders-1").mkdir()
    (root / "orders-1" / f"{0:020d}.log").write_bytes(kafka_batch(0, 2))
    (root / "orders-2").mkdir()
    (root / "orders-2" / f"{0:020d}.log").write_bytes(
        kafka_batch(0, 2) + B.control(2, K.CONTROL_COMMIT, 7, 0, B.T0) + kafka_batch(3, 1))
    if with_offsets:
        recs = [B.record(i, 0, _key(g, t, p), None if off is None else _value(off, v))
                for i, (g, t, p, off, v) in enumerate(COMMITS)]
        (root / "__consumer_offsets-0").mkdir()
        (root / "__consumer_offsets-0" / f"{0:020d}.log").write_bytes(
            B.batch_v2(0, recs, base_ts=B.T0, max_ts=B.T0))


def test_built_logdir_latest_commit_wins_tombstone_deletes(run_cli, tmp_path):
    _logdir(tmp_path)
    code, out, err = run_cli("query", tmp_path, "--unconsumed-by", "g", "--json")
    assert code == 0, err
    rows, summary = _ndjson(out)
    # orders-0 from 6 (across the segment roll at 8); orders-2 from 1, the transaction marker at 2 not listed
    assert [(r["partition"], r["offset"]) for r in rows] == \
        [("orders-0", 6), ("orders-0", 7), ("orders-0", 8), ("orders-0", 9), ("orders-2", 1), ("orders-2", 3)]
    assert all(r["group"] == "g" for r in rows)
    assert [(s["queue"], s["committed_offset"], s["max_offset"], s["unconsumed"], s["listed"]) for s in summary] \
        == [(0, 6, 10, 4, 4), (2, 1, 4, 3, 2)]


def test_built_logdir_beyond_end_and_negative(run_cli, tmp_path):
    _logdir(tmp_path)
    code, out, _ = run_cli("query", tmp_path, "--unconsumed-by", "g2", "--json")
    rows, summary = _ndjson(out)
    assert code == 0 and rows == [] and summary[0]["unconsumed"] == 0 and "beyond" in summary[0]["note"]
    code, out, _ = run_cli("query", tmp_path, "--unconsumed-by", "neg", "--json")
    rows, summary = _ndjson(out)
    assert code == 0 and rows == [] and summary[0]["unconsumed"] is None and "negative" in summary[0]["note"]


def test_built_logdir_unknown_group_and_no_offsets(run_cli, tmp_path):
    _logdir(tmp_path)
    code, out, err = run_cli("query", tmp_path, "--unconsumed-by", "zz")
    assert code == 1 and "known groups (3): 'g', 'g2', 'neg'" in err
    other = tmp_path / "bare"
    _logdir(other, with_offsets=False)
    code, out, err = run_cli("query", other, "--unconsumed-by", "g")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "__consumer_offsets" in err
    f = tmp_path / "o.json"
    f.write_text(json.dumps({"g": {"orders": {"1": 1}}}))
    code, out, err = run_cli("query", other, "--unconsumed-by", "g", "--offsets", f, "--json")
    rows, summary = _ndjson(out)
    assert code == 0 and [(r["partition"], r["offset"]) for r in rows] == [("orders-1", 1)]
    f.write_text("{not json")
    code, out, err = run_cli("query", other, "--unconsumed-by", "g", "--offsets", f)
    assert code == 2 and "o.json" in err and len(err.strip().splitlines()) == 1


def test_built_logdir_info_lag_per_group(run_cli, tmp_path):
    _logdir(tmp_path)
    code, out, _ = run_cli("info", tmp_path, "--json")
    lag = {(g["group"], g["topic"]): g for g in json.loads(out)["consumer_groups"]}
    assert (lag[("g", "orders")]["queues"], lag[("g", "orders")]["committed"], lag[("g", "orders")]["lag"]) == \
        (2, 7, 7)
    assert lag[("g2", "orders")]["lag"] == 0
