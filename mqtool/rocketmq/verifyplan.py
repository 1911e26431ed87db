"""RocketMQ verify as independent tasks plus an in-order merge (the family side of :mod:`mqtool.spark.verify`).

A store of at most :data:`WHOLE_STORE_MAX` bytes of commitlog (no ``--split-size`` asked for, no
``--salvage-out``) is one task: the embedded verify itself, its findings and summary handed back. Bigger ones
are cut into tasks (each runs anywhere the store's files can be read, e.g. a Spark executor):

* the commitlog checks over byte ranges (:func:`mqtool.rocketmq.ranges.verify_range_task`, the task of
  ``verify --jobs``), or for ``verify consumequeue|index`` the light dispatch pass per segment;
* one task per consume queue: every unit against the message it points at (the commitlog read at random);
* one task per index file: header, slots, chains and every entry against its message.

For ``verify store`` with the compiled lane (on the driver and the executors) the queue and index tasks are
not planned: the range tasks hand back their cross-reference tables (``Xref.export()``, what the commitlog
pass saw of each message, as ``verify --jobs`` does: as a file in the driver's :class:`~mqtool.io.Handoff`
when the executor can see it, else compressed in the task result), the merge appends them in commitlog
order and the consumequeue and index checks run on the driver against that table as the embedded verify
runs them (a file the table proves clean costs no per-entry loop; only a file it cannot prove takes the
Python loop, there as embedded; the index chains start on a driver thread while the tasks run,
:meth:`StorePlan.ahead`). A range that comes back without a table (an executor without the compiled lane, a
table file gone before the merge) sends the queue and index files to the executors as the tasks above, in
one more job.

The merge is the embedded :func:`mqtool.rocketmq.verify.verify_store` itself, given a runner that hands back
what the tasks found (``imap`` for the ranges, ``dispatch_pass``, ``each_file``), so the findings, their
order and the summary are those of a one-process run. A queue check needs two values only the whole
commitlog gives: where the data ends (units past it are ``cq-dangling``) and the highest queue offset
dispatched (``cq-behind``). The task runs without them and reports the queue's last queue offset and the
furthest end of its units; the merge adds ``cq-behind`` itself, and a queue with a unit past the end of data
(rare: a truncated or damaged log) is checked again with both values known, all such queues of a store in
one more job.
"""
from __future__ import annotations

import dataclasses
import os

from mqtool.errors import InputError
from mqtool.io import Handoff
from mqtool.ranges import split_segments
from mqtool.rocketmq import dispatch, indexfiles
from mqtool.rocketmq import verify as V
from mqtool.rocketmq.ops import verify_target
from mqtool.rocketmq.ranges import FAMILY, ROW_TASK_SPLIT
from mqtool.rocketmq.verify import index as VIDX, native_lane, verify_range_task
from mqtool.rocketmq.scan import CommitLogReader
from mqtool.rocketmq.store import RocketStore, cq_filter

# Relative cost of a task per byte of its input (bytes that hold data: queue and index files are written
# sparse), for packing tasks into partitions. A commitlog range is read once (~3 GB/s with the compiled lane,
# ~150 MB/s without); a consume-queue unit (20 bytes) decodes one message (measured on the bench store: ~0.5 s
# per MB of queue, ~0.15 s per MB of index file on one core).
QUEUE_COST = 200
INDEX_COST = 60
DISPATCH_COST = 1
# A store whose commitlog is at most this (and no --split-size asked for) is verified whole by one task: the
# embedded verify on one core, no table shipped back, nothing left for the driver but the findings. Measured
# (docs/spark.md, warm local[2]): a tiny store costs ~0.06 s as one task against ~0.16 s as ranges and a
# driver merge; at 256 MiB one task took 0.16 s, ranges 0.24 s (a bigger store gains from its ranges on
# several cores).
WHOLE_STORE_MAX = 256 << 20


def whole_task(args):
    """The embedded verify of a whole store in one task: (findings, summary)."""
    store, part, opts = args
    findings, summary_fn = V.verify_store(store, part, opts)
    return list(findings), summary_fn()


