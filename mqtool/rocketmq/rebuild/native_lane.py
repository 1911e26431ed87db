"""The commitlog walk for dispatch and its optional compiled lane (``mqtool/_native/rmqrebuild.c``).

:func:`iter_dispatch_records` reads the common unit with the schema-derived struct and hands the rest of a
segment to the general scanner at a BLANK, zero fill or damage; :func:`native_lib` is the configured helper
(:func:`native_layout`: what ``configure`` gets) that may dispatch a run of units itself."""
from __future__ import annotations

import mmap
import os
import re
import struct
from array import array
from collections import deque
from contextlib import contextmanager
from typing import Iterator

from formats import rocketmq as F
from mqtool import native, schemacache
from mqtool.errors import InputError
from mqtool.io import first_nonzero, map_input, ranged
from mqtool.pages import PageWindow
from mqtool.rocketmq import layout
from mqtool.rocketmq.store import Segment
from mqtool.rocketmq.records import DecodeFailure, Message, decode_message
from mqtool.rocketmq.scan import Damage, SegmentScanner
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

CHUNK_BYTES = 16 << 20      # commitlog bytes per worker range of the two-step lane
_AP_EXHAUSTED, _AP_LIMIT, _AP_DECLINE, _AP_MISS = 0, 1, 2, 3     # why apply() stopped
_CH_LIMIT, _CH_FRAME, _CH_DECLINE, _CH_FULL = 0, 1, 2, 3        # why a chunk ended (parse)
_CHUNK_HEAD = struct.Struct("=8q")      # magic, records, hashes, queues, start, stop, why, limit


def default_jobs() -> int:
    """Workers for the two-step lane: the CPUs this process may run on (at most 4: the walk is memory-bound)."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    return max(1, min(n, 4))


class _Chunk:
    """One parsed range: the helper's records (``data``), how far ``apply`` got (``cursor``) and the queue
    slots it looked up (``gslots``)."""

    __slots__ = ("data", "cursor", "gslots", "start", "stop", "why")

    def __init__(self, data: bytes):
        _, _, _, nq, self.start, self.stop, self.why, _ = _CHUNK_HEAD.unpack_from(data)
        self.data, self.cursor = data, 0
        self.gslots = array("q", [-1]) * nq


def _parse_job(lib, buf, base: int, t0: int, t1: int, end: int, max_size: int, with_index: bool, exact: bool):
    """A worker's range: the chunk of the units from the first boundary at or after ``t0`` (``t0`` itself when
    ``exact``) that start before ``t1``; None when no unit starts there."""
    start = t0 if exact else lib.find_boundary(buf, base, t0, t1, end, max_size)
    if start < 0:
        return None
    return lib.parse(buf, start, t1, end, max_size, with_index, isinstance(buf, mmap.mmap))


class _Plan:
    """The ranges of one segment for the two-step lane: ``chunk_bytes`` each, parsed ``depth`` ahead by the
    workers (or here, with one job). A chunk is used only where the walk arrives exactly at its first unit;
    anywhere else the range from ``pos`` is parsed here, so a range boundary (inside a queue's run, at a
    BLANK, at damage, across index files) never changes what is dispatched."""

    def __init__(self, st: "SharedState", buf, base: int):
        self.st, self.buf, self.base = st, buf, base
        self.cur: _Chunk | None = None
        self.jobs: deque = deque()            # (t0, t1, future), in order
        self.next_t: int | None = None        # where the next planned range starts; None: not started
        self.more = st.pool is not None

    def _last_planned(self) -> None:
        """No more ranges of this segment: the workers go on with the next segment's first ones."""
        self.more = False
        self.st.start_next(self.base)

    def adopt(self, pre: "Prestart") -> None:
        """Take over the ranges ``pre`` started (from the segment's first unit on)."""
        self.st.chunks["early"] += len(pre.jobs)
        self.jobs.extend(pre.jobs)
        pre.jobs.clear()
        self.first, self.next_t = 0, pre.next_t

    def _plan(self, end: int) -> None:
        st = self.st
        while self.more and len(self.jobs) < st.jobs + 2:
            t0 = self.next_t
            t1 = min(t0 + st.chunk_bytes, end)
            if t0 >= t1:
                self._last_planned()
                break
            fut = st.pool.submit(_parse_job, st.lib, self.buf, self.base, t0, t1, end, st.max_size,
                                 st.idx is not None, not self.jobs and t0 == self.first)
            self.jobs.append((t0, t1, fut))
            self.next_t = t1

    def chunk_at(self, pos: int, end: int) -> _Chunk:
        """The chunk whose first unit is at ``pos``: a worker's, or parsed here up to the next range."""
        st = self.st
        if self.next_t is None and self.more:
            self.first = self.next_t = pos
        self._plan(end)
        jobs = self.jobs
        t1 = None
        while jobs:
            j0, j1, fut = jobs[0]
            if j1 <= pos:                      # the walk is past this range
                jobs.popleft()
                fut.cancel()
                continue
            if j0 > pos:                      # the range of pos has gone: parse up to the next one
                t1 = j0
                break
            jobs.popleft()
            data = fut.result()
            self._plan(end)
            if data is None:
                if j1 - j0 >= st.max_size:      # no unit can span it: a zero tail or damage, plan no more
                    self._last_planned()
                t1 = j1
                break
            ch = _Chunk(data)
            if ch.start == pos:
                st.chunks["workers"] += 1
                self.cur = ch
                return ch
            t1 = j1
            break
        if t1 is None or t1 <= pos:
            t1 = min(pos + st.chunk_bytes, end)
        st.chunks["here"] += 1
        ch = self.cur = _Chunk(st.lib.parse(self.buf, pos, max(t1, pos + 1), end, st.max_size, st.idx is not None,
                                            isinstance(self.buf, mmap.mmap)))
        return ch

    def close(self) -> None:
        """Cancel the ranges not started; wait for the ones running (they read the segment's map)."""
        _end_jobs(self.jobs)
        self.cur = None


