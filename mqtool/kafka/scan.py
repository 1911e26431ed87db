"""The Kafka walker: a log segment's bytes as :class:`~mqtool.kafka.records.Batch` and
:class:`~mqtool.damage.Damage` events in file order, with resync after damage and byte-range splitting
(:func:`scan`, :func:`scan_range`, :func:`resync`). Decoding the records inside a batch is
:mod:`mqtool.kafka.records`.

End-of-data rules (``FileLogInputStream`` plus what a forensic reader needs):

* fewer than 17 bytes left → end (non-zero leftovers are a ``partial-tail`` event);
* an all-zero remainder (preallocated segment, ``log.preallocate``) → ``zero-tail`` event, end;
* an entry running past the end of the file with no valid batch after it → ``partial-tail``;
* an entry whose CRC fails is read (a :class:`~mqtool.kafka.records.Batch` with ``crc_ok`` False, as
  DumpLogSegments prints ``isValid: false`` and goes on) when its length leads, through at most
  :data:`BAD_RUN_HOPS` - 1 further well-shaped entries (:func:`_shape_ok`) whose CRC fails too, to a batch
  with a valid CRC, an all-zero remainder, fewer than 17 bytes or exactly the end of the data: every entry of
  such a run is read. A run that ends anywhere else (bytes that do not frame, an entry running past the end)
  or is longer is not: no CRC confirms a batch's length, so nothing then says the lengths are right;
* anything else that does not frame (size < 14, magic > 2, or a bad CRC not read by the rule above) → a
  ``skipped`` event over the bytes up to the next self-locating batch (magic at +16, sane length, valid CRC),
  and the walk goes on from there.

Checking costs a CRC over the bytes an entry claims. A batch whose CRC holds moves the walk past it, so each
is checked once (linear); every other check (resync candidates, entries whose CRC fails) comes out of a budget
of :data:`~mqtool.damage.CHECK_BUDGET_FACTOR` times the bytes walked plus :data:`WALK_BUDGET_FLOOR`
(:class:`~mqtool.damage.CheckBudget`): crafted bytes holding a plausible header every few dozen bytes, each
claiming the rest of the file, would otherwise cost a CRC over the rest of the file per candidate (quadratic,
a hang). Past the budget only entries of at most :data:`~mqtool.damage.SMALL_CANDIDATE` bytes are checked;
a larger one is skipped like damage, and the ``skipped`` event says how many were not checked. Looking
along a run of bad-CRC entries checks each entry once however many of them the walk reads (:class:`_BadRuns`).
A byte-range reader finds its first batch with a strict budget of its own (:func:`range_start`: a candidate
claiming more than is left is passed over), and the reader before it stops where that search lands.

Runs of v2 batches whose CRC holds are walked by the compiled helper where it is built and ISA-L (the ``fast``
extra) gives it a CRC-32C (:func:`batch_walk`, ``kafka.c`` ``walk_batches``: the header read by the table
``layout.BATCH_FIELDS_V2`` derives from the schema, the GIL let go). It takes only what this module's loop
would yield as a valid batch, and stops at anything else, which the loop then reads
(``tests/test_kafka_batch_walk.py``: the same events with and without it).
"""
from __future__ import annotations

import mmap
import re
import struct
import zlib

from formats import kafka as K
from mqtool.codecs import CodecError
from mqtool.damage import CHECK_BUDGET_FACTOR, CheckBudget, Damage
from mqtool.fastcrc import crc32c
from mqtool.io import first_nonzero, need, ranged, ranged_maps
from mqtool.kafka import layout as L
from mqtool.kafka.records import _HDR_V0, _I16, _I32, Batch, LimitExceeded, _legacy_walk
from mqtool.pages import WINDOW as PAGE_WINDOW
from mqtool.pages import PageWindow

_PREFIX = struct.Struct(">qi")                                   # offset/baseOffset, size (LOG_OVERHEAD)
_HDR_V2 = L.BATCH_HEADER_V2
_HDR_V1 = L.LEGACY_HEADER_V1
_NONZERO = re.compile(rb"[^\x00]")
_MIN_V2_SIZE = K.V2_HEADER_SIZE - K.LOG_OVERHEAD               # 49
#: the checking budget of a walk over few bytes (see the module doc)
WALK_BUDGET_FLOOR = 1 << 24
#: the most entries with a bad CRC in a row that are read as batches (see the module doc)
BAD_RUN_HOPS = 64


