"""Rebuild RocketMQ consumequeue and index files from the commitlog, the way the broker's dispatcher does.

The broker builds both from the commitlog in ``ReputMessageService``: every readable message becomes a
``DispatchRequest`` that goes to the consumequeue builder (``ConsumeQueue#putMessagePositionInfo``) and to the
index builder (``IndexService#buildIndex`` / ``IndexFile#putKey``). This module replays that in commitlog order
with the same state machines, so the output bytes are the broker's (``shared/reference/rocketmq.md`` §4–§7):

* consumequeue: a file per ``mappedFileSizeConsumeQueue`` bytes, named by its first byte's logical offset;
  the skip rules (``offset + size <= maxPhysicOffset``; expected position behind the write position), the
  blank fill of the first file of a queue that starts above 0 (``fillPreBlank``), and append-at-write-position
  (a gap in queue offsets shifts later units, as on the broker); the last file is zero-filled to its full size
  as the broker preallocates (``--trim`` cuts it after the last unit);
* index: a new file when none exists or the last one holds ``indexNum − 1`` entries; a new file starts with
  the previous file's endPhyOffset/endTimestamp in its begin*/end* fields, the first entry's timeDiff is taken
  against them and begin* are then overwritten; a message whose offset is below the current file's
  endPhyOffset is skipped;
* names of index files cannot be known (creation time on the broker): each is named from its first entry's
  store timestamp, ``yyyyMMddHHmmssSSS`` in UTC, bumped by 1 ms when it would not sort after the previous.

Output goes to a separate directory through :mod:`mqtool.io` (temp name, fsync, rename). ``--compare``
compares each rebuilt file with the store's own file and yields a finding per difference.

Layouts come from :mod:`mqtool.rocketmq.layout` (derived once from :mod:`formats.rocketmq`).
"""
from __future__ import annotations

import os
import struct
import tempfile
import time
from array import array
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import Iterator

from formats import rocketmq as F
from mqtool import native
from mqtool.errors import InputError, NotAStoreError, UsageError
from mqtool.findings import ERROR, INFO, WARNING, Finding, Summary
from mqtool.io import OutputDir, map_input, open_input, prepare_output_dir, read_input
from mqtool.options import RebuildOptions
from mqtool.pages import PageWindow
from mqtool.progress import progress
from mqtool.rocketmq import dispatch as D
from mqtool.rocketmq import indexfiles
from mqtool.rocketmq import layout
from mqtool.rocketmq.config import read_broker_conf
from mqtool.rocketmq.indexfiles import CQ_STRUCT, IDX_ENTRY, IDX_HEADER, IDX_HEADER_NAMES
from mqtool.rocketmq.store import RocketStore, Segment
from mqtool.rocketmq.records import DecodeFailure, Message, decode_message
from mqtool.rocketmq.scan import Damage, SegmentScanner
from mqtool.schema_struct import field_positions

UNIT = F.CQ_STORE_UNIT_SIZE
ENTRY = F.INDEX_ENTRY_SIZE
HEADER = F.INDEX_HEADER_SIZE
MAX_FINDINGS_PER_FILE = 20
_INT_MAX = 0x7FFFFFFF
_BLANK_UNIT = CQ_STRUCT.pack(0, F.CQ_BLANK_SIZE, 0)
_ZERO_UNIT = bytes(UNIT)
_pack_unit = CQ_STRUCT.pack
_pack_entry = IDX_ENTRY.pack
_key_hashes = D.index_key_hashes
_NATIVE_LITTLE = struct.pack("=i", 1) != struct.pack(">i", 1)
# The slot table is kept as array('i') and written big-endian: check it against the schema's slot type.
assert array("i").itemsize == F.INDEX_SLOT_SIZE == F.IndexSlot.sizeof()
assert F.IndexSlot.build(-2) == (-2).to_bytes(F.INDEX_SLOT_SIZE, "big", signed=True)


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
_INDEX_KEY_JOIN = "#"                      # IndexService#buildKey: topic + "#" + key
_TS = struct.Struct("=q")                   # per-entry store times (compare mode), native order
_CMP_ENTRIES = 1 << 16                      # index entries compared / counted per chunk (1.3 MB)


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


# ---- settings ---------------------------------------------------------------------------------------

@dataclass
class Settings:
    cq_file_size: int
    hash_slots: int
    index_num: int
    rules: D.DispatchRules
    sources: dict = field(default_factory=dict)   # setting -> where it came from
    cq_decision: object = None                    # indexfiles.cq_file_size's SizeDecision
    index_geometries: object = None               # indexfiles.IndexGeometries of the store's index files


def resolve_settings(opts: RebuildOptions, store: RocketStore | None = None) -> Settings:
    """Each size comes from its option, else ``--broker-conf``, else the store's own files (consumequeue file
    names and sizes; index headers and structure), else the broker default
    (:func:`indexfiles.cq_file_size`, :func:`indexfiles.index_geometries`). ``sources`` says which."""
    conf: dict[str, str] = read_broker_conf(opts.broker_conf) if opts.broker_conf else {}
    src: dict[str, str] = {}
    cq = indexfiles.cq_file_size(store, opts)
    src["mappedFileSizeConsumeQueue"] = cq.source
    geos = indexfiles.index_geometries(store.index_files if store is not None else [], opts)
    geo = geos.main()
    (given_slots, given_num), _ = indexfiles.given_index_geometry(opts)
    if geo is not None and geo.slots is None and geo.candidates and given_slots is None and given_num is None:
        # the files' size is known, not its split: a pair of that size (named in the index-geometry warning),
        # so the rebuild is the store's size rather than the broker's 420 MB default
        slots, num = geo.candidates[0]
        src["maxHashSlotNum"] = src["maxIndexNum"] = "guess"
    elif geo is None or geo.slots is None:      # no index file to learn from (or none that tells)
        (slots, num), given_from = indexfiles.given_index_geometry(opts)
        src["maxHashSlotNum"] = given_from if slots is not None else "default"
        src["maxIndexNum"] = given_from if num is not None else "default"
        slots = F.DEFAULT_MAX_HASH_SLOTS if slots is None else slots
        num = F.DEFAULT_MAX_INDEX_NUM if num is None else num
        if slots < 1 or num < 2:
            raise UsageError(f"maxHashSlotNum {slots} / maxIndexNum {num} ({given_from}): slots must be > 0, "
                             "entries > 1")
    else:
        slots, num = geo.slots, geo.entries
        src["maxHashSlotNum"] = src["maxIndexNum"] = geo.source
    levels = D.parse_delay_levels(conf.get("messageDelayLevel"))
    src["messageDelayLevel"] = "broker-conf" if "messageDelayLevel" in conf else "default"
    if not levels:
        raise UsageError(f"messageDelayLevel={conf.get('messageDelayLevel')!r} in {opts.broker_conf}: no delay level "
                         f"can be read (expected e.g. '1s 5s 10s 30s 1m')")
    rules = D.DispatchRules(delay_levels=levels)
    for key, attr in (("enableMultiDispatch", "multi_dispatch"), ("enableLmq", "lmq"),
                      ("messageIndexEnable", "index_enable")):
        if key in conf:
            setattr(rules, attr, conf[key].strip().lower() == "true")
    return Settings(cq.value, slots, num, rules, src, cq, geos)


