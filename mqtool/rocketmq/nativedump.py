"""`dump commitlog` rows built by the optional compiled helper ``mqtool._native.rmqdump``.

The helper is a :class:`~mqtool.rocketmq.scan.SegmentScanner` fast lane: it consumes runs of the common unit
(exactly the units :func:`mqtool.rocketmq.records.decode_common` accepts: v1/v2 magic, IPv4 hosts, every
length consistent) and gives, for each, the dict :meth:`Message.to_row` builds (``rows``) or, for NDJSON
output, the bytes :func:`mqtool.render.write_ndjson` writes for that dict (``json_rows``, in blocks), or for
``export`` the same values column-wise by topic (``columns``, :func:`range_columns`). Every
other unit (IPv6 hosts, damage, BLANK, compressed bodies when bodies are asked for; for the JSON lane also
non-UTF-8 text and repeated property names) is left to the next lane, then to the scanner and the Python
path, so the output is the same with and without the helper (``tests/test_rocketmq_native_dump.py``).

Nothing about the layout is written in C: the core walks units with the layout :func:`layout.native_core`
gives it by field name; :func:`_configure` passes, by name, the constants and name tables of
``formats/rocketmq.py`` and the row keys.
"""
from __future__ import annotations

from itertools import repeat
import os
import struct
from collections.abc import Iterator

from formats import rocketmq as F
from mqtool import native, ndjson
from mqtool.options import DumpOptions
from mqtool.ranges import can_spool, runner_for, split_segments, spooled_rows
from mqtool.rocketmq.rows import NATIVE_KEYS
from mqtool.rocketmq.store import Segment
from mqtool.rocketmq import layout
from mqtool.rocketmq.records import Blank, Message
from mqtool.rocketmq.scan import Damage, End, FastRun, SegmentScanner, damage_note

ROWS_PER_RUN = 256         # rows handed back per lane call: bounded memory, whatever the page window

# The dict keys of Message.to_row the helper fills, in row order (the optional ones only when they apply):
# declared in mqtool/rocketmq/rows.py; the helper takes them by position.
ROW_KEYS = NATIVE_KEYS
# The fields the helper reads, in the order it takes them (names of FIXED, i.e. of the schema).
_FIELDS = ("TOTALSIZE", "MAGICCODE", "BODYCRC", "QUEUEID", "FLAG", "QUEUEOFFSET", "PHYSICALOFFSET", "SYSFLAG",
           "BORNTIMESTAMP", "BORNHOST.addr", "BORNHOST.port", "STORETIMESTAMP", "STOREHOSTADDRESS.addr",
           "STOREHOSTADDRESS.port", "RECONSUMETIMES", "PREPAREDTRANSACTIONOFFSET", "BODYLENGTH")
BODY_MODES = {"none": 0, "text": 1, "hex": 2, "base64": 3}
_KIND = ROW_KEYS.index("kind")     # a column that is a list in the helper's columns (its length: the rows)

_state: dict[str, object] = {}


def field_layout() -> tuple[tuple[int, int], ...]:
    """(offset, size) of each of :data:`_FIELDS` inside :data:`layout.FIXED` (the core walks units with them:
    :func:`layout.native_config`)."""
    return layout.at(_FIELDS)


def _configure(mod) -> None:
    comp_mask = F.COMPRESSION_TYPE_MASK
    shift = (comp_mask & -comp_mask).bit_length() - 1
    txn_mask = F.TRANSACTION_MASK
    txn_names = tuple(F.TRANSACTION_NAMES.get(i) for i in range(txn_mask + 1))
    comp_names = tuple(F.COMPRESSION_TYPES.get(i, "unknown") for i in range((comp_mask >> shift) + 1))
    mod.configure(
        row_keys=ROW_KEYS, compressed_flag=F.COMPRESSED_FLAG, comp_mask=comp_mask, comp_shift=shift,
        txn_mask=txn_mask, kind="message", v1="v1", v2="v2", txn_names=txn_names, comp_names=comp_names,
        prop_keys=F.PROPERTY_KEYS, prop_tags=F.PROPERTY_TAGS, prop_uniq=F.PROPERTY_UNIQ_KEY, key_sep=F.KEY_SEPARATOR,
        prop_sep=F.PROPERTY_SEPARATOR.encode("ascii"), nv_sep=F.NAME_VALUE_SEPARATOR.encode("ascii"),
        # the same values as rendered in an NDJSON row (json_rows)
        kind_json=_json("message"), v1_json=_json("v1"), v2_json=_json("v2"),
        txn_json=tuple(_json(n) for n in txn_names), comp_json=tuple(_json(n) for n in comp_names))