_CRC_FROM, _CRC_AT = L.V2_CRC_FROM, L.V2_CRC_AT
# the compiled batch walk (kafka.c walk_batches): the header table, and the roles of its fields (the length,
# the magic, the stored CRC by index; the magic value; where the CRC's bytes start; the smallest batch length)
_WALK_FIELDS = tuple(L.BATCH_FIELDS_V2.values())
_WALK_ROLES = tuple(list(L.BATCH_FIELDS_V2).index(name) for name in ("batchLength", "magic", "crc")) + (
    2, _CRC_FROM, K.V2_HEADER_SIZE - K.LOG_OVERHEAD)
_BASE = 1 + list(L.BATCH_FIELDS_V2).index("baseOffset")        # their places in a walked header's tuple
_LOD = 1 + list(L.BATCH_FIELDS_V2).index("lastOffsetDelta")
_walker: dict = {}


def batch_walk():
    """``walk(buf, pos, stop, limit) -> (end, [(position, *header fields)])`` (kafka.c ``walk_batches``: the run
    of v2 batches from ``pos`` whose CRC-32C holds, each starting before ``stop`` and ending within ``limit``; at
    most 64 a call), or None: no compiled helper (not built, ``MQTOOL_NATIVE`` off) or no ISA-L CRC-32C (the
    ``fast`` extra). Asked once per walk (the switch is read here)."""
    from mqtool import native

    mod = native.load("kafka")
    fn = getattr(mod, "walk_batches", None)
    if fn is None:
        return None
    if _walker.get("of") is not mod:
        import sys

        isal_zlib = sys.modules.get("isal.isal_zlib")       # (mqtool.fastcrc imported it, when installed)
        ok = isal_zlib is not None and mod.configure_crc32c(getattr(isal_zlib, "__file__", None))
        _walker["fn"] = (lambda buf, pos, stop, limit: fn(buf, pos, stop, limit, _WALK_FIELDS, _WALK_ROLES)) \
            if ok else None
        _walker["of"] = mod
    return _walker["fn"]


def header_walk():
    """``walk(buf, pos, stop, limit)`` as :func:`batch_walk`'s but on the framing alone (no CRC: v2 entries of a
    sane length that follow one another), or None without the compiled helper."""
    from mqtool import native

    fn = getattr(native.load("kafka"), "walk_batches", None)
    if fn is None:
        return None
    return lambda buf, pos, stop, limit: fn(buf, pos, stop, limit, _WALK_FIELDS, _WALK_ROLES, False)


def walk_budget(size: int) -> CheckBudget:
    """The checking budget of a walk over ``size`` bytes (see the module doc)."""
    return CheckBudget(CHECK_BUDGET_FACTOR * max(0, size) + WALK_BUDGET_FLOOR)


try:    # a batch's CRC keeps the GIL (the crc32c package lets it go above 32 KiB: a wait for it back each time
    crc32c(b"", 0, 0)       # while decoding threads hold it, for microseconds of work); older crc32c: default
    _CRC_KEEP_GIL: tuple = (0, 0)
except TypeError:
    _CRC_KEEP_GIL = ()


# ---- framing ------------------------------------------------------------------------------------

_V2_ATTR_UNUSED = ~(K.CODEC_MASK | K.TIMESTAMP_TYPE_MASK | K.TRANSACTIONAL_FLAG_MASK | K.CONTROL_FLAG_MASK
                    | K.DELETE_HORIZON_FLAG_MASK)
_LEGACY_ATTR_UNUSED = ~(K.CODEC_MASK | K.LEGACY_TIMESTAMP_TYPE_MASK)
_MAX_CODEC = max(K.CODEC_NAMES)


