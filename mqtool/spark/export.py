"""``export --engine spark``: the local engine's range tasks run as Spark tasks.

Each byte range of every store is written by an executor straight into Parquet files with pyarrow (the
column lane of the family where it has one), exactly as ``--engine local`` writes it in a process pool
(:func:`mqtool.export.export_local`): the same files, the same rows, the same damage count. Spark schedules
the tasks (ranges packed into partitions of about ``--partition-size`` bytes, at most ``--max-partitions``)
and reports their failures; its own row conversion and Parquet writer are not involved (on two cores they
cost several times what the ranges' decoding does). The output's scratch directory must be reachable by the
executors under the driver's path (local disk for ``local[*]``, a shared file system on a cluster), as
for any Spark file output. A segment an executor cannot open, or that vanished since planning, fails the
export naming it (the embedded engine counts it as a damaged range); the verify findings (``--findings``)
are computed one task per store.
"""
from __future__ import annotations

import os

from mqtool.errors import InputError
from mqtool.io import open_input


def _readable(rng) -> None:
    """On the executor: the range's file can be opened, else the job fails naming it."""
    from mqtool.spark.source import ReadFailed

    try:
        open_input(rng.file).close()
    except InputError as e:
        missing = not os.path.lexists(rng.file)
        raise ReadFailed("missing" if missing else "unreadable", rng.file,
                         "the file vanished" if missing else e.message) from None


def _range_group(args):
    """One Spark partition: the export task of each of its ranges, in order."""
    fn, items = args
    out = []
    for item in items:
        _readable(item[0])
        out.append(fn(item))
    return out


def _findings_task(args):
    path, family, sizes = args
    from mqtool.dataset import verify_rows

    return list(verify_rows(path, family, sizes=sizes))


class RangeRunner:
    """What :func:`mqtool.export.export_local` maps its range tasks with (``imap``, results in order), on
    Spark: the ranges packed as the data source packs them (``maxPartitionBytes`` / ``maxPartitions``)."""

    jobs = 2

    def __init__(self, spark, partition_size=None, max_partitions=None):
        from mqtool.spark.verify import TaskRunner

        self.tasks = TaskRunner(spark, "export on Spark")
        self.partition_size, self.max_partitions = partition_size, max_partitions

    def imap(self, fn, items):
        from mqtool.spark.source import group_ranges

        items = list(items)
        by_range = {id(it[0]): it for it in items}
        groups = group_ranges([it[0] for it in items], self.max_partitions, self.partition_size)
        tasks = [(_range_group, (fn, [by_range[id(r)] for r in g]), sum(r.length for r in g)) for g in groups]
        return iter([r for group in self.tasks.run(tasks) for r in group])

    def findings(self, stores, sizes):
        """The findings rows of every store (one task each), per store in order."""
        return self.tasks.run([(_findings_task, (path, fam, sizes), 1) for path, fam in stores])
