"""Kafka verify as independent tasks plus an in-order merge (the family side of :mod:`mqtool.spark.verify`).

One task per segment: :meth:`KafkaVerifier.check_segment` (the ``.log`` pass: CRCs, offsets, records with
``--deep``, the recovery rule's canonical indexes; then the segment's ``.index``, ``.timeindex`` and
``.txnindex`` against what that pass saw), run as if the segment were the partition's first: no previous last
offset, no open transactions. What a segment's checks take from the segments before it is small, and the
driver judges it per segment when it folds the results in order with the embedded walk
(:meth:`KafkaVerifier.run_logdirs` with ``check_segment`` replaced):

* offset continuity: only the batches up to the first one whose CRC holds are compared with the previous
  segment's last offset (after it the segment's own batches are the reference). The task returns those
  batches (``SegmentSeen.head``); when they all start after the previous last offset, directly after it or
  (the first batch) past a gap, the segment's findings are those the one-process walk gives, and a gap is
  the ``boundary_gap`` the partition's ``segment-gap`` check judges;
* transactions open across a segment boundary (``ProducerStateManager``'s view, which the canonical
  ``.txnindex`` entries depend on): when none is open at the segment's start, or the segment holds no
  transactional batch, the task's view is the true one;
* anything else is checked again with the true state, in follow-up tasks (one more small job on the
  executors): a segment starting at or below the previous last offset or with a second gap in its first
  batches (the whole segment again, :func:`segment_task` given its start state), and the ``.txnindex`` of a
  segment with transactional batches into which a transaction was open (:func:`txnindex_task`, against the
  replayed aborted list). The state a segment starts with (the previous last offset, the open transactions)
  follows from the first tasks' results alone — the last offset after a segment is the greater of the one
  before it and the segment's own, and the partition's transactions change only with the transactional
  batches each task logged — so the merge first folds those (:meth:`StorePlan.followups`) to find every
  check to run again and what it starts with, runs them all at once, then folds the findings in order. A
  check whose start state turns out not to be the one the walk reaches (only if a file changed between the
  jobs) runs on the driver, counted in ``driver_checks``, so the findings are always those of one process.

KRaft snapshot logs (``bootstrap.checkpoint``, ``<offset>-<epoch>.checkpoint``) are tasks of their own. What
is left on the driver reads no log: the fold, and per partition the index interval, segment gaps, orphans,
producer snapshots and the leader-epoch checkpoint against the batches' epochs, per log dir the checkpoint
files against every partition's log end (small files), as in one process.

``--salvage-out`` runs embedded on the driver (the salvage file is written there).
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

from mqtool.findings import Summary
from mqtool.kafka.interval import index_interval
from mqtool.kafka.ops import _targets, verify as embedded_verify
from mqtool.kafka.rebuild.txn import TxnTracker
from mqtool.kafka.verify import KafkaVerifier, SegmentSeen


class _Logged(TxnTracker):
    """A tracker that logs what it is fed (the transactional batches: all that can change its state), so that
    the driver can feed the same to the partition's true tracker."""

    def __init__(self):
        super().__init__()
        self.fed: list = []

    def observe(self, b, control_type):
        if b.is_transactional and b.producer_id >= 0:
            self.fed.append((_Fed(b.producer_id, b.is_control, b.base_offset, b.last_offset), control_type))
        return super().observe(b, control_type)


@dataclasses.dataclass(frozen=True)
class _Fed:
    """What :meth:`TxnTracker.observe` reads of a batch."""

    producer_id: int
    is_control: bool
    base_offset: int | None
    last_offset: int
    is_transactional: bool = True


@dataclasses.dataclass
class SegmentResult:
    findings: list
    txn_at: int                    # findings[txn_at:] are the .txnindex check's
    prev_last: int | None          # the last offset after the segment, had no segment come before it
    seen: SegmentSeen              # what the partition's checks need of it (per-batch maps dropped)
    fed: list                      # the transactional batches, as _Logged got them
    stats: dict
    messages: int
    skipped: tuple                 # (ranges, bytes)

    def exact_after(self, prev_last):
        """(True, boundary gap or None) when these findings are those of the walk arriving with ``prev_last``
        (as far as offsets go); (False, None) when the segment must be checked again."""
        if prev_last is None:
            return True, None
        head = self.seen.head or []
        for i, (base, last, ok) in enumerate(head):
            if base <= prev_last or (i > 0 and base != prev_last + 1) or (ok and last < prev_last):
                return False, None
        gap = (prev_last, head[0][0]) if head and head[0][0] != prev_last + 1 else None
        return True, gap


