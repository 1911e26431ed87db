"""RocketMQ ``query --unconsumed-by GROUP``: the messages after a consumer group's committed offsets.

Committed offsets: ``config/consumerOffset.json`` (its ``.bak`` when it does not parse, as the broker falls
back), ``offsetTable``: ``"topic@group" → {queueId: offset}``, offsets in consume-queue logical units, the next
one to consume (``ConsumerOffsetManager``; reference §8). Queue ends: the consumequeue
(:func:`~mqtool.rocketmq.indexfiles.cq_queue_end`). Rows: the consumequeue units ``committed .. end-1`` read
as ``query --topic --queue --queue-offset`` reads them (the same rows and checks); a queue without
consumequeue files (or ``--scan``) is answered by one commitlog walk, its end taken from the highest
QUEUEOFFSET + 1, as ``info`` does.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

from formats import rocketmq as F
from mqtool.errors import InputError
from mqtool.lag import Committed, QueueLag, offset_table, pick_group, position, queue_lag, tag
from mqtool.options import QueryOptions, ScanStats
from mqtool.rocketmq import indexfiles
from mqtool.rocketmq.configfiles import load_with_backup
from mqtool.rocketmq.query import MessageReader, _by_queue, _queue_position, _scan
from mqtool.rocketmq.rows import BODY_COLUMN, MESSAGE_COLUMNS
from mqtool.rocketmq.store import RocketStore, open_store

OFFSETS_FILE = "consumerOffset.json"


def committed_offsets(s: RocketStore, stats: ScanStats) -> tuple[list[Committed], str]:
    """Every committed offset of ``config/consumerOffset.json``; (entries, file name). InputError when the
    store has no such file or neither it nor its .bak parses."""
    if not s.config_dir:
        raise InputError(f"no config/{OFFSETS_FILE} here (the broker keeps consumer offsets there); "
                         "give --offsets FILE", s.path)
    p = Path(s.config_dir) / OFFSETS_FILE
    if not p.exists() and not p.with_name(OFFSETS_FILE + ".bak").exists():
        raise InputError(f"no {OFFSETS_FILE} (the broker keeps consumer offsets there); give --offsets FILE",
                         s.config_dir)
    v, src = load_with_backup(p)
    if v is None:
        raise InputError(f"consumer offsets unusable: {src}", str(p))
    if src.endswith(".bak"):
        stats.note(f"{p}: does not parse; the committed offsets are from {src}, as the broker would read them")
    table = v.get("offsetTable") if isinstance(v, dict) else None
    if not isinstance(table, dict):
        raise InputError("no offsetTable object in it", str(p.with_name(src)))
    return offset_table(table, f"config/{src}", str(p.with_name(src))), str(p.with_name(src))


def unconsumed(path, group: str, opts: QueryOptions, stats: ScanStats, limit: int | None = None,
               offsets: list[Committed] | None = None):
    """(columns, [QueueLag], rows) for ``group`` (see :mod:`mqtool.lag`)."""
    s = open_store(path)
    where = "--offsets"
    if offsets is None:
        offsets, where = committed_offsets(s, stats)
    mine = pick_group(offsets, group, where)
    if not s.segments:          # a metadata-only copy: the committed offsets are still worth seeing
        stats.note(f"{s.path}: no commitlog segments here: only the committed offsets can be shown")
    by_cq: list[tuple[QueueLag, int]] = []
    by_scan: dict[tuple[str, int], tuple[QueueLag, int | None]] = {}
    queues: list[QueueLag] = []
    for e in mine:
        cq = [] if opts.scan else [q for q in s.queues(e.topic, e.queue) if q.files]
        if cq:
            q = queue_lag(e, indexfiles.cq_queue_end(cq[0], lambda p, x: stats.note(f"{p}: unreadable ({x})")))
            if q.unconsumed:
                first, low = position(e)[0], cq[0].files[0].base // F.CQ_STORE_UNIT_SIZE
                if first < low:         # the broker deleted the files before it: those messages are gone
                    q.note = f"queue offsets {first}..{low - 1} are no longer in the consumequeue (files deleted)"
                    first = low
                by_cq.append((q, first))
        else:
            q = queue_lag(e, None)
            q.note = None
            by_scan[(e.topic, e.queue)] = (q, position(e)[0])
        queues.append(q)
    if by_scan and not opts.scan and s.segments:
        stats.note(f"{len(by_scan)} queue(s) of the group have no consumequeue files: answered from the commitlog")
    cols = MESSAGE_COLUMNS + ([BODY_COLUMN] if opts.body != "none" else [])
    return cols, queues, _rows(s, opts, stats, by_cq, by_scan, limit)


def _rows(s: RocketStore, opts: QueryOptions, stats: ScanStats, by_cq, by_scan, limit):
    left = [limit if limit is not None else -1]

    def room() -> bool:
        return left[0] != 0

    def give(row, q):
        left[0] -= 1
        return tag(row, q)

    reader = MessageReader(s.segments)
    try:
        for q, first in by_cq:
            if not room():
                break
            qopts = dataclasses.replace(opts, topic=q.topic, queue=q.queue, queue_offset=first,
                                        count=q.max_offset - first, scan=False)
            for row in _by_queue(s, reader, qopts, stats):
                yield give(row, q)
                if not room():
                    break
    finally:
        reader.close()
    if by_scan:
        yield from _by_scan(s, opts, stats, by_scan, room, give)


def _by_scan(s, opts, stats, by_scan, room, give):
    """One commitlog walk for the queues without consumequeue: rows in commitlog order; the queue ends (the
    highest QUEUEOFFSET + 1) are known when the walk is over, so it goes on to the end past ``--limit``."""
    ends: dict[tuple[str, int], int] = {}
    for m in _scan(s, stats):
        key = (m.topic, m.queue_id)
        hit = by_scan.get(key)
        if hit is None:
            continue
        qpos = _queue_position(m, m.topic, m.queue_id)
        if qpos is None:
            continue
        ends[key] = max(ends.get(key, 0), qpos + 1)
        q, first = hit
        if first is not None and qpos >= first and room():
            row = m.to_row(opts.body)
            row["via"] = "scan"
            row["cq_queue_offset"] = qpos
            yield give(row, q)
    for key, (q, _) in by_scan.items():
        e = Committed(q.group, q.topic, q.queue, q.committed, q.source)
        done = queue_lag(e, ends.get(key))
        q.max_offset, q.unconsumed, q.note = done.max_offset, done.unconsumed, done.note
