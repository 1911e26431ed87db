"""LiteMQ byte-range splitter (the family side of :mod:`mqtool.ranges`).

LiteMQ records carry no stored commitlog offset (the field is always 0), and what ``dump commitlog`` lists
is the **live chain**: records back to back from byte 0 of the first file, through every exactly-full file,
up to the first zero length, bad length, bad magic or undecodable record (see :mod:`mqtool.litemq.scan`).
Bytes after that point (stale records of an older run, records behind damage) are not live, even when they
look like records.

So a range reader cannot trust a magic found near its start: it would resync into the middle of a record
(a body holding LiteMQ bytes) or into stale data after the end. Instead it **validates the chain** up to its
start: it hops the length prefixes from byte 0 of its segment (length bounds and the magic at +4 of every
record, no decoding, about 1 µs per record) to the first record boundary at or after ``rng.start``, and
every earlier segment of the store must be an exactly-full chain (memoised per process). From there it
decodes the records that start before ``rng.stop`` with the walk's own :func:`live_record_at`, reading
the last one past the range end; the next range's hop lands exactly where this one stopped.

Known limit (Spark data source and export only): a record whose length and magic are intact but whose fields
overrun or disagree with its length ends the live data in the whole-store scan, while the hop of a *later*
range does not decode and keeps going. ``--jobs`` is exact anyway: each range reports where its chain ended
and the parent drops the rows of the ranges after it, then produces the walk's findings (file list, store
time regression, the end of data and what follows it) from the ranges' summaries, so notes and exit code are
those of one process.

``--include-stale`` (carving after the end of data) runs in one process.
"""
from __future__ import annotations

import dataclasses
import os
import struct
from functools import lru_cache
from operator import itemgetter
from typing import Iterator

from mqtool.io import map_input
from mqtool.litemq.store import Segment, commitlog_segments, resolve

from mqtool.litemq.rows import BODY_COLUMN, MESSAGE_COLUMNS, RECORD, record_row
from mqtool.litemq.rows import ROW_FIELDS  # noqa: F401 (the family protocol's name, mqtool.ranges)
from mqtool.litemq.history import note_damage
from mqtool.litemq.scan import (TIME_REGRESSION_MS, WalkResult, _full, damage_finding, hop,  # noqa: F401
                                live_record_at, regression_damage, walk_prologue, walk_tail)
from mqtool.findings import ERROR
from mqtool.options import DumpOptions, ScanStats
from mqtool.ranges import ByteRange, rows_stay_in_one_process, runner_for, split_segments
from mqtool.ndjson import PreRendered

FAMILY = "litemq"
ROW_TASK_SPLIT = 8 * 1024 * 1024
_U32 = struct.Struct(">I")

# ROW_FIELDS: the message row of `mqtool dump commitlog` (rows.record_row) with `store` first, the Spark/Parquet
# schema (rows.py).


# Keys a dump row leaves out when they have no value (Spark rows have every column; see mqtool.spark.fleet).
OPTIONAL_WHEN_NULL = tuple(f.name for f in RECORD if f.optional and f.export)
# Map columns a dump row renders with sorted keys.
SORTED_MAPS = ("properties",)


def _mtime(p) -> int:
    try:
        return os.stat(p).st_mtime_ns
    except OSError:
        return 0


def _store(path: str):
    """(store, segments, nominal file size) of a store path, as the whole-store walk lists them (cached per
    process while the path and its commitlog directory are unchanged)."""
    return _store_cached(path, _mtime(path), _mtime(os.path.join(path, "commitlog")))


@lru_cache(maxsize=32)
def _store_cached(path: str, _m1: int, _m2: int):
    store = resolve(path)
    segs, fs = commitlog_segments(store)
    return store, segs, fs


def plan(path, split_size: int | None = None) -> list[ByteRange]:
    """Ranges over the commitlog files of a data dir, commitlog dir or one segment file (the files the
    whole-store walk reads, in its order)."""
    _store_cached.cache_clear()
    _, segs, _ = _store(str(path))
    return split_segments(FAMILY, str(path), segs, split_size)


# Per process: the furthest record boundary known to lie on the intact chain of a file, keyed by
# (path, size, mtime_ns). A worker that reads consecutive ranges of a file resumes its hop there.
_BOUNDARY: dict[tuple, int] = {}


def _hop_to(seg: Segment, buf, size: int, until: int) -> tuple[int, bool]:
    try:
        st = os.stat(seg.path)
        key = (str(seg.path), st.st_size, st.st_mtime_ns)
    except OSError:
        key = None
    known = _BOUNDARY.get(key, 0) if key is not None else 0
    pos, ok = hop(buf, known if known <= until else 0, size, until)
    if ok and key is not None:
        if len(_BOUNDARY) > 4096:
            _BOUNDARY.clear()
        _BOUNDARY[key] = max(pos, _BOUNDARY.get(key, 0))
    return pos, ok


