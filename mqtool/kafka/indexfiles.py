"""Readers for the small Kafka files: .index, .timeindex, .txnindex, .snapshot and the text checkpoints.

Binary entries are decoded with ``struct`` formats derived from the construct schemas in
:mod:`formats.kafka`. Nothing here raises on damaged content: problems come back as ``problems`` strings
that :mod:`mqtool.kafka.verify` turns into findings.
"""
from __future__ import annotations

import os
import struct
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from formats import kafka as K
from mqtool.common import strict_json
from mqtool.fastcrc import crc32c
from mqtool.errors import InputError
from mqtool.io import first_nonzero, first_nonzero_in, open_input, pread_input, read_input
from mqtool.kafka import layout as L

_OFFSET_ENTRY, _TIME_ENTRY, _TXN_ENTRY, _SNAP_ENTRY = L.OFFSET_ENTRY, L.TIME_ENTRY, L.TXN_ENTRY, L.SNAPSHOT_ENTRY

# These files are read whole and every entry kept: a cap keeps a hostile size from costing the memory it claims
# (a 1.5 GB sparse .txnindex was 44 million entries, a MemoryError). Kafka writes them far smaller: a producer
# snapshot 46 bytes per producer, a checkpoint one line per partition of the log dir, a .txnindex 34 bytes per
# aborted transaction (appended, never preallocated).
MAX_BINARY_FILE = 64 * 1024 * 1024
MAX_TEXT_FILE = 16 * 1024 * 1024
# An .index/.timeindex is preallocated (segment.index.bytes, 10 MiB by default, any size up to 2 GiB) and filled
# from the front; the rest stays zero (a sparse hole). It is read a chunk at a time up to the end of its entries
# (Kafka's end-of-data rule), the zero tail after them checked without being kept (holes not even read), so
# memory is what the real entries take. Those are capped: one entry per index.interval.bytes (4096 by default)
# of a segment of at most 2 GiB is 512 Ki entries (4 MiB of .index); 64 MiB of entries would need an interval
# under 256 bytes over a full 2 GiB segment.
MAX_INDEX_ENTRY_BYTES = 64 * 1024 * 1024
_INDEX_CHUNK = 1 << 20


def read_capped(path: Path, cap: int = MAX_BINARY_FILE) -> bytes:
    """The whole file, or InputError (a file-unreadable finding where a walk reads it) past ``cap`` bytes."""
    data = read_input(path, cap + 1)
    if len(data) > cap:
        raise InputError(f"larger than {cap} bytes, far more than Kafka writes into such a file: not read",
                         str(path))
    return data


class Entries(Sequence):
    """Fixed-size binary entries kept as their bytes, each unpacked to a tuple when read: memory is the file's
    entry bytes (a 64 MiB .index of 8 Mi entries as Python tuples would take ~1 GB). A read-only sequence
    that compares equal to any sequence of the same tuples (lists of them included)."""

    __slots__ = ("_st", "_buf", "_n")

    def __init__(self, st: struct.Struct, data=b""):
        self._st = st
        self._buf = bytes(data[:len(data) - len(data) % st.size])
        self._n = len(self._buf) // st.size

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self._n))]
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError("entry index out of range")
        return self._st.unpack_from(self._buf, i * self._st.size)

    def __iter__(self):
        return self._st.iter_unpack(self._buf)

    def column(self, k: int) -> array:
        """Field ``k`` of every entry, as a compact array of int64."""
        return array("q", (e[k] for e in self))

    def __eq__(self, other) -> bool:
        if isinstance(other, Entries):
            return self._st.format == other._st.format and self._buf == other._buf
        if not isinstance(other, Sequence) or isinstance(other, (str, bytes)):
            return NotImplemented
        return self._n == len(other) and all(a == tuple(b) for a, b in zip(self, other))

    __hash__ = None

    def __repr__(self) -> str:
        return f"Entries({self._n} x {self._st.format})"