def _json(value) -> bytes:
    """``value`` as write_ndjson renders it inside a row."""
    return ndjson.dumps(value).encode("utf-8")


def file_json(file: str) -> bytes | None:
    """The file name as orjson renders it inside a row, or None when the row would not go through orjson
    (a non-UTF-8 name: write_ndjson then renders the whole row with ``json``, ASCII-escaped)."""
    if not ndjson.CAN_PRERENDER_LINES:
        return None
    try:
        file.encode("utf-8")        # orjson takes every str that encodes (no lone surrogates)
    except UnicodeEncodeError:
        return None
    return _json(file)


def helper():
    """The configured helper module (``rmqcore.dump``), or None (not built, switched off by ``MQTOOL_NATIVE``,
    or the layout refused: :func:`layout.native_core`)."""
    if layout.native_core() is None:
        return None
    mod = native.load("rmqdump")
    if mod is not None and _state.get("configured") is not mod:
        _configure(mod)
        _state["configured"] = mod
    return mod


def usable(opts) -> bool:
    """Whether :func:`rows` can serve these dump options (no per-row filter; any body mode)."""
    return (opts.topic is None and opts.key is None and opts.tag is None and opts.body in BODY_MODES
            and helper() is not None)


def rows(segments, opts, stats, on_damage) -> Iterator[dict]:
    """The rows of ``dump commitlog`` for ``segments`` with no per-row filter: the same rows, in the same order,
    as ``iter_messages(...)`` + ``to_row`` (``from``/``to`` offsets, BLANKs and damage notes included)."""
    mod = helper()
    lo, hi = opts.from_offset, opts.to_offset
    lines = opts.ndjson and opts.limit is None        # --limit counts the items: rows then, not blocks
    done = [0]
    try:
        for seg in segments:
            if lo is not None and seg.base + seg.size <= lo:
                continue
            if hi is not None and seg.base >= hi:
                break
            scanner = SegmentScanner(seg, max_size=opts.max_message_size, check_crc=True)
            if not (yield from _event_rows(mod, scanner, opts, on_damage, done, lines)):
                return
    finally:
        stats.messages += done[0]


def _event_rows(mod, scanner: SegmentScanner, opts, on_damage, done: list, lines: bool = False,
                fill: "_Fill | None" = None) -> Iterator:
    """Rows of one scanner's walk (the helper as its fast lane) with the rule of ``scan.select_events``;
    counts rows in ``done[0]``. Returns False once ``to_offset`` is passed.

    With ``fill`` (NDJSON output, no offset bounds: :func:`direct_rows`), runs of units are written by
    ``json_fill`` into ``fill``'s buffer; the rows it leaves come as dicts (write what is in the buffer first),
    and None comes whenever the buffer holds ``fill.flush`` bytes or more (write them out).

    With ``lines`` (NDJSON output, no offset bounds), runs of units come as :class:`ndjson.PreRenderedLines`
    blocks from ``json_rows`` (each a FastRun's rows, already encoded), and ``done[0]`` counts them too;
    units it leaves (non-UTF-8 text, repeated property names) come from the dict lane, then Python."""
    body = opts.body
    lo, hi = opts.from_offset, opts.to_offset
    include_blank = opts.include_blank
    out: list = []
    mode = BODY_MODES[body]
    fj = file_json(scanner.seg.path) if (lines or fill is not None) and lo is None and hi is None else None
    if fill is not None:    # lines into the buffer; where json_fill stops, the dict lane takes one unit
        if fj is None:
            raise ValueError("json_fill needs a file name orjson renders (see direct_usable)")
        scanner.fast_lane = _fill_lane(mod, fj, scanner.max_size, mode, fill,
                                       _lane(mod, scanner.seg.path, scanner.max_size, mode, out, 1))
        fj = None
    elif fj is not None:    # where the JSON lane stops, the dict lane takes one unit, then JSON again
        scanner.fast_lane = _json_lane(mod, fj, scanner.max_size, mode, out,
                                       _lane(mod, scanner.seg.path, scanner.max_size, mode, out, 1))
    else:
        scanner.fast_lane = _lane(mod, scanner.seg.path, scanner.max_size, mode, out)
    for ev in scanner.events():
        t = type(ev)
        if t is FastRun:
            if fill is not None:
                if out:
                    done[0] += len(out)
                    yield from out
                    out.clear()
                else:
                    done[0] += ev.count
                if fill.at >= fill.flush:
                    yield None
                continue
            if fj is not None:
                for r in out:
                    if type(r) is ndjson.PreRenderedLines:
                        done[0] += r.count(b"\n")
                    else:
                        done[0] += 1
                    yield r
            elif lo is None and hi is None:
                for r in out:
                    done[0] += 1
                    yield r
            else:
                for r in out:
                    o = r["offset"]
                    if lo is not None and o < lo:
                        continue
                    if hi is not None and o >= hi:
                        return False
                    done[0] += 1
                    yield r
            out.clear()
            continue
        # the units the lane left to the scanner
        if t is End:
            continue
        if lo is not None and ev.offset < lo:
            continue
        if hi is not None and ev.offset >= hi:
            return False
        if t is Message:
            done[0] += 1
            yield ev.to_row(body)
        elif t is Blank:
            if include_blank:
                done[0] += 1
                yield ev.to_row(body)
        elif t is Damage and on_damage is not None:
            on_damage(ev)
    return True