def _shape_ok(buf, p: int, size: int, magic: int) -> bool:
    """Cheap structure test of a candidate entry at p (``size``, ``magic`` read and the entry inside the
    buffer), before its CRC is computed: the CRC of a false candidate inside compressed bytes can span the
    rest of the file (hundreds of MB per candidate, so every byte-range start cost seconds).

    v2: no attribute bit Kafka never sets (bits 7-15), a known codec, baseOffset >= 0, 0 <= recordsCount <=
    lastOffsetDelta + 1, and partitionLeaderEpoch, both timestamps, producerId, producerEpoch, baseSequence
    >= -1. Legacy: no unused attribute bit, a known codec, and the key and value lengths add up to the
    message size exactly (as :func:`_legacy_fields` requires to read it at all)."""
    end = p + 12 + size
    if magic == 2:
        attrs = _I16.unpack_from(buf, p + K.V2_ATTRIBUTES_OFFSET)[0]
        if attrs & _V2_ATTR_UNUSED or attrs & K.CODEC_MASK > _MAX_CODEC:
            return False
        (base, _len, ple, _m, _crc, _a, lod, bts, mts, pid, pepoch, bseq, count) = _HDR_V2.unpack_from(buf, p)
        # offsets are not negative, the "none" values are -1 (timestamps too: producers refuse negative
        # ones), and the distinct offset deltas of the records lie in [0, lastOffsetDelta] (count ==
        # lastOffsetDelta + 1 until compaction removes records)
        return (base >= 0 and 0 <= count <= lod + 1 and ple >= -1 and pid >= -1 and pepoch >= -1
                and bseq >= -1 and bts >= -1 and mts >= -1)
    attrs = buf[p + 17]
    if attrs & _LEGACY_ATTR_UNUSED or attrs & K.CODEC_MASK > _MAX_CODEC:
        return False
    q = p + (K.V1_HEADER_SIZE if magic == 1 else K.V0_HEADER_SIZE)
    if q + 8 > end:
        return False
    klen = _I32.unpack_from(buf, q)[0]
    q += 4 + max(klen, 0)
    if q + 4 > end:
        return False
    vlen = _I32.unpack_from(buf, q)[0]
    return q + 4 + max(vlen, 0) == end


_DONTNEED = getattr(mmap, "MADV_DONTNEED", None)


