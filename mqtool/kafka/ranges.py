"""Kafka byte-range splitter (the family side of :mod:`mqtool.ranges`).

Every ``.log`` segment (and KRaft ``.checkpoint`` snapshot) that ``dump kafka`` reads is cut into ranges. A
range reader is :func:`mqtool.kafka.dump.log_rows` in range mode: it resyncs from the range start with the
scanner's own rule (:func:`mqtool.kafka.scan.resync`: magic at +16, sane length, valid CRC), walks
exactly like the whole-file scan (bad-CRC batches that lead to the next batch, skipped damage, zero and
partial tails) and stops at the resync point of its range end, so that it reads its last batch past
``stop`` and the next range begins where it stopped. Rows are those of ``dump kafka`` (batches, damage, and
records with ``--deep`` / ``--print-data`` / ``--key``), with ``store``, ``topic`` and ``partition`` first.

Byte positions are per file (``ByteRange.base`` is 0): Kafka offsets are message offsets, not bytes.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from mqtool.kafka.rows import ROW_FIELDS  # noqa: F401 (the family protocol's name, mqtool.ranges)
from mqtool.kafka import store as L
from mqtool.options import DumpOptions, ScanStats
from mqtool.ranges import ByteRange, can_spool, rows_stay_in_one_process, runner_for, split_segments
from mqtool.ndjson import PreRendered

FAMILY = "kafka"
ROW_TASK_SPLIT = 8 * 1024 * 1024
METADATA_TOPIC = "__cluster_metadata"

# The rows of `mqtool dump kafka` on logs (batch, record and damage rows; see docs/kafka.md), with `store`,
# `topic`, `partition` first: ROW_FIELDS (rows.py). A row has the columns of its kind; the others are null.


@dataclass(frozen=True)
class _Seg:
    path: str
    name: str
    size: int
    base: int = 0


def log_files(path) -> list[Path]:
    """The log files ``dump kafka PATH`` walks, in its order (none for a non-log file)."""
    p = Path(path)
    if p.is_file():
        return [p] if L.file_kind(p) in ("log", "kraft-snapshot") else []
    out: list[Path] = []
    for ld in L.discover(p):
        if ld.bootstrap_checkpoint is not None:
            out.append(ld.bootstrap_checkpoint)
        for part in ld.partitions:
            out.extend(seg.log for seg in part.segments if seg.log is not None)
            out.extend(f for _end, _epoch, f in part.kraft_snapshots)
    return out


def plan(path, split_size: int | None = None) -> list[ByteRange]:
    segs = []
    for f in log_files(path):
        try:
            size = f.stat().st_size
        except OSError:
            size = 0
        segs.append(_Seg(str(f), f.name, size))
    return split_segments(FAMILY, str(path), segs, split_size)


def topic_partition(file) -> tuple[str | None, int | None, bool]:
    """(topic, partition, filtered by --topic) of a log file, as ``dump kafka`` names it."""
    p = Path(file)
    if p.name == "bootstrap.checkpoint":
        return METADATA_TOPIC, None, False
    m = L.PARTITION_DIR.match(p.parent.name)
    part = int(m.group("part")) if m else None
    if L.file_kind(p) == "kraft-snapshot":
        return METADATA_TOPIC, part, True
    return (m.group("topic") if m else None), part, True


def iter_range_rows(rng: ByteRange, opts: DumpOptions, on_damage=None) -> Iterator[dict]:
    """The rows of ``dump kafka`` (filters of ``opts`` applied) for the entries starting in ``rng``."""
    topic, partition, _ = topic_partition(rng.file)
    if not _wanted(rng, opts):
        return
    stats = ScanStats()
    if on_damage is not None:
        stats.damage = on_damage            # type: ignore[method-assign]
    for row in _range_log_rows(rng, opts, stats, topic):
        row["topic"] = topic
        row["partition"] = partition
        yield row


def _range_log_rows(rng: ByteRange, opts, stats, topic):
    """log_rows in range mode; a file that cannot be opened is one note (from its first range), as in
    ``dump kafka`` of a directory (kafka.dump._guarded), when the path was a directory."""
    from mqtool.errors import InputError
    from mqtool.kafka.dump import log_rows

    rows = log_rows(Path(rng.file), opts, stats, topic, start=rng.start, stop=rng.stop)
    if Path(rng.store).is_file():
        yield from rows
        return
    try:
        yield from rows
    except InputError as e:
        if rng.start == 0:
            stats.damage(f"{e.file}: file-unreadable: {e.message}")


def _plain(opts):
    return dataclasses.replace(opts, runner=None)


def _wanted(rng: ByteRange, opts) -> bool:
    """``dump kafka --topic``: only that topic's partitions (the bootstrap checkpoint always)."""
    want = getattr(opts, "topic", None)
    _, _, filtered = topic_partition(rng.file)
    if not want or not filtered:
        return True
    m = L.PARTITION_DIR.match(Path(rng.file).parent.name)
    return (m.group("topic") if m else None) == want


