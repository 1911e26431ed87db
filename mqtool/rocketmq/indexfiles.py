"""Readers for consumequeue files, index files and the checkpoint (layouts from :mod:`formats.rocketmq`)."""
from __future__ import annotations

import os
import struct
import sys
from array import array
from collections import Counter
from collections.abc import Iterator

from formats import rocketmq as F
from mqtool.errors import InputError, UsageError
from mqtool.options import SizeDecision
from mqtool.io import first_nonzero, hold, last_nonzero, map_input, need, ranged, read_input
from mqtool.plainclass import dataclass
from mqtool.rocketmq import dispatch
from mqtool.rocketmq.config import conf_int, read_broker_conf
from mqtool.rocketmq.store import QueueFiles
from mqtool.schemacache import prefix_format

CQ_STRUCT, _ = prefix_format(F, "CqUnit")            # derived from the schemas (or the schema cache of them)
IDX_HEADER, IDX_HEADER_NAMES = prefix_format(F, "IndexHeader")
IDX_ENTRY, _ = prefix_format(F, "IndexEntry")
CHECKPOINT_STRUCT, CHECKPOINT_NAMES = prefix_format(F, "Checkpoint")
assert CQ_STRUCT.size == F.CQ_STORE_UNIT_SIZE and IDX_HEADER.size == F.INDEX_HEADER_SIZE
assert IDX_ENTRY.size == F.INDEX_ENTRY_SIZE


@dataclass
class CqUnit:
    topic: str
    queue_id: int
    file: str
    position: int
    queue_offset: int      # logical index of the unit in its queue
    offset: int            # commitlog physical offset
    size: int
    tags_code: int

    @property
    def is_blank_fill(self) -> bool:
        return self.offset == 0 and self.size == F.CQ_BLANK_SIZE and self.tags_code == 0

    @property
    def is_zero(self) -> bool:
        return self.offset == 0 and self.size == 0 and self.tags_code == 0

    def to_row(self) -> dict:
        """The keys of ``mqtool.rocketmq.rows.CQ_UNIT``, in its order."""
        return {"kind": "cq_unit", "topic": self.topic, "queue_id": self.queue_id, "file": self.file,
                "position": self.position, "queue_offset": self.queue_offset, "offset": self.offset,
                "size": self.size, "tags_code": self.tags_code,
                "state": "blank-fill" if self.is_blank_fill else "zero" if self.is_zero else "unit"}


def iter_cq_units(q: QueueFiles, include_zero: bool = False) -> Iterator[CqUnit]:
    """Units of a queue in order, up to the last non-zero unit of each file (zero holes inside included
    when ``include_zero``; the zero tail is never yielded)."""
    unit = F.CQ_STORE_UNIT_SIZE
    for seg in q.files:
        with map_input(seg.path, ranged=True) as mi:
            buf = mi.buf
            n = len(buf) // unit
            last = _last_nonzero_unit(buf, n, unit, mi.fileno() if mi.mapped else None)
            need(buf, 0, (last + 1) * unit)         # a remote file: its units up to the last (not the zero tail)
            hold(buf)
            first_index = seg.base // unit
            for i in range(last + 1):
                off, size, tags = CQ_STRUCT.unpack_from(buf, i * unit)
                if not include_zero and off == 0 and size == 0 and tags == 0:
                    continue
                yield CqUnit(q.topic, q.queue_id, seg.path, i * unit, first_index + i, off, size, tags)


def _last_nonzero_unit(buf, n: int, unit: int, fd: int | None = None) -> int:
    """Index of the last unit that is not all zero (-1 if none). Zero runs are skipped at C speed and
    holes of sparse files without reading them (see :func:`mqtool.io.last_nonzero`)."""
    last = last_nonzero(buf, 0, n * unit, fd)
    return -1 if last < 0 else last // unit


def cq_file_tail(seg_path: str) -> tuple[int, int]:
    """(file size, index of last non-zero unit) for a consumequeue file."""
    with map_input(seg_path, ranged=True) as mi:        # a remote file: last_nonzero fetches what it reads
        n = len(mi.buf) // F.CQ_STORE_UNIT_SIZE
        return len(mi.buf), _last_nonzero_unit(mi.buf, n, F.CQ_STORE_UNIT_SIZE,
                                                mi.fileno() if mi.mapped else None)


