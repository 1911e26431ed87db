"""Walk a LiteMQ commitlog: live records up to the end of data, then (optionally) carved stale records.

End-of-data rules (pkg/storage/commitlog.go, mappedfile.go): records are written back to back from byte 0
of each file, never span files, and a new file is only opened when the previous one is exactly full. The
rest of a file is zero (ftruncate preallocation). So the live chain runs through every exactly-full file
and ends at the first zero length, bad length or bad magic. Everything after that point is either zero
or **stale**: after a restart LiteMQ rewrites from offset 0 of file 0 (its recovery globs ``*.data`` and
finds nothing), so older records survive past the new end, possibly with no zero gap before them.

The walk yields :class:`LiteRecord` objects and :class:`~mqtool.damage.Damage` events in file order; it never
raises on damaged bytes. A damage event is what the walk met (a bad or zeroed range, the end of the live data,
leftovers, missing files, the stale/after-gap totals); :func:`damage_finding` is what each one is as a finding
(severity, span), the one place every verb (verify, dump, query, rebuild-index, info) turns them into findings.
"""
from __future__ import annotations

import os
from bisect import bisect_left
from dataclasses import dataclass
from functools import lru_cache

from formats import litemq as F
from mqtool.errors import InputError
from mqtool.damage import CHECK_BUDGET_FACTOR, CheckBudget, Damage
from mqtool.findings import ERROR, INFO, WARNING, Finding
from mqtool.io import first_nonzero, map_input, need, need_unit, ranged, ranged_maps
from mqtool.litemq.store import (Segment, Store, commitlog_segments, irregular_segments, nothing_written,
                                 segment_index)
from mqtool.litemq.layout import LENGTH, MIN_MESSAGE_LEN
from mqtool.litemq.records import DecodeError, LiteRecord, decode_message

_U32 = LENGTH
_CHUNK = 1 << 20
#: the carve's checking budget over few bytes (:class:`~mqtool.damage.CheckBudget`: a candidate record's decode
#: reads up to the bytes it claims; crafted bytes can hold a candidate every few bytes)
CARVE_BUDGET_FLOOR = 1 << 24
#: A store time this far below the newest one seen suggests records of an older run (restart overwrite).
TIME_REGRESSION_MS = 1000


@dataclass
class WalkResult:
    """Filled in while walking: where the live data ended and what was carved."""

    end_offset: int | None = None
    end_file: str | None = None
    end_position: int | None = None
    file_size: int = 0
    live: int = 0
    stale: int = 0
    after_gap: int = 0
    max_live_ts: int | None = None
    regressed: bool = False


def parse_record_at(buf, pos: int, limit: int, seg: Segment, name: str):
    """Try to decode the record whose length prefix is at ``pos``; ``limit`` = end of usable bytes.

    Returns ``(record, None)`` or ``(None, (code, message, expected, actual))``. Length bounds are checked
    before anything is allocated.
    """
    if pos + 4 > limit:
        return None, ("truncated-length", "fewer than 4 bytes left for a length prefix", 4, limit - pos)
    if ranged_maps:
        need_unit(buf, pos, extra=4, cap=limit - pos)      # a remote file: this record (its prefix, then all of it)
    (length,) = _U32.unpack_from(buf, pos)
    if length == 0:
        return None, ("zero-length", "length 0 (end of data)", None, 0)
    left = limit - pos - 4
    if length > left:
        return None, ("bad-length", f"length {length} exceeds the {left} bytes left in the file", left, length)
    if length < MIN_MESSAGE_LEN:
        return None, ("bad-length", f"length {length} is below the smallest message ({MIN_MESSAGE_LEN})",
                      MIN_MESSAGE_LEN, length)
    start = pos + 4
    magic = bytes(buf[start:start + 4])
    if magic != F.MESSAGE_MAGIC_BYTES:
        return None, ("bad-magic", "bad message magic", F.MESSAGE_MAGIC_BYTES.hex(), magic.hex())
    end = start + length
    try:
        m, raw_tags, raw_keys, consumed, bad, b0, b1 = decode_message(buf, start, end)
    except DecodeError as e:
        return None, ("field-overrun", f"field {e}", None, None)
    pad = bytes(buf[start + consumed:min(end, start + consumed + F.TRAILING_PAD)])
    rec = LiteRecord(name, pos, seg.base + pos, length, m, raw_tags, raw_keys, consumed, pad, bad,
                     body_slice=(b0, b1))
    return rec, None


