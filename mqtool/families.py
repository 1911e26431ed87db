"""The one list of broker families mqtool reads, and how to reach each family's modules.

Every place that needs "all families" (detection, ``--format`` choices, the export/Spark field union, the
code catalogue's family letters, the docs) reads :data:`FAMILIES` or :data:`REGISTRY` here. Adding a family is
one :class:`Family` line plus the package ``mqtool/<name>/`` with the modules named in :data:`ROLES`.

This module imports nothing heavy: a family's package is only imported when one of its modules is asked for.
"""
from __future__ import annotations

import importlib

from mqtool.errors import UsageError
from mqtool.plainclass import dataclass


@dataclass(frozen=True)
class Family:
    name: str                     # the --format value, the package name under mqtool/, the NDJSON "family" value
    display: str                  # how a person reads it in messages ("RocketMQ")
    letter: str                   # its letter in the code catalogue's family column (mqtool/codes.py)
    part_names: frozenset = frozenset()   # directory names a store part carries even when unreadable
    file_suffixes: tuple = ()     # file-name endings a store part carries even when unreadable
    unit: str = "queue"           # what one ordered stream is called (RocketMQ queue, Kafka partition)

    def module(self, role: str):
        """``mqtool.<name>.<role>`` (see :data:`ROLES`); UsageError when this build lacks it."""
        try:
            return importlib.import_module(f"mqtool.{self.name}.{role}")
        except ModuleNotFoundError as e:
            if e.name and e.name.startswith(f"mqtool.{self.name}"):
                raise UsageError(f"{self.name} support is not available in this build") from None
            raise


#: module names every family package uses for the same role
ROLES = {
    "store": "store discovery: sniff(path) -> score, the segments and parts of a store",
    "indexfiles": "readers of the queue, index and checkpoint files",
    "records": "decoding of one message / record / batch",
    "layout": "the binary layout derived once from formats/: fixed structs, field offsets, a fingerprint",
    "scan": "the family's walker over a segment: units with spans, damage events, resync",
    "rows": "the family's row schema: columns, NDJSON keys, Parquet/Spark types",
    "ops": "the verbs' entry points the CLI calls: dump, verify, rebuild, query columns",
    "ranges": "byte-range splitting for --jobs, export and Spark (ROW_FIELDS)",
    "verify": "the checks of verify store (a package: one module per group of checks)",
    "rebuild": "rebuild-index (a package: one module per step)",
    "query": "query by key / id / time",
    "info": "the collector of mqtool info",
    "lag": "query --unconsumed-by: committed offsets, queue ends, the messages after them",
    "carve": "mqtool carve: the family's records found in arbitrary bytes, and the salvage store they go to",
    "inspect": "mqtool inspect: one record field by field (mqtool.schemawalk over the family's schema, its checks)",
    "diff": "mqtool diff: two copies of one store aligned by offset (on mqtool.diffcore)",
}

REGISTRY: dict[str, Family] = {f.name: f for f in (
    Family("rocketmq", "RocketMQ", "R",
           part_names=frozenset({"commitlog", "consumequeue", "index", "checkpoint", "config", "abort", "lock"})),
    Family("litemq", "LiteMQ", "L",
           part_names=frozenset({"commitlog", "consumequeue", "index", "checkpoint", "abort"})),
    Family("kafka", "Kafka", "K",
           file_suffixes=(".log", ".index", ".timeindex", ".txnindex", ".snapshot", "-checkpoint", ".properties"),
           unit="partition"),
)}

#: family names in their fixed order (detection ties, field unions and docs follow it)
FAMILIES: tuple[str, ...] = tuple(REGISTRY)


def get(name: str) -> Family:
    """The family called ``name``; UsageError naming the choices otherwise."""
    fam = REGISTRY.get(name)
    if fam is None:
        raise UsageError(f"unknown format {name!r} (choose from {', '.join(FAMILIES)})")
    return fam


def family_module(family: str, role: str):
    """Import ``mqtool.<family>.<role>`` (e.g. ops, store)."""
    return get(family).module(role)


def display_name(family: str) -> str:
    return get(family).display
