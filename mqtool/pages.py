"""Bounded resident memory for sequential scans of mapped files (any family).

Walking a 1 GiB segment through ``mmap`` makes every touched page resident in this process: the peak RSS
grows with the input. :class:`PageWindow` keeps it bounded: every ``WINDOW`` bytes of progress it releases the
pages behind the cursor (``MADV_DONTNEED``: on a read-only file map this only unmaps them, the page cache
keeps them and a later access — a lazily decoded body, say — faults them back in) and populates the next
window in one call (``MADV_POPULATE_READ``, Linux 5.14+, ignored where refused), which costs far less than
taking the page faults one by one. On buffers that are not maps, or platforms without ``madvise``, it does
nothing. Usage in a scanner::

    win = PageWindow(buf, start)
    while pos < end:
        if pos >= win.next_at:
            win.advance(pos)
        ...

The calls go through ``rmqcore.verify.madvise`` when the compiled helpers are on: ``mmap.madvise`` holds the
GIL for the milliseconds a window takes to populate, which threads walking other ranges could use.

A ranged map of a remote file (:func:`mqtool.io.map_input` with ``ranged=True``) reads zeros where nothing
was fetched yet, so there the window also fetches: it steps every remote chunk (``MQTOOL_REMOTE_CHUNK_MB``,
default 8 MiB) instead of every ``WINDOW``, and on each step asks :func:`mqtool.io.need` for the bytes from
its page to two steps on, or one step and the longest unit the scanner reads without asking (its ``unit``:
a unit that starts before the next step may end that far past it). A scan that stops early has fetched a
few chunks; a whole scan, each chunk once.
"""
from __future__ import annotations

import mmap

from mqtool import io as _io

WINDOW = 32 << 20
PAGE = mmap.PAGESIZE
_DONTNEED = getattr(mmap, "MADV_DONTNEED", None)
_POPULATE_READ = getattr(mmap, "MADV_POPULATE_READ", 22 if _DONTNEED is not None else None)
_populate_ok = [_POPULATE_READ is not None]
_nogil: list = []           # [madvise(buf, start, length, advice) without the GIL, or None], once looked up
_huge: list = []            # [rmqverify.huge_share, or None], once looked up


def _madvise(buf, advice: int, start: int, length: int) -> None:
    """``buf.madvise(advice, start, length)``, without the GIL when the compiled helper is there."""
    if not _nogil:
        from mqtool import native

        mod = native.load("rmqverify")
        _nogil.append(getattr(mod, "madvise", None))
    fn = _nogil[0]
    if fn is None:
        buf.madvise(advice, start, length)
    else:
        fn(buf, start, length, advice)


class PageWindow:
    __slots__ = ("buf", "end", "kept", "next_at", "window", "remote", "populate")

    def __init__(self, buf, start: int = 0, window: int | None = None, end: int | None = None,
                 unit: int = 0, populate: bool = True):
        """``unit``: the longest unit the scan may read whole from a position before :attr:`next_at` without
        asking (:func:`mqtool.io.need`) first; a remote file is fetched that far past the next step.
        ``populate`` False: the scan reads most of the file some other way (a lane's pread), so nothing is
        populated ahead; pages it touched through the map are still released behind it."""
        self.populate = populate
        self.window = window or WINDOW
        self.end = len(buf) if end is None else min(end, len(buf))   # nothing is populated past ``end``
        self.kept = start - start % PAGE            # pages before this have been released
        self.remote = 0                             # a remote file: bytes fetched from each step on
        if _io.ranged(buf):
            from mqtool import remote

            self.window = min(self.window, remote.chunk_size())
            self.remote = self.window + max(self.window, unit)
            _io.need(buf, self.kept, self.remote)
        if isinstance(buf, mmap.mmap) and _DONTNEED is not None:
            self.buf = buf
            self.next_at = self.kept + self.window
            self._populate(self.kept)
        else:
            self.buf = None
            self.next_at = 1 << 62                  # never

    def advance(self, pos: int) -> None:
        """The scan reached ``pos``: release everything before its page, populate the window after it."""
        if self.buf is None:
            return
        upto = pos - pos % PAGE
        if self.remote:
            _io.need(self.buf, upto, self.remote)
        if upto > self.kept:
            _madvise(self.buf, _DONTNEED, self.kept, upto - self.kept)
            self.kept = upto
        self.next_at = upto + self.window
        self._populate(upto)

    def _populate(self, at: int) -> None:
        if self.populate and _populate_ok[0] and at < self.end:
            try:
                _madvise(self.buf, _POPULATE_READ, at, min(self.window, self.end - at))
            except (OSError, ValueError):
                _populate_ok[0] = False


PROBE = 2 << 20            # one huge page (a PMD on x86-64 and arm64 with 4 KiB pages)


def huge_backed(buf, pos: int, end: int) -> bool:
    """Whether the file's pages from ``pos`` on come into this map as huge pages: the first whole ``PROBE``
    bytes after ``pos`` are populated and the kernel asked how they are mapped (``rmqverify.huge_share``,
    ``PAGEMAP_SCAN``). A file written in large blocks (``dd bs=4M``, a buffered writer's flushes) sits in the page
    cache in large folios on recent kernels (ext4 from 6.16, xfs), which a map reaches 2 MiB at a time for next to
    nothing; one written a page at a time, or read back after the cache dropped it, sits in small ones, which
    cost about as much to map and unmap as to copy (measured: docs/performance.md). The
    RocketMQ scanner reads the file (``pread``) in the second case and walks the map in the first. False
    wherever it cannot tell (no compiled helper, an older kernel, a buffer too short, a refused populate)."""
    lo = -(-pos // PROBE) * PROBE
    if lo + PROBE > min(end, len(buf)) or not _populate_ok[0] or not isinstance(buf, mmap.mmap):
        return False
    if not _huge:
        from mqtool import native

        _huge.append(getattr(native.load("rmqverify"), "huge_share", None))
    if _huge[0] is None:
        return False
    try:
        _madvise(buf, _POPULATE_READ, lo, PROBE)
    except (OSError, ValueError):
        return False
    share = _huge[0](buf, lo, PROBE)
    return share is not None and share >= 0.5


def release(buf) -> None:
    """Unmap every resident page of a read-only file map (random-access readers call this every ``WINDOW``
    bytes they read, so their RSS stays bounded too; the pages stay in the page cache)."""
    if isinstance(buf, mmap.mmap) and _DONTNEED is not None and len(buf):
        buf.madvise(_DONTNEED)
