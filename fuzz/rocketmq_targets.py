"""Fuzz targets for the RocketMQ decoders (``target(data: bytes) -> None``; the registry is :mod:`fuzz.targets`)."""
from __future__ import annotations

from pathlib import Path

from formats import rocketmq as F
from mqtool import codecs
from mqtool.errors import UsageError
from mqtool.findings import Finding
from mqtool.options import VerifyOptions
from mqtool.rocketmq import indexfiles
from mqtool.rocketmq.config import ConfigSyntaxError, parse_fastjson
from mqtool.rocketmq.store import QueueFiles, RocketStore, Segment
from mqtool.rocketmq.msgid import decode_any
from mqtool.rocketmq.records import DecodeFailure, Message, decode_message
from mqtool.rocketmq.scan import Damage, End, SegmentScanner

from fuzz.scratch import SCRATCH as _SCRATCH, scratch

MAX_MSG = 1 << 20


def _scratch(name: str, data: bytes) -> str:
    return str(scratch(name, data))


def _touch_message(m: Message, end: int) -> None:
    assert 0 < m.size <= end - m.position, (m.position, m.size, end)
    assert m.body_start + m.body_len <= m.position + m.size
    row = m.to_row("base64")                  # every lazy field: properties, hosts, msg id, body (bounded)
    assert row["size"] == m.size
    m.keys, m.tags, m.uniq_key, m.transaction, m.compression  # noqa: B018


def decode_message_target(data: bytes) -> None:
    """records.decode_message at a few positions of the input."""
    n = len(data)
    for pos in {0, data[0] % n if n else 0, n // 2}:
        try:
            m = decode_message(data, pos, n, 1 << 20, "fuzz", MAX_MSG, True)
        except DecodeFailure as e:
            assert e.code, e
            continue
        _touch_message(m, n)


class _Mem:
    """What SegmentScanner._walk needs from a MappedInput, for bytes in memory."""

    mapped = False


def scan_target(data: bytes) -> None:
    """scan.SegmentScanner over the input as one segment: events cover the bytes at most once, in order."""
    seg = Segment("fuzz/00000000000001048576", "00000000000001048576", 1 << 20, len(data))
    view = memoryview(data)
    last = 0
    covered = 0
    ends = 0
    for ev in SegmentScanner(seg, max_size=MAX_MSG)._walk(data, view, _Mem()):
        assert 0 <= ev.position <= len(data), ev
        assert ev.offset == seg.base + ev.position
        if isinstance(ev, End):
            ends += 1
            continue
        assert ev.position >= last, (ev.position, last)
        size = ev.length if isinstance(ev, Damage) else ev.size
        if isinstance(ev, Message):
            _touch_message(ev, len(data))
        if isinstance(ev, (Message, Damage)):
            assert ev.position + size <= len(data)
            covered += size
            last = ev.position + size
    assert ends == 1
    assert covered <= len(data)
    view.release()


def scan_file_target(data: bytes) -> None:
    """The same through a real file (read whole / events(), the path the CLI takes)."""
    path = _scratch("commitlog/00000000000000000000", data)
    seg = Segment(path, "00000000000000000000", 0, len(data))
    n = 0
    for ev in SegmentScanner(seg, max_size=MAX_MSG).events():
        n += 1
        assert n <= len(data) + 4
        if isinstance(ev, Message):
            _touch_message(ev, len(data))


def consumequeue_target(data: bytes) -> None:
    path = _scratch("consumequeue/T/0/00000000000000000000", data)
    q = QueueFiles("T", 0, str(Path(path).parent), [Segment(path, "00000000000000000000", 0, len(data))])
    prev = -1
    for u in indexfiles.iter_cq_units(q, include_zero=True):
        assert u.queue_offset > prev and u.position + F.CQ_STORE_UNIT_SIZE <= len(data)
        prev = u.queue_offset
        u.to_row()


def index_target(data: bytes) -> None:
    """read_index_file + the index checks of verify (no commitlog): chains end, no exception."""
    from mqtool.rocketmq.verify import _Ctx, _verify_index_file

    path = _scratch("index/20261122090857074", data)
    v = indexfiles.read_index_file(path)
    # the bulk slot decoder agrees with the one-slot-at-a-time reader
    assert v.nonzero_slots() == [(i, v.slot(i)) for i in range(v.slot_num or 0) if v.slot(i)]
    ctx = _Ctx(RocketStore(path=str(_SCRATCH)), VerifyOptions(progress=False))
    n = 0
    for f in _verify_index_file(ctx, path, None, None, v.geometry):
        assert isinstance(f, Finding)
        n += 1
        assert n <= 10 + 3 * (v.slot_num or 0) + 3 * v.entry_count, "unbounded findings"


def store_target(data: bytes) -> None:
    """A whole tiny store cut from the input (commitlog, one queue, one small index file, checkpoint), through
    verify_store: the cross-file checks follow offsets and links read from the input."""
    from mqtool.rocketmq.store import open_store
    from mqtool.rocketmq.verify import verify_store

    n = len(data)
    a = data[0] * 20 if n else 0                   # consume queue bytes
    idx_size = F.index_file_size(4, 16)            # 4 slots, 16 entries: a geometry the reader infers
    cq, rest = data[1:1 + a], data[1 + a:]
    idx, rest = rest[:idx_size].ljust(idx_size, b"\x00"), rest[idx_size:]
    root = _SCRATCH / "store"
    import shutil

    shutil.rmtree(root, ignore_errors=True)
    _scratch("store/commitlog/00000000000000000000", rest)
    _scratch("store/consumequeue/T/0/00000000000000000000", cq[:len(cq) - len(cq) % 20])
    _scratch("store/index/20261122090857074", idx)
    _scratch("store/checkpoint", data[-F.CHECKPOINT_FILE_SIZE:])
    findings, summary_fn = verify_store(open_store(root), "store", VerifyOptions(progress=False))
    count = sum(1 for _ in findings)
    assert count == sum(summary_fn().by_code.values())


def checkpoint_target(data: bytes) -> None:
    path = _scratch("checkpoint", data)
    row = indexfiles.read_checkpoint(path)
    assert row["file_size"] == min(len(data), F.CHECKPOINT_FILE_SIZE + 1)


def config_target(data: bytes) -> None:
    text = data.decode("utf-8", errors="replace")
    try:
        parse_fastjson(text)
    except ConfigSyntaxError:
        pass


def properties_target(data: bytes) -> None:
    text = data.decode("utf-8", errors="replace")
    pairs = F.string_to_property_pairs(text)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in pairs)


def msgid_target(data: bytes) -> None:
    text = data.decode("latin-1")
    try:
        decode_any(text)
    except UsageError:
        pass


def codecs_target(data: bytes) -> None:
    codec = ("zlib", "gzip", "zstd", "lz4")[data[0] % 4] if data else "zlib"
    try:
        out = codecs.decompress(codec, data[1:], max_size=1 << 20)
    except codecs.CodecError:
        return
    assert len(out) <= 1 << 20


TARGETS = {
    "decode_message": decode_message_target,
    "scan": scan_target,
    "scan_file": scan_file_target,
    "consumequeue": consumequeue_target,
    "index": index_target,
    "checkpoint": checkpoint_target,
    "store": store_target,
    "config": config_target,
    "properties": properties_target,
    "msgid": msgid_target,
    "codecs": codecs_target,
}
