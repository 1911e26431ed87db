"""Walk commitlog segments unit by unit; find the end of data; resync past damage.

A segment's data ends at a BLANK unit, at the start of zero fill (preallocated files in crashed stores are
all zero; that is *not* corruption), or at the end of the file. Anything else that cannot be framed is damage:
the scanner reports the damaged byte range and resyncs to the next position where a unit validates — magic,
size bounds, the length computed from the fields, and either the stored PHYSICALOFFSET equal to the real
global offset or a valid body CRC (records shifted by inserted bytes keep their CRC).

Events yielded (all carry file and position):

* :class:`~mqtool.rocketmq.records.Message` / :class:`~mqtool.rocketmq.records.Blank`
* :class:`Damage` — bytes that could not be read as units, with the reason at the first bad byte
* :class:`End` — where data ends in this segment and what follows it
* :class:`FastRun` — only with a ``fast_lane``: clean units the lane consumed itself

The segment is mapped read-only and walked through a :class:`mqtool.pages.PageWindow`, so the resident size
stays bounded whatever the segment size.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterator

from formats import rocketmq as F
from mqtool import native
from mqtool.damage import Damage
from mqtool.errors import InputError
from mqtool.io import first_nonzero, last_nonzero, map_input, need, need_unit, ranged as _ranged, ranged_maps
from mqtool.pages import WINDOW, PageWindow, huge_backed, release
from mqtool.plainclass import dataclass
from mqtool.rocketmq import layout
from mqtool.rocketmq.store import Segment
from mqtool.rocketmq.records import (_SLICES_TO_BYTES, FIXED_NAMES, PREFIX, Blank, DecodeFailure, Message,
                                     decode_common, decode_message)

_V1 = F.MESSAGE_MAGIC_CODE_V1.to_bytes(4, "big", signed=True)
_V2 = F.MESSAGE_MAGIC_CODE_V2.to_bytes(4, "big", signed=True)
_BL = F.BLANK_MAGIC_CODE.to_bytes(4, "big", signed=True)
_MAGIC_V1, _MAGIC_V2 = F.MESSAGE_MAGIC_CODE_V1, F.MESSAGE_MAGIC_CODE_V2
_FAULT_AROUND = 64 << 10      # Linux maps up to this much around a faulting page of a file map
_unpack_prefix = PREFIX.unpack_from
_fstat = os.fstat

NATIVE_RUN = 256        # Message objects per helper call (a list of at most this many is alive at a time)
# The Message slots the helper sets, in the order rmqdecode.c takes them (every slot decode_common sets).
_NATIVE_SLOTS = ("file", "position", "offset", "size", "version", "body_crc", "queue_id", "flag", "queue_offset",
                 "physical_offset", "sys_flag", "born_timestamp", "_born_host", "store_timestamp", "_store_host",
                 "reconsume_times", "prepared_transaction_offset", "body_start", "body_len", "topic_raw",
                 "props_raw", "_buf", "_pairs", "crc_ok")
assert sorted(_NATIVE_SLOTS) == sorted(Message.__slots__), "rmqdecode must set every Message slot"
_native_state: dict[str, object] = {}


def native_layout() -> tuple[tuple[int, int], ...]:
    """(offset, size) of every field of :data:`layout.FIXED` (derived from ``formats.rocketmq.MessageV1``), in
    the order of ``FIXED_NAMES``: the layout the compiled core walks units with (:func:`layout.native_config`)."""
    return layout.at(FIXED_NAMES)


def native_decoder():
    """``rmqcore.decode.messages`` configured from the schema, or None (not built, switched off by
    ``MQTOOL_NATIVE``, or the layout refused: :func:`layout.native_core`): then the scanner decodes every unit
    in Python."""
    core = layout.native_core()
    mod = native.load("rmqdecode") if core is not None else None
    if mod is None:
        return None
    if _native_state.get("mod") is not mod:
        mod.configure(message_type=Message, slots=_NATIVE_SLOTS, v1="v1", v2="v2")
        _native_state["mod"] = mod
    return mod.messages


@dataclass
class FastRun:
    """``count`` messages from ``position`` to ``end_position`` were consumed by the scanner's ``fast_lane``."""
    file: str
    position: int
    end_position: int
    count: int
    kind = "fast-run"


