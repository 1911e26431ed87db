"""``mqtool verify`` for RocketMQ stores: every check yields a Finding; nothing stops at the first one.

Checks (reference §1, §3–§8):

* commitlog: segment names/sizes/gaps; per unit magic, size bounds (before any allocation), TOTALSIZE against
  the field lengths, body CRC, a compressed body inflates (``body-inflate-failed``), stored PHYSICALOFFSET against the real offset (stale or shifted data), BLANK
  placement and size, properties, the 5.x ``__CRC32#`` whole-message CRC, queue-offset continuity per queue for
  dispatched messages, what lies after the end of data; damaged ranges are skipped by resync and counted;
* consumequeue: every unit against the message it points at (start, size, topic, queue, queue offset, tagsCode),
  holes, dangling units, queues behind the commitlog, file naming and sizes, LMQ multi-dispatch;
* index: header against entries, entries against messages (start, key hash, time), slot and chain sanity
  (ranges, cycles, bucket), files newer than the checkpoint;
* store: abort marker, checkpoint against the data (``checkpoint-negative``, ``checkpoint-future``,
  ``checkpoint-beyond-log-end``, ``checkpoint-ahead``/``-behind``), config files and their ``.bak``.
"""
from __future__ import annotations

import dataclasses
import os
import zlib
from pathlib import Path
from typing import Iterator

from formats import rocketmq as F
from mqtool import codecs, native
from mqtool.errors import InputError, NotAStoreError
from mqtool.findings import (BORN_AFTER_STORE_MS, BORN_BEFORE_STORE_MS, ERROR, INFO, WARNING, Finding, Summary,
                             born_finding, born_plausible, checkpoint_value_problems)
from mqtool.options import VerifyOptions
from mqtool.progress import progress
from mqtool.rocketmq import dispatch, indexfiles
from mqtool.rocketmq.store import RocketStore, cq_filter, segment_gaps
from mqtool.rocketmq.records import Blank, DecodeFailure, Message
from mqtool.fastcrc import crc32
from mqtool.rocketmq.scan import CommitLogReader, Damage, End, FastRun, SegmentScanner
from mqtool.ranges import PARALLEL_MIN_BYTES, split_segments
from mqtool.rocketmq import layout
from mqtool.rocketmq import ranges as _ranges
from mqtool.rocketmq.ranges import FAMILY, NATIVE_VERIFY_PARALLEL_MIN_BYTES, ROW_TASK_SPLIT, _plain, _segment
from mqtool.schema_struct import field_offsets

_CRC_TAG = (F.PROPERTY_CRC32 + F.NAME_VALUE_SEPARATOR).encode()
class _Ctx:
    """Shared state of one verify run."""

    def __init__(self, store: RocketStore, opts: VerifyOptions):
        self.store = store
        self.opts = opts
        self.summary = Summary()
        self.aborted = bool(store.abort)
        # per (topic, queue): highest queue offset a dispatched message claims (+1) and how many we saw
        self.dispatched_next: dict[tuple[str, int], int] = {}
        self.last_store_ts = 0
        self.data_end: int | None = None       # global offset where commitlog data ends
        self.salvage = None

    def f(self, severity, code, file, position, offset, message, expected=None, actual=None,
          span=None) -> Finding:
        fd = Finding(severity, code, file, position, offset, message, expected, actual, span)
        self.summary.add(fd)
        return fd


def verify_store(store: RocketStore, part: str, opts: VerifyOptions):
    """Returns (findings iterator, summary function) per the engine contract."""
    nothing = not (store.segments or store.consumequeue_dir or store.cq_file or store.index_files
                   or store.checkpoint or store.config_dir)
    if nothing:
        raise NotAStoreError("nothing to verify here (no commitlog, consumequeue, index, checkpoint or config)",
                             store.path)
    ctx = _Ctx(store, opts)

    def run() -> Iterator[Finding]:
        if opts.salvage_out:
            ctx.salvage = _Salvage(opts.salvage_out, store, opts.force)
        complete = False
        try:
            if part in ("store", "commitlog"):
                yield from _verify_commitlog(ctx)
            elif part in ("consumequeue", "index"):
                yield from _scan_for_dispatch(ctx)
            if part in ("store", "consumequeue"):
                yield from _verify_consumequeue(ctx)
            if part in ("store", "index"):
                yield from _verify_index(ctx)
            if part == "store":
                yield from _verify_store_files(ctx)
            complete = True
        finally:
            if ctx.salvage is not None:
                # an interrupted run (error, Ctrl-C, consumer gone) discards its temp file: no half-written
                # salvage file ever appears under the final name
                ctx.salvage.close(commit=complete)
                ctx.summary.extra["salvaged"] = ctx.salvage.count
                ctx.summary.extra["salvage_file"] = ctx.salvage.path if complete else None

    return run(), lambda: ctx.summary


# ---- commitlog ------------------------------------------------------------------------------------

def _verify_segments_layout(ctx: _Ctx) -> Iterator[Finding]:
    segs = ctx.store.segments
    if not segs:
        return
    sizes = [s.size for s in segs]
    common = max(set(sizes[:-1]), key=sizes.count) if len(segs) > 1 else sizes[0]
    gaps = segment_gaps(segs)
    for i, s in enumerate(segs):
        last = i == len(segs) - 1
        if s.size == 0:
            yield ctx.f(INFO if last else ERROR, "segment-empty", s.path, 0, s.base,
                        "empty segment file" + (" (the broker deletes a 0-byte last file at start)" if last else ""))
        elif s.size != common:
            yield ctx.f(ERROR, "segment-size", s.path, 0, s.base,
                        f"segment is {s.size} bytes, the others are {common} (the broker refuses to load this)",
                        common, s.size, span=(s.base + s.size, s.base + common) if s.size < common else None)
        if i:
            prev = segs[i - 1]
            if (prev, s) in gaps:
                yield ctx.f(ERROR, "segment-missing", s.path, 0, s.base,
                            f"gap of {s.base - prev.end} bytes before this segment: a segment file is missing "
                            f"between {prev.name} and {s.name}"
                            + (" (or that one was truncated)" if prev.size != common else ""), prev.end, s.base,
                            span=(prev.end, s.base))
            elif s.base < prev.end:
                yield ctx.f(ERROR, "segment-overlap", s.path, 0, s.base,
                            f"segment starts inside the previous one ({prev.name} ends at {prev.end})",
                            prev.end, s.base)
    if segs[0].base % max(common, 1) and common:
        yield ctx.f(WARNING, "segment-name", segs[0].path, 0, segs[0].base,
                    f"first segment name {segs[0].base} is not a multiple of the segment size {common}")