def _nonzero_ranges(buf, a: int, b: int, fd: int | None = None):
    """(start, end) runs of non-zero bytes in buf[a:b], at chunk granularity, coalesced. Zero runs are
    skipped at C speed, and holes of a sparse mapped file (``fd``) with SEEK_DATA: a 2 GiB hole is free."""
    out = []
    pos = a
    while pos < b:
        s = first_nonzero(buf, pos, b, fd)
        if s < 0:
            break
        e = min(b, s + _CHUNK)
        chunk = bytes(buf[s:e])
        t = s + len(chunk.rstrip(b"\x00"))
        if out and out[-1][1] >= s - _CHUNK:
            out[-1] = (out[-1][0], t)
        else:
            out.append((s, t))
        pos = e
    return out


def carve(buf, start: int, size: int, seg: Segment, name: str, budget: CheckBudget | None = None):
    """Records found by scanning buf[start:size] for the message magic at (candidate + 4): the message magic, a
    length that fits and the encoded fields agreeing with it (the format has no checksum). ``budget``: a
    candidate whose decode it cannot afford (the bytes its length claims) is passed over (counted there)."""
    magic = F.MESSAGE_MAGIC_BYTES
    i = start + 4
    while True:
        j = buf.find(magic, i, size)
        if j < 0:
            return
        cand = j - 4
        if budget is not None and cand >= 0:
            (claimed,) = _U32.unpack_from(buf, cand)
            if MIN_MESSAGE_LEN <= claimed <= size - j and not budget.afford(claimed):
                i = j + 1
                continue
        rec, prob = parse_record_at(buf, cand, size, seg, name)
        if rec is not None and rec.length == rec.consumed + F.TRAILING_PAD:
            yield rec
            i = cand + 4 + rec.length + 4
        else:
            i = j + 1


def walk(store: Store, carve_stale: bool = True, result: WalkResult | None = None, with_body: bool = False):
    """Yield live records, stale/after-gap records (when ``carve_stale``) and :class:`Damage` events, in file
    order (:func:`damage_finding` makes a finding of one)."""
    res = result if result is not None else WalkResult()
    segs, fs = commitlog_segments(store)
    res.file_size = fs
    yield from walk_prologue(store, segs, fs)
    if not segs:
        return
    for i, seg in enumerate(segs):
        name = store.display(seg.path)
        with map_input(seg.path, ranged=True) as mi:     # a remote file: _live fetches record by record
            size = len(mi.buf)
            pos, stop = yield from _live(mi.buf, size, seg, name, res, with_body, mi)
        if pos >= size and size > 0:
            continue                      # exactly full: the chain goes on in the next file
        yield from walk_tail(store, segs, i, pos, stop, res, carve_stale, with_body)
        return
    # every file exactly full: the data ends at the end of the last one (nothing after it to read)
    res.end_offset, res.end_file, res.end_position = seg.base + size, name, size


def walk_prologue(store: Store, segs, fs):
    """Damage events about the file list itself (before any file is read)."""
    if store.commitlog_dir is not None and store.kind != "segment":
        for path, why in irregular_segments(store.commitlog_dir):
            # the bytes the store lays out for it (file index x file size, one file long): what points there
            # follows from it; no file size known (no regular file to read it from): no place
            base = segment_index(path.name) * fs if fs else None
            yield Damage(store.display(path), None, base, fs, "file-unreadable",
                         f"named like a commitlog file but {why}: skipped (never opened, so nothing blocks)")
    if not segs:
        d = store.commitlog_dir
        if d is not None and d.is_dir():     # the directory is there, no file in it: fresh, or files lost
            fresh = nothing_written(store)
            yield Damage(store.display(d), None, None, 0, "fresh-commitlog" if fresh else "commitlog-empty",
                         "no commitlog files" + (" (and no queue or index entry: nothing written yet)"
                                                 if fresh else ""))
        else:
            yield Damage(store.display(d or store.target), None, None, 0, "no-commitlog",
                         "no commitlog directory")
        return
    prev = None
    for s in segs:
        if s.size != fs:
            yield Damage(store.display(s.path), None, s.base, 0, "segment-size-mismatch",
                         f"file is {s.size} bytes; the other files are {fs} (LiteMQ preallocates every file)",
                         fs, s.size)
        if prev is not None and s.index != prev + 1:
            gap = (s.index - prev - 1) * fs            # the missing bytes end where this file begins
            yield Damage(store.display(s.path), None, s.base - gap, gap, "segment-missing",
                         f"file index {s.index} follows {prev}: files {prev + 1}..{s.index - 1} are missing",
                         prev + 1, s.index)
        prev = s.index


