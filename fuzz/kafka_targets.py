"""Fuzz targets for the Kafka decoders (same ``target(data) -> None`` shape as :mod:`fuzz.rocketmq_targets`; the registry is :mod:`fuzz.targets`).

Each returns normally for any input and raises only on a bug: an exception outside the documented ones
(record-level ``CodecError``/``ValueError``/``IndexError`` from :func:`iter_records`), events that do not tile
the input, a decompressed size above the cap, or a verify that yields more than the input can explain.
"""
from __future__ import annotations

import shutil
from pathlib import Path

from mqtool.errors import MqToolError
from mqtool.findings import Finding
from mqtool.kafka import indexfiles as KF
from mqtool.codecs import CodecError
from mqtool.codecs import decompress_kafka as decompress
from mqtool.kafka.internal import decoder_for
from mqtool.kafka.records import Batch, iter_records
from mqtool.kafka.scan import Damage, scan
from mqtool.options import VerifyOptions
from fuzz.scratch import SCRATCH as _SCRATCH, read_seeds, scratch as _scratch

CAP = 1 << 20




def scan_target(data: bytes) -> None:
    """kafka.scan.scan: batches and damage events tile the input in order, up to its end; records bounded."""
    end = 0
    for ev in scan(data, "fuzz"):
        assert isinstance(ev, (Batch, Damage))
        start = ev.position
        assert start == end, (start, end)
        end = ev.end
        assert end <= len(data)
        if isinstance(ev, Batch):
            ev.to_row()
            n = 0
            try:
                for r in iter_records(ev, limit=CAP):
                    n += 1
                    assert n <= CAP
                    assert r.key is None or len(r.key) <= CAP
            except (CodecError, ValueError, IndexError):
                pass
    assert end == len(data)


def decompress_target(data: bytes) -> None:
    codec = data[0] % 5 if data else 1
    try:
        out = decompress(codec, data[1:], CAP)
    except CodecError:
        return
    assert len(out) <= CAP


def internal_target(data: bytes) -> None:
    """__consumer_offsets / __transaction_state / __cluster_metadata key+value decoders: a dict, never raising."""
    cut = data[0] % (len(data) or 1) if data else 0
    key, value = data[1:1 + cut], data[1 + cut:]
    for topic in ("__consumer_offsets", "__transaction_state", "__cluster_metadata"):
        fn = decoder_for(topic)
        for k, v in ((key, value), (key, None), (None, value)):
            assert isinstance(fn(k, v), dict)


def index_files_target(data: bytes) -> None:
    """.index / .timeindex / .txnindex / .snapshot readers: damage comes back as fields, never raised."""
    for reader, name in ((KF.read_offset_index, "0.index"), (KF.read_time_index, "0.timeindex"),
                         (KF.read_txn_index, "0.txnindex"), (KF.read_snapshot, "0.snapshot")):
        r = reader(Path(name), data)
        assert r is not None


def text_files_target(data: bytes) -> None:
    """Checkpoint, leader-epoch checkpoint, properties and quorum-state readers over files."""
    p = _scratch("kafka-files/replication-offset-checkpoint", data)
    for fn in (KF.read_offset_checkpoint, KF.read_leader_epoch_checkpoint):
        c = fn(p)
        assert all(len(e) >= 2 for e in c.entries)
    for fn in (KF.read_properties, KF.read_quorum_state):
        try:
            assert isinstance(fn(p), dict)
        except MqToolError:
            pass


def verify_partition_target(data: bytes) -> None:
    """The whole verify over a partition cut from the input: two segments, their indexes, a snapshot and a
    leader-epoch checkpoint (cross-file checks follow offsets and positions read from the input)."""
    from mqtool.kafka.ops import verify

    root = _SCRATCH / "kafka" / "t-0"
    shutil.rmtree(root.parent, ignore_errors=True)
    n = len(data)
    a = (data[0] * 8) if n else 0
    idx, rest = data[1:1 + a], data[1 + a:]
    half = len(rest) // 2
    _scratch("kafka/t-0/00000000000000000000.log", rest[:half])
    _scratch("kafka/t-0/00000000000000000000.index", idx)
    _scratch("kafka/t-0/00000000000000000000.timeindex", idx[:len(idx) // 12 * 12])
    _scratch("kafka/t-0/00000000000000000005.log", rest[half:])
    _scratch("kafka/t-0/00000000000000000005.txnindex", data[-68:])
    _scratch("kafka/t-0/00000000000000000005.snapshot", data[-56:])
    _scratch("kafka/t-0/leader-epoch-checkpoint", b"0\n2\n0 0\n3 " + str(n).encode() + b"\n")
    try:
        findings, summary_fn = verify("store", root, VerifyOptions(progress=False, deep=True))
    except MqToolError:
        return
    count = 0
    for f in findings:
        assert isinstance(f, Finding)
        count += 1
        assert count <= 8 * n + 64, "unbounded findings"
    summary_fn()


TARGETS = {
    "kafka.scan": scan_target,
    "kafka.decompress": decompress_target,
    "kafka.internal": internal_target,
    "kafka.index_files": index_files_target,
    "kafka.text_files": text_files_target,
    "kafka.verify_partition": verify_partition_target,
}


def seeds(realdata: Path | None) -> dict[str, list[bytes]]:
    out: dict[str, list[bytes]] = {k: [] for k in TARGETS}
    if realdata is None or not (realdata / "kafka").is_dir():
        return out
    base = realdata / "kafka"

    def grab(glob: str, limit: int = 2) -> list[bytes]:
        return read_seeds(base, glob, limit, 8000)

    gen = "generated-4.0.0-SNAPSHOT/broker-append/forensics-0/"
    logs = grab(gen + "*.log", 4) + grab("kafka-python-3.0.12-patched/kp-0/*.log", 3)
    out["kafka.scan"] = logs
    out["kafka.index_files"] = grab(gen + "*.index", 2) + grab(gen + "*.timeindex", 2) + \
        grab(gen + "*.txnindex", 1) + grab(gen + "*.snapshot", 2)
    out["kafka.text_files"] = grab("generated-4.0.0-SNAPSHOT/broker-append/*checkpoint", 3) + \
        grab(gen + "leader-epoch-checkpoint", 1) + grab(gen + "partition.metadata", 1)
    idx = grab(gen + "00000000000000000037.index", 1)
    out["kafka.verify_partition"] = [bytes([len(i) // 8]) + i + s for i, s in zip(idx * 2, logs[1:3])]
    return out