def _scan_for_dispatch(ctx: _Ctx) -> Iterator[Finding]:
    """Light commitlog pass (no CRC, no findings) so queue/index checks know what was dispatched (a runner
    with ``dispatch_pass`` does it: the distributed verify)."""
    hook = getattr(ctx.opts.runner, "dispatch_pass", None)
    if hook is not None:
        hook(ctx)
        return
    for seg in ctx.store.segments:
        for ev in SegmentScanner(seg, max_size=ctx.opts.max_message_size, check_crc=False).events():
            if isinstance(ev, Message):
                _note_dispatch(ctx, ev)
            elif isinstance(ev, End):
                ctx.data_end = ev.offset
    return
    yield  # pragma: no cover


def _note_dispatch(ctx: _Ctx, m: Message) -> tuple[str, int] | None:
    """Record what the broker's dispatcher does with ``m``; returns its (topic, queue) when dispatched."""
    if m.store_timestamp > ctx.last_store_ts:
        ctx.last_store_ts = m.store_timestamp
    txn = m.sys_flag & F.TRANSACTION_MASK
    if txn in (F.TRANSACTION_PREPARED_TYPE, F.TRANSACTION_ROLLBACK_TYPE):
        return None
    key = (m.topic, m.queue_id)
    step = 1
    if m.sys_flag & F.INNER_BATCH_FLAG:
        try:
            step = max(1, int(m.prop("INNER_NUM") or 1))
        except ValueError:
            step = 1
    nxt = m.queue_offset + step
    if nxt > ctx.dispatched_next.get(key, 0):
        ctx.dispatched_next[key] = nxt
    if F.PROPERTY_INNER_MULTI_DISPATCH.encode() in m.props_raw:
        for q, off in _lmq_targets(m):
            k = (q, 0)
            if off + 1 > ctx.dispatched_next.get(k, 0):
                ctx.dispatched_next[k] = off + 1
    return key


def _lmq_targets(m: Message) -> list[tuple[str, int]]:
    disp = m.prop(F.PROPERTY_INNER_MULTI_DISPATCH)
    offs = m.prop(F.PROPERTY_INNER_MULTI_QUEUE_OFFSET)
    if not disp or offs is None:
        return []
    queues = disp.split(F.LMQ_DISPATCH_SEPARATOR)
    try:
        offsets = [int(x) for x in offs.split(F.LMQ_DISPATCH_SEPARATOR)]
    except ValueError:
        return []
    return [(q, o) for q, o in zip(queues, offsets) if q.startswith(F.LMQ_PREFIX)]


def _verify_commitlog(ctx: _Ctx) -> Iterator[Finding]:
    store, opts = ctx.store, ctx.opts
    if not store.segments:
        if store.commitlog_dir:
            yield ctx.f(WARNING, "commitlog-empty", store.commitlog_dir, None, None, "no commitlog segment files")
        return
    yield from _verify_segments_layout(ctx)
    if opts.jobs != 1 or getattr(opts, "runner", None) is not None:
        if (yield from verify_commitlog_ranges(ctx)):
            return
    expected_next: dict[tuple[str, int], int] = {}
    ctx.shift = 0
    lane = _fast_lane(ctx, expected_next) if ctx.salvage is None and USE_FAST_LANE else None
    total = sum(s.size for s in store.segments)
    done = 0
    # A segment that ends in zero fill without BLANK is only suspicious if a later segment holds data:
    # brokers preallocate the next (all-zero) file ahead of time. Hold such findings until we know.
    pending: list[Finding] = []
    with progress(total, "verify commitlog", enabled=opts.progress) as bar:
        for si, seg in enumerate(store.segments):
            last_seg = si == len(store.segments) - 1
            saw_blank = False
            has_data = False
            for ev in SegmentScanner(seg, max_size=opts.max_message_size, check_crc=True,
                                     fast_lane=lane).events():
                if isinstance(ev, FastRun):     # clean messages, already checked by the lane
                    if not has_data:
                        has_data = True
                        yield from _flush_pending(ctx, pending)
                    continue
                if isinstance(ev, Message):
                    if not has_data:
                        has_data = True
                        yield from _flush_pending(ctx, pending)
                    ctx.summary.messages += 1
                    yield from _check_message(ctx, ev, expected_next)
                    delta = ev.physical_offset - ev.offset
                    if delta != ctx.shift:
                        if delta:
                            yield _shift_finding(ctx, delta, ev.file, ev.position, ev.offset, ev.physical_offset)
                        ctx.shift = delta
                    if ctx.salvage is not None:
                        ctx.salvage.add(ev)
                elif isinstance(ev, Blank):
                    saw_blank = True
                    yield from _blank_findings(ctx, ev, seg.size, last_seg)
                elif isinstance(ev, Damage):
                    if not has_data:
                        has_data = True
                        yield from _flush_pending(ctx, pending)
                    ctx.summary.skipped_ranges += 1
                    ctx.summary.skipped_bytes += ev.length
                    yield _damage_finding(ctx, ev)
                elif isinstance(ev, End):
                    yield from _check_end(ctx, seg, ev, last_seg, saw_blank, has_data, pending)
            done += seg.size
            bar.update_to(done)
    for fd in pending:      # only preallocated, never-written segments followed: normal
        yield ctx.f(INFO, "zero-fill", fd.file, fd.position, fd.offset,
                    "data ends here; the following segment(s) are preallocated and empty")


USE_FAST_LANE = True      # tests turn it off to compare the two paths
# Fields the fast lane needs, unpacked from the schema-derived fixed part (the others are skipped as pad bytes).
_LANE_FIELDS = ["TOTALSIZE", "MAGICCODE", "BODYCRC", "QUEUEID", "QUEUEOFFSET", "PHYSICALOFFSET", "SYSFLAG",
                "BORNTIMESTAMP", "STORETIMESTAMP", "BODYLENGTH"]
_LANE = layout.narrow(_LANE_FIELDS)
# sysFlag bits whose messages take the full path: IPv6 hosts, PREPARED/ROLLBACK (0x4 bit), inner batch, and
# compressed bodies (the full path inflates them: a CRC over the stored bytes does not prove they inflate)
_LANE_DECLINE = (F.BORNHOST_V6_FLAG | F.STOREHOSTADDRESS_V6_FLAG | F.TRANSACTION_PREPARED_TYPE | F.INNER_BATCH_FLAG
                 | F.COMPRESSED_FLAG)
_MULTI_DISPATCH = F.PROPERTY_INNER_MULTI_DISPATCH.encode()


_native_state: dict[str, object] = {}


