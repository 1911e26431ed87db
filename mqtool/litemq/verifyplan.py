"""LiteMQ verify as range tasks plus an in-order fold (the family side of :mod:`mqtool.spark.verify`).

LiteMQ's checks hang on one walk of the live chain: records back to back from byte 0 of the first file through
every exactly-full file up to the end of data (see :mod:`mqtool.litemq.scan`). The tasks are the commitlog's
byte ranges (:func:`mqtool.litemq.ranges.plan`): each hops the length prefixes from its file's start to its
first record (memoised per worker) and decodes the live records that start in it, as if every earlier file
were exactly full; per record it returns the record's own checks and what the cross-file checks keep of it
(:func:`mqtool.litemq.verify.run.check_record`), plus its store times (``TimeTrack``) and where the chain ended
in it, if it did.

The driver folds the ranges in order into the walk's events (:func:`folded`): the file list's own findings
(``walk_prologue``), each range's records, the store-time regression at the first record older by more than
1 s than every record before it (from the ranges' times, as ``dump --jobs`` does), and at the first range
where the chain ends, everything after the end (``walk_tail``: the end event, the carved stale / after-gap
records of that file and the later ones, their totals), read on the driver; the ranges after it are dropped.
Those events go through the embedded :func:`~mqtool.litemq.verify.run.run_verify`, which then runs the
consume-queue, marker and index checks against the live records, so findings, their order and the summary are
those of one process.

``--salvage-out`` runs embedded on the driver (the salvage file is written there).
"""
from __future__ import annotations

import dataclasses

from mqtool.errors import MqToolError
from mqtool.litemq.ops import verify as embedded_verify
from mqtool.litemq.ranges import TimeTrack, _first_regression, _store, plan as range_plan, range_records
from mqtool.litemq.scan import WalkResult, regression_damage, walk_prologue, walk_tail
from mqtool.litemq.store import resolve
from mqtool.litemq.verify.run import check_record, run_verify

#: Range size of the tasks when ``--split-size`` is not given.
TASK_SPLIT = 32 * 1024 * 1024


@dataclasses.dataclass
class RangeResult:
    checked: list               # Checked per live record starting in the range
    times: TimeTrack
    end: tuple | None           # (position, problem) where the live chain ended in the range
    error: MqToolError | None   # the file could not be read (raised at the range's turn, as the walk would)


def range_task(args) -> RangeResult:
    rng, max_message_size = args
    ends: list = []
    times = TimeTrack()
    checked = []
    try:
        for rec in range_records(rng, False, lambda prob, pos: ends.append((pos, prob)), earlier_full=True):
            times.see(rec)
            checked.append(check_record(rec, max_message_size))
    except MqToolError as e:
        return RangeResult(checked, times, None, e)
    return RangeResult(checked, times, ends[0] if ends else None, None)


def folded(path: str, ranges: list, results: list, res: WalkResult):
    """The events of :func:`mqtool.litemq.scan.walk` (``carve_stale``) from the ranges' results, in order."""
    store, segs, fs = _store(path)
    res.file_size = fs
    yield from walk_prologue(store, segs, fs)
    if not segs:
        return
    for rng, r in zip(ranges, results):
        if r.error is not None:
            raise r.error
        name = store.display(segs[rng.seg_index].path)
        reg = None if res.regressed else _first_regression(r.times, res.max_live_ts)
        for c in r.checked:
            if reg is not None and c.position == reg[0]:
                res.regressed = True
                pos, off, ts, newest = reg
                yield regression_damage(name, pos, off, newest, ts)
            res.live += 1
            yield c
        t = r.times.max_ts
        if t is not None and (res.max_live_ts is None or t > res.max_live_ts):
            res.max_live_ts = t
        if r.end is not None:       # the live data ends here: later ranges hold no live records
            pos, prob = r.end
            yield from walk_tail(store, segs, rng.seg_index, pos, prob, res, True)
            return


class StorePlan:
    def __init__(self, part: str, path, opts):
        self.part, self.path, self.opts = part, str(path), opts
        self.tasks: list = []
        resolve(path)                # not a LiteMQ store: the usage error here, on the driver
        if getattr(opts, "salvage_out", None):
            return
        self.ranges = range_plan(self.path, opts.split_size or TASK_SPLIT)
        self.tasks = [(range_task, (r, opts.max_message_size), max(1, r.length)) for r in self.ranges]

    def merge(self, results: list, runner):
        if not self.tasks:
            return embedded_verify(self.part, self.path, self.opts)
        res = WalkResult()
        return run_verify(self.part, resolve(self.path), self.opts, folded(self.path, self.ranges, results, res),
                          res)


def plan(part: str, path, opts) -> StorePlan:
    return StorePlan(part, path, opts)
