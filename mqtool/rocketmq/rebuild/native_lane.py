"""The commitlog walk for dispatch and its optional compiled lane (``mqtool/_native/rmqrebuild.c``).

:func:`iter_dispatch_records` reads the common unit with the schema-derived struct and hands the rest of a
segment to the general scanner at a BLANK, zero fill or damage; :func:`native_lib` is the configured helper
(:func:`native_layout`: what ``configure`` gets) that may dispatch a run of units itself."""
from __future__ import annotations

from array import array
from typing import Iterator

from formats import rocketmq as F
from mqtool import native
from mqtool.io import map_input
from mqtool.pages import PageWindow
from mqtool.rocketmq import layout
from mqtool.rocketmq.store import Segment
from mqtool.rocketmq.records import DecodeFailure, Message, decode_message
from mqtool.rocketmq.scan import Damage, SegmentScanner
from mqtool.schema_struct import field_positions
from mqtool.rocketmq.rebuild.consumequeue import UNIT
from mqtool.rocketmq.rebuild.index import _INDEX_KEY_JOIN, ENTRY

# Fixed part of a unit with IPv4 hosts (v1 and v2 share it: they differ after the body), schema-derived.
_DISPATCH_FIELDS = ("TOTALSIZE", "MAGICCODE", "QUEUEID", "QUEUEOFFSET", "PHYSICALOFFSET", "SYSFLAG",
                    "STORETIMESTAMP", "BODYLENGTH")
_HEAD = layout.narrow(_DISPATCH_FIELDS)
_HEAD_SIZE = _HEAD.size
_unpack_head = _HEAD.unpack_from
_unpack_prefix = layout.PREFIX.unpack_from
_TL_SIZE = layout.MAGIC_TOPIC_LENGTH_SIZE
_frame_tail = layout.frame_tail
_V1, _V2 = F.MESSAGE_MAGIC_CODE_V1, F.MESSAGE_MAGIC_CODE_V2
_V6 = F.BORNHOST_V6_FLAG | F.STOREHOSTADDRESS_V6_FLAG


# ---- the optional compiled dispatch loop (mqtool/_native/rmqrebuild.c) ----------------------------

_configured: set[int] = set()
# per queue in the shared int64 array: maxPhysicOffset, write position (units; -1 before its first file), end
# of the current file (units), units the helper appended
_QS_MAXPHYS, _QS_WRITE, _QS_FILE_END, _QS_UNITS, _QS_N = range(5)
_IS_N = 8               # index state: mode, indexCount, indexNum, slotNum, hashSlotCount, beginTs, endPhy, endTs


def _struct_fields(schema, wanted: tuple[str, ...]) -> tuple[dict[str, tuple[int, int]], int]:
    """({field: (offset, size)} of each ``wanted`` field, struct size) of the fixed prefix of a construct schema."""
    at = field_positions(schema)
    last_at, last_size = list(at.values())[-1]
    return {n: at[n] for n in wanted}, last_at + last_size


def native_layout() -> dict:
    """What ``rmqcore.rebuild.configure`` gets, by name: the consumequeue unit and index entry layouts and the
    constants, all from :mod:`formats.rocketmq` (the message layout is the core's: :func:`layout.native_core`)."""
    unit, unit_size = _struct_fields(F.CqUnit, ("offset", "size", "tagsCode"))
    entry, entry_size = _struct_fields(F.IndexEntry, ("keyHash", "phyOffset", "timeDiff", "prevIndex"))
    assert unit_size == UNIT and entry_size == ENTRY
    strs = {k: v.encode("ascii") for k, v in (
        ("prop_sep", F.PROPERTY_SEPARATOR), ("nv_sep", F.NAME_VALUE_SEPARATOR), ("key_sep", F.KEY_SEPARATOR),
        ("tags", F.PROPERTY_TAGS), ("keys", F.PROPERTY_KEYS), ("uniq", F.PROPERTY_UNIQ_KEY),
        ("multi_dispatch", F.PROPERTY_INNER_MULTI_DISPATCH), ("schedule_topic", F.SCHEDULE_TOPIC),
        ("key_join", _INDEX_KEY_JOIN))}
    return dict(cq_unit=unit, cq_unit_size=unit_size, index_entry=entry, index_entry_size=entry_size,
                tx_mask=F.TRANSACTION_MASK, tx_not=F.TRANSACTION_NOT_TYPE, tx_commit=F.TRANSACTION_COMMIT_TYPE,
                tx_rollback=F.TRANSACTION_ROLLBACK_TYPE, **strs)