@dataclass
class End:
    file: str
    position: int          # first byte after the data
    offset: int
    reason: str            # "blank" | "zero-fill" | "eof" | "unreadable"
    trailing_nonzero: int  # first non-zero byte position after the end (-1 if none)
    blank_size: int | None = None


class SegmentScanner:
    """Scan one segment (mapped read-only). Use :meth:`events`; ``check_crc`` controls body CRC checks.

    ``fast_lane(buf, view, pos, limit, end, base) -> (new_pos, count)``, when given, is offered the data before
    each unit: it may consume whole, valid message units starting before ``limit`` (a consumer's tight loop
    for the common case) and must stop at the first unit it does not fully handle; the scanner then yields a
    :class:`FastRun` for what it consumed and decodes the next unit itself as usual.

    Range mode (byte-range splits for ``--jobs`` and Spark, see :mod:`mqtool.rocketmq.ranges`): with
    ``start > 0`` the walk begins at the first position >= ``start`` where a unit validates (the same
    :meth:`_resync` rule as damage salvage) and that no decodable unit starting before it covers
    (:meth:`_range_start`); the skipped bytes belong to the previous range and yield nothing. With ``stop``
    set, the walk goes on past ``stop`` while it is not yet in step with where the next range begins (until
    it stands on that range's first unit): it reads a unit that straddles ``stop``,
    and also damage or unreadable units that begin at or after ``stop`` (which the next range skips), then
    ends without an :class:`End` event once it reaches the next range's first unit. The union of the events of consecutive
    ranges equals the events of one whole-segment walk.
    """

    def __init__(self, seg: Segment, max_size: int = F.DEFAULT_MAX_MESSAGE_SIZE, check_crc: bool = True,
                 start: int = 0, stop: int | None = None, fast_lane: Callable | None = None,
                 resync_start: bool = True):
        self.seg = seg
        self.resync_start = resync_start   # False: ``start`` is a known unit boundary, read (or report) it as is
        self.max_size = max_size
        self.check_crc = check_crc
        self.start = start
        self.stop = stop
        self.fast_lane = fast_lane

    def events(self) -> Iterator:
        return self._events(False)

    def message_runs(self) -> Iterator:
        """:meth:`events`, except that a run of messages the compiled decoder produced comes as one ``list`` of
        :class:`Message` (in order) instead of one event each, and the file-shrink check is made once per
        event of this stream -- before the scanner reads further, as :meth:`events` does, but not between the
        messages of a run (they were all read before the run is handed over). For :func:`iter_messages`."""
        return self._events(True)

    def _events(self, runs: bool) -> Iterator:
        seg = self.seg
        try:
            mi = map_input(seg.path, ranged=True)    # a remote file: fetched where read (need, PageWindow)
        except InputError as e:
            # FIFO, device, symlink loop, permission denied...: report the segment, go on with the others.
            yield Damage(seg.path, 0, seg.base, seg.size, "file-unreadable", f"cannot read segment: {e.message}")
            yield End(seg.path, 0, seg.base, "unreadable", -1)
            return
        with mi:
            buf = mi.buf
            view = memoryview(buf) if len(buf) else None
            mapped = mi.mapped
            fno, size = (mi.fileno(), len(buf)) if mapped else (-1, 0)
            try:
                for ev in self._walk(buf, view, mi, runs):
                    if mapped and mi.faulted():
                        # the walk read lost pages as zeros (the SIGBUS guard, mqtool.io): what it made of
                        # them since the last check is not the file's content; stop before handing it on
                        yield from self._changed(mi, ev)
                        return
                    yield ev
                    # mi.shrunk() inlined (one fstat per event, no Python calls around it)
                    if mapped:
                        try:
                            now = _fstat(fno).st_size
                        except (OSError, ValueError):
                            now = -1
                        if now >= size:
                            continue
                    if mi.shrunk():
                        # Reading on would touch pages that no longer exist (zeros, or SIGBUS unguarded): stop here.
                        yield from self._changed(mi, ev, after=True)
                        return
                if mi.changed() and not mi.mapped:
                    now = mi.current_size()
                    yield Damage(seg.path, len(buf), seg.base + len(buf), 0, "file-changed",
                                 f"the file changed size while being read ({len(buf)} -> {now} bytes); "
                                 "what was read is reported", len(buf), now)
            finally:
                if view is not None:
                    view.release()

    def _changed(self, mi, ev, after: bool = False) -> Iterator:
        """The file shrank while ``ev`` was read (``after``: after it was handed on): a file-changed damage at
        ``ev`` (the first unit of a run read from lost pages, the last of one handed on), and the End."""
        seg = self.seg
        if type(ev) is list:
            ev = ev[-1] if after else ev[0]
        pos = ev.position
        now = mi.current_size()
        yield Damage(seg.path, pos, seg.base + pos, 0, "file-changed",
                     f"the file shrank to {now} bytes while being read; stopped here", len(mi.buf), now)
        yield End(seg.path, pos, seg.base + pos, "eof", -1)

    def _walk(self, buf, view, mi, runs: bool = False) -> Iterator:
        seg = self.seg
        fd = mi.fileno() if mi.mapped else None
        file, base, end = seg.path, seg.base, len(buf)
        pos = self.start
        stop = end if self.stop is None else self.stop
        if pos > 0 and self.resync_start:
            # the first unit that starts in [start, stop); none: every unit here belongs to the walk of an
            # earlier range (searching only up to ``stop`` keeps ranges over zero fill cheap)
            pos = self._range_start(buf, view, pos, end, stop) if pos < min(stop, end) else None
            if pos is None:
                return
        max_size, check_crc = self.max_size, self.check_crc
        lane = self.fast_lane
        # the compiled decoder (when there is no lane): runs of common units straight to Message objects
        dec = native_decoder() if lane is None and type(buf) in _SLICES_TO_BYTES else None
        # a lane that reads the file itself (``reads_fd``): the map is only read where the lane stops (a remote
        # file's shadow is read through the map, whose windows fetch what they cover: mqtool.io.need)
        lane_fd = fd if (lane is not None and fd is not None and getattr(lane, "reads_fd", False)
                         and not _ranged(buf)) else -1
        if lane_fd >= 0 and _huge_backed_file(lane_fd, buf, pos, min(stop, end)):
            lane_fd = -1                    # huge pages: the map costs less than the copies (mqtool.pages)
        # bounded RSS (mqtool.pages); a unit may end past stop
        win = PageWindow(buf, pos, WINDOW, min(stop, end) + (1 << 20), max_size, populate=lane_fd < 0)
        while pos < end:
            if pos >= stop and self._range_start(buf, view, stop, end, pos + 1) is not None:
                return      # in step with the next range: the unit it starts from lies in [stop, pos] (at pos)
            if pos >= win.next_at:
                win.advance(pos)
            if lane is not None and pos < stop:
                npos, n = (lane(buf, view, pos, min(stop, win.next_at), end, base, lane_fd) if lane_fd >= 0
                           else lane(buf, view, pos, min(stop, win.next_at), end, base))
                if n:
                    yield FastRun(file, pos, npos, n)
                    pos = npos
                    continue
            elif dec is not None and pos < stop:
                npos, run = dec(buf, pos, min(stop, win.next_at), end, base, file, max_size, check_crc, NATIVE_RUN)
                if run:
                    if runs:
                        yield run
                    else:
                        yield from run
                    pos = npos
                    continue
            m = decode_common(buf, pos, end, base, file, max_size, check_crc, view)
            if m is not None:                # the common unit, decoded in one go
                yield m
                pos += m.size
                continue
            if end - pos < 8:
                if buf[pos:end].count(0) == end - pos:
                    yield End(file, pos, base + pos, "eof", -1)
                    return
                yield Damage(file, pos, base + pos, end - pos, "truncated-record",
                             f"{end - pos} trailing bytes, too few for a unit")
                yield End(file, end, base + end, "eof", -1)
                return
            head = buf[pos:pos + 8]
            if head == b"\x00" * 8:
                nz = first_nonzero(buf, pos, end, fd)
                # a unit's first non-zero byte is inside its 4-byte TOTALSIZE: it starts at most 3 bytes earlier
                nxt = None if nz < 0 else self._resync(buf, view, max(pos + 1, nz - 3), end)
                if nxt is None:
                    yield End(file, pos, base + pos, "zero-fill", nz)
                    return
                yield Damage(file, pos, base + pos, nxt - pos, "zeroed-range",
                             f"{nxt - pos} zero bytes inside the data, valid units follow at position {nxt}")
                pos = nxt
                continue
            if head[4:8] == _BL:
                size = int.from_bytes(head[0:4], "big", signed=True)
                yield Blank(file, pos, base + pos, size)
                tail = first_nonzero(buf, pos + 8, end, fd)
                yield End(file, pos, base + pos, "blank", tail, blank_size=size)
                return
            try:
                m = decode_message(buf, pos, end, base, file, max_size, check_crc, view)
            except DecodeFailure as f:
                nxt = self._resync(buf, view, pos + 1, end)
                if nxt is None:
                    # nothing valid follows: the damage ends where the zero fill (if any) begins
                    last = last_nonzero(buf, pos, end, fd)
                    stop_at = max(last + 1, pos + 1)
                    yield Damage(file, pos, base + pos, stop_at - pos, f.code, f.message, f.expected, f.actual)
                    if end - stop_at >= 8:
                        yield End(file, stop_at, base + stop_at, "zero-fill", -1)
                    else:
                        yield End(file, end, base + end, "eof", -1)
                    return
                yield Damage(file, pos, base + pos, nxt - pos, f.code, f.message, f.expected, f.actual)
                pos = nxt
                continue
            yield m
            pos += m.size
        if pos >= end:
            yield End(file, end, base + end, "eof", -1)

    def _range_start(self, buf, view, start: int, end: int, limit: int) -> int | None:
        """Where the walk of a range that begins at ``start`` starts: the first position in [start, limit)
        where a unit validates (:meth:`_resync`) and that no decodable unit starting before it covers.

        A unit that an earlier unit overlaps (bytes deleted inside that earlier unit shift the next one into
        it) is never where the whole-segment walk goes: it reads the earlier unit, then reports damage from
        that unit's end. A walk cannot step over a position chosen by this rule (it moves to the end of a
        decoded unit, which would cover it, or to the next unit that validates), so the walk of the previous
        range arrives exactly here and stops: the ranges' events, in order, are the whole walk's."""
        lo = start
        while lo < limit:
            p = self._resync(buf, view, lo, end, limit=limit)
            if p is None or not self._covered(buf, view, p, end):
                return p
            lo = p + 1
        return None

    def _covered(self, buf, view, p: int, end: int) -> bool:
        """True when a unit that decodes (CRC aside) starts in [p - max_size, p) and ends after ``p``."""
        base, path, max_size = self.seg.base, self.seg.path, self.max_size
        lo = max(0, p - max_size)
        need(buf, lo, p - lo + max_size)        # a remote file: the bytes this search reads
        mod = _native_state.get("mod") if native_decoder() is not None else None     # (configured by that call)
        if mod is not None and type(buf) in _SLICES_TO_BYTES:
            for c in mod.covering(buf, lo, p, max_size):        # candidates; the decode decides
                try:
                    decode_message(buf, c, end, base, path, max_size, False, view)
                    return True
                except DecodeFailure:
                    pass
            return False
        for pat in (_V1, _V2):
            i = buf.find(pat, lo + 4, p + 4)
            while i >= 0:
                c = i - 4
                if c < p and c + int.from_bytes(buf[c:c + 4], "big", signed=True) > p:
                    try:
                        decode_message(buf, c, end, base, path, max_size, False, view)
                        return True
                    except DecodeFailure:
                        pass
                i = buf.find(pat, i + 1, p + 4)
        return False

    def _resync(self, buf, view, start: int, end: int, limit: int | None = None) -> int | None:
        """Next position >= start (and < ``limit`` when given) where a unit validates (see module doc), or
        None. Searches in growing windows, so a magic code that never occurs does not cost a scan to the
        end of the file each time."""
        top = end if limit is None else min(end, limit)
        lo, width = start, 1 << 16
        while lo < top:
            hi = min(top, lo + width)
            need(buf, lo, hi - lo + self.max_size + 8)      # a remote file: the bytes this search reads
            cand = self._resync_window(buf, view, lo, hi, end)
            if cand is not None:
                return cand
            lo, width = hi, min(width * 2, 1 << 26)
        return None

    def _resync_window(self, buf, view, lo: int, hi: int, end: int) -> int | None:
        """First valid unit at a position in [lo, hi) (its magic code lies at position + 4)."""
        base = self.seg.base
        fhi = min(end, hi + 7)
        nexts = {}
        for pat in (_V1, _V2, _BL):
            nexts[pat] = buf.find(pat, lo + 4, fhi) if lo + 4 < fhi else -1
        while True:
            live = [(v, k) for k, v in nexts.items() if v >= 0]
            if not live:
                return None
            found, pat = min(live)
            cand = found - 4
            if cand >= lo and self._valid_at(buf, view, cand, end, pat, base):
                return cand
            nexts[pat] = buf.find(pat, found + 1, fhi)

    def _valid_at(self, buf, view, p: int, end: int, pat: bytes, base: int) -> bool:
        size = int.from_bytes(buf[p:p + 4], "big", signed=True)
        if pat == _BL:
            return size == end - p and size >= F.END_FILE_MIN_BLANK_LENGTH
        try:
            m = decode_message(buf, p, end, base, self.seg.path, self.max_size, True, view)
        except DecodeFailure:
            return False
        return m.physical_offset == base + p or bool(m.crc_ok)


