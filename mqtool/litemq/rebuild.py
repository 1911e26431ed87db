"""Rebuild LiteMQ consumequeues (and, on request, a key index file) from the commitlog.

Dispatch rules, as LiteMQ's code applies them (pkg/broker/message_handler.go & co.):

* normal, order and direct (empty-body) records: one entry in ``<Topic>/<QueueID>``;
* delay (type 1): none; broadcast (type 3 or flag 1): none;
* cron (type 5): two identical entries;
* transaction (type 2): one entry appended *at commit time*, none when rolled back or pending. The
  commitlog cannot tell which happened, nor when: with the store's own consumequeue present (the default)
  a transaction record is placed where that queue has it; without it (``--no-store-hints``) none is.

The entry timestamp is the record's StoreTimestamp. LiteMQ takes it a moment later (after opening a new
commitlog file it can be 1 ms later); with store hints, an entry whose store counterpart (same queue
index, offset and size) differs by at most the tolerance keeps the store's timestamp, and each such use is
reported. Files are ``%020d`` file indexes, zero-filled to the file size as LiteMQ preallocates them.
"""
from __future__ import annotations

import struct
from collections import defaultdict
from pathlib import Path

from construct import ConstructError

from formats import litemq as F
from mqtool.damage import Damage
from mqtool.errors import UsageError
from mqtool.findings import INFO, WARNING, Finding, Summary
from mqtool.io import prepare_output_dir, read_input
from mqtool.litemq import indexfiles as CQ
from mqtool.litemq.indexfiles import broker_toml_sizes, cq_file_size  # noqa: F401  (the one place that decides)
from mqtool.litemq.store import Store
from mqtool.litemq.layout import CQ as CQS
from mqtool.litemq.layout import INDEX_ENTRY
from mqtool.litemq.records import fnv1a32, tag_hash
from mqtool.litemq.scan import WalkResult, damage_finding, walk
from mqtool.litemq.verify import CQ_TIMESTAMP_TOLERANCE_MS
from mqtool.options import RebuildOptions


def dispatch(records, hints: dict | None):
    """Per-queue entry lists ``[(offset, size, tag_hash, ts)]`` under LiteMQ's rules (+ store hints)."""
    queues: dict = defaultdict(list)
    tx = []
    for r in records:
        m = r.m
        t = m["MessageType"]
        e = (r.offset, r.size, tag_hash(r.raw_tags), m["StoreTimestamp"])
        key = (m["Topic"], m["QueueID"])
        if t == F.TYPE_DELAY or t == F.TYPE_BROADCAST or m["Broadcast"] == 1:
            continue
        if t == F.TYPE_TRANSACTION:
            tx.append((key, e))
            continue
        queues[key].append(e)
        if t == F.TYPE_CRON:
            queues[key].append(e)
    used = []
    if hints is not None:
        placed = []
        for key, e in tx:
            for idx, he in hints.get(key, {}).items():
                if he[0] == e[0]:
                    placed.append((key, idx, e))
                    break
        for key, idx, e in sorted(placed, key=lambda x: (x[0], x[1])):
            lst = queues[key]
            lst.insert(min(idx, len(lst)), e)
            used.append(("tx-commit-from-store", key, idx, e))
        for key, lst in queues.items():
            h = hints.get(key, {})
            for i, e in enumerate(lst):
                he = h.get(i)
                if he and he[0] == e[0] and he[1] == e[1] and he[3] != e[3] \
                        and abs(he[3] - e[3]) <= CQ_TIMESTAMP_TOLERANCE_MS:
                    lst[i] = (e[0], e[1], e[2], he[3])
                    used.append(("timestamp-from-store", key, i, e))
    return queues, used


