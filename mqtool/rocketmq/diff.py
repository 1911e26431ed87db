"""``mqtool diff`` for RocketMQ: two copies of one store (a master and its slave, a store and its backup), or
two commitlog directories.

The commitlog is aligned by physical offset (segment files are named by the offset of their first byte, so
same-named files hold the same offsets); same-named files are compared byte by byte first and decoded only
in the windows around their differences (:mod:`mqtool.diffcore`). Consume queues are
compared unit by unit (by queue offset), index files header and entries (by file name).
"""
from __future__ import annotations

import struct
from typing import Iterator

from formats import rocketmq as F
from mqtool.diffcore import (Side, Tally, Unit, bytes_field, damaged_unit, diff_keyed, diff_log, row_fields,
                             same_file)
from mqtool.io import map_input, need
from mqtool.rocketmq.indexfiles import iter_cq_units, read_index_file
from mqtool.rocketmq.records import Blank, Message
from mqtool.rocketmq.scan import End, SegmentScanner
from mqtool.damage import Damage
from mqtool.rocketmq.store import RocketStore, forced_commitlog, open_store

_HEAD = struct.Struct(">ii")          # TOTALSIZE, MAGICCODE: the first two fields of every unit
_UNIT_MAGICS = (F.MESSAGE_MAGIC_CODE_V1, F.MESSAGE_MAGIC_CODE_V2, F.BLANK_MAGIC_CODE)
WHERE = "commitlog"


def step(buf, p: int) -> int | None:
    """The boundary after the unit at ``p`` (TOTALSIZE), None where no sound unit starts."""
    if p + _HEAD.size > len(buf):
        return None
    need(buf, p, _HEAD.size)            # a remote file: fetched where read
    total, magic = _HEAD.unpack_from(buf, p)
    if total <= 0 or magic not in _UNIT_MAGICS or p + total > len(buf):
        return None
    return p + total


def units(seg, start: int, stop: int | None = None) -> Iterator[Unit]:
    """The messages (and unreadable ranges) of one segment from the unit boundary ``start`` up to the
    boundary ``stop`` (None: the end)."""
    for ev in SegmentScanner(seg, start=start, resync_start=False).events():
        if stop is not None and ev.position >= stop:
            return
        t = type(ev)
        if t is Message:
            p = ev.position
            yield Unit(ev.offset, ev.offset, 1, ev._buf[p:p + ev.size], ev, seg.path, p)
        elif t is Damage:
            buf = _buffer_of(seg)
            yield damaged_unit(buf, ev.offset, ev.position, min(ev.length, max(0, len(buf) - ev.position)),
                               seg.path, f"{ev.code}: {ev.message}")
        elif t is End:
            return
        elif t is not Blank:         # a FastRun is only made with a fast lane, which is not asked for
            continue


def _buffer_of(seg):
    with map_input(seg.path, ranged=True) as mi:  # a remote file: damaged_unit() fetches what it hashes
        return mi.buf


def compare(ua: Unit, ub: Unit) -> list:
    """The fields of two messages at one physical offset that differ (the dump row's fields, and the stored
    body as base64)."""
    ma, mb = ua.obj, ub.obj
    out = row_fields(ua.offset, ma.to_row(), mb.to_row())
    ba, bb = ma.stored_body, mb.stored_body
    if ba != bb:
        out.append(bytes_field(ua.offset, "body", ba, bb))
    return out


def _side(store: RocketStore) -> Side:
    return Side({s.base: s for s in forced_commitlog(store)})


def diff(a: str, b: str, tally: Tally, opts) -> Iterator[dict]:
    sa, sb = open_store(a), open_store(b)
    yield from diff_log(tally, _side(sa), _side(sb), path_of=lambda s: s.path, size_of=lambda s: s.size,
                        step=step, units=units, compare=compare, where=WHERE,
                        progress_enabled=opts.progress, label="diff commitlog")
    if opts.index:
        yield from _diff_queues(tally, sa, sb)
        yield from _diff_index(tally, sa, sb)


# ---- consume queues --------------------------------------------------------------------------------

def _cq_entries(q):
    if q is None:
        return
    for u in iter_cq_units(q):
        yield u.queue_offset, {"offset": u.offset, "size": u.size, "tags_code": u.tags_code}, u.file, u.position


def _diff_queues(tally: Tally, sa: RocketStore, sb: RocketStore) -> Iterator[dict]:
    qa = {(q.topic, q.queue_id): q for q in sa.queues()}
    qb = {(q.topic, q.queue_id): q for q in sb.queues()}
    for key in sorted(set(qa) | set(qb)):
        x, y = qa.get(key), qb.get(key)
        if x is not None and y is not None and _same_files(x.files, y.files):
            continue
        yield from diff_keyed(tally, "cq", f"{key[0]}/{key[1]}", _cq_entries(x), _cq_entries(y))


def _same_files(fa, fb) -> bool:
    if [s.name for s in fa] != [s.name for s in fb]:
        return False
    return all(same_file(x.path, y.path) for x, y in zip(fa, fb))


# ---- index files -----------------------------------------------------------------------------------

def _diff_index(tally: Tally, sa: RocketStore, sb: RocketStore) -> Iterator[dict]:
    """Index files paired in name order: a name is the moment the broker created the file, which differs
    between a master and its slave that indexed the same messages; the content is what is compared."""
    ia, ib = sorted(sa.index_files, key=_name), sorted(sb.index_files, key=_name)
    for k in range(max(len(ia), len(ib))):
        pa, pb = (ia[k] if k < len(ia) else None), (ib[k] if k < len(ib) else None)
        na, nb = _name(pa) if pa else None, _name(pb) if pb else None
        where = f"index/{na if na == nb or nb is None else nb if na is None else f'{na} | {nb}'}"
        if pa is None or pb is None:
            tally.side_row("index", None, where, "file", pa is not None, pb is not None, file=pa or pb)
            yield from tally.take()
            continue
        if same_file(pa, pb):
            continue
        va, vb = read_index_file(pa), read_index_file(pb)
        for key, x in va.header.items():
            if vb.header.get(key) != x:
                tally.side_row("index", None, where, f"header.{key}", x, vb.header.get(key), units=0)
        yield from diff_keyed(tally, "index", where, _index_entries(va), _index_entries(vb))


def _index_entries(v):
    """(entry number, its fields) of an index file: hash, physical offset, time difference, previous entry."""
    if v.slot_num is None:
        return
    for k in range(v.entry_count):
        h, phy, tdiff, prev = v.entry(k + 1)
        yield k + 1, {"key_hash": h, "offset": phy, "time_diff": tdiff, "prev_index": prev}, v.path, \
            v.entry_position(k + 1)


def _name(p: str) -> str:
    return p.replace("\\", "/").rsplit("/", 1)[-1]
