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
from typing import Iterator

from formats import rocketmq as F
from mqtool import native, ndjson
from mqtool.carve import Layers
from mqtool.io import write_span
from mqtool.rocketmq import nativedump
from mqtool.pages import PageWindow
from mqtool.rocketmq.layout import narrow
from mqtool.rocketmq.records import _SLICES_TO_BYTES, DecodeFailure, Message, decode_message
from mqtool.rocketmq.scan import _V1, _V2, NATIVE_RUN, native_decoder

FAMILY = "rocketmq"
_PREFIX = os.path.commonprefix([_V1, _V2])      # the magics' common first bytes
_LAST = frozenset((_V1[len(_PREFIX)], _V2[len(_PREFIX)])) if len(_PREFIX) == 3 else frozenset()


def _find_magic(buf, lo: int, hi: int, find) -> int:
    """Position of the first v1/v2 magic starting in [lo, hi) (its bytes may run past hi), or -1. ``find``:
    :func:`mqtool.native.byte_find`'s (the carve asks it once per image)."""
    n = len(buf)
    top = min(n, hi + 3)
    if _LAST:
        k = len(_PREFIX)
        j = find(buf, _PREFIX, lo, top)
        while j >= 0 and j < hi:
            if j + k < n and buf[j + k] in _LAST:
                return j
            j = find(buf, _PREFIX, j + 1, top)
        return -1
    hits = [j for j in (find(buf, _V1, lo, top), find(buf, _V2, lo, top)) if 0 <= j < hi]
    return min(hits) if hits else -1


def _unit_at(buf, pos: int, n: int, image: str, max_size: int, view) -> Message | None:
    """The unit at ``pos`` when it checks in full (CRC right, PHYSICALOFFSET >= 0), else None."""
    try:
        m = decode_message(buf, pos, n, 0, image, max_size, True, view)
    except DecodeFailure:
        return None
    return m if m.crc_ok and m.physical_offset >= 0 else None


def carve(buf, image: str, opts, scope) -> Iterator[tuple[int, Message]]:
    """``(run, message)`` for every unit carved from ``buf``, in image order. ``run`` is the image position
    where the message's run starts (units of one run are contiguous and their PHYSICALOFFSETs follow on);
    ``message.position`` is its image position. ``opts``: :class:`mqtool.options.CarveOptions`
    (``max_message_size``); ``scope``: :class:`mqtool.carve.Scope` (the ranges to search, progress)."""
    max_size = opts.max_message_size
    n = len(buf)
    view = memoryview(buf) if n else None
    dec = native_decoder() if type(buf) in _SLICES_TO_BYTES else None
    lane = _lines_lane(buf, image, opts) if dec is not None else None
    find = native.byte_find()
    win = PageWindow(buf, 0)
    i = 0
    try:
        while True:
            i, hi = scope.window(i, n)
            if i + 8 > n:
                return
            if i >= win.next_at:
                win.advance(i)
            hi = min(hi, win.next_at)
            j = _find_magic(buf, i + 4, hi + 4, find)
            if j < 0:
                i = hi
                scope.tick(i)
                continue
            cand = j - 4
            if not scope.afford(min(int.from_bytes(buf[cand:cand + 4], "big", signed=True), n - cand)):
                i = cand + 1        # its body CRC would read what TOTALSIZE claims
                continue
            m = _unit_at(buf, cand, n, image, max_size, view)
            if m is None:
                i = cand + 1
                continue
            i = yield from _walk(buf, m, n, image, max_size, view, dec, win, lane)
            scope.tick(i)
    finally:
        if view is not None:
            view.release()


def _walk(buf, first: Message, n: int, image: str, max_size: int, view, dec, win, lane):
    """Yield the run that starts with ``first`` and the units that follow it contiguously; returns where
    the run ends (the next search starts there).

    With ``lane`` (:func:`_lines_lane`, NDJSON output) the units whose PHYSICALOFFSET follows on are rendered
    a block at a time, and a block is cut at the first unit whose CRC is wrong (the lane makes every check
    the decoder makes: framing, lengths, CRC); without it, the compiled decoder gives units a list at a
    time. Whatever neither takes (another host variant, text that is not UTF-8, a PHYSICALOFFSET that starts a
    new run) goes through the careful decoder one unit at a time."""
    run = first.position
    delta = first.physical_offset - run
    yield run, first
    p = first.position + first.size
    while p + 8 <= n:
        if p >= win.next_at:
            win.advance(p)
        if lane is not None:
            lim, count = _following(buf, p, min(n, win.next_at), n, delta)
            lines = lane(p, lim, delta, count) if count else None
            if lines is not None:
                bad = lines.carve_lines.find(_CRC_WRONG)
                if bad < 0:
                    yield run, lines
                    p += lines.size
                    continue
                cut = lines.carve_lines.rfind(b"\n", 0, bad) + 1
                k = lines.carve_lines.count(b"\n", 0, cut)
                at = _skip_units(buf, p, k)
                if k:
                    yield run, Lines(p, at - p, k, p + delta, lines.carve_lines[:cut])
                return at               # the unit with the wrong CRC ends the run
        elif dec is not None:
            npos, units = dec(buf, p, min(n, win.next_at), n, 0, image, max_size, True, NATIVE_RUN)
            if units:
                for m in units:
                    if not m.crc_ok or m.physical_offset < 0:
                        return m.position       # a unit that does not check ends the run
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


