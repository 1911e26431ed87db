"""RocketMQ byte-range splitter (the family side of :mod:`mqtool.ranges`).

A range reader is :class:`~mqtool.rocketmq.scan.SegmentScanner` in range mode: it resyncs from the range
start with the scanner's own rule (magic, size bounds, computed length, and the stored PHYSICALOFFSET equal
to the real offset or a valid body CRC), so a range never starts inside a unit, and reads on past the
range end until it is in step with the next range.

Used by ``dump commitlog --jobs``, ``verify store|commitlog --jobs`` (per-range partial verify state merged
in offset order, so findings equal a one-process run) and the Spark data source.
"""
from __future__ import annotations

from collections.abc import Iterator

from formats import rocketmq as F
from mqtool.options import DumpOptions, ScanStats, VerifyOptions
from mqtool.ranges import ByteRange, can_spool, runner_for, split_segments, spooled_rows  # noqa: F401  (runner_for: the range verify's seam)

from mqtool.ndjson import PreRendered
from mqtool.rocketmq import nativedump
from mqtool.rocketmq.nativedump import ROW_TASK_SPLIT, dump_plan  # noqa: F401
from mqtool.rocketmq.store import Segment, forced_commitlog, open_store
from mqtool.rocketmq.rows import BODY_COLUMN, MESSAGE_COLUMNS, ROW_FIELDS  # noqa: F401  (the verbs' names)
from mqtool.rocketmq.scan import SegmentScanner, damage_note, select_events  # noqa: F401  (damage_note: Spark)

FAMILY = "rocketmq"
# verify with the compiled lane checks ~3 GB/s per core (CPU, mapping included): a 2-process pool (~30-60 ms to
# start) only pays from a few hundred MB on (docs/performance-history.md, "Native helper: rmqverify")
NATIVE_VERIFY_PARALLEL_MIN_BYTES = 256 * 1024 * 1024

# ROW_FIELDS: the message row of `mqtool dump commitlog` with `store` first, the Spark/Parquet schema (rows.py).


def message_filter(opts):
    """Predicate for --topic/--key/--tag (properties are parsed only when a key/tag filter asks)."""
    topic = opts.topic.encode("utf-8") if opts.topic else None
    key, tag = opts.key, opts.tag

    def keep(m) -> bool:
        if m.kind != "message":
            return topic is None and key is None and tag is None
        if topic is not None and m.topic_raw != topic:
            return False
        if key is not None and key not in m.keys:
            return False
        if tag is not None and m.tags != tag:
            return False
        return True

    return keep


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


def iter_range_rows(rng: ByteRange, opts: DumpOptions, on_damage=None) -> Iterator[dict]:
    """The rows of ``dump commitlog`` (filters of ``opts`` applied) for the units starting in ``rng``."""

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

    from mqtool.dataset import export_fields

    exported = dict(export_fields())      # text columns exported as text: straight into Arrow buffers
    return nativedump.range_columns(rng, opts, names, {n for n, t in ROW_FIELDS if t in ("int", "long")},
                                    on_damage, map_keys={n for n, t in ROW_FIELDS if t.startswith("map<")},
                                    str_keys={n for n, t in ROW_FIELDS if t == "string" == exported.get(n)},
                                    list_keys={n for n, t in ROW_FIELDS if t == "array<string>" == exported.get(n)})


def _plain(opts):
    """A copy of an options object that can be pickled (no runner)."""
    import dataclasses

    return dataclasses.replace(opts, runner=None)


def dump_range_task(args) -> tuple[list, list, list[str]]:
    """Pool task: (key tuples, rows as (key index, values), damage notes) of one range. Rows travel as value
    tuples with their key lists shared (far cheaper to pickle than dicts); :func:`_rows_back` rebuilds them."""
    rng, opts = args
    notes: list[str] = []
    keysets: dict[tuple, int] = {}
    rows = []
    if opts.ndjson:     # the parent only writes lines: serialise here, in parallel
        from mqtool.ndjson import dumps

        lines = [dumps(r) for r in iter_range_rows(rng, opts, on_damage=lambda d: notes.append(damage_note(d)))]
        return None, lines, notes
    for r in iter_range_rows(rng, opts, on_damage=lambda d: notes.append(damage_note(d))):
        ks = tuple(r)
        i = keysets.get(ks)
        if i is None:
            i = keysets[ks] = len(keysets)
        rows.append((i, tuple(r.values())))
    return list(keysets), rows, notes


def range_rows_noted(args, note) -> Iterator[dict]:
    """:func:`iter_range_rows` of (range, options), each damage note to ``note`` (the spool task of --jobs)."""
    rng, opts = args
    return iter_range_rows(rng, opts, on_damage=lambda d: note(damage_note(d)))


def _rows_back(keys: list, rows: list) -> Iterator[dict]:
    for i, vals in rows:
        yield dict(zip(keys[i], vals))


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
    if can_spool(opts):     # each worker writes its range's lines to a spool piece; they are copied in order
        return spooled_rows(runner, range_rows_noted, [(r, plain) for r in ranges], stats)

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

def verify_options(opts: VerifyOptions) -> VerifyOptions:
    return _plain(opts)


def message_columns(body: str = "none"):
    """Table columns for message rows (as ``dump commitlog`` shows them)."""
    return MESSAGE_COLUMNS + ([BODY_COLUMN] if body != "none" else [])
