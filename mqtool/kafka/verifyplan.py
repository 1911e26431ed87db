"""Kafka verify as independent tasks plus an in-order merge (the family side of :mod:`mqtool.spark.verify`).

One task per partition directory: the whole partition check of :meth:`KafkaVerifier.run_partition` (every
``.log`` segment in offset order with its producer-state and offset-continuity tracking, the ``.index``,
``.timeindex``, ``.txnindex`` of each segment against what that pass saw, segment gaps, KRaft snapshots,
orphans, producer snapshots and the leader-epoch checkpoint against the log). The merge is
:meth:`KafkaVerifier.run_logdirs` with ``run_partition`` replaced by the tasks' results, so the log-dir
checkpoints (which need every partition's log end) and the summary come out as in one process.

``--salvage-out`` runs embedded on the driver (the salvage file is written there).
"""
from __future__ import annotations

from pathlib import Path

from mqtool.findings import Summary
from mqtool.kafka.ops import _targets, verify as embedded_verify
from mqtool.kafka.verify import KafkaVerifier


def partition_task(args):
    """(findings, log end offset, stats, index intervals, messages, skipped (ranges, bytes)) of one partition."""
    p, opts, part, only_base, only_kind = args
    v = KafkaVerifier(opts, part)
    gen = v.run_partition(p, only_base, only_kind)
    items = []
    while True:
        try:
            items.append(next(gen))
        except StopIteration as stop:
            leo = stop.value
            break
    return items, leo, v.stats, v.intervals, v.messages, (v.summary.skipped_ranges, v.summary.skipped_bytes)


def _size(p) -> int:
    total = 0
    for seg in p.segments:
        for f in (seg.log, seg.index, seg.timeindex, seg.txnindex):
            try:
                total += f.stat().st_size if f is not None else 0
            except OSError:
                pass
    return total


class _Merged(KafkaVerifier):
    """:class:`KafkaVerifier` whose partitions were checked by the tasks."""

    def __init__(self, opts, part, results: list):
        super().__init__(opts, part)
        self._results = iter(results)

    def run_partition(self, p, only_base=None, only_kind=None):
        items, leo, stats, intervals, messages, (ranges, skipped) = next(self._results)
        for f in items:
            self.summary.add(f)
            yield f
        for k, n in stats.items():
            self.stats[k] = self.stats.get(k, 0) + n
        self.intervals.update(intervals)
        self.messages += messages
        self.summary.skipped_ranges += ranges
        self.summary.skipped_bytes += skipped
        return leo


class StorePlan:
    def __init__(self, part: str, path, opts):
        import dataclasses

        self.part, self.path, self.opts = part, path, opts
        self.tasks: list = []
        if getattr(opts, "salvage_out", None) or part not in ("store", "commitlog", "index"):
            return                   # embedded on the driver (salvage file; the usage error of a wrong part)
        self.logdirs, self.only_base, self.only_kind = _targets(Path(path))
        plain = dataclasses.replace(opts, runner=None)
        for ld in self.logdirs:
            for p in ld.partitions:
                self.tasks.append((partition_task, (p, plain, part, self.only_base, self.only_kind), _size(p)))

    def merge(self, results: list, runner):
        if not hasattr(self, "logdirs"):
            return embedded_verify(self.part, self.path, self.opts)
        v = _Merged(self.opts, self.part, results)

        def summary() -> Summary:
            s = v.summary
            s.messages = v.messages
            return s

        return v.run_logdirs(self.logdirs, self.only_base, self.only_kind), summary


def plan(part: str, path, opts) -> StorePlan:
    return StorePlan(part, path, opts)