def cq_queue_end(q, on_error=None) -> int:
    """Next logical offset of a consumequeue (``QueueFiles``): after its last non-zero unit, newest file first;
    the first file's base when every unit is zero. ``on_error(path, exc)`` hears of unreadable files."""
    for f in reversed(q.files):
        try:
            _, last = cq_file_tail(f.path)
        except Exception as e:  # noqa: BLE001 - an unreadable file: try the one before it
            if on_error is not None:
                on_error(f.path, e)
            continue
        if last >= 0:
            return f.base // F.CQ_STORE_UNIT_SIZE + last + 1
    return q.files[0].base // F.CQ_STORE_UNIT_SIZE if q.files else 0


def cq_file_size(store, opts=None) -> SizeDecision:
    """``mappedFileSizeConsumeQueue`` of a store: ``--cq-file-size``, else ``--broker-conf``, else the store's
    files (the step between the names of a queue's files, else the size most files have: the broker
    preallocates every file full size), else the default. Rounded up to whole units as the broker does."""
    given = getattr(opts, "cq_file_size", None) if opts is not None else None
    if given is not None:
        if given <= 0:
            raise UsageError("--cq-file-size must be > 0")
        return SizeDecision(dispatch.cq_file_size(given), "option", "--cq-file-size")
    conf_path = getattr(opts, "broker_conf", None) if opts is not None else None
    if conf_path:
        v = conf_int(read_broker_conf(conf_path), "mappedFileSizeConsumeQueue", conf_path)
        if v is not None:
            if v <= 0:
                raise UsageError(f"mappedFileSizeConsumeQueue={v} in {conf_path} must be > 0")
            return SizeDecision(dispatch.cq_file_size(v), "broker-conf", f"mappedFileSizeConsumeQueue in {conf_path}")
    steps, sizes = Counter(), Counter()
    unit = F.CQ_STORE_UNIT_SIZE
    for q in (store.queues() if store is not None else ()):
        for i, seg in enumerate(q.files):
            if seg.size > 0 and seg.size % unit == 0:
                sizes[seg.size] += 1
            if i and seg.base > q.files[i - 1].base:
                steps[seg.base - q.files[i - 1].base] += 1
    for counter, how in ((steps, "the step between consumequeue file names"),
                         (sizes, "the size of the consumequeue files")):
        if not counter:
            continue
        value = counter.most_common(1)[0][0]
        others = tuple(v for v in sorted(counter) if v != value)
        if how.startswith("the step") and sizes and sizes.most_common(1)[0][0] != value:
            others += tuple(v for v in sorted(sizes) if v != value and v not in others)
        warn = None
        if others:
            warn = (f"consumequeue files disagree on their size: {value} ({how}) or {', '.join(map(str, others))}; "
                    f"using {value} (give --cq-file-size to choose)")
        return SizeDecision(value, "store", how, others, warn)
    return SizeDecision(dispatch.cq_file_size(None), "default", "the broker's default (300000 units)")


# The broker's hashes live with the dispatch rules (one implementation, tested against formats.common).
tags_code = dispatch.tags_code
index_hash = dispatch.index_key_hash


@dataclass
class IndexFileView:
    """An index file read whole (they are bounded: 40 + slots×4 + entries×20 bytes)."""

    path: str
    size: int
    header: dict
    slot_num: int | None       # None when the geometry cannot be inferred
    index_num: int | None
    data: bytes
    geometry: Geometry | None = None

    def slot(self, i: int) -> int:
        p = F.INDEX_HEADER_SIZE + i * F.INDEX_SLOT_SIZE
        return int.from_bytes(self.data[p:p + 4], "big", signed=True)

    def nonzero_slots(self) -> list[tuple[int, int]]:
        """(slot, value) of every non-zero slot, decoded in bulk: a full-size file has 5 million slots."""
        if not self.slot_num:
            return []
        start = F.INDEX_HEADER_SIZE
        raw = self.data[start:start + self.slot_num * F.INDEX_SLOT_SIZE]
        if first_nonzero(raw, 0, len(raw)) < 0:
            return []
        a = array("i")
        assert a.itemsize == F.INDEX_SLOT_SIZE
        a.frombytes(raw[:len(raw) - len(raw) % 4])
        if sys.byteorder == "little":
            a.byteswap()                       # slots are big-endian int32
        return [(i, v) for i, v in enumerate(a) if v]

    def entry(self, k: int) -> tuple[int, int, int, int]:
        p = F.INDEX_HEADER_SIZE + self.slot_num * F.INDEX_SLOT_SIZE + k * F.INDEX_ENTRY_SIZE
        return IDX_ENTRY.unpack_from(self.data, p)

    def entry_position(self, k: int) -> int:
        return F.INDEX_HEADER_SIZE + self.slot_num * F.INDEX_SLOT_SIZE + k * F.INDEX_ENTRY_SIZE

    @property
    def entry_count(self) -> int:
        """Entries that exist (indexCount−1), bounded by what the file can hold."""
        n = self.header["indexCount"] - 1
        if self.index_num is None:
            return 0
        return max(0, min(n, self.index_num - 1))


