"""Rebuild RocketMQ consumequeue and index files from the commitlog, the way the broker's dispatcher does.

The broker builds both from the commitlog in ``ReputMessageService``: every readable message becomes a
``DispatchRequest`` that goes to the consumequeue builder (``ConsumeQueue#putMessagePositionInfo``) and to the
index builder (``IndexService#buildIndex`` / ``IndexFile#putKey``). This module replays that in commitlog order
with the same state machines, so the output bytes are the broker's (``shared/reference/rocketmq.md`` §4–§7):

* consumequeue: a file per ``mappedFileSizeConsumeQueue`` bytes, named by its first byte's logical offset;
  the skip rules (``offset + size <= maxPhysicOffset``; expected position behind the write position), the
  blank fill of the first file of a queue that starts above 0 (``fillPreBlank``), and append-at-write-position
  (a gap in queue offsets shifts later units, as on the broker); the last file is zero-filled to its full size
  as the broker preallocates (``--trim`` cuts it after the last unit);
* index: a new file when none exists or the last one holds ``indexNum − 1`` entries; a new file starts with
  the previous file's endPhyOffset/endTimestamp in its begin*/end* fields, the first entry's timeDiff is taken
  against them and begin* are then overwritten; a message whose offset is below the current file's
  endPhyOffset is skipped;
* names of index files cannot be known (creation time on the broker): each is named from its first entry's
  store timestamp, ``yyyyMMddHHmmssSSS`` in UTC, bumped by 1 ms when it would not sort after the previous.

Output goes to a separate directory through :mod:`mqtool.io` (temp name, fsync, rename). ``--compare``
compares each rebuilt file with the store's own file and yields a finding per difference.

Layouts come from :mod:`mqtool.rocketmq.layout` (derived once from :mod:`formats.rocketmq`).

The package is split by step; this module re-exports the names callers use (``from mqtool.rocketmq.rebuild
import run_rebuild``):

* :mod:`.settings` — the sizes (options, ``--broker-conf``, the store's own files, defaults) and their sources;
* :mod:`.native_lane` — the commitlog walk for dispatch and the compiled lane (``rmqrebuild``) it may hand
  runs to (``native_lib``, ``native_layout``; the helpers are switched by ``mqtool.native``);
* :mod:`.consumequeue` / :mod:`.index` — the writers (``QueueBuilder``; ``IndexFileBuilder``, ``IndexBuilder``);
* :mod:`.replay` — ``rebuild_store``: the dispatcher replayed over the commitlog into the writers;
* :mod:`.output` (``--out``, the checkpoint) and :mod:`.compare` (``--compare``) — where rebuilt files go;
* :mod:`.run` — ``run_rebuild``, the engine entry point.
"""
from __future__ import annotations

# Each name is loaded from its module when first asked for (PEP 562): ``rebuild-index`` starts parsing the
# commitlog before click loads (``native_lane.start_early``), and importing this package must not load the
# whole engine (compare, settings, dataclasses...) before it; the rest loads while the workers parse.
_EXPORTS = {
    "run_rebuild": "run", "rebuild_store": "replay", "RebuildResult": "replay", "resolve_settings": "settings",
    "Settings": "settings", "geometry_findings": "settings", "iter_dispatch_records": "native_lane",
    "native_layout": "native_lane", "native_lib": "native_lane", "_HEAD_SIZE": "native_lane",
    "QueueBuilder": "consumequeue", "IndexBuilder": "index", "IndexFileBuilder": "index", "human_time": "index",
    "DirSink": "output", "checkpoint_bytes": "output", "CompareSink": "compare", "CompareState": "compare",
    "_DiskReader": "compare",
}

__all__ = ["run_rebuild", "rebuild_store", "RebuildResult", "resolve_settings", "Settings", "geometry_findings",
           "iter_dispatch_records", "native_layout", "native_lib", "QueueBuilder", "IndexBuilder",
           "IndexFileBuilder", "human_time", "DirSink", "checkpoint_bytes", "CompareSink", "CompareState",
           "_DiskReader", "_HEAD_SIZE"]


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))
