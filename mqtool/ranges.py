"""Byte-range splitting shared by ``--jobs`` (embedded process pool) and the Spark data source.

Every log segment of a store is cut into :class:`ByteRange` s of ``split_size`` bytes. A range reader starts
at its range start, resyncs to the first record that *starts* in the range (records locate themselves: a
RocketMQ/LiteMQ unit stores its own commitlog offset, a Kafka batch carries magic, length and CRC), reads
every record that starts in the range (past the range end when a record straddles it) and stops. The union
of all ranges, in order, is exactly the whole-segment scan.

Family protocol — a family plugs in with a module ``mqtool.<family>.ranges`` that provides:

* ``FAMILY: str`` — the family name (``"rocketmq"``);
* ``plan(path, split_size) -> list[ByteRange]`` — the ranges of the store/segment at ``path``, in offset
  order (usually: list the segments, then :func:`split_segments`);
* ``iter_range_rows(rng, opts: DumpOptions) -> Iterator[dict]`` — the rows of ``mqtool dump`` (same dicts
  as its NDJSON, filters of ``opts`` applied) for the records starting in ``rng``;
* ``ROW_FIELDS: list[tuple[str, str]]`` — the message row columns with their types (vocabulary of
  :data:`TYPES`), the documented Spark/Parquet schema of the family;
* optionally ``store_damage(path) -> list[str]`` — damage of the store as a whole that no range meets (Kafka:
  offsets in no segment), as the notes ``mqtool dump`` prints and counts; ``export`` counts and prints them too.

and its ``ops.dump("commitlog"|…)`` / ``ops.verify`` honour ``opts.jobs`` and ``opts.runner`` by mapping a
module-level (picklable) task function over the ranges with :func:`runner_for` (see
``mqtool/rocketmq/ranges.py`` for the reference implementation). Findings rows need nothing per family:
:data:`FINDING_FIELDS` is common.
"""
from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator

from mqtool.plainclass import dataclass

DEFAULT_SPLIT_SIZE = 128 * 1024 * 1024
MIN_SPLIT_SIZE = 64
# Below this many bytes of log in total, a pool costs more than it saves (unless a split size was asked for).
PARALLEL_MIN_BYTES = 16 * 1024 * 1024

# Column type vocabulary shared by the Arrow and Spark schemas (mqtool.spark.schema maps them).
TYPES = ("string", "long", "int", "bool", "map<string,string>", "array<string>", "array<array<string>>")

FINDING_FIELDS: list[tuple[str, str]] = [
    ("store", "string"),
    ("kind", "string"),
    ("severity", "string"),
    ("code", "string"),
    ("file", "string"),
    ("position", "long"),
    ("offset", "long"),
    ("expected", "string"),     # JSON text of the NDJSON value (a bare string stays as it is)
    ("actual", "string"),
    ("message", "string"),
    ("id", "string"),           # unique within the store's verify run
    ("caused_by", "string"),    # the id of the root finding this one follows from
]


def parse_size(value) -> int | None:
    """'128M' / '64k' / '1GiB' / '4096' → bytes; None or '' → None. Raises ValueError."""
    if value is None or value == "":
        return None
    if isinstance(value, int):
        return value
    s = str(value).strip().upper().removesuffix("B").removesuffix("I")
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}.get(s[-1:], 1)
    try:
        return int(s[:-1] if mult > 1 else s) * mult
    except ValueError:
        raise ValueError(f"not a size: {value!r} (use e.g. 65536, 64K, 128M, 1G)") from None


@dataclass(frozen=True)
class ByteRange:
    """``[start, stop)`` in-file positions of one segment. Picklable (Spark ships it to executors)."""

    family: str
    store: str          # the store path as given (the ``store`` column of Spark/Parquet rows)
    file: str           # segment path
    name: str           # segment file name
    base: int           # global offset of the segment's byte 0
    size: int           # segment size on disk
    start: int
    stop: int
    seg_index: int      # position of the segment in the store's segment list
    last_segment: bool
    index: int = 0      # position of the range in the plan

    @property
    def length(self) -> int:
        return self.stop - self.start


def split_segments(family: str, store: str, segments: Iterable, split_size: int | None) -> list[ByteRange]:
    """Ranges for segments given as objects with ``path``, ``name``, ``base``, ``size`` (in order).

    An empty segment still gets one (empty) range so that its end-of-data events are produced.
    """
    split = int(split_size or DEFAULT_SPLIT_SIZE)
    if split < MIN_SPLIT_SIZE:
        raise ValueError(f"split size {split} is below the minimum {MIN_SPLIT_SIZE} bytes")
    segs = list(segments)
    out: list[ByteRange] = []
    for si, s in enumerate(segs):
        last = si == len(segs) - 1
        starts = list(range(0, s.size, split)) or [0]
        for st in starts:
            out.append(ByteRange(family, str(store), str(s.path), s.name, s.base, s.size, st,
                                 min(st + split, s.size) if s.size else 0, si, last, len(out)))
    return out


def family_ranges(family: str):
    """``mqtool.<family>.ranges`` (raises UsageError when the family has no splitter in this build)."""
    from mqtool.errors import UsageError
    from mqtool.families import family_module

    try:
        return family_module(family, "ranges")
    except UsageError:
        raise UsageError(f"{family}: no byte-range splitter in this build (mqtool/{family}/ranges.py); "
                         "--jobs, export and the Spark data source need one") from None


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def effective_jobs(jobs: int | None) -> int:
    """``--jobs`` value → worker count (0 or None = all cores)."""
    if not jobs or jobs < 0:
        return default_jobs()
    return jobs


# ---- runners: map a picklable task over ranges, results in order -----------------------------------