def dispatch_task(args):
    """The light dispatch pass of one segment: (dispatched_next, last store time, end of data or None)."""
    seg, opts = args
    ctx = V._Ctx(RocketStore(path=seg.path, segments=[seg]), opts)
    for _ in V._scan_for_dispatch(ctx):
        pass
    return ctx.dispatched_next, ctx.last_store_ts, ctx.data_end


def queue_task(args):
    """One queue's findings. With ``data_end``/``nxt`` None (first pass): (findings, complete, last queue
    offset, furthest unit end); with them: the findings of the embedded check."""
    store, opts, qf, data_end, nxt = args
    ctx = V._Ctx(store, opts)
    ctx.data_end = data_end
    if nxt is not None:
        ctx.dispatched_next[(qf.topic, qf.queue_id)] = nxt
    reader = CommitLogReader(store.segments, opts.max_message_size) if store.segments else None
    rules = dispatch.DispatchRules()
    done = []

    def check(q):
        yield from V._verify_queue(ctx, q, reader, rules)
        done.append(True)

    items = list(V._each_file(ctx, [qf], reader, check))
    if data_end is not None or not done:
        return items, bool(done), None, None
    try:
        last, end = queue_extent(qf)
    except InputError:
        return items, False, None, None
    return items, True, last, end


def queue_extent(qf) -> tuple[int, int]:
    """(queue offset of the last unit, furthest end of a valid unit) as :func:`V._verify_queue` sees them."""
    last, end = -1, 0
    for u in indexfiles.iter_cq_units(qf, include_zero=True):
        if u.is_zero:
            continue
        last = u.queue_offset
        if not u.is_blank_fill and u.offset >= 0 and u.size > 0:
            end = max(end, u.offset + u.size)
    return last, end


def index_task(args):
    store, opts, path, cp, geometry = args
    ctx = V._Ctx(store, opts)
    reader = CommitLogReader(store.segments, opts.max_message_size) if store.segments else None
    return list(V._each_file(ctx, [path], reader, lambda p: V._verify_index_file(ctx, p, reader, cp, geometry)))


