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
* anything else (a segment starting at or below the previous last offset, a second gap in its first
  batches, a transaction open across the boundary into a segment with transactional batches) is checked
  again on the driver with the true state, so findings are always those of one process.

Everything per partition (the index interval, segment gaps, KRaft snapshots, orphans, producer snapshots,
the leader-epoch checkpoint against the batches' epochs) and per log dir (the checkpoint files against every
partition's log end) runs on the driver from the segments' summaries, as in one process.

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
    """The checks of one segment (:meth:`KafkaVerifier.check_segment`) as if it began its partition."""
    seg, opts, part, interval, active, only_kind = args
    v = KafkaVerifier(opts, part)
    if interval is not None:        # else the default, as run_partition leaves it for `verify commitlog`
        v.interval = interval
    seen = SegmentSeen(seg.base_offset)
    seen.head = []
    txn = _Logged()
    items: list = []
    txn_at = []
    txn_check = v.check_txn_index

    def marked(seg, seen):
        txn_at.append(len(items))
        return txn_check(seg, seen)

    v.check_txn_index = marked
    gen = v.check_segment(seg, seen, txn, None, active, only_kind)
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


def _size(seg) -> int:
    total = 0
    for f in (seg.log, seg.index, seg.timeindex, seg.txnindex):
        try:
            total += f.stat().st_size if f is not None else 0
        except OSError:
            pass
    return total


class _Merged(KafkaVerifier):
    """:class:`KafkaVerifier` whose segments were checked by the tasks (or again here, see the module)."""

    def __init__(self, opts, part, results: list):
        super().__init__(opts, part)
        self._results = iter(results)
        self.rechecked = 0          # segments checked again here (offsets overlapping the previous segment's)
        self.replayed = 0           # segments whose transactions were open at their start

    def check_segment(self, seg, seen, txn, prev_last, active, only_kind=None):
        r: SegmentResult = next(self._results)
        exact, gap = r.exact_after(prev_last)
        if not exact:
            self.rechecked += 1
            return (yield from super().check_segment(seg, seen, txn, prev_last, active, only_kind))
        vars(seen).update(vars(r.seen))
        seen.head = None
        seen.boundary_gap = gap
        findings, redo = r.findings, False
        if r.fed:
            # the segment's transactional batches fed to the partition's tracker: the recovery rule's aborted
            # transactions differ from the task's only when some were open at the segment's start
            aborted = [a for a in (txn.observe(b, ctype) for b, ctype in r.fed) if a is not None]
            if seen.canonical is not None and aborted != seen.canonical.aborted:
                seen.canonical.aborted = aborted
                self.replayed += 1
                findings = findings[:r.txn_at]      # the .txnindex check's findings: again, against these
                redo = self.part in ("store", "index") and only_kind in (None, "txnindex", "log")
        for f in findings:
            self.summary.add(f)
            yield f
        if redo:
            yield from self._guard(self.check_txn_index(seg, seen))
        for k, n in r.stats.items():
            self.stats[k] = self.stats.get(k, 0) + n
        self.messages += r.messages
        self.summary.skipped_ranges += r.skipped[0]
        self.summary.skipped_bytes += r.skipped[1]
        return r.prev_last if r.prev_last is not None else prev_last


class StorePlan:
    def __init__(self, part: str, path, opts):
        self.part, self.path, self.opts = part, path, opts
        self.tasks: list = []
        if getattr(opts, "salvage_out", None) or part not in ("store", "commitlog", "index"):
            return                   # embedded on the driver (salvage file; the usage error of a wrong part)
        self.logdirs, self.only_base, self.only_kind = _targets(Path(path))
        plain = dataclasses.replace(opts, runner=None)
        for ld in self.logdirs:
            for p in ld.partitions:
                # the partition's index interval, as run_partition decides it on the driver
                interval = index_interval(p, opts).value if part in ("store", "index") else None
                for seg in p.segments:
                    if self.only_base is not None and seg.base_offset != self.only_base:
                        continue
                    self.tasks.append((segment_task, (seg, plain, part, interval, seg is p.segments[-1],
                                                      self.only_kind), _size(seg)))

    def merge(self, results: list, runner):
        if not hasattr(self, "logdirs"):
            return embedded_verify(self.part, self.path, self.opts)
        v = self.verifier = _Merged(self.opts, self.part, results)

        def summary() -> Summary:
            s = v.summary
            s.messages = v.messages
            return s

        return v.run_logdirs(self.logdirs, self.only_base, self.only_kind), summary


def plan(part: str, path, opts) -> StorePlan:
    return StorePlan(part, path, opts)