def _native_lane(crc=layout.CRC_KEEP):
    """The compiled lane (``rmqcore.verify``, ``mqtool/_native/rmqverify.c``) configured, or None (not built,
    switched off by ``MQTOOL_NATIVE``, or a layout the core refuses: :func:`layout.native_core`).

    The core walks units with the layout :mod:`mqtool.rocketmq.layout` gives it by field name (the fixed part,
    the TOPICLENGTH / PROPERTIESLENGTH widths; it refuses a layout of another fingerprint) and checks each
    body's CRC-32: "auto" (the default) calls ISA-L back per body when installed (faster than the C
    slicing-by-8 table loop, measured: see docs/performance.md), else the core's own slicing-by-8 (no call per
    body); tests pass ``crc`` None for the built-in one, and "auto" to go back. The lane's own options go by
    name.
    """
    if layout.native_core(crc) is None:
        return None
    mod = native.load("rmqverify")
    if mod is not None and _native_state.get("mod") is not mod:
        try:
            mod.configure(versions=(F.MESSAGE_MAGIC_CODE_V1,), decline_flags=_LANE_DECLINE,
                          crc_tail=F.CRC32_RESERVED_LEN, crc_tag=_CRC_TAG, multi_dispatch=_MULTI_DISPATCH,
                          born_before=BORN_BEFORE_STORE_MS, born_after=BORN_AFTER_STORE_MS)
        except (ValueError, TypeError, OverflowError):    # options the C lane refuses: use the Python lane
            return None
        _native_state["mod"] = mod
    return mod


def _fast_lane(ctx: _Ctx, expected_next: dict, known_queues_only: bool = False):
    """The commitlog check for the common message, as one tight loop (see ``SegmentScanner``).

    It consumes a unit only when the full path (decode + :func:`_check_message` + the offset-shift check)
    would report nothing for it and would change the state the same way: v1 magic, IPv4 hosts, every length
    consistent, body CRC right, topic and properties UTF-8, no ``__CRC32#`` tail, not PREPARED/ROLLBACK, no
    inner batch or multi-dispatch, PHYSICALOFFSET off by the current shift, queue offset the expected one. It
    stops at anything else, and the scanner hands that unit to the full path. ``tests/test_rocketmq_fastpath.py``
    checks both give the same findings.

    ``known_queues_only`` (the range tasks of ``--jobs``): the first message of a queue in the range takes the
    full path, which records the ("qoff", ...) marker the merge needs; so does every unit while ``ctx.shift``
    is None (before the range's first message, which records the ("shift", ...) marker).
    """
    min_size, max_size = F.MIN_MESSAGE_SIZE, ctx.opts.max_message_size
    summary = ctx.summary
    dispatched = ctx.dispatched_next
    nat = _native_lane()
    if nat is not None:
        scan = nat.scan

        def native_lane(buf, view, pos, limit, end, base):
            if ctx.shift is None:
                return pos, 0
            npos, n, last_ts = scan(buf, pos, limit, end, ctx.shift + base, max_size, ctx.last_store_ts,
                                    expected_next, dispatched, known_queues_only)
            if n:
                ctx.last_store_ts = last_ts
                summary.messages += n
            return npos, n

        return native_lane
    unpack = _LANE.unpack_from
    fixed = _LANE.size
    v1 = F.MESSAGE_MAGIC_CODE_V1
    names: dict[bytes, str] = {}
    crc_tag, multi, crc_tail = _CRC_TAG, _MULTI_DISPATCH, F.CRC32_RESERVED_LEN
    frame, tl_size, failure = layout.frame_tail, layout.TOPIC_LENGTH_SIZE["v1"], layout.DecodeFailure

    def lane(buf, view, pos, limit, end, base):
        start = pos
        if ctx.shift is None:
            return start, 0
        shift = ctx.shift + base          # PHYSICALOFFSET - position of every clean unit here
        last_ts = ctx.last_store_ts
        queues: dict[tuple[bytes, int], list] = {}   # (topic bytes, queue) -> [(topic, queue), next offset]
        qget = queues.get
        crc = crc32
        n = 0
        limit = min(limit, end - fixed + 1)          # pos < limit: a whole fixed part is there
        while pos < limit:
            total, magic, body_crc, qid, qoff, phys, sys_flag, born_ts, store_ts, blen = unpack(buf, pos)
            if not born_plausible(born_ts, store_ts):
                break
            stop = pos + total
            p = pos + fixed + blen                   # TOPICLENGTH (v1 only: v2 takes the full path)
            if magic != v1 or total < min_size or stop > end or total > max_size or sys_flag & _LANE_DECLINE \
                    or phys - pos != shift or blen < 0:
                break
            try:
                tp, tl, pp = frame(buf, pos, p, stop, tl_size)
            except failure:
                break
            if crc(view[pos + fixed:p]) & 0x7FFFFFFF != body_crc:
                break
            props = buf[pp:stop]
            if multi in props or props.find(crc_tag, -crc_tail) >= 0:
                break
            if not props.isascii():
                try:
                    props.decode("utf-8")
                except UnicodeDecodeError:
                    break
            qk = (buf[tp:tp + tl], qid)
            q = qget(qk)
            if q is None:
                topic = names.get(qk[0])
                if topic is None:
                    try:
                        topic = names[qk[0]] = qk[0].decode("utf-8")
                    except UnicodeDecodeError:
                        break
                key = (topic, qid)
                if known_queues_only and key not in expected_next:
                    break
                q = queues[qk] = [key, expected_next.get(key)]
            exp = q[1]
            if exp != qoff and exp is not None:
                break
            q[1] = qoff + 1
            if store_ts > last_ts:
                last_ts = store_ts
            n += 1
            pos = stop
        for key, nxt in queues.values():
            if nxt is not None:
                expected_next[key] = nxt
                if nxt > dispatched.get(key, 0):
                    dispatched[key] = nxt
        if n:
            ctx.last_store_ts = last_ts
            summary.messages += n
        return (pos, n) if n else (start, 0)

    return lane


def _flush_pending(ctx: _Ctx, pending: list) -> Iterator[Finding]:
    for fd in pending:
        ctx.summary.add(fd)
        yield fd
    pending.clear()