def native_lib():
    """The configured helper (``rmqcore.rebuild``), or None (not built, switched off by ``MQTOOL_NATIVE``, or
    the layout refused: :func:`layout.native_core`)."""
    lib = native.load("rmqrebuild") if layout.native_core() is not None else None
    if lib is not None and id(lib) not in _configured:
        lib.configure(**native_layout())
        _configured.add(id(lib))
    return lib


def iter_dispatch_records(segments: list[Segment], max_size: int, on_damage, on_segment=None,
                          lane=None) -> Iterator[tuple]:
    """(PHYSICALOFFSET, TOTALSIZE, topic bytes, queueId, queueOffset, sysFlag, storeTimestamp, properties
    bytes) for every readable message in commitlog order.

    The common unit is read with the schema-derived struct (IPv6 units with the general decoder); at a BLANK,
    zero fill or damage the rest of the segment goes to :class:`~mqtool.rocketmq.scan.SegmentScanner` (end of
    data, damage + resync). ``on_segment(seg)`` is called after each segment (progress).

    ``lane(buf, pos, limit, end) -> new_pos`` (the compiled loop) may dispatch a run of units itself
    (those starting before ``limit``) before the walk reads the unit at ``pos``; it returns ``pos`` when it
    does not handle that unit. It is called only when everything yielded so far has been consumed.
    """
    for seg in segments:
        with map_input(seg.path) as mi:
            pos = yield from _fast_walk(seg, mi.buf, max_size, lane)
        if pos is not None:
            yield from _slow_rest(seg, pos, max_size, on_damage)
        if on_segment is not None:
            on_segment(seg)


def _slow_rest(seg: Segment, pos: int, max_size: int, on_damage):
    for ev in SegmentScanner(seg, max_size=max_size, check_crc=False, start=pos, resync_start=False).events():
        if isinstance(ev, Message):
            yield (ev.physical_offset, ev.size, ev.topic_raw, ev.queue_id, ev.queue_offset, ev.sys_flag,
                   ev.store_timestamp, ev.props_raw)
        elif isinstance(ev, Damage):
            on_damage(ev)


def _fast_walk(seg: Segment, buf, max_size: int, lane=None):
    """Yield dispatch tuples from the start of ``seg``; return None at its clean end, or the position where the
    general scanner must take over (BLANK, zero fill, damage)."""
    min_size = F.MIN_MESSAGE_SIZE
    end = len(buf)
    pos = 0
    win = PageWindow(buf)          # bounded RSS: only bytes copies leave this loop, pages behind are released
    while pos + _HEAD_SIZE <= end:
        if pos >= win.next_at:
            win.advance(pos)
        if lane is not None:
            npos = lane(buf, pos, win.next_at, end)
            if npos != pos:
                pos = npos
                continue
        total, magic = _unpack_prefix(buf, pos)
        if (magic != _V1 and magic != _V2) or total < min_size or total > max_size or pos + total > end:
            return pos
        (total, magic, qid, qoff, phys, sysflag, store_ts, body_len) = _unpack_head(buf, pos)
        stop = pos + total
        if sysflag & _V6 or body_len < 0:
            r = _one_slow(seg, buf, pos, end, max_size)
            if r is None:
                return pos
            yield r
            pos = stop
            continue
        try:
            tp, tl, pp = _frame_tail(buf, pos, pos + _HEAD_SIZE + body_len, stop, _TL_SIZE[magic])
        except DecodeFailure:
            return pos
        yield phys, total, buf[tp:tp + tl], qid, qoff, sysflag, store_ts, buf[pp:stop]
        pos = stop
    if pos >= end or not any(buf[pos:end]):
        return None
    return pos