def _remember(seg: Segment, pos: int) -> None:
    try:
        st = os.stat(seg.path)
    except OSError:
        return
    key = (str(seg.path), st.st_size, st.st_mtime_ns)
    if pos > _BOUNDARY.get(key, 0):
        _BOUNDARY[key] = pos


def range_records(rng: ByteRange, with_body: bool = False, on_end=None, earlier_full: bool = False) -> Iterator:
    """Live :class:`~mqtool.litemq.records.LiteRecord` s that start in ``rng``, in order. ``on_end(problem,
    position)`` is called when the live chain ends inside this range (``problem`` as from
    :func:`parse_record_at`). ``earlier_full``: take the earlier files to be exactly full (a caller that folds
    the ranges in order knows where the live data ended), else that is checked."""
    store, segs, _ = _store(rng.store)
    if rng.seg_index >= len(segs):
        return
    seg = segs[rng.seg_index]
    for prev in segs[:rng.seg_index] if not earlier_full else ():
        if not _full(prev):
            return                      # the live data ended in an earlier file
    name = store.display(seg.path)
    with map_input(seg.path, ranged=True) as mi:      # a remote file: hop() and parse_record_at fetch what they read
        buf = mi.buf
        size = len(buf)
        if size == 0:
            if on_end is not None:
                on_end(("zero-length", "empty file", None, 0), 0)
            return
        pos, ok = _hop_to(seg, buf, size, rng.start)
        if not ok:
            return                      # the chain ended before this range
        while pos < rng.stop and pos < size:
            rec, prob = live_record_at(buf, pos, size, seg, name)
            if rec is None:
                if on_end is not None:
                    on_end(prob, pos)
                return
            if with_body:
                rec.body = bytes(buf[rec.body_slice[0]:rec.body_slice[1]])
            yield rec
            pos += 4 + rec.length
        _remember(seg, pos)


def record_filter(opts: DumpOptions):
    """The filters of ``dump commitlog`` (mqtool.litemq.ops._dump_commitlog) as a predicate."""
    lo, hi, topic, key, tag = opts.from_offset, opts.to_offset, opts.topic, opts.key, opts.tag

    def keep(rec) -> bool:
        if lo is not None and rec.offset < lo:
            return False
        if hi is not None and rec.offset >= hi:
            return False
        m = rec.m
        if topic is not None and m["Topic"] != topic:
            return False
        if key is not None and key not in m["Keys"]:
            return False
        if tag is not None and tag not in m["Tags"]:
            return False
        return True

    return keep


def iter_range_rows(rng: ByteRange, opts: DumpOptions, on_damage=None, on_end=None) -> Iterator[dict]:
    """The rows of ``dump commitlog`` (filters of ``opts`` applied; live records only, never carved stale
    ones) for the records starting in ``rng``. ``on_damage(note)`` gets a one-line note when the live chain
    ends in this range on something else than zero fill."""
    keep = record_filter(opts)
    body = opts.body

    def ended(prob, pos):
        if on_end is not None:
            on_end(prob, pos)
        if on_damage is not None and prob[0] != "zero-length":
            on_damage(end_note(rng, prob, pos))

    _prologue_notes(rng, on_damage)
    for rec in range_records(rng, body != "none", ended):
        if keep(rec):
            yield record_row(rec, body)


def _prologue_notes(rng: ByteRange, on_damage) -> None:
    """The first range of a store also gives the errors about the file list (:func:`walk_prologue`: a file
    named like a commitlog file that cannot be read, missing files), which no range reads."""
    if on_damage is None or rng.seg_index != 0 or rng.start != 0:
        return
    store, segs, fs = _store(rng.store)
    for d in walk_prologue(store, segs, fs):
        f = damage_finding(d)
        if f.severity == ERROR:
            on_damage(f"{f.code}: {f.file}: {f.message}")


COLUMN_CHUNK = 4096


def iter_range_columns(rng: ByteRange, opts: DumpOptions, names, on_damage=None, on_end=None):
    """The rows of :func:`iter_range_rows` as ``({topic: (columns, n)}, ...)`` chunks (``columns``: each of
    ``names`` → its values, a name missing is all null; rows grouped by topic inside a chunk), built column by
    column from the live records without a dict per row. A chunk with a record whose text is not UTF-8 (its
    row carries base64 text) is built from :func:`~mqtool.litemq.rows.record_row` rows instead. The note of a
    chain that ends in the range comes after the range's rows, as :func:`iter_range_rows` gives it."""
    return _range_columns(rng, opts, [n for n in names if n != "store"], on_damage, on_end)


