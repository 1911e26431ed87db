"""Kafka ``query --unconsumed-by GROUP``: the records after a consumer group's committed offsets.

Committed offsets: the OffsetCommit records (key version 0/1) of the log dir's ``__consumer_offsets-N``
partitions, decoded by :mod:`mqtool.kafka.internal`, read in log order: the last commit per (group, topic,
partition) wins and a tombstone deletes it (:func:`apply_commit`, which ``info`` uses too). The committed
offset is the next offset the group reads. Partition ends: the log end offset (the last batch's last offset
+ 1, else the last segment's base offset). Rows: ``query``'s record rows for the offsets ``committed ..
end-1`` (control records are not delivered to consumers and are not listed), read from the ``.index``
position of the committed offset on.

Several log dirs under one path (snapshots of one broker): each log dir's offsets are applied to its own
partitions. Not modelled: offset commits inside a transaction that was later aborted (they count as made).
"""
from __future__ import annotations

import bisect
from pathlib import Path

from mqtool.codecs import CodecError
from mqtool.errors import InputError, NotAStoreError
from mqtool.kafka.internal import decode_consumer_offsets
from mqtool.kafka.query import QUERY_COLUMNS, _batches_from, _index_position, _row, data_records
from mqtool.kafka.records import iter_records
from mqtool.kafka.store import LogDir, Partition, discover, partition_from_dir
from mqtool.lag import Committed, QueueLag, pick_group, position, queue_lag, tag
from mqtool.options import QueryOptions, ScanStats

OFFSETS_TOPIC = "__consumer_offsets"


def apply_commit(key: bytes | None, value: bytes | None, commits: dict, source: str) -> None:
    """Fold one ``__consumer_offsets`` record into ``commits`` ({(group, topic, partition): (offset, source)}):
    an OffsetCommit sets, a tombstone deletes, anything else is left alone."""
    d = decode_consumer_offsets(key, value)
    if d.get("type") != "OffsetCommit" or not isinstance(d.get("key"), dict):
        return
    k = d["key"]
    ident = (k.get("group"), k.get("topic"), k.get("partition"))
    if None in ident:
        return
    v = d.get("value")
    if v == "<DELETE>":
        commits.pop(ident, None)
    elif isinstance(v, dict) and isinstance(v.get("offset"), int):
        commits[ident] = (v["offset"], source)


def committed_offsets(ld: LogDir, stats: ScanStats) -> dict:
    """{(group, topic, partition): (offset, source)} from the log dir's ``__consumer_offsets`` partitions."""
    commits: dict = {}
    for part in ld.partitions:
        if part.topic != OFFSETS_TOPIC or part.dir_suffix:
            continue
        def lost(b, e):
            stats.damage(f"{b.file}@{b.position}: {OFFSETS_TOPIC} batch unreadable, its commits are missing: {e}",
                         (b.file, b.position))

        for _b, rec in data_records(part, lost):
            apply_commit(rec.key, rec.value, commits, part.label)
    return commits


def _logdirs(p: Path) -> list[LogDir]:
    if p.is_file():
        return [LogDir(None, [partition_from_dir(p.parent)])]
    lds = discover(p)
    if not lds:
        raise NotAStoreError("no Kafka log or partition directory found", str(p))
    return lds


def unconsumed(path, group: str, opts: QueryOptions, stats: ScanStats, limit: int | None = None,
               offsets: list[Committed] | None = None):
    """(columns, [QueueLag], rows) for ``group`` (see :mod:`mqtool.lag`)."""
    p = Path(path)
    lds = _logdirs(p)
    work: list[tuple[LogDir, Committed]] = []
    if offsets is not None:
        work = [(ld, e) for ld in lds for e in offsets]
        where = "--offsets"
    else:
        have = [ld for ld in lds if any(x.topic == OFFSETS_TOPIC and not x.dir_suffix for x in ld.partitions)]
        if not have:
            raise InputError(f"no {OFFSETS_TOPIC} partitions here (Kafka keeps committed offsets there; give the "
                             "log dir, or --offsets FILE)", str(p))
        for ld in have:
            for (g, t, q), (off, src) in sorted(committed_offsets(ld, stats).items()):
                work.append((ld, Committed(g, t, q, off, src)))
        where = str(have[0].path) if len(have) == 1 else str(p)
    mine = {id(e) for e in pick_group([e for _, e in work], group, where)}
    queues: list[tuple[QueueLag, Partition | None, int | None]] = []
    multi = len(lds) > 1
    for ld, e in sorted(((ld, e) for ld, e in work if id(e) in mine),
                        key=lambda x: (str(x[0].path), x[1].topic, x[1].queue)):
        part = next((x for x in ld.partitions if x.topic == e.topic and x.partition == e.queue
                     and not x.dir_suffix), None)
        if multi and ld.path is not None:
            e = Committed(e.group, f"{ld.path.name}/{e.topic}", e.queue, e.offset, e.source)
        q = queue_lag(e, _log_end(part) if part is not None else None)
        if part is None:
            q.note = f"partition {e.topic}-{e.queue} is not in this log dir"
        queues.append((q, part, position(e)[0]))
    return QUERY_COLUMNS, [q for q, _, _ in queues], _rows(queues, opts, stats, limit)


def _log_end(part: Partition) -> int:
    """The log end offset: the last batch's last offset + 1 in the newest segment with data, else the base
    offset of the newest segment (read from its last .index position on)."""
    segs = [s for s in part.segments if s.log is not None]
    for seg in reversed(segs):
        end = None
        for b in _batches_from(seg, _index_position(seg, 1 << 62)):
            end = b.last_offset + 1 if end is None else max(end, b.last_offset + 1)
        if end is not None:
            return end
    return segs[-1].base_offset if segs else 0


def _rows(queues, opts, stats, limit):
    left = limit if limit is not None else -1
    for q, part, first in queues:
        if left == 0:
            return
        if part is None or first is None or not q.unconsumed:
            continue
        segs = [s for s in part.segments if s.log is not None]
        i = max(0, bisect.bisect_right([s.base_offset for s in segs], first) - 1)
        if segs and first < segs[0].base_offset:
            q.note = (f"offsets {first}..{segs[0].base_offset - 1} are no longer in the log "
                      "(retention deleted them; the consumer would be reset)")
        for j, seg in enumerate(segs[i:]):
            for b in _batches_from(seg, _index_position(seg, first) if j == 0 else 0):
                if b.last_offset < first or b.is_control:
                    continue
                try:
                    for rec in iter_records(b):
                        if rec.offset >= first:
                            yield tag(_row(part, b, rec, opts), q)
                            left -= 1
                            if left == 0:
                                return
                except (CodecError, ValueError, IndexError) as e:
                    stats.damage(f"{b.file}@{b.position}: {e}", (b.file, b.position))