def segment_task(args) -> SegmentResult:
    """The checks of one segment (:meth:`KafkaVerifier.check_segment`) as if it began its partition, or,
    given ``start`` = (previous last offset, open transactions), as the one-process walk arrives at it."""
    seg, opts, part, interval, active, only_kind, *start = args
    v = KafkaVerifier(opts, part)
    if interval is not None:        # else the default, as run_partition leaves it for `verify commitlog`
        v.interval = interval
    seen = SegmentSeen(seg.base_offset)
    txn = _Logged()
    prev_last = None
    if start:
        prev_last, ongoing = start[0]
        txn.ongoing = dict(ongoing)
    else:
        seen.head = []
    items: list = []
    txn_at = []
    txn_check = v.check_txn_index

    def marked(seg, seen):
        txn_at.append(len(items))
        return txn_check(seg, seen)

    v.check_txn_index = marked
    gen = v.check_segment(seg, seen, txn, prev_last, active, only_kind)
    while True:
        try:
            items.append(next(gen))
        except StopIteration as stop:
            prev_last = stop.value
            break
    seen.by_position, seen.by_last = {}, {}             # used up by the task
    if seen.canonical is not None:
        seen.canonical.offset_entries, seen.canonical.time_entries = [], []
    return SegmentResult(items, txn_at[0] if txn_at else len(items), prev_last, seen, txn.fed, v.stats,
                         v.messages, (v.summary.skipped_ranges, v.summary.skipped_bytes))


def txnindex_task(args) -> list:
    """A segment's ``.txnindex`` checked against the aborted transactions the recovery rule gives with the
    partition's true open transactions (``aborted``) and the ABORT markers its task saw (``aborts``)."""
    seg, opts, part, aborted, aborts = args
    v = KafkaVerifier(opts, part)
    seen = SegmentSeen(seg.base_offset)
    seen.canonical = _Canonical(aborted)
    seen.aborts = aborts
    return list(v._guard(v.check_txn_index(seg, seen)))


def snapshot_task(args) -> SegmentResult:
    """A KRaft snapshot log's checks (:meth:`KafkaVerifier.check_snapshot_log`: a walk of its own)."""
    path, opts, part = args
    v = KafkaVerifier(opts, part)
    items = list(v._guard(v.check_snapshot_log(path)))
    return SegmentResult(items, len(items), None, None, [], v.stats, v.messages,
                         (v.summary.skipped_ranges, v.summary.skipped_bytes))


@dataclasses.dataclass
class _Canonical:
    """What :meth:`KafkaVerifier.check_txn_index` reads of the recovery rule's indexes."""

    aborted: list = dataclasses.field(default_factory=list)


def _after(prev_last, own):
    """The last offset after a segment: the greater of the one before it and the segment's own."""
    if prev_last is None or own is None:
        return own if prev_last is None else prev_last
    return max(prev_last, own)


def _file_size(f) -> int:
    try:
        return f.stat().st_size if f is not None else 0
    except OSError:
        return 0


def _size(seg) -> int:
    return sum(_file_size(f) for f in (seg.log, seg.index, seg.timeindex, seg.txnindex))


class _Merged(KafkaVerifier):
    """:class:`KafkaVerifier` whose segments were checked by the tasks (or again by follow-up tasks, see the
    module; on the driver only when their start state was not foreseen)."""

    def __init__(self, opts, part, results: list, order: list, again: dict, replays: dict, snapshots: dict):
        super().__init__(opts, part)
        self._results = results
        self._order = iter(order)     # task index of each segment, in the walk's order
        self._snapshots = snapshots   # KRaft snapshot path -> SegmentResult
        self._again = again           # task index -> ((prev_last, open transactions), SegmentResult)
        self._replays = replays       # task index -> (aborted, the .txnindex check's findings)
        self.rechecked = 0            # segments checked again with their true start state (follow-up tasks)
        self.replayed = 0             # segments whose transactions were open at their start
        self.driver_checks = 0        # segment or .txnindex checks run on the driver (none unless a file changed)

    def check_segment(self, seg, seen, txn, prev_last, active, only_kind=None):
        i = next(self._order)
        r: SegmentResult = self._results[i]
        if i in self._again:
            start, r = self._again[i]
            if start != (prev_last, txn.ongoing):
                self.driver_checks += 1
                return (yield from super().check_segment(seg, seen, txn, prev_last, active, only_kind))
            self.rechecked += 1
            vars(seen).update(vars(r.seen))
            for b, ctype in r.fed:
                txn.observe(b, ctype)
            yield from self._fold(r, r.findings)
            return r.prev_last if r.prev_last is not None else prev_last
        exact, gap = r.exact_after(prev_last)
        if not exact:                   # the merge's own fold foresees these: not reached
            self.driver_checks += 1
            return (yield from super().check_segment(seg, seen, txn, prev_last, active, only_kind))
        vars(seen).update(vars(r.seen))
        seen.head = None
        seen.boundary_gap = gap
        findings, txn_findings, on_driver = r.findings, [], False
        if r.fed:
            # the segment's transactional batches fed to the partition's tracker: the recovery rule's aborted
            # transactions differ from the task's only when some were open at the segment's start
            aborted = [a for a in (txn.observe(b, ctype) for b, ctype in r.fed) if a is not None]
            if seen.canonical is not None and aborted != seen.canonical.aborted:
                seen.canonical.aborted = aborted
                self.replayed += 1
                findings = findings[:r.txn_at]      # the .txnindex check's findings: again, against these
                if self.part in ("store", "index") and only_kind in (None, "txnindex", "log"):
                    redo = self._replays.get(i)
                    if redo is not None and redo[0] == aborted:
                        txn_findings = redo[1]
                    else:
                        on_driver = True
        yield from self._fold(r, findings + txn_findings)
        if on_driver:
            self.driver_checks += 1
            yield from self._guard(self.check_txn_index(seg, seen))
        return r.prev_last if r.prev_last is not None else prev_last

    def check_snapshot_log(self, path):
        r = self._snapshots.pop(str(path), None)
        if r is None:                   # planned for every snapshot the walk meets: not reached
            self.driver_checks += 1
            return (yield from super().check_snapshot_log(path))
        yield from self._fold(r, r.findings)

    def _fold(self, r: SegmentResult, findings: list):
        for f in findings:
            self.summary.add(f)
            yield f
        for k, n in r.stats.items():
            self.stats[k] = self.stats.get(k, 0) + n
        self.messages += r.messages
        self.summary.skipped_ranges += r.skipped[0]
        self.summary.skipped_bytes += r.skipped[1]