def walk_tail(store: Store, segs, i: int, pos: int, stop, res: WalkResult, carve_stale: bool = True,
              with_body: bool = False):
    """Everything after the end of the live data, which lies in ``segs[i]`` at ``pos`` (``stop``: the problem
    there, None for an empty file): the end event, carved records, the stale / after-gap totals.
    ``res.max_live_ts`` must hold the newest live store time."""
    seg = segs[i]
    name = store.display(seg.path)
    res.end_offset, res.end_file, res.end_position = seg.base + pos, name, pos
    kind, msg, exp, act = stop or ("zero-length", "empty file", None, 0)
    if kind == "file-changed":        # nothing more is read from this file (lost pages: SIGBUS)
        yield Damage(name, pos, seg.base + pos, 0, kind, msg, exp, act)
    else:
        with map_input(seg.path, ranged=True) as mi:
            fd = mi.fileno() if mi.mapped else None
            # everything after the end is read (zeros, stale records, remnants: only its bytes say which): a
            # remote file is fetched from the end of the data on, not again before it
            need(mi.buf, pos, len(mi.buf) - pos)
            # what follows the end: carved records in this file, newer records starting later files
            carved, nonzero, newer, extent, damaged = yield from _after_end(
                mi.buf, pos, len(mi.buf), seg, name, res, carve_stale, with_body, fd)
        later = _later_files_with_newer_data(store, segs[i + 1:], res.max_live_ts)
        yield _end_damage(name, pos, seg.base + pos, kind, msg, exp, act, carved, nonzero, newer, later, extent)
        yield from damaged              # (after the end event: what follows the end is linked to it first)
    for later_seg in segs[i + 1:]:
        with map_input(later_seg.path, ranged=True) as mi:
            fd = mi.fileno() if mi.mapped else None
            need(mi.buf, 0, len(mi.buf))                    # read whole, as the rest of the file above
            damaged = (yield from _after_end(mi.buf, 0, len(mi.buf), later_seg, store.display(later_seg.path), res,
                                             carve_stale, with_body, fd))[4]
        yield from damaged
    if res.stale:
        yield Damage(None, None, res.end_offset, 0, "stale-records",
                     f"{res.stale} stale record(s) survive after the end of data (older run overwritten "
                     "from offset 0 after a restart); dump them with --include-stale", 0, res.stale)
    if res.after_gap:
        yield Damage(None, None, res.end_offset, 0, "data-after-gap",
                     f"{res.after_gap} record(s) newer than the live data lie after the end of data: a "
                     "gap or damage hides them from LiteMQ's reader", 0, res.after_gap)


def _later_files_with_newer_data(store: Store, later_segs, max_live_ts) -> int:
    """How many later commitlog files start with a record at least as new as the live data (files are
    written from byte 0, so a file holding data has a record there; an older run's file is stale)."""
    n = 0
    for s in later_segs:
        try:
            with map_input(s.path, ranged=True) as mi:     # a remote file: its first record only
                rec, _ = parse_record_at(mi.buf, 0, len(mi.buf), s, store.display(s.path))
        except InputError:
            continue
        if rec is not None and (max_live_ts is None or rec.m["StoreTimestamp"] >= max_live_ts):
            n += 1
    return n