# ---- commitlog records for dispatch -------------------------------------------------------------

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


# ---- consumequeue builder -------------------------------------------------------------------------

class QueueBuilder:
    """One queue's ``MappedFileQueue`` + ``ConsumeQueue#putMessagePositionInfo`` state."""

    __slots__ = ("topic", "queue_id", "file_size", "base", "buf", "first_created", "max_phys", "emit",
                 "notes", "units", "slot")

    def __init__(self, topic: str, queue_id: int, file_size: int, emit):
        self.topic, self.queue_id, self.file_size, self.emit = topic, queue_id, file_size, emit
        self.base = -1
        self.buf: bytearray | None = None
        self.first_created = False
        self.max_phys = 0
        self.notes: list[tuple[str, int, Finding]] = []
        self.units = 0
        self.slot = -1                                # index in the compiled loop's queue state, -1 none

    def put(self, offset: int, size: int, tags_code: int, cq_offset: int) -> None:
        if offset + size <= self.max_phys:
            self._note("cq-put-skipped", f"message at commitlog offset {offset} ends at or below the queue's "
                       f"maxPhysicOffset {self.max_phys}: the broker skips it", offset)
            return
        expect = cq_offset * UNIT
        fs = self.file_size
        buf = self.buf
        if buf is None:
            self.base = expect - expect % fs
            buf = self.buf = bytearray()
            self.first_created = True
        elif len(buf) >= fs:
            self.emit(self, self.base, bytes(buf), False)
            self.base += fs
            buf = self.buf = bytearray()
            self.first_created = False
        if self.first_created and cq_offset != 0 and not buf:
            buf += _BLANK_UNIT * ((expect % fs) // UNIT)
        if cq_offset != 0:
            cur = self.base + len(buf)
            if expect < cur:
                self._note("cq-put-repeated", f"queue offset {cq_offset} of the message at commitlog offset "
                           f"{offset} is behind the write position {cur // UNIT}: the broker skips it", offset)
                return
            if expect != cur:
                self._note("cq-offset-gap", f"queue offset {cq_offset} of the message at commitlog offset "
                           f"{offset} is ahead of the write position {cur // UNIT}: the broker appends it at "
                           f"{cur // UNIT} anyway", offset)
        self.max_phys = offset + size
        buf += _pack_unit(offset, size, tags_code)
        self.units += 1

    def _note(self, code: str, message: str, offset: int) -> None:
        """Keep the first occurrence of each kind and count the rest (one finding per kind and queue)."""
        for i, (c, n, f) in enumerate(self.notes):
            if c == code:
                self.notes[i] = (c, n + 1, f)
                return
        self.notes.append((code, 1, Finding(WARNING, code, f"consumequeue/{self.topic}/{self.queue_id}", None,
                                            offset, message)))

    def findings(self) -> list[Finding]:
        out = []
        for _, n, f in self.notes:
            if n > 1:
                f = Finding(f.severity, f.code, f.file, f.position, f.offset,
                            f"{n} messages: first: {f.message}", f.expected, f.actual)
            out.append(f)
        return out

    def finish(self) -> None:
        if self.buf is not None:
            self.emit(self, self.base, bytes(self.buf), True)
            self.buf = None


# ---- index builder --------------------------------------------------------------------------------

class IndexFileBuilder:
    """One ``IndexFile``: header, slot table and entries as the broker writes them."""

    def __init__(self, seq: int, slot_num: int, index_num: int, prev_end_phy: int, prev_end_ts: int,
                 keep_times: bool = True):
        self.seq = seq
        self.slot_num, self.index_num = slot_num, index_num
        self.slots = array("i", bytes(4 * slot_num))
        self.entries = bytearray(ENTRY)               # entry 0 is never written
        # store timestamp per entry, needed only to compare with a file the broker stopped filling
        self.ts = bytearray(_TS.size) if keep_times else None     # native int64 per entry
        # Without entry times (plain --out) entries are final once written (IndexFile#putKey never rewrites
        # one: the chain lives in the slots and in each new entry's prev field), so past SPILL_BYTES they move
        # to a scratch file and memory stays bounded whatever the file's geometry (20 M entries = 400 MB).
        self.spill = self.ts_spill = None
        self.spilled = 0                              # entries 0..spilled-1 are in the scratch file
        self.init_phy = prev_end_phy if prev_end_phy > 0 else 0
        self.init_ts = prev_end_ts if prev_end_ts > 0 else 0
        self.begin_ts = self.end_ts = self.init_ts
        self.begin_phy = self.end_phy = self.init_phy
        self.hash_slot_count = 0
        self.index_count = 1
        self.first_seen_ts: int | None = None         # store time of the message that created the file

    @property
    def full(self) -> bool:
        return self.index_count >= self.index_num

    def put(self, key_hash: int, phy: int, ts: int) -> bool:
        """``IndexFile#putKey`` for one key; False when the file is full."""
        return self.put_keys((key_hash,), 0, phy, ts) == 1

    def put_keys(self, hashes, start: int, phy: int, ts: int) -> int:
        """``IndexFile#putKey`` for ``hashes[start:]`` of one message until the file is full; returns how many
        were put."""
        count = self.index_count
        room = self.index_num - count
        if room <= 0:
            return 0
        todo = hashes[start:start + room] if start or len(hashes) > room else hashes
        slots, slot_num, entries = self.slots, self.slot_num, self.entries
        if count <= 1:                      # first put: timeDiff against the inherited begin, then begin = this
            begin = self.begin_ts
            self.begin_phy, self.begin_ts = phy, ts
        else:
            begin = self.begin_ts
        if begin <= 0:
            td = 0
        else:
            td = ts - begin
            td = 0 if td < 0 else td // 1000          # Java truncates toward zero; negatives clamp to 0
            if td > _INT_MAX:
                td = _INT_MAX
        new_slots = 0
        for key_hash in todo:
            slot = key_hash % slot_num
            sv = slots[slot]
            if sv <= 0 or sv > count:
                sv = 0
                new_slots += 1
            entries += _pack_entry(key_hash, phy, td, sv)
            slots[slot] = count
            count += 1
            if count == 2 and begin != ts:          # later keys of the first message: diff against the new begin
                begin = ts
                td = 0
        n = len(todo)
        self.hash_slot_count += new_slots
        if self.ts is not None:
            self.ts += _TS.pack(ts) * n
        self.index_count = count
        self.end_phy = phy
        self.end_ts = ts
        return n

    def header(self) -> tuple:
        return (self.begin_ts, self.end_ts, self.begin_phy, self.end_phy, self.hash_slot_count, self.index_count)

    SPILL_BYTES = 32 << 20

    def maybe_spill(self) -> None:
        """Move the entries written so far (and their store times, when kept) to scratch files in $TMPDIR once
        they pass SPILL_BYTES: entries are final once put (``IndexFile#putKey`` never rewrites one: the chain
        lives in the slots and in each new entry's prev field), so memory stays bounded whatever the file's
        geometry (20 M entries = 400 MB). Readers go through :meth:`read_entries` / :meth:`read_times`."""
        if len(self.entries) < self.SPILL_BYTES:
            return
        if self.spill is None:
            self.spill = tempfile.TemporaryFile(prefix="mqtool-index-entries-")
            self.ts_spill = tempfile.TemporaryFile(prefix="mqtool-index-times-") if self.ts is not None else None
        self.spill.write(self.entries)
        self.spilled += len(self.entries) // ENTRY
        self.entries.clear()
        if self.ts is not None:
            self.ts_spill.write(self.ts)
            self.ts.clear()

    def _read(self, k0: int, k1: int, width: int, spill, tail) -> bytes:
        """Items ``k0..k1-1`` (``width`` bytes each) of a column split into a spilled head and a tail in memory."""
        k1 = min(k1, self.index_count)
        if k0 >= k1:
            return b""
        out = b""
        s = self.spilled
        if k0 < s:
            spill.flush()
            out = os.pread(spill.fileno(), (min(k1, s) - k0) * width, k0 * width)
        if k1 > s:
            a = max(k0, s) - s
            out += bytes(tail[a * width:(k1 - s) * width])
        return out

    def read_entries(self, k0: int, k1: int) -> bytes:
        """The packed entries ``k0..k1-1`` (entry 0 is the unused zero entry)."""
        return self._read(k0, k1, ENTRY, self.spill, self.entries)

    def read_time(self, k: int) -> int:
        """Store timestamp of the message behind entry ``k`` (needs keep_times)."""
        return _TS.unpack(self._read(k, k + 1, _TS.size, self.ts_spill, self.ts))[0]

    def _entry_pieces(self):
        if self.spill is not None:
            self.spill.seek(0)
            while chunk := self.spill.read(8 << 20):
                yield chunk
        yield self.entries

    def parts(self) -> tuple[Iterator, int]:
        """(pieces, file size): header, slot table, entries (an iterator: spilled entries are read back in
        chunks); the rest of the file is zero."""
        slots = self.slots
        if _NATIVE_LITTLE:
            slots = array("i", slots)
            slots.byteswap()
        head = [IDX_HEADER.pack(*self.header()), slots.tobytes()]
        return (chain(head, self._entry_pieces()), F.index_file_size(self.slot_num, self.index_num))

    def to_bytes(self) -> bytes:
        pieces, size = self.parts()
        out = bytearray(size)
        p = 0
        for piece in pieces:
            out[p:p + len(piece)] = piece
            p += len(piece)
        return out

    def prefix_view(self, count: int) -> tuple[tuple, array]:
        """(header, slots) as they were when ``indexCount`` was ``count`` (entries 1..count−1 written).

        Only entries from ``count`` on are held at once (a slot pointing there is walked back along their prev
        fields); the ones below are streamed in chunks to count the new-slot entries."""
        count = max(1, min(count, self.index_count))
        if self.ts is None:
            raise ValueError("prefix_view needs keep_times=True")
        if count <= 1:
            header = (self.init_ts, self.init_ts, self.init_phy, self.init_phy, 0, 1)
            return header, array("i", bytes(4 * self.slot_num))
        later = self.read_entries(count, self.index_count)
        prevs_later = [e[3] for e in IDX_ENTRY.iter_unpack(later)]
        slots = array("i", self.slots)
        for i, v in enumerate(slots):
            while v >= count:
                v = prevs_later[v - count]
            slots[i] = v
        last = count - 1
        phy_last = IDX_ENTRY.unpack(self.read_entries(last, count))[1]
        phy_first = IDX_ENTRY.unpack(self.read_entries(1, 2))[1]
        hsc = 0
        for k0 in range(1, count, _CMP_ENTRIES):
            hsc += sum(1 for e in IDX_ENTRY.iter_unpack(self.read_entries(k0, min(count, k0 + _CMP_ENTRIES)))
                       if e[3] == 0)
        header = (self.read_time(1), self.read_time(last), phy_first, phy_last, hsc, count)
        return header, slots

    def name(self, prev_name: str | None) -> str:
        ts = self.begin_ts if self.index_count > 1 else (self.first_seen_ts or self.init_ts or 0)
        name = human_time(ts)
        if prev_name is not None and name <= prev_name:
            name = str(int(prev_name) + 1).zfill(17)
        return name


def human_time(ms: int) -> str:
    """``UtilAll#timeMillisToHumanString`` in UTC: yyyyMMddHHmmssSSS."""
    sec, msec = divmod(ms, 1000)
    t = time.gmtime(sec)
    return f"{t.tm_year:04d}{t.tm_mon:02d}{t.tm_mday:02d}{t.tm_hour:02d}{t.tm_min:02d}{t.tm_sec:02d}{msec:03d}"


class IndexBuilder:
    """``IndexService#buildIndex`` over a sequence of files."""

    def __init__(self, slot_num: int, index_num: int, emit, keep_times: bool = True):
        self.slot_num, self.index_num, self.emit = slot_num, index_num, emit
        self.keep_times = keep_times
        self.current: IndexFileBuilder | None = None
        self.seq = 0
        self.entries = 0
        self.last_full_end_ts = 0

    def _get_and_create_last(self, ts: int) -> IndexFileBuilder:
        cur = self.current
        if cur is not None and not cur.full:
            return cur
        prev_phy = prev_ts = 0
        if cur is not None:
            prev_phy, prev_ts = cur.end_phy, cur.end_ts
            self.last_full_end_ts = cur.end_ts
            self.emit(cur, False)
        nxt = IndexFileBuilder(self.seq, self.slot_num, self.index_num, prev_phy, prev_ts, self.keep_times)
        nxt.first_seen_ts = ts
        self.seq += 1
        self.current = nxt
        return nxt

    def build(self, phy: int, ts: int, rollback: bool, keys: list[str]) -> None:
        f = self.current
        if f is None or f.index_count >= f.index_num:
            f = self._get_and_create_last(ts)
        if phy < f.end_phy or rollback or not keys:
            return
        hashes = _key_hashes(keys)
        done = f.put_keys(hashes, 0, phy, ts)
        while done < len(hashes):
            f = self._get_and_create_last(ts)
            done += f.put_keys(hashes, done, phy, ts)
        self.entries += done
        if len(f.entries) >= f.SPILL_BYTES:
            f.maybe_spill()

    def finish(self) -> None:
        if self.current is not None:
            self.emit(self.current, True)
            self.current = None


# ---- sinks: write to a directory and/or compare with the store ----------------------------------

class DirSink:
    """Writes rebuilt files under ``out`` (consumequeue/<topic>/<queueId>/<name>, index/<name>, checkpoint)."""

    def __init__(self, out: OutputDir, force: bool, trim: bool):
        self.out, self.force, self.trim = out, force, trim
        self.written = 0

    def cq_file(self, topic: str, queue_id: int, name: str, data: bytes, last: bool, size: int) -> None:
        """``data``: the units; the file is ``size`` bytes, zero after them (written sparse), or with
        ``--trim`` the last file ends after its last non-zero unit."""
        if last and self.trim:
            data = data.rstrip(b"\x00")
            data += bytes(-len(data) % UNIT)
            size = len(data)
        self._write(Path("consumequeue", topic, str(queue_id), name), [data], max(size, len(data)))

    def index_file(self, name: str, ib: "IndexFileBuilder") -> None:
        pieces, size = ib.parts()
        self._write(Path("index", name), pieces, size)

    def _write(self, path: Path, pieces: list, size: int) -> None:
        """The pieces, then zeros up to ``size`` as a hole (reads back as zeros; no page is written for it)."""
        with self.out.atomic(path, overwrite=self.force) as f:
            n = 0
            for piece in pieces:
                f.write(piece)
                n += len(piece)
            if size > n:
                f.flush()
                f.truncate(size)
        self.written += 1

    def checkpoint(self, data: bytes) -> None:
        self.out.write("checkpoint", data, overwrite=self.force)
        self.written += 1


def _safe_component(name: str) -> bool:
    return bool(name) and name not in (".", "..") and "/" not in name and "\\" not in name and "\x00" not in name


@dataclass
class CompareState:
    identical: int = 0
    differs: int = 0
    missing_on_disk: int = 0
    extra_on_disk: int = 0
    behind: int = 0              # same as the rebuild up to where the broker stopped dispatching
    cq_files: int = 0
    index_files: int = 0


class CompareSink:
    """Compares each rebuilt file with the store's file at the same place; produces findings."""

    def __init__(self, store: RocketStore, settings: Settings, out: list[Finding], progress_state: CompareState):
        self.findings = out
        self.state = progress_state
        self.settings = settings
        self.min_offset = store.segments[0].base if store.segments else 0    # commitlog files before it are gone
        self.expired = 0
        self.disk_cq: dict[tuple[str, int, int], str] = {}
        self.disk_cq_last: dict[tuple[str, int], int] = {}
        for q in store.queues():
            for seg in q.files:
                self.disk_cq[(q.topic, q.queue_id, seg.base)] = seg.path
            if q.files:
                self.disk_cq_last[(q.topic, q.queue_id)] = q.files[-1].base
        self.seen_cq: set = set()
        self.disk_index = sorted(store.index_files, key=lambda p: os.path.basename(p))
        self.index_seq = 0

    # -- consumequeue --
    def cq_file(self, topic: str, queue_id: int, base: int, data: bytes) -> None:
        st = self.state
        st.cq_files += 1
        key = (topic, queue_id, base)
        self.seen_cq.add(key)
        path = self.disk_cq.get(key)
        label = f"consumequeue/{topic}/{queue_id}/{base:020d}"
        if path is None:
            st.missing_on_disk += 1
            n = _count_units(data)
            self.findings.append(Finding(WARNING, "cq-file-missing-on-disk", label, None, None,
                                         f"rebuilt file with {n} units has no counterpart in the store",
                                         expected=f"{n} units", actual="no file"))
            return
        disk = read_input(path, limit=max(len(data), 64 << 20) + 1)
        if disk == data:
            st.identical += 1
            return
        st.differs += 1
        found = self.findings
        if len(disk) != len(data):
            found.append(Finding(WARNING, "cq-file-size-differs", path, None, None,
                                 f"file is {len(disk)} bytes, the rebuild {len(data)}",
                                 expected=len(data), actual=len(disk)))
        later_on_disk = self.disk_cq_last.get((topic, queue_id), base) > base
        disk_last = _last_nonzero_unit(disk)
        n = max(len(disk), len(data)) // UNIT
        reported = 0
        missing_from = None
        for i in range(n):
            a = data[i * UNIT:(i + 1) * UNIT].ljust(UNIT, b"\x00")
            b = disk[i * UNIT:(i + 1) * UNIT].ljust(UNIT, b"\x00")
            if a == b:
                continue
            qoff = (base // UNIT) + i
            if b == _ZERO_UNIT and i > disk_last and not later_on_disk:
                if missing_from is None:
                    missing_from = i
                continue
            if a == _BLANK_UNIT and b != _ZERO_UNIT and CQ_STRUCT.unpack(b)[0] < self.min_offset:
                self.expired += 1         # the broker's unit points into commitlog files that were deleted
                continue
            reported += 1
            if reported > MAX_FINDINGS_PER_FILE:
                continue
            exp = CQ_STRUCT.unpack(a)
            act = CQ_STRUCT.unpack(b)
            if b == _ZERO_UNIT:
                code, sev, what = "cq-unit-zeroed", ERROR, "unit is all zero on disk, data follows it"
            elif a == _ZERO_UNIT:
                code, sev, what = "cq-unit-unexpected", ERROR, "unit on disk that the commitlog does not explain"
            else:
                code, sev, what = "cq-unit-differs", ERROR, "unit differs from the rebuild"
            msg_off = exp[0] if a != _ZERO_UNIT else act[0]
            which = []
            if a != _ZERO_UNIT:
                which.append(f"rebuild: message at commitlog offset {exp[0]}")
            if b != _ZERO_UNIT:
                which.append(f"disk: message at commitlog offset {act[0]}")
            found.append(Finding(sev, code, path, i * UNIT, msg_off,
                                 f"{label} unit {i} (queue offset {qoff}): {what}; " + ", ".join(which),
                                 expected=_unit_dict(exp), actual=_unit_dict(act)))
        if reported > MAX_FINDINGS_PER_FILE:
            found.append(Finding(ERROR, "cq-more-differences", path, None, None,
                                 f"{reported - MAX_FINDINGS_PER_FILE} more differing units in this file"))
        if reported == 0 and len(disk) == len(data) and missing_from is not None:
            st.differs -= 1
            st.behind += 1
        if missing_from is not None:
            last_i = _last_nonzero_unit(data)
            cnt = last_i - missing_from + 1
            first = CQ_STRUCT.unpack_from(data, missing_from * UNIT)
            found.append(Finding(WARNING, "cq-units-not-on-disk", path, missing_from * UNIT, first[0],
                                 f"{label}: {cnt} unit(s) from queue offset {base // UNIT + missing_from} on are "
                                 f"not on disk (the broker had not dispatched them); first message at commitlog "
                                 f"offset {first[0]}",
                                 expected=f"{cnt} units", actual="zero"))

    def cq_finish(self) -> None:
        if self.expired:
            self.findings.append(Finding(INFO, "cq-units-before-commitlog", None, None, self.min_offset,
                                         f"{self.expired} units on disk point below the first commitlog file "
                                         f"(offset {self.min_offset}); the rebuild has the broker's blank fill "
                                         f"there", expected="blank fill", actual=f"{self.expired} units"))
        for key, path in sorted(self.disk_cq.items()):
            if key in self.seen_cq:
                continue
            with map_input(path) as mi:
                n = _count_units(mi.buf)
                last = _last_nonzero_unit(mi.buf)
                last_unit = CQ_STRUCT.unpack_from(mi.buf, last * UNIT) if last >= 0 else None
            if n == 0:
                continue
            if last_unit is not None and last_unit[0] + last_unit[1] <= self.min_offset:
                self.findings.append(Finding(INFO, "cq-file-before-commitlog", path, None, last_unit[0],
                                             f"consumequeue file with {n} units, all for commitlog files that "
                                             f"were deleted", expected="no file", actual=f"{n} units"))
                continue
            self.state.extra_on_disk += 1
            self.findings.append(Finding(ERROR, "cq-file-unexpected", path, None, None,
                                         f"consumequeue file with {n} units that the commitlog does not explain",
                                         expected="no file", actual=f"{n} units"))

    # -- index --
    def index_file(self, f: IndexFileBuilder, name: str) -> None:
        st = self.state
        st.index_files += 1
        seq = self.index_seq
        self.index_seq += 1
        if seq >= len(self.disk_index):
            st.missing_on_disk += 1
            self.findings.append(Finding(WARNING, "index-file-missing-on-disk", f"index/#{seq + 1} ({name})", None,
                                         None, f"rebuilt index file #{seq + 1} with {f.index_count - 1} entries has "
                                         f"no counterpart in the store", expected=f"{f.index_count - 1} entries",
                                         actual="no file"))
            return
        path = self.disk_index[seq]
        pieces, size = f.parts()
        with open_input(path) as fh:
            # read in chunks, never whole: a default-geometry index file is 420 MB (and so would be the image)
            disk = _DiskReader(fh, path, size + 1)
            if disk.size == size and disk.equals(pieces):
                st.identical += 1
                return
            st.differs += 1
            if disk.size != size:
                self.findings.append(Finding(
                    ERROR, "index-geometry-differs", path, None, None, f"file is {disk.size} bytes, the rebuild "
                    f"{size} (hashSlotNum {f.slot_num}, indexNum {f.index_num}): give --max-hash-slots/"
                    f"--max-index-num or --broker-conf", expected=size, actual=disk.size))
                return
            self._index_differences(f, disk, path)

    def _index_differences(self, f: IndexFileBuilder, disk: "_DiskReader", path: str) -> None:
        st = self.state
        found = self.findings
        disk_hdr = IDX_HEADER.unpack_from(disk.read(0, HEADER), 0)
        disk_count = disk_hdr[5]
        count = f.index_count
        lag = 1 <= disk_count < count
        exp_hdr, exp_slots = f.prefix_view(disk_count) if lag else (f.header(), f.slots)
        reported = 0

        def add(finding):
            nonlocal reported
            reported += 1
            if reported <= MAX_FINDINGS_PER_FILE:
                found.append(finding)

        for k, (e, a) in enumerate(zip(exp_hdr, disk_hdr)):
            if e != a:
                add(Finding(ERROR, "index-header-differs", path, 8 * k if k < 4 else 32 + 4 * (k - 4), None,
                            f"header {IDX_HEADER_NAMES[k]} differs" + (" (compared with the rebuild cut at the "
                                                                        f"disk's indexCount {disk_count})"
                                                                        if lag else ""),
                            expected=e, actual=a))
        ent_base = HEADER + 4 * f.slot_num
        upto = min(count, disk_count) if disk_count >= 1 else count
        entry_diffs = 0
        for k0 in range(1, upto, _CMP_ENTRIES):          # in chunks: both sides may be hundreds of MB
            k1 = min(upto, k0 + _CMP_ENTRIES)
            disk_entries = disk.read(ent_base + k0 * ENTRY, (k1 - k0) * ENTRY)
            ours = f.read_entries(k0, k1)
            if disk_entries == ours:
                continue
            for k in range(k0, k1):
                p = ent_base + k * ENTRY
                a = disk_entries[(k - k0) * ENTRY:(k - k0 + 1) * ENTRY]
                e = ours[(k - k0) * ENTRY:(k - k0 + 1) * ENTRY]
                if a != e:
                    entry_diffs += 1
                    ev, av = IDX_ENTRY.unpack(e), IDX_ENTRY.unpack(a)
                    add(Finding(ERROR, "index-entry-differs", path, p, ev[1],
                                f"entry {k} differs; rebuild: message at commitlog offset {ev[1]}, disk: "
                                f"{av[1]}", expected=_entry_dict(ev), actual=_entry_dict(av)))
        slot_base = HEADER
        disk_slots = array("i", disk.read(slot_base, 4 * f.slot_num))
        if _NATIVE_LITTLE:
            disk_slots.byteswap()
        if disk_slots != exp_slots:
            bad = [i for i, (e, a) in enumerate(zip(exp_slots, disk_slots)) if e != a]
            if entry_diffs or disk_count > count:
                add(Finding(ERROR, "index-slots-differ", path, slot_base + 4 * bad[0], None,
                            f"{len(bad)} slots differ (they follow from the entry differences); first: slot "
                            f"{bad[0]}", expected=exp_slots[bad[0]], actual=disk_slots[bad[0]]))
            else:
                for i in bad:
                    add(Finding(ERROR, "index-slot-differs", path, slot_base + 4 * i, None,
                                f"slot {i}: newest entry number differs", expected=exp_slots[i],
                                actual=disk_slots[i]))
        if lag:
            first = IDX_ENTRY.unpack(f.read_entries(disk_count, disk_count + 1))
            n = count - disk_count
            found.append(Finding(WARNING, "index-entries-not-on-disk", path, ent_base + disk_count * ENTRY, first[1],
                                 f"entries {disk_count}..{count - 1} ({n}) are not on disk (the broker had not "
                                 f"indexed them); first message at commitlog offset {first[1]}",
                                 expected=f"indexCount {count}", actual=f"indexCount {disk_count}"))
        elif disk_count > count:
            add(Finding(ERROR, "index-entries-unexpected", path, ent_base + count * ENTRY, None,
                        f"disk has {disk_count - count} entries beyond the rebuild",
                        expected=f"indexCount {count}", actual=f"indexCount {disk_count}"))
        tail_from = ent_base + max(count, disk_count) * ENTRY
        if not disk.zero_from(tail_from):
            add(Finding(WARNING, "index-stale-bytes", path, tail_from, None,
                        "non-zero bytes after the last entry"))
        if reported > MAX_FINDINGS_PER_FILE:
            found.append(Finding(ERROR, "index-more-differences", path, None, None,
                                 f"{reported - MAX_FINDINGS_PER_FILE} more differences in this file"))
        if lag and reported == 0:
            # the disk file is exactly the rebuild cut where the broker stopped: consistent, only behind
            st.differs -= 1
            st.behind += 1

    def index_finish(self) -> None:
        for path in self.disk_index[self.index_seq:]:
            self.state.extra_on_disk += 1
            self.findings.append(Finding(ERROR, "index-file-unexpected", path, None, None,
                                         "index file beyond those the commitlog explains"))


class _DiskReader:
    """Positioned reads of a store file opened with :func:`~mqtool.io.open_input` (sizes capped at ``cap``
    bytes, as the whole-file read it replaces did), compared in chunks so memory stays bounded."""

    CHUNK = 8 << 20

    def __init__(self, fh, path: str, cap: int):
        self.fd, self.path = fh.fileno(), path
        try:
            self.size = min(os.fstat(self.fd).st_size, cap)
        except OSError as e:
            raise InputError(f"stat failed: {e.strerror or e}", path) from None

    def read(self, at: int, n: int) -> bytes:
        n = max(0, min(n, self.size - at))
        out = bytearray()
        while len(out) < n:
            try:
                got = os.pread(self.fd, min(n - len(out), self.CHUNK), at + len(out))
            except OSError as e:
                raise InputError(f"read failed: {e.strerror or e}", self.path) from None
            if not got:
                break                                  # shrank under us: what is missing reads as absent
            out += got
        return bytes(out)

    def equals(self, pieces) -> bool:
        """The file is ``pieces`` followed by zeros up to its size."""
        at = 0
        for piece in pieces:
            mv = memoryview(piece)
            for i in range(0, len(mv), self.CHUNK):
                part = mv[i:i + self.CHUNK]
                if self.read(at + i, len(part)) != part:
                    return False
            at += len(mv)
        return self.zero_from(at)

    def zero_from(self, at: int) -> bool:
        """No non-zero byte from ``at`` to the end."""
        while at < self.size:
            got = self.read(at, self.CHUNK)
            if not got:
                break
            if got.strip(b"\x00"):
                return False
            at += len(got)
        return True


def _unit_dict(u):
    return {"offset": u[0], "size": u[1], "tags_code": u[2]}


def _entry_dict(e):
    return {"key_hash": e[0], "offset": e[1], "time_diff": e[2], "prev": e[3]}


def _last_nonzero_unit(data) -> int:
    stripped = bytes(data).rstrip(b"\x00")
    return (len(stripped) - 1) // UNIT if stripped else -1


def _count_units(data) -> int:
    """Units that are not all zero."""
    mv = memoryview(data)[:len(data) - len(data) % UNIT]
    try:
        return sum(1 for i in range(0, len(mv), UNIT) if any(mv[i:i + UNIT]))
    finally:
        mv.release()


# ---- the run --------------------------------------------------------------------------------------

@dataclass
class RebuildResult:
    messages: int = 0
    cq_units: int = 0
    index_entries: int = 0
    queues: int = 0
    index_files: int = 0
    cq_files: int = 0
    last_store_ts: int = 0
    last_cq_ts: int = 0
    last_full_index_end_ts: int = 0
    max_offset: int = 0
    damaged: int = 0
    damaged_bytes: int = 0


def rebuild_store(store: RocketStore, settings: Settings, on_cq_file, on_index_file, findings: list[Finding],
                  max_size: int = F.DEFAULT_MAX_MESSAGE_SIZE, on_segment=None,
                  keep_entry_times: bool = True) -> RebuildResult:
    """Replay the dispatcher over the commitlog; rebuilt files go to the callbacks as they complete.

    ``on_cq_file(topic, queue_id, base, data, last, size)`` (``data`` = the units; the file is ``size``
    bytes, zero after them); ``on_index_file(builder, name, last)`` (``builder.parts()`` / ``to_bytes()``).
    """
    res = RebuildResult()
    rules = settings.rules
    fs = settings.cq_file_size
    queues: dict[tuple[str, int], QueueBuilder] = {}
    topics: dict[bytes, str] = {}

    def emit_cq(qb: QueueBuilder, base: int, data: bytes, last: bool):
        res.cq_files += 1
        on_cq_file(qb.topic, qb.queue_id, base, data, last, max(fs, len(data)))

    index_names: list[str] = []

    def emit_index(ib: IndexFileBuilder, last: bool):
        name = ib.name(index_names[-1] if index_names else None)
        index_names.append(name)
        res.index_files += 1
        on_index_file(ib, name, last)

    idx = (IndexBuilder(settings.hash_slots, settings.index_num, emit_index, keep_entry_times)
           if rules.index_enable else None)

    def on_damage(d: Damage):
        res.damaged += 1
        res.damaged_bytes += d.length
        findings.append(Finding(WARNING, "commitlog-damage", d.file, d.position, d.offset,
                                f"{d.code}: {d.message}; {d.length} bytes skipped, messages in them are not "
                                f"dispatched", d.expected, d.actual))

    lib = native_lib()
    # State the compiled loop shares (see mqtool/_native/rmqrebuild.c): queue slot per raw topic + queueId,
    # each queue's current bytearray, its int64 state; the index state is copied in and out around a call.
    keymap: dict[bytes, int] = {}
    qbufs: list = []
    qstate = array("q")
    istate = array("q", bytes(8 * _IS_N))
    no_slots, no_entries = array("i"), bytearray()

    def queue(topic: str, qid: int) -> QueueBuilder:
        qb = queues.get((topic, qid))
        if qb is None:
            if not _safe_component(topic):
                findings.append(Finding(WARNING, "unsafe-topic-name", None, None, None,
                                        f"topic {topic!r} cannot be a directory name; its units are not rebuilt"))
                qb = queues[(topic, qid)] = QueueBuilder(topic, qid, fs, lambda *a: None)
            else:
                qb = queues[(topic, qid)] = QueueBuilder(topic, qid, fs, emit_cq)
            if lib is not None:
                qb.slot = len(qbufs)
                qbufs.append(None)
                qstate.extend((0, -1, 0, 0))             # _QS_MAXPHYS, _QS_WRITE, _QS_FILE_END, _QS_UNITS
        return qb

    def put(qb: QueueBuilder, phys: int, size: int, code: int, qoff: int) -> None:
        """``qb.put`` with the state the compiled loop shares pulled before and pushed after."""
        i = qb.slot * _QS_N
        qb.max_phys = qstate[i + _QS_MAXPHYS]
        qb.put(phys, size, code, qoff)
        buf = qb.buf
        qstate[i + _QS_MAXPHYS] = qb.max_phys
        qstate[i + _QS_WRITE] = -1 if buf is None else (qb.base + len(buf)) // UNIT
        qstate[i + _QS_FILE_END] = 0 if buf is None else (qb.base + fs) // UNIT
        qbufs[qb.slot] = buf

    def lane(buf, pos: int, limit: int, end: int) -> int:
        nonlocal messages, cq_units, last_ts, last_cq_ts, max_offset
        f = idx.current if idx is not None else None
        if f is not None:
            istate[0:_IS_N] = array("q", (1, f.index_count, f.index_num, f.slot_num, f.hash_slot_count, f.begin_ts,
                                          f.end_phy, f.end_ts))
            slots, entries, ts = f.slots, f.entries, f.ts
        else:
            istate[0] = 0
            slots, entries, ts = no_slots, no_entries, None
        npos, n, ncq, lts, lcts, mend, added = lib.run(buf, pos, limit, end, max_size, keymap, qbufs, qstate,
                                                      istate if idx is not None else None, slots, entries, ts)
        if n:
            messages += n
            cq_units += ncq
            last_ts = lts
            if ncq:
                last_cq_ts = lcts
            if mend > max_offset:
                max_offset = mend
            if added:
                f.index_count, f.hash_slot_count, f.end_phy, f.end_ts = istate[1], istate[4], istate[6], istate[7]
                idx.entries += added
                f.maybe_spill()
        return npos

    schedule = F.SCHEDULE_TOPIC
    quick, full = D.quick_props, D.props_dict
    tags_code = D.tags_code
    p_tags, p_keys, p_uniq = F.PROPERTY_TAGS, F.PROPERTY_KEYS, F.PROPERTY_UNIQ_KEY
    multi_key = F.PROPERTY_INNER_MULTI_DISPATCH
    sep = F.KEY_SEPARATOR
    rb_mask, rb_val = F.TRANSACTION_MASK, F.TRANSACTION_ROLLBACK_TYPE
    not_val, commit_val = F.TRANSACTION_NOT_TYPE, F.TRANSACTION_COMMIT_TYPE
    join = _INDEX_KEY_JOIN
    build_index = idx.build if idx is not None else None
    messages = cq_units = 0
    last_ts = last_cq_ts = max_offset = 0
    for phys, size, topic_raw, qid, qoff, sysflag, store_ts, props_raw in \
            iter_dispatch_records(store.segments, max_size, on_damage, on_segment, lane if lib else None):
        messages += 1
        topic = topics.get(topic_raw)
        if topic is None:
            topic = topics[bytes(topic_raw)] = bytes(topic_raw).decode("utf-8", "replace")
        ptext = props_raw.decode("utf-8", "replace") if props_raw else ""
        props = None
        q = quick(ptext) if topic != schedule else None
        if q is None:
            props = full(ptext) if ptext else {}
            tags, keys, uniq = props.get(p_tags), props.get(p_keys), props.get(p_uniq)
        else:
            tags, keys, uniq = q
        last_ts = store_ts
        if phys + size > max_offset:
            max_offset = phys + size
        tt = sysflag & rb_mask
        if tt == not_val or tt == commit_val:
            code = tags_code(tags) if tags else 0
            if props is not None and topic == schedule:
                code = D.cq_tags_code(rules, topic, props, store_ts)
            qb = queues.get((topic, qid)) or queue(topic, qid)
            if lib is None:
                qb.put(phys, size, code, qoff)
            else:
                put(qb, phys, size, code, qoff)
                keymap[bytes(topic_raw) + qid.to_bytes(4, "big", signed=True)] = qb.slot
            cq_units += 1
            last_cq_ts = store_ts
            if props is not None and multi_key in props:
                try:
                    targets = D.multi_dispatch_targets(rules, topic, qid, props)
                except D.MultiDispatchError as e:
                    findings.append(Finding(WARNING, "multi-dispatch-unparsable", None, None, phys,
                                            f"message at commitlog offset {phys}: {e}; no LMQ units rebuilt"))
                    targets = []
                for name, lqid, lqoff in targets:
                    if lib is None:
                        queue(name, lqid).put(phys, size, code, lqoff)
                    else:
                        put(queue(name, lqid), phys, size, code, lqoff)
                    cq_units += 1
        if build_index is not None:
            ikeys = [f"{topic}{join}{uniq}"] if uniq is not None else []
            if keys:
                ikeys += [f"{topic}{join}{k}" for k in keys.split(sep) if k]
            build_index(phys, store_ts, tt == rb_val, ikeys)
    res.messages, res.cq_units = messages, cq_units
    res.last_store_ts, res.last_cq_ts, res.max_offset = last_ts, last_cq_ts, max_offset
    for qb in queues.values():
        if qb.slot >= 0:
            qb.units += qstate[qb.slot * _QS_N + _QS_UNITS]
            qb.max_phys = qstate[qb.slot * _QS_N + _QS_MAXPHYS]
        qb.finish()
        findings.extend(qb.findings())
    res.queues = len(queues)
    if idx is not None:
        res.index_entries = idx.entries
        idx.finish()
        res.last_full_index_end_ts = idx.last_full_end_ts
    return res


def checkpoint_bytes(res: RebuildResult) -> bytes:
    """A 4096-byte ``StoreCheckpoint`` consistent with the rebuilt files.

    physicMsgTimestamp = store time of the last commitlog message; logicsMsgTimestamp = store time of the last
    message given a consumequeue unit; indexMsgTimestamp = endTimestamp of the last *full* index file (0 if
    none), as the broker sets it at index rollover; masterFlushedOffset and confirmPhyOffset = 0, as a broker
    without controller/auto-switch HA leaves them.
    """
    return F.Checkpoint.build(dict(physicMsgTimestamp=res.last_store_ts, logicsMsgTimestamp=res.last_cq_ts,
                                   indexMsgTimestamp=res.last_full_index_end_ts, masterFlushedOffset=0,
                                   confirmPhyOffset=0))


def geometry_findings(settings: Settings, store: RocketStore) -> list[Finding]:
    """Warnings for sizes the store could not settle (each names the candidates)."""
    out = []
    cq = settings.cq_decision
    if cq is not None and cq.warning:
        out.append(Finding(WARNING, "cq-geometry", store.consumequeue_dir, None, None, cq.warning,
                           cq.value, list(cq.candidates)))
    for w in settings.index_geometries.warnings() if settings.index_geometries is not None else ():
        out.append(Finding(WARNING, "index-geometry", store.index_dir, None, None, w))
    return out


def run_rebuild(store: RocketStore, opts: RebuildOptions):
    """Engine entry point: ``(findings_iter, summary_fn)`` (see :mod:`mqtool.cli`)."""
    if not store.segments:
        raise NotAStoreError("no commitlog segments here: rebuild-index needs the commitlog", store.path)
    settings = resolve_settings(opts, store)
    findings: list[Finding] = []
    cmp_state = CompareState()
    summary = Summary()
    out_sink = None
    if opts.out:
        root = store.root or store.commitlog_dir or store.path
        inputs = [p for p in (root, store.commitlog_dir, store.consumequeue_dir, store.index_dir) if p]
        if store.commitlog_dir and Path(store.commitlog_dir).name == "commitlog":
            inputs.append(str(Path(store.commitlog_dir).parent))     # the store root, even if a file was given
        out = prepare_output_dir(opts.out, inputs, opts.force)
        out_sink = DirSink(out, opts.force, opts.trim)
    cmp_sink = CompareSink(store, settings, findings, cmp_state) if opts.compare else None

    def on_cq(topic, qid, base, data, last, size):
        name = f"{base:020d}"
        if out_sink is not None:
            out_sink.cq_file(topic, qid, name, data, last, size)
        if cmp_sink is not None:
            cmp_sink.cq_file(topic, qid, base, data + bytes(size - len(data)) if len(data) < size else data)

    def on_index(ib, name, last):
        if out_sink is not None:
            out_sink.index_file(name, ib)
        if cmp_sink is not None:
            cmp_sink.index_file(ib, name)

    def run():
        t0 = time.perf_counter()
        findings.extend(geometry_findings(settings, store))
        with progress(sum(seg.size for seg in store.segments), "rebuilding") as bar:
            res = rebuild_store(store, settings, on_cq, on_index, findings,
                                on_segment=lambda seg: bar.advance(seg.size), keep_entry_times=opts.compare)
        if cmp_sink is not None:
            cmp_sink.cq_finish()
            cmp_sink.index_finish()
        if out_sink is not None and opts.write_checkpoint:
            out_sink.checkpoint(checkpoint_bytes(res))
        elapsed = time.perf_counter() - t0
        if cmp_sink is not None:
            c = cmp_state
            findings.append(Finding(INFO, "compare-summary", store.root or store.path, None, None,
                                    f"{c.cq_files} consumequeue + {c.index_files} index files rebuilt: "
                                    f"{c.identical} identical on disk, {c.differs} differ, {c.behind} behind (a "
                                    f"prefix of the rebuild), {c.missing_on_disk} missing on disk, "
                                    f"{c.extra_on_disk} on disk only"))
        for f in findings:
            summary.add(f)
            yield f
        summary.messages = res.messages
        summary.skipped_ranges, summary.skipped_bytes = res.damaged, res.damaged_bytes
        extra = {
            "written": out_sink.written if out_sink else 0,
            "out": str(out_sink.out) if out_sink else None,
            "consumequeue_files": res.cq_files, "queues": res.queues, "cq_units": res.cq_units,
            "index_files": res.index_files, "index_entries": res.index_entries,
            "damaged_ranges": res.damaged,
            "cq_file_size": settings.cq_file_size, "max_hash_slots": settings.hash_slots,
            "max_index_num": settings.index_num, "settings_from": settings.sources,
            "settings_evidence": {"mappedFileSizeConsumeQueue": settings.cq_decision.evidence,
                                  "maxHashSlotNum/maxIndexNum": settings.index_geometries.summary()},
            "seconds": round(elapsed, 3),
        }
        if cmp_sink is not None:
            extra.update(identical=cmp_state.identical, differs=cmp_state.differs, behind=cmp_state.behind,
                         missing_on_disk=cmp_state.missing_on_disk, extra_on_disk=cmp_state.extra_on_disk)
        summary.extra.update(extra)

    return run(), lambda: summary
