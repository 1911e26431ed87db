"""``mqtool query`` for Kafka: by offset (.index lookup then scan), by timestamp (.timeindex lookup then
scan), by key (scan), by producer id (batches with their transaction outcome)."""
from __future__ import annotations

import bisect
from pathlib import Path

from formats import kafka as K
from mqtool.errors import InputError, NotAStoreError, UsageError
from mqtool.io import map_input
from mqtool.kafka import indexfiles as F
from mqtool.codecs import CodecError
from mqtool.kafka.dump import LOG_COLUMNS, batch_row, record_row
from mqtool.kafka.store import Partition, discover, partition_from_dir
from mqtool.kafka.rebuild import control_type_of
from mqtool.kafka.records import Batch, control_type_name, iter_records
from mqtool.kafka.scan import scan
from mqtool.columns import Column

QUERY_COLUMNS = [Column("partition", "Partition")] + LOG_COLUMNS + [Column("txn_state", "Txn")]


def _partitions(path: Path, topic: str | None) -> list[Partition]:
    if path.is_file():
        parts = [partition_from_dir(path.parent)]
    else:
        parts = [p for ld in discover(path) for p in ld.partitions]
    if not parts:
        raise NotAStoreError("no Kafka partition found", str(path))
    if topic:
        parts = [p for p in parts if p.topic == topic]
    return parts


def _index_position(seg, target: int) -> int:
    """Start position for ``target``: the largest .index entry with offset < target (Kafka's lookup)."""
    if seg.index is None:
        return 0
    try:
        idx = F.read_offset_index(seg.index)
    except Exception:  # noqa: BLE001 - an unreadable index just means a scan from 0
        return 0
    i = bisect.bisect_left(idx.entries, target - seg.base_offset, key=lambda e: e[0]) - 1   # (no list of them)
    return _in_log(seg, idx.entries[i][1]) if i >= 0 else 0


def _in_log(seg, position: int) -> int:
    """An index's position when it lies inside the .log, else 0 (a scan from the start): index entries are
    data from the store like any other, and a negative or past-the-end one must not steer the reader."""
    try:
        size = seg.log.stat().st_size
    except OSError:
        return 0
    return position if 0 <= position < size else 0


def _time_position(seg, ts: int) -> int:
    if seg.timeindex is None:
        return 0
    try:
        t = F.read_time_index(seg.timeindex)
    except Exception:  # noqa: BLE001 - as _index_position: an unreadable index just means a scan from 0
        return 0
    i = bisect.bisect_left(t.entries, ts, key=lambda e: e[0]) - 1
    if i < 0:
        return 0
    return _index_position(seg, seg.base_offset + t.entries[i][1] + 1)


def _batches_from(seg, start: int, on_unreadable=None):
    """Batches from ``start`` (an index position); from 0 when no batch starts exactly there (a stale or
    crafted index must not hide the batches before it). A log that cannot be opened (a FIFO, a directory, a
    link loop named like a segment) goes to ``on_unreadable(note)`` and gives no batch, or raises without it."""
    try:
        m = map_input(seg.log, ranged=True)         # a remote file: scan() fetches what it reads
    except InputError as e:
        if on_unreadable is None:
            raise
        on_unreadable(f"{seg.log}: file-unreadable: {e.message}")
        return
    with m:
        fd = m.fileno() if m.mapped else None
        first = True
        for ev in scan(m.buf, str(seg.log), start=start, fd=fd):
            if first and start > 0 and not isinstance(ev, Batch):
                yield from (b for b in scan(m.buf, str(seg.log), fd=fd) if isinstance(b, Batch))
                return
            first = False
            if isinstance(ev, Batch):
                yield ev


def _row(part, b, rec, opts):
    r = record_row(b, rec, _Opts(opts.body))
    r["partition"] = part.label
    return r


class _Opts:
    def __init__(self, body):
        self.body = body
        self.print_data = True


def run_query(path: Path, opts, stats):
    parts = _partitions(path, opts.topic)
    if opts.offset is not None:
        return QUERY_COLUMNS, _by_offset(parts, opts, stats)
    if opts.timestamp is not None:
        return QUERY_COLUMNS, _by_time(parts, opts, stats)
    if opts.key is not None:
        return QUERY_COLUMNS, _by_key(parts, opts, stats)
    if opts.producer_id is not None:
        return QUERY_COLUMNS, _by_pid(parts, opts, stats)
    if opts.time_from is not None or opts.time_to is not None:
        return QUERY_COLUMNS, _by_time_range(parts, opts, stats)
    raise UsageError("Kafka query needs --offset, --timestamp, --key, --producer-id or --time-from/--time-to")


