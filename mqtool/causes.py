"""Root causes: every finding of a run gets an ``id``; a finding that follows from another gets
``caused_by`` (the root's id). One pass over the finding stream, shared by every family, so the checks
themselves stay as they are.

Roots are findings with a ``span``: the damaged or missing bytes [start, end) in the log's offset space
(RocketMQ / LiteMQ: global commitlog offsets), set where the damage is found. A later finding follows
from a root when

* its ``offset`` lies inside the root's span (a consume-queue unit or index entry pointing there, a check of
  the same bytes), or
* it reports the gap in a queue that lost messages (:data:`AFTER_RANGE`) and the root lies between the queue's
  previous message and this one: it ends at the finding's ``offset``, or after its ``lost_from`` (the end of
  the queue's previous message; other queues' messages may lie in between), or
* it says that something lies past the end of the readable data (:data:`PAST_END`: units past a truncation,
  records after a gap) and the nearest root at or before its offset ends the data, or
* the store's log has no bytes at all (:data:`LOG_GONE`, a root without a span) and it points into the log
  (:data:`PAST_END` or a code of the ``pointer`` class) with no root of its own.

Kafka's index entries give a Kafka offset, not a log position: an ``.index``/``.timeindex``/``.txnindex``
pointer finding follows from the first error found in the ``.log`` of the same segment.

A span that overlaps an earlier root's span is the same damage seen from another side: that finding follows
from the earlier root, whose span grows. So is one that adjoins it (a truncated segment and the gap after it, a
framing break and the record it cuts), unless either of the two is a whole unit (:data:`WHOLE_UNIT`: a message
or batch whose framing holds and whose own check fails, e.g. a body CRC): its framing bounds its damage, so two
such units side by side are two roots.

The stream order is the check order (the log first, then what points into it), so a root is always seen
before its consequences and nothing needs to be held back.
"""
from __future__ import annotations

import bisect
import os
from collections import Counter
from collections.abc import Iterable, Iterator

from mqtool.findings import ERROR, Finding
from mqtool.plainclass import replace

#: codes that report something past the end of what the reader can reach
PAST_END = frozenset({
    "cq-dangling",                                                                        # RocketMQ
    "cq-beyond-end", "cq-unreachable-record", "after-gap-record", "data-after-gap",       # LiteMQ
})
#: codes saying the store's log holds no byte at all: every pointer into it follows from them
LOG_GONE = frozenset({"commitlog-empty", "no-commitlog"})
#: a damaged structure of a file → the codes in the same file that follow from it (a bad hash slot makes
#: the entries it leads to look chained from the wrong slot, cycles where chains now meet, and leaves its
#: own chain unreachable)
FILE_ROOTS = {"index-bad-slot": frozenset({"index-wrong-slot", "index-chain-cycle", "index-unreachable"})}
#: codes reported at the first message after a range of lost messages
AFTER_RANGE = frozenset({"queue-offset-gap"})
#: codes whose span is one whole unit that reads as a unit (its length leads to the next one) and fails a check of
#: its own content: its framing bounds the damage, so a span that only adjoins it is other damage (Kafka's codes
#: without their ``kafka.`` prefix, as ``info`` names them)
WHOLE_UNIT = frozenset({
    "crc-mismatch", "prop-crc-mismatch", "body-inflate-failed",                              # RocketMQ, Kafka
    "inner-crc-mismatch", "payload-inflate-failed", "records-undecodable",                   # Kafka
    "commitlog-offset-mismatch", "store-size-mismatch", "consume-fields-set",                # LiteMQ
})
_KAFKA_INDEX_SUFFIXES = (".index", ".timeindex", ".txnindex")


def whole_unit(code: str) -> bool:
    """Whether a finding's or damaged range's span is a whole unit (:data:`WHOLE_UNIT`)."""
    return code.removeprefix("kafka.") in WHOLE_UNIT


_POINTER: dict[str, bool] = {}          # code -> of the pointer class (codes are the program's: a few hundred)


def _is_pointer(code: str) -> bool:
    known = _POINTER.get(code)
    if known is None:
        from mqtool.codes import REGISTRY

        info = REGISTRY.get(code)
        known = _POINTER[code] = info is not None and info.klass == "pointer"
    return known


def _with_ids(f: Finding, fid: str, cause: str | None) -> Finding:
    """``replace(f, id=fid, caused_by=cause)``; for a plain :class:`Finding` a copy of its attributes (a
    field-by-field replace was the largest cost of a run of millions of findings)."""
    if type(f) is not Finding:
        return replace(f, id=fid, caused_by=cause)
    out = _new(Finding)
    d = out.__dict__
    d.update(f.__dict__)
    d["id"] = fid
    d["caused_by"] = cause
    return out