def _end_damage(name, pos, off, kind, msg, exp, act, carved, nonzero, newer, later, extent=None) -> Damage:
    """What the end of the live data is: the end (``end-of-data``), a restart's overwrite
    (``overwritten-record``) or damage (``zeroed-range``, or the problem met there: the damaged record, up to
    the next valid one when one follows in this file (``extent``), else its 4-byte length prefix).

    LiteMQ opens a new file only when the previous one is exactly full, so newer records after the end (in
    this file, or at the start of a later file) mean the end is damage, also when it is a zero length.
    """
    newer_total = newer + later
    where = (f"{newer} newer record(s) follow in this file" if newer else "") + \
        (" and " if newer and later else "") + (f"{later} later file(s) hold newer records" if later else "")
    if kind == "zero-length" and newer_total:
        return Damage(name, pos, off, extent or 4, "zeroed-range",
                      f"length 0 here ends the live data for LiteMQ's reader, but {where}: zeroed bytes "
                      "(damage), not the end of data"
                      + (f" (a damaged record of {extent} bytes, up to the next valid record)" if extent else ""),
                      None, 0)
    if kind == "zero-length" and not nonzero:
        return Damage(name, pos, off, 0, "end-of-data",
                      "end of data: zero fill to the end of the file (LiteMQ preallocation)")
    if kind == "zero-length":
        return Damage(name, pos, off, 0, "end-of-data", "end of data (first zero length); non-zero bytes follow")
    if newer_total:
        return Damage(name, pos, off, extent or 4, kind,
                      f"{msg}; the live data ends here but {where}: damage, not a restart"
                      + (f" (a damaged record of {extent} bytes, up to the next valid record)" if extent else ""),
                      exp, act)
    if carved:
        return Damage(name, pos, off, 0, "overwritten-record",
                      f"live data ends inside an older record ({msg}); older records follow: "
                      "LiteMQ rewrote this file from offset 0 after a restart", exp, act)
    return Damage(name, pos, off, 4, kind, f"{msg}; the live data ends here and nothing readable follows",
                  exp, act)


#: What each damage code of the walk is as a finding: its severity; those in ``_SPANNED`` also name their
#: bytes as the finding's span (the others point at a place, or sum up). ``remnants`` are non-zero bytes
#: after the end where older records were carved (a restart's leftovers): ``unaccounted-bytes``, as info;
#: ``fresh-commitlog`` is an empty commitlog/ in a store that holds no queue or index byte either (nothing
#: written yet): ``commitlog-empty``, as info (as RocketMQ says it).
_SEVERITY = {
    "file-unreadable": ERROR, "no-commitlog": WARNING, "commitlog-empty": WARNING, "fresh-commitlog": INFO,
    "segment-size-mismatch": WARNING, "segment-missing": ERROR,
    "file-changed": ERROR, "zeroed-range": ERROR, "end-of-data": INFO, "overwritten-record": WARNING,
    "stale-records": WARNING, "data-after-gap": ERROR, "store-time-regression": WARNING,
    "unaccounted-bytes": WARNING, "remnants": INFO,
    # the problems that can end the live data (parse_record_at, live_record_at)
    "truncated-length": ERROR, "bad-length": ERROR, "bad-magic": ERROR, "field-overrun": ERROR,
    "length-mismatch": ERROR,
}
_SPANNED = {"zeroed-range", "truncated-length", "bad-length", "bad-magic", "field-overrun", "length-mismatch"}
_CODE = {"remnants": "unaccounted-bytes", "fresh-commitlog": "commitlog-empty"}


def damage_finding(d: Damage) -> Finding:
    """The finding a damage event of :func:`walk` is (the one place its severity and span are decided)."""
    span = (d.offset, d.offset + d.length) if d.code in _SPANNED or (
        d.code == "file-unreadable" and d.offset is not None) else None
    offset = d.offset
    if d.code == "segment-missing":       # the range is the missing files; the finding points at the next one
        span, offset = (d.offset, d.offset + d.length), d.offset + d.length
    return Finding(_SEVERITY[d.code], _CODE.get(d.code, d.code), d.file, d.position, offset, d.message,
                   d.expected, d.actual, span=span)


def regression_damage(name: str, pos: int, off: int, newest: int, ts: int) -> Damage:
    """``store-time-regression``: the store time goes back at this record (said once per walk)."""
    return Damage(name, pos, off, 0, "store-time-regression",
                  "store time goes back here: if a restart's new data ended exactly at an old record "
                  "boundary, the records from here on may be an older run's", newest, ts)