@dataclass
class IndexFile:
    """Entries of an .index/.timeindex up to Kafka's end-of-data rule, and what lies after them."""

    path: Path
    size: int
    entry_size: int
    entries: Sequence = ()                          # Entries: (relOffset, position) or (timestamp, relOffset)
    zero_tail: int = 0                              # bytes of zeros after the last entry (preallocation)
    garbage_tail: int = 0                           # non-zero bytes after the end-of-data entry
    partial: int = 0                                # bytes that do not make a whole entry


def _index(path: Path, size: int, read, nonzero, entry: struct.Struct, is_end) -> IndexFile:
    """The entries of an index of ``size`` bytes up to ``is_end(entry, position)``, read ``read(n, at)`` a chunk
    at a time; what follows them (up to the last whole entry) is a zero tail or garbage by ``nonzero(start, end)``
    (the position of a non-zero byte there, or -1), not kept. InputError past MAX_INDEX_ENTRY_BYTES of entries."""
    es = entry.size
    f = IndexFile(path, size, es)
    whole = size - size % es
    f.partial = size - whole
    step = _INDEX_CHUNK - _INDEX_CHUNK % es
    cap = MAX_INDEX_ENTRY_BYTES
    kept = bytearray()
    i = 0
    while i < whole:
        want = min(step, whole - i)
        data = read(want, i)
        usable = len(data) - len(data) % es
        for k, e in enumerate(entry.iter_unpack(data[:usable])):
            if is_end(e, i):
                f.entries = Entries(entry, kept + data[:k * es])
                if nonzero(i, whole) < 0:
                    f.zero_tail = whole - i
                else:
                    f.garbage_tail = whole - i
                return f
            if i >= cap:
                raise InputError(f"more than {cap} bytes of entries before the end of the index's data, far more "
                                 "than Kafka writes into such a file: not read", str(path), i)
            i += es
        kept += data[:usable]
        if usable < want:           # the file shrank while being read: what was there is what we got
            break
    f.entries = Entries(entry, kept)
    return f


def _read_index(path: Path, data: bytes | None, entry: struct.Struct, is_end) -> IndexFile:
    if data is not None:
        return _index(path, len(data), lambda n, at: data[at:at + n], lambda a, b: first_nonzero(data, a, b),
                      entry, is_end)
    with open_input(path) as fh:
        try:
            size = os.fstat(fh.fileno()).st_size
            return _index(path, size, lambda n, at: pread_input(fh, n, at),
                          lambda a, b: first_nonzero_in(fh, a, b), entry, is_end)
        except OSError as e:
            raise InputError(f"read failed: {e.strerror or e}", str(path)) from None


def read_offset_index(path: Path, data: bytes | None = None) -> IndexFile:
    """DumpLogSegments' rule: stop at the first entry i>0 whose offset equals the base offset (relative 0);
    an all-zero first slot is also the end (an empty preallocated index)."""
    return _read_index(path, data, _OFFSET_ENTRY, lambda e, i: e[0] == 0 and (i > 0 or e[1] == 0))


def read_time_index(path: Path, data: bytes | None = None) -> IndexFile:
    """Stop at the first all-zero slot (timestamp 0, relative offset 0) — preallocated space."""
    return _read_index(path, data, _TIME_ENTRY, lambda e, i: e[0] == 0 and e[1] == 0)


def read_txn_index(path: Path, data: bytes | None = None) -> IndexFile:
    data = read_capped(path) if data is None else data
    f = IndexFile(path, len(data), K.TXN_INDEX_ENTRY_SIZE)
    whole = len(data) - len(data) % K.TXN_INDEX_ENTRY_SIZE
    f.partial = len(data) - whole
    f.entries = Entries(_TXN_ENTRY, data[:whole])               # (version, pid, first, last, lso)
    return f


@dataclass
class Snapshot:
    path: Path
    size: int
    version: int | None = None
    crc: int | None = None
    crc_ok: bool = False
    entries: Sequence = ()                          # Entries of the producer entries
    problem: str | None = None


