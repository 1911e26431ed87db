"""Conformance against ../shared/realdata/kafka: every file parses, every expected batch is found with the same
fields, every CRC is valid, internal topics decode."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from builders import roundtrip
from conftest import load_json, require_realdata
from mqtool.io import map_input, read_input
from mqtool.kafka import indexfiles as F
from mqtool.kafka import store as L
from mqtool.kafka.internal import decode_consumer_offsets, decode_transaction_state, decode_cluster_metadata
from mqtool.kafka.records import Batch, iter_records
from mqtool.kafka.scan import Damage, scan


def _all_files(root: Path):
    for d, _dirs, names in os.walk(root):
        for n in sorted(names):
            yield Path(d) / n


def _batches(path: Path):
    out, damage = [], []
    for ev in scan(read_input(path), str(path)):     # bytes, so batches outlive the read
        (damage if isinstance(ev, Damage) else out).append(ev)
    return out, damage


def test_every_realdata_file_parses():
    root = require_realdata("kafka")
    counts = {"log": 0, "index": 0, "timeindex": 0, "txnindex": 0, "snapshot": 0, "checkpoint": 0, "batches": 0,
              "records": 0}
    for p in _all_files(root):
        kind = L.file_kind(p)
        if kind in ("log", "kraft-snapshot"):
            with map_input(p) as m:
                for ev in scan(m.buf, str(p)):
                    assert not isinstance(ev, Damage), (p, ev)
                    assert ev.crc_ok and ev.error is None, (p, ev.position)
                    counts["batches"] += 1
                    counts["records"] += sum(1 for _ in iter_records(ev))
            counts["log"] += 1
        elif kind == "index":
            f = F.read_offset_index(p)
            assert f.partial == 0 and f.garbage_tail == 0, p
            counts["index"] += 1
        elif kind == "timeindex":
            f = F.read_time_index(p)
            assert f.partial == 0 and f.garbage_tail == 0, p
            counts["timeindex"] += 1
        elif kind == "txnindex":
            assert F.read_txn_index(p).partial == 0
            counts["txnindex"] += 1
        elif kind == "snapshot":
            s = F.read_snapshot(p)
            assert s.crc_ok and s.problem is None, p
            counts["snapshot"] += 1
        elif kind == "offset-checkpoint":
            assert F.read_offset_checkpoint(p).problem is None, p
            counts["checkpoint"] += 1
        elif kind == "leader-epoch-checkpoint":
            assert F.read_leader_epoch_checkpoint(p).problem is None, p
            counts["checkpoint"] += 1
        elif kind == "partition-metadata":
            props = F.read_properties(p)
            assert props["version"] == "0" and len(props["topic_id"]) == 22
        elif kind == "meta-properties":
            assert F.read_properties(p)["version"] in ("0", "1")
        elif kind == "quorum-state":
            assert "leaderEpoch" in F.read_quorum_state(p)
    assert counts["log"] > 100 and counts["batches"] > 7000 and counts["snapshot"] >= 20


def test_kraft_metadata_log_counts_from_manifest():
    p = require_realdata("kafka", "ldi-poc-kraft-2026", "8030792", "__cluster_metadata-0", "00000000000000000000.log")
    batches, damage = _batches(p)
    assert not damage
    assert len(batches) == 4814                                   # MANIFEST: 4814 batches
    assert sum(1 for b in batches if b.is_control) == 1           # 1 control batch
    assert sum(sum(1 for _ in iter_records(b)) for b in batches) == 4929   # 4929 records
    with map_input(p) as m:
        kinds = {}
        for ev in scan(m.buf, str(p)):
            if ev.is_control:
                continue
            for r in iter_records(ev):
                d = decode_cluster_metadata(r.key, r.value)
                assert d["frameVersion"] == 1
                kinds[d["type"]] = kinds.get(d["type"], 0) + 1
    assert max(kinds, key=kinds.get) == "NoOpRecord"               # MANIFEST: mostly NoOp records


def _expected_row(seg: int, b: Batch) -> dict:
    r = b.to_row()
    return dict(segment=seg, position=r["position"], size=r["size"], magic=r["magic"], baseOffset=r["offset"],
                lastOffset=r["last_offset"], codec=r["codec"], timestampType=r["timestamp_type"],
                maxTimestamp=r["timestamp"], producerId=r["producer_id"], producerEpoch=r["producer_epoch"],
                baseSequence=r["base_sequence"], isTransactional=r["is_transactional"],
                isControl=r["is_control"], partitionLeaderEpoch=r["partition_leader_epoch"],
                deleteHorizonMs=r["delete_horizon_ms"], crc=r["crc"])


@pytest.mark.parametrize("variant", ["broker-append", "recovered"])
def test_expected_json_batches(variant):
    base = require_realdata("kafka", "generated-4.0.0-SNAPSHOT")
    exp = load_json(base / "broker-append" / "expected.json")
    got = []
    for seg in exp["segmentBaseOffsets"]:
        batches, damage = _batches(base / variant / "forensics-0" / f"{seg:020d}.log")
        assert not damage
        got += [(seg, b) for b in batches]
    assert len(got) == len(exp["batches"])
    for (seg, b), e in zip(got, exp["batches"]):
        mine = _expected_row(seg, b)
        for k, v in mine.items():
            assert e[k] == v, (e["desc"], k)
        assert b.crc_ok
    assert got[-1][1].last_offset + 1 == exp["logEndOffset"]


def test_expected_records_generated():
    base = require_realdata("kafka", "generated-4.0.0-SNAPSHOT", "broker-append", "forensics-0")
    recs = []
    for seg in (0, 37, 80, 93):
        batches, _ = _batches(base / f"{seg:020d}.log")
        for b in batches:
            recs += [(b, r) for r in iter_records(b)]
    offsets = [r.offset for _, r in recs]
    assert offsets == list(range(127))                 # every offset 0..126 exactly once, in order
    by_off = {r.offset: (b, r) for b, r in recs}
    # v1 LogAppendTime wrapper: every inner message reports the wrapper's time (reference §3)
    for o in (32, 33, 34):
        assert by_off[o][1].timestamp == 1700000500000
    # delete-horizon batch: baseTimestamp is the horizon, record delta -86400000 (reference §4.1)
    b95, r95 = by_off[95]
    assert b95.delete_horizon_ms == 1700090400000 and r95.timestamp == 1700090400000 - 86400000
    # control markers (reference §4.3): ABORT pid 3000 at 87, COMMIT pid 2000 at 88, ABORT pid 4000 at 94
    assert (by_off[87][1].control_type, by_off[87][0].producer_id) == (0, 3000)
    assert (by_off[88][1].control_type, by_off[88][0].producer_id) == (1, 2000)
    assert (by_off[94][1].control_type, by_off[94][0].producer_id) == (0, 4000)
    # v2 LogAppendTime zstd batch 67-71: maxTimestamp for every record
    assert {by_off[o][1].timestamp for o in range(67, 72)} == {1700000900000}


def test_kafka_python_segments_all_codecs():
    root = require_realdata("kafka", "kafka-python-3.0.12-patched", "kp-0")
    codecs = set()
    magics = set()
    for p in sorted(root.glob("*.log")):
        batches, damage = _batches(p)
        assert not damage
        for b in batches:
            codecs.add((b.magic, b.codec))
            magics.add(b.magic)
            assert b.crc_ok
            rs = list(iter_records(b))
            assert all(r.crc_ok is not False for r in rs)
    assert magics == {0, 1, 2}
    assert {c for m, c in codecs if m == 2} == {0, 1, 2, 3, 4}
    assert {c for m, c in codecs if m < 2} >= {0, 1, 2, 3}


def test_coordinator_expected_and_decoders():
    base = require_realdata("kafka", "generated-4.0.0-SNAPSHOT", "coordinator")
    for name, dec in (("__consumer_offsets-0", decode_consumer_offsets),
                      ("__transaction_state-0", decode_transaction_state)):
        exp = json.loads((base / f"{name}.expected.json").read_text())
        batches, damage = _batches(base / name / "00000000000000000000.log")
        assert not damage
        assert [(b.base_offset, b.last_offset, {0: "none", 1: "gzip"}[b.codec]) for b in batches] == \
            [(e["baseOffset"], e["lastOffset"], e["codec"]) for e in exp]
        decoded = [dec(r.key, r.value) for b in batches for r in iter_records(b)]
        assert all("error" not in d and "value_error" not in d and "key_error" not in d for d in decoded), decoded
        if name.startswith("__consumer"):
            # MANIFEST: OffsetCommit values v0-v4, GroupMetadata values v0-v4, tombstones, one key type 3
            assert sorted(d["value_version"] for d in decoded if d["type"] == "OffsetCommit" and
                          d["value"] != "<DELETE>") == [0, 1, 2, 3, 4]
            assert sorted(d["value_version"] for d in decoded if d["type"] == "GroupMetadata" and
                          d["value"] != "<DELETE>") == [0, 1, 2, 3, 4]
            assert sum(1 for d in decoded if d["value"] == "<DELETE>") == 2
            assert any(d["key_version"] == 3 for d in decoded)
            v1 = next(d for d in decoded if d.get("value_version") == 1 and d["type"] == "OffsetCommit")
            assert v1["value"]["expireTimestamp"] is not None
        else:
            states = {d["value"]["transactionStatus"] for d in decoded if d["value"] != "<DELETE>"}
            assert states == set(range(8))
            v1 = [d for d in decoded if d.get("value_version") == 1]
            assert v1 and all("taggedFields" in d["value"] for d in v1)
            empty = [d for d in decoded if d.get("value") != "<DELETE>" and d["value"]["transactionStatus"] == 0]
            assert all(d["value"]["transactionPartitions"] is None for d in empty)


def test_generated_txnindex_and_snapshots():
    base = require_realdata("kafka", "generated-4.0.0-SNAPSHOT", "broker-append", "forensics-0")
    t93 = F.read_txn_index(base / "00000000000000000093.txnindex")
    assert [tuple(e) for e in t93.entries] == [(0, 4000, 89, 94, 95)]      # firstOffset 89 < base 93
    s80 = F.read_snapshot(base / "00000000000000000080.snapshot")
    assert s80.crc_ok and [e[0] for e in s80.entries] == [1000]
    s127 = F.read_snapshot(base / "00000000000000000127.snapshot")
    assert sorted(e[0] for e in s127.entries) == [1000, 2000, 3000, 4000]
    le = F.read_leader_epoch_checkpoint(base / "leader-epoch-checkpoint")
    assert le.entries == [(3, 37), (4, 75)]


def test_consumer_protocol_embedded_in_real_group_metadata():
    """c4 __consumer_offsets-32: a real Kafka 2.x GroupMetadataValue v3; the member's subscription bytes are
    0001 00000001 000b 'first_topic' ffffffff 00000000 (v1, one topic, null userData, no owned partitions)."""
    from formats import kafka as K
    p = require_realdata("kafka", "volodymyrzee-kafka-zk-2020", "c4-f6e2174", "__consumer_offsets-32",
                         "00000000000000000000.log")
    batches, _ = _batches(p)
    gm = [decode_consumer_offsets(r.key, r.value) for b in batches for r in iter_records(b)]
    gm = [d for d in gm if d["type"] == "GroupMetadata" and d["value"] != "<DELETE>"]
    m = gm[0]["value"]["members"][0]
    assert m["subscription"] == {"version": 1, "topics": ["first_topic"], "userData": None, "ownedPartitions": []}
    assert m["assignment"]["assignedPartitions"] == [{"topic": "first_topic", "partitions": [0, 1, 2]}]
    raw = bytes.fromhex("00000001000b66697273745f746f706963ffffffff00000000")
    roundtrip(K.ConsumerProtocolSubscription(1), raw)
