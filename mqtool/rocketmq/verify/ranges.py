"""The commitlog check over byte ranges (``--jobs``, Spark): each range in a worker, merged in order."""
from __future__ import annotations


from mqtool.findings import INFO, Finding
from mqtool.io import SpillList
from mqtool.plainclass import dataclass
from mqtool.progress import progress
from mqtool.rocketmq.store import RocketStore
from mqtool.rocketmq.records import Blank, Message
from mqtool.rocketmq.scan import Damage, End, FastRun, SegmentScanner
from mqtool.ranges import PARALLEL_MIN_BYTES, ByteRange, PoolRunner, split_segments
from mqtool.rocketmq import ranges as _ranges
from mqtool.rocketmq.ranges import FAMILY, NATIVE_VERIFY_PARALLEL_MIN_BYTES, ROW_TASK_SPLIT, _plain, _segment
from mqtool.rocketmq.verify import native_lane
from mqtool.rocketmq.verify.context import _Ctx
from mqtool.rocketmq.verify.units import (_blank_findings, _check_end, _check_message, _damage_finding,
                                          _flush_pending, _queue_offset_finding, _shift_finding)


@dataclass
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
    queue_end: dict            # per (topic, queue): where its last message in this range ends (global offset)
    xref: object = None        # the range's cross-reference table when the parent asked for it: ``Xref.export()``
    #                            bytes from a worker process, the ``Xref`` itself from a thread


class ThreadRunner:
    """The range tasks on ``jobs`` threads of this process, results in submission order, at most ``window`` in
    flight (the :class:`mqtool.ranges.PoolRunner` contract). For the compiled lane, which walks long spans
    without the GIL (``rmqverify.walks_without_gil``): no pool to start, nothing pickled, no copy-on-write.
    Plain ``threading`` (``concurrent.futures`` would import logging and traceback at start-up)."""

    def __init__(self, jobs: int, window: int | None = None):
        self.jobs = jobs
        self.window = window or 4 * jobs       # (guided ranges: a long first one must not hold the others up)

    def imap(self, fn, items):
        import threading

        items = list(items)
        results: list = [None] * len(items)
        done = [threading.Event() for _ in items]
        room = threading.Semaphore(self.window)        # tasks started and not yet handed on
        lock = threading.Lock()
        state = {"next": 0, "stop": False}

        def work():
            while True:
                room.acquire()
                with lock:
                    i = state["next"]
                    if state["stop"] or i >= len(items):
                        room.release()
                        return
                    state["next"] = i + 1
                try:
                    results[i] = (True, fn(items[i]))
                except BaseException as e:          # noqa: BLE001 -- raised in the caller's thread
                    results[i] = (False, e)
                done[i].set()

        threads = [threading.Thread(target=work, name=f"mqtool-verify-{k}", daemon=True)
                   for k in range(min(self.jobs, len(items)))]
        for t in threads:
            t.start()
        try:
            for i in range(len(items)):
                done[i].wait()
                ok, r = results[i]
                results[i] = None
                room.release()
                if not ok:
                    raise r
                yield r
        finally:
            state["stop"] = True
            for _ in threads:
                room.release()                     # wake any worker waiting for room: it sees stop
            for t in threads:
                t.join()


def _local_runner(runner, native: bool):
    """``runner`` (a process pool for ``--jobs``), or threads when the compiled lane walks without the GIL (set
    ``THREADS`` to False for the pool: tests compare both)."""
    if not (THREADS and native and runner.jobs > 1 and isinstance(runner, PoolRunner)):
        return runner
    nogil = getattr(native_lane._native_lane(), "walks_without_gil", None)
    return ThreadRunner(runner.jobs) if nogil is not None and nogil() else runner


THREADS = True
GUIDED_MIN = 64 << 20