# ---- --jobs: the same rows over byte ranges, rendered by the workers ------------------------------------------

# With the helper, a row costs so little that shipping it from a worker costs more than building it: on the
# 1 GiB bench store (699,319 messages, 2 cores) `dump --json` took 1.2 s CPU / 1.4 s wall in one process and
# 3.6 s CPU / 4.0 s wall with --jobs 2 (the ~490 MB of NDJSON pickled through pipes: page faults, copies). The
# parent alone must take in and write every line, so no worker count beats one process by much: automatic
# --jobs (0) keeps one process when the helper builds the rows; an explicit --jobs N is obeyed.


def one_process(opts) -> bool:
    """Automatic ``--jobs`` (0) and the helper serves these rows: one process is the better choice."""
    return not opts.jobs and opts.runner is None and usable(opts)


# dump/salvage tasks return rows: keep each task small so results in flight stay small
ROW_TASK_SPLIT = 8 * 1024 * 1024


def dump_plan(path, segs: list[Segment], opts: DumpOptions):
    """(ranges, runner) of a ``dump commitlog`` over byte ranges: the segments split at ``--split-size`` (or
    ROW_TASK_SPLIT), ranges wholly outside ``--from/--to-offset`` left out."""
    ranges = split_segments("rocketmq", str(path), segs, opts.split_size or ROW_TASK_SPLIT)
    if opts.from_offset is not None or opts.to_offset is not None:
        ranges = [r for r in ranges
                  if not (opts.from_offset is not None and r.base + r.size <= opts.from_offset)
                  and not (opts.to_offset is not None and r.base + r.start >= opts.to_offset)]
    return ranges, runner_for(opts, ranges)


def parallel_rows(path, segs, opts, stats):
    """``dump commitlog --jobs`` with the helper in the workers: the plan and runner of
    :func:`mqtool.rocketmq.ranges.parallel_dump_rows` (same ranges, same order), each range's rows built by the
    helper and rendered to NDJSON lines in the worker. None when that function would not use a pool, or when
    rows (not lines) or another runner (Spark) are wanted: then the caller goes on as without the helper."""
    if not opts.ndjson or opts.runner is not None or not usable(opts):
        return None
    ranges, runner = dump_plan(path, segs, opts)
    if runner.jobs == 1:
        return None
    from mqtool.plainclass import replace

    plain = replace(opts, runner=None)      # picklable
    if can_spool(opts):     # each worker writes its range's lines to a spool piece; they are copied in order
        return spooled_rows(runner, range_json_rows, [(r, plain) for r in ranges], stats)
    # blocks of encoded lines travel back (the cheapest to ship and write); with --limit the caller counts
    # rows, so lines then travel one by one
    blocks = ndjson.CAN_PRERENDER_LINES and opts.limit is None

    def rows():
        for count, lines, notes in runner.imap(range_lines_task, [(r, plain, blocks) for r in ranges]):
            for n in notes:
                stats.damage(n)
            stats.messages += count
            if blocks:
                yield from lines
                continue
            for line in lines:
                yield ndjson.PreRendered(line)

    return rows()