_new = object.__new__


#: the edges of a span (:class:`DamageSpans`): a whole unit's are closed (a span that only adjoins it is other
#: damage), other damage's open (what adjoins it with an open edge of its own is the same damage); an empty span
#: [p, p) at a span's end is a point there, on the byte at p, which any span holding that byte shares
_CLOSED, _OPEN, _POINT = 0, 1, 2


class DamageSpans:
    """Root spans of one offset space: sorted, not overlapping. A span joins every span it shares a byte with
    (bridging several makes them one), and one it adjoins (ends where the other starts) when neither is a whole
    unit there (:data:`WHOLE_UNIT`). The one count of damaged ranges and bytes: verify's summary
    (:meth:`Linker.damage`) and ``info`` (:class:`mqtool.info.InfoBuilder`) both add the spans of the damage
    they meet here."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.roots: list[list] = []          # [start, end, id]
        self._edges: list[list] = []         # [start edge, end edge] of each root (_CLOSED, _OPEN, _POINT)

    def find(self, offset: int):
        i = bisect.bisect_right(self.starts, offset) - 1
        return self.roots[i] if i >= 0 else None

    def _touch(self, a: int, b: int, edge: int) -> tuple[list | None, list]:
        """The span [a, b) joins (``edge``: _CLOSED for a whole unit), grown to cover it, and the spans it
        swallowed on the way: [a, b) can bridge several, which become one, named by the first of them (the
        lowest start)."""
        st, roots, ed = self.starts, self.roots, self._edges
        lo, hi = bisect.bisect_left(st, a), bisect.bisect_right(st, b)     # [lo, hi): spans starting in [a, b]
        first, last = lo, hi - 1
        if lo > 0:                      # the span before a: shares a byte with [a, b), or it ends at a
            e, end_edge = roots[lo - 1][1], ed[lo - 1][1]
            if e > a or (e == a and (end_edge == _POINT or (end_edge and edge))):
                first = lo - 1
        if hi > lo and st[hi - 1] == b and b > a and not (edge and ed[hi - 1][0]):
            last = hi - 2               # the span starting at b only adjoins [a, b), and one of the two is whole
        if first > last:
            return None, []
        r, e = roots[first], roots[last][1]
        gone = roots[first + 1:last + 1]
        new_end = _POINT if a == b else edge
        start_edge = edge if a < r[0] else ed[first][0] if a > r[0] else max(edge, ed[first][0])
        end_edge = new_end if b > e else ed[last][1] if b < e else max(new_end, ed[last][1])
        r[0], r[1] = min(a, r[0]), max(b, e)
        st[first], ed[first] = r[0], [start_edge, end_edge]
        del st[first + 1:last + 1], roots[first + 1:last + 1], ed[first + 1:last + 1]
        return r, gone

    def join(self, a: int, b: int, rid, whole: bool = False) -> tuple[list, list]:
        """[a, b) as a new span named ``rid``, or joined to the span(s) it touches (``whole``: a whole unit,
        which adjoining spans do not join). Returns that span ``[start, end, id]`` (a live view: it grows as
        later spans join it) and the spans it swallowed (their ids are gone: [a, b) bridged them to the
        returned one)."""
        edge = _CLOSED if whole and b > a else _OPEN
        r, gone = self._touch(a, b, edge)
        if r is None:
            r = [a, b, rid]
            j = bisect.bisect_left(self.starts, a)
            self.starts.insert(j, a)
            self.roots.insert(j, r)
            self._edges.insert(j, [edge, _POINT if a == b else edge])
        return r, gone

    def totals(self) -> tuple[int, int]:
        return len(self.roots), sum(e - s for s, e, _ in self.roots)


class Linker:
    """Assign ids and ``caused_by`` over one run (several stores: call :meth:`new_store` between them)."""

    #: findings past the end of the data seen before any root (LiteMQ reports the records after a gap before
    #: the damage that ends its live data): held until a root arrives, at most this many
    MAX_PENDING = 100_000

    def __init__(self) -> None:
        self.count = 0
        self.consequences: Counter = Counter()       # root id → number of findings caused by it
        self._pending: list[Finding] = []
        self.new_store()

    def new_store(self) -> None:
        self._log = DamageSpans()                           # RocketMQ / LiteMQ: global commitlog offsets
        self._files: dict[str, DamageSpans] = {}            # Kafka: positions in each .log
        self._kafka_logs: dict[str, str] = {}          # segment path without suffix → first root id
        self._file_roots: dict[str, tuple[str, frozenset]] = {}   # file → (root id, codes that follow)
        self._log_gone: str | None = None                   # id of the LOG_GONE finding of this store
        self._stems: dict[str, str | None] = {}             # Kafka index file -> its segment's path without suffix

    def damage(self) -> tuple[int, int]:
        """(damaged ranges, damaged bytes) of the current store: the merged spans of its root findings."""
        n, b = self._log.totals()
        for sp in self._files.values():
            fn, fb = sp.totals()
            n, b = n + fn, b + fb
        return n, b

    def link(self, findings: Iterable[Finding]) -> Iterator[Finding]:
        """The findings with ids and ``caused_by``, in their order, except that a finding past the end of the
        data that arrives before any root waits for the next root (or the end)."""
        for f in findings:
            if (not self._log.roots and self._log_gone is None and f.code in PAST_END and f.offset is not None
                    and len(self._pending) < self.MAX_PENDING):
                self._pending.append(f)
                continue
            out = self._one(f)
            yield out
            if self._pending and out.caused_by is None and (out.span is not None or out.id == self._log_gone):
                held, self._pending = self._pending, []
                for p in held:
                    yield self._one(p)
        held, self._pending = self._pending, []
        for p in held:
            yield self._one(p)

    def _one(self, f: Finding) -> Finding:
        self.count += 1
        fid = f"F{self.count}"
        code, file = f.code, f.file
        kafka = code.startswith("kafka.")
        if f.span is not None:
            spans = self._files.setdefault(file or "", DamageSpans()) if kafka else self._log
            r, _ = spans.join(f.span[0], f.span[1], fid, whole=whole_unit(code))
            cause = None if r[2] == fid else r[2]
        else:
            fr = self._file_roots.get(file) if file else None
            cause = fr[0] if fr and code in fr[1] else None
            if cause is None:
                cause = self._kafka_cause(f) if kafka else self._cause(f)
        if cause is not None:
            self.consequences[cause] += 1
        else:
            if code in LOG_GONE and self._log_gone is None:
                self._log_gone = fid
            if code in FILE_ROOTS and file:
                self._file_roots.setdefault(file, (fid, FILE_ROOTS[code]))
            if kafka and file and file.endswith(".log") and f.severity == ERROR:
                self._kafka_logs.setdefault(file[:-4], fid)
        return _with_ids(f, fid, cause)

    def _kafka_cause(self, f: Finding) -> str | None:
        if f.file and _is_pointer(f.code):
            stem = self._stems.get(f.file, False)
            if stem is False:
                stem, ext = os.path.splitext(f.file)
                stem = self._stems[f.file] = stem if ext in _KAFKA_INDEX_SUFFIXES else None
            if stem is not None:
                return self._kafka_logs.get(stem)
        return None

    def _cause(self, f: Finding) -> str | None:
        if f.offset is None:
            return None
        r = self._log.find(f.offset)
        if r is None:
            return self._log_gone if self._log_gone and (f.code in PAST_END or _is_pointer(f.code)) else None
        start, end, rid = r
        if f.offset < end:
            return rid
        if f.code in AFTER_RANGE and (f.offset == end or (f.lost_from is not None and end > f.lost_from)):
            return rid       # (roots do not overlap: the nearest one before the offset is the one to look at)
        return rid if f.code in PAST_END else None


def link(findings: Iterable[Finding]) -> list[Finding]:
    """All findings of one store, with ids and ``caused_by``."""
    return list(Linker().link(findings))


def linked(findings: Iterable[Finding], summary_fn, store: str | None = None, family: str | None = None,
           linker: Linker | None = None):
    """A verify run (findings iterator, summary function) as every output gives it: findings with ids and
    ``caused_by``; the summary naming ``store`` and ``family``, with ``consequences`` and the damaged ranges
    and bytes of the root findings. ``linker``: one per run, so ids stay unique over several stores."""
    linker = linker or Linker()
    linker.new_store()
    caused = [0]

    def gen():
        for f in linker.link(findings):
            if f.caused_by is not None:
                caused[0] += 1
            yield f

    def summary():
        s = summary_fn()
        s.consequences = caused[0]
        s.damaged_ranges, s.damaged_bytes = linker.damage()
        if store is not None:
            s.store = store
        if family is not None:
            s.family = family
        return s

    return gen(), summary
