"""LiteMQ ``query --unconsumed-by GROUP``: the messages after a consumer group's acked offsets.

LiteMQ keeps consumer offsets in one place only: the consumer section of ``checkpoint/checkpoint``
(group → topic → queueId → offset, the offset the client acked; reference §5). The broker writes that file
only in a clean shutdown's forced flush, so after a crash there is none: then ``--offsets FILE`` gives them.
The acked offset is read as the next entry to consume (``info`` computes the lag the same way). Queue ends:
the live consumequeue entries (an older run's stale entries do not count). Rows: ``query --topic --queue
--queue-offset``'s rows for the entries ``committed .. end-1``.
"""
from __future__ import annotations

import dataclasses

from mqtool.errors import InputError
from mqtool.findings import INFO, Finding
from mqtool.lag import Committed, pick_group, position, queue_lag, tag
from mqtool.litemq import indexfiles as CQ
from mqtool.litemq.history import LiveLog
from mqtool.litemq.query import _by_queue
from mqtool.litemq.rows import MESSAGE_COLUMNS, QUERY_QUEUE_OFFSET_COLUMN
from mqtool.litemq.store import Store, resolve
from mqtool.options import QueryOptions, ScanStats


def committed_offsets(store: Store) -> tuple[list[Committed], str]:
    p = store.checkpoint_file
    if p is None or not p.is_file():
        raise InputError("no checkpoint/checkpoint, where LiteMQ keeps consumer offsets (it writes it only at a "
                         "clean shutdown); give --offsets FILE", str(store.root or store.target))
    row, findings = CQ.read_checkpoint(p)
    name = store.display(p)
    if row is None:
        bad = next((f for f in findings if f.severity != INFO), None)
        raise InputError(f"checkpoint unusable: {bad.message if bad else 'cannot parse'}", str(p))
    out = [Committed(g, t, qid, off, name)
           for g, topics in row["consumer_offsets"].items()
           for t, queues in topics.items() for qid, off in queues.items()]
    return out, str(p)


def _live_end(store: Store, q, live: LiveLog, fs: int) -> int:
    """Live entries of a queue (the index after the last live one)."""
    n = 0
    for item in CQ.read_queue(store, q, file_size=fs):
        if isinstance(item, Finding):
            continue
        if live.usable and live.judge(item)[0] is not None:
            continue
        n = max(n, item.index + 1)
    return n


def unconsumed(path, group: str, opts: QueryOptions, stats: ScanStats, limit: int | None = None,
               offsets: list[Committed] | None = None):
    """(columns, [QueueLag], rows) for ``group`` (see :mod:`mqtool.lag`)."""
    store = resolve(path)
    where = "--offsets"
    if offsets is None:
        offsets, where = committed_offsets(store)
    mine = pick_group(offsets, group, where)
    fs = CQ.cq_file_size(opts, store).value
    live = LiveLog(store)
    queues = []
    todo = []
    for e in mine:
        qs = [q for q in CQ.queues(store, e.topic, e.queue) if q.files]
        q = queue_lag(e, _live_end(store, qs[0], live, fs) if qs else 0)
        if not qs:
            q.note = (q.note or "") + ("; " if q.note else "") + "no consumequeue files for this queue"
        if q.unconsumed:
            todo.append((q, position(e)[0]))
        queues.append(q)
    return MESSAGE_COLUMNS + [QUERY_QUEUE_OFFSET_COLUMN], queues, _rows(store, opts, stats, todo, limit)


def _rows(store, opts, stats, todo, limit):
    left = limit if limit is not None else -1
    for q, first in todo:
        if left == 0:
            return
        qopts = dataclasses.replace(opts, topic=q.topic, queue=q.queue, queue_offset=first,
                                    count=q.max_offset - first)
        for row in _by_queue(store, qopts, stats):
            yield tag(row, q)
            left -= 1
            if left == 0:
                return
