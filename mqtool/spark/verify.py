"""``verify --engine spark``: every store of a run in one Spark job, the driver only merges.

Each family plans its verify as independent tasks (``mqtool.<family>.verifyplan``: ``plan(part, path,
opts)`` → an object with ``tasks``, a list of ``(function, argument, weight)`` with module-level picklable
functions, and ``merge(results, runner)`` → ``(findings, summary_fn)`` exactly as ``ops.verify`` gives them):

* RocketMQ: a store of at most ``WHOLE_STORE_MAX`` of commitlog is one task (the embedded verify); else
  commitlog byte ranges; for ``verify store`` they bring back the commitlog pass's cross-reference
  table and the driver checks the consume queues and index files against it (compiled), else one task per
  consume queue and one per index file (cross-file checks read the commitlog at random on the executor; a
  queue with units past the end of data is checked again in one more small job once the end is known);
* Kafka: one task per segment (its ``.log`` pass and its index files against it) and per KRaft snapshot; a
  segment whose checks depend on the segments before it (offsets overlapping them, transactions open into
  it) is checked again in one more small job, with the start state the first results imply; the driver
  folds them in order with the partition's offset continuity and open transactions, and runs the
  per-partition checks (segment gaps, leader epochs, checkpoints) from their summaries;
* LiteMQ: one task per byte range of the commitlog (the live-chain walk and each record's own checks); the
  driver folds the ranges in order (the end of the live data, the store-time regression, what follows the
  end) and runs the consume-queue, marker and index checks against the live records.

The tasks of all stores are packed, in order, into partitions of about equal estimated cost (``weight``) and
run as one job (several, one after the other as the merge reaches them, when the results the driver would
hold -- a plan's optional ``driver_bytes`` estimate, e.g. RocketMQ's tables -- exceed
:data:`JOB_DRIVER_BYTES`); the results come back in order and each store's merge replays them through the embedded
verify code, so the findings (codes, severities, positions, messages, order, ids and causes given by the
CLI's linker) and the summary are those of ``--engine local``.
"""
from __future__ import annotations

import os

from mqtool.errors import MqToolError

# Partitions per core of the cluster at most (more, smaller tasks balance better) ...
PARTITIONS_PER_CORE = 4
# ... but a partition carries at least this much estimated work (task weights are bytes of commitlog-like
# input): each costs Spark ~40 ms of CPU of its own (~12 ms in the Python worker, ~11 ms in the JVM, and its
# share of the result's copies; measured on local[2] with 64 empty tasks and with the 2 GiB bench store,
# where 8 partitions took ~0.2 s more CPU than 2), about what the compiled commitlog pass spends on 100 MiB.
# With the tables no longer crossing Spark (RocketMQ's handoff) a partition still costs ~25 ms of CPU and ~45 ms
# of wall time (the 512 MiB bench store as 4 partitions instead of 2: +0.05 s CPU, +0.09 s at load 3); the
# commitlog pass spends ~0.1-0.2 s of CPU on 512 MiB. With 1 GiB a partition's own cost stays near 10 % of its
# work (a 2 GiB store: 2 partitions on 2 cores, one wave); a run with less work than the cores get still has
# one partition per core.
PARTITION_MIN_WEIGHT = 1 << 30
# What the results of one job may hold on the driver at most (plans' ``driver_bytes``; one store is one job
# whatever its size): the stores of a bigger run go in several jobs, each run when the merge reaches it.
JOB_DRIVER_BYTES = 512 << 20
# Files a job's plans may check ahead on the driver while its tasks run (``plan.ahead(files)``: each holds its
# file mapped and its results until that store's merge).
AHEAD_FILES = 64


class Planned:
    """One store of the run: its plan (or the error opening it raised, re-raised at its turn)."""

    def __init__(self, path, family=None, plan=None, error=None, start=0):
        self.path, self.family, self.plan, self.error, self.start = path, family, plan, error, start
        self.job = None
        self.results = None