def _range_columns(rng, opts, names, on_damage, on_end):
    keep = record_filter(opts)
    body = opts.body
    ends: list = []
    _prologue_notes(rng, on_damage)
    run: list = []          # one tuple of values per record (_ROW_VALUES): the record itself is not held
    get_m = _M_GET
    for rec in range_records(rng, body != "none", lambda prob, pos: ends.append((prob, pos))):
        if not keep(rec):
            continue
        if rec.bad_utf8:    # rare: base64 text in the row; this row's values are the dump row's
            if run:
                yield _chunk(run, names)
                run = []
            row = record_row(rec, body)
            yield {row["topic"]: ({n: [row.get(n)] for n in names}, 1)}
            continue
        m = rec.m
        bs = rec.body_slice
        run.append(get_m(m) + (rec.file, rec.position, rec.offset, rec.size, bs[1] - bs[0],
                               dict(sorted(m["Properties"])), rec.state,
                               None if body == "none" else _body_value(rec.body, body)))
        if len(run) >= COLUMN_CHUNK:
            yield _chunk(run, names)
            run = []
    if run:
        yield _chunk(run, names)
    for prob, pos in ends:
        if on_end is not None:
            on_end(prob, pos)
        if on_damage is not None and prob[0] != "zero-length":
            on_damage(end_note(rng, prob, pos))


# row key → Go field of LiteRecord.m for the values record_row copies as they are (and the raw Broadcast byte)
_M_FIELDS = {"msg_id": "MessageID", "topic": "Topic", "queue_id": "QueueID", "tags": "Tags", "keys": "Keys",
             "message_type_code": "MessageType", "priority": "Priority", "reliability": "Reliability",
             "delay_time": "DelayTime", "transaction_id": "TransactionID", "status_code": "MessageStatus",
             "sharding_key": "ShardingKey", "born_timestamp": "BornTimestamp", "born_host": "BornHost",
             "store_host": "StoreHost", "store_timestamp": "StoreTimestamp", "queue_offset": "QueueOffset",
             "commitlog_offset": "CommitLogOffset", "store_size": "StoreSize",
             "consume_start_time": "ConsumeStartTime", "consume_end_time": "ConsumeEndTime",
             "consume_count": "ConsumeCount", " broadcast": "Broadcast"}
_M_GET = itemgetter(*_M_FIELDS.values())
# what each record's tuple holds, in order
_ROW_VALUES = tuple(_M_FIELDS) + ("file", "position", "offset", "size", "body_size", "properties", " state", "body")
_TOPIC = _ROW_VALUES.index("topic")


def _chunk(run: list, names: list) -> dict:
    """Records' value tuples → ``{topic: (columns, n)}``: the values of :func:`~mqtool.litemq.rows.record_row`,
    column by column (transposed by ``zip``)."""
    from formats import litemq as F

    by_topic: dict = {}
    for t in run:
        by_topic.setdefault(t[_TOPIC], []).append(t)
    out = {}
    for topic, rows in by_topic.items():
        n = len(rows)
        have = dict(zip(_ROW_VALUES, map(list, zip(*rows))))
        state = have.pop(" state")
        stale = [s != "live" for s in state]
        have["stale"] = stale
        have["state"] = [s if st else None for s, st in zip(state, stale)]
        have["kind"] = ["message"] * n
        have["message_type"] = [F.MESSAGE_TYPES.get(c, f"UNKNOWN({c})") for c in have["message_type_code"]]
        have["status"] = [F.MESSAGE_STATUSES.get(c, f"UNKNOWN({c})") for c in have["status_code"]]
        have["broadcast"] = [b == 1 for b in have.pop(" broadcast")]
        out[topic] = ({k: have[k] for k in names if k in have}, n)
    return out


def _body_value(data, mode: str):
    """The ``body`` value of a row (:func:`mqtool.common.put_body`; its ``body_encoding`` is no column)."""
    from mqtool.common import put_body

    cell: dict = {}
    put_body(cell, "body", data, mode)
    return cell["body"]


def end_note(rng: ByteRange, prob, pos: int) -> str:
    store, segs, _ = _store(rng.store)
    name = store.display(segs[rng.seg_index].path)
    return f"{prob[0]}: {name}@{pos}: {prob[1]}; the live data ends here"


def _plain(opts):
    return dataclasses.replace(opts, runner=None)


