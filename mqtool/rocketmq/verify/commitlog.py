"""The commitlog checks: segment layout, then every unit in order (the fast lane takes the clean runs), or the
range tasks of :mod:`.ranges` with ``--jobs``; the light dispatch pass the queue and index checks need."""
from __future__ import annotations

import os
from collections.abc import Iterator

from mqtool.findings import INFO, WARNING, Finding
from mqtool.progress import progress
from mqtool.rocketmq.records import Blank, Message
from mqtool.rocketmq.scan import Damage, End, FastRun, SegmentScanner
from mqtool.rocketmq.verify import native_lane
from mqtool.rocketmq.verify.context import _Ctx
from mqtool.rocketmq.verify.dispatched import _note_dispatch
from mqtool.rocketmq.verify.ranges import verify_commitlog_ranges
from mqtool.rocketmq.verify.segments import _verify_segments_layout
from mqtool.rocketmq.verify.units import (_blank_findings, _check_end, _check_message, _damage_finding,
                                          _flush_pending, _shift_finding)


def _scan_for_dispatch(ctx: _Ctx) -> Iterator[Finding]:
    """Light commitlog pass (no CRC) so queue/index checks know what was dispatched (a runner with
    ``dispatch_pass`` does it: the distributed verify). Its only findings are segments it cannot read: the
    queue and index checks skip what points into them, and no commitlog pass runs to report them."""
    hook = getattr(ctx.opts.runner, "dispatch_pass", None)
    if hook is not None:
        hook(ctx)
        return
    xref = ctx.xref = native_lane.new_xref(ctx.store.segments) if ctx.want_xref else None
    for seg in ctx.store.segments:
        for ev in SegmentScanner(seg, max_size=ctx.opts.max_message_size, check_crc=False).events():
            if isinstance(ev, Message):
                _note_dispatch(ctx, ev)
                if xref is not None:      # what the checks compare (as units._check_message notes it)
                    xref.add(ev.offset, ev.size, ev.topic_raw, ev.queue_id, ev.queue_offset, ev.store_timestamp,
                             ev.props_raw)
            elif isinstance(ev, End):
                ctx.data_end = ev.offset
            elif isinstance(ev, Damage) and ev.code in ("file-unreadable", "file-changed"):
                yield _damage_finding(ctx, ev)


def _verify_commitlog(ctx: _Ctx) -> Iterator[Finding]:
    store, opts = ctx.store, ctx.opts
    if not store.segments:
        if store.commitlog_dir:     # no queue or index file holds a byte either: a fresh store, nothing lost
            fresh = not any(f.size for q in store.queues() for f in q.files) and \
                not any(os.path.getsize(p) for p in store.index_files if os.path.isfile(p))
            yield ctx.f(INFO if fresh else WARNING, "commitlog-empty", store.commitlog_dir, None, None,
                        "no commitlog segment files" + (" (and no queue or index entry: nothing written yet)"
                                                        if fresh else ""))
        return
    yield from _verify_segments_layout(ctx)
    if opts.jobs != 1 or getattr(opts, "runner", None) is not None:
        if (yield from verify_commitlog_ranges(ctx)):
            return
    expected_next: dict[tuple[str, int], int] = {}
    ctx.shift = 0
    if ctx.salvage is None and ctx.want_xref:
        ctx.xref = native_lane.new_xref(store.segments)
    lane = (native_lane._fast_lane(ctx, expected_next) if ctx.salvage is None and native_lane.USE_FAST_LANE
            else None)
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