def range_rows(rng, opts, on_damage=None) -> Iterator[dict]:
    """The rows of the units that start in byte range ``rng`` (no per-row filter; see :func:`usable`): the rows
    of :func:`mqtool.rocketmq.ranges.iter_range_rows`, built by the helper."""
    lo, hi = opts.from_offset, opts.to_offset
    if (lo is not None and rng.base + rng.size <= lo) or (hi is not None and rng.base + rng.start >= hi):
        return
    seg = Segment(rng.file, rng.name, rng.base, rng.size)
    scanner = SegmentScanner(seg, max_size=opts.max_message_size, check_crc=True, start=rng.start,
                             stop=rng.stop)
    yield from _event_rows(helper(), scanner, opts, on_damage, [0])


def range_json_rows(args, note) -> Iterator:
    """The rows of one range (``args``: range, options) for NDJSON output: blocks of encoded lines from the
    helper, dicts where it stops short; ``note`` takes each damage note (the spool task of ``--jobs``)."""
    rng, opts = args
    lane = _range_lane(rng, opts)
    if lane is None:
        return iter(())
    mod, scanner = lane
    return _event_rows(mod, scanner, opts, lambda d: note(damage_note(d)), [0], True)


def _range_lane(rng, opts):
    """(helper, scanner over the units that start in ``rng``), or None when the range lies outside
    ``--from-offset``/``--to-offset``."""
    lo, hi = opts.from_offset, opts.to_offset
    if (lo is not None and rng.base + rng.size <= lo) or (hi is not None and rng.base + rng.start >= hi):
        return None
    mod = helper()
    if mod is None:         # cannot happen in a forked worker; a spawned one may lack the build: say so
        raise RuntimeError("mqtool._native.rmqdump is not available in this worker")
    seg = Segment(rng.file, rng.name, rng.base, rng.size)
    return mod, SegmentScanner(seg, max_size=opts.max_message_size, check_crc=True, start=rng.start,
                               stop=rng.stop)


def range_lines_task(args) -> tuple[int, object, list]:
    """Pool task: (row count, rendered rows, damage notes) of the units that start in one range; the rows as
    :class:`ndjson.PreRenderedLines` blocks, or as NDJSON lines (str) when ``blocks`` is false."""
    rng, opts, blocks = args
    notes: list[str] = []
    lane = _range_lane(rng, opts)
    if lane is None:
        return 0, [], notes
    mod, scanner = lane
    done = [0]
    rows = _event_rows(mod, scanner, opts, lambda d: notes.append(damage_note(d)), done, blocks)
    if not blocks:
        return done[0], [ndjson.dumps(r) for r in rows], notes
    out: list = []
    pending: list = []
    for r in rows:              # blocks from json_rows as they are; other rows encoded in blocks of their own
        if type(r) is ndjson.PreRenderedLines:
            if pending:
                out += ndjson.ndjson_blocks(pending)
                pending.clear()
            out.append(r)
        else:
            pending.append(r)
    if pending:
        out += ndjson.ndjson_blocks(pending)
    return done[0], out, notes


def _fill_lane(mod, fj: bytes, max_size: int, mode: int, fill: "_Fill", dict_lane):
    """Lane: NDJSON lines written by ``json_fill`` into ``fill``; where it stops short (a unit it leaves, a unit
    whose body CRC fails), the dict lane takes over for what it can."""
    call = mod.json_fill

    def lane(buf, view, pos, limit, end, base):
        npos, n, fill.at = call(buf, pos, limit, end, base, fj, max_size, mode, ROWS_PER_FILL, fill.buf, fill.at,
                                fill.flush)
        if n:
            return npos, n
        return dict_lane(buf, view, pos, limit, end, base)

    return lane


def _json_lane(mod, fj: bytes, max_size: int, mode: int, out: list, dict_lane):
    """Lane: NDJSON blocks from ``json_rows``; where it stops short, the dict lane takes over for what it can."""
    call = mod.json_rows
    cap = ROWS_PER_RUN
    block = ndjson.PreRenderedLines

    def lane(buf, view, pos, limit, end, base):
        npos, n, data = call(buf, pos, limit, end, base, fj, max_size, mode, cap)
        if n:
            out.append(block(data))
            return npos, n
        return dict_lane(buf, view, pos, limit, end, base)

    return lane


def _lane(mod, file: str, max_size: int, mode: int, out: list, cap: int = ROWS_PER_RUN):
    """Lane: row dicts from ``rows`` (at most ``cap`` per call) appended to ``out``."""
    call = mod.rows

    def lane(buf, view, pos, limit, end, base):
        return call(buf, pos, limit, end, base, file, max_size, mode, out, cap)

    return lane


# ---- NDJSON written straight to the output (the CLI's `dump commitlog --json`) -------------------------------