@dataclasses.dataclass
class RangeDump:
    """What one range returns to the ``--jobs`` parent."""

    rows: list
    end: tuple | None           # (position, problem) where the live chain ended in this range
    max_ts: int | None          # newest store time of the range's live records
    minima: list                # (position, offset, ts, local max before) of each record older than all before
    regression: tuple | None    # first record older than the range's newest before it by > 1 s


class TimeTrack:
    """A range's store times as the in-order fold needs them (:func:`_first_regression`): the newest, each
    record older than all before it in the range (with the newest before it), and the first record older by
    more than 1 s than the newest before it in the range."""

    __slots__ = ("max_ts", "minima", "regression", "_low")

    def __init__(self):
        self.max_ts = None
        self.minima: list = []
        self.regression = None
        self._low = None

    def see(self, rec) -> None:
        ts = rec.m["StoreTimestamp"]
        max_ts = self.max_ts
        if self._low is None or ts < self._low:
            self._low = ts
            self.minima.append((rec.position, rec.offset, ts, max_ts))
        if max_ts is None or ts > max_ts:
            self.max_ts = ts
        elif self.regression is None and ts < max_ts - TIME_REGRESSION_MS:
            self.regression = (rec.position, rec.offset, ts, max_ts)


def dump_range_task(args) -> RangeDump:
    rng, opts = args
    ends: list = []
    keep = record_filter(opts)
    body = opts.body
    rows: list = []
    times = TimeTrack()
    for rec in range_records(rng, body != "none", lambda prob, pos: ends.append((pos, prob))):
        times.see(rec)
        if keep(rec):
            rows.append(record_row(rec, body))
    if opts.ndjson:
        from mqtool.ndjson import dumps

        rows = [dumps(r) for r in rows]
    return RangeDump(rows, ends[0] if ends else None, times.max_ts, times.minima, times.regression)


def _first_regression(res: RangeDump, newest: int | None):
    """The range's first record older by more than 1 s than everything before it (``newest``: the newest
    store time of the earlier ranges), as (position, offset, ts, newest before), or None."""
    best = res.regression
    if best is not None and newest is not None:
        best = best[:3] + (max(best[3], newest),)
    if newest is not None:
        for pos, off, ts, local in res.minima:
            if ts < newest - TIME_REGRESSION_MS:
                if best is None or pos < best[0]:
                    best = (pos, off, ts, newest if local is None else max(local, newest))
                break
    return best


def parallel_dump_rows(path, opts: DumpOptions, stats: ScanStats):
    """Rows of ``dump commitlog`` over ranges (``opts.runner`` or a process pool), in offset order, and the
    walk's notes; None when one process is the better (or the only exact) choice."""
    if opts.include_stale:
        return None
    if not opts.ndjson and opts.runner is None and not opts.jobs:
        return None
    if opts.limit is not None and opts.runner is None and not opts.jobs:
        return None     # --limit N, automatic --jobs: a pool would read (a remote store: fetch) far past N rows
    if rows_stay_in_one_process(opts):
        return None
    ranges = plan(path, opts.split_size or ROW_TASK_SPLIT)
    runner = runner_for(opts, ranges)        # an explicit --split-size always gets its pool
    if runner.jobs == 1 and opts.runner is None:
        return None
    plain = _plain(opts)
    store, segs, fs = _store(str(path))

    def note(d) -> None:
        note_damage(damage_finding(d), stats)

    def rows():
        for f in walk_prologue(store, segs, fs):
            note(f)
        wr = WalkResult(file_size=fs)
        for rng, res in zip(ranges, runner.imap(dump_range_task, [(r, plain) for r in ranges])):
            if not wr.regressed:
                reg = _first_regression(res, wr.max_live_ts)
                if reg is not None:
                    wr.regressed = True
                    pos, off, ts, newest = reg
                    note(regression_damage(store.display(segs[rng.seg_index].path), pos, off, newest, ts))
            if res.max_ts is not None and (wr.max_live_ts is None or res.max_ts > wr.max_live_ts):
                wr.max_live_ts = res.max_ts
            for r in res.rows:
                stats.messages += 1
                yield PreRendered(r) if opts.ndjson else r
            if res.end is not None:     # the live data ends here: later ranges hold no live records
                pos, prob = res.end
                for f in walk_tail(store, segs, rng.seg_index, pos, prob, wr, carve_stale=False):
                    note(f)
                return

    return rows()


def message_columns(body: str = "none"):
    """Table columns for message rows (as ``dump commitlog`` shows them)."""
    return MESSAGE_COLUMNS + ([BODY_COLUMN] if body != "none" else [])