def _by_offset(parts, opts, stats):
    target = opts.offset
    for part in parts:
        segs = [s for s in part.segments if s.log is not None]
        bases = [s.base_offset for s in segs]
        i = bisect.bisect_right(bases, target) - 1
        if i < 0:
            continue
        seg = segs[i]
        for b in _batches_from(seg, _index_position(seg, target), stats.damage):
            if b.last_offset < target:
                continue
            try:
                for rec in iter_records(b):
                    if rec.offset == target or (opts.containing and rec.offset >= target):
                        yield _row(part, b, rec, opts)
                        break
            except (CodecError, ValueError, IndexError) as e:
                stats.damage(f"{b.file}@{b.position}: {e}")
            break


def _by_time(parts, opts, stats):
    ts = opts.timestamp
    for part in parts:
        done = False
        for seg in part.segments:
            if seg.log is None or done:
                continue
            for b in _batches_from(seg, _time_position(seg, ts), stats.damage):
                if b.max_timestamp < ts:
                    continue
                try:
                    for rec in iter_records(b):
                        if rec.timestamp >= ts:
                            yield _row(part, b, rec, opts)
                            done = True
                            break
                except (CodecError, ValueError, IndexError) as e:
                    stats.damage(f"{b.file}@{b.position}: {e}")
                if done:
                    break


def data_records(part, on_damage, on_unreadable=None):
    """(batch, record) of every data record of the partition's segments, in log order (transaction markers
    left out); a batch whose records cannot be read goes to ``on_damage(batch, error)`` and the walk goes on
    (a log that cannot be opened: see :func:`_batches_from`)."""
    for seg in part.segments:
        if seg.log is None:
            continue
        for b in _batches_from(seg, 0, on_unreadable):
            if b.is_control:
                continue
            try:
                for rec in iter_records(b):
                    yield b, rec
            except (CodecError, ValueError, IndexError) as e:
                on_damage(b, e)


def _by_key(parts, opts, stats):
    want = opts.key.encode("utf-8")
    n = 0
    for part in parts:
        for b, rec in data_records(part, lambda b, e: stats.damage(f"{b.file}@{b.position}: {e}"), stats.damage):
            if rec.key == want:
                yield _row(part, b, rec, opts)
                n += 1
                if opts.max and n >= opts.max:
                    return


def _by_pid(parts, opts, stats):
    pid = opts.producer_id
    for part in parts:
        pending: list[dict] = []
        for seg in part.segments:
            if seg.log is None:
                continue
            for b in _batches_from(seg, 0, stats.damage):
                if b.producer_id != pid:
                    continue
                row = batch_row(b)
                row["partition"] = part.label
                if b.is_control:
                    ct = control_type_of(b)
                    outcome = {K.CONTROL_ABORT: "aborted", K.CONTROL_COMMIT: "committed"}.get(ct)
                    row["control_type"] = None if ct is None else control_type_name(ct)
                    row["txn_state"] = "marker"
                    for p in pending:
                        p["txn_state"] = outcome or "unknown"
                    yield from pending
                    pending = []
                    yield row
                elif b.is_transactional:
                    row["txn_state"] = "ongoing"
                    pending.append(row)
                else:
                    row["txn_state"] = "idempotent" if b.producer_id >= 0 else None
                    yield row
        yield from pending


def _by_time_range(parts, opts, stats):
    """Records with time_from <= timestamp < time_to (scan from the .timeindex position of time_from)."""
    lo = opts.time_from if opts.time_from is not None else -1
    hi = opts.time_to
    for part in parts:
        for seg in part.segments:
            if seg.log is None:
                continue
            start = _time_position(seg, lo) if lo >= 0 else 0
            for b in _batches_from(seg, start, stats.damage):
                if b.max_timestamp < lo:
                    continue
                try:
                    for rec in iter_records(b):
                        if rec.timestamp >= lo and (hi is None or rec.timestamp < hi):
                            yield _row(part, b, rec, opts)
                except (CodecError, ValueError, IndexError) as e:
                    stats.damage(f"{b.file}@{b.position}: {e}")
