"""RocketMQ byte-range splitter (the family side of :mod:`mqtool.ranges`).

A range reader is :class:`~mqtool.rocketmq.scan.SegmentScanner` in range mode: it resyncs from the range
start with the scanner's own rule (magic, size bounds, computed length, and the stored PHYSICALOFFSET equal
to the real offset or a valid body CRC), so a range never starts inside a unit, and reads on past the
range end until it is in step with the next range.

Used by ``dump commitlog --jobs``, ``verify store|commitlog --jobs`` (per-range partial verify state merged
in offset order, so findings equal a one-process run) and the Spark data source.
"""
from __future__ import annotations

import dataclasses
from typing import Iterator

from formats import rocketmq as F
from mqtool.options import DumpOptions, ScanStats, VerifyOptions
from mqtool.ranges import PARALLEL_MIN_BYTES, ByteRange, runner_for, split_segments
from mqtool.render import PreRendered
from mqtool.rocketmq.store import Segment, forced_commitlog, open_store
from mqtool.rocketmq.rows import BODY_COLUMN, MESSAGE_COLUMNS, ROW_FIELDS
from mqtool.rocketmq.records import Blank, Message
from mqtool.rocketmq.scan import Damage, End, SegmentScanner, select_events

FAMILY = "rocketmq"
# dump/salvage tasks return rows: keep each task small so results in flight stay small
ROW_TASK_SPLIT = 8 * 1024 * 1024
# verify with the compiled lane checks ~3 GB/s per core (CPU, mapping included): a 2-process pool (~30-60 ms to
# start) only pays from a few hundred MB on (docs/performance.md, "Native helper: rmqverify")
NATIVE_VERIFY_PARALLEL_MIN_BYTES = 256 * 1024 * 1024

# ROW_FIELDS: the message row of `mqtool dump commitlog` with `store` first, the Spark/Parquet schema (rows.py).


def plan(path, split_size: int | None = None) -> list[ByteRange]:
    """Ranges over the commitlog segments of a store root, commitlog directory or segment file (none when
    the store has no commitlog, e.g. a harvested consumequeue-only store)."""
    s = open_store(path)
    return split_segments(FAMILY, str(path), forced_commitlog(s), split_size)


def _segment(rng: ByteRange) -> Segment:
    return Segment(rng.file, rng.name, rng.base, rng.size)


def range_events(rng: ByteRange, max_size: int = F.DEFAULT_MAX_MESSAGE_SIZE, check_crc: bool = True) -> Iterator:
    """Scanner events (Message, Blank, Damage, End) of the units that start in ``rng``."""
    return SegmentScanner(_segment(rng), max_size=max_size, check_crc=check_crc,
                          start=rng.start, stop=rng.stop).events()


def iter_range_messages(rng: ByteRange, from_offset: int | None = None, to_offset: int | None = None,
                        max_size: int = F.DEFAULT_MAX_MESSAGE_SIZE, check_crc: bool = True,
                        include_blank: bool = False, on_damage=None) -> Iterator:
    """:func:`mqtool.rocketmq.scan.iter_messages` restricted to one range (same filters, same order)."""
    if from_offset is not None and rng.base + rng.size <= from_offset:
        return
    if to_offset is not None and rng.base + rng.start >= to_offset:
        return
    yield from select_events(range_events(rng, max_size, check_crc), from_offset, to_offset, include_blank,
                             on_damage)


def damage_note(d: Damage) -> str:
    """The stderr note for a damaged range met by dump/query."""
    return f"{d.file}@{d.position} (offset {d.offset}): {d.code}: {d.message}; skipped {d.length} bytes"


def iter_range_rows(rng: ByteRange, opts: DumpOptions, on_damage=None) -> Iterator[dict]:
    """The rows of ``dump commitlog`` (filters of ``opts`` applied) for the units starting in ``rng``."""
    from mqtool.rocketmq import nativedump
    from mqtool.rocketmq.ops import message_filter

    if nativedump.usable(opts):         # no per-row filter: the compiled row builder (same rows)
        yield from nativedump.range_rows(rng, opts, on_damage)
        return
    keep = message_filter(opts)
    body = opts.body
    for m in iter_range_messages(rng, opts.from_offset, opts.to_offset, opts.max_message_size,
                                 include_blank=opts.include_blank, on_damage=on_damage):
        if keep(m):
            yield m.to_row(body)


def iter_range_columns(rng: ByteRange, opts: DumpOptions, names, on_damage=None):
    """The rows of :func:`iter_range_rows` as ``(columns, n)`` chunks (``columns``: each of ``names`` → its
    values), built column-wise by the compiled helper; None when it cannot serve ``opts`` (then use the rows)."""
    from mqtool.rocketmq import nativedump

    return nativedump.range_columns(rng, opts, names, {n for n, t in ROW_FIELDS if t in ("int", "long")},
                                    on_damage)


def _plain(opts):
    """A copy of an options object that can be pickled (no runner)."""
    return dataclasses.replace(opts, runner=None)


