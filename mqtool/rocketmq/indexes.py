"""Readers for consumequeue files, index files and the checkpoint (layouts from :mod:`formats.rocketmq`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from formats import rocketmq as F
from formats.common import java_string_hash
from mqtool.io import map_input, read_input
from mqtool.rocketmq.layout import QueueFiles
from mqtool.schema_struct import fixed_prefix_format

CQ_STRUCT, _ = fixed_prefix_format(F.CqUnit)
IDX_HEADER, IDX_HEADER_NAMES = fixed_prefix_format(F.IndexHeader)
IDX_ENTRY, _ = fixed_prefix_format(F.IndexEntry)
CHECKPOINT_STRUCT, CHECKPOINT_NAMES = fixed_prefix_format(F.Checkpoint)
assert CQ_STRUCT.size == F.CQ_STORE_UNIT_SIZE and IDX_HEADER.size == F.INDEX_HEADER_SIZE
assert IDX_ENTRY.size == F.INDEX_ENTRY_SIZE


@dataclass
class CqUnit:
    topic: str
    queue_id: int
    file: str
    position: int
    queue_offset: int      # logical index of the unit in its queue
    offset: int            # commitlog physical offset
    size: int
    tags_code: int

    @property
    def is_blank_fill(self) -> bool:
        return self.offset == 0 and self.size == F.CQ_BLANK_SIZE and self.tags_code == 0

    @property
    def is_zero(self) -> bool:
        return self.offset == 0 and self.size == 0 and self.tags_code == 0

    def to_row(self) -> dict:
        return {"kind": "cq_unit", "topic": self.topic, "queue_id": self.queue_id, "file": self.file,
                "position": self.position, "queue_offset": self.queue_offset, "offset": self.offset,
                "size": self.size, "tags_code": self.tags_code,
                "state": "blank-fill" if self.is_blank_fill else "zero" if self.is_zero else "unit"}


def iter_cq_units(q: QueueFiles, include_zero: bool = False) -> Iterator[CqUnit]:
    """Units of a queue in order, up to the last non-zero unit of each file (zero holes inside included
    when ``include_zero``; the zero tail is never yielded)."""
    unit = F.CQ_STORE_UNIT_SIZE
    for seg in q.files:
        with map_input(seg.path) as mi:
            buf = mi.buf
            n = len(buf) // unit
            last = _last_nonzero_unit(buf, n, unit)
            first_index = seg.base // unit
            for i in range(last + 1):
                off, size, tags = CQ_STRUCT.unpack_from(buf, i * unit)
                if not include_zero and off == 0 and size == 0 and tags == 0:
                    continue
                yield CqUnit(q.topic, q.queue_id, seg.path, i * unit, first_index + i, off, size, tags)


def _last_nonzero_unit(buf, n: int, unit: int) -> int:
    """Index of the last unit that is not all zero (-1 if none), searching from the end in chunks."""
    end = n * unit
    chunk = 64 * 1024 - (64 * 1024) % unit
    while end > 0:
        start = max(0, end - chunk)
        data = buf[start:end]
        stripped = data.rstrip(b"\x00")
        if stripped:
            last_byte = start + len(stripped) - 1
            return last_byte // unit
        end = start
    return -1


def cq_file_tail(seg_path: str) -> tuple[int, int]:
    """(file size, index of last non-zero unit) for a consumequeue file."""
    with map_input(seg_path) as mi:
        n = len(mi.buf) // F.CQ_STORE_UNIT_SIZE
        return len(mi.buf), _last_nonzero_unit(mi.buf, n, F.CQ_STORE_UNIT_SIZE)


def tags_code(tags: str | None) -> int:
    """``MessageExtBrokerInner.tagsString2tagsCode``: String.hashCode widened to long; 0 without tags."""
    if not tags:
        return 0
    return java_string_hash(tags)


def index_hash(key: str) -> int:
    """``IndexFile.indexKeyHashMethod``: abs(String.hashCode), Integer.MIN_VALUE → 0."""
    h = java_string_hash(key)
    h = abs(h)
    return 0 if h >= 2 ** 31 else h


@dataclass
class IndexFileView:
    """An index file read whole (they are bounded: 40 + slots×4 + entries×20 bytes)."""

    path: str
    size: int
    header: dict
    slot_num: int | None       # None when the geometry cannot be inferred
    index_num: int | None
    data: bytes

    def slot(self, i: int) -> int:
        p = F.INDEX_HEADER_SIZE + i * F.INDEX_SLOT_SIZE
        return int.from_bytes(self.data[p:p + 4], "big", signed=True)

    def entry(self, k: int) -> tuple[int, int, int, int]:
        p = F.INDEX_HEADER_SIZE + self.slot_num * F.INDEX_SLOT_SIZE + k * F.INDEX_ENTRY_SIZE
        return IDX_ENTRY.unpack_from(self.data, p)

    def entry_position(self, k: int) -> int:
        return F.INDEX_HEADER_SIZE + self.slot_num * F.INDEX_SLOT_SIZE + k * F.INDEX_ENTRY_SIZE

    @property
    def entry_count(self) -> int:
        """Entries that exist (indexCount−1), bounded by what the file can hold."""
        n = self.header["indexCount"] - 1
        if self.index_num is None:
            return 0
        return max(0, min(n, self.index_num - 1))


def infer_index_geometry(size: int, slot_hint: int | None = None, index_hint: int | None = None):
    """(hashSlotNum, indexNum) for an index file of ``size`` bytes.

    Given hints are checked; else the broker defaults, else the small test geometry used in the real
    data (100/400), else the pair with slots = entries/4 that fits (the brokers' default ratio).
    """
    cands = []
    if slot_hint and index_hint:
        cands.append((slot_hint, index_hint))
    cands += [(F.DEFAULT_MAX_HASH_SLOTS, F.DEFAULT_MAX_INDEX_NUM), (100, 400)]
    if slot_hint and not index_hint:
        rest = size - F.INDEX_HEADER_SIZE - slot_hint * 4
        if rest > 0 and rest % 20 == 0:
            cands.append((slot_hint, rest // 20))
    if index_hint and not slot_hint:
        rest = size - F.INDEX_HEADER_SIZE - index_hint * 20
        if rest > 0 and rest % 4 == 0:
            cands.append((rest // 4, index_hint))
    for s, n in cands:
        if F.index_file_size(s, n) == size:
            return s, n
    body = size - F.INDEX_HEADER_SIZE
    if body > 0 and body % 84 == 0:          # slots×4 + 4·slots×20
        s = body // 84
        return s, 4 * s
    return None, None


def read_index_file(path: str, slot_hint: int | None = None, index_hint: int | None = None) -> IndexFileView:
    """Header and geometry of an index file; slots and entries are read through a read-only map (a default
    file is 420 MB: a key lookup touches a few pages, a full check streams it without holding it all)."""
    limit = F.index_file_size(F.DEFAULT_MAX_HASH_SLOTS, F.DEFAULT_MAX_INDEX_NUM) + 1
    mi = map_input(path)
    data = mi.buf
    mi.close()                 # the file is closed; the map lives as long as the view holds it
    if len(data) > limit:      # larger than any broker writes: read the bounded prefix, as before
        data = read_input(path, limit=limit)
    size = len(data)
    if size >= F.INDEX_HEADER_SIZE:
        header = dict(zip(IDX_HEADER_NAMES, IDX_HEADER.unpack_from(data, 0)))
    else:
        header = {n: 0 for n in IDX_HEADER_NAMES}
    s, n = infer_index_geometry(size, slot_hint, index_hint)
    return IndexFileView(path, size, header, s, n, data)


def read_checkpoint(path: str) -> dict:
    data = read_input(path, limit=F.CHECKPOINT_FILE_SIZE + 1)
    padded = data[:CHECKPOINT_STRUCT.size].ljust(CHECKPOINT_STRUCT.size, b"\x00")
    row = dict(zip(CHECKPOINT_NAMES, CHECKPOINT_STRUCT.unpack_from(padded, 0)))
    row["file_size"] = len(data)
    nonzero_after = any(data[40:])
    row["layout"] = "5.x" if (row["masterFlushedOffset"] or row["confirmPhyOffset"]) else "4.x-or-5.x"
    row["nonzero_after_fields"] = nonzero_after
    return row
