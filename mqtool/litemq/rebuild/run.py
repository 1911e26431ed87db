"""``run_rebuild``: the engine entry point (sizes, the walk, dispatch, write and/or compare)."""
from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path

from formats import litemq as F
from mqtool.damage import Damage
from mqtool.errors import UsageError
from mqtool.findings import INFO, WARNING, Finding, Summary
from mqtool.io import WriteBatch, prepare_output_dir
from mqtool.litemq import indexfiles as CQ
from mqtool.litemq.indexfiles import cq_file_size
from mqtool.litemq.store import Store
from mqtool.litemq.scan import WalkResult, damage_finding, walk
from mqtool.options import RebuildOptions
from mqtool.litemq.rebuild.compare import StaleEntries, _compare_cq, _compare_index
from mqtool.litemq.rebuild.consumequeue import queue_files
from mqtool.litemq.rebuild.dispatch import _store_hints, dispatch
from mqtool.litemq.rebuild.index import build_index


def run_rebuild(store: Store, opts: RebuildOptions):
    summary = Summary()
    summary.extra["family"] = "litemq"

    def gen():
        for f in _rebuild(store, opts, summary):
            summary.add(f)
            yield f

    return gen(), lambda: summary


def _rebuild(store: Store, opts: RebuildOptions, summary: Summary):
    if store.kind not in ("root",):
        raise UsageError("rebuild-index needs the LiteMQ data directory (the one holding commitlog/)")
    cq = cq_file_size(opts, store)
    fs = cq.value
    if fs <= 0:
        raise UsageError("consumequeue file size must be positive")
    if fs % F.CQ_ENTRY_SIZE:
        yield Finding(WARNING, "cq-file-size", None, None, None,
                      f"consumequeue file size {fs} is not a multiple of 24: LiteMQ would get stuck", None, fs)
    summary.extra.update(cq_file_size=fs, cq_file_size_from=cq.source, cq_file_size_evidence=cq.evidence or None)
    if cq.warning:
        yield Finding(WARNING, "cq-geometry", "consumequeue", None, None, cq.warning, fs, list(cq.candidates))
    store_sizes = {f.size for q in CQ.queues(store) for f in q.files}
    if store_sizes and fs not in store_sizes:
        yield Finding(INFO, "cq-file-size-differs", None, None, None,
                      f"the store's consumequeue files are {sorted(store_sizes)} bytes, the rebuild uses {fs} "
                      f"({cq.source}: {cq.evidence})", fs, sorted(store_sizes))
    out = prepare_output_dir(opts.out, [store.root], opts.force) if opts.out else None
    res = WalkResult()
    records = []
    for item in walk(store, carve_stale=False, result=res):
        if isinstance(item, Damage):
            item = damage_finding(item)
            if item.severity != INFO:
                yield item
            continue
        records.append(item)
    summary.messages = len(records)
    hints = None
    if not getattr(opts, "no_store_hints", False):
        hints = _store_hints(store)
    queues, used = dispatch(records, hints)
    for why, key, idx, e in used:
        yield Finding(INFO, why, f"consumequeue/{key[0]}/{key[1]}", idx * F.CQ_ENTRY_SIZE, e[0],
                      "transaction entry placed where the store's queue has it (its commit time is not in the "
                      "commitlog)" if why.startswith("tx") else
                      "entry time taken from the store's queue (LiteMQ stamps it a moment after the record)")
    existing = {}
    rebuilt_files = {}
    # one flush for all the queue files, then the renames (mqtool.io.WriteBatch): a store of thousands of
    # queues paid an fsync of each file and of its directory
    with WriteBatch(out) if out is not None else nullcontext() as batch:
        for (topic, qid), entries in sorted(queues.items()):
            for idx, data, full in queue_files(entries, fs, opts.trim):
                rel = Path("consumequeue") / topic / str(qid) / f"{idx:020d}"
                rebuilt_files[str(rel)] = (data, full)
                if out is not None:
                    with out.atomic(rel, batch=batch) as f:
                        f.write(data)
                        if full > len(data):
                            f.truncate(full)       # sparse zero fill, as LiteMQ's ftruncate
    summary.extra["cq_files"] = len(rebuilt_files)
    summary.extra["cq_entries"] = sum(len(v) for v in queues.values())
    if opts.compare:
        from mqtool.litemq.history import LiveLog

        where = {}
        for q in CQ.queues(store):
            for s in q.files:
                existing[store.display(s.path)] = s.path
                where[store.display(s.path)] = (q.topic, q.queue_id, s.index * fs // F.CQ_ENTRY_SIZE)
        restarted = bool((res.stale and not res.after_gap) or res.regressed)    # (as verify judges a queue)
        yield from _compare_cq(rebuilt_files, existing, summary, StaleEntries(where, LiveLog(store), restarted))
    from mqtool.litemq.store import index_files as _index_files

    if getattr(opts, "with_index", False) or (opts.compare and _index_files(store)):
        data, last_ts = build_index(records)
        if getattr(opts, "with_index", False) and out is not None:
            import datetime as dt

            name = dt.datetime.fromtimestamp(last_ts / 1000, tz=dt.timezone.utc).strftime("%Y%m%d%H%M%S")
            with out.atomic(Path("index") / name) as f:
                f.write(data)
            summary.extra["index_file"] = f"index/{name}"
        if opts.compare:
            yield from _compare_index(store, data)