def dump_range_task(args):
    """Pool task: (rows or NDJSON lines, damage notes, damaged count, batch count, the places counted) of one
    range."""
    rng, opts = args
    if not _wanted(rng, opts):
        return [], [], 0, 0, set()
    stats = ScanStats()
    topic, _, _ = topic_partition(rng.file)
    rows = list(_range_log_rows(rng, opts, stats, topic))
    if opts.ndjson:
        from mqtool.ndjson import dumps

        rows = [r if type(r) is PreRendered else dumps(r) for r in rows]   # chunks of kafka.dump
    return rows, stats.notes, stats.damaged, stats.messages, stats.noted_at


def dump_range_spool_task(args):
    """Pool task: the NDJSON of one range written straight to the spool piece ``path``; returns (path, rows,
    bytes, damage-marked lines, notes, damaged count, batch count, the places counted): no line crosses the
    pipe."""
    from mqtool.io import write_piece
    from mqtool.ndjson import spool_blocks

    rng, opts, path = args
    stats = ScanStats()
    tally: list = [0, []]
    rows = ()
    if _wanted(rng, opts):
        topic, _, _ = topic_partition(rng.file)
        rows = _range_log_rows(rng, opts, stats, topic)
    size = write_piece(path, spool_blocks(rows, tally))
    return path, tally[0], size, tally[1], stats.notes, stats.damaged, stats.messages, stats.noted_at


def _spooled_rows(runner, ranges, plain, stats: ScanStats):
    """The rows of :func:`parallel_dump_rows` as the workers' spool pieces (NDJSON), in order."""
    from mqtool.io import Spool
    from mqtool.ndjson import Spooled

    with Spool() as sp:
        work = [(r, plain, sp.piece(i)) for i, r in enumerate(ranges)]
        for piece, count, size, marked, notes, damaged, n, at in runner.imap(dump_range_spool_task, work):
            stats.messages += n
            stats.damaged += damaged
            stats.noted_at |= at          # a place a worker counted is not counted again from its row
            room = max(0, 1000 - len(stats.notes))
            stats.notes.extend(notes[:room])
            yield Spooled(piece, size, count, marked)


def parallel_dump_rows(path, opts: DumpOptions, stats: ScanStats):
    """Rows of ``dump kafka`` on a directory or log over ranges, in file then position order; None when one
    process is the better choice (or with --max-bytes, which counts from each file start)."""
    if opts.max_bytes is not None:
        return None
    if not opts.ndjson and opts.runner is None and not opts.jobs:
        return None
    if opts.limit is not None and opts.runner is None and not opts.jobs:
        return None     # --limit N, automatic --jobs: a pool would read (a remote store: fetch) far past N rows
    if rows_stay_in_one_process(opts):
        return None
    if opts.runner is None and not opts.jobs and opts.split_size is None:
        from mqtool.kafka.dump import native_lines

        if native_lines(opts):
            return None     # the compiled walker writes the lines faster than a pool could hand them over
    ranges = plan(path, opts.split_size or ROW_TASK_SPLIT)
    runner = runner_for(opts, ranges)        # an explicit --split-size always gets its pool
    if runner.jobs == 1 and opts.runner is None:
        return None
    plain = _plain(opts)
    if can_spool(opts):     # each worker writes its range's lines to a spool piece; they are copied in order
        return _spooled_rows(runner, ranges, plain, stats)

    def rows():
        for rws, notes, damaged, n, at in runner.imap(dump_range_task, [(r, plain) for r in ranges]):
            stats.messages += n
            stats.damaged += damaged
            stats.noted_at |= at          # a place a worker counted is not counted again from its row
            room = max(0, 1000 - len(stats.notes))
            stats.notes.extend(notes[:room])
            for r in rws:
                yield PreRendered(r) if opts.ndjson else r

    return rows()


def message_columns(body: str = "none"):
    from mqtool.kafka.dump import LOG_COLUMNS

    return LOG_COLUMNS