def scan_store_segments(segments: list[Segment], **kw) -> Iterator:
    for seg in segments:
        yield from SegmentScanner(seg, **kw).events()


def iter_messages(segments: list[Segment], from_offset: int | None = None, to_offset: int | None = None,
                  max_size: int = F.DEFAULT_MAX_MESSAGE_SIZE, check_crc: bool = True,
                  include_blank: bool = False, on_damage=None) -> Iterator:
    """Messages (and BLANKs when asked) in offset order; damage goes to ``on_damage(Damage)``.

    ``from_offset`` skips whole segments that end before it and units that start before it.
    """
    for seg in segments:
        if from_offset is not None and seg.base + seg.size <= from_offset:
            continue
        if to_offset is not None and seg.base >= to_offset:
            break
        if not (yield from select_events(SegmentScanner(seg, max_size=max_size, check_crc=check_crc).message_runs(),
                                         from_offset, to_offset, include_blank, on_damage)):
            return


def select_events(events, from_offset, to_offset, include_blank, on_damage) -> Iterator:
    """Messages (and BLANKs when asked) of scanner ``events`` inside [from_offset, to_offset); damage goes to
    ``on_damage``. Returns False once ``to_offset`` is passed (nothing later can match). A ``list`` event is a
    run of messages (:meth:`SegmentScanner.message_runs`)."""
    for ev in events:
        if type(ev) is list:
            if from_offset is None and to_offset is None:
                yield from ev
                continue
            for m in ev:
                if from_offset is not None and m.offset < from_offset:
                    continue
                if to_offset is not None and m.offset >= to_offset:
                    return False
                yield m
            continue
        if type(ev) is Message and from_offset is None and to_offset is None:    # the common case
            yield ev
            continue
        if isinstance(ev, End):
            continue
        if from_offset is not None and ev.offset < from_offset:
            continue
        if to_offset is not None and ev.offset >= to_offset:
            return False
        if isinstance(ev, Message):
            yield ev
        elif isinstance(ev, Blank):
            if include_blank:
                yield ev
        elif isinstance(ev, Damage) and on_damage is not None:
            on_damage(ev)
    return True


