"""Fuzz targets for the LiteMQ decoders (same ``target(data) -> None`` shape as :mod:`fuzz.rocketmq_targets`; the registry is :mod:`fuzz.targets`).

Each returns normally for any input and raises only on a bug: an exception the decoder may not let out, or
a broken invariant (a record claiming bytes the input does not have, records overlapping, a walk that does
not end, more findings than the input can explain). Files go to the private scratch directory of
:mod:`fuzz.targets`.
"""
from __future__ import annotations

import shutil
from pathlib import Path

from formats import litemq as F
from mqtool.damage import Damage
from mqtool.errors import MqToolError
from mqtool.findings import Finding
from mqtool.litemq import indexfiles as CQ
from mqtool.litemq.store import Segment, resolve
from mqtool.litemq.records import DecodeError, LiteRecord, decode_message
from mqtool.litemq.scan import carve, parse_record_at, walk
from mqtool.options import VerifyOptions
from fuzz.scratch import SCRATCH as _SCRATCH, read_seeds, scratch as _scratch




def _check_record(rec: LiteRecord, n: int) -> None:
    assert 0 <= rec.position and rec.position + 4 + rec.length <= n, (rec.position, rec.length, n)
    b0, b1 = rec.body_slice
    assert rec.position + 8 <= b0 <= b1 <= rec.position + 4 + rec.length
    assert rec.consumed <= rec.length


def decode_message_target(data: bytes) -> None:
    """records.decode_message from a few starts: DecodeError or fields inside [start, end)."""
    n = len(data)
    for start in {0, 4, (data[0] if n else 0) % (n or 1)}:
        if start > n:
            continue
        try:
            m, tags, keys, consumed, bad, b0, b1 = decode_message(data, start, n)
        except DecodeError:
            continue
        assert start + consumed <= n and start <= b0 <= b1 <= n
        assert isinstance(m["Topic"], str) and isinstance(bad, tuple)


def record_target(data: bytes) -> None:
    """scan.parse_record_at at every 4th position and scan.carve over the input: bounded, never raising."""
    seg = Segment(0, Path("fuzz/00000000000000000000"), len(data), 0)
    n = len(data)
    for pos in range(0, min(n, 512), 4):
        rec, prob = parse_record_at(data, pos, n, seg, "fuzz")
        if rec is None:
            assert prob and isinstance(prob[0], str)
        else:
            _check_record(rec, n)
    last = -1
    count = 0
    for rec in carve(data, 0, n, seg, "fuzz"):
        _check_record(rec, n)
        assert rec.position > last
        last = rec.position
        count += 1
    assert count <= n // (F.LENGTH_PREFIX + 8) + 1


def _store(data: bytes) -> Path:
    """A tiny LiteMQ data dir cut from the input: two commitlog files, one queue, checkpoint, abort."""

    root = _SCRATCH / "litemq" / "broker"
    shutil.rmtree(root.parent, ignore_errors=True)
    n = len(data)
    k = (data[0] * 24) if n else 0
    cq, rest = data[1:1 + k], data[1 + k:]
    half = len(rest) // 2
    _scratch("litemq/broker/commitlog/00000000000000000000", rest[:half])
    _scratch("litemq/broker/commitlog/00000000000000000001", rest[half:])
    _scratch("litemq/broker/consumequeue/T/0/00000000000000000000", cq)
    _scratch("litemq/broker/checkpoint/checkpoint", data[-60:])
    _scratch("litemq/broker/abort/abort", data[:13])
    (root / "index").mkdir(parents=True, exist_ok=True)
    return root


def _resolved(data: bytes):
    """The LiteMQ store cut from the input (:func:`_store`), or None where it is no store."""
    try:
        return resolve(_store(data))
    except MqToolError:
        return None


def walk_target(data: bytes) -> None:
    """scan.walk over a store cut from the input: records inside their files, in order, bounded output."""
    store = _resolved(data)
    if store is None:
        return
    items = 0
    for item in walk(store, carve_stale=True, with_body=True):
        items += 1
        assert items <= 4 * len(data) + 16, "unbounded walk"
        if isinstance(item, Damage):
            continue
        assert item.body is not None and len(item.body) == item.body_slice[1] - item.body_slice[0]


def verify_store_target(data: bytes) -> None:
    """The whole verify (record, consume queue, marker and index checks) over a store cut from the input."""
    from mqtool.litemq.verify import run_verify

    store = _resolved(data)
    if store is None:
        return
    findings, summary_fn = run_verify("store", store, VerifyOptions(progress=False))
    count = 0
    for f in findings:
        assert isinstance(f, Finding)
        count += 1
    assert count == sum(summary_fn().by_code.values())


def consumequeue_target(data: bytes) -> None:
    root = _store(bytes([len(data) // 24 % 256]) + data)
    try:
        store = resolve(root)
    except MqToolError:
        return
    for q in CQ.queues(store):
        for item in CQ.read_queue(store, q, with_stale=True):
            if not isinstance(item, Finding):
                assert item.size is not None and item.position % F.CQ_ENTRY_SIZE == 0
                assert item.position + F.CQ_ENTRY_SIZE <= len(data) + 24


def checkpoint_target(data: bytes) -> None:
    p = _scratch("litemq-files/checkpoint", data)
    row, findings = CQ.read_checkpoint(p)
    assert all(isinstance(f, Finding) for f in findings)
    if row is not None:
        assert isinstance(row["consumer_offsets"], dict)


def abort_target(data: bytes) -> None:
    p = _scratch("litemq-files/abort", data)
    row, findings = CQ.read_abort(p)
    assert isinstance(row, dict) and all(isinstance(f, Finding) for f in findings)


def index_target(data: bytes) -> None:
    """read_index over a small index file (header from the input, a few slots and entries)."""
    p = _scratch("litemq-files/index/20261122091857", data)
    n = 0
    try:
        for item in CQ.read_index(p, want_slots=True):
            n += 1
            assert n <= len(data) + 8
    except MqToolError:
        pass


TARGETS = {
    "litemq.decode_message": decode_message_target,
    "litemq.record": record_target,
    "litemq.walk": walk_target,
    "litemq.verify_store": verify_store_target,
    "litemq.consumequeue": consumequeue_target,
    "litemq.checkpoint": checkpoint_target,
    "litemq.abort": abort_target,
    "litemq.index": index_target,
}


def seeds(realdata: Path | None) -> dict[str, list[bytes]]:
    out: dict[str, list[bytes]] = {k: [] for k in TARGETS}
    if realdata is None or not (realdata / "litemq").is_dir():
        return out
    base = realdata / "litemq"

    def grab(glob: str, limit: int = 2) -> list[bytes]:
        return read_seeds(base, glob, limit, 6000)

    logs = grab("*/data/broker/commitlog/00000000000000000000", 2)
    cqs = grab("*/data/broker/consumequeue/orders.v1/0/*", 2)
    out["litemq.decode_message"] = [s[4:2000] for s in logs]
    out["litemq.record"] = logs
    out["litemq.walk"] = [bytes([0]) + s for s in logs]
    out["litemq.verify_store"] = [bytes([len(c) // 24]) + c + s for c, s in zip(cqs, logs)]
    out["litemq.consumequeue"] = cqs
    out["litemq.checkpoint"] = grab("*/data/broker/checkpoint/checkpoint", 1)
    out["litemq.abort"] = grab("*/data/broker/abort/abort", 1)
    return out