def _end_jobs(jobs) -> None:
    """Cancel the ranges of ``jobs`` (``(start, end, future)``) not started, wait for the ones running (they
    read a segment's map), and empty it."""
    for _, _, fut in jobs:
        fut.cancel()
    for _, _, fut in jobs:
        if not fut.cancelled():
            try:
                fut.result()
            except Exception:                # noqa: BLE001 - a range nobody needs any more
                pass
    jobs.clear()


_configured: set[int] = set()
# per queue in the shared int64 array: maxPhysicOffset, write position (units; -1 before its first file), end
# of the current file (units), units the helper appended
_QS_MAXPHYS, _QS_WRITE, _QS_FILE_END, _QS_UNITS, _QS_N = range(5)
_IS_N = 8               # index state: mode, indexCount, indexNum, slotNum, hashSlotCount, beginTs, endPhy, endTs


def _struct_fields(name: str, wanted: tuple[str, ...]) -> tuple[dict[str, tuple[int, int]], int]:
    """({field: (offset, size)} of each ``wanted`` field, struct size) of the fixed prefix of the schema
    ``formats.rocketmq.<name>``, from its derived struct format (served by the schema cache: no construct)."""
    st, names = schemacache.prefix_format(F, name)
    order, codes = st.format[0], re.findall(r"\d*[a-zA-Z?]", st.format[1:])
    assert len(codes) == len(names), (st.format, names)
    at, o = {}, 0
    for n, code in zip(names, codes):
        size = struct.calcsize(order + code)
        at[n] = (o, size)
        o += size
    assert o == st.size
    return {n: at[n] for n in wanted}, st.size


def native_layout() -> dict:
    """What ``rmqcore.rebuild.configure`` gets, by name: the consumequeue unit and index entry layouts and the
    constants, all from :mod:`formats.rocketmq` (the message layout is the core's: :func:`layout.native_core`)."""
    unit, unit_size = _struct_fields("CqUnit", ("offset", "size", "tagsCode"))
    entry, entry_size = _struct_fields("IndexEntry", ("keyHash", "phyOffset", "timeDiff", "prevIndex"))
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
                          lane=None, segment_hook=None) -> Iterator[tuple]:
    """(PHYSICALOFFSET, TOTALSIZE, topic bytes, queueId, queueOffset, sysFlag, storeTimestamp, properties
    bytes) for every readable message in commitlog order.

    The common unit is read with the schema-derived struct (IPv6 units with the general decoder); at a BLANK,
    zero fill or damage the rest of the segment goes to :class:`~mqtool.rocketmq.scan.SegmentScanner` (end of
    data, damage + resync). ``on_segment(seg)`` is called after each segment (progress).

    ``lane(buf, pos, limit, end) -> new_pos`` (the compiled loop) may dispatch a run of units itself
    (those starting before ``limit``) before the walk reads the unit at ``pos``; it returns ``pos`` when it
    does not handle that unit. It is called only when everything yielded so far has been consumed.
    ``segment_hook(seg, buf)``, a context manager, is entered around each segment's walk (the lane's workers
    read ``buf`` only inside it); it may give the :class:`~mqtool.pages.PageWindow` class the walk uses.
    """
    for seg in segments:
        try:
            mi = map_input(seg.path, ranged=True)       # a remote file: the walk's PageWindow fetches ahead of it
        except InputError:      # a directory, FIFO, link loop... named like a segment: the scanner says so
            yield from _slow_rest(seg, 0, max_size, on_damage)      # (file-unreadable damage) and the walk
            if on_segment is not None:                              # goes on with the next segment
                on_segment(seg)
            continue
        with mi:
            if segment_hook is None or ranged(mi.buf):  # (workers parsing ahead would read past what is fetched)
                pos = yield from _fast_walk(seg, mi.buf, max_size, lane)
            else:
                with segment_hook(seg, mi.buf) as window:
                    pos = yield from _fast_walk(seg, mi.buf, max_size, lane, window)
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