def _check_end(ctx: _Ctx, seg, ev: End, last_seg: bool, saw_blank: bool, has_data: bool,
               pending: list) -> Iterator[Finding]:
    if ev.reason == "zero-fill":
        if has_data:
            ctx.data_end = ev.offset
        if last_seg:
            what = ("preallocated segment, never written" if ev.position == 0 else
                    f"data ends at position {ev.position}; the rest ({seg.size - ev.position} bytes) is zero fill")
            yield ctx.f(INFO, "zero-fill", ev.file, ev.position, ev.offset, what)
        elif has_data:
            pending.append(Finding(WARNING, "missing-blank", ev.file, ev.position, ev.offset,
                                   "segment ends in zero fill without a BLANK unit, yet later segments hold data "
                                   "(the broker always closes a full segment with BLANK)"))
        else:
            yield ctx.f(WARNING, "segment-unused", ev.file, 0, seg.base,
                        "an all-zero segment between others: its data was lost or never written")
    elif ev.reason == "eof":
        if has_data or last_seg:
            ctx.data_end = ev.offset     # later segments with data move it on
        if not saw_blank and not last_seg:
            pending.append(Finding(WARNING, "missing-blank", ev.file, ev.position, ev.offset,
                                   "segment has no BLANK end unit, yet later segments hold data"))
    elif ev.reason == "blank":
        ctx.data_end = seg.end
    if ev.trailing_nonzero >= 0:
        yield ctx.f(WARNING, "data-after-end", ev.file, ev.trailing_nonzero, seg.base + ev.trailing_nonzero,
                    "non-zero bytes after the end of data (stale data from a truncation or reuse)")


def _check_message(ctx: _Ctx, m: Message, expected_next: dict) -> Iterator[Finding]:
    if not m.crc_ok:
        actual = zlib.crc32(m.stored_body) & 0x7FFFFFFF
        yield ctx.f(ERROR, "crc-mismatch", m.file, m.position, m.offset,
                    f"body CRC mismatch (topic {m.topic}, queue {m.queue_id}, queue offset {m.queue_offset})",
                    m.body_crc, actual)
    elif m.sys_flag & F.COMPRESSED_FLAG:
        # the CRC covers the stored (compressed) bytes; only inflating shows the body can be read
        try:
            codecs.check_inflates(m.compression, m._buf[m.body_start:m.body_start + m.body_len])
        except codecs.CodecError as e:
            yield ctx.f(ERROR, "body-inflate-failed", m.file, m.position, m.offset,
                        f"{m.compression} body does not inflate ({e}; topic {m.topic}, queue {m.queue_id}, queue "
                        f"offset {m.queue_offset})", m.compression, str(e))
    try:
        m.props_raw.decode("utf-8")
        m.topic_raw.decode("utf-8")
    except UnicodeDecodeError as e:
        yield ctx.f(WARNING, "not-utf8", m.file, m.position, m.offset, f"topic or properties are not UTF-8: {e}")
    if _CRC_TAG in m.props_raw[-F.CRC32_RESERVED_LEN:]:
        digits = m.props_raw[-11:-1]
        if digits.isdigit():
            stored = F.decode_prop_crc(digits.decode())
            actual = zlib.crc32(bytes(m._buf[m.position:m.position + m.size - F.CRC32_RESERVED_LEN])) & 0x7FFFFFFF
            if stored != actual:
                yield ctx.f(ERROR, "prop-crc-mismatch", m.file, m.position, m.offset,
                            "whole-message CRC (__CRC32# property) mismatch: header or properties changed",
                            stored, actual)
        else:
            yield ctx.f(ERROR, "prop-crc-malformed", m.file, m.position, m.offset,
                        "__CRC32# property is not 10 digits", None, digits.decode("latin-1"))
    if not born_plausible(m.born_timestamp, m.store_timestamp):
        fd = born_finding(m.file, m.position, m.offset, m.born_timestamp, m.store_timestamp)
        ctx.summary.add(fd)
        yield fd
    key = _note_dispatch(ctx, m)
    if key is not None:
        exp = expected_next.get(key)
        if exp is not None and m.queue_offset != exp:
            yield _queue_offset_finding(ctx, key, exp, m.file, m.position, m.offset, m.queue_offset)
        step = 1
        if m.sys_flag & F.INNER_BATCH_FLAG:
            try:
                step = max(1, int(m.prop("INNER_NUM") or 1))
            except ValueError:
                step = 1
        expected_next[key] = m.queue_offset + step


def _queue_offset_finding(ctx: _Ctx, key, exp: int, file, position, offset, queue_offset) -> Finding:
    code = "queue-offset-gap" if queue_offset > exp else "queue-offset-repeat"
    return ctx.f(WARNING, code, file, position, offset,
                 f"queue {key[0]}/{key[1]}: expected queue offset {exp}, found {queue_offset}", exp, queue_offset)


def _shift_finding(ctx: _Ctx, delta: int, file, position, offset, physical_offset) -> Finding:
    return ctx.f(ERROR, "physical-offset-mismatch", file, position, offset,
                 f"stored PHYSICALOFFSET {physical_offset} differs from the real offset by "
                 f"{delta} bytes: stale data, or bytes inserted/removed before it", offset, physical_offset)


def _damage_finding(ctx: _Ctx, ev: Damage) -> Finding:
    return ctx.f(ERROR, ev.code, ev.file, ev.position, ev.offset,
                 f"{ev.message}; skipped {ev.length} bytes to the next valid unit", ev.expected, ev.actual,
                 span=(ev.offset, ev.offset + ev.length))


def _blank_findings(ctx: _Ctx, ev: Blank, seg_size: int, last_seg: bool) -> Iterator[Finding]:
    left = seg_size - ev.position
    if ev.size != left:
        yield ctx.f(ERROR, "blank-size-mismatch", ev.file, ev.position, ev.offset,
                    f"BLANK unit claims {ev.size} bytes, {left} are left in the segment", left, ev.size)
    elif last_seg:
        yield ctx.f(INFO, "blank-in-last-segment", ev.file, ev.position, ev.offset,
                    "the last segment is full (BLANK at its end); the broker had not created the next one yet")


def _each_file(ctx: _Ctx, items, reader, check, kind: str | None = None) -> Iterator[Finding]:
    """``check(item)``'s findings for every item; a file that cannot be read is one finding and the others go
    on. The shared commitlog ``reader`` is closed at the end. A runner with ``each_file`` (the distributed
    verify, :mod:`mqtool.rocketmq.verifyplan`) gives the findings of the ``kind`` ("queue", "index") items."""
    hook = getattr(ctx.opts.runner, "each_file", None) if kind else None
    if hook is not None:
        yield from hook(kind, ctx, items, reader, check)
        return
    try:
        for item in items:
            try:
                yield from check(item)
            except InputError as e:
                yield ctx.f(ERROR, "file-unreadable", e.file, e.offset, None, f"cannot read: {e.message}")
    finally:
        if reader is not None:
            reader.close()


# ---- consumequeue ---------------------------------------------------------------------------------

