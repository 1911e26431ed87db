"""The index writer: ``IndexService#buildIndex`` over a sequence of ``IndexFile``s, each built as the broker
writes it (header, slot table, entries), with bounded memory (entries spill to scratch files)."""
from __future__ import annotations

import os
import struct
import time
from array import array
from itertools import chain
from typing import Iterator

from formats import rocketmq as F
from mqtool.rocketmq import dispatch as D
from mqtool.rocketmq.indexfiles import IDX_ENTRY, IDX_HEADER

ENTRY = F.INDEX_ENTRY_SIZE
HEADER = F.INDEX_HEADER_SIZE
_INT_MAX = 0x7FFFFFFF
_pack_entry = IDX_ENTRY.pack
_key_hashes = D.index_key_hashes
_NATIVE_LITTLE = struct.pack("=i", 1) != struct.pack(">i", 1)
# The slot table is kept as array('i') and written big-endian (the schema's slot type, F.IndexSlot, a signed
# big-endian int32: tests/test_rocketmq_rebuild_workers.py checks it; not here, where it would cost construct's
# import at every start).
assert array("i").itemsize == F.INDEX_SLOT_SIZE
_INDEX_KEY_JOIN = "#"                      # IndexService#buildKey: topic + "#" + key
_TS = struct.Struct("=q")                   # per-entry store times (compare mode), native order
_CMP_ENTRIES = 1 << 16                      # index entries compared / counted per chunk (1.3 MB)


class IndexFileBuilder:
    """One ``IndexFile``: header, slot table and entries as the broker writes them."""

    def __init__(self, seq: int, slot_num: int, index_num: int, prev_end_phy: int, prev_end_ts: int,
                 keep_times: bool = True, open_stream=None):
        self.seq = seq
        self.slot_num, self.index_num = slot_num, index_num
        self.slots = array("i", [0]) * slot_num     # (repeat: 3x faster than from 20 MB of zero bytes)
        self.entries = bytearray(ENTRY)               # entry 0 is never written
        # store timestamp per entry, needed only to compare with a file the broker stopped filling
        self.ts = bytearray(_TS.size) if keep_times else None     # native int64 per entry
        # Without entry times (plain --out) entries are final once written (IndexFile#putKey never rewrites
        # one: the chain lives in the slots and in each new entry's prev field), so past SPILL_BYTES they move
        # to a scratch file and memory stays bounded whatever the file's geometry (20 M entries = 400 MB).
        self.spill = self.ts_spill = None
        self.spilled = 0                              # entries 0..spilled-1 are in the scratch file (or stream)
        # With ``open_stream(builder) -> stream`` (plain --out: nothing reads entries back) entries go instead,
        # every STREAM_BYTES, to the output file itself (``stream.put(data)``: written in the background at
        # their place), so the file is mostly written when the builder finishes and no entry is written twice.
        self.open_stream, self.stream = (open_stream, None) if not keep_times else (None, None)
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
    STREAM_BYTES = 4 << 20

    @property
    def entries_at(self) -> int:
        """Where entry 0 lies in the file (after the header and the slot table)."""
        return HEADER + F.INDEX_SLOT_SIZE * self.slot_num

    def maybe_spill(self) -> None:
        """Move the entries written so far (and their store times, when kept) to scratch files in $TMPDIR once
        they pass SPILL_BYTES: entries are final once put (``IndexFile#putKey`` never rewrites one: the chain
        lives in the slots and in each new entry's prev field), so memory stays bounded whatever the file's
        geometry (20 M entries = 400 MB). Readers go through :meth:`read_entries` / :meth:`read_times`.
        With a stream (see ``open_stream``) they go to the output file, past STREAM_BYTES."""
        if self.open_stream is not None:
            if len(self.entries) >= self.STREAM_BYTES:
                if self.stream is None:
                    self.stream = self.open_stream(self)
                data, self.entries = self.entries, bytearray()     # the stream owns data from here on
                self.spilled += len(data) // ENTRY
                self.stream.put(data)
            return
        if len(self.entries) < self.SPILL_BYTES:
            return
        if self.spill is None:
            import tempfile     # (here: only --compare spills; it costs a few ms at start-up)

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
        if self.stream is not None:
            raise RuntimeError("the entries of a streamed index file are in its output (head_pieces)")
        if self.spill is not None:
            self.spill.seek(0)
            while chunk := self.spill.read(8 << 20):
                yield chunk
        yield self.entries

    def head_pieces(self, last_use: bool = False) -> list:
        """The header and the slot table as they are written (big-endian), from offset 0. ``last_use``: the
        builder is finished and read no more (a streamed file), so its own table is swapped in place (no
        20 MB copy) and dropped from it."""
        slots = self.slots
        if _NATIVE_LITTLE:
            if last_use:
                self.slots = None
            else:
                slots = array("i", slots)
            slots.byteswap()
        return [IDX_HEADER.pack(*self.header()), memoryview(slots).cast("B")]    # (no third copy of 20 MB)

    @property
    def file_size(self) -> int:
        return F.index_file_size(self.slot_num, self.index_num)

    def parts(self) -> tuple[Iterator, int]:
        """(pieces, file size): header, slot table, entries (an iterator: spilled entries are read back in
        chunks); the rest of the file is zero."""
        return chain(self.head_pieces(), self._entry_pieces()), self.file_size

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

    def __init__(self, slot_num: int, index_num: int, emit, keep_times: bool = True, open_stream=None):
        self.slot_num, self.index_num, self.emit = slot_num, index_num, emit
        self.keep_times, self.open_stream = keep_times, open_stream
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
        nxt = IndexFileBuilder(self.seq, self.slot_num, self.index_num, prev_phy, prev_ts, self.keep_times,
                               self.open_stream)
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
        if len(f.entries) >= f.STREAM_BYTES:
            f.maybe_spill()

    def finish(self) -> None:
        if self.current is not None:
            self.emit(self.current, True)
            self.current = None