class _ReleaseWindow(PageWindow):
    """The page window of a walk whose lane parses ahead in workers: they populate the pages of their ranges
    (and release them once parsed), so the walk only releases what it read itself (units Python dispatched)."""

    __slots__ = ()

    def _populate(self, at: int) -> None:
        pass


def _fast_walk(seg: Segment, buf, max_size: int, lane=None, window=None):
    """Yield dispatch tuples from the start of ``seg``; return None at its clean end, or the position where the
    general scanner must take over (BLANK, zero fill, damage)."""
    min_size = F.MIN_MESSAGE_SIZE
    end = len(buf)
    pos = 0
    win = (window or PageWindow)(buf, unit=max_size)    # bounded RSS: only bytes copies leave this loop; pages behind released
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
    if pos >= end or first_nonzero(buf, pos, end) < 0:
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


class Prestart:
    """The first ranges of the first segment, parsed by the workers while the run is still being set up (the
    settings read the store's index and consumequeue files meanwhile); the plan of that segment
    (:meth:`SharedState.segment`) takes them over. They are parsed from a map of their own: the records say
    positions, so they fit the walk's map of the same file (and a walk that does not arrive exactly at a
    range's first unit parses that range again, as always). None of it changes the output."""

    def __init__(self, lib, seg: Segment, max_size: int, jobs: int, chunk_bytes: int, pool=None,
                 with_index: bool = True, ranges: int | None = None):
        self.seg, self.max_size, self.jobs_n, self.chunk_bytes = seg, max_size, jobs, chunk_bytes
        self._map = map_input(seg.path, ranged=True)
        self.buf = self._map.__enter__().buf
        if ranged(self.buf):    # a remote file: the walk fetches as it goes; workers ahead would read unfetched
            self._map.__exit__(None, None, None)        # bytes (and a whole-file map would fetch all of it)
            raise _Remote(seg.path)
        if pool is None:
            from concurrent.futures import ThreadPoolExecutor   # (here: only a rebuild with workers needs it)

            pool = ThreadPoolExecutor(jobs, thread_name_prefix="mqtool-rebuild")
        self.pool = pool
        self.jobs: deque = deque()
        t, end = 0, len(self.buf)
        for _ in range(ranges or jobs + 2):
            t1 = min(t + chunk_bytes, end)
            if t >= t1:
                break
            self.jobs.append((t, t1, self.pool.submit(_parse_job, lib, self.buf, seg.base, t, t1, end, max_size,
                                                      with_index, t == 0)))
            t = t1
        self.next_t = t

    def fits(self, seg: Segment, buf, max_size: int) -> bool:
        return seg.path == self.seg.path and len(buf) == len(self.buf) and max_size == self.max_size

    def close(self, pool: bool = True) -> None:
        """Wait for the ranges still parsing (they read the map), close the map (and the pool unless the run
        took it over)."""
        _end_jobs(self.jobs)
        if pool:
            self.pool.shutdown(wait=True)
        if self._map is not None:
            self._map.__exit__(None, None, None)
            self._map = None