def dump_range_task(args) -> tuple[list, list, list[str]]:
    """Pool task: (key tuples, rows as (key index, values), damage notes) of one range. Rows travel as value
    tuples with their key lists shared (far cheaper to pickle than dicts); :func:`_rows_back` rebuilds them."""
    rng, opts = args
    notes: list[str] = []
    keysets: dict[tuple, int] = {}
    rows = []
    if opts.ndjson:     # the parent only writes lines: serialise here, in parallel
        from mqtool.render import dumps

        lines = [dumps(r) for r in iter_range_rows(rng, opts, on_damage=lambda d: notes.append(damage_note(d)))]
        return None, lines, notes
    for r in iter_range_rows(rng, opts, on_damage=lambda d: notes.append(damage_note(d))):
        ks = tuple(r)
        i = keysets.get(ks)
        if i is None:
            i = keysets[ks] = len(keysets)
        rows.append((i, tuple(r.values())))
    return list(keysets), rows, notes


def _rows_back(keys: list, rows: list) -> Iterator[dict]:
    for i, vals in rows:
        yield dict(zip(keys[i], vals))


def dump_plan(path, segs: list[Segment], opts: DumpOptions):
    """(ranges, runner) of a ``dump commitlog`` over byte ranges: the segments split at ``--split-size`` (or
    ROW_TASK_SPLIT), ranges wholly outside ``--from/--to-offset`` left out."""
    ranges = split_segments(FAMILY, str(path), segs, opts.split_size or ROW_TASK_SPLIT)
    if opts.from_offset is not None or opts.to_offset is not None:
        ranges = [r for r in ranges
                  if not (opts.from_offset is not None and r.base + r.size <= opts.from_offset)
                  and not (opts.to_offset is not None and r.base + r.start >= opts.to_offset)]
    return ranges, runner_for(opts, ranges)


def parallel_dump_rows(path, segs: list[Segment], opts: DumpOptions, stats: ScanStats):
    """Rows of ``dump commitlog`` computed over ranges by ``opts.runner`` or a process pool, in offset order;
    None when one process is the better choice (then the caller scans as usual)."""
    if not opts.ndjson and opts.runner is None and not opts.jobs:
        # jobs=0 (automatic): shipping row dicts between processes costs more than decoding them, so a pool
        # pays only when the workers also render the NDJSON lines; an explicit --jobs N is obeyed anyway
        return None
    ranges, runner = dump_plan(path, segs, opts)
    if runner.jobs == 1 and opts.runner is None:
        return None
    plain = _plain(opts)

    def rows():
        for keys, rws, notes in runner.imap(dump_range_task, [(r, plain) for r in ranges]):
            for n in notes:
                stats.damage(n)
            if keys is None:
                stats.messages += len(rws)
                for line in rws:
                    yield PreRendered(line)
                continue
            for r in _rows_back(keys, rws):
                stats.messages += 1
                yield r

    return rows()


# ---- verify over ranges --------------------------------------------------------------------------

@dataclasses.dataclass
class RangeVerify:
    """What one range contributes to a commitlog verify: findings that need no outside state, in order,
    interleaved with markers the merge resolves with the state of the ranges before it:

    * ``("data",)`` — the first message or damage of the range (flushes held ``missing-blank`` findings);
    * ``("qoff", key, queue_offset, file, position, offset)`` — first dispatched message of a queue here;
    * ``("shift", delta, file, position, offset, physical_offset)`` — first message of the range;
    * ``("damage", Finding, length)``, ``("end", End, saw_blank)``, ``("salvage", row)``.
    """

    items: list
    messages: int
    expected_next: dict        # per (topic, queue): next queue offset after this range
    shift: int | None          # PHYSICALOFFSET delta of the range's last message
    dispatched_next: dict
    last_store_ts: int


class _FirstSeen(dict):
    """expected_next for one range: a miss means "first message of this queue in the range"."""

    def __init__(self):
        super().__init__()
        self.missed: list = []

    def get(self, key, default=None):
        if key not in self:
            self.missed.append(key)
            return default
        return dict.get(self, key)


