"""Carve LiteMQ commitlog records out of arbitrary bytes (``mqtool carve``).

A record is reported only when it passes the live chain's own test (:func:`mqtool.litemq.scan.live_record_at`):
a u32 length inside the bytes and at least the smallest message, the message magic right after it, every
field's length inside the record, and the length prefix equal to what the encoded fields take plus LiteMQ's
6 overcounted bytes, which must be zero as the broker leaves them. LiteMQ records carry no CRC; this field
consistency is what they have.

The search: ``find`` of the 4-byte magic (memchr-fast), a page window at a time; a record that checks starts
a run, walked contiguously (records lie back to back) while the next one checks; the search resumes at the
run's end. LiteMQ records claim no offset of their own (the broker writes CommitLogOffset as 0), so the
``offset`` of a carved record is null.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

from formats import litemq as F
from mqtool import native
from mqtool.litemq.records import LiteRecord
from mqtool.litemq.rows import record_row
from mqtool.litemq.scan import live_record_at
from mqtool.litemq.store import Segment
from mqtool.pages import PageWindow

FAMILY = "litemq"
_MAGIC = F.MESSAGE_MAGIC_BYTES


def record_at(buf, pos: int, n: int, seg: Segment, image: str) -> LiteRecord | None:
    """The record at ``pos`` when it passes the live chain's test and its overcounted bytes are zero (the
    broker never writes them: Go's make() leaves them zero), else None."""
    rec, _ = live_record_at(buf, pos, n, seg, image)
    return rec if rec is not None and not any(rec.padding) else None


def carve(buf, image: str, opts, scope) -> Iterator[tuple[int, LiteRecord]]:
    """``(run, record)`` for every record carved from ``buf`` in image order (``record.position``: its image
    position; ``run``: where its contiguous run starts). ``scope``: :class:`mqtool.carve.Scope` (the ranges
    to search, progress)."""
    n = len(buf)
    find = native.byte_find()
    seg = Segment(0, Path(image), n, 0)
    win = PageWindow(buf, 0)
    i = 0
    while True:
        i, hi = scope.window(i, n)
        if i + F.LENGTH_PREFIX >= n:
            return
        if i >= win.next_at:
            win.advance(i)
        hi = min(hi, win.next_at)
        j = find(buf, _MAGIC, i + F.LENGTH_PREFIX, min(n, hi + F.LENGTH_PREFIX + len(_MAGIC) - 1))
        if j < 0:
            i = hi
            scope.tick(i)
            continue
        cand = j - F.LENGTH_PREFIX
        rec = record_at(buf, cand, n, seg, image)
        if rec is None:
            i = cand + 1
            continue
        run = cand
        while rec is not None:
            yield run, rec
            p = rec.position + rec.size
            if p >= win.next_at:
                win.advance(p)
            rec = record_at(buf, p, n, seg, image)
        i = p
        scope.tick(i)


def rows(rec: LiteRecord, opts=None) -> Iterator[tuple[str, None, dict]]:
    """(kind, claimed offset: none, the dump row)."""
    yield "message", None, record_row(rec)


class Salvage:
    """Carved records written back as one LiteMQ commitlog file, ``litemq/commitlog/00000000000000000000``:
    every run back to back from byte 0, so LiteMQ's reader (and ``mqtool dump``/``verify``) follows the
    length prefixes through all of them. Records claim no offsets, so nothing conflicts."""

    def __init__(self, out):
        self.out = out
        self.files = 0
        self._w = None
        self._f = None

    def add_run(self, buf, start: int, end: int, first, last) -> str:
        rel = f"{FAMILY}/commitlog/{0:020d}"
        if self._f is None:
            self._w = self.out.atomic(rel)
            self._f = self._w.__enter__()
            self.files = 1
        for a in range(start, end, 32 << 20):
            self._f.write(buf[a:min(end, a + (32 << 20))])
        return rel

    def close(self, failed: bool = False) -> None:
        if self._w is not None:
            w, self._w, self._f = self._w, None, None
            if failed:
                w.__exit__(RuntimeError, RuntimeError("carve failed"), None)
            else:
                w.__exit__(None, None, None)