# ---- index geometry (maxHashSlotNum, maxIndexNum): one decision for every verb ------------------------

@dataclass(frozen=True)
class Geometry:
    """How many hash slots and entries the index files of one size have, and what decided it.

    ``source``: ``option`` (--max-hash-slots/--max-index-num), ``broker-conf``, ``store`` (the files' own
    header and structure), ``default`` (the broker's defaults) or ``unknown`` (slots/entries None).
    ``candidates`` lists the pairs that fit equally well when the store cannot tell them apart.
    """

    slots: int | None
    entries: int | None
    source: str
    evidence: str = ""
    candidates: tuple = ()
    warning: str | None = None

    def to_dict(self) -> dict:
        return {"max_hash_slots": self.slots, "max_index_num": self.entries, "from": self.source,
                "evidence": self.evidence or None}


_SAMPLE = 64            # entries checked (the newest; links also the oldest) when a geometry is tried


def _int32(buf, pos: int) -> int:
    return int.from_bytes(buf[pos:pos + 4], "big", signed=True)


def _slots_out_of_range(buf, slots: int, top: int, fd: int | None = None) -> int:
    """How many slot values of the candidate slot table are not an entry number in [0, top] (zero runs and
    the holes of a sparse file are skipped without reading them)."""
    start, end = F.INDEX_HEADER_SIZE, F.INDEX_HEADER_SIZE + slots * F.INDEX_SLOT_SIZE
    lib = _counter()
    if lib is not None and not ranged(buf):     # one compiled pass over the table in place (zeros are in range)
        return lib.count_outside_be32(memoryview(buf)[start:max(start, min(end, len(buf)))], 0, top)
    step = 1 << 20
    bad = 0
    p = start
    while p < end:
        nz = first_nonzero(buf, p, end, fd)
        if nz < 0:
            break
        p = nz - (nz - start) % F.INDEX_SLOT_SIZE
        q = min(end, p + step)
        need(buf, p, q - p)                 # a remote file: fetched where read
        chunk = buf[p:q]
        p = q
        bad += _count_outside(chunk, top)
    return bad


def _counter():
    """The compiled slot-value counter (``rmqcore.rebuild.count_outside_be32``), or None."""
    from mqtool import native

    lib = native.load("rmqrebuild")
    return lib if lib is not None and hasattr(lib, "count_outside_be32") else None


def _count_outside(chunk, top: int) -> int:
    """How many big-endian int32 slot values of ``chunk`` are not in [0, top] (the compiled count when the
    RocketMQ core is built: a full-size slot table is 5 million values)."""
    lib = _counter()
    if lib is not None:
        return lib.count_outside_be32(chunk, 0, top)
    a = array("i")
    a.frombytes(bytes(chunk[:len(chunk) - len(chunk) % 4]))
    if sys.byteorder == "little":
        a.byteswap()
    if min(a, default=0) < 0 or max(a, default=0) > top:
        return sum(1 for v in a if v < 0 or v > top)
    return 0


