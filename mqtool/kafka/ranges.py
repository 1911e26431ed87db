"""Kafka byte-range splitter (the family side of :mod:`mqtool.ranges`).

Every ``.log`` segment (and KRaft ``.checkpoint`` snapshot) that ``dump kafka`` reads is cut into ranges. A
range reader is :func:`mqtool.kafka.dump.log_rows` in range mode: it begins at
:func:`mqtool.kafka.scan.range_start` of its bounds (the scanner's resync rule: magic at +16, sane shape,
valid CRC; not inside the last valid entry before it; a strict budget of its own), walks exactly like the
whole-file scan (bad-CRC batches that lead to the next batch, skipped damage, zero and partial tails) and
stops where the first later range that owns something begins (the same function of that range's bounds), so
that it reads its last batch past ``stop`` and the next range begins where it stopped. Rows are those of
``dump kafka`` (batches, damage, and records with ``--deep`` / ``--print-data`` / ``--key``), with ``store``,
``topic`` and ``partition`` first.

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
from mqtool.ndjson import PreRendered, PreRenderedLines

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


def store_damage(path) -> list[str]:
    """Damage of the store as a whole, that no byte range meets: offsets in no segment (``segment-gap``) and
    segments whose ``.log`` is gone (``segment-log-missing``), as the notes ``dump kafka`` prints and counts
    (:func:`mqtool.kafka.dump.lost_segment_notes`); none for a single file."""
    p = Path(path)
    if p.is_file():
        return []
    from mqtool.kafka.dump import lost_segment_notes

    return lost_segment_notes(p)


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
        stats.damage = lambda text, at=None: on_damage(text)    # type: ignore[method-assign]
    for row in _range_log_rows(rng, opts, stats, topic):
        row["topic"] = topic
        row["partition"] = partition
        yield row


def iter_range_columns(rng: ByteRange, opts: DumpOptions, names, on_damage=None):
    """The rows of :func:`iter_range_rows` as ``({topic: (columns, n)}, ...)`` chunks (``columns``: each of
    ``names`` → its values, a name missing is all null), built column by column from the scanner's batches and
    damage events without a dict per row; None when ``opts`` asks for record rows or filters by offset or key
    (then use the rows). A chunk holds one kind (batches or damage) and ends where a damage note is given, so
    that notes and rows come in the order :func:`iter_range_rows` gives them."""
    if (getattr(opts, "deep", False) or getattr(opts, "print_data", False) or getattr(opts, "key", None) is not None
            or getattr(opts, "from_offset", None) is not None or getattr(opts, "to_offset", None) is not None):
        return None
    return _range_columns(rng, opts, list(names), on_damage)


def _range_columns(rng: ByteRange, opts, names, on_damage):
    from mqtool.errors import InputError
    from mqtool.io import map_input
    from mqtool.kafka.scan import Damage, scan_range

    if not _wanted(rng, opts):
        return
    topic, partition, _ = topic_partition(rng.file)
    note = on_damage if on_damage is not None else (lambda text: None)
    path = Path(rng.file)
    run: list = []
    try:
        with map_input(path, ranged=True) as m:     # a remote file: scan_range() fetches what it reads
            fd = m.fileno() if m.mapped else None
            for ev in scan_range(m.buf, str(path), rng.start, rng.stop, fd=fd):
                if m.shrunk():       # truncated under us: reading on would touch lost pages (SIGBUS)
                    break
                damaged = isinstance(ev, Damage)
                if run and (damaged or not ev.crc_ok or isinstance(run[0], Damage)):
                    yield _chunk(run, names, str(path), topic, partition)
                    run = []
                if damaged:
                    if ev.code == "skipped" or ev.code == "partial-tail":
                        note(f"{path}@{ev.position}: {ev.code}: {ev.message}")
                    if ev.code != "max-bytes":
                        run.append(ev)
                    continue
                if not ev.crc_ok:
                    note(f"{path}@{ev.position}: batch CRC mismatch")
                run.append(ev)
                if len(run) >= COLUMN_CHUNK:
                    yield _chunk(run, names, str(path), topic, partition)
                    run = []
            if run:
                yield _chunk(run, names, str(path), topic, partition)
                run = []
            if m.shrunk():
                note(f"{path}: file-changed: the file shrank to {m.current_size()} bytes while being read")
    except InputError as e:
        if Path(rng.store).is_file():
            raise
        if rng.start == 0:
            note(f"{e.file}: file-unreadable: {e.message}")


COLUMN_CHUNK = 4096


def _flag_text(txn, control, horizon) -> str:
    return ",".join(f for f, on in (("txn", txn), ("control", control), ("deleteHorizon", horizon is not None)) if on)


def _chunk(run: list, names: list, file: str, topic, partition) -> dict:
    """One run of batches (or of damage events) → ``{topic: (columns, n)}``: the values
    :meth:`~mqtool.kafka.records.Batch.to_row` / :func:`mqtool.kafka.dump.batch_row` /
    :func:`~mqtool.kafka.dump.damage_row` give, column-wise."""
    from operator import attrgetter

    from formats import kafka as K

    n = len(run)
    cols: dict = {}
    if "topic" in names:
        cols["topic"] = [topic] * n
    if "partition" in names:
        cols["partition"] = [partition] * n
    get = lambda a: list(map(attrgetter(a), run))  # noqa: E731
    if "file" in names:
        cols["file"] = [file] * n
    if "position" in names:
        cols["position"] = get("position")
    if not hasattr(run[0], "crc_ok"):         # damage events: the keys of kafka.rows.DAMAGE
        for name, attr in (("kind", None), ("size", "length"), ("damage", "code"), ("message", "message")):
            if name in names:
                cols[name] = ["damage"] * n if attr is None else get(attr)
        return {topic: (cols, n)}
    direct = {"size": "size", "magic": "magic", "offset": "base_offset", "last_offset": "last_offset",
              "count": "count", "timestamp": "max_timestamp", "partition_leader_epoch": "partition_leader_epoch",
              "producer_id": "producer_id", "producer_epoch": "producer_epoch", "base_sequence": "base_sequence",
              "last_sequence": "last_sequence", "is_transactional": "is_transactional", "is_control": "is_control",
              "delete_horizon_ms": "delete_horizon_ms", "crc": "crc", "crc_ok": "crc_ok", "error": "error"}
    for name in names:
        if name in direct:
            cols[name] = get(direct[name])
    if "kind" in names:
        cols["kind"] = ["batch"] * n
    if "codec" in names:
        cols["codec"] = [K.CODEC_NAMES.get(c, str(c)) for c in get("codec")]
    if "timestamp_type" in names:
        cols["timestamp_type"] = [K.TIMESTAMP_TYPES.get(t, str(t)) for t in get("timestamp_type")]
    if "base_timestamp" in names:
        cols["base_timestamp"] = [b.base_timestamp if b.magic >= 2 else None for b in run]
    if "flags" in names:
        cols["flags"] = list(map(_flag_text, get("is_transactional"), get("is_control"), get("delete_horizon_ms")))
    return {topic: (cols, n)}


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

        rows = [r if type(r) is PreRendered else _lines_text(r) if isinstance(r, PreRenderedLines) else dumps(r)
                for r in rows]   # chunks of kafka.dump
    return rows, stats.notes, stats.damaged, stats.messages, stats.noted_at


def _lines_text(block: bytes) -> str:
    """A block of NDJSON lines (each ending in a newline) as the str a PreRendered chunk holds (no final one)."""
    return block[:-1].decode("utf-8", "surrogateescape")


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
    if opts.runner is None and opts.split_size is None:
        from mqtool.kafka.dump import native_lines

        if native_lines(opts):
            # the compiled walker writes the lines in this process, --jobs threads decoding batches ahead
            # (mqtool.kafka.dump.BatchLines): faster than a pool that spools every line and copies it again
            return None
        if not opts.jobs and not (getattr(opts, "deep", False) or getattr(opts, "key", None) is not None):
            # batch rows, --jobs left to its default: one row per batch read from its header and CRC, so one
            # process reads at about the page cache's speed (1 GiB bench log: 0.52 s) and a pool's range
            # starts, spool pieces and copies only add to it (1.2-1.4 s); --jobs N or --split-size still split
            return None
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