def queue_files(entries, fs: int, trim: bool):
    """Split a queue's entries into ``[(file_index, bytes, full_size)]``."""
    data = b"".join(CQS.pack(*e) for e in entries)
    out = []
    for i in range(0, max(len(data), 1), fs):
        chunk = data[i:i + fs]
        if not chunk and i:
            break
        out.append((i // fs, chunk, len(chunk) if trim else fs))
    return out


def _store_hints(store: Store) -> dict:
    hints: dict = defaultdict(dict)
    for q in CQ.queues(store):
        for e in CQ.read_queue(store, q):
            if isinstance(e, Finding):
                continue
            hints[(q.topic, q.queue_id)][e.index] = (e.commitlog_offset, e.size, e.tag_hash, e.timestamp)
    return hints


def build_index(records) -> tuple[bytes, int]:
    """LiteMQ's index file for the records SendMessage accepted (non-empty body), keys in record order."""
    slots_n = F.INDEX_HASH_SLOTS
    slots = [-1] * slots_n
    entries = []
    last_ts = 0
    for r in records:
        if r.body_slice[0] == r.body_slice[1]:
            continue          # empty body: written below the broker API, never PutIndex-ed
        ts = r.m["StoreTimestamp"]
        last_ts = max(last_ts, ts)
        td = (ts - ts // 1000) & 0xFFFFFFFF     # int32(storeTimestampMs - nowSeconds), now ~ store time
        td = td - (1 << 32) if td >= 1 << 31 else td
        for k in r.raw_keys:
            h = fnv1a32(k)
            s = h % slots_n
            entries.append((h, r.offset, td, slots[s]))
            slots[s] = len(entries) - 1
    hdr = F.IndexHeader.build(dict(version=1, createTime=last_ts, lastUpdate=last_ts, hashSlotCount=slots_n,
                                   indexCount=len(entries)))
    body = struct.pack(f">{slots_n}i", *slots) + b"".join(INDEX_ENTRY.pack(*e) for e in entries)
    return hdr + body, last_ts


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
    for (topic, qid), entries in sorted(queues.items()):
        for idx, data, full in queue_files(entries, fs, opts.trim):
            rel = Path("consumequeue") / topic / str(qid) / f"{idx:020d}"
            rebuilt_files[str(rel)] = (data, full)
            if out is not None:
                with out.atomic(rel) as f:
                    f.write(data)
                    if full > len(data):
                        f.truncate(full)       # sparse zero fill, as LiteMQ's ftruncate
    summary.extra["cq_files"] = len(rebuilt_files)
    summary.extra["cq_entries"] = sum(len(v) for v in queues.values())
    if opts.compare:
        for q in CQ.queues(store):
            for s in q.files:
                existing[store.display(s.path)] = s.path
        yield from _compare_cq(rebuilt_files, existing, summary)
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


def _compare_cq(rebuilt: dict, existing: dict, summary: Summary):
    same = differ = 0
    for rel, (data, full) in sorted(rebuilt.items()):
        p = existing.get(rel)
        if p is None:
            differ += 1
            yield Finding(WARNING, "rebuild-missing-in-store", rel, None, None,
                          "the rebuild has this consumequeue file, the store does not")
            continue
        have = read_input(p)
        # the rebuilt file is ``data`` then zeros up to ``full``: compared without building the zero fill
        # (a code-default file size is 600 MB per file)
        want_len = max(full, len(data))
        used = max(len(data), len(have.rstrip(b"\x00")))
        if len(have) == want_len and have[:len(data)] == data and used == len(data):
            same += 1
            continue
        differ += 1
        if len(have) != want_len:
            yield Finding(WARNING, "rebuild-size-differs", rel, None, None, "file sizes differ (use --cq-file-size "
                          "or --broker-conf with the broker's size)", want_len, len(have))
        n = min(len(have), want_len, used + F.CQ_ENTRY_SIZE - 1) // F.CQ_ENTRY_SIZE
        shown = 0
        for i in range(n):
            a = data[i * 24:(i + 1) * 24].ljust(24, b"\x00")
            b = have[i * 24:(i + 1) * 24]
            if a != b:
                shown += 1
                if shown <= 20:
                    yield Finding(WARNING, "rebuild-entry-differs", rel, i * 24, None,
                                  "rebuilt entry differs from the store's (offset,size,taghash,time)",
                                  list(CQS.unpack(a)), list(CQS.unpack(b)))
    for rel in sorted(set(existing) - set(rebuilt)):
        differ += 1
        yield Finding(WARNING, "rebuild-missing-file", rel, None, None,
                      "the store has this consumequeue file, the rebuild does not")
    summary.extra.update(cq_files_identical=same, cq_files_differ=differ)
    if differ == 0:
        yield Finding(INFO, "rebuild-identical", None, None, None,
                      f"all {same} rebuilt consumequeue file(s) are byte-identical to the store's")


def _compare_index(store: Store, data: bytes):
    from mqtool.litemq.store import index_files as _index_files

    files = _index_files(store)
    if not files:
        return
    for p in files:
        have = CQ.open_index_bytes(p)
        name = store.display(p)
        try:
            hs = F.IndexHeader.parse(have[:F.INDEX_HEADER_SIZE])
        except ConstructError:
            yield Finding(WARNING, "rebuild-index-unreadable", name, 0, None, "store index file has no valid header")
            continue
        if len(have) < F.INDEX_HEADER_SIZE + 4 * F.INDEX_HASH_SLOTS + 20 * max(hs.indexCount, 0):
            yield Finding(WARNING, "rebuild-index-unreadable", name, 0, None, "store index file is truncated")
            continue
        ws = F.IndexHeader.parse(data[:F.INDEX_HEADER_SIZE])
        if hs.indexCount != ws.indexCount:
            yield Finding(WARNING, "rebuild-index-count", name, None, None, "index entry counts differ",
                          ws.indexCount, hs.indexCount)
        if have[40:40 + 4 * F.INDEX_HASH_SLOTS] != data[40:40 + 4 * F.INDEX_HASH_SLOTS]:
            yield Finding(WARNING, "rebuild-index-slots", name, 40, None, "slot tables differ")
        base = 40 + 4 * F.INDEX_HASH_SLOTS
        diff = 0
        for i in range(min(hs.indexCount, ws.indexCount)):
            a = INDEX_ENTRY.unpack_from(data, base + 20 * i)
            b = INDEX_ENTRY.unpack_from(have, base + 20 * i)
            if (a[0], a[1], a[3]) != (b[0], b[1], b[3]):
                diff += 1
        if diff:
            yield Finding(WARNING, "rebuild-index-entries", name, base, None,
                          f"{diff} entries differ in key hash, offset or chain", 0, diff)
        else:
            yield Finding(INFO, "rebuild-index-equivalent", name, None, None,
                          "rebuilt index matches in slots, key hashes, offsets and chains (times not compared)")