def read_snapshot(path: Path, data: bytes | None = None) -> Snapshot:
    data = read_capped(path) if data is None else data
    s = Snapshot(path, len(data))
    if len(data) < 10:
        s.problem = f"snapshot of {len(data)} bytes is shorter than its 10-byte header"
        return s
    s.version, s.crc, count = struct.unpack_from(">hIi", data, 0)
    s.crc_ok = crc32c(data[K.PRODUCER_SNAPSHOT_ENTRIES_OFFSET:]) == s.crc
    if s.version != K.PRODUCER_SNAPSHOT_VERSION:
        s.problem = f"unknown snapshot version {s.version}"
    if count < 0 or 10 + count * K.PRODUCER_SNAPSHOT_ENTRY_SIZE != len(data):
        s.problem = (s.problem or "") + f" entry count {count} does not match the file size {len(data)}"
        count = max(0, min(count, (len(data) - 10) // K.PRODUCER_SNAPSHOT_ENTRY_SIZE))
    s.entries = Entries(_SNAP_ENTRY, data[10:10 + count * K.PRODUCER_SNAPSHOT_ENTRY_SIZE])
    return s


# ---- text files -------------------------------------------------------------------------------

@dataclass
class TextCheckpoint:
    path: Path
    version: int | None = None
    entries: list = field(default_factory=list)   # offset checkpoints: (topic, partition, offset); epochs: (e, o)
    problem: str | None = None


def _lines(path: Path) -> list[str]:
    return read_capped(path, MAX_TEXT_FILE).decode("utf-8", errors="replace").split("\n")


def _read_checkpoint(path: Path, parse_line, what: str) -> TextCheckpoint:
    """``<version>\n<count>\n`` then ``count`` entry lines (CheckpointFile); an empty file has no entries
    (CheckpointFile: readLine() == null)."""
    c = TextCheckpoint(path)
    lines = _lines(path)
    if lines == [""]:
        return c
    try:
        c.version = int(lines[0])
        count = int(lines[1])
        for ln in lines[2:2 + count]:
            c.entries.append(parse_line(ln.split(" ")))
        if len(c.entries) != count:
            c.problem = f"header says {count} entries, file has {len(c.entries)}"
    except (ValueError, IndexError) as e:
        c.problem = f"malformed {what} ({e})"
    return c


def _offset_entry(parts: list[str]) -> tuple[str, int, int]:
    topic, part, off = parts
    return topic, int(part), int(off)


def _epoch_entry(parts: list[str]) -> tuple[int, int]:
    e, o = parts
    return int(e), int(o)


def read_offset_checkpoint(path: Path) -> TextCheckpoint:
    """``0\n<count>\n`` then ``<topic> <partition> <offset>`` lines (CheckpointFile, version 0)."""
    return _read_checkpoint(path, _offset_entry, "checkpoint")


def read_leader_epoch_checkpoint(path: Path) -> TextCheckpoint:
    """``0\n<count>\n`` then ``<epoch> <startOffset>`` lines."""
    return _read_checkpoint(path, _epoch_entry, "leader-epoch-checkpoint")


def read_properties(path: Path) -> dict:
    """partition.metadata (``key: value``) and meta.properties (``key=value``, ``#`` comments)."""
    out = {}
    for ln in _lines(path):
        ln = ln.strip()
        if not ln or ln.startswith("#"):
            continue
        if "=" in ln and (":" not in ln or ln.index("=") < ln.index(":")):
            k, _, v = ln.partition("=")
        else:
            k, _, v = ln.partition(":")
        out[k.strip()] = v.strip()
    return out


def read_quorum_state(path: Path) -> dict:
    try:
        doc = strict_json(read_capped(path, MAX_TEXT_FILE).decode("utf-8"))     # NaN/Infinity would make dump's NDJSON invalid
    except ValueError as e:                                     # UnicodeDecodeError too
        return {"problem": f"not JSON: {e}"}
    return doc if isinstance(doc, dict) else {"problem": f"not a JSON object ({type(doc).__name__})"}