def live_record_at(buf, pos: int, limit: int, seg: Segment, name: str):
    """:func:`parse_record_at` plus the rule of the live chain: a record whose length prefix disagrees with
    its encoded fields ends the live data (``length-mismatch``). Used by the walk and the range reader."""
    rec, prob = parse_record_at(buf, pos, limit, seg, name)
    if rec is not None and rec.length != rec.consumed + F.TRAILING_PAD:
        # A length prefix longer than the encoded fields: following it (as LiteMQ's reader would) hides
        # whatever lies in the excess and lands inside another record. The live data ends here; the carve
        # after the end recovers the records the bad length covers.
        return None, ("length-mismatch", "length prefix disagrees with the encoded fields (+6 overcount)",
                      rec.consumed + F.TRAILING_PAD, rec.length)
    return rec, prob


def _live(buf, size, seg, name, res, with_body=False, mi=None):
    pos = 0
    while pos < size:
        if mi is not None and mi.shrunk():
            now = mi.current_size()
            return pos, ("file-changed", f"the file shrank to {now} bytes while being read; stopped here", size, now)
        if ranged_maps and mi is not None:
            mi.need_unit(pos, extra=4)      # a remote file: this record (its length prefix, then all of it)
        rec, prob = live_record_at(buf, pos, size, seg, name)
        if rec is None:
            return pos, prob
        res.live += 1
        ts = rec.m["StoreTimestamp"]
        if res.max_live_ts is None or ts > res.max_live_ts:
            res.max_live_ts = ts
        elif ts < res.max_live_ts - TIME_REGRESSION_MS and not res.regressed:
            res.regressed = True
            yield regression_damage(name, pos, rec.offset, res.max_live_ts, ts)
        if with_body:
            rec.body = bytes(buf[rec.body_slice[0]:rec.body_slice[1]])
        yield rec
        pos += 4 + rec.length
    return pos, None


def _after_end(buf, start, size, seg, name, res, carve_stale, with_body=False, fd=None):
    """Classify what lies after the end: carved records (yielded), damaged records next to newer ones, non-zero
    leftovers (yielded). Returns ``(carved, nonzero, newer, extent, damaged)``: ``extent`` the bytes from
    ``start`` (the live end) up to a newer record right after them (the damaged record that ends the live
    data, delimited), else None; ``damaged`` the damage events of the records between, before or after newer
    records, each delimited by the valid records around it (:func:`_delimit`; the caller yields them after
    the end event)."""
    nonzero = _nonzero_ranges(buf, start, size, fd)
    if not nonzero:
        return 0, False, 0, None, []
    carved = 0
    newer = 0
    covered = []
    state = []             # per carved record: is it newer than the live data (after-gap)?
    budget = CheckBudget(CHECK_BUDGET_FACTOR * (size - start) + CARVE_BUDGET_FLOOR)
    for rec in carve(buf, start, size, seg, name, budget):
        ts = rec.m["StoreTimestamp"]
        if res.max_live_ts is not None and ts < res.max_live_ts:
            rec.state = "stale"
            res.stale += 1
        else:
            rec.state = "after-gap"
            res.after_gap += 1
            newer += 1
        carved += 1
        covered.append((rec.position, rec.position + 4 + rec.length))
        state.append(rec.state == "after-gap")
        if carve_stale:
            if with_body:
                rec.body = bytes(buf[rec.body_slice[0]:rec.body_slice[1]])
            yield rec
    # non-zero bytes that no carved record explains
    left = _subtract(nonzero, covered)
    note = (f" ({budget.unchecked} candidate record(s) past the checking budget of {budget.budget} bytes not "
            "checked)") if budget.unchecked else ""
    starts = [c[0] for c in covered]        # (carve yields records in file order)
    extent, damaged = None, []
    for a0, b0 in left:
        chunk = bytes(buf[a0:b0])
        stripped = chunk.lstrip(b"\x00")
        if not stripped:
            continue
        a = a0 + len(chunk) - len(stripped)
        b = a0 + len(chunk.rstrip(b"\x00"))
        k = bisect_left(starts, b0)                     # the carved record right after this range, if any
        nxt_newer = k < len(starts) and starts[k] == b0 and state[k]
        near_newer = nxt_newer or (k > 0 and state[k - 1])
        # where a record boundary is known (the live end, the end of a carved record) the range begins there:
        # its leading zero bytes are the high bytes of a length prefix
        at = a0 if a0 == start or (k > 0 and covered[k - 1][1] == a0) else a
        if k == 0 and nxt_newer:      # (only zeros between the live end and here: the same record)
            at = start
        if at == start and nxt_newer:
            extent = b0 - start       # the damaged record that ends the live data, up to the next valid one
            continue
        if a == start and start != 0 and carved:
            continue  # the tail of the overwritten record right at the end (reported with it)
        if near_newer:                # damaged records among the newer ones (after a gap): each delimited
            damaged.extend(_delimit(buf, at, b0 if nxt_newer else b, seg, name, note))
            continue
        yield Damage(name, a, seg.base + a, b - a, "remnants" if carved else "unaccounted-bytes",
                     f"{b - a} non-zero byte(s) after the end of data that are no whole record"
                     + (" (remnants of overwritten records)" if carved else "") + note, None, b - a)
    return carved, True, newer, extent, damaged