class CommitLogReader:
    """Random access to single messages by global offset (segments mapped read-only on first use)."""

    def __init__(self, segments: list[Segment], max_size: int = F.DEFAULT_MAX_MESSAGE_SIZE):
        import bisect

        self._bisect = bisect.bisect_right
        self.segments = segments
        self.bases = [s.base for s in segments]
        self.max_size = max_size
        self._maps: dict[int, object] = {}
        self._read = 0            # bytes mapped in since the maps' pages were last released (bounded RSS)
        self._dec = native_decoder()    # the compiled decode_common (tested equal to it), or None

    @property
    def end_offset(self) -> int:
        """Global offset just past the last byte on disk (not the end of data)."""
        return self.segments[-1].end if self.segments else 0

    def locate(self, offset: int) -> tuple[Segment, int] | None:
        i = self._bisect(self.bases, offset) - 1
        if i < 0:
            return None
        seg = self.segments[i]
        if offset >= seg.end:
            return None
        return seg, offset - seg.base

    def _buf(self, seg: Segment):
        m = self._maps.get(seg.base)
        if m is None:
            m = self._maps[seg.base] = map_input(seg.path, ranged=True)     # remote: need() before reads
        if m.shrunk():       # a mapped file truncated under us: reading on could fault (SIGBUS)
            raise DecodeFailure("file-changed", f"{seg.path} shrank to {m.current_size()} bytes while being read")
        return m.buf

    def message_at(self, offset: int, check_crc: bool = True) -> Message:
        """The message that starts at ``offset``; raises DecodeFailure (code ``no-such-offset`` when the offset
        is outside every segment). ``check_crc=False``: ``crc_ok`` is not computed (None) — for callers that
        check what points at a message, whose bodies the commitlog pass checks."""
        loc = self.locate(offset)
        if loc is None:
            raise DecodeFailure("no-such-offset", f"offset {offset} is outside the commitlog files")
        seg, pos = loc
        try:
            buf = self._buf(seg)          # DecodeFailure("file-changed") passes through
            if ranged_maps:     # a remote file: fetch this unit's chunks
                need_unit(buf, pos, cap=self.max_size)
        except InputError as e:
            raise DecodeFailure("file-unreadable", f"cannot read {seg.path}: {e.message}") from None
        try:
            run = None
            if self._dec is not None and type(buf) in _SLICES_TO_BYTES:
                run = self._dec(buf, pos, pos + 1, len(buf), seg.base, seg.path, self.max_size, check_crc, 1)[1]
            # the common unit by the compiled decoder; anything else (and every failure's reason) in Python
            m = run[0] if run else decode_message(buf, pos, len(buf), seg.base, seg.path, self.max_size, check_crc)
        finally:
            mi = self._maps[seg.base]
            if mi.faulted():     # read lost pages (zeros, see mqtool.io): the file shrank meanwhile
                raise DecodeFailure("file-changed", f"{seg.path} shrank to {mi.current_size()} bytes while being read")
        # each access may map a 64 KB fault-around block: count accesses as well as bytes
        self._read += m.size + _FAULT_AROUND
        if self._read >= 4 * WINDOW:      # each release walks the whole map: not too often
            self._read = 0
            for mi in self._maps.values():
                release(mi.buf)
        return m

    def close(self) -> None:
        for m in self._maps.values():
            m.close()
        self._maps.clear()


def damage_note(d: Damage) -> str:
    """The stderr note for a damaged range met by dump/query."""
    return f"{d.file}@{d.position} (offset {d.offset}): {d.code}: {d.message}; skipped {d.length} bytes"


_huge_files: dict = {}          # (dev, inode, size, mtime) -> huge_backed: asked once a file, not once a range


def _huge_backed_file(fd: int, buf, pos: int, end: int) -> bool:
    """:func:`mqtool.pages.huge_backed` for the file open at ``fd``, asked at the first walk over it."""
    st = os.fstat(fd)
    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    if key not in _huge_files:
        _huge_files[key] = huge_backed(buf, pos, end)
    return _huge_files[key]
