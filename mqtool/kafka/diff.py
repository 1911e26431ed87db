"""``mqtool diff`` for Kafka: a leader's and a follower's copy of one partition directory, or two log dirs
holding the same partitions (paired by directory name).

Batches are aligned by base offset: a follower appends the leader's batches byte for byte, so segment files
of the same base offset are compared byte by byte first and decoded only in the windows around their
differences (:mod:`mqtool.diffcore`). Two batches at one offset whose bytes differ are compared
field by field: the batch header (``batch.*``), then their records by offset (the dump row of each record,
key and value as base64). Segments whose base offsets differ (rolled at other moments) still align: the merge
follows offsets, not files. The .index and .timeindex of same-named segments are compared entry by entry;
a follower builds its own, so their entries may differ where the logs agree (they are counted apart from the
log's differences).
"""
from __future__ import annotations

import os
import struct
from pathlib import Path
from types import SimpleNamespace
from typing import Iterator

from mqtool.damage import Damage
from mqtool.diffcore import Side, Tally, Unit, damaged_unit, diff_keyed, diff_log, row_fields, same_file
from mqtool.errors import UsageError
from mqtool.io import map_input, need
from mqtool.kafka.dump import batch_row, record_row
from mqtool.kafka.indexfiles import read_offset_index, read_time_index
from mqtool.kafka.records import Batch, iter_records
from mqtool.kafka.scan import scan
from mqtool.kafka.store import Partition, discover

_PREFIX = struct.Struct(">qi")       # baseOffset, batchLength: the log overhead before every entry
_OVERHEAD = _PREFIX.size
_RECORD_OPTS = SimpleNamespace(print_data=True, body="base64")


def step(buf, p: int) -> int | None:
    """The boundary after the entry at ``p`` (its batch length), None where no sound entry starts."""
    if p + _OVERHEAD > len(buf):
        return None
    need(buf, p, _OVERHEAD)             # a remote file: fetched where read
    _off, size = _PREFIX.unpack_from(buf, p)
    if size <= 0 or p + _OVERHEAD + size > len(buf):
        return None
    return p + _OVERHEAD + size


def _size(seg) -> int:
    try:
        return os.stat(seg.log).st_size
    except OSError:
        return 0


def units(seg, start: int, stop: int | None = None) -> Iterator[Unit]:
    """The batches of one segment from the batch boundary ``start`` up to the boundary ``stop`` (None: the
    end); unreadable ranges are damaged units placed at the offset that would come next."""
    path = str(seg.log)
    with map_input(seg.log, ranged=True) as mi:       # a remote file: scan() fetches what it reads
        buf = mi.buf
        expect = seg.base_offset
        for ev in scan(buf, path, start=start, end=stop, fd=mi.fileno() if mi.mapped else None):
            if isinstance(ev, Batch):
                off = ev.base_offset if ev.base_offset is not None else expect
                last = ev.last_offset if ev.last_offset is not None and ev.last_offset >= off else off
                expect = last + 1
                yield Unit(off, last, ev.count or 0, buf[ev.position:ev.end], ev, path, ev.position)
            elif isinstance(ev, Damage) and ev.code != "zero-tail":
                yield damaged_unit(buf, expect, ev.position, min(ev.length, len(buf) - ev.position), path,
                                   f"{ev.code}: {ev.message}")


def _records(batch: Batch) -> tuple[list, str | None]:
    out, err = [], None
    try:
        for r in iter_records(batch):
            row = record_row(batch, r, _RECORD_OPTS)
            if r.crc_ok is None:            # a v2 record has no CRC of its own: its batch's (batch.crc_ok)
                row.pop("crc_ok", None)
                row.pop("flags", None)
            out.append((r.offset, row))
    except Exception as e:          # noqa: BLE001 - codec, limit and framing errors all mean "no more records"
        err = str(e) or type(e).__name__
    return out, err


def compare(ua: Unit, ub: Unit) -> list:
    """The batch header fields (``batch.*``) and the records (by offset) of two batches at one offset."""
    ba, bb = ua.obj, ub.obj
    out = row_fields(ua.offset, batch_row(ba), batch_row(bb), prefix="batch.")
    ra, ea = _records(ba)
    rb, eb = _records(bb)
    if ea != eb:
        out.append((ua.offset, "batch.records_error", ea, eb))
    da, db = dict(ra), dict(rb)
    for off in sorted(set(da) | set(db)):
        x, y = da.get(off), db.get(off)
        if x is None or y is None:
            out.append((off, "record", x is not None, y is not None))
        else:
            out.extend(f + ({"encoding": "base64"},) if f[1] in ("key", "value") else f for f in row_fields(off, x, y))
    return out


def _partitions(path: str) -> dict[str, Partition]:
    out: dict[str, Partition] = {}
    for ld in discover(path):
        for p in ld.partitions:
            out.setdefault(p.label, p)
    return out


def _pairs(a: str, b: str) -> list[tuple[str, Partition | None, Partition | None]]:
    if Path(a).is_file() or Path(b).is_file():
        raise UsageError("diff compares two partition directories or two log dirs, not single files")
    pa, pb = _partitions(a), _partitions(b)
    if len(pa) == 1 and len(pb) == 1:           # a leader's and a follower's partition directory
        (la, x), (lb, y) = next(iter(pa.items())), next(iter(pb.items()))
        return [(la if la == lb else f"{la} | {lb}", x, y)]
    return [(label, pa.get(label), pb.get(label)) for label in sorted(set(pa) | set(pb))]


def _side(part: Partition | None) -> Side:
    if part is None:
        return Side()
    return Side({s.base_offset: s for s in part.segments if s.log is not None})


def diff(a: str, b: str, tally: Tally, opts) -> Iterator[dict]:
    for label, x, y in _pairs(a, b):
        yield from diff_log(tally, _side(x), _side(y), path_of=lambda s: s.log, size_of=_size, step=step,
                            units=units, compare=compare, where=label, progress_enabled=opts.progress,
                            label=f"diff {label}")
        if opts.index and x is not None and y is not None:
            yield from _diff_indexes(tally, label, x, y)


def _diff_indexes(tally: Tally, label: str, x: Partition, y: Partition) -> Iterator[dict]:
    sa = {s.base_offset: s for s in x.segments}
    sb = {s.base_offset: s for s in y.segments}
    for base in sorted(set(sa) & set(sb)):
        for kind, read, fields in (("index", read_offset_index, ("position",)),
                                   ("timeindex", read_time_index, ("timestamp",))):
            fa, fb = getattr(sa[base], kind), getattr(sb[base], kind)
            where = f"{label}/{base:020d}.{kind}"
            if fa is None and fb is None:
                continue
            if fa is None or fb is None:
                tally.side_row("index", base, where, "file", fa is not None, fb is not None)
                yield from tally.take()
                continue
            if same_file(fa, fb):
                continue
            yield from diff_keyed(tally, "index", where, _entries(read(fa), kind, base),
                                  _entries(read(fb), kind, base))


def _entries(ix, kind: str, base: int):
    """Index entries keyed by the offset they point at: .index (relOffset, position), .timeindex
    (timestamp, relOffset)."""
    for i, e in enumerate(ix.entries):
        if kind == "index":
            yield base + e[0], {"position": e[1]}, str(ix.path), i * ix.entry_size
        else:
            yield base + e[1], {"timestamp": e[0]}, str(ix.path), i * ix.entry_size