def _verify_consumequeue(ctx: _Ctx) -> Iterator[Finding]:
    store = ctx.store
    t, q = cq_filter(store)
    queues = store.queues(t, q)
    if not queues:
        return
    reader = CommitLogReader(store.segments, ctx.opts.max_message_size) if store.segments else None
    rules = dispatch.DispatchRules()
    cq = indexfiles.cq_file_size(store, ctx.opts)
    ctx.summary.extra["cq_file_size"] = cq.to_dict("bytes")
    if cq.warning:
        yield ctx.f(WARNING, "cq-geometry", store.consumequeue_dir or store.cq_file, None, None, cq.warning,
                    cq.value, list(cq.candidates))
    for d, why in store.unreadable:
        yield ctx.f(ERROR, "dir-unreadable", d, None, None, f"cannot list directory: {why}")
    yield from _each_file(ctx, queues, reader, lambda qf: _verify_queue(ctx, qf, reader, rules), "queue")
    if store.segments and not store.cq_file:
        have = {(qf.topic, qf.queue_id) for qf in queues}
        for (topic, qid), nxt in sorted(ctx.dispatched_next.items()):
            if (t and topic != t) or (q is not None and qid != q):
                continue
            if (topic, qid) not in have:
                yield ctx.f(WARNING if ctx.aborted else ERROR, "cq-missing", store.consumequeue_dir, None, None,
                            f"queue {topic}/{qid} has messages in the commitlog (up to queue offset {nxt - 1}) "
                            "but no consumequeue files" + (" — the broker crashed before dispatching them"
                                                           if ctx.aborted else ""), nxt, 0)


def _verify_queue(ctx: _Ctx, qf, reader, rules) -> Iterator[Finding]:
    unit = F.CQ_STORE_UNIT_SIZE
    files = qf.files
    sizes = [s.size for s in files]
    for i, s in enumerate(files):
        if s.size % unit:
            yield ctx.f(ERROR, "cq-file-size", s.path, 0, None,
                        f"consumequeue file size {s.size} is not a multiple of {unit}", f"k*{unit}", s.size)
        if i < len(files) - 1 and s.size != sizes[-1] and s.size != max(sizes):
            yield ctx.f(ERROR, "cq-file-size", s.path, 0, None,
                        f"consumequeue file is {s.size} bytes, others are {max(sizes)}", max(sizes), s.size)
        if i:
            prev = files[i - 1]
            if s.base != prev.base + prev.size:
                yield ctx.f(ERROR, "cq-file-gap", s.path, 0, None,
                            f"file name {s.name} does not follow {prev.name} + {prev.size}", prev.base + prev.size,
                            s.base)
    seen_real = False
    last_index = -1
    max_unit_end = 0
    zero_run_start = None
    lmq = qf.topic.startswith(F.LMQ_PREFIX)
    for u in indexfiles.iter_cq_units(qf, include_zero=True):
        if u.is_zero:
            if zero_run_start is None:
                zero_run_start = u
            continue
        if zero_run_start is not None:
            yield ctx.f(ERROR, "cq-hole", zero_run_start.file, zero_run_start.position, None,
                        f"zero units inside queue {qf.topic}/{qf.queue_id} from queue offset "
                        f"{zero_run_start.queue_offset} to {u.queue_offset - 1}", None, None)
            zero_run_start = None
        last_index = u.queue_offset
        if u.is_blank_fill:
            if seen_real:
                yield ctx.f(WARNING, "cq-blank-fill-misplaced", u.file, u.position, None,
                            "blank fill unit after real units", None, None)
            continue
        seen_real = True
        where = f"queue {qf.topic}/{qf.queue_id} unit {u.queue_offset}"
        if u.offset < 0 or u.size <= 0:
            yield ctx.f(ERROR, "cq-bad-unit", u.file, u.position, u.offset,
                        f"{where}: offset {u.offset} size {u.size} is not a valid unit")
            continue
        max_unit_end = max(max_unit_end, u.offset + u.size)
        if reader is None:
            continue
        if ctx.data_end is not None and u.offset + u.size > ctx.data_end:
            yield ctx.f(ERROR, "cq-dangling", u.file, u.position, u.offset,
                        f"{where} points past the end of commitlog data ({ctx.data_end})", f"<={ctx.data_end}",
                        u.offset + u.size)
            continue
        try:
            m = reader.message_at(u.offset)
        except DecodeFailure as e:
            if e.code in ("file-unreadable", "file-changed"):
                continue          # the unreadable segment is reported by the commitlog checks
            code = "cq-dangling" if e.code == "no-such-offset" else "cq-not-message-start"
            yield ctx.f(ERROR, code, u.file, u.position, u.offset,
                        f"{where} points at offset {u.offset}, which is not a message start: {e.message}")
            continue
        if m.size != u.size:
            yield ctx.f(ERROR, "cq-size-mismatch", u.file, u.position, u.offset,
                        f"{where}: unit size {u.size}, message size {m.size}", m.size, u.size)
        if lmq:
            targets = dict(_lmq_targets(m))
            if qf.topic not in targets:
                yield ctx.f(ERROR, "cq-wrong-message", u.file, u.position, u.offset,
                            f"{where}: message at {u.offset} is not multi-dispatched to {qf.topic}",
                            qf.topic, m.prop(F.PROPERTY_INNER_MULTI_DISPATCH))
            elif targets[qf.topic] != u.queue_offset:
                yield ctx.f(ERROR, "cq-queue-offset-mismatch", u.file, u.position, u.offset,
                            f"{where}: INNER_MULTI_QUEUE_OFFSET says {targets[qf.topic]}", u.queue_offset,
                            targets[qf.topic])
        else:
            if m.topic != qf.topic or m.queue_id != qf.queue_id:
                yield ctx.f(ERROR, "cq-wrong-message", u.file, u.position, u.offset,
                            f"{where} points at a message of {m.topic}/{m.queue_id}",
                            f"{qf.topic}/{qf.queue_id}", f"{m.topic}/{m.queue_id}")
                continue
            if m.queue_offset != u.queue_offset:
                yield ctx.f(ERROR, "cq-queue-offset-mismatch", u.file, u.position, u.offset,
                            f"{where}: the message's QUEUEOFFSET is {m.queue_offset}", u.queue_offset,
                            m.queue_offset)
        expected_tags = dispatch.cq_tags_code(rules, m.topic, m.properties, m.store_timestamp)
        if expected_tags is not None and expected_tags != u.tags_code and not (u.tags_code <= -2147483649):
            yield ctx.f(ERROR, "cq-tags-code-mismatch", u.file, u.position, u.offset,
                        f"{where}: tagsCode {u.tags_code}, expected {expected_tags}"
                        + (" (delivery time)" if m.topic == F.SCHEDULE_TOPIC else f" (hash of {m.tags!r})"),
                        expected_tags, u.tags_code)
    if reader is not None:
        yield from _cq_behind(ctx, qf, last_index)