def _delimit(buf, a: int, end: int, seg, name: str, note: str = "") -> list:
    """The damaged records in buf[a:end] (bytes no valid record covers, next to records newer than the live
    data): from ``a`` on, each record's own length prefix delimits it when it can be trusted (the magic follows
    it, or it ends exactly at ``end``, where the next valid record starts), else the rest is one damaged
    range. Each is a :class:`Damage` with the problem :func:`parse_record_at` finds there. Linear: the ranges
    do not overlap and each decode reads at most its own range."""
    out = []
    p = a
    while p < end:
        rec, prob = parse_record_at(buf, p, end, seg, name)
        if rec is not None:   # the fields decode, but not to the length (the carve takes only records that agree)
            code, msg, exp, act = ("length-mismatch", "length prefix disagrees with the encoded fields",
                                   rec.consumed + F.TRAILING_PAD, rec.length)
            n = 4 + rec.length
        else:
            code, msg, exp, act = prob
            length = _U32.unpack_from(buf, p)[0] if end - p >= 4 else 0
            trusted = MIN_MESSAGE_LEN <= length <= end - p - 4 and (
                bytes(buf[p + 4:p + 8]) == F.MESSAGE_MAGIC_BYTES or p + 4 + length == end)
            n = 4 + length if trusted else end - p
            if code == "zero-length":
                code, msg = "zeroed-range", "length 0"
        out.append(Damage(name, p, seg.base + p, n, code,
                          f"{msg}; a damaged record after the end of the live data, delimited by the valid records "
                          f"around it: skipped {n} bytes" + note, exp, act))
        p += n
    return out


def _subtract(ranges, covered):
    out = []
    covered = sorted(covered)
    for a, b in ranges:
        cur = a
        for c, d in covered:
            if d <= cur or c >= b:
                continue
            if c > cur:
                out.append((cur, c))
            cur = max(cur, d)
        if cur < b:
            out.append((cur, b))
    return [(a, b) for a, b in out if b > a]


# ---- the length-prefix chain (framing only), shared by range splitting and the live-log history

def hop(buf, pos: int, size: int, until: int) -> tuple[int, bool]:
    """Follow the length prefixes from ``pos`` while ``pos < until``: ``(boundary, intact)`` where boundary
    is the first record boundary ``>= until`` (or the file end) and intact is False when the chain breaks
    (zero/bad length or bad magic, the framing checks of :func:`parse_record_at`) before that."""
    unpack = _U32.unpack_from
    magic = F.MESSAGE_MAGIC_BYTES
    fetch = ranged(buf)         # a remote file: each record's prefix and magic fetched before they are read
    while pos < until:
        if pos + 4 > size:
            return pos, False
        if fetch:
            need(buf, pos, 8)
        (length,) = unpack(buf, pos)
        if length < MIN_MESSAGE_LEN or length > size - pos - 4 or buf[pos + 4:pos + 8] != magic:
            return pos, False
        pos += 4 + length
    return pos, True


@lru_cache(maxsize=1024)
def _segment_full(path: str, size: int, mtime_ns: int) -> bool:
    """Is this file an exactly-full chain (the live data goes on into the next file)?"""
    if size <= 0:
        return False
    with map_input(path, ranged=True) as mi:       # a remote file: hop() fetches the prefixes it reads
        pos, ok = hop(mi.buf, 0, len(mi.buf), len(mi.buf))
        return ok and pos == len(mi.buf)


def _full(seg: Segment) -> bool:
    try:
        st = os.stat(seg.path)
    except OSError:
        return False
    return _segment_full(str(seg.path), st.st_size, st.st_mtime_ns)