def prestart(segments: list[Segment], max_size: int, jobs: int | None = None,
             chunk_bytes: int | None = None, ranges: int | None = None) -> Prestart | None:
    """Start parsing the first segment's first ``ranges`` ranges (default: the workers + 2) now (see
    :class:`Prestart`); None where the lane would not use workers (no helper, one job, no segment) or the
    segment is one range. The ranges :func:`start_early` started are given instead when they are of the same
    file (path and size), range size and workers; otherwise they are ended here."""
    global _early
    early, _early = _early, None
    lib = native_lib()
    jobs = default_jobs() if jobs is None else max(1, jobs)
    chunk_bytes = CHUNK_BYTES if chunk_bytes is None else max(1, chunk_bytes)
    if early is not None:
        seg = segments[0] if segments else None
        if (lib is not None and seg is not None and seg.path == early.seg.path and seg.size == early.seg.size
                and (max_size, jobs, chunk_bytes) == (early.max_size, early.jobs_n, early.chunk_bytes)):
            return early
        early.close()
    if lib is None or jobs < 2 or not segments or segments[0].size <= chunk_bytes:
        return None         # (a segment of one range: nothing to overlap, and a small one would be read twice)
    try:
        return Prestart(lib, segments[0], max_size, jobs, chunk_bytes, ranges=ranges)
    except _Remote:
        return None


class _Remote(Exception):
    """A segment of a remote store: nothing is parsed ahead of the walk (see :class:`Prestart`)."""


# Ranges an early start parses ahead: about what the workers parse while click and the command load
# (~0.1 s of one core); each parsed range holds ~0.7 MB of records until the walk applies it.
EARLY_RANGES = 24
_early: Prestart | None = None


def start_early(path: str) -> None:
    """Before the command line is parsed (:func:`mqtool.entry.start_early`, a plain ``rebuild-index STORE``):
    the first ranges of the first segment of the RocketMQ store at ``path`` start parsing while the rest of
    the program loads. The run's :func:`prestart` takes them over when its first segment is that file;
    :func:`drop_early` ends them otherwise. Anything wrong here (no store, no helper) starts nothing: the run
    meets the problem in its own place. None of it changes the output (see :class:`Prestart`)."""
    global _early
    if _early is not None:
        return
    try:
        from mqtool.rocketmq.store import open_store

        _early = prestart(open_store(path).segments, F.DEFAULT_MAX_MESSAGE_SIZE, ranges=EARLY_RANGES)
    except Exception:                            # noqa: BLE001 - see above
        _early = None


def drop_early() -> None:
    """End the ranges :func:`start_early` started if no run took them over (wait for the running ones, unmap)."""
    global _early
    early, _early = _early, None
    if early is not None:
        early.close()