def _cq_behind(ctx: _Ctx, qf, last_index: int) -> Iterator[Finding]:
    """``cq-behind`` when the commitlog holds queue offsets past ``last_index`` (the queue's last unit)."""
    nxt = ctx.dispatched_next.get((qf.topic, qf.queue_id))
    if nxt is not None and last_index + 1 < nxt:
        sev = WARNING if ctx.aborted else ERROR
        yield ctx.f(sev, "cq-behind", qf.files[-1].path if qf.files else qf.dir, None, None,
                    f"queue {qf.topic}/{qf.queue_id} ends at queue offset {last_index}, the commitlog has messages "
                    f"up to {nxt - 1}" + (" (not yet dispatched when the broker crashed)" if ctx.aborted else ""),
                    nxt - 1, last_index)


# ---- index ----------------------------------------------------------------------------------------

def _verify_index(ctx: _Ctx) -> Iterator[Finding]:
    store = ctx.store
    if not store.index_files:
        return
    reader = CommitLogReader(store.segments, ctx.opts.max_message_size) if store.segments else None
    cp = None
    if store.checkpoint:
        try:
            cp = indexfiles.read_checkpoint(store.checkpoint)
        except Exception:
            cp = None
    geos = indexfiles.index_geometries(store.index_files, ctx.opts)
    ctx.summary.extra["index_geometry"] = geos.summary()
    for size, g in sorted(geos.by_size.items()):
        if g.warning:
            first = min((p for p, z in geos.sizes.items() if z == size), key=os.path.basename)
            unchecked = "" if g.slots else \
                f" ({sum(1 for z in geos.sizes.values() if z == size)} file(s) of this size not checked)"
            yield ctx.f(WARNING, "index-geometry", first, None, None, g.warning + unchecked,
                        None, [list(c) for c in g.candidates] or None)
    yield from _each_file(ctx, store.index_files, reader,
                          lambda path: _verify_index_file(ctx, path, reader, cp, geos.of(path)), "index")