def guided_ranges(store: str, segments, jobs: int) -> list:
    """Ranges for ``jobs`` threads (no ``--split-size``): each takes 1/(2*jobs) of the bytes not yet planned (at
    least :data:`GUIDED_MIN`, in whole MiB, never past its segment's end) -- big ranges first, small ones last,
    so the threads finish together with few range starts (each costs a few ms: a range's first unit of each
    queue takes the full path). The findings are the same at any split."""
    segs = list(segments)
    remaining = sum(s.size for s in segs)
    out: list = []
    for si, s in enumerate(segs):
        last, st = si == len(segs) - 1, 0
        while True:
            want = max(GUIDED_MIN, -(-remaining // (2 * jobs) // (1 << 20)) << 20)
            stop = min(s.size, st + want)
            out.append(ByteRange(FAMILY, str(store), str(s.path), s.name, s.base, s.size, st, stop, si, last,
                                 len(out)))
            remaining -= stop - st
            st = stop
            if st >= s.size:
                break
    return out


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
    rng, opts = args[:2]
    want_xref = len(args) > 2 and args[2]      # the parent merges the tables (verify_commitlog_ranges)

    ctx = _Ctx(RocketStore(path=rng.store), opts)
    items = SpillList()        # (bounded: a store where every message makes a finding makes millions)
    expected = _FirstSeen()
    shift = None
    seen_data = False
    saw_blank = False
    salvage = bool(opts.salvage_out)
    messages = 0
    # the one-process verify's fast lane, for the units after the range's first message of each queue
    # (ctx.shift mirrors ``shift``; None until the first message)
    ctx.shift = None
    if want_xref and not salvage:
        ctx.xref = native_lane.new_xref()
    firsts: list = []      # the lane's first messages of queues here: (key, queue offset, offset)
    lane = (native_lane._fast_lane(ctx, expected, known_queues_only=True, firsts=firsts)
            if not salvage and native_lane.USE_FAST_LANE else None)
    seg = _segment(rng)
    for ev in SegmentScanner(seg, max_size=opts.max_message_size, check_crc=True, start=rng.start,
                             stop=rng.stop, fast_lane=lane).events():
        if type(ev) is FastRun:        # clean messages checked and counted by the lane
            messages += ev.count
            for key, qo, off in firsts:         # (clean: no finding of theirs goes before these markers)
                items.append(("qoff", key, qo, ev.file, off - seg.base, off))
            firsts.clear()
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
    # the table itself when the task ran on a thread of the parent (merged without a copy of its own), else
    # exported as bytes (pickled back from a worker process)
    xref = ctx.xref
    if xref is not None and not (len(args) > 3 and args[3]):
        xref = xref.export()
    return RangeVerify(items, messages, dict(expected), shift, ctx.dispatched_next, ctx.last_store_ts,
                       ctx.queue_end, xref)


def verify_commitlog_ranges(ctx):
    """The commitlog part of verify over ranges (generator of findings). Returns False without yielding when
    one process is the better choice, True when done. Same findings, same order as the one-process loop."""

    store, opts = ctx.store, ctx.opts
    split = opts.split_size or (ROW_TASK_SPLIT if opts.salvage_out else None)
    ranges = split_segments(FAMILY, store.path, store.segments, split)

    native = native_lane.USE_FAST_LANE and not opts.salvage_out and native_lane._native_lane() is not None
    runner = _ranges.runner_for(opts, ranges, min_bytes=NATIVE_VERIFY_PARALLEL_MIN_BYTES if native else PARALLEL_MIN_BYTES)
    if runner.jobs == 1 and getattr(opts, "runner", None) is None:
        return False
    local = getattr(opts, "runner", None) is None
    if local:
        runner = _local_runner(runner, native)
        if isinstance(runner, ThreadRunner) and split is None:
            ranges = guided_ranges(store.path, store.segments, runner.jobs)
    plain = opts if isinstance(runner, ThreadRunner) else _plain(opts)    # (threads: nothing to pickle)
    ctx.xref = native_lane.new_xref(store.segments) if native and local and ctx.want_xref else None
    want_xref = ctx.xref is not None
    expected_next: dict = {}
    shift = 0
    pending: list[Finding] = []
    cur_seg = -1
    has_data = False
    total = sum(s.size for s in store.segments)
    done = 0
    with progress(total, "verify commitlog", enabled=opts.progress) as bar:
        threads = isinstance(runner, ThreadRunner)
        for rng, res in zip(ranges, runner.imap(verify_range_task, [(r, plain, True, threads) if want_xref
                                                                  else (r, plain) for r in ranges])):
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
                        yield _queue_offset_finding(ctx, key, exp, file, pos, off, qo, ctx.queue_end.get(key))
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
            if isinstance(res.items, SpillList):       # (a thread's: its file goes now)
                res.items.close()
            ctx.summary.messages += res.messages
            if ctx.xref is not None and res.xref is not None:
                ctx.xref.merge(res.xref)
            expected_next.update(res.expected_next)
            ctx.queue_end.update(res.queue_end)
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