_HEAD = narrow(("TOTALSIZE", "PHYSICALOFFSET"))
_CRC_WRONG = (ndjson.dumps("crc_ok") + ":" + ndjson.dumps(False)).encode()    # inside a row: only that key


def _following(buf, p: int, limit: int, n: int, delta: int) -> tuple[int, int]:
    """(end, count) of the units from ``p`` (starting before ``limit``, at most :data:`NATIVE_RUN`) whose
    stored PHYSICALOFFSET is their position + ``delta`` and whose TOTALSIZE lies inside the bytes: the span
    the lane may render (it checks the rest itself)."""
    unpack, size = _HEAD.unpack_from, _HEAD.size
    q, k = p, 0
    while q < limit and k < NATIVE_RUN and q + size <= n:
        total, phys = unpack(buf, q)
        if phys != q + delta or total < F.MIN_MESSAGE_SIZE or total > n - q:
            break
        q += total
        k += 1
    return q, k


def _skip_units(buf, p: int, k: int) -> int:
    """Position of the unit after the ``k`` units from ``p`` (already framed)."""
    unpack = _HEAD.unpack_from
    for _ in range(k):
        p += unpack(buf, p)[0]
    return p


class Lines:
    """Units of one run already rendered as carve NDJSON lines (``mqtool carve --json``): ``count`` units
    from image ``position``, ``size`` bytes, the first one's ``physical_offset``; ``carve_lines`` the bytes."""

    __slots__ = ("position", "size", "count", "physical_offset", "carve_lines")

    def __init__(self, position, size, count, physical_offset, carve_lines):
        self.position, self.size, self.count = position, size, count
        self.physical_offset, self.carve_lines = physical_offset, carve_lines


def _lines_lane(buf, image: str, opts):
    """``lane(pos, limit, delta, cap)`` -> :class:`Lines` or None: the compiled ``dump --json`` helper
    (:mod:`mqtool.rocketmq.nativedump`) renders checked units straight to NDJSON, with ``offset`` their
    PHYSICALOFFSET (the helper's segment base set to ``delta``); each line's leading ``kind``/``file``/
    ``position`` become the carve prefix ``family``/``kind``/``image``/``image_position``, the rest is the
    dump row byte for byte, as the dict path gives it. None when the output is not NDJSON, or the helper,
    orjson or a UTF-8 image name is missing (then rows are built from :class:`Message`)."""
    if not getattr(opts, "ndjson", False) or type(buf) not in _SLICES_TO_BYTES:
        return None
    mod, fj = nativedump.helper(), nativedump.file_json(image)
    if mod is None or fj is None or nativedump.ROW_KEYS[:4] != ("kind", "file", "position", "offset"):
        return None
    js = ndjson.dumps
    old = ("{" + js("kind") + ":" + js("message") + "," + js("file") + ":").encode() + fj + \
        ("," + js("position") + ":").encode()
    probe = js({"family": FAMILY, "kind": "message", "image": image, "image_position": 0})
    assert probe.endswith(":0}")
    new = probe[:-2].encode()
    if not new.endswith(b":") or fj not in new:
        return None
    skip, nl_old, nl_new = len(old), b"\n" + old, b"\n" + new
    call, max_size, n = mod.json_rows, opts.max_message_size, len(buf)

    def lane(pos: int, limit: int, delta: int, cap: int):
        npos, count, data = call(buf, pos, limit, n, delta, fj, max_size, nativedump.BODY_MODES["none"], cap)
        if not count or not data.startswith(old):
            return None
        # every line starts with ``old`` (a raw newline never occurs inside a JSON line)
        data = new + data[skip:].replace(nl_old, nl_new)
        return Lines(pos, npos - pos, count, pos + delta, data)

    return lane


def rows(m: Message, opts=None) -> Iterator[tuple[str, int, dict]]:
    """(kind, the offset the unit claims: its PHYSICALOFFSET, the dump row). (:class:`Lines` never come
    here: the dispatcher writes their ``carve_lines``.)"""
    yield "message", m.physical_offset, m.to_row()


class Salvage:
    """Carved runs written back as RocketMQ commitlog files: each run is a segment named by its first
    PHYSICALOFFSET (so every unit's stored offset equals the offset of its place, as in the broker's own
    files) in ``rocketmq/commitlog/``; a run overlapping one already written goes to the next store
    (``rocketmq-2/commitlog/``, ...). Each is a store ``mqtool dump``/``verify`` read."""

    def __init__(self, out):
        self.out = out                                      # an mqtool.io.OutputDir
        self.layers = Layers()
        self.files = 0

    def add_run(self, buf, start: int, end: int, first, last) -> str:
        lo = first.physical_offset
        k = self.layers.place(lo, lo + end - start)
        rel = f"{FAMILY}{'' if k == 0 else f'-{k + 1}'}/commitlog/{lo:020d}"
        write_span(self.out, rel, buf, start, end)
        self.files += 1
        return rel

    def close(self, failed: bool = False) -> None:
        pass