def _verify_index_file(ctx: _Ctx, path: str, reader, cp, geometry) -> Iterator[Finding]:
    v = indexfiles.read_index_file(path, geometry)
    h = v.header
    if v.size < F.INDEX_HEADER_SIZE:
        yield ctx.f(ERROR, "index-truncated", path, 0, None, f"index file is {v.size} bytes, shorter than its header")
        return
    if v.slot_num is None:
        return                  # geometry unknown: one index-geometry warning names the candidates
    count = h["indexCount"]
    if count < 1 or count > v.index_num:
        yield ctx.f(ERROR, "index-header", path, 36, None,
                    f"indexCount {count} outside [1, {v.index_num}]", f"1..{v.index_num}", count)
    n = v.entry_count
    slots = v.slot_num
    # slots
    nonempty = 0
    used = v.nonzero_slots()
    for i, val in used:
        nonempty += 1
        if val < 0 or val > n:
            yield ctx.f(ERROR, "index-bad-slot", path, F.INDEX_HEADER_SIZE + 4 * i, None,
                        f"slot {i} points at entry {val}, outside [1, {n}]", f"1..{n}", val)
    if h["hashSlotCount"] != nonempty:
        yield ctx.f(INFO, "index-slot-count", path, 32, None,
                    f"hashSlotCount {h['hashSlotCount']} but {nonempty} slots are used "
                    "(4.7.0 and earlier counted every put)", nonempty, h["hashSlotCount"])
    # entries
    min_off = max_off = None
    min_ts = max_ts = None
    bad_hash = set()                       # entries whose key hash matches none of their message's keys
    for k in range(1, n + 1):
        kh, off, td, prev = v.entry(k)
        pos = v.entry_position(k)
        if prev < 0 or prev >= k:
            yield ctx.f(ERROR, "index-bad-link", path, pos, off,
                        f"entry {k}: previous entry {prev} is not older than the entry itself", f"0..{k - 1}", prev)
        if min_off is None or off < min_off:
            min_off = off
        if max_off is None or off > max_off:
            max_off = off
        if reader is None:
            continue
        try:
            m = reader.message_at(off)
        except DecodeFailure as e:
            if e.code in ("file-unreadable", "file-changed"):
                continue
            yield ctx.f(ERROR, "index-not-message-start", path, pos, off,
                        f"entry {k} points at offset {off}, not a message start: {e.message}")
            continue
        keys = ([m.uniq_key] if m.uniq_key else []) + m.keys
        topic = m.topic
        if kh not in {indexfiles.index_hash(f"{topic}#{key}") for key in keys}:
            bad_hash.add(k)
            yield ctx.f(ERROR, "index-hash-mismatch", path, pos, off,
                        f"entry {k}: key hash {kh} matches none of the message's keys ({topic}: {keys[:5]})",
                        None, kh)
        ts = m.store_timestamp
        min_ts = ts if min_ts is None else min(min_ts, ts)
        max_ts = ts if max_ts is None else max(max_ts, ts)
        if h["beginTimestamp"] > 0 and k > 1:
            exp_td = max(0, (ts - h["beginTimestamp"]) // 1000)
            if exp_td != td:
                yield ctx.f(WARNING, "index-time-mismatch", path, pos, off,
                            f"entry {k}: timeDiff {td}s, the message's store time gives {exp_td}s", exp_td, td)
    # chains: every entry reachable from its bucket, no cycles
    seen = bytearray(n + 1)
    for i, cur in used:
        steps = 0
        if 0 < cur <= n and v.entry(cur)[0] % slots != i and (reader is not None and cur not in bad_hash):
            # the head entry is sound (its hash is its message's) but belongs to another slot: the slot is bad
            yield ctx.f(ERROR, "index-bad-slot", path, F.INDEX_HEADER_SIZE + 4 * i, None,
                        f"slot {i} points at entry {cur}, whose key hash belongs to slot {v.entry(cur)[0] % slots}",
                        None, cur)
        while 0 < cur <= n:
            if seen[cur]:
                yield ctx.f(ERROR, "index-chain-cycle", path, F.INDEX_HEADER_SIZE + 4 * i, None,
                            f"slot {i}: chain reaches entry {cur} twice (cycle or shared tail)")
                break
            seen[cur] = 1
            kh, _, _, prev = v.entry(cur)
            if kh % slots != i:
                yield ctx.f(ERROR, "index-wrong-slot", path, v.entry_position(cur), None,
                            f"entry {cur} (hash {kh}) is chained from slot {i}, belongs to slot {kh % slots}",
                            kh % slots, i)
            cur = prev
            steps += 1
            if steps > n:
                break
    unreached = seen.count(0) - 1          # entry 0 does not exist
    if unreached:
        yield ctx.f(WARNING, "index-unreachable", path, None, None,
                    f"{unreached} entries are not reachable from any slot (overwritten chains)", 0, unreached)
    if n:
        if h["endPhyOffset"] != max_off:
            yield ctx.f(WARNING, "index-header", path, 24, None,
                        f"endPhyOffset {h['endPhyOffset']} differs from the largest entry offset {max_off}",
                        max_off, h["endPhyOffset"])
        if max_ts is not None and h["endTimestamp"] < max_ts:
            yield ctx.f(WARNING, "index-header", path, 8, None,
                        f"endTimestamp {h['endTimestamp']} is older than the newest indexed message ({max_ts})",
                        max_ts, h["endTimestamp"])
    if cp is not None and h["endTimestamp"] > cp["indexMsgTimestamp"] and n:
        sev = WARNING if ctx.aborted else INFO
        yield ctx.f(sev, "index-after-checkpoint", path, 8, None,
                    f"endTimestamp {h['endTimestamp']} is newer than the checkpoint's indexMsgTimestamp "
                    f"{cp['indexMsgTimestamp']}" + (": a restarting broker deletes this file after a crash — "
                                                      "keep a copy" if ctx.aborted else
                                                      " (normal for the file being written)"),
                    cp["indexMsgTimestamp"], h["endTimestamp"])


# ---- store-level ----------------------------------------------------------------------------------

def _verify_store_files(ctx: _Ctx) -> Iterator[Finding]:
    store = ctx.store
    if store.abort:
        yield ctx.f(WARNING, "unclean-shutdown", store.abort, None, None,
                    "abort file present: the broker did not shut down cleanly. On restart it recovers from the "
                    "checkpoint, truncates the commitlog after the last valid message and deletes index files "
                    "newer than the checkpoint — verify and copy before restarting")
    if store.checkpoint:
        try:
            size = os.path.getsize(store.checkpoint)
        except OSError:
            size = None           # reported below when it cannot be read
        if size is not None and size != F.CHECKPOINT_FILE_SIZE:
            yield ctx.f(WARNING, "checkpoint-size", store.checkpoint, 0, None,
                        f"checkpoint is {size} bytes, the broker maps {F.CHECKPOINT_FILE_SIZE}",
                        F.CHECKPOINT_FILE_SIZE, size)
        try:
            cp = indexfiles.read_checkpoint(store.checkpoint)
        except InputError as e:
            yield ctx.f(ERROR, "file-unreadable", store.checkpoint, None, None, f"cannot read: {e.message}")
            cp = None
        if cp is not None:
            yield from _checkpoint_values(ctx, cp)
        if cp is not None and ctx.last_store_ts:
            phys = cp["physicMsgTimestamp"]
            if phys > ctx.last_store_ts:
                yield ctx.f(WARNING, "checkpoint-ahead", store.checkpoint, 0, None,
                            f"physicMsgTimestamp {phys} is newer than the last message in the commitlog "
                            f"({ctx.last_store_ts}): flushed data is missing", ctx.last_store_ts, phys)
            elif phys < ctx.last_store_ts:
                yield ctx.f(INFO, "checkpoint-behind", store.checkpoint, 0, None,
                            f"messages stored after the checkpoint's physicMsgTimestamp {phys} "
                            f"(last message {ctx.last_store_ts}): written after the last flush record",
                            ctx.last_store_ts, phys)
    elif store.root and store.segments:
        yield ctx.f(INFO, "checkpoint-missing", store.root, None, None, "no checkpoint file")
    if store.config_dir:
        from mqtool.rocketmq.configfiles import load_config

        d = Path(store.config_dir)
        try:
            names = sorted(os.listdir(d))
        except OSError as e:
            yield ctx.f(ERROR, "config-unreadable", str(d), None, None, str(e))
            return
        for name in names:
            if not name.endswith(".json"):
                continue
            v, err = load_config(d / name)
            bak = d / (name + ".bak")
            if err:
                bv, berr = load_config(bak) if bak.exists() else (None, "no .bak")
                yield ctx.f(WARNING if berr is None else ERROR, "config-unparsable", str(d / name), None, None,
                            f"{err}" + ("; the .bak parses and the broker would load it" if berr is None else
                                        f"; no usable .bak ({berr})"))
                continue
            if bak.exists():
                bv, berr = load_config(bak)
                if berr:
                    yield ctx.f(WARNING, "config-bak-unparsable", str(bak), None, None, berr)
                elif bv != v:
                    yield ctx.f(INFO, "config-differs-from-bak", str(d / name), None, None,
                                f"{name} differs from its .bak ({_diff_summary(bv, v)})")


# StoreCheckpoint (reference §7): three epoch-ms times, then 5.x offsets. confirmPhyOffset is a commitlog offset
# of this store (the broker truncates to it at recovery); masterFlushedOffset is the master's, which a slave
# may not have yet, so only its sign is checked.
_CP_TIMES = ("physicMsgTimestamp", "logicsMsgTimestamp", "indexMsgTimestamp")


def _checkpoint_values(ctx: _Ctx, cp: dict) -> Iterator[Finding]:
    segs = ctx.store.segments
    # where the data ends (the range runner of --jobs does not track it: the end of the files bounds it)
    end = (ctx.data_end if ctx.data_end is not None else segs[-1].end) if segs else None
    for name in _CP_TIMES + ("masterFlushedOffset", "confirmPhyOffset"):
        for sev, code, msg, exp, act in checkpoint_value_problems(
                name, cp[name], time=name in _CP_TIMES, log_end=end if name == "confirmPhyOffset" else None):
            yield ctx.f(sev, code, ctx.store.checkpoint, _CP_AT[name], None, msg, exp, act)


_CP_AT = field_offsets(F.Checkpoint)


def _diff_summary(old, new) -> str:
    if isinstance(old, dict) and isinstance(new, dict):
        parts = []
        for k in sorted(set(old) | set(new), key=str):
            if old.get(k) != new.get(k):
                o, n = old.get(k), new.get(k)
                if isinstance(o, dict) and isinstance(n, dict):
                    added = len(set(n) - set(o))
                    removed = len(set(o) - set(n))
                    changed = sum(1 for x in set(o) & set(n) if o[x] != n[x])
                    parts.append(f"{k}: +{added} -{removed} ~{changed}")
                else:
                    parts.append(f"{k} changed")
        return "; ".join(parts) or "same keys"
    return "content changed"


# ---- salvage --------------------------------------------------------------------------------------

class _Salvage:
    """Readable messages of a damaged store, as NDJSON with base64 bodies, written atomically."""

    def __init__(self, out: str, store: RocketStore, force: bool):
        from mqtool.io import open_salvage_file

        inputs = [p for p in (store.root, store.commitlog_dir, store.path) if p]
        self._w = open_salvage_file(out, inputs, force)
        self.path = str(self._w.path)
        self._f = self._w.__enter__()
        self.count = 0

    def add(self, m: Message) -> None:
        self.add_row(m.to_row("base64"))

    def add_row(self, row: dict) -> None:
        from mqtool.ndjson import dumps

        self._f.write((dumps(row) + "\n").encode("utf-8"))
        self.count += 1

    def close(self, commit: bool = True) -> None:
        if commit:
            self._w.__exit__(None, None, None)
        else:
            self._w.__exit__(InterruptedError, InterruptedError("verify interrupted"), None)


__all__ = ["verify_store"]


# ---- the commitlog check over byte ranges (--jobs, Spark): each range in a worker, merged in order

@dataclasses.dataclass
class RangeVerify:
    """What one range contributes to a commitlog verify: findings that need no outside state, in order,
    interleaved with markers the merge resolves with the state of the ranges before it:

    * ``("data",)`` — the first message or damage of the range (flushes held ``missing-blank`` findings);
    * ``("qoff", key, queue_offset, file, position, offset)`` — first dispatched message of a queue here;
    * ``("shift", delta, file, position, offset, physical_offset)`` — first message of the range;
    * ``("damage", Finding, length)``, ``("end", End, saw_blank)``, ``("salvage", row)``.
    """

    items: list
    messages: int
    expected_next: dict        # per (topic, queue): next queue offset after this range
    shift: int | None          # PHYSICALOFFSET delta of the range's last message
    dispatched_next: dict
    last_store_ts: int


class _FirstSeen(dict):
    """expected_next for one range: a miss means "first message of this queue in the range"."""

    def __init__(self):
        super().__init__()
        self.missed: list = []

    def get(self, key, default=None):
        if key not in self:
            self.missed.append(key)
            return default
        return dict.get(self, key)


def verify_range_task(args) -> RangeVerify:
    rng, opts = args

    ctx = _Ctx(RocketStore(path=rng.store), opts)
    items: list = []
    expected = _FirstSeen()
    shift = None
    seen_data = False
    saw_blank = False
    salvage = bool(opts.salvage_out)
    messages = 0
    # the one-process verify's fast lane, for the units after the range's first message of each queue
    # (ctx.shift mirrors ``shift``; None until the first message)
    ctx.shift = None
    lane = _fast_lane(ctx, expected, known_queues_only=True) if not salvage and USE_FAST_LANE else None
    for ev in SegmentScanner(_segment(rng), max_size=opts.max_message_size, check_crc=True, start=rng.start,
                             stop=rng.stop, fast_lane=lane).events():
        if type(ev) is FastRun:        # clean messages of known queues, checked and counted by the lane
            messages += ev.count
            continue
        if isinstance(ev, Message):
            if not seen_data:
                seen_data = True
                items.append(("data",))
            messages += 1
            expected.missed.clear()
            items.extend(_check_message(ctx, ev, expected))
            for key in expected.missed:
                items.append(("qoff", key, ev.queue_offset, ev.file, ev.position, ev.offset))
            delta = ev.physical_offset - ev.offset
            if shift is None:
                items.append(("shift", delta, ev.file, ev.position, ev.offset, ev.physical_offset))
                shift = ctx.shift = delta
            elif delta != shift:
                if delta:
                    items.append(_shift_finding(ctx, delta, ev.file, ev.position, ev.offset, ev.physical_offset))
                shift = ctx.shift = delta
            if salvage:
                items.append(("salvage", ev.to_row("base64")))
        elif isinstance(ev, Blank):
            saw_blank = True
            items.extend(_blank_findings(ctx, ev, rng.size, rng.last_segment))
        elif isinstance(ev, Damage):
            if not seen_data:
                seen_data = True
                items.append(("data",))
            items.append(("damage", _damage_finding(ctx, ev), ev.length))
        elif isinstance(ev, End):
            items.append(("end", ev, saw_blank))
    return RangeVerify(items, messages, dict(expected), shift, ctx.dispatched_next, ctx.last_store_ts)


def verify_commitlog_ranges(ctx):
    """The commitlog part of verify over ranges (generator of findings). Returns False without yielding when
    one process is the better choice, True when done. Same findings, same order as the one-process loop."""

    store, opts = ctx.store, ctx.opts
    split = opts.split_size or (ROW_TASK_SPLIT if opts.salvage_out else None)
    ranges = split_segments(FAMILY, store.path, store.segments, split)

    native = USE_FAST_LANE and not opts.salvage_out and _native_lane() is not None
    runner = _ranges.runner_for(opts, ranges, min_bytes=NATIVE_VERIFY_PARALLEL_MIN_BYTES if native else PARALLEL_MIN_BYTES)
    if runner.jobs == 1 and getattr(opts, "runner", None) is None:
        return False
    plain = _plain(opts)
    expected_next: dict = {}
    shift = 0
    pending: list[Finding] = []
    cur_seg = -1
    has_data = False
    total = sum(s.size for s in store.segments)
    done = 0
    with progress(total, "verify commitlog", enabled=opts.progress) as bar:
        for rng, res in zip(ranges, runner.imap(verify_range_task, [(r, plain) for r in ranges])):
            if rng.seg_index != cur_seg:
                cur_seg, has_data = rng.seg_index, False
            seg = _segment(rng)
            for it in res.items:
                if isinstance(it, Finding):
                    ctx.summary.add(it)
                    yield it
                    continue
                tag = it[0]
                if tag == "data":
                    if not has_data:
                        has_data = True
                        yield from _flush_pending(ctx, pending)
                elif tag == "qoff":
                    _, key, qo, file, pos, off = it
                    exp = expected_next.get(key)
                    if exp is not None and qo != exp:
                        yield _queue_offset_finding(ctx, key, exp, file, pos, off, qo)
                elif tag == "shift":
                    _, delta, file, pos, off, phys = it
                    if delta != shift:
                        if delta:
                            yield _shift_finding(ctx, delta, file, pos, off, phys)
                        shift = delta
                elif tag == "damage":
                    ctx.summary.skipped_ranges += 1
                    ctx.summary.skipped_bytes += it[2]
                    ctx.summary.add(it[1])
                    yield it[1]
                elif tag == "end":
                    yield from _check_end(ctx, seg, it[1], rng.last_segment, it[2], has_data, pending)
                elif tag == "salvage":
                    if ctx.salvage is not None:
                        ctx.salvage.add_row(it[1])
            ctx.summary.messages += res.messages
            expected_next.update(res.expected_next)
            if res.shift is not None:
                shift = res.shift
            for k, v in res.dispatched_next.items():
                if v > ctx.dispatched_next.get(k, 0):
                    ctx.dispatched_next[k] = v
            if res.last_store_ts > ctx.last_store_ts:
                ctx.last_store_ts = res.last_store_ts
            done += rng.length
            bar.update_to(done)
    for fd in pending:
        yield ctx.f(INFO, "zero-fill", fd.file, fd.position, fd.offset,
                    "data ends here; the following segment(s) are preallocated and empty")
    return True