# One process, the helper writing lines into a reused buffer that goes out in blocks of FLUSH_BYTES: no bytes
# object per block, no scan of the lines afterwards (the lines of units whose body CRC fails, the only ones
# carrying a damage mark, are left to the dict lane and rendered apart). With --jobs (and automatically from
# DIRECT_PARALLEL_MIN_BYTES of log on), the ranges of dump_plan() are shared round-robin between this process and
# forked children that write them straight to the output in order (mqtool.io.write_in_order): nothing but
# counts, damage notes and marked lines crosses a pipe.
FLUSH_BYTES = 1 << 20
HOLD_BYTES = 64 << 20           # a range's lines kept while earlier ranges are written, at most (then it waits)
ROWS_PER_FILL = 1 << 16         # units per json_fill call, at most (the page window bounds it too)
DIRECT_PARALLEL_MIN_BYTES = 64 << 20    # automatic --jobs: below this much log, one process (forks cost ~10 ms)
DIRECT_SPLIT_MAX = 64 << 20     # range size of the parallel direct writer, at most (see _direct_split)


class _Fill:
    """The reused output buffer of ``json_fill``: a bytearray whose size is its capacity, ``at`` bytes filled;
    runs end once ``flush`` bytes are in it."""

    __slots__ = ("buf", "at", "flush")

    def __init__(self):
        self.buf = bytearray(FLUSH_BYTES + (1 << 16))
        self.at = 0
        self.flush = FLUSH_BYTES


def direct_usable(opts, segments) -> bool:
    """Whether :func:`direct_rows` serves these options: the caller writes ``ndjson.Direct`` rows, NDJSON with
    no --limit, no offset bounds and no per-row filter, lines rendered by orjson (file names it takes), no
    bodies (a body's line would be copied once more into the fill buffer: those stream line by line)."""
    return (bool(getattr(opts, "write_direct", False)) and opts.ndjson and opts.limit is None
            and opts.body == "none"
            and opts.runner is None and opts.from_offset is None and opts.to_offset is None and usable(opts)
            and all(file_json(str(s.path)) is not None for s in segments))


def _walk_blocks(mod, scanner: SegmentScanner, opts, fill: _Fill, log, done: list) -> Iterator[memoryview]:
    """The NDJSON of one scanner's walk as views of ``fill``'s buffer (each valid until the next is asked for);
    ``log(0, note)`` gets each damage note, ``log(1, line)`` each line with a damage mark, in output order."""
    marks = ndjson.DAMAGED_MARKS
    for r in _event_rows(mod, scanner, opts, lambda d: log(0, damage_note(d)), done, fill=fill):
        if r is not None:                   # a row the helper left: rendered as write_ndjson renders it
            for b in ndjson.ndjson_blocks((r,)):
                if any(m in b for m in marks):
                    log(1, b[:-1])
                fill.buf[fill.at:fill.at + len(b)] = b
                fill.at += len(b)
        if fill.at >= fill.flush:
            yield from _drain(fill)
    if fill.at:
        yield from _drain(fill)


def _drain(fill: _Fill) -> Iterator[memoryview]:
    with memoryview(fill.buf) as m, m[:fill.at] as v:
        yield v
    fill.at = 0


def _range_task(args, turn) -> tuple[int, list]:
    """mqtool.io.write_in_order work: one range's NDJSON through ``turn``; (rows, [(0, note) | (1, line)])."""
    rng, opts = args
    events: list = []
    lane = _range_lane(rng, opts)
    if lane is None:
        return 0, events
    mod, scanner = lane
    fill, done = _state.get("fill") or _state.setdefault("fill", _Fill()), [0]     # one buffer per process
    fill.at, fill.flush = 0, turn.threshold
    for v in _walk_blocks(mod, scanner, opts, fill, lambda k, x: events.append((k, x)), done):
        turn.write(v)
        fill.flush = turn.threshold
    return done[0], events


def _direct_jobs(opts, segments) -> int:
    """Processes for :func:`direct_rows`: --jobs N as given (1 with bodies, which stay in one process), automatic:
    every core from DIRECT_PARALLEL_MIN_BYTES of log on; 1 where fork is unsafe (other threads) or missing."""
    import threading

    from mqtool.ranges import effective_jobs, rows_stay_in_one_process

    if opts.jobs == 1 or rows_stay_in_one_process(opts) or not hasattr(os, "fork") \
            or threading.active_count() != 1:
        return 1
    if not opts.jobs and sum(s.size for s in segments) < DIRECT_PARALLEL_MIN_BYTES:
        return 1
    return effective_jobs(opts.jobs)