def _misfits(buf, slots: int, count: int, fd: int | None = None) -> tuple[int, int, int]:
    """(misfits, link misfits, checks) of reading the file as ``slots`` hash slots followed by entries
    (indexCount ``count``).

    The checks: entry 0 is never written (zero); every slot value stays below indexCount; for the newest
    entries, the slot of the entry's key hash holds that entry or a newer one (a slot keeps the newest entry
    of its bucket) — a wrong geometry fails nearly all of these, the right one only where bytes are damaged.
    Link misfits (a previous-index link that does not point at an older entry, at both ends of the file)
    rank candidates that pass."""
    base = F.INDEX_HEADER_SIZE + slots * F.INDEX_SLOT_SIZE
    n = count - 1
    newest = range(max(1, n - _SAMPLE + 1), n + 1)
    # a remote file: fetched where read (entry 0 and the first sample, the newest, the slots they hash to);
    # the samples are read again after the slot table: kept fetched meanwhile
    for at, k in ((base, min(n, _SAMPLE) + 1), (base + newest.start * F.INDEX_ENTRY_SIZE, len(newest))):
        need(buf, at, k * F.INDEX_ENTRY_SIZE)
        hold(buf, at, k * F.INDEX_ENTRY_SIZE)
    bad = 1 if any(buf[base:base + F.INDEX_ENTRY_SIZE]) else 0
    for k in newest:
        kh = IDX_ENTRY.unpack_from(buf, base + k * F.INDEX_ENTRY_SIZE)[0]
        if kh >= 0:
            need(buf, F.INDEX_HEADER_SIZE + (kh % slots) * F.INDEX_SLOT_SIZE, F.INDEX_SLOT_SIZE)
        head = _int32(buf, F.INDEX_HEADER_SIZE + (kh % slots) * F.INDEX_SLOT_SIZE) if kh >= 0 else -1
        if head < k or head > n:
            bad += 1
    if bad > (len(newest) + 2) // 16:
        return bad, 0, len(newest) + 2          # already no fit: the slot table need not be read
    bad += min(_slots_out_of_range(buf, slots, n, fd), len(newest))
    links = 0
    for k in set(newest) | set(range(1, min(n, _SAMPLE) + 1)):
        prev = IDX_ENTRY.unpack_from(buf, base + k * F.INDEX_ENTRY_SIZE)[3]
        links += not 0 <= prev < k
    return bad, links, len(newest) + 2