def _size(path: str) -> int:
    """Bytes of ``path`` that hold data (an index file is written sparse: its size says little)."""
    try:
        st = os.stat(path)
    except OSError:
        return 0
    return min(st.st_size, getattr(st, "st_blocks", st.st_size // 512 + 1) * 512)


def _qkey(qf) -> tuple:
    return qf.topic, qf.queue_id, qf.dir


class StorePlan:
    """The tasks of ``verify <part>`` on one store; :meth:`merge` gives ``(findings, summary_fn)``."""

    def __init__(self, part: str, path, opts):
        self.part = part
        self.opts = opts
        self.store = store = verify_target(part, path)
        plain = self.plain = dataclasses.replace(opts, runner=None)
        self.tasks: list = []
        self.kinds: list = []          # (kind, key) per task
        self.index_ahead = None        # the index chains, started on the driver while the tasks run (ahead())
        self.driver_bytes = 0
        size = sum(s.size for s in store.segments)
        if store.segments and size <= WHOLE_STORE_MAX and not opts.split_size and not opts.salvage_out:
            self.xref = False
            self._add("whole", None, whole_task, (store, part, dataclasses.replace(plain, jobs=1, progress=False)),
                      size)          # (the file checks are compiled: the commitlog read dominates)
            return
        # verify store: the ranges bring their cross-reference tables back, the file checks run against them
        self.xref = (part == "store" and bool(store.segments) and not opts.salvage_out
                     and native_lane.new_xref(store.segments) is not None)
        # where tasks that share the driver's filesystem (local executors) leave their tables
        self.handoff = Handoff() if self.xref else None
        if part in ("store", "commitlog") and store.segments:
            split = opts.split_size or (ROW_TASK_SPLIT if opts.salvage_out else None)
            for r in split_segments(FAMILY, store.path, store.segments, split):
                self._add("range", r.index, range_task if self.xref else verify_range_task,
                          ((r, plain, True), self.handoff) if self.xref else (r, plain),
                          r.length)
        elif part in ("consumequeue", "index"):
            for s in store.segments:
                self._add("dispatch", s.path, dispatch_task, (s, plain), s.size * DISPATCH_COST)
        # what its results hold on the driver (mqtool.spark.verify.JOB_DRIVER_BYTES): the tables, ~40 bytes a
        # message (3.3 % of the bench store's commitlog), estimated as 1/16 of the commitlog
        self.driver_bytes = sum(s.size for s in store.segments) // 16 if self.xref else 0
        if self.xref:
            return
        if part in ("store", "consumequeue"):
            for qf in store.queues(*cq_filter(store)):
                self._add("queue", _qkey(qf), queue_task, (store, plain, qf, None, None),
                          sum(_size(f.path) for f in qf.files) * QUEUE_COST)
        if part in ("store", "index") and store.index_files:
            cp = _checkpoint(store)
            geos = indexfiles.index_geometries(store.index_files, opts)
            for p in store.index_files:
                self._add("index", p, index_task, (store, plain, p, cp, geos.of(p)), _size(p) * INDEX_COST)

    def ahead(self, files: int) -> int:
        """Start the index files' geometry and chain checks on a driver thread (:class:`ChainsAhead`, as the
        embedded verify runs them during its commitlog pass) when the merge will check them against the
        tables, at most ``files`` index files; called while the tasks run. Returns the files started."""
        store = self.store
        if (not self.xref or self.index_ahead is not None or not store.index_files or len(store.index_files) > files
                or sum(s.size for s in store.segments) < VIDX.AHEAD_MIN_BYTES):
            return 0
        chains = getattr(native_lane._native_lane(), "index_chains", None)
        if chains is None:
            return 0
        self.index_ahead = VIDX.ChainsAhead(V._Ctx(store, self.plain), chains)
        return len(store.index_files)

    def _add(self, kind, key, fn, arg, weight):
        self.tasks.append((fn, arg, weight))
        self.kinds.append((kind, key))

    def merge(self, results: list, runner):
        if self.kinds and self.kinds[0][0] == "whole":
            findings, summary = results[0]
            return iter(findings), lambda: summary
        got: dict = {}
        for (kind, key), res in zip(self.kinds, results):
            got.setdefault(kind, {})[key] = res
        replay = _Replay(self, got, runner)
        if self.xref:
            try:
                replay.xref = _merged_xref(self.store, [got["range"][k] for k in sorted(got.get("range", {}))],
                                           self.handoff)
            finally:
                self.handoff.close()
        opts = dataclasses.replace(self.opts, runner=replay)
        return V.verify_store(self.store, self.part, opts)


def _checkpoint(store):
    if store.checkpoint:
        try:
            return indexfiles.read_checkpoint(store.checkpoint)
        except Exception:           # as the embedded check: an unreadable checkpoint is no input
            return None
    return None


class PackedTable:
    """A range's cross-reference table (``Xref.export()`` bytes) compressed for its way back to the driver."""

    __slots__ = ("data",)

    def __init__(self, data: bytes):
        self.data = data


class LeftTable:
    """A range's cross-reference table left as a file in the driver's :class:`~mqtool.io.Handoff` (``name``,
    ``size`` bytes): a task that shares the driver's filesystem sends only this back."""

    __slots__ = ("name", "size")

    def __init__(self, name: str, size: int):
        self.name, self.size = name, size


def range_task(args):
    """:func:`verify_range_task` on an executor; its cross-reference table goes back to the driver as a file
    in the driver's handoff directory when this executor can see it (``local[N]``, or an executor on the
    driver's machine), else through Spark's task result, zstd-compressed (level 1). Measured at 2 GiB
    (docs/spark.md): the tables (~50 bytes a message, 71 MB) cross the Python worker, the JVM and the
    driver's Python with copies in each (~0.2 s of JVM CPU), plus ~0.1 s to compress and ~0.05 s to
    decompress them; as files they cost one write into the page cache and one copy out of a map."""
    targs, handoff = args
    res = verify_range_task(targs)
    if isinstance(res.xref, (bytes, bytearray)):
        name = handoff.put(f"xref-{targs[0].index}", res.xref) if handoff is not None else None
        if name is not None:
            res.xref = LeftTable(name, len(res.xref))
        else:
            import zstandard

            res.xref = PackedTable(zstandard.ZstdCompressor(level=1).compress(res.xref))
    return res


def _merged_xref(store, ranges: list, handoff=None):
    """The ranges' cross-reference tables appended in commitlog order (as ``verify --jobs`` merges them), each
    export dropped once merged; None when a range brought none back (then the file checks go to tasks)."""
    xref = native_lane.new_xref(store.segments)
    if xref is None:
        return None
    for res in ranges:
        blob, res.xref = res.xref, None
        if isinstance(blob, LeftTable):
            blob = handoff.take(blob.name, blob.size) if handoff is not None else None
        if blob is None:
            return None
        if isinstance(blob, PackedTable):
            import zstandard

            blob = zstandard.ZstdDecompressor().decompress(blob.data)
        try:
            xref.merge(blob)
        finally:
            if hasattr(blob, "close"):
                blob.close()
    return xref


class _Replay:
    """The runner the merge hands to the embedded verify: the tasks' results, in the embedded order."""

    jobs = 2

    def __init__(self, plan: StorePlan, got: dict, runner):
        self.plan = plan
        self.got = got
        self.runner = runner
        self.xref = None          # the merged cross-reference table (verify store, compiled lane)
        # the index chains the plan ran while the tasks did (verify/index.start_chains takes them)
        self.index_ahead = plan.index_ahead

    def imap(self, fn, items):
        items = list(items)
        ranges = self.got.get("range", {})
        if fn is not verify_range_task or len(items) != len(ranges):
            return self.runner.imap(fn, items)       # not what was planned: run it now
        return iter(ranges[r.index] for r, _ in items)

    def dispatch_pass(self, ctx) -> None:
        res = self.got.get("dispatch", {})
        for s in ctx.store.segments:
            if s.path not in res:
                dn, ts, end = dispatch_task((s, self.plan.plain))
            else:
                dn, ts, end = res[s.path]
            for k, v in dn.items():
                if v > ctx.dispatched_next.get(k, 0):
                    ctx.dispatched_next[k] = v
            ctx.last_store_ts = max(ctx.last_store_ts, ts)
            if end is not None:
                ctx.data_end = end

    def each_file(self, kind, ctx, items, reader, check):
        if self.xref is not None:
            # the embedded checks, here against the merged table (the commitlog pass ran as ranges)
            ctx.xref = self.xref
            yield from V._each_file(ctx, items, reader, check)
            return
        try:
            items = list(items)
            if kind == "queue":
                yield from self._queues(ctx, items, reader, check)
            else:
                res = self._index_results(ctx, items)
                for p in items:
                    if p not in res:
                        yield from V._each_file(ctx, [p], None, check)
                        continue
                    for f in res[p]:
                        ctx.summary.add(f)
                        yield f
        finally:
            if reader is not None:
                reader.close()

    def _index_results(self, ctx, items) -> dict:
        """The index tasks' results; files not planned as tasks (their ranges brought no table back) are run
        as tasks now, in one job."""
        res = self.got.get("index", {})
        todo = [p for p in items if p not in res]
        if todo and ctx.store.segments:
            plain, cp = self.plan.plain, _checkpoint(ctx.store)
            geos = indexfiles.index_geometries(ctx.store.index_files, plain)
            tasks = [(ctx.store, plain, p, cp, geos.of(p)) for p in todo]
            res = dict(res)
            res.update(zip(todo, self.runner.imap(index_task, tasks)))
        return res

    def _queues(self, ctx, items, reader, check):
        res = self.got.get("queue", {})
        end = ctx.data_end

        def again(key):
            r = res.get(key)
            return r is None or (r[1] and reader is not None and end is not None and r[3] > end)

        redo = [qf for qf in items if again(_qkey(qf))]
        redone = {}
        if redo:
            plain = self.plan.plain
            tasks = [(ctx.store, plain, qf, end, ctx.dispatched_next.get((qf.topic, qf.queue_id))) for qf in redo]
            redone = {_qkey(qf): r for qf, r in zip(redo, self.runner.imap(queue_task, tasks))}
        for qf in items:
            key = _qkey(qf)
            found, complete, last, _ = redone[key] if key in redone else res[key]
            for f in found:
                ctx.summary.add(f)
                yield f
            if last is not None and complete and reader is not None:     # (a first-pass result)
                yield from V._cq_behind(ctx, qf, last)


def plan(part: str, path, opts) -> StorePlan:
    return StorePlan(part, path, opts)
