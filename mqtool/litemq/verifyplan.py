"""LiteMQ verify as a task plus a merge (the family side of :mod:`mqtool.spark.verify`): distributed by store.

LiteMQ's checks are one walk of the live chain whose every later check depends on where it ends and on what
it saw: records after the end are stale or after-gap by the newest live store time, every consume-queue
entry and index entry is checked against the map of live records, and the restart history is read from the
whole chain. So a store is one task (the embedded :func:`mqtool.litemq.verify.run_verify`) and the stores of
a run go to the executors side by side; the driver hands on the findings and the summary.

``--salvage-out`` runs embedded on the driver (the salvage file is written there).
"""
from __future__ import annotations

import dataclasses
import os

from mqtool.litemq.ops import verify as embedded_verify
from mqtool.litemq.store import resolve


def store_task(args):
    """(findings, summary) of ``verify <part>`` on one store."""
    part, path, opts = args
    findings, summary = embedded_verify(part, path, opts)
    return list(findings), summary()


def _size(path) -> int:
    total = 0
    for d, _, names in os.walk(path):
        for n in names:
            try:
                total += os.path.getsize(os.path.join(d, n))
            except OSError:
                pass
    return total


class StorePlan:
    def __init__(self, part: str, path, opts):
        self.part, self.path, self.opts = part, path, opts
        self.tasks: list = []
        resolve(path)                # not a LiteMQ store: the usage error here, on the driver
        if not getattr(opts, "salvage_out", None):
            plain = dataclasses.replace(opts, runner=None)
            self.tasks.append((store_task, (part, path, plain), _size(path)))

    def merge(self, results: list, runner):
        if not self.tasks:
            return embedded_verify(self.part, self.path, self.opts)
        findings, summary = results[0]
        return iter(findings), lambda: summary


def plan(part: str, path, opts) -> StorePlan:
    return StorePlan(part, path, opts)