def _file_candidates(path: str, size: int) -> list[tuple[int, int]] | None:
    """The (slots, entries) pairs the file's own bytes support; None when it has no entries to judge by.

    Tried: the full-file reading (indexCount = maxIndexNum: the broker starts a new file when indexCount
    reaches it) and the reading that puts the file's last non-zero byte into entry indexCount−1 (the last
    entry written; nothing after it is ever written)."""
    body = size - F.INDEX_HEADER_SIZE
    with map_input(path, ranged=True) as mi:        # a remote file: fetched where read (need, last_nonzero)
        buf = mi.buf
        mi.need(0, F.INDEX_HEADER_SIZE)
        count = IDX_HEADER.unpack_from(buf, 0)[IDX_HEADER_NAMES.index("indexCount")]
        if count < 2 or count * F.INDEX_ENTRY_SIZE + F.INDEX_SLOT_SIZE > body:
            return None
        tries = []
        if (body - count * F.INDEX_ENTRY_SIZE) % F.INDEX_SLOT_SIZE == 0:
            tries.append(((body - count * F.INDEX_ENTRY_SIZE) // F.INDEX_SLOT_SIZE, count))
        last = last_nonzero(buf, F.INDEX_HEADER_SIZE, size, mi.fileno() if mi.mapped else None)
        if last >= 0:
            # last ∈ [40 + 4s + 20(count−1), 40 + 4s + 20·count): five values of s, one of them fits the size
            hi = (last - F.INDEX_HEADER_SIZE - F.INDEX_ENTRY_SIZE * (count - 1)) // F.INDEX_SLOT_SIZE
            for s in range(hi - 4, hi + 1):
                rest = body - s * F.INDEX_SLOT_SIZE
                if s >= 1 and rest > 0 and rest % F.INDEX_ENTRY_SIZE == 0:
                    tries.append((s, rest // F.INDEX_ENTRY_SIZE))
        scored = []
        for s, n in dict.fromkeys(tries):
            if s >= 1 and n >= count:
                bad, links, checks = _misfits(buf, s, count, mi.fileno() if mi.mapped else None)
                if bad <= checks // 16:          # a few damaged bytes do not hide the geometry
                    scored.append(((bad, links), (s, n)))
        least = min((b for b, _ in scored), default=None)
        return [pair for b, pair in scored if b == least]


def _from_size(size: int, slots: int | None, entries: int | None) -> tuple[int, int] | None:
    """Complete a given slots or entries count from the file size; None when the pair does not fit it."""
    body = size - F.INDEX_HEADER_SIZE
    if slots is not None and entries is None:
        rest = body - slots * F.INDEX_SLOT_SIZE
        entries = rest // F.INDEX_ENTRY_SIZE if rest > 0 and rest % F.INDEX_ENTRY_SIZE == 0 else None
    elif entries is not None and slots is None:
        rest = body - entries * F.INDEX_ENTRY_SIZE
        slots = rest // F.INDEX_SLOT_SIZE if rest > 0 and rest % F.INDEX_SLOT_SIZE == 0 else None
    if slots is None or entries is None or slots < 1 or entries < 2:
        return None
    return (slots, entries) if F.index_file_size(slots, entries) == size else None


def _pairs_text(pairs) -> str:
    return ", ".join(f"{s}/{n}" for s, n in pairs)


def _decide(size: int, files: list[str], given: tuple, given_from: str) -> Geometry:
    """The geometry of the index files of one size: stated values, else the files, else the defaults."""
    warn = None
    if given != (None, None):
        pair = _from_size(size, *given)
        if pair is not None:
            how = "" if None not in given else " (the other count from the file size)"
            return Geometry(*pair, given_from, f"{given_from}{how}")
        warn = (f"maxHashSlotNum/maxIndexNum {given[0]}/{given[1]} ({given_from}) do not fit index files of "
                f"{size} bytes (40 + slots×4 + entries×20); learned from the files instead")
    body = size - F.INDEX_HEADER_SIZE
    if body <= 0 or body % F.INDEX_SLOT_SIZE:
        return Geometry(None, None, "unknown", warning=f"index files of {size} bytes fit no geometry "
                        f"(40 + slots×4 + entries×20)" + (f"; {warn}" if warn else ""))
    counts = []
    for p in files:
        try:
            counts.append((IDX_HEADER.unpack_from(read_input(p, F.INDEX_HEADER_SIZE), 0)
                           [IDX_HEADER_NAMES.index("indexCount")], p))
        except (InputError, struct.error):
            continue
    common = None
    judged = []
    for _count, p in sorted(counts, key=lambda t: -t[0])[:4]:          # the fullest files say the most
        try:
            cands = _file_candidates(p, size)
        except InputError:
            continue
        if cands is None:
            continue
        judged.append(p)
        common = cands if common is None else [c for c in common if c in cands]
        if common is not None and len(common) <= 1:
            break
    default = (F.DEFAULT_MAX_HASH_SLOTS, F.DEFAULT_MAX_INDEX_NUM)
    names = ", ".join(os.path.basename(p) for p in judged)
    if common:
        if len(common) == 1:
            return Geometry(*common[0], "store", f"header and structure of {names}", warning=warn)
        pick = default if default in common else common[0]
        return Geometry(*pick, "store", f"header and structure of {names}", tuple(common),
                        f"index files of {size} bytes fit several geometries (slots/entries {_pairs_text(common)}); "
                        f"using {pick[0]}/{pick[1]} (give --max-hash-slots/--max-index-num to choose)")
    if F.index_file_size(*default) == size:
        return Geometry(*default, "default", "the broker's defaults fit the file size", warning=warn)
    why = ("their entries do not fit any geometry of that size (damaged?)" if judged
           else "they hold no entries to learn it from")
    return Geometry(None, None, "unknown", candidates=_few_pairs(size),
                    warning=f"cannot tell the hash slot / entry counts of the index files of {size} bytes: {why}; "
                            f"any slots/entries with 40 + 4·slots + 20·entries = {size} fit (e.g. "
                            f"{_pairs_text(_few_pairs(size))}); give --max-hash-slots/--max-index-num"
                            + (f"; {warn}" if warn else ""))


def _few_pairs(size: int, k: int = 3) -> tuple:
    """A few (slots, entries) pairs that fit ``size``, nearest the brokers' default ratio of four entries per
    slot first (examples for a warning; the store cannot tell which)."""
    body = size - F.INDEX_HEADER_SIZE
    ratio = F.DEFAULT_MAX_INDEX_NUM // F.DEFAULT_MAX_HASH_SLOTS
    near = body // (F.INDEX_SLOT_SIZE + ratio * F.INDEX_ENTRY_SIZE)
    out = []
    for s in sorted(range(max(1, near - 5 * k), near + 5 * k + 1), key=lambda v: abs(v - near)):
        rest = body - s * F.INDEX_SLOT_SIZE
        if rest >= 2 * F.INDEX_ENTRY_SIZE and rest % F.INDEX_ENTRY_SIZE == 0:
            out.append((s, rest // F.INDEX_ENTRY_SIZE))
        if len(out) == k:
            break
    return tuple(out)


class IndexGeometries:
    """The geometry of every index file of a store, decided once per file size (see :func:`index_geometries`)."""

    def __init__(self, by_size: dict[int, Geometry], sizes: dict[str, int]):
        self.by_size = by_size
        self.sizes = sizes

    def of(self, path: str) -> Geometry:
        size = self.sizes.get(path)
        if size is None:
            try:
                size = os.stat(path).st_size
            except OSError:
                return Geometry(None, None, "unknown", warning=f"{path}: cannot stat")
        return self.by_size.get(size) or Geometry(None, None, "unknown")

    def warnings(self) -> list[str]:
        return [g.warning for g in self.by_size.values() if g.warning]

    def main(self) -> Geometry | None:
        """The geometry of the most index files (the newest file's on a tie): what a rebuild writes."""
        if not self.by_size:
            return None
        newest = self.sizes[max(self.sizes, key=os.path.basename)]
        counts = Counter(self.sizes.values())
        size = max(counts, key=lambda z: (counts[z], z == newest))
        return self.by_size[size]

    def summary(self) -> dict | None:
        g = self.main()
        if g is None:
            return None
        d = g.to_dict()
        if len(self.by_size) > 1:
            d["other_sizes"] = {str(z): x.to_dict() for z, x in self.by_size.items() if x is not g}
        return d


def given_index_geometry(opts) -> tuple[tuple, str]:
    """((slots, entries), source) stated by the options, else by ``--broker-conf``; (None, None) when neither."""
    slots = getattr(opts, "max_hash_slots", None)
    num = getattr(opts, "max_index_num", None)
    if slots is not None or num is not None:
        if (slots is not None and slots < 1) or (num is not None and num < 2):
            raise UsageError("--max-hash-slots must be > 0, --max-index-num > 1")
        return (slots, num), "option"
    conf_path = getattr(opts, "broker_conf", None)
    if conf_path:
        conf = read_broker_conf(conf_path)
        pair = (conf_int(conf, "maxHashSlotNum", conf_path), conf_int(conf, "maxIndexNum", conf_path))
        if pair != (None, None):
            return pair, "broker-conf"
    return (None, None), "default"


def index_geometries(paths: list[str], opts=None) -> IndexGeometries:
    """Decide the geometry of each index file: ``--max-hash-slots``/``--max-index-num`` win, else
    ``--broker-conf``, else the files' own headers and structure, else the broker defaults. Files of one size
    share one decision; a size nobody can explain is ``unknown`` with a warning naming candidates."""
    given, given_from = given_index_geometry(opts)
    sizes: dict[str, int] = {}
    for p in paths:
        try:
            sizes[p] = os.stat(p).st_size
        except OSError:
            continue
    groups: dict[int, list[str]] = {}
    for p, z in sizes.items():
        groups.setdefault(z, []).append(p)
    return IndexGeometries({z: _decide(z, fs, given, given_from) for z, fs in groups.items()}, sizes)


def read_index_file(path: str, geometry: Geometry | None = None, entries: bool = True) -> IndexFileView:
    """An index file with the given geometry (decided by :func:`index_geometries`; this file alone when
    none is given). Of a remote file the header is fetched, and with ``entries`` the slot table and the
    entries in use (what the view's readers read); not the unused rest of a file being filled."""
    # Mapped (not read): a huge or sparse file named like an index costs no memory.
    if geometry is None:
        geometry = index_geometries([path]).of(path)
    with map_input(path, ranged=True) as mi:
        data = mi.buf
        mi.need(0, F.INDEX_HEADER_SIZE)
    size = len(data)
    if size >= F.INDEX_HEADER_SIZE:
        header = dict(zip(IDX_HEADER_NAMES, IDX_HEADER.unpack_from(data, 0)))
    else:
        header = {n: 0 for n in IDX_HEADER_NAMES}
    s, n = geometry.slots, geometry.entries
    if s is None or F.index_file_size(s, n) != size:
        s = n = None
    view = IndexFileView(path, size, header, s, n, data, geometry)
    if entries and s is not None:
        used = view.entry_position(view.entry_count + 1)
        need(data, 0, used)
        hold(data, 0, used)         # a remote file: kept fetched while the view lives
    return view


def read_checkpoint(path: str) -> dict:
    data = read_input(path, limit=F.CHECKPOINT_FILE_SIZE + 1)
    padded = data[:CHECKPOINT_STRUCT.size].ljust(CHECKPOINT_STRUCT.size, b"\x00")
    row = dict(zip(CHECKPOINT_NAMES, CHECKPOINT_STRUCT.unpack_from(padded, 0)))
    row["file_size"] = len(data)
    nonzero_after = any(data[40:])
    row["layout"] = "5.x" if (row["masterFlushedOffset"] or row["confirmPhyOffset"]) else "4.x-or-5.x"
    row["nonzero_after_fields"] = nonzero_after
    return row