class SharedState:
    """The state the compiled loop shares with the Python writers (see ``mqtool/_native/rmqrebuild.c``): a queue
    slot per raw topic + queueId (``keymap``), each queue's current bytearray (``qbufs``), its int64 state
    (``qstate``: ``_QS_*`` per queue); the index state is copied in and out around a call (``istate``).

    ``res`` (the run's :class:`~mqtool.rocketmq.rebuild.replay.RebuildResult`) takes the counts of the units the
    loop dispatched; ``idx`` is the index writer (None when indexing is off)."""

    def __init__(self, lib, max_size: int, file_size: int, idx, res, jobs: int | None = None,
                 chunk_bytes: int | None = None, prestart: Prestart | None = None):
        self.lib, self.max_size, self.fs, self.idx, self.res = lib, max_size, file_size, idx, res
        self.keymap: dict[bytes, int] = {}
        self.qbufs: list = []
        self.qstate = array("q")
        self.istate = array("q", bytes(8 * _IS_N))
        self.no_slots, self.no_entries = array("i"), bytearray()
        self.jobs = default_jobs() if jobs is None else max(1, jobs)
        self.chunk_bytes = CHUNK_BYTES if chunk_bytes is None else max(1, chunk_bytes)
        self.plan: _Plan | None = None
        self.pool = None
        self.prestart = prestart                    # the next segment's first ranges, started early
        self.segments: list[Segment] = []           # the walk's segments (Replay.dispatch), for start_next
        if prestart is not None:
            if prestart.jobs_n == self.jobs:
                self.pool = prestart.pool
            else:
                prestart.close()
                self.prestart = None
        # where the chunks applied came from, and how many ranges were started early (tests, profiling)
        self.chunks = {"workers": 0, "here": 0, "early": 0}

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

    def _index_args(self):
        """(istate or None, slots, entries, ts) for a call of the helper, the current index file's state
        copied into ``istate``."""
        idx, istate = self.idx, self.istate
        f = idx.current if idx is not None else None
        if f is None:
            istate[0] = 0
            return (istate if idx is not None else None), self.no_slots, self.no_entries, None
        istate[0:_IS_N] = array("q", (1, f.index_count, f.index_num, f.slot_num, f.hash_slot_count, f.begin_ts,
                                      f.end_phy, f.end_ts))
        return istate, f.slots, f.entries, f.ts

    def _took(self, n: int, ncq: int, lts: int, lcts: int, mend: int, added: int) -> None:
        """Count what one call of the helper dispatched; the index state back into the current file."""
        res = self.res
        res.messages += n
        res.cq_units += ncq
        res.last_store_ts = lts
        if ncq:
            res.last_cq_ts = lcts
        if mend > res.max_offset:
            res.max_offset = mend
        if added:
            idx, istate = self.idx, self.istate
            f = idx.current
            f.index_count, f.hash_slot_count, f.end_phy, f.end_ts = istate[1], istate[4], istate[6], istate[7]
            idx.entries += added
            f.maybe_spill()

    @contextmanager
    def segment(self, seg: Segment, buf):
        """The ``segment_hook`` of :func:`iter_dispatch_records`: the plan of the segment's ranges for the
        two-step lane; on the way out every worker still reading ``buf`` is waited for."""
        if self.jobs > 1 and self.pool is None:
            from concurrent.futures import ThreadPoolExecutor   # (here: only a rebuild with workers needs it)
            self.pool = ThreadPoolExecutor(self.jobs, thread_name_prefix="mqtool-rebuild")
        self.plan = _Plan(self, buf, seg.base)
        pre, self.prestart = self.prestart, None
        if pre is not None and pre.fits(seg, buf, self.max_size):
            self.plan.adopt(pre)
        try:
            yield _ReleaseWindow
        finally:
            self.plan.close()
            self.plan = None
            if pre is not None:
                pre.close(pool=False)

    def start_next(self, base: int) -> None:
        """The plan of the segment at ``base`` has no more ranges: start the next segment's first ones (the
        workers would wait for the walk to arrive there otherwise). Where that segment cannot be mapped now,
        nothing is started: the walk meets the problem in its own place."""
        if self.prestart is not None or self.pool is None:
            return
        segs = self.segments
        for i, s in enumerate(segs[:-1]):
            if s.base == base and segs[i + 1].size > self.chunk_bytes:
                try:
                    self.prestart = Prestart(self.lib, segs[i + 1], self.max_size, self.jobs, self.chunk_bytes,
                                             self.pool, self.idx is not None)
                except Exception:                # noqa: BLE001 - see above
                    self.prestart = None
                return

    def close(self) -> None:
        if self.prestart is not None:           # never walked: the early ranges are dropped
            self.prestart.close(pool=False)
            self.prestart = None
        if self.pool is not None:
            self.pool.shutdown(wait=True)
            self.pool = None

    def lane(self, buf, pos: int, limit: int, end: int) -> int:
        """The ``lane`` of :func:`iter_dispatch_records` (inside :meth:`segment`): the records of the chunk that
        covers ``pos`` (a worker's, or parsed here) applied in order until ``limit``, a unit Python must
        dispatch, or the end of what the chunks say; returns where the walk goes on."""
        if self.plan is None or self.plan.buf is not buf:
            return pos                          # not the segment of the plan: Python dispatches
        return self._lane_chunks(buf, pos, limit, end)

    def _lane_chunks(self, buf, pos: int, limit: int, end: int) -> int:
        plan, apply = self.plan, self.lib.apply
        keymap, qbufs, qstate = self.keymap, self.qbufs, self.qstate
        while pos < limit:
            cur = plan.cur
            if cur is None or pos > cur.stop or (pos == cur.stop and cur.why in (_CH_LIMIT, _CH_FULL)):
                cur = plan.chunk_at(pos, end)
            istate, slots, entries, ts = self._index_args()
            (cur.cursor, npos, n, ncq, lts, lcts, mend, added, why) = apply(
                buf, cur.data, cur.cursor, pos, limit, cur.gslots, keymap, qbufs, qstate, istate, slots, entries,
                ts)
            if why == _AP_MISS:
                plan.cur = None                 # the walk is not at one of its units: a chunk from pos
                continue
            if n:
                self._took(n, ncq, lts, lcts, mend, added)
            elif npos == pos:
                break                           # nothing taken: the unit at pos is Python's
            pos = npos
            if why != _AP_EXHAUSTED or cur.why in (_CH_FRAME, _CH_DECLINE):
                break                           # the limit, or the unit at pos is Python's
        return pos

    def collect(self, qb) -> None:
        """Take back what the loop did to a queue (units appended, maxPhysicOffset) before it is finished."""
        if qb.slot >= 0:
            qb.units += self.qstate[qb.slot * _QS_N + _QS_UNITS]
            qb.max_phys = self.qstate[qb.slot * _QS_N + _QS_MAXPHYS]
