"""The consumequeue checks: every unit against the message it points at, holes, dangling units, queues behind
the commitlog, file naming and sizes, LMQ multi-dispatch."""
from __future__ import annotations

from collections.abc import Iterator

from formats import rocketmq as F
from mqtool.errors import InputError
from mqtool.findings import ERROR, WARNING, Finding
from mqtool.io import map_input
from mqtool.rocketmq import dispatch, indexfiles
from mqtool.rocketmq.store import cq_filter
from mqtool.rocketmq.records import DecodeFailure
from mqtool.rocketmq.scan import CommitLogReader
from mqtool.rocketmq.verify.context import _Ctx, _each_file
from mqtool.rocketmq.verify.dispatched import _lmq_targets


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
    lmq = qf.topic.startswith(F.LMQ_PREFIX)
    if reader is not None and ctx.xref is not None and not lmq and qf.topic != F.SCHEDULE_TOPIC:
        last = _proven_clean(ctx, qf)
        if last is not None:          # every unit passes every check below: the same findings (none)
            yield from _cq_behind(ctx, qf, last)
            return
    seen_real = False
    last_index = -1
    max_unit_end = 0
    zero_run_start = None
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
            if ctx.store.commitlog_dir and not ctx.store.segments:    # the store's commitlog has no file at all
                yield ctx.f(ERROR, "cq-dangling", u.file, u.position, u.offset,
                            f"{where} points at offset {u.offset}, but the commitlog has no segment file",
                            None, u.offset + u.size)
            continue
        if ctx.data_end is not None and u.offset + u.size > ctx.data_end:
            yield ctx.f(ERROR, "cq-dangling", u.file, u.position, u.offset,
                        f"{where} points past the end of commitlog data ({ctx.data_end})", f"<={ctx.data_end}",
                        u.offset + u.size)
            continue
        try:
            m = reader.message_at(u.offset, check_crc=False)     # bodies: the commitlog pass
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


def _proven_clean(ctx: _Ctx, qf) -> int | None:
    """The queue's last unit index when the commitlog pass's table (``ctx.xref``) proves that the unit loop of
    :func:`_verify_queue` reports nothing for any unit of the queue; None when it cannot (then that loop runs)."""
    unit = F.CQ_STORE_UNIT_SIZE
    try:
        topic = qf.topic.encode("utf-8")
    except UnicodeEncodeError:
        return None
    seen_real, last = False, -1
    try:
        for s in qf.files:
            with map_input(s.path, whole_limit=0) as mi:     # mapped: the zero tail is never read
                n = indexfiles._last_nonzero_unit(mi.buf, len(mi.buf) // unit, unit,
                                                  mi.fileno() if mi.mapped else None) + 1
                r = ctx.xref.cq_check(mi.buf, n, s.base // unit, seen_real, topic, qf.queue_id, ctx.data_end)
            if r is None:
                return None
            seen_real = r[0]
            if n:
                last = r[1]
    except InputError:
        return None               # the unit loop meets it too, and reports it
    return last


def _cq_behind(ctx: _Ctx, qf, last_index: int) -> Iterator[Finding]:
    """``cq-behind`` when the commitlog holds queue offsets past ``last_index`` (the queue's last unit)."""
    nxt = ctx.dispatched_next.get((qf.topic, qf.queue_id))
    if nxt is not None and last_index + 1 < nxt:
        sev = WARNING if ctx.aborted else ERROR
        yield ctx.f(sev, "cq-behind", qf.files[-1].path if qf.files else qf.dir, None, None,
                    f"queue {qf.topic}/{qf.queue_id} ends at queue offset {last_index}, the commitlog has messages "
                    f"up to {nxt - 1}" + (" (not yet dispatched when the broker crashed)" if ctx.aborted else ""),
                    nxt - 1, last_index)