def _span_crc(fn, buf, start: int, end: int) -> int:
    """``fn`` (crc32c or zlib.crc32) of buf[start:end]; a span longer than a page window of a mapped file is
    taken a window at a time, releasing its pages after use (MADV_DONTNEED; they stay in the page cache),
    so that a resync candidate claiming hundreds of MB does not leave them resident in this process."""
    need(buf, start, end - start)       # a remote file: fetch the span first (mqtool.io)
    mv = memoryview(buf)
    if end - start <= PAGE_WINDOW or _DONTNEED is None or not isinstance(buf, mmap.mmap):
        return fn(mv[start:end])
    crc = 0
    a = start
    while a < end:
        b = min(end, a + PAGE_WINDOW)
        crc = fn(mv[a:b], crc)
        lo = -(-a // mmap.PAGESIZE) * mmap.PAGESIZE           # whole pages inside [a, b)
        hi = b - b % mmap.PAGESIZE
        if hi > lo:
            buf.madvise(_DONTNEED, lo, hi - lo)
        a = b
    return crc


_NO_ENTRY, _VALID, _BAD_CRC = 0, 1, 2


def _entry_state(buf, p: int, n: int, budget: CheckBudget | None = None) -> int:
    """What is at p: a complete entry of a sane shape (:func:`_shape_ok`) whose CRC is valid (``_VALID``) or
    fails (``_BAD_CRC``), or no such entry (``_NO_ENTRY``; also when ``budget`` cannot afford its CRC, which
    is then counted as unchecked)."""
    if p + K.HEADER_SIZE_UP_TO_MAGIC > n:
        return _NO_ENTRY
    size = _I32.unpack_from(buf, p + 8)[0]
    magic = buf[p + 16]
    if size < K.MIN_RECORD_OVERHEAD or magic > 2 or p + 12 + size > n:
        return _NO_ENTRY
    if magic == 2:
        if size < _MIN_V2_SIZE or not _shape_ok(buf, p, size, magic):
            return _NO_ENTRY
        if budget is not None and not budget.afford(12 + size):
            return _NO_ENTRY
        ok = _span_crc(crc32c, buf, p + _CRC_FROM, p + 12 + size) == _I32.unpack_from(buf, p + _CRC_AT)[0] & 0xFFFFFFFF
        return _VALID if ok else _BAD_CRC
    if size < (14 if magic == 0 else 22) or not _shape_ok(buf, p, size, magic):
        return _NO_ENTRY
    if budget is not None and not budget.afford(12 + size):
        return _NO_ENTRY
    ok = _span_crc(zlib.crc32, buf, p + 16, p + 12 + size) == _I32.unpack_from(buf, p + 12)[0] & 0xFFFFFFFF
    return _VALID if ok else _BAD_CRC


def _frame_ok(buf, p: int, n: int, budget: CheckBudget | None = None) -> bool:
    """Is there a complete entry at p of a sane shape (:func:`_shape_ok`) whose CRC is valid? (the resync
    test; False, counted as unchecked, when ``budget`` cannot afford its CRC)"""
    return _entry_state(buf, p, n, budget) == _VALID


def _attr_bytes(unused: int, width: int) -> list[bytes]:
    """Per byte of an attributes field ``width`` bytes wide (big-endian), a character class of the byte values
    :func:`_shape_ok` lets through: no bit of ``unused`` set and, in the last byte, a known codec. Bit masks
    test each byte on its own and the codec bits lie in the last byte, so the classes say the rule exactly."""
    assert K.CODEC_MASK < 0x100
    out = []
    for k in range(width):
        mask = (unused >> (8 * (width - 1 - k))) & 0xFF
        last = k == width - 1
        ok = [v for v in range(256) if not v & mask and (not last or v & K.CODEC_MASK <= _MAX_CODEC)]
        out.append(b"[" + b"".join(re.escape(bytes([v])) for v in ok) + b"]")
    return out


def _candidate_pattern():
    """Where a resync candidate's magic byte (entry + 16) may be: magic 2 with a v2 attributes field
    (entry + 21) :func:`_shape_ok` lets through, or magic 0/1 with such a legacy attributes byte (entry + 17).
    A prefilter only: every position it skips fails :func:`_entry_state`, so resync's answer (and what its
    budget is charged) is that of testing each position in turn."""
    v2 = _attr_bytes(_V2_ATTR_UNUSED & 0xFFFF, 2)
    legacy = _attr_bytes(_LEGACY_ATTR_UNUSED & 0xFF, 1)
    gap = K.V2_ATTRIBUTES_OFFSET - K.HEADER_SIZE_UP_TO_MAGIC            # the CRC between magic and attributes
    return re.compile(b"\\x02(?s:.)" + b"{%d}" % gap + b"".join(v2) + b"|[\\x00\\x01]" + legacy[0], re.S)


_CANDIDATE = _candidate_pattern()
_MAGIC_AT = K.HEADER_SIZE_UP_TO_MAGIC - 1                              # 16


def _cover_pattern():
    """:data:`_CANDIDATE` anchored at the size field (entry + 8) with the size tested too: a non-negative int32
    of at least MIN_RECORD_OVERHEAD (no zero run matches, so a look-back over record bytes full of zeros stops
    at few positions)."""
    small = b"".join(re.escape(bytes([v])) for v in range(K.MIN_RECORD_OVERHEAD))
    magic = _CANDIDATE.pattern
    return re.compile(b"(?=[\\x00-\\x7f])(?!\\x00\\x00\\x00[" + small + b"])(?s:.){%d}(?:" % (_MAGIC_AT - 8)
                      + magic + b")", re.S)


_COVER = _cover_pattern()


def resync(buf, p: int, n: int, fd: int | None = None, until: int | None = None,
           budget: CheckBudget | None = None) -> int | None:
    """First position > p (and < ``until`` when given) where a self-locating batch with a valid CRC starts,
    or None. ``budget``: the walk's :class:`~mqtool.damage.CheckBudget` (a candidate it cannot afford is
    passed over). Candidates are found with :data:`_CANDIDATE` (in C), not byte by byte in Python."""
    q = p + 1
    stop = n - K.HEADER_SIZE_UP_TO_MAGIC + 1 if until is None else min(until, n - K.HEADER_SIZE_UP_TO_MAGIC + 1)
    search = _CANDIDATE.search
    remote = bool(ranged_maps)
    ahead = q           # a remote file: fetched from q to here (mqtool.io.need), a MiB at a time
    while q < stop:
        if remote and q + 64 > ahead:
            ahead = min(stop, q + (1 << 20))
            need(buf, q, ahead - q + 64)
        hi = ahead if remote else stop
        m = search(buf, q + _MAGIC_AT, min(n, hi + _MAGIC_AT + 7))
        c = -1 if m is None else m.start() - _MAGIC_AT
        if c < 0 or c >= hi:
            q = hi
            continue
        # The size field (c+8..c+12) of a real entry is never zero: skip zero runs in one step.
        if buf[c + 8] == 0 and buf[c + 9] == 0 and buf[c + 10] == 0 and buf[c + 11] == 0:
            nz = _first_nonzero(buf, c + 8, min(n, stop + 11), fd)
            if nz < 0:
                return None
            q = max(c + 1, nz - 11)
            continue
        if _frame_ok(buf, c, n, budget):
            return c
        q = c + 1
    return None


def range_start(buf, start: int, stop: int, fd: int | None = None) -> int | None:
    """Where the reader of the byte range ``[start, stop)`` begins, or None (the range owns nothing): the first
    position in it where a self-locating batch with a valid CRC starts (:func:`resync`) and that the last valid
    entry starting before ``start`` does not cover (a walk that read that entry never stands inside it: bytes
    deleted at its end shift the next batch into it). Checked with a strict budget of its own
    (:func:`start_budget`). A pure function of (start, stop) and the bytes: the reader of the range before
    computes the same answer to know where to stop (:func:`scan_range`)."""
    if start <= 0:
        return 0
    n = len(buf)
    budget = start_budget(stop - start)
    c = resync(buf, start - 1, n, fd, until=stop, budget=budget)
    if c is None:
        return None
    prev = _last_valid_before(buf, start, max(stop - start, LOOK_BACK), budget, fd)
    if prev is None or prev <= c:
        return c
    return None if prev >= stop else resync(buf, prev - 1, n, fd, until=stop, budget=budget)


#: how far back from a range start :func:`range_start` looks for the entry that may cover it, at least (the
#: range's own length when that is more); a covering entry that starts further back is not seen. The search
#: goes back in doubling windows from a few hundred bytes and ends at the first valid entry, so what it costs is
#: about the distance to the start of the batch the range start falls in.
LOOK_BACK = 1 << 16


def _last_valid_before(buf, start: int, back: int, budget: CheckBudget, fd: int | None) -> int | None:
    """The end of the last entry of a sane shape with a valid CRC that starts in ``[start - back, start)``, or
    None: windows before ``start`` (512 bytes, doubling) are searched, each from its last candidate down."""
    n = len(buf)
    floor = max(0, start - back)
    search = _COVER.search
    hi, width = start, 512
    while hi > floor:
        lo = max(floor, hi - width)
        need(buf, lo, hi - lo + 64)
        found = []
        q = lo
        end = min(n, hi + _MAGIC_AT + 7)
        if _first_nonzero(buf, lo, min(n, hi + 12), fd) < 0:
            q = hi              # zeros (a zeroed range, a sparse hole): no entry starts there
        while q < hi:
            m = search(buf, q + 8, end)
            if m is None or m.start() - 8 >= hi:
                break
            found.append(m.start() - 8)
            q = m.start() - 7
        for c in reversed(found):
            if _entry_state(buf, c, n, budget) == _VALID:
                return c + 12 + _I32.unpack_from(buf, c + 8)[0]
        hi, width = lo, width * 2
    return None


def start_budget(size: int) -> CheckBudget:
    """The budget of a range start search over ``size`` bytes: that of a walk, strict (a candidate claiming
    more than is left is passed over, not checked with the rest: see :class:`~mqtool.damage.CheckBudget`)."""
    return CheckBudget(CHECK_BUDGET_FACTOR * max(0, size) + WALK_BUDGET_FLOOR, strict=True)


def scan_range(buf, path: str, start: int, stop: int, check_crc: bool = True, fd: int | None = None,
               split: int | None = None):
    """The events of :func:`scan` that a byte-range reader of ``[start, stop)`` owns.

    The ranges of a file are consecutive and ``split`` bytes long (the last one shorter; default ``stop -
    start``, as :func:`mqtool.ranges.split_segments` plans them). A range begins at :func:`range_start` of its
    bounds (byte 0 for the first range; None: the range owns nothing) and owns every event of the walk from
    there until the walk reaches the start of the first later range that owns something, reading its last entry
    past ``stop`` (and through ranges that own nothing). Both ends use the same function of the same bounds, so
    consecutive ranges meet exactly wherever the whole-file walk passes through that start; the exceptions are
    a valid batch image *inside* another batch's payload when no valid entry before the range start covers it
    (within :data:`LOOK_BACK`), which a range start would take for a batch, and a start inside an entry whose
    CRC fails but which the walk reads (a run of bad-CRC batches).

    No candidate a start search passes over (its budget) can make a range lose batches: the range before reads
    on until the start of a range that found one, as the walk of the whole file would.
    """
    n = len(buf)
    split = stop - start if split is None else split
    if split <= 0:
        split = max(1, n)       # an empty range (a file planned empty): one later range, the rest of the file
    budget = walk_budget(stop - start)
    if start > 0:
        q = range_start(buf, start, stop, fd)
        if q is None:
            return
        start = q
    nxt = stop              # the next range whose start is not known yet ...
    target = None           # ... and where the first later range that owns something begins
    for ev in scan(buf, path, start=start, check_crc=check_crc, fd=fd, budget=budget):
        pos = ev.position
        while target is None and nxt <= pos and nxt < n:
            target = range_start(buf, nxt, min(n, nxt + split), fd)
            nxt += split
        if target is not None and pos >= target:
            return
        yield ev


def batch_offsets(buf, path: str = "", fd: int | None = None):
    """``(first, last)`` offsets of every :class:`Batch` that ``scan(buf, path, check_crc=False, fd=fd)``
    yields, in order (``first``: its base offset, or its last offset where the base is unknown), for walks
    that want the offsets only (which offsets no segment holds). While the entries are v2 batches that frame
    one another, each is read from its header alone (no :class:`Batch` is made: ~3x cheaper, the page faults
    of the headers are most of what is left); from the first entry that is anything else, :func:`scan` itself
    goes on (with the budget of a walk from the start: a walk without CRCs spends none of it before that
    entry), so the answer is the same whatever the bytes hold."""
    n = len(buf)
    p = 0
    if not (ranged_maps and ranged(buf)):      # (a remote file: scan() fetches what it reads)
        win = PageWindow(buf, 0, end=n, populate=False)     # a header a batch: nothing worth populating
        walk = header_walk()
        prefix, header = _PREFIX.unpack_from, _HDR_V2.unpack_from
        least = max(K.MIN_RECORD_OVERHEAD, _MIN_V2_SIZE)
        while n - p >= K.HEADER_SIZE_UP_TO_MAGIC:
            if p >= win.next_at:
                win.advance(p)
            if walk is not None:            # the same loop in C, up to 64 headers a call
                q, run = walk(buf, p, win.next_at, n)
                if run:
                    for h in run:
                        yield h[_BASE], h[_BASE] + h[_LOD]
                    p = q
                    continue
            base, size = prefix(buf, p)
            if buf[p + 16] != 2 or size < least or size > n - p - 12:
                break
            yield base, base + header(buf, p)[_LOD - 1]      # baseOffset + lastOffsetDelta
            p += 12 + size
    for ev in scan(buf, path, start=p, check_crc=False, fd=fd, budget=walk_budget(n)):
        if type(ev) is Batch:
            yield (ev.base_offset if ev.base_offset is not None else ev.last_offset), ev.last_offset


def _first_nonzero(buf, start: int, end: int, fd: int | None = None) -> int:
    """First non-zero byte in buf[start:end] or -1: chunked compares, holes of a sparse file (``fd`` of a
    mapped file) skipped with SEEK_DATA, so a 2 GiB preallocated or sparse tail costs milliseconds."""
    if isinstance(buf, (bytes, mmap.mmap)):
        return first_nonzero(buf, start, end, fd)
    m = _NONZERO.search(buf, start, end)
    return -1 if m is None else m.start()


def _is_zero(buf, start: int, end: int, fd: int | None = None) -> bool:
    return _first_nonzero(buf, start, end, fd) < 0


def scan(buf, path: str = "", start: int = 0, end: int | None = None, max_bytes: int | None = None,
         check_crc: bool = True, fd: int | None = None, budget: CheckBudget | None = None):
    """Yield :class:`Batch` and :class:`Damage` objects in file order.

    ``max_bytes`` mimics DumpLogSegments ``--max-bytes``: a batch crossing the limit is not read and a
    ``max-bytes`` event marks where reading stopped. ``fd``: descriptor of the mapped file, to jump over
    holes of a sparse file (see :func:`mqtool.io.first_nonzero`). ``budget``: the checking budget (see the
    module doc; default: :func:`walk_budget` of the bytes walked).
    """
    n = len(buf) if end is None else min(end, len(buf))
    if budget is None:
        budget = walk_budget(n - start)
    limit = n if max_bytes is None else min(n, start + max_bytes)
    p = start
    unpack_prefix = _PREFIX.unpack_from
    # bounded RSS on mapped files (mqtool.pages): pages before the current batch are released as the scan
    # moves on (a batch read again later faults its pages back in from the page cache)
    win = PageWindow(buf, start, end=limit)
    runs = _BadRuns(buf, n, fd, budget)
    # runs of batches whose CRC holds, walked by the compiled helper: what this loop yields for them, without
    # its checks per batch (a valid batch costs the budget nothing: afford, then refund). Not where the budget
    # would refuse a batch (strict, or spent), nor on a remote file (its bytes are fetched as they are read)
    walk = batch_walk() if check_crc and not budget.strict and not ranged(buf) else None
    while True:
        if p >= win.next_at:
            win.advance(p)
        if p >= limit:
            if limit < n:
                yield Damage(path, p, None, n - p, "max-bytes", f"stopped at --max-bytes ({max_bytes})")
            return
        if walk is not None and budget.spent < budget.budget:
            q, run = walk(buf, p, win.next_at, limit)
            if run:
                for h in run:
                    yield _v2_batch(path, buf, h[0], True, *h[1:])
                p = q
                continue
        if n - p < K.HEADER_SIZE_UP_TO_MAGIC:
            if _is_zero(buf, p, n, fd):
                yield Damage(path, p, None, n - p, "zero-tail", f"{n - p} zero bytes at the end (end of data)")
            else:
                yield Damage(path, p, None, n - p, "partial-tail",
                             f"{n - p} bytes at the end are too short for a batch")
            return
        off, size = unpack_prefix(buf, p)
        magic = buf[p + 16]
        bad = None
        was = budget.unchecked
        if size < K.MIN_RECORD_OVERHEAD:
            if size == 0 and _is_zero(buf, p, n, fd):
                yield Damage(path, p, None, n - p, "zero-tail",
                             f"{n - p} zero bytes at the end (end of data, preallocated)")
                return
            bad = f"record size {size} smaller than minimum record overhead ({K.MIN_RECORD_OVERHEAD})"
        elif magic > 2:
            bad = f"unknown magic {magic}"
        elif magic == 2 and size < _MIN_V2_SIZE:
            bad = f"batch length {size} smaller than the v2 header"
        elif p + 12 + size > n:
            q = resync(buf, p, n, fd, budget=budget)
            if q is None:
                yield Damage(path, p, None, n - p, "partial-tail",
                             f"entry of {12 + size} bytes at {p} runs past the end of the file ({n - p} bytes left)"
                             + _unchecked(budget, was))
                return
            yield Damage(path, p, None, q - p, "skipped",
                         f"entry length {size} at {p} runs past the end; resynced at {q}" + _unchecked(budget, was))
            p = q
            continue
        if bad is None:
            if p + 12 + size > limit:
                yield Damage(path, p, None, n - p, "max-bytes", f"stopped at --max-bytes ({max_bytes})")
                return
            if check_crc and not budget.afford(12 + size):
                bad = f"entry of {12 + size} bytes not checked"
            else:
                if ranged_maps:
                    need(buf, p, 12 + size)     # a remote file: fetch the batch first (mqtool.io)
                b = _decode(buf, path, p, off, size, magic, check_crc)
                if b.crc_ok:
                    if check_crc:
                        budget.refund(12 + size)        # paid by the walk's progress (CheckBudget.refund)
                    yield b
                    p += 12 + size
                    continue
                if runs.reads(p, p + 12 + size):
                    yield b
                    p += 12 + size
                    continue
                bad = (f"CRC mismatch and the length {size} does not lead to a valid batch or the end of the data"
                       f" (through at most {BAD_RUN_HOPS - 1} more entries with a bad CRC)")
        q = resync(buf, p, n, fd, budget=budget)
        if q is None:
            yield Damage(path, p, None, n - p, "skipped", f"{bad}; no valid batch after {p}" + _unchecked(budget, was))
            return
        yield Damage(path, p, None, q - p, "skipped", f"{bad}; resynced at {q}" + _unchecked(budget, was))
        p = q


def _unchecked(budget: CheckBudget, was: int) -> str:
    """The note of a ``skipped`` event on the candidates the checking budget passed over meanwhile."""
    k = budget.unchecked - was
    return f" ({k} candidate(s) past the checking budget of {budget.budget} bytes not checked)" if k else ""


class _BadRuns:
    """Where the lengths of entries with a bad CRC lead (the rule in the module doc): from such an entry,
    through well-shaped entries whose CRC fails too, to the end of the run: a batch with a valid CRC, a zero
    tail or the end of the data (the run is read), or anything else (it is not).

    Each position looked at is remembered (what it is; how many bad entries lead from it to where a walk
    got), so that reading a run of k entries checks each once and follows each remembered jump once: linear,
    not k * k. Positions behind the walk are forgotten (memory stays bounded)."""

    _KEEP = 1 << 14         # remembered positions before those behind the walk are dropped

    def __init__(self, buf, n: int, fd: int | None, budget: CheckBudget):
        self.buf, self.n, self.fd, self.budget = buf, n, fd, budget
        self.ends: dict[int, bool] = {}                 # position -> a run ends there (True) / it is no entry
        self.jump: dict[int, tuple[int, int]] = {}      # bad entry -> (position reached, bad entries on the way)

    def reads(self, p: int, q: int) -> bool:
        """Whether the bad-CRC entry at p, whose length leads to q, ends its run (itself included) within
        :data:`BAD_RUN_HOPS` entries."""
        if len(self.ends) + len(self.jump) > self._KEEP:
            self.ends = {k: v for k, v in self.ends.items() if k > p}
            self.jump = {k: v for k, v in self.jump.items() if k > p}
            if len(self.ends) + len(self.jump) > self._KEEP // 2:   # (a cache: forgetting costs checks again)
                self.ends.clear()
                self.jump.clear()
        limit = BAD_RUN_HOPS
        hops = 1            # bad entries from p up to q
        path = []           # (bad entry passed, hops before it)
        end = None
        while hops <= limit:
            end = self.ends.get(q)
            if end is not None:
                break
            j = self.jump.get(q)
            if j is None:
                nxt = self._look(q)
                if nxt is True or nxt is False:
                    self.ends[q] = end = nxt
                    break
                j = (nxt, 1)
            path.append((q, hops))
            q, k = j
            hops += k
        for x, h in path:
            self.jump[x] = (q, hops - h)
        return end is True and hops <= limit

    def _look(self, q: int):
        """True: a run ends at q; False: no entry at q; else q is a bad-CRC entry: the position after it."""
        buf, n = self.buf, self.n
        if n - q < K.HEADER_SIZE_UP_TO_MAGIC:
            return True
        need(buf, q, K.V2_HEADER_SIZE)      # a remote file: the entry's header (need() fetches its CRC span)
        if _I32.unpack_from(buf, q + 8)[0] == 0 and _is_zero(buf, q, n, self.fd):
            return True
        state = _entry_state(buf, q, n, self.budget)
        if state == _BAD_CRC:
            return q + 12 + _I32.unpack_from(buf, q + 8)[0]
        return state == _VALID


def _v2_batch(path, buf, p, crc_ok, base, size, ple, _magic, crc, attrs, lod, base_ts, max_ts, pid, pepoch, bseq,
              count) -> Batch:
    """The :class:`Batch` of the v2 header at ``p`` (its fields as ``_HDR_V2.unpack_from`` gives them)."""
    return Batch(path, p, size + 12, 2, base, base + lod, crc, crc_ok, attrs, attrs & K.CODEC_MASK,
                 1 if attrs & K.TIMESTAMP_TYPE_MASK else 0, max_ts, base_ts, ple, pid, pepoch, bseq, count, lod,
                 bool(attrs & K.TRANSACTIONAL_FLAG_MASK), bool(attrs & K.CONTROL_FLAG_MASK),
                 base_ts if attrs & K.DELETE_HORIZON_FLAG_MASK else None, None, buf)


def _decode(buf, path, p, off, size, magic, check_crc) -> Batch:
    end = p + 12 + size
    if magic == 2:
        fields = _HDR_V2.unpack_from(buf, p)
        crc_ok = (crc32c(memoryview(buf)[p + _CRC_FROM:end], *_CRC_KEEP_GIL) == fields[4]) if check_crc else True
        return _v2_batch(path, buf, p, crc_ok, *fields)
    if magic == 1 and size >= 22:
        _o, _s, crc, _m, attrs, ts = _HDR_V1.unpack_from(buf, p)
        ts_type = 1 if attrs & K.LEGACY_TIMESTAMP_TYPE_MASK else 0
    else:
        _o, _s, crc, _m, attrs = _HDR_V0.unpack_from(buf, p)
        ts, ts_type = -1, -1
    crc_ok = (zlib.crc32(memoryview(buf)[p + 16:end]) == crc) if check_crc else True
    codec = attrs & K.CODEC_MASK
    b = Batch(path, p, size + 12, magic, off, off, crc, crc_ok, attrs, codec, ts_type, ts, _buf=buf)
    if codec != K.CODEC_NONE:
        # A wrapper: base offset and count come from the inner messages.
        first = None
        bad_at = None               # offset field of the first inner message whose own CRC fails
        try:
            n = 0
            for f in _legacy_walk(b):
                if first is None:
                    first = f[0]
                b.inner_last = f[0]
                n += 1
                if not f[8]:
                    b.inner_crc_bad += 1
                    if bad_at is None:
                        bad_at = f[0]
            b.count = n
            if first is not None:
                b.base_offset = first if magic == 0 else off - b.inner_last + first
            if bad_at is not None:
                b.inner_crc_first = bad_at if magic == 0 else off - b.inner_last + bad_at
        except (CodecError, ValueError, struct.error, IndexError) as e:
            b.base_offset, b.count, b.inner_last = None, None, None
            b.inner_crc_first = bad_at if magic == 0 else None      # (v1: relative to a last offset not reached)
            if isinstance(e, LimitExceeded):
                b.error, b.error_code = str(e), e.code
                if magic == 0:
                    b.base_offset = first
            else:
                b.error = f"inner messages unreadable: {e}"
    return b