class _Job:
    """The tasks of consecutive stores, run as one Spark job the first time one of them is merged."""

    def __init__(self, spark, part: str, runner):
        self.spark, self.part, self.runner = spark, part, runner
        self.planned: list[Planned] = []
        self.tasks: list = []
        self.driver_bytes = 0

    def add(self, p: Planned) -> None:
        p.start, p.job = len(self.tasks), self
        self.planned.append(p)
        self.tasks.extend(p.plan.tasks)
        self.driver_bytes += getattr(p.plan, "driver_bytes", 0)

    def run(self) -> None:
        from mqtool.spark.session import describe

        describe(self.spark, "mqtool verify",
                 f"mqtool verify {self.part}: {len(self.planned)} store(s), {len(self.tasks)} task(s)")
        # driver work that needs no task result, on threads while the tasks run (e.g. RocketMQ's index chains)
        left = AHEAD_FILES
        for p in self.planned:
            if left > 0 and hasattr(p.plan, "ahead"):
                left -= p.plan.ahead(left)
        results, self.tasks = self.runner.run(self.tasks), []
        for p in self.planned:
            p.results = results[p.start:p.start + len(p.plan.tasks)]
            p.runner = self.runner
            p.job = None


def _run_group(group):
    return [fn(arg) for fn, arg in group]


def partitions_for(tasks: list, cores: int) -> int:
    """How many partitions the tasks are packed into on ``cores`` cores: one per
    :data:`PARTITION_MIN_WEIGHT` of their total weight, at least one per core, at most
    :data:`PARTITIONS_PER_CORE` per core."""
    cores = max(1, cores)
    total = sum(max(1, w) for _, _, w in tasks)
    return min(PARTITIONS_PER_CORE * cores, max(cores, -(-total // PARTITION_MIN_WEIGHT)))


def pack(tasks: list, parts_max: int) -> list[tuple[int, list]]:
    """Consecutive tasks grouped into at most about ``parts_max`` groups of similar total weight, as
    ``(weight, [(function, argument), ...])``."""
    total = sum(max(1, w) for _, _, w in tasks)
    target = max(1, total // max(1, parts_max))
    groups, cur, acc = [], [], 0
    for fn, arg, w in tasks:
        w = max(1, w)
        if cur and acc + w > target:        # a heavy task starts a group of its own
            groups.append((acc, cur))
            cur, acc = [], 0
        cur.append((fn, arg))
        acc += w
        if acc >= target:
            groups.append((acc, cur))
            cur, acc = [], 0
    if cur:
        groups.append((acc, cur))
    return groups


class TaskRunner:
    """Runs (function, argument) tasks as one Spark job, results in order; ``imap`` for follow-up tasks."""

    jobs = 2

    def __init__(self, spark, what: str = "verify on Spark"):
        self.spark = spark
        self.what = what

    def run(self, tasks: list) -> list:
        if not tasks:
            return []
        from mqtool.spark.session import InDir, context_of, spark_errors

        sc = context_of(self.spark)
        groups = pack(tasks, partitions_for(tasks, sc.defaultParallelism))
        # heaviest first (Spark starts partitions in their order: a big index file or partition must not
        # start last), put back in plan order after the collect
        order = sorted(range(len(groups)), key=lambda i: -groups[i][0])
        rdd = sc.parallelize([groups[i][1] for i in order], len(groups)).map(InDir(_run_group, os.getcwd()))
        with spark_errors(self.what):
            out = rdd.collect()
        back: list = [None] * len(groups)
        for i, res in zip(order, out):
            back[i] = res
        return [r for g in back for r in g]

    def imap(self, fn, items):
        return iter(self.run([(fn, it, 1) for it in items]))


def verify_plans(spark, part: str, paths, fmt, opts) -> list[Planned]:
    """Plan every store and run their tasks: one Spark job, or several (:data:`JOB_DRIVER_BYTES`), the first
    now, the others when :func:`merged` reaches them; returns the plans (call :func:`merged` in order)."""
    from mqtool.detect import detect, family_module

    planned: list[Planned] = []
    runner = TaskRunner(spark)
    jobs = [_Job(spark, part, runner)]
    for path in paths:
        try:
            family = detect(path, fmt)
            plan = family_module(family, "verifyplan").plan(part, path, opts)
        except MqToolError as e:
            planned.append(Planned(path, error=e))
            continue
        p = Planned(path, family, plan)
        if jobs[-1].planned and jobs[-1].driver_bytes + getattr(plan, "driver_bytes", 0) > JOB_DRIVER_BYTES:
            jobs.append(_Job(spark, part, runner))
        jobs[-1].add(p)
        planned.append(p)
    jobs[0].run()
    return planned


def merged(p: Planned):
    """``(findings, summary_fn)`` of one planned store (raises the error its planning met); its job runs now
    when it has not yet run."""
    if p.error is not None:
        raise p.error
    if p.job is not None:
        p.job.run()
    results, p.results = p.results, None         # (held by the merge only)
    return p.plan.merge(results, p.runner)