class InlineRunner:
    """Runs tasks in this process, one after the other."""

    jobs = 1

    def imap(self, fn: Callable, items: Iterable) -> Iterator:
        for it in items:
            yield fn(it)


def _die_with_parent() -> None:
    """Pool worker initializer: end this worker when the parent dies (e.g. killed by SIGPIPE under ``| head``);
    otherwise sibling workers keep the task pipe open and an orphan waits on it forever."""
    import signal

    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGTERM), 0, 0, 0)        # PR_SET_PDEATHSIG (Linux)
    except (OSError, AttributeError):
        pass
    if os.getppid() == 1:       # the parent is already gone
        os._exit(0)


class PoolRunner:
    """A process pool; results come back in submission order, at most ``window`` tasks in flight (bounded
    memory). Uses ``fork`` when this process has no other threads, else ``forkserver``."""

    def __init__(self, jobs: int, window: int | None = None):
        self.jobs = jobs
        self.window = window or 2 * jobs

    def imap(self, fn: Callable, items: Iterable) -> Iterator:
        import multiprocessing as mp
        import threading
        from concurrent.futures import ProcessPoolExecutor
        from concurrent.futures.process import BrokenProcessPool

        method = "fork" if threading.active_count() == 1 and "fork" in mp.get_all_start_methods() else None
        if method is None:
            method = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
        ex = ProcessPoolExecutor(max_workers=self.jobs, mp_context=mp.get_context(method),
                                 initializer=_die_with_parent)
        pending: deque = deque()
        try:
            it = iter(items)
            for item in it:
                pending.append(ex.submit(fn, item))
                if len(pending) >= self.window:
                    break
            for item in it:
                yield pending.popleft().result()
                pending.append(ex.submit(fn, item))
            while pending:
                yield pending.popleft().result()
        except BrokenProcessPool:
            # a worker was killed (out of memory, a signal): one line and exit 2, not a traceback
            from mqtool.errors import MqToolError

            raise MqToolError("a worker process died (killed by a signal or out of memory); "
                              "run again, or with --jobs 1") from None
        finally:
            for f in pending:
                f.cancel()
            ex.shutdown(wait=True, cancel_futures=True)


# ---- --jobs dump to NDJSON: each worker writes its range's lines to a spool piece ----------------------------

def spool_task(args) -> tuple[int, int, list, list, str]:
    """Pool task: ``rows_fn(task_args, note)`` gives the rows of one range (``note(text)`` takes a damage note);
    their NDJSON goes straight to the spool piece ``path``. Returns (rows, bytes, notes, marked lines, path)."""
    from mqtool.io import write_piece
    from mqtool.ndjson import spool_blocks

    rows_fn, task_args, path = args
    notes: list[str] = []
    tally: list = [0, []]
    size = write_piece(path, spool_blocks(rows_fn(task_args, notes.append), tally))
    return tally[0], size, notes, tally[1], path


def spooled_rows(runner, rows_fn, task_args: list, stats) -> Iterator:
    """The NDJSON of ``rows_fn`` over each of ``task_args`` (in order), computed by ``runner``'s workers and
    written by them to spool pieces: yields one :class:`mqtool.ndjson.Spooled` per task, which the writer
    (:func:`mqtool.render.write_ndjson`) copies to stdout in the kernel. Workers hand back only counts and
    notes, never the lines; at most the runner's window of pieces exists at once."""
    from mqtool.io import Spool
    from mqtool.ndjson import Spooled

    with Spool() as sp:
        work = [(rows_fn, a, sp.piece(i)) for i, a in enumerate(task_args)]
        for count, size, notes, marked, path in runner.imap(spool_task, work):
            for n in notes:
                stats.damage(n)
            stats.messages += count
            yield Spooled(path, size, count, marked)


def can_spool(opts) -> bool:
    """NDJSON rows of ``dump --jobs`` that workers can write to spool pieces: lines rendered by orjson (the
    bytes the writer would write) and no ``--limit`` (which counts rows, not pieces)."""
    from mqtool.ndjson import CAN_PRERENDER_LINES

    return bool(opts.ndjson) and opts.limit is None and CAN_PRERENDER_LINES and opts.runner is None


def rows_stay_in_one_process(opts) -> bool:
    """Dump rows that carry bodies or values (``--body``, Kafka ``--print-data``) are made in this process,
    whatever ``--jobs`` says: a worker hands back all rows of its range at once, and inflated bodies (up to
    64 MiB each) would make that unbounded; one process streams them row by row. Same rows either way. (A
    Spark runner is another matter: its executors stream to the writer.)"""
    return opts.runner is None and (getattr(opts, "body", "none") not in (None, "none")
                                    or bool(getattr(opts, "print_data", False)))


def runner_for(opts, ranges: list[ByteRange], explicit_split: bool | None = None,
               min_bytes: int = PARALLEL_MIN_BYTES):
    """The runner a command should use: ``opts.runner`` when set (e.g. Spark), else a pool when it pays
    (``opts.jobs`` > 1, more than one range, and ``min_bytes`` or more or an explicit split size), else inline.
    A command whose one-process loop is fast raises ``min_bytes``: starting the pool costs ~30-60 ms."""
    r = getattr(opts, "runner", None)
    if r is not None:
        return r
    jobs = effective_jobs(getattr(opts, "jobs", 1))
    if explicit_split is None:
        explicit_split = getattr(opts, "split_size", None) is not None
    total = sum(r.length for r in ranges)
    if jobs > 1 and len(ranges) > 1 and (explicit_split or total >= min_bytes):
        return PoolRunner(min(jobs, len(ranges)))
    return InlineRunner()
