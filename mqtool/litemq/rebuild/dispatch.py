"""LiteMQ's dispatch replayed over the commitlog's records: the consumequeue entries each record gets (and the
store's own queues as hints for the transaction entries the commitlog cannot place)."""
from __future__ import annotations

from collections import defaultdict

from formats import litemq as F
from mqtool.findings import Finding
from mqtool.litemq import indexfiles as CQ
from mqtool.litemq.store import Store
from mqtool.litemq.records import tag_hash
from mqtool.litemq.verify.consumequeue import CQ_TIMESTAMP_TOLERANCE_MS


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


def _store_hints(store: Store) -> dict:
    hints: dict = defaultdict(dict)
    for q in CQ.queues(store):
        for e in CQ.read_queue(store, q):
            if isinstance(e, Finding):
                continue
            hints[(q.topic, q.queue_id)][e.index] = (e.commitlog_offset, e.size, e.tag_hash, e.timestamp)
    return hints