def _followup(item):
    fn, arg = item
    return fn(arg)


class StorePlan:
    def __init__(self, part: str, path, opts):
        self.part, self.path, self.opts = part, path, opts
        self.tasks: list = []
        self.partitions: list = []           # per partition, the indexes of its segments' tasks, in order
        self.snapshots: list = []            # (KRaft snapshot path, task index)
        if getattr(opts, "salvage_out", None) or part not in ("store", "commitlog", "index"):
            return                   # embedded on the driver (salvage file; the usage error of a wrong part)
        self.logdirs, self.only_base, self.only_kind = _targets(Path(path))
        self.plain = plain = dataclasses.replace(opts, runner=None)
        whole = self.only_base is None
        for ld in self.logdirs:
            if ld.bootstrap_checkpoint is not None and whole:
                self._snapshot(ld.bootstrap_checkpoint)
            for p in ld.partitions:
                for _end, _epoch, f in (p.kraft_snapshots if whole else ()):
                    self._snapshot(f)
                # the partition's index interval, as run_partition decides it on the driver
                interval = index_interval(p, opts).value if part in ("store", "index") else None
                self.partitions.append([])
                for seg in p.segments:
                    if self.only_base is not None and seg.base_offset != self.only_base:
                        continue
                    self.partitions[-1].append(len(self.tasks))
                    self.tasks.append((segment_task, (seg, plain, part, interval, seg is p.segments[-1],
                                                      self.only_kind), _size(seg)))

    def _snapshot(self, path) -> None:
        self.snapshots.append((str(path), len(self.tasks)))
        self.tasks.append((snapshot_task, (path, self.plain, self.part), _file_size(path)))

    def followups(self, results: list) -> tuple[dict, dict]:
        """The fold of the first tasks' results, partition by partition, without their findings: the segments
        to check again with the state they start with ``{task index: (previous last offset, open
        transactions)}``, and the ``.txnindex`` checks to run again ``{task index: aborted transactions}``."""
        again, replays = {}, {}
        txn_checked = self.part in ("store", "index") and self.only_kind in (None, "txnindex", "log")
        for idxs in self.partitions:
            prev_last, txn = None, TxnTracker()
            for i in idxs:
                r: SegmentResult = results[i]
                if not r.exact_after(prev_last)[0]:
                    again[i] = (prev_last, dict(txn.ongoing))
                    for b, ctype in r.fed:
                        txn.observe(b, ctype)
                elif r.fed:
                    aborted = [a for a in (txn.observe(b, ctype) for b, ctype in r.fed) if a is not None]
                    if txn_checked and r.seen.canonical is not None and aborted != r.seen.canonical.aborted:
                        replays[i] = aborted
                prev_last = _after(prev_last, r.prev_last)
        return again, replays

    def merge(self, results: list, runner):
        if not hasattr(self, "logdirs"):
            return embedded_verify(self.part, self.path, self.opts)
        again, replays = self.followups(results)
        items = [(segment_task, self.tasks[i][1] + (start,)) for i, start in again.items()]
        for i, aborted in replays.items():
            seg = self.tasks[i][1][0]
            items.append((txnindex_task, (seg, self.plain, self.part, aborted, results[i].seen.aborts)))
        out = list(runner.imap(_followup, items) if runner is not None and items else map(_followup, items))
        done = iter(out)
        again = {i: (start, next(done)) for i, start in again.items()}
        replays = {i: (aborted, next(done)) for i, aborted in replays.items()}
        snapshots = {path: results[i] for path, i in self.snapshots}
        order = [i for idxs in self.partitions for i in idxs]        # the segments as the walk meets them
        v = self.verifier = _Merged(self.opts, self.part, results, order, again, replays, snapshots)

        def summary() -> Summary:
            s = v.summary
            s.messages = v.messages
            return s

        return v.run_logdirs(self.logdirs, self.only_base, self.only_kind), summary


def plan(part: str, path, opts) -> StorePlan:
    return StorePlan(part, path, opts)