def _one_slow(seg: Segment, buf, pos: int, end: int, max_size: int):
    """A unit the fast path does not cover (IPv6 hosts), through the general decoder; None if it fails."""
    try:
        m = decode_message(buf, pos, end, seg.base, seg.path, max_size, check_crc=False)
    except DecodeFailure:
        return None
    return (m.physical_offset, m.size, m.topic_raw, m.queue_id, m.queue_offset, m.sys_flag, m.store_timestamp,
            m.props_raw)


class SharedState:
    """The state the compiled loop shares with the Python writers (see ``mqtool/_native/rmqrebuild.c``): a queue
    slot per raw topic + queueId (``keymap``), each queue's current bytearray (``qbufs``), its int64 state
    (``qstate``: ``_QS_*`` per queue); the index state is copied in and out around a call (``istate``).

    ``res`` (the run's :class:`~mqtool.rocketmq.rebuild.replay.RebuildResult`) takes the counts of the units the
    loop dispatched; ``idx`` is the index writer (None when indexing is off)."""

    def __init__(self, lib, max_size: int, file_size: int, idx, res):
        self.lib, self.max_size, self.fs, self.idx, self.res = lib, max_size, file_size, idx, res
        self.keymap: dict[bytes, int] = {}
        self.qbufs: list = []
        self.qstate = array("q")
        self.istate = array("q", bytes(8 * _IS_N))
        self.no_slots, self.no_entries = array("i"), bytearray()

    def add_queue(self, qb) -> None:
        """Give a new queue writer its slot in the shared state."""
        qb.slot = len(self.qbufs)
        self.qbufs.append(None)
        self.qstate.extend((0, -1, 0, 0))             # _QS_MAXPHYS, _QS_WRITE, _QS_FILE_END, _QS_UNITS

    def put(self, qb, phys: int, size: int, code: int, qoff: int) -> None:
        """``qb.put`` with the state the compiled loop shares pulled before and pushed after."""
        qstate = self.qstate
        i = qb.slot * _QS_N
        qb.max_phys = qstate[i + _QS_MAXPHYS]
        qb.put(phys, size, code, qoff)
        buf = qb.buf
        qstate[i + _QS_MAXPHYS] = qb.max_phys
        qstate[i + _QS_WRITE] = -1 if buf is None else (qb.base + len(buf)) // UNIT
        qstate[i + _QS_FILE_END] = 0 if buf is None else (qb.base + self.fs) // UNIT
        self.qbufs[qb.slot] = buf

    def lane(self, buf, pos: int, limit: int, end: int) -> int:
        """The ``lane`` of :func:`iter_dispatch_records`: a run of units dispatched by the compiled loop."""
        idx, istate, res = self.idx, self.istate, self.res
        f = idx.current if idx is not None else None
        if f is not None:
            istate[0:_IS_N] = array("q", (1, f.index_count, f.index_num, f.slot_num, f.hash_slot_count, f.begin_ts,
                                          f.end_phy, f.end_ts))
            slots, entries, ts = f.slots, f.entries, f.ts
        else:
            istate[0] = 0
            slots, entries, ts = self.no_slots, self.no_entries, None
        npos, n, ncq, lts, lcts, mend, added = self.lib.run(buf, pos, limit, end, self.max_size, self.keymap,
                                                           self.qbufs, self.qstate,
                                                           istate if idx is not None else None, slots, entries, ts)
        if n:
            res.messages += n
            res.cq_units += ncq
            res.last_store_ts = lts
            if ncq:
                res.last_cq_ts = lcts
            if mend > res.max_offset:
                res.max_offset = mend
            if added:
                f.index_count, f.hash_slot_count, f.end_phy, f.end_ts = istate[1], istate[4], istate[6], istate[7]
                idx.entries += added
                f.maybe_spill()
        return npos

    def collect(self, qb) -> None:
        """Take back what the loop did to a queue (units appended, maxPhysicOffset) before it is finished."""
        if qb.slot >= 0:
            qb.units += self.qstate[qb.slot * _QS_N + _QS_UNITS]
            qb.max_phys = self.qstate[qb.slot * _QS_N + _QS_MAXPHYS]