def verify_range_task(args) -> RangeVerify:
    rng, opts = args
    from mqtool.rocketmq.store import RocketStore
    from mqtool.rocketmq import verify as V
    from mqtool.rocketmq.scan import FastRun
    from mqtool.rocketmq.verify import _blank_findings, _check_message, _Ctx, _damage_finding, _shift_finding

    ctx = _Ctx(RocketStore(path=rng.store), opts)
    items: list = []
    expected = _FirstSeen()
    shift = None
    seen_data = False
    saw_blank = False
    salvage = bool(opts.salvage_out)
    messages = 0
    # the one-process verify's fast lane, for the units after the range's first message of each queue
    # (ctx.shift mirrors ``shift``; None until the first message)
    ctx.shift = None
    lane = V._fast_lane(ctx, expected, known_queues_only=True) if not salvage and V.USE_FAST_LANE else None
    for ev in SegmentScanner(_segment(rng), max_size=opts.max_message_size, check_crc=True, start=rng.start,
                             stop=rng.stop, fast_lane=lane).events():
        if type(ev) is FastRun:        # clean messages of known queues, checked and counted by the lane
            messages += ev.count
            continue
        if isinstance(ev, Message):
            if not seen_data:
                seen_data = True
                items.append(("data",))
            messages += 1
            expected.missed.clear()
            items.extend(_check_message(ctx, ev, expected))
            for key in expected.missed:
                items.append(("qoff", key, ev.queue_offset, ev.file, ev.position, ev.offset))
            delta = ev.physical_offset - ev.offset
            if shift is None:
                items.append(("shift", delta, ev.file, ev.position, ev.offset, ev.physical_offset))
                shift = ctx.shift = delta
            elif delta != shift:
                if delta:
                    items.append(_shift_finding(ctx, delta, ev.file, ev.position, ev.offset, ev.physical_offset))
                shift = ctx.shift = delta
            if salvage:
                items.append(("salvage", ev.to_row("base64")))
        elif isinstance(ev, Blank):
            saw_blank = True
            items.extend(_blank_findings(ctx, ev, rng.size, rng.last_segment))
        elif isinstance(ev, Damage):
            if not seen_data:
                seen_data = True
                items.append(("data",))
            items.append(("damage", _damage_finding(ctx, ev), ev.length))
        elif isinstance(ev, End):
            items.append(("end", ev, saw_blank))
    return RangeVerify(items, messages, dict(expected), shift, ctx.dispatched_next, ctx.last_store_ts)


def verify_commitlog_ranges(ctx):
    """The commitlog part of verify over ranges (generator of findings). Returns False without yielding when
    one process is the better choice, True when done. Same findings, same order as the one-process loop."""
    from mqtool.render import progress
    from mqtool.rocketmq.verify import _check_end, _flush_pending, _queue_offset_finding, _shift_finding
    from mqtool.findings import INFO, Finding

    store, opts = ctx.store, ctx.opts
    split = opts.split_size or (ROW_TASK_SPLIT if opts.salvage_out else None)
    ranges = split_segments(FAMILY, store.path, store.segments, split)
    from mqtool.rocketmq import verify as V

    native = V._NATIVE is not None and V.USE_FAST_LANE and not opts.salvage_out
    runner = runner_for(opts, ranges, min_bytes=NATIVE_VERIFY_PARALLEL_MIN_BYTES if native else PARALLEL_MIN_BYTES)
    if runner.jobs == 1 and getattr(opts, "runner", None) is None:
        return False
    plain = _plain(opts)
    expected_next: dict = {}
    shift = 0
    pending: list[Finding] = []
    cur_seg = -1
    has_data = False
    total = sum(s.size for s in store.segments)
    done = 0
    with progress(total, "verify commitlog", enabled=opts.progress) as bar:
        for rng, res in zip(ranges, runner.imap(verify_range_task, [(r, plain) for r in ranges])):
            if rng.seg_index != cur_seg:
                cur_seg, has_data = rng.seg_index, False
            seg = _segment(rng)
            for it in res.items:
                if isinstance(it, Finding):
                    ctx.summary.add(it)
                    yield it
                    continue
                tag = it[0]
                if tag == "data":
                    if not has_data:
                        has_data = True
                        yield from _flush_pending(ctx, pending)
                elif tag == "qoff":
                    _, key, qo, file, pos, off = it
                    exp = expected_next.get(key)
                    if exp is not None and qo != exp:
                        yield _queue_offset_finding(ctx, key, exp, file, pos, off, qo)
                elif tag == "shift":
                    _, delta, file, pos, off, phys = it
                    if delta != shift:
                        if delta:
                            yield _shift_finding(ctx, delta, file, pos, off, phys)
                        shift = delta
                elif tag == "damage":
                    ctx.summary.skipped_ranges += 1
                    ctx.summary.skipped_bytes += it[2]
                    ctx.summary.add(it[1])
                    yield it[1]
                elif tag == "end":
                    yield from _check_end(ctx, seg, it[1], rng.last_segment, it[2], has_data, pending)
                elif tag == "salvage":
                    if ctx.salvage is not None:
                        ctx.salvage.add_row(it[1])
            ctx.summary.messages += res.messages
            expected_next.update(res.expected_next)
            if res.shift is not None:
                shift = res.shift
            for k, v in res.dispatched_next.items():
                if v > ctx.dispatched_next.get(k, 0):
                    ctx.dispatched_next[k] = v
            if res.last_store_ts > ctx.last_store_ts:
                ctx.last_store_ts = res.last_store_ts
            done += rng.length
            bar.update_to(done)
    for fd in pending:
        yield ctx.f(INFO, "zero-fill", fd.file, fd.position, fd.offset,
                    "data ends here; the following segment(s) are preallocated and empty")
    return True


def verify_options(opts: VerifyOptions) -> VerifyOptions:
    return _plain(opts)


def message_columns(body: str = "none"):
    """Table columns for message rows (as ``dump commitlog`` shows them)."""
    return MESSAGE_COLUMNS + ([BODY_COLUMN] if body != "none" else [])
