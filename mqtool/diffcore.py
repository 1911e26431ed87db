"""What the family engines of ``mqtool diff`` share: the byte compare of two copies of one file, the walk of
two unit streams aligned by offset, and the tally that turns what they meet into difference rows.

Two copies of one log (a master and its slave, a leader and its follower) are byte-identical where they agree.
So the engines first compare the segment files of the same name block by block (``==`` on two read buffers,
memcmp) and decode only the windows around the differences (:func:`plan_pair`: from the unit holding a
difference to the next boundary both copies share) into :class:`Unit` objects, merged by offset
(:func:`merge`); where the bytes of two units at one offset differ, the family's ``compare`` names the fields.
Nothing here prints: the rows go to the CLI, which renders them.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

from mqtool.errors import InputError
from mqtool.io import data_end, map_input, need, open_input
from mqtool.pages import PageWindow
from mqtool.progress import progress

CHUNK = 1 << 20          # compared at a time in a map: small enough to stay in cache, large enough to be C-bound
FILE_CHUNK = 4 << 20     # read at a time from each of two files


def first_difference(a, b, start: int, end: int, on_chunk: Callable[[int], None] | None = None) -> int:
    """First position in ``[start, end)`` where the buffers ``a`` and ``b`` differ, -1 when none does.

    Compares :data:`CHUNK` slices with ``==`` (memcmp) and narrows a differing chunk by halves; mapped files
    have their pages released behind the cursor (bounded resident memory). ``on_chunk(n)`` is told every
    ``n`` bytes compared (for a progress bar)."""
    wa, wb = PageWindow(a, start, end=end), PageWindow(b, start, end=end)
    p = start
    while p < end:
        if p >= wa.next_at:
            wa.advance(p)
            wb.advance(p)
        q = min(end, p + CHUNK)
        if a[p:q] != b[p:q]:
            lo, hi = p, q
            while hi - lo > 64:
                mid = (lo + hi) // 2
                if a[lo:mid] != b[lo:mid]:
                    hi = mid
                else:
                    lo = mid
            for i, (x, y) in enumerate(zip(a[lo:hi], b[lo:hi])):
                if x != y:
                    return lo + i
            return hi            # pragma: no cover - the halves said they differ
        if on_chunk is not None:
            on_chunk(q - p)
        p = q
    return -1


@dataclass
class PairPlan:
    """What of two same-named segment files needs decoding: the ``windows`` ``(start, stop)`` (``stop`` None:
    to the end of the file) that hold every difference. Each bound is a unit boundary on both sides; the
    bytes outside the windows are equal (or zeros past a shorter copy's end: preallocation)."""

    windows: list

    @property
    def identical(self) -> bool:
        return not self.windows


def _first_difference_files(path_a, path_b, on_chunk=None, start: int = 0) -> int:
    """First position where the data of two files differs, -1 when none does. Both are read in
    :data:`FILE_CHUNK` blocks into two reused buffers (a page-cache copy, no page faults of a map) and each
    pair compared with ``==`` (memcmp); past the shorter file's end the longer one must hold only zeros
    (preallocation: a trimmed copy is the same data)."""
    with open_input(path_a) as fa, open_input(path_b) as fb:
        la, lb = os.fstat(fa.fileno()).st_size, os.fstat(fb.fileno()).st_size
        # a trailing hole of a sparse (preallocated) file is zeros: not read
        la, lb = data_end(fa.fileno(), la), data_end(fb.fileno(), lb)
        fa.seek(start)      # the hole search moved the descriptors' position
        fb.seek(start)
        n = min(la, lb)
        ba, bb = bytearray(FILE_CHUNK), bytearray(FILE_CHUNK)
        va, vb = memoryview(ba), memoryview(bb)
        p = start
        while p < n:
            k = min(FILE_CHUNK, n - p)
            ka, kb = _fill(fa, va[:k], path_a, p), _fill(fb, vb[:k], path_b, p)
            if ka != k or kb != k:              # a file shrank while read: what is left is compared
                n = p + min(ka, kb)
                k = n - p
            same = ba == bb if k == FILE_CHUNK else va[:k].tobytes() == vb[:k].tobytes()
            if not same:
                return p + first_difference(va[:k].tobytes(), vb[:k].tobytes(), 0, k)
            if on_chunk is not None:
                on_chunk(k)
            p += k
        if la == lb:
            return -1
        # past the shorter file's data the longer one must hold zeros: read on from where both stopped
        f, end, path = (fa, la, path_a) if la > lb else (fb, lb, path_b)
        p = max(p, n)
        f.seek(p)
        zeros = bytes(FILE_CHUNK)
        while p < end:
            k = _fill(f, va[:min(FILE_CHUNK, end - p)], path, p)
            if not k:
                break
            if (ba if k == FILE_CHUNK else va[:k].tobytes()) != zeros[:k]:
                return n
            p += k
    return -1


def _fill(f, view, path, at: int) -> int:
    got = 0
    while got < len(view):
        try:
            k = f.readinto(view[got:])
        except OSError as e:
            raise InputError(f"read failed: {e.strerror or e}", str(path), at + got) from None
        if not k:
            break
        got += k
    return got


def boundary_before(step: Callable, buf, q: int, start: int = 0) -> int:
    """Start of the unit that holds byte ``q``, following ``step(buf, p) -> next boundary | None`` from the
    boundary ``start`` (the last sound boundary when the chain breaks first)."""
    p = start
    while p < q:
        nxt = step(buf, p)
        if nxt is None or nxt > q:
            return p
        p = nxt
    return p


def _in_step(step: Callable, a, b, s: int, q: int) -> int | None:
    """The first position after ``q`` that is a unit boundary on both sides, walking both chains from the
    common boundary ``s``; None when either chain breaks first (the rest of the file is decoded)."""
    pa = pb = s
    while not (pa == pb and pa > q):
        if pa <= pb:
            pa = step(a, pa)
        else:
            pb = step(b, pb)
        if pa is None or pb is None:
            return None
    return pa


def plan_pair(path_a, path_b, step: Callable, on_chunk=None) -> PairPlan:
    """Compare two same-named segment files in blocks; around each difference, the window from the unit
    holding it to the first boundary after it that both sides share (``step(buf, p)`` gives the boundary
    after the unit at ``p``); then compare on from there."""
    plan, p, maps = PairPlan([]), 0, []
    try:
        while True:
            q = _first_difference_files(path_a, path_b, on_chunk, start=p)
            if q < 0:
                return plan
            if not maps:                    # mapped once, on the first difference (never read whole)
                # (a remote file: step() fetches the unit heads it reads)
                maps += [map_input(path_a, whole_limit=0, ranged=True), map_input(path_b, whole_limit=0, ranged=True)]
            a, b = maps[0].buf, maps[1].buf
            s = boundary_before(step, a, q, p)
            e = _in_step(step, a, b, s, q)
            plan.windows.append((s, e))
            if e is None:
                return plan
            p = e
    finally:
        for m in maps:
            m.close()


@dataclass
class Unit:
    """One unit of a log as the merge sees it: a message, a record batch, or bytes that do not decode."""

    offset: int                 # the alignment key (a physical offset, a record offset)
    last: int                   # the last offset the unit covers (``offset`` for one message)
    count: int                  # messages / records in it (0 for damaged bytes)
    raw: bytes                  # its bytes, compared as they are
    obj: object = None          # the decoded unit, handed to the family's compare
    file: str | None = None
    position: int | None = None
    damaged: str | None = None  # why these bytes are no unit
    size: int = -1              # bytes it spans (``len(raw)`` unless ``raw`` is a digest of them)

    def __post_init__(self):
        if self.size < 0:
            self.size = len(self.raw)


def damaged_unit(buf, offset: int, position: int, length: int, file, reason: str) -> Unit:
    """Bytes that are no unit, as a unit of the merge: compared by their digest (their span may be large)."""
    import hashlib

    h = hashlib.sha256()
    for p in range(position, position + length, CHUNK):
        need(buf, p, min(position + length, p + CHUNK) - p)     # a remote file: fetched piece by piece
        h.update(buf[p:min(position + length, p + CHUNK)])
    return Unit(offset, offset, 0, h.digest(), None, file, position, reason, length)


@dataclass
class _Streak:
    side: str
    where: str | None
    first: int
    last: int
    count: int = 0
    units: int = 0
    size: int = 0
    file: str | None = None
    position: int | None = None


@dataclass
class Tally:
    """Counts and rows of one diff. Engines call the methods below and ``yield from tally.take()``."""

    limit: int | None = None
    differing: int = 0
    only_in_a: int = 0
    only_in_b: int = 0
    damaged: int = 0
    cq_differing: int = 0
    index_differing: int = 0
    compared_bytes: int = 0
    first_divergence: int | None = None
    first_divergence_where: str | None = None
    shown: int = 0
    _rows: list = field(default_factory=list)
    _streaks: dict = field(default_factory=dict)

    def _diverged(self, offset, where) -> None:
        if self.first_divergence is None and self.first_divergence_where is None:
            self.first_divergence, self.first_divergence_where = offset, where or ""

    def emit(self, row: dict) -> None:
        if self.limit is None or self.shown < self.limit:
            self._rows.append(row)
        self.shown += 1

    def take(self) -> list:
        rows, self._rows = self._rows, []
        return rows

    def row(self, what: str, offset, where=None, **kw) -> None:
        r = {"kind": "difference", "what": what, "where": where, "offset": offset}
        r.update(kw)
        self.emit(r)

    # ---- records present on one side only: one row per run, not per message. A run per side is kept open
    # at once, so copies whose framing went out of step (offsets alternate between the sides) still give one
    # range each, not a row per record.
    def only(self, side: str, u: Unit, where=None) -> None:
        s = self._streaks.get(side)
        if s is not None and s.where != where:
            self.flush()
            s = None
        if s is None:
            self._diverged(u.offset, where)
            s = self._streaks[side] = _Streak(side, where, u.offset, u.last, file=u.file, position=u.position)
        s.last = u.last
        s.count += u.count
        s.units += 1
        s.size += u.size

    def flush(self) -> None:
        if not self._streaks:
            return
        for side in ("a", "b"):
            s = self._streaks.pop(side, None)
            if s is None:
                continue
            if side == "a":
                self.only_in_a += s.count
            else:
                self.only_in_b += s.count
            self.row(f"only_in_{side}", s.first, s.where, last_offset=s.last, count=s.count, units=s.units,
                     bytes=s.size, file=s.file, position=s.position)

    def content(self, offset, where, fields: list, ua: Unit, ub: Unit) -> None:
        """A unit pair at one offset whose bytes differ; ``fields`` = [(offset, field, a, b, extra)]."""
        self.flush()
        self._diverged(offset, where)
        # one differing record per offset named; a batch's own fields (``batch.*``) add none of their own
        self.differing += len({f[0] for f in fields if not f[1].startswith("batch.")}) or 1
        if not fields:
            fields = [(offset, "raw", *_bytes_pair(ua.raw, ub.raw))]
        for off, name, va, vb, *extra in fields:
            self.row("content", off, where, field=name, a=va, b=vb, file_a=ua.file, position_a=ua.position,
                     file_b=ub.file, position_b=ub.position, **(extra[0] if extra else {}))

    def damage(self, side: str, u: Unit, where=None) -> None:
        self.flush()
        self._diverged(u.offset, where)
        self.damaged += 1
        self.row("damaged", u.offset, where, side=side, field="bytes", a=u.damaged if side == "a" else None,
                 b=u.damaged if side == "b" else None, bytes=u.size, file=u.file, position=u.position)

    def side_row(self, what: str, offset, where, field_name, a, b, **kw) -> None:
        """A consume-queue / index difference (counted apart from the log's)."""
        self.flush()
        if what.startswith("cq"):
            self.cq_differing += kw.pop("units", 1)
        else:
            self.index_differing += kw.pop("units", 1)
        self.row(what, offset, where, field=field_name, a=a, b=b, **kw)

    def summary(self, family: str, a: str, b: str) -> dict:
        self.flush()
        log_same = not (self.differing or self.only_in_a or self.only_in_b or self.damaged)
        return {"kind": "summary", "family": family, "a": a, "b": b,
                "identical": log_same and not (self.cq_differing or self.index_differing),
                "log_identical": log_same, "differing": self.differing, "only_in_a": self.only_in_a,
                "only_in_b": self.only_in_b, "damaged": self.damaged, "cq_differing": self.cq_differing,
                "index_differing": self.index_differing, "first_divergence": self.first_divergence,
                "first_divergence_where": self.first_divergence_where, "difference_rows": self.shown,
                "compared_bytes": self.compared_bytes}


def _bytes_pair(a: bytes, b: bytes) -> tuple:
    """Two byte strings as a difference's values (base64, lossless) with where they first differ."""
    import base64

    at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return (base64.b64encode(bytes(a)).decode("ascii"), base64.b64encode(bytes(b)).decode("ascii"),
            {"encoding": "base64", "at": at})


def bytes_field(offset, name: str, a: bytes, b: bytes):
    """A differing bytes field as one entry of a ``compare`` result."""
    return (offset, name, *_bytes_pair(a, b))


IGNORED = frozenset({"file", "position", "kind"})


def row_fields(offset, ra: dict, rb: dict, prefix: str = "") -> list:
    """The fields of two rows of one record that differ (the family's dump rows; where a unit lives is no
    part of its content)."""
    out = []
    for k in list(ra) + [k for k in rb if k not in ra]:
        if k in IGNORED:
            continue
        va, vb = ra.get(k), rb.get(k)
        if va != vb:
            out.append((offset, prefix + k, va, vb))
    return out


def merge(tally: Tally, a: Iterable[Unit], b: Iterable[Unit], compare: Callable, where=None,
          advance: Callable[[int], None] | None = None) -> Iterator[dict]:
    """Walk two unit streams in offset order, yielding difference rows as they are found: equal bytes at one
    offset are the same unit; differing bytes go to ``compare(ua, ub) -> [(offset, field, a, b[, extra])]``;
    an offset met on one side only starts or extends a run of records only in that side."""
    ia, ib = iter(a), iter(b)
    ua, ub = next(ia, None), next(ib, None)
    while ua is not None or ub is not None:
        if tally._rows:
            yield from tally.take()
        if ua is not None and ub is not None and ua.offset == ub.offset:
            if advance is not None:
                advance(ua.size + ub.size)
            if ua.raw == ub.raw:
                tally.flush()
            elif ua.damaged or ub.damaged:
                # unreadable bytes where the other copy has a record: the record is on that side only
                for side, u in (("a", ua), ("b", ub)):
                    if u.damaged:
                        tally.damage(side, u, where)
                for side, u in (("a", ua), ("b", ub)):
                    if not u.damaged:
                        tally.only(side, u, where)
            else:
                tally.content(ua.offset, where, compare(ua, ub), ua, ub)
            ua, ub = next(ia, None), next(ib, None)
        elif ub is None or (ua is not None and ua.offset < ub.offset):
            if advance is not None:
                advance(ua.size)
            (tally.damage if ua.damaged else tally.only)("a", ua, where)
            ua = next(ia, None)
        else:
            if advance is not None:
                advance(ub.size)
            (tally.damage if ub.damaged else tally.only)("b", ub, where)
            ub = next(ib, None)


def _keep(u: Unit):
    """Of a remote file: the unit's bytes stay fetched while it is its side's head in :func:`merge` (``compare``
    may decode it, lazily, after the other side has read on); the function that lets them go, or None."""
    import sys

    remote = sys.modules.get("mqtool.remote")
    if remote is None or not remote.staged() or u.file is None or u.position is None:
        return None
    return remote.pin(u.file, u.position, u.position + max(u.size, 1))


@dataclass
class Side:
    """The segment files of one copy of a log, by their base (the name: a global or a base offset)."""

    segments: dict = field(default_factory=dict)       # base -> segment object

    def total(self, size_of: Callable) -> int:
        return sum(size_of(s) for s in self.segments.values())


def diff_log(tally: Tally, a: Side, b: Side, *, path_of: Callable, size_of: Callable, step: Callable,
             units: Callable[[object, int, int | None], Iterator[Unit]], compare: Callable, where=None,
             progress_enabled: bool | None = None, label: str = "diff") -> Iterator[dict]:
    """Diff one log kept as segment files on both sides; yields difference rows as they are found.

    Same-named segments are compared byte by byte first (:func:`plan_pair`): a pair that agrees is skipped
    whole, a pair that differs is decoded only in the windows around its differences. Segments on one side
    only are decoded whole. The units of both sides (``units(segment, start, stop)``, from the unit boundary
    ``start`` up to the boundary ``stop`` or the end) are merged by offset."""
    total = a.total(size_of) + b.total(size_of)
    windows: dict = {}
    with progress(total, label, enabled=progress_enabled) as bar:
        for base in sorted(set(a.segments) & set(b.segments)):
            pa, pb = a.segments[base], b.segments[base]
            plan = plan_pair(path_of(pa), path_of(pb), step, on_chunk=lambda n: bar.advance(2 * n))
            windows[base] = plan.windows
            tally.compared_bytes += max(size_of(pa), size_of(pb))

        def stream(side: Side) -> Iterator[Unit]:
            unpin = None
            try:
                for base in sorted(side.segments):
                    for start, stop in windows.get(base, [(0, None)]):
                        for u in units(side.segments[base], start, stop):
                            nxt = _keep(u)
                            if unpin is not None:
                                unpin()
                            unpin = nxt
                            yield u
            finally:
                if unpin is not None:
                    unpin()

        pending = [0]

        def advance(n: int) -> None:          # the bar is told once per MiB, not once per unit
            pending[0] += n
            if pending[0] >= CHUNK:
                bar.advance(pending[0])
                pending[0] = 0

        yield from merge(tally, stream(a), stream(b), compare, where, advance=advance)
        tally.flush()
        bar.update_to(total)
    yield from tally.take()


def diff_keyed(tally: Tally, what: str, where, a: Iterable, b: Iterable) -> Iterator[dict]:
    """Diff two keyed entry lists (consume-queue units, index entries): ``(key, {field: value}, file,
    position)`` in key order on each side. Differing values give one row per field (``what``); keys on one
    side only give one row per run of consecutive keys (``<what>_only_in_a`` / ``_b``) with their count."""
    ia, ib = iter(a), iter(b)
    ea, eb = next(ia, None), next(ib, None)
    run = None          # [side, first key, last key, count, file, position]

    def close():
        nonlocal run
        if run is not None:
            side, first, last, n, f, pos = run
            run = None
            tally.side_row(f"{what}_only_in_{side}", first, where, None, None, None, last_offset=last, count=n,
                           units=n, file=f, position=pos)

    while ea is not None or eb is not None:
        if ea is not None and eb is not None and ea[0] == eb[0]:
            close()
            counted = 1
            for k in list(ea[1]) + [k for k in eb[1] if k not in ea[1]]:
                va, vb = ea[1].get(k), eb[1].get(k)
                if va != vb:
                    tally.side_row(what, ea[0], where, k, va, vb, units=counted, file_a=ea[2], position_a=ea[3],
                                   file_b=eb[2], position_b=eb[3])
                    counted = 0
            ea, eb = next(ia, None), next(ib, None)
        else:
            side, e = ("a", ea) if eb is None or (ea is not None and ea[0] < eb[0]) else ("b", eb)
            if run is not None and (run[0] != side or e[0] != run[2] + 1):
                close()
            if run is None:
                run = [side, e[0], e[0], 0, e[2], e[3]]
            run[2], run[3] = e[0], run[3] + 1
            if side == "a":
                ea = next(ia, None)
            else:
                eb = next(ib, None)
        if tally._rows:
            yield from tally.take()
    close()
    yield from tally.take()


def same_file(path_a, path_b) -> bool:
    """Two files that hold the same data (trailing zeros aside: a preallocated file and its trimmed copy)."""
    return _first_difference_files(path_a, path_b) < 0
