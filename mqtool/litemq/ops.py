"""LiteMQ engine: the dump / verify / rebuild / query contract of :mod:`mqtool.cli`."""
from __future__ import annotations

from mqtool.damage import Damage
from mqtool.errors import InputError, UsageError
from mqtool.findings import Finding
from mqtool.litemq import indexfiles as CQ
from mqtool.litemq.history import LiveLog, note_damage as _note_damage
from mqtool.litemq.store import Store, index_files as _index_files, resolve
from mqtool.litemq.rows import CQ_COLUMNS, MESSAGE_COLUMNS, cq_row, generic_columns, record_row
from mqtool.litemq.scan import damage_finding, walk
from mqtool.options import DumpOptions, QueryOptions, RebuildOptions, ScanStats, VerifyOptions

DUMP_PARTS = ("commitlog", "consumequeue", "checkpoint", "index", "abort")


def dump(part: str, path, opts: DumpOptions, stats: ScanStats):
    if part not in DUMP_PARTS:
        raise UsageError(f"LiteMQ has no {part} files (dump one of: {', '.join(DUMP_PARTS)})")
    store = resolve(path)
    if part == "commitlog":
        if opts.jobs != 1 or opts.runner is not None:
            from mqtool.litemq.ranges import parallel_dump_rows

            par = parallel_dump_rows(path, opts, stats)
            if par is not None:
                return MESSAGE_COLUMNS, par, f"LiteMQ commitlog {path}"
        return MESSAGE_COLUMNS, _dump_commitlog(store, opts, stats), f"LiteMQ commitlog {path}"
    if part == "consumequeue":
        return CQ_COLUMNS, _dump_cq(store, opts, stats), f"LiteMQ consumequeue {path}"
    if part == "checkpoint":
        rows = _dump_checkpoint(store, stats)
        return generic_columns(["file", "version", "commitlog_flushed_offset", "cq_flushed_count",
                                "consumer_offset_count", "last_flush_time", "consumer_offsets"]), rows, \
            "LiteMQ checkpoint"
    if part == "abort":
        return generic_columns(["file", "present", "start_time", "meaning"]), _dump_abort(store), "LiteMQ abort"
    return generic_columns(["kind", "file", "entry", "slot", "key_hash", "offset", "next", "index_count",
                            "create_time"]), _dump_index(store, opts, stats), "LiteMQ index"


def _dump_commitlog(store: Store, opts: DumpOptions, stats: ScanStats):
    want_body = opts.body != "none"
    for item in walk(store, carve_stale=opts.include_stale, with_body=want_body):
        if isinstance(item, Damage):
            _note_damage(damage_finding(item), stats)
            continue
        rec = item
        if opts.from_offset is not None and rec.offset < opts.from_offset:
            continue
        if opts.to_offset is not None and rec.offset >= opts.to_offset:
            continue
        m = rec.m
        if opts.topic is not None and m["Topic"] != opts.topic:
            continue
        if opts.key is not None and opts.key not in m["Keys"]:
            continue
        if opts.tag is not None and opts.tag not in m["Tags"]:
            continue
        stats.messages += 1
        yield record_row(rec, opts.body)


def _dump_cq(store: Store, opts: DumpOptions, stats: ScanStats):
    qs = CQ.queues(store, opts.topic, opts.queue)
    fs = CQ.cq_file_size(opts, store).value
    if not qs:
        stats.notes.append("no consumequeue files found")
    live = LiveLog(store)
    remnants = 0
    for q in qs:
        for item in CQ.read_queue(store, q, with_stale=opts.include_stale, file_size=fs):
            if isinstance(item, Finding):
                _note_damage(item, stats)
                continue
            if not item.stale and live.usable:
                item.stale_reason = live.judge(item)[0]
                item.stale = item.stale_reason is not None
                remnants += item.stale
            yield cq_row(item)
    if remnants:
        stats.notes.append(f"{remnants} consumequeue entr{'y is' if remnants == 1 else 'ies are'} stale: they "
                           "do not match the live commitlog (an older run's entries left after a restart); "
                           "see stale_reason")


def _dump_checkpoint(store: Store, stats: ScanStats):
    p = store.checkpoint_file
    if p is None or not p.is_file():
        raise InputError("no checkpoint file (LiteMQ writes it only on a clean shutdown; after a crash there "
                         "is none)", str(p) if p else str(store.target))
    row, findings = CQ.read_checkpoint(p)
    for f in findings:
        _note_damage(f, stats)
    if row is not None:
        row["file"] = store.display(p)
        yield row


def _dump_abort(store: Store):
    p = store.abort_file
    if p is not None and p.is_file():
        row, _ = CQ.read_abort(p)
        row["file"] = store.display(p)
        row["present"] = True
        row["meaning"] = "the last run did not reach Broker.Shutdown (unclean shutdown or still running)"
        yield row
    else:
        yield {"kind": "abort", "file": store.display(p) if p else None, "present": False, "start_time": None,
               "meaning": "no abort file: the last run reached Broker.Shutdown"}


def _dump_index(store: Store, opts: DumpOptions, stats: ScanStats):
    files = _index_files(store)
    if not files:
        stats.notes.append("index/ is empty: LiteMQ builds its key index in memory and never flushes it")
    for p in files:
        for item in CQ.read_index(p, want_slots=opts.slots):
            if isinstance(item, Finding):
                _note_damage(item, stats)
                continue
            item["file"] = store.display(p)
            yield item


def verify(part: str, path, opts: VerifyOptions):
    from mqtool.litemq.verify import run_verify

    return run_verify(part, resolve(path), opts)


def rebuild(path, opts: RebuildOptions):
    from mqtool.litemq.rebuild import run_rebuild

    return run_rebuild(resolve(path), opts)


def query(path, opts: QueryOptions, stats: ScanStats):
    from mqtool.litemq.query import run_query

    return run_query(resolve(path), opts, stats)



