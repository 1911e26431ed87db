"""RocketMQ engine entry points (the contract in :mod:`mqtool.cli`): dump, verify, rebuild, query."""
from __future__ import annotations

import os
from pathlib import Path

from mqtool.errors import InputError, NotAStoreError, UsageError
from mqtool.options import DumpOptions, QueryOptions, RebuildOptions, ScanStats, VerifyOptions
from mqtool.rocketmq.store import common_size, cq_filter, forced_commitlog, gap_cause, open_store, segment_gaps

# the verbs' names, imported when first asked for (``verify`` needs none of them: start-up, issue #20)
_LAZY = {"BODY_COLUMN": "mqtool.rocketmq.rows", "CQ_COLUMNS": "mqtool.rocketmq.rows",
         "MESSAGE_COLUMNS": "mqtool.rocketmq.rows", "damage_note": "mqtool.rocketmq.ranges",
         "message_filter": "mqtool.rocketmq.ranges", "parallel_dump_rows": "mqtool.rocketmq.ranges"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _store(path):
    return open_store(path)


def _need(value, what: str, path):
    if not value:
        raise NotAStoreError(f"no {what} here", str(path))
    return value


def dump(part: str, path, opts: DumpOptions, stats: ScanStats):
    from mqtool.columns import Column, iso_ms
    from mqtool.ranges import rows_stay_in_one_process
    from mqtool.rocketmq import nativedump
    from mqtool.rocketmq.ranges import damage_note, message_filter, parallel_dump_rows
    from mqtool.rocketmq.rows import BODY_COLUMN, CQ_COLUMNS, MESSAGE_COLUMNS
    from mqtool.rocketmq.scan import iter_messages

    s = _store(path)
    if part in ("commitlog", "kafka"):
        segs = forced_commitlog(s)
        cols = MESSAGE_COLUMNS + ([BODY_COLUMN] if opts.body != "none" else [])
        if not segs:        # a commitlog directory with no file yet (a fresh broker's): no message, no error
            _need(s.commitlog_dir, "commitlog segments", path)
            return cols, iter(()), f"commitlog {s.commitlog_dir}"
        keep = message_filter(opts)
        for prev, seg in segment_gaps(segs):     # lost bytes no row can show: say so, and exit 1
            stats.damage(f"{seg.path}: segment-missing: {seg.base - prev.end} bytes between {prev.name} and "
                         f"{seg.name} are in no file ({gap_cause(prev, seg, common_size(segs))})")

        def on_damage(d):
            stats.damage(damage_note(d))

        if nativedump.direct_usable(opts, segs):     # NDJSON written by the helper (and workers) to the output
            return cols, nativedump.direct_rows(s.commitlog_dir or path, segs, opts, stats), \
                f"commitlog {s.commitlog_dir or path}"
        if (opts.jobs != 1 or opts.runner is not None) and not nativedump.one_process(opts) \
                and not rows_stay_in_one_process(opts):
            par = nativedump.parallel_rows(s.commitlog_dir or path, segs, opts, stats)
            if par is not None:
                return cols, par, f"commitlog {s.commitlog_dir or path}"
            par = parallel_dump_rows(s.commitlog_dir or path, segs, opts, stats)
            if par is not None:
                return cols, par, f"commitlog {s.commitlog_dir or path}"

        if nativedump.usable(opts):      # the compiled row builder (same rows; tests/test_rocketmq_native_dump.py)
            return cols, nativedump.rows(segs, opts, stats, on_damage), f"commitlog {s.commitlog_dir or path}"

        def rows():
            msgs = iter_messages(segs, opts.from_offset, opts.to_offset, opts.max_message_size,
                                 include_blank=opts.include_blank, on_damage=on_damage)
            body = opts.body
            if opts.topic is None and opts.key is None and opts.tag is None:
                n = 0
                try:
                    for m in msgs:
                        n += 1
                        yield m.to_row(body)
                finally:
                    stats.messages += n
                return
            for m in msgs:
                if keep(m):
                    stats.messages += 1
                    yield m.to_row(body)

        return cols, rows(), f"commitlog {s.commitlog_dir or path}"
    from mqtool.rocketmq import indexfiles       # (the queue and index readers: not needed for messages)

    if part == "consumequeue":
        t, q = cq_filter(s)
        queues = s.queues(opts.topic or t, opts.queue if opts.queue is not None else q)
        if not queues and not s.consumequeue_dir and not s.cq_file:
            raise NotAStoreError("no consumequeue here", str(path))

        def rows():
            for d, why in s.unreadable:
                stats.damage(f"{d}: cannot list directory: {why}")
            for qf in queues:
                try:
                    for u in indexfiles.iter_cq_units(qf):
                        yield u.to_row()
                except InputError as e:        # one unreadable file: say so, go on with the other queues
                    stats.damage(f"{e}; skipped")

        return CQ_COLUMNS, rows(), "consumequeue"
    if part == "index":
        files = _need(s.index_files, "index files", path)
        geos = indexfiles.index_geometries(files, opts)
        for w in geos.warnings():
            stats.note(f"warning: {w}")

        def rows():
            for f in files:
                g = geos.of(f)
                try:
                    v = indexfiles.read_index_file(f, g)
                except InputError as e:
                    stats.damage(f"{e}; skipped")
                    continue
                h = dict(v.header)
                yield {"kind": "index_header", "file": f, "position": 0, "size": v.size,
                       "hash_slot_num": v.slot_num, "index_num": v.index_num, "geometry_from": g.source, **h}
                if v.slot_num is None:
                    continue
                if opts.slots:
                    for i, val in v.nonzero_slots():
                        yield {"kind": "index_slot", "file": f, "position": 40 + 4 * i, "slot": i,
                               "entry": val}
                for k in range(1, v.entry_count + 1):
                    kh, off, td, prev = v.entry(k)
                    yield {"kind": "index_entry", "file": f, "position": v.entry_position(k), "entry": k,
                           "key_hash": kh, "offset": off, "time_diff": td, "prev": prev,
                           "slot": kh % v.slot_num if v.slot_num else None,
                           "store_time": h["beginTimestamp"] + td * 1000 if h["beginTimestamp"] > 0 else None}

        cols = [Column("kind", "Kind"), Column("entry", "Entry", justify="right"),
                Column("slot", "Slot", justify="right"), Column("key_hash", "KeyHash", justify="right"),
                Column("offset", "CL offset", justify="right"), Column("time_diff", "TimeDiff s", justify="right"),
                Column("prev", "Prev", justify="right"), Column("indexCount", "Count", justify="right"),
                Column("beginTimestamp", "Begin", fmt=iso_ms), Column("endTimestamp", "End", fmt=iso_ms),
                Column("file", "File", max_width=50)]
        return cols, rows(), "index"
    if part == "checkpoint":
        cp = _need(s.checkpoint, "checkpoint file", path)
        row = {"kind": "checkpoint", "file": cp, **indexfiles.read_checkpoint(cp)}
        cols = [Column(k, k, fmt=iso_ms if k.endswith("Timestamp") else None) for k in row if k != "kind"]
        return cols, iter([row]), "checkpoint"
    if part == "config":
        from mqtool.rocketmq.configfiles import config_rows

        cfg = _need(s.config_dir, "config directory", path) if not s.extra_files else None
        files = [Path(p) for p in s.extra_files] if s.extra_files else None
        return config_rows(cfg, files)
    if part == "abort":
        rows = []
        root = s.root or (str(Path(s.abort).parent) if s.abort else str(path))
        for name in ("abort", "abort.bak", "lock"):
            p = Path(root) / name
            if os.path.lexists(p):
                from mqtool.io import read_input

                data = read_input(p, limit=4096)
                rows.append({"kind": name.replace(".", "_"), "file": str(p), "size": len(data),
                             "content": data.decode("ascii", errors="replace"),
                             "meaning": _abort_meaning(name, data)})
        if not rows:
            rows.append({"kind": "abort", "file": str(Path(root) / "abort"), "size": None, "content": None,
                         "meaning": "no abort file: the last broker run shut down cleanly (or never started)"})
        cols = [Column("kind", "Kind"), Column("file", "File"), Column("size", "Size"), Column("content", "Content"),
                Column("meaning", "Meaning")]
        return cols, iter(rows), "crash markers"
    raise UsageError(f"dump {part} is not available for RocketMQ stores")


def _abort_meaning(name: str, data: bytes) -> str:
    if name == "abort":
        pid = data.decode("ascii", errors="replace").strip()
        return ("the broker did not shut down cleanly (crash, kill or power loss)"
                + (f"; broker pid {pid} (5.x)" if pid else " (4.x writes it empty)"))
    if name == "abort.bak":
        return "backup written by 5.1+ when the abort file was created; no meaning on its own"
    return "process lock; its presence means nothing, the OS lock does"


def verify_target(part: str, path):
    """The store ``verify <part> <path>`` checks (a lone file given to ``verify commitlog`` is a segment)."""
    s = _store(path)
    if part == "commitlog" and not s.segments and s.cq_file:
        s.segments, s.cq_file = forced_commitlog(s), None
    return s


def verify(part: str, path, opts: VerifyOptions):
    from mqtool.rocketmq.verify import verify_store

    return verify_store(verify_target(part, path), part, opts)


def rebuild(path, opts: RebuildOptions):
    from mqtool.rocketmq.rebuild import run_rebuild

    return run_rebuild(_store(path), opts)


def query(path, opts: QueryOptions, stats: ScanStats):
    from mqtool.rocketmq.query import run_query
    from mqtool.rocketmq.rows import BODY_COLUMN, MESSAGE_COLUMNS

    cols = MESSAGE_COLUMNS + ([BODY_COLUMN] if opts.body != "none" else [])
    return cols, run_query(_store(path), opts, stats)
