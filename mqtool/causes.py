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

A span that overlaps or adjoins an earlier root's span is the same damage seen from another side (a truncated
segment, the gap after it, the record it cuts): that finding follows from the earlier root, whose span grows.

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
_KAFKA_INDEX_SUFFIXES = (".index", ".timeindex", ".txnindex")


def _is_pointer(code: str) -> bool:
    from mqtool.codes import REGISTRY

    info = REGISTRY.get(code)
    return info is not None and info.klass == "pointer"


class DamageSpans:
    """Root spans of one offset space: sorted, not overlapping (a span touching others joins them; one that
    bridges two makes them one). The one count of damaged ranges and bytes: verify's summary
    (:meth:`Linker.damage`) and ``info`` (:class:`mqtool.info.InfoBuilder`) both add the spans of the damage
    they meet here."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.roots: list[list] = []          # [start, end, id]

    def find(self, offset: int):
        i = bisect.bisect_right(self.starts, offset) - 1
        return self.roots[i] if i >= 0 else None

    def touching(self, a: int, b: int) -> str | None:
        """The id of the span [a, b) touches (that span grows to cover it and any other it bridges to), or
        None."""
        r = self._touch(a, b)[0]
        return None if r is None else r[2]

    def _touch(self, a: int, b: int) -> tuple[list | None, list]:
        """The span [a, b) touches, grown to cover it, and the spans it swallowed on the way: [a, b) can
        bridge several, which become one, named by the first of them (the lowest start)."""
        hi = bisect.bisect_right(self.starts, b) - 1          # the last span starting at or before b
        if hi < 0 or a > self.roots[hi][1]:
            return None, []                                # (spans do not overlap: none before it reaches a)
        lo = hi
        while lo > 0 and self.roots[lo - 1][1] >= a:
            lo -= 1
        r = self.roots[lo]
        gone = self.roots[lo + 1:hi + 1]
        r[1] = max(r[1], b, self.roots[hi][1])
        del self.starts[lo + 1:hi + 1], self.roots[lo + 1:hi + 1]
        if a < r[0]:                     # the span before ends before a: the order stays
            r[0] = self.starts[lo] = a
        return r, gone

    def add(self, a: int, b: int, rid) -> None:
        self._insert([a, b, rid])

    def join(self, a: int, b: int, rid) -> tuple[list, list]:
        """[a, b) as a new span named ``rid``, or joined to the span(s) it touches. Returns that span
        ``[start, end, id]`` (a live view: it grows as later spans join it) and the spans it swallowed
        (their ids are gone: [a, b) bridged them to the returned one)."""
        r, gone = self._touch(a, b)
        if r is None:
            r = [a, b, rid]
            self._insert(r)
        return r, gone

    def _insert(self, r: list) -> None:
        j = bisect.bisect_right(self.starts, r[0])
        self.starts.insert(j, r[0])
        self.roots.insert(j, r)

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
        kafka = f.code.startswith("kafka.")
        if f.span is not None:
            spans = self._files.setdefault(f.file or "", DamageSpans()) if kafka else self._log
            cause = spans.touching(*f.span)
            if cause is None:
                spans.add(f.span[0], f.span[1], fid)
        else:
            fr = self._file_roots.get(f.file) if f.file else None
            cause = fr[0] if fr and f.code in fr[1] else None
            if cause is None:
                cause = self._kafka_cause(f) if kafka else self._cause(f)
        if cause is None and f.code in LOG_GONE and self._log_gone is None:
            self._log_gone = fid
        if cause is None and f.code in FILE_ROOTS and f.file:
            self._file_roots.setdefault(f.file, (fid, FILE_ROOTS[f.code]))
        if cause is not None:
            self.consequences[cause] += 1
        if kafka and f.file and f.file.endswith(".log") and f.severity == ERROR and cause is None:
            self._kafka_logs.setdefault(f.file[:-4], fid)
        return replace(f, id=fid, caused_by=cause)

    def _kafka_cause(self, f: Finding) -> str | None:
        if f.file and _is_pointer(f.code):
            stem, ext = os.path.splitext(f.file)
            if ext in _KAFKA_INDEX_SUFFIXES:
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
