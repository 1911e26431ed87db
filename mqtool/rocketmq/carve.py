"""Carve RocketMQ commitlog units out of arbitrary bytes (``mqtool carve``): disk images, unallocated space,
fragments of deleted segments, at any byte alignment.

A unit is reported only when it decodes and checks in full (the decoders of :mod:`mqtool.rocketmq.records`,
whose layout is :mod:`mqtool.rocketmq.layout`): MAGICCODE v1/v2 at +4, TOTALSIZE within the bytes and the
maximum message size, the tail framing (every length fits and TOTALSIZE equals the length the fields give),
the body CRC right, and a stored PHYSICALOFFSET that is not negative.

The search: the two message magics share their first bytes, so one ``find`` of that prefix (memchr-fast)
gives every candidate; a candidate that checks starts a **run**, walked contiguously (units lie back to back
in a segment) with the compiled decoder where it is built, for as long as the next unit checks too. A unit
whose PHYSICALOFFSET does not follow from the previous one (two segments' bytes side by side in the image)
starts a new run. After a run the search resumes at its end; after a candidate that fails, one byte on.
The search goes a page window at a time (bounded resident memory on a mapped image).
"""
from __future__ import annotations

import os
from typing import Callable, Iterator

from formats import rocketmq as F
from mqtool.io import write_span
from mqtool.pages import PageWindow
from mqtool.rocketmq.records import _SLICES_TO_BYTES, DecodeFailure, Message, decode_message
from mqtool.rocketmq.scan import _V1, _V2, NATIVE_RUN, native_decoder

FAMILY = "rocketmq"
_PREFIX = os.path.commonprefix([_V1, _V2])      # the magics' common first bytes
_LAST = frozenset((_V1[len(_PREFIX)], _V2[len(_PREFIX)])) if len(_PREFIX) == 3 else frozenset()


def _find_magic(buf, lo: int, hi: int) -> int:
    """Position of the first v1/v2 magic starting in [lo, hi) (its bytes may run past hi), or -1."""
    n = len(buf)
    top = min(n, hi + 3)
    if _LAST:
        k = len(_PREFIX)
        j = buf.find(_PREFIX, lo, top)
        while j >= 0 and j < hi:
            if j + k < n and buf[j + k] in _LAST:
                return j
            j = buf.find(_PREFIX, j + 1, top)
        return -1
    hits = [j for j in (buf.find(_V1, lo, top), buf.find(_V2, lo, top)) if 0 <= j < hi]
    return min(hits) if hits else -1


def _unit_at(buf, pos: int, n: int, image: str, max_size: int, view) -> Message | None:
    """The unit at ``pos`` when it checks in full (CRC right, PHYSICALOFFSET >= 0), else None."""
    try:
        m = decode_message(buf, pos, n, 0, image, max_size, True, view)
    except DecodeFailure:
        return None
    return m if m.crc_ok and m.physical_offset >= 0 else None


def carve(buf, image: str, opts=None, tick: Callable[[int], None] | None = None) -> Iterator[tuple[int, Message]]:
    """``(run, message)`` for every unit carved from ``buf``, in image order. ``run`` is the image position
    where the message's run starts (units of one run are contiguous and their PHYSICALOFFSETs follow on);
    ``message.position`` is its image position. ``opts``: :class:`mqtool.options.CarveOptions`
    (``max_message_size``); ``tick(pos)``: called as the search passes ``pos``."""
    max_size = getattr(opts, "max_message_size", F.DEFAULT_MAX_MESSAGE_SIZE)
    n = len(buf)
    view = memoryview(buf) if n else None
    dec = native_decoder() if type(buf) in _SLICES_TO_BYTES else None
    win = PageWindow(buf, 0)
    i = 0
    try:
        while i + 8 <= n:
            if i >= win.next_at:
                win.advance(i)
            hi = min(n, win.next_at)
            j = _find_magic(buf, i + 4, hi + 4)
            if j < 0:
                i = max(i + 1, hi)
                if tick is not None:
                    tick(i)
                continue
            cand = j - 4
            m = _unit_at(buf, cand, n, image, max_size, view)
            if m is None:
                i = cand + 1
                continue
            i = yield from _walk(buf, m, n, image, max_size, view, dec, win)
            if tick is not None:
                tick(i)
    finally:
        if view is not None:
            view.release()


def _walk(buf, first: Message, n: int, image: str, max_size: int, view, dec, win):
    """Yield the run that starts with ``first`` and the units that follow it contiguously; returns where
    the run ends (the next search starts there)."""
    run = first.position
    delta = first.physical_offset - run
    yield run, first
    p = first.position + first.size
    while p + 8 <= n:
        if p >= win.next_at:
            win.advance(p)
        if dec is not None:
            npos, units = dec(buf, p, min(n, win.next_at), n, 0, image, max_size, True, NATIVE_RUN)
            if units:
                for m in units:
                    if not m.crc_ok or m.physical_offset < 0:
                        return m.position
                    if m.physical_offset - m.position != delta:
                        run, delta = m.position, m.physical_offset - m.position
                    yield run, m
                p = npos
                continue
        m = _unit_at(buf, p, n, image, max_size, view)
        if m is None:
            return p
        if m.physical_offset - p != delta:
            run, delta = p, m.physical_offset - p
        yield run, m
        p += m.size
    return p


def rows(m: Message, opts=None) -> Iterator[tuple[str, int, dict]]:
    """(kind, the offset the unit claims: its PHYSICALOFFSET, the dump row)."""
    yield "message", m.physical_offset, m.to_row()


class Salvage:
    """Carved runs written back as RocketMQ commitlog files: each run is a segment named by its first
    PHYSICALOFFSET (so every unit's stored offset equals the offset of its place, as in the broker's own
    files) in ``rocketmq/commitlog/``; a run overlapping one already written goes to the next store
    (``rocketmq-2/commitlog/``, ...). Each is a store ``mqtool dump``/``verify`` read."""

    def __init__(self, out):
        self.out = out                                      # an mqtool.io.OutputDir
        self.stores: list[list[tuple[int, int]]] = []
        self.files = 0

    def add_run(self, buf, start: int, end: int, first: Message, last: Message) -> str:
        lo, hi = first.physical_offset, first.physical_offset + end - start
        for k, taken in enumerate(self.stores):
            if all(hi <= a or lo >= b for a, b in taken):
                break
        else:
            k = len(self.stores)
            self.stores.append([])
        self.stores[k].append((lo, hi))
        rel = f"{FAMILY}{'' if k == 0 else f'-{k + 1}'}/commitlog/{lo:020d}"
        write_span(self.out, rel, buf, start, end)
        self.files += 1
        return rel

    def close(self, failed: bool = False) -> None:
        pass