def _direct_split(segments, jobs: int) -> int:
    """Range size of the parallel direct writer: about four ranges per process (the last one's time is not
    shared), within [ROW_TASK_SPLIT, DIRECT_SPLIT_MAX] -- each range start costs a look back of up to the
    largest message size (SegmentScanner._covered), and a range's lines should fit the hold size."""
    total = sum(s.size for s in segments)
    return max(ROW_TASK_SPLIT, min(DIRECT_SPLIT_MAX, total // (4 * jobs)))


def direct_rows(path, segments, opts, stats) -> Iterator:
    """The rows of ``dump commitlog --json`` as one :class:`ndjson.Direct` (see :func:`direct_usable`): the same
    bytes, notes and count as :func:`rows` rendered by write_ndjson, written by the helper (and forked workers)
    straight to the writer's stream."""
    mod = helper()

    def log(kind: int, x) -> None:
        if kind == 0:
            stats.damage(x)
        elif item.on_marked is not None:
            item.on_marked(bytes(x))

    def walks():
        for seg in segments:
            yield SegmentScanner(seg, max_size=opts.max_message_size, check_crc=True)

    def blocks() -> Iterator[memoryview]:
        fill, done = _Fill(), [0]
        try:
            for scanner in walks():
                yield from _walk_blocks(mod, scanner, opts, fill, log, done)
        finally:
            stats.messages += done[0]

    def write(binary) -> int:
        binary.flush()
        try:
            fd = binary.fileno()
        except (AttributeError, OSError, ValueError):     # an in-memory stream: this process writes
            fd = None
        jobs = _direct_jobs(opts, segments) if fd is not None else 1
        if jobs == 1:
            n = stats.messages
            for v in blocks():
                binary.write(v)
            return stats.messages - n
        from mqtool.io import write_in_order
        from mqtool.plainclass import replace
        from mqtool.ranges import _die_with_parent

        ranges = split_segments("rocketmq", str(path), segments, opts.split_size or _direct_split(segments, jobs))
        plain = replace(opts, runner=None)
        count = 0
        try:
            done = write_in_order(fd, [(r, plain) for r in ranges], jobs, _range_task, FLUSH_BYTES, HOLD_BYTES,
                                  _die_with_parent)
        finally:
            _state.pop("fill", None)        # this process's range buffer (it may have grown to the hold size)
        for n, events in done:
            count += n
            for kind, x in events:
                log(kind, x)
        stats.messages += count
        return count

    item = ndjson.Direct(write, blocks)
    yield item


# ---- export: the same rows column-wise, by topic -------------------------------------------------------------

COLUMN_CHUNK_ROWS = 16384       # rows (all topics) per chunk handed to the export writer, at most, and
COLUMN_CHUNK_BYTES = 32 << 20   # store bytes per chunk, about (bounded memory whatever the message size)


def range_columns(rng, opts, names, int_keys=(), on_damage=None, chunk: int = COLUMN_CHUNK_ROWS, map_keys=(),
                  str_keys=(), list_keys=()):
    """The rows of :func:`range_rows`, column-wise and split by topic: yields chunks of at most about ``chunk``
    rows, each ``{topic: (columns, n)}`` with ``columns`` mapping every one of ``names`` (row keys) to the
    ``n`` values of that topic's rows in row order (None where a row lacks the key; keys outside ``names``
    are left out): a list, or for the keys of ``int_keys`` (integer values) a pyarrow int64 array, or for the
    keys of ``map_keys`` (string → string maps: the properties) a pyarrow ``map<string, string>`` array, for
    the keys of ``str_keys`` (text or None) a pyarrow string array, for ``list_keys`` (lists of text) a pyarrow
    ``list<string>`` array. Runs of
    common units are filled by the helper's ``columns``; the units it declines come as dicts from the scanner
    (the Python path) and are added key by key in their place. None when the helper cannot serve ``opts`` (a
    per-row filter or offset bounds) or a row key is not among ``names``."""
    if not usable(opts) or opts.from_offset is not None or opts.to_offset is not None:
        return None
    names = tuple(names)
    if not set(ROW_KEYS) <= set(names):
        return None
    return _column_chunks(helper(), rng, opts, names, frozenset(int_keys) & set(ROW_KEYS), on_damage, chunk,
                          frozenset(map_keys) & {"properties"}, frozenset(str_keys) & set(ROW_KEYS),
                          frozenset(list_keys) & set(ROW_KEYS))


_INT32 = struct.Struct("=i")
_ZERO32 = _INT32.pack(0)


def _map_buffers() -> tuple:
    """The Arrow buffers of a ``map<string, string>`` column being filled (the helper appends a unit's
    properties to them as bytes): map offsets, key offsets, key bytes, value offsets, value bytes."""
    return (bytearray(_ZERO32), bytearray(_ZERO32), bytearray(), bytearray(_ZERO32), bytearray())


def _rows(column) -> int:
    """Rows in a column being filled (a list, or string buffers: one validity byte per row)."""
    return len(column[-1]) if type(column) is tuple else len(column)


def _str_buffers() -> tuple:
    """The Arrow buffers of a string column being filled: offsets, UTF-8 bytes, one byte per row (1 valid)."""
    return (bytearray(_ZERO32), bytearray(), bytearray())


def _str_add(sb: tuple, value) -> None:
    if value is not None:
        sb[1].extend(value.encode("utf-8"))
    sb[0].extend(_INT32.pack(len(sb[1])))
    sb[2].append(value is not None)


def _str_array(sb: tuple, rows: int):
    """The Arrow string array of filled string buffers."""
    import pyarrow as pa

    return pa.Array.from_buffers(pa.string(), rows, [_validity(sb[2], rows), pa.py_buffer(sb[0]),
                                                     pa.py_buffer(sb[1])])


def _list_buffers() -> tuple:
    """The Arrow buffers of a ``list<string>`` column being filled: list offsets, string offsets, UTF-8 bytes,
    one byte per row (1 valid)."""
    return (bytearray(_ZERO32), bytearray(_ZERO32), bytearray(), bytearray())


def _list_add(lb: tuple, values) -> None:
    for text in values or ():
        lb[2].extend(text.encode("utf-8"))
        lb[1].extend(_INT32.pack(len(lb[2])))
    lb[0].extend(_INT32.pack(len(lb[1]) // 4 - 1))
    lb[3].append(values is not None)


def _validity(flags: bytearray, rows: int):
    """The Arrow validity bitmap of one byte per row (1 valid), or None when every row is valid."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if flags.find(0) < 0:
        return None
    return pc.not_equal(pa.Array.from_buffers(pa.uint8(), rows, [None, pa.py_buffer(flags)]), 0).buffers()[1]


def _list_array(lb: tuple, rows: int):
    """The ``list<string>`` Arrow array of filled string-list buffers."""
    import pyarrow as pa

    items = len(lb[1]) // 4 - 1
    values = pa.Array.from_buffers(pa.string(), items, [None, pa.py_buffer(lb[1]), pa.py_buffer(lb[2])])
    return pa.Array.from_buffers(pa.list_(pa.string()), rows, [_validity(lb[3], rows), pa.py_buffer(lb[0])],
                                 children=[values])


def _map_add(mb: tuple, props: dict) -> None:
    """A Python row's properties onto the map buffers, as the helper adds a unit's."""
    for name, value in props.items():
        for offsets, data, text in ((mb[1], mb[2], name), (mb[3], mb[4], value)):
            data += text.encode("utf-8")
            offsets += _INT32.pack(len(data))
    mb[0].extend(_INT32.pack(len(mb[1]) // 4 - 1))


def _map_array(mb: tuple, rows: int, null_rows=()):
    """The ``map<string, string>`` Arrow array of filled map buffers (rows listed in ``null_rows`` null)."""
    import pyarrow as pa

    pairs = len(mb[1]) // 4 - 1
    keys = pa.Array.from_buffers(pa.string(), pairs, [None, pa.py_buffer(mb[1]), pa.py_buffer(mb[2])])
    items = pa.Array.from_buffers(pa.string(), pairs, [None, pa.py_buffer(mb[3]), pa.py_buffer(mb[4])])
    offsets = pa.Array.from_buffers(pa.int32(), rows + 1, [None, pa.py_buffer(mb[0])])
    mask = None
    if null_rows:
        flags = [False] * rows
        for r in null_rows:
            flags[r] = True
        mask = pa.array(flags, pa.bool_())
    return pa.MapArray.from_arrays(offsets, keys, items, type=pa.map_(pa.string(), pa.string()), mask=mask)


def _column_chunks(mod, rng, opts, names, int_keys, on_damage, chunk, map_keys=frozenset(), str_keys=frozenset(),
                   list_keys=frozenset()):
    import pyarrow as pa

    seg = Segment(rng.file, rng.name, rng.base, rng.size)
    scanner = SegmentScanner(seg, max_size=opts.max_message_size, check_crc=True, start=rng.start,
                             stop=rng.stop)
    body = opts.body
    mode = BODY_MODES[body]
    include_blank = opts.include_blank
    extra = [n for n in names if n not in ROW_KEYS]     # not filled by the helper: None for its rows
    key_at = {k: i for i, k in enumerate(ROW_KEYS)}
    by_topic: dict = {}         # topic -> one column per ROW_KEYS key (a bytearray of int64 for int_keys)
    nulls: dict = {}            # (topic, key index) -> row numbers whose int_keys value is None (Python rows)
    is_int = [k in int_keys for k in ROW_KEYS]
    is_map = [k in map_keys for k in ROW_KEYS]
    is_str = [k in str_keys for k in ROW_KEYS]
    is_list = [k in list_keys for k in ROW_KEYS]
    int64 = struct.Struct("=q").pack

    def new_entry():
        return [bytearray() if i else _map_buffers() if m else _str_buffers() if t else _list_buffers() if li
                else [] for i, m, t, li in zip(is_int, is_map, is_str, is_list)]

    extras: dict = {}           # topic -> one list per extra name (values of Python rows, padded with None)
    count = [0, 0]              # rows and store bytes in the chunk
    call = mod.columns
    file = seg.path
    max_size = scanner.max_size

    def lane(buf, view, pos, limit, end, base):
        npos, n = call(buf, pos, limit, end, base, file, max_size, mode, by_topic, new_entry, ROWS_PER_RUN)
        count[0] += n
        count[1] += npos - pos
        return npos, n

    def pad(topic, lists):
        have = _rows(lists[_KIND])
        ex = extras.setdefault(topic, [[] for _ in extra])
        for e in ex:
            e.extend(repeat(None, have - len(e)))
        return ex

    def add(row: dict):
        topic = row.get("topic")
        lists = by_topic.get(topic)
        if lists is None:
            lists = by_topic[topic] = new_entry()
        ex = pad(topic, lists)
        get = row.get
        at = _rows(lists[_KIND])
        for i, (k, lst) in enumerate(zip(ROW_KEYS, lists)):
            v = get(k)
            if is_str[i]:
                _str_add(lst, v)
            elif is_list[i]:
                _list_add(lst, v)
            elif is_map[i]:
                if v is None:
                    nulls.setdefault((topic, i), []).append(at)
                    v = {}
                _map_add(lst, v)
            elif not is_int[i]:
                lst.append(v)
            elif v is None:
                nulls.setdefault((topic, i), []).append(at)
                lst += bytes(8)
            else:
                lst += int64(v)
        for n, e in zip(extra, ex):
            e.append(get(n))
        count[0] += 1
        count[1] += row.get("size") or 0

    def chunk_out():
        out = {}
        for topic, lists in by_topic.items():
            ex = pad(topic, lists)
            rows = _rows(lists[_KIND])
            for i, ints in enumerate(is_int):
                if is_str[i]:
                    lists[i] = _str_array(lists[i], rows)
                elif is_list[i]:
                    lists[i] = _list_array(lists[i], rows)
                elif is_map[i]:
                    lists[i] = _map_array(lists[i], rows, nulls.get((topic, i), ()))
                elif ints:
                    lists[i] = pa.Array.from_buffers(pa.int64(), rows, [None, pa.py_buffer(lists[i])])
                    if (topic, i) in nulls:
                        values = lists[i].to_pylist()
                        for r in nulls[topic, i]:
                            values[r] = None
                        lists[i] = pa.array(values, type=pa.int64())
            cols = {n: lists[key_at[n]] if n in key_at else ex[extra.index(n)] for n in names}
            out[topic] = (cols, rows)
        by_topic.clear()
        nulls.clear()
        extras.clear()
        count[0] = count[1] = 0
        return out

    scanner.fast_lane = lane
    for ev in scanner.events():
        t = type(ev)
        if t is Message:
            add(ev.to_row(body))
        elif t is Blank:
            if include_blank:
                add(ev.to_row(body))
        elif t is Damage and on_damage is not None:
            on_damage(ev)
        elif t is not FastRun:
            continue
        if count[0] >= chunk or count[1] >= COLUMN_CHUNK_BYTES:
            yield chunk_out()
    if count[0]:
        yield chunk_out()
