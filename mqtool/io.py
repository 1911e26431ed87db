"""Evidence-safe file access: read-only inputs, atomic outputs.

Every input goes through :func:`open_input` / :func:`map_input`; nothing in mqtool opens a store file
for writing. Every output goes through :class:`AtomicWriter` (temp name, fsync, rename) below an output
root (:class:`OutputDir`, from :func:`prepare_output_dir` or :func:`open_output_file`) without following a
link at any component below that root.
"""
from __future__ import annotations

import contextlib
import errno
import io as _io
import mmap
import os
import stat
import sys
from pathlib import Path

from mqtool.errors import InputError, OutputError


def _check_regular(path: Path) -> os.stat_result:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise InputError("no such file", str(path)) from None
    except PermissionError:
        raise InputError("permission denied", str(path)) from None
    except OSError as e:
        raise InputError(f"cannot stat: {e.strerror or e}", str(path)) from None
    if not stat.S_ISREG(st.st_mode):
        kind = "directory" if stat.S_ISDIR(st.st_mode) else "FIFO" if stat.S_ISFIFO(st.st_mode) \
            else "device" if (stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)) else "special file"
        raise InputError(f"not a regular file ({kind})", str(path))
    return st


def is_regular_file(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def open_input(path: str | os.PathLike, need: int | None = None):
    """Open a store file read-only (binary). Never blocks on FIFOs: they are refused up front.
    The shadow of a remote file (:mod:`mqtool.remote`) is read through :class:`_ShadowReader`: every read
    fetches the chunks it covers first, nothing else (``need``, how far the caller will read, is a hint that
    needs no action now)."""
    p = Path(path)
    _check_regular(p)
    shadow = _SHADOW_MARK in str(path) and _remote().is_staged(p)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        try:
            # O_NOATIME: reading evidence does not even touch its access time (allowed for the file's
            # owner or with CAP_FOWNER; otherwise EPERM and we open without it)
            fd = os.open(p, flags | getattr(os, "O_NOATIME", 0))
        except PermissionError:
            if not getattr(os, "O_NOATIME", 0):
                raise
            fd = os.open(p, flags)
    except PermissionError:
        raise InputError("permission denied", str(p)) from None
    except OSError as e:
        raise InputError(f"cannot open: {e.strerror or e}", str(p)) from None
    if shadow:
        return _io.BufferedReader(_ShadowReader(fd, str(p)), 1 << 20)
    return os.fdopen(fd, "rb", buffering=1 << 20)


_SHADOW_MARK = "mqtool-remote-"        # in the path of every shadow of a remote store (mqtool.remote)
_shadow_fds: set[int] = set()          # descriptors open on such shadows: their holes are bytes not fetched yet


def _remote():
    from mqtool import remote

    return remote


def _remote_staged() -> bool:
    """A remote store was staged by this process (without importing mqtool.remote when none was)."""
    m = sys.modules.get("mqtool.remote")
    return m is not None and m.staged()


class _ShadowReader(_io.RawIOBase):
    """A file of a remote store's local shadow, read-only: each read first fetches the chunks of the remote
    file it covers (:func:`mqtool.remote.fill_range`), so a reader of any kind (a probe, a hash, a
    whole-file read) fetches exactly what it reads, chunk by chunk."""

    def __init__(self, fd: int, path: str):
        super().__init__()
        self._fd = fd
        self.name = path
        _shadow_fds.add(fd)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def seek(self, pos: int, whence: int = 0) -> int:
        return os.lseek(self._fd, pos, whence)

    def tell(self) -> int:
        return os.lseek(self._fd, 0, os.SEEK_CUR)

    def readinto(self, b) -> int:
        n = memoryview(b).nbytes
        if n:
            pos = self.tell()
            _remote().fill_range(self.name, pos, pos + n)
        return os.readv(self._fd, [b])

    def close(self) -> None:
        if not self.closed:
            _shadow_fds.discard(self._fd)
            os.close(self._fd)
        super().close()


def pread_input(f, n: int, at: int) -> bytes:
    """Up to ``n`` bytes at ``at`` of an input opened with :func:`open_input`, without moving its position (of a
    remote file's shadow: the chunks of that range are fetched first; a plain ``os.pread`` on its descriptor
    would read holes as zeros)."""
    raw = getattr(f, "raw", None)
    if isinstance(raw, _ShadowReader) and n > 0:
        _remote().fill_range(raw.name, at, at + n)
    return os.pread(f.fileno(), n, at)


def read_input(path: str | os.PathLike, limit: int | None = None) -> bytes:
    """Read a (small) store file whole, read-only. ``limit`` caps how much is read (of a remote file's
    shadow: a probe of at most one chunk is fetched into memory only, :func:`mqtool.remote.peek`)."""
    if limit is not None and _SHADOW_MARK in str(path):
        _check_regular(Path(path))
        data = _remote().peek(path, limit)
        if data is not None:
            return data
    with open_input(path, limit) as f:
        try:
            return f.read() if limit is None else f.read(limit)
        except OSError as e:
            raise InputError(f"read failed: {e.strerror or e}", str(path)) from None


# Files up to this size are read into memory whole: a snapshot that a concurrent truncation cannot turn
# into SIGBUS. Larger files are mapped read-only; see MappedInput.shrunk().
READ_WHOLE_LIMIT = 16 * 1024 * 1024


_guard = None          # mqtool._native.guard once the first map is made (None: not built or switched off)


def _guard_map(mm: mmap.mmap) -> None:
    """Register a new read-only map with the SIGBUS guard (``mqtool/_native/guard.c``): a page that a
    truncation removes while we read reads as zeros instead of killing the process, and the scanners' size
    checks turn it into a ``file-changed`` finding. Unregistered when the map object goes away (records
    decoded lazily may hold the map after its MappedInput is closed). Without the guard (not built, or
    ``MQTOOL_SIGBUS_GUARD=0``) only the checks between records remain."""
    global _guard
    if _guard is None:
        from mqtool import native

        _guard = native.guard()
        if _guard is None:
            return
    slot = _guard.watch(mm)
    if slot >= 0:
        import weakref

        weakref.finalize(mm, _guard.unwatch, slot)


class MappedInput:
    """A read-only view of a whole file: the bytes themselves for small files, mmap(ACCESS_READ) beyond
    :data:`READ_WHOLE_LIMIT`.

    Supports slicing and ``len``; ``close`` releases the map. Use as a context manager. A mapped file that
    is truncated by someone else while we read it would fault (SIGBUS) on the lost pages: scanners call
    :meth:`shrunk` between records and stop cleanly when it says so.
    """

    def __init__(self, path: str | os.PathLike, whole_limit: int | None = None, ranged: bool = False):
        self.path = str(path)
        self._f = open_input(path)
        self._mm = None
        self._faults = 0
        limit = READ_WHOLE_LIMIT if whole_limit is None else whole_limit
        try:
            size = os.fstat(self._f.fileno()).st_size
            self.initial_size = size
            remote = self._f.fileno() in _shadow_fds      # a remote file's shadow (mqtool.remote)
            if size == 0:
                self.buf = b""
            elif size <= limit and not (remote and ranged):     # (a shadow is ours: it is never truncated)
                self.buf = _read_exactly(self._f, size, self.path)
            else:
                if remote and not ranged:
                    # a reader that does not say what it reads gets the whole file (a bounded dump: a
                    # prefix first, mqtool.remote.first_rows), kept while the map lives
                    unpin = _remote().pin(self.path)
                    try:
                        _remote().fill_range(self.path, 0, _remote().MAP_PREFIX[0])
                    except BaseException:
                        unpin()
                        raise
                self._mm = mmap.mmap(self._f.fileno(), 0, access=mmap.ACCESS_READ)
                self.buf = self._mm
                if remote:
                    import weakref
                if remote and ranged:
                    ranged_maps[id(self._mm)] = (weakref.ref(self._mm), self.path)
                    weakref.finalize(self._mm, ranged_maps.pop, id(self._mm), None)
                elif remote:
                    weakref.finalize(self._mm, unpin)
                _guard_map(self._mm)
                self._faults = _guard.faults() if _guard is not None else 0
        except OSError as e:
            self._f.close()
            raise InputError(f"cannot map: {e.strerror or e}", self.path) from None
        except BaseException:
            self._f.close()
            raise

    def need(self, pos: int, n: int) -> None:
        """The reader is about to read ``[pos, pos + n)``: see :func:`need`."""
        need(self.buf, pos, n)

    def need_unit(self, pos: int, length_at: int = 0, extra: int = 0, cap: int | None = None) -> None:
        """The reader is about to read the unit at ``pos``: see :func:`need_unit`."""
        need_unit(self.buf, pos, length_at, extra, cap)

    def faulted(self) -> bool:
        """True when a lost page of some guarded map was read (as zeros) since the previous call (or since
        this file was mapped) and this file is now shorter than its map: what was read since that call may
        hold those zeros."""
        if self._mm is None or _guard is None:
            return False
        n = _guard.faults()
        if n == self._faults:
            return False
        self._faults = n
        return self.shrunk()

    @property
    def mapped(self) -> bool:
        return self._mm is not None

    def fileno(self) -> int:
        return self._f.fileno()

    def current_size(self) -> int:
        try:
            return os.fstat(self._f.fileno()).st_size
        except (OSError, ValueError):
            return -1

    def shrunk(self) -> bool:
        """True when the file on disk is now shorter than what we map (reading on would fault)."""
        return self._mm is not None and self.current_size() < len(self._mm)

    def changed(self) -> bool:
        """True when the file's size on disk differs from the size we started with."""
        return self.current_size() != self.initial_size

    def __len__(self) -> int:
        return len(self.buf)

    def close(self) -> None:
        """Close the file; the mapping itself is released when the last reference to it goes away, so
        records decoded lazily from it (bodies, properties) stay valid while someone holds them."""
        self._mm = None
        self.buf = b""
        self._f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _read_exactly(f, size: int, path: str) -> bytes:
    """Read up to ``size`` bytes (fewer if the file shrank meanwhile: what was there is what we got)."""
    parts, got = [], 0
    while got < size:
        try:
            chunk = f.read(size - got)
        except OSError as e:
            raise InputError(f"read failed: {e.strerror or e}", path, got) from None
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


_ZERO_CHUNK = 1 << 20
_ZEROS = bytes(_ZERO_CHUNK)
_TAIL_PEEK = 64 << 10     # last_nonzero's first look at the end of the data


def _data_start(fd: int | None, pos: int, end: int) -> int:
    """Next position >= pos that is not inside a hole of a sparse file (``end`` when only holes follow).
    Without an fd or SEEK_DATA support, or on a remote file's shadow (holes: not fetched yet): ``pos``."""
    if fd is None or not hasattr(os, "SEEK_DATA") or fd in _shadow_fds:
        return pos
    try:
        d = os.lseek(fd, pos, os.SEEK_DATA)
    except OSError as e:
        return end if e.errno == errno.ENXIO else pos
    return min(max(d, pos), end)


def _last_data_end(fd: int | None, start: int, end: int) -> int:
    """End of the last data region of a sparse file that begins before ``end`` (``end`` when unknown)."""
    if fd is None or not hasattr(os, "SEEK_HOLE") or fd in _shadow_fds:
        return end
    p, last = start, start
    try:
        for _ in range(4096):
            try:
                d = os.lseek(fd, p, os.SEEK_DATA)
            except OSError as e:
                if e.errno == errno.ENXIO:
                    return last
                return end
            if d >= end:
                return last
            h = os.lseek(fd, d, os.SEEK_HOLE)
            last = min(h, end)
            if h >= end:
                return last
            p = h
    except OSError:
        return end
    return end


def data_end(fd: int, size: int) -> int:
    """End of the last data region of a file of ``size`` bytes: ``size`` unless it ends in a hole of a sparse
    file (found with SEEK_HOLE, nothing read)."""
    return _last_data_end(fd, 0, size)


def first_nonzero(buf, start: int, end: int, fd: int | None = None) -> int:
    """Position of the first non-zero byte in ``buf[start:end]``, or -1.

    Compares 1 MiB chunks against zeros (C speed) and, given the file descriptor of a sparse file,
    jumps over its holes with SEEK_DATA without touching them: a 2 GiB hole costs one system call.
    A ranged map of a remote file (:func:`need`) is fetched as far as it is searched.
    """
    if ranged(buf):
        def read(p: int, q: int):
            need(buf, p, q - p)
            return buf[p:q]
    else:
        def read(p: int, q: int):
            return buf[p:q]
    return _first_nonzero_read(read, fd, start, end)


def _first_nonzero_read(read, fd: int | None, start: int, end: int) -> int:
    """The search of :func:`first_nonzero` and :func:`first_nonzero_in`: ``read(p, q)`` gives the bytes
    ``[p, q)`` (fewer at the end of the input, none past it)."""
    p = start
    while p < end:
        p = _data_start(fd, p, end)
        if p >= end:
            return -1
        chunk = read(p, min(end, p + _ZERO_CHUNK))
        if not chunk:
            return -1
        if chunk != _ZEROS[:len(chunk)]:
            return p + (len(chunk) - len(chunk.lstrip(b"\x00")))
        p += len(chunk)
    return -1


def last_nonzero(buf, start: int, end: int, fd: int | None = None) -> int:
    """Position of the last non-zero byte in ``buf[start:end]``, or -1 (chunked, from the end).

    Data usually ends with non-zero bytes: the last :data:`_TAIL_PEEK` bytes before the end of the data (the
    last data region of a sparse file) are looked at first; only when they are all zero is the range searched
    from its first non-zero byte on, a chunk at a time (a queue file's mostly empty first MiB is not copied)."""
    tail = _last_data_end(fd, start, end)
    p = max(start, tail - _TAIL_PEEK)
    if p < tail:
        if ranged(buf):
            need(buf, p, tail - p)
        chunk = buf[p:tail]
        if chunk != _ZEROS[:tail - p]:
            return p + len(chunk.rstrip(b"\x00")) - 1
    first = first_nonzero(buf, start, end, fd)
    if first < 0:
        return -1
    q = max(first + 1, _last_data_end(fd, first, end))
    fetch = ranged(buf)
    while q > first:
        p = max(first, q - _ZERO_CHUNK)
        if fetch:
            need(buf, p, q - p)
        chunk = buf[p:q]
        if chunk != _ZEROS[:q - p]:
            return p + len(chunk.rstrip(b"\x00")) - 1
        q = p
    return first


def first_nonzero_in(f, start: int, end: int) -> int:
    """:func:`first_nonzero` of the input ``f`` (from :func:`open_input`) read with ``pread`` a chunk at a time:
    nothing is mapped (the file may be larger than the address space allows), and the holes of a sparse file are
    jumped over with SEEK_DATA, unread. -1 when ``[start, end)`` holds only zeros (or the file ends before)."""
    return _first_nonzero_read(lambda p, q: pread_input(f, q - p, p), f.fileno(), start, end)


def map_input(path: str | os.PathLike, whole_limit: int | None = None, ranged: bool = False) -> MappedInput:
    """``ranged=True``: the reader says which bytes it reads before it reads them (a
    :class:`mqtool.pages.PageWindow` over the map, :func:`need` for the rest), so a remote file is fetched
    only there; without it a remote file is fetched whole before it is mapped. Local files: no difference."""
    return MappedInput(path, whole_limit, ranged)


# ---- remote files read by ranges ---------------------------------------------------------------------------
#
# A map of a remote file's shadow made with ranged=True reads zeros wherever nothing was fetched yet (the
# shadow is sparse; mmap cannot trap the first touch of a page here: no userfaultfd). Its reader therefore says
# which window it is about to read: PageWindow does for sequential scans, need() for point reads and searches.

# id(map) -> (weak reference to it, path of the shadow file); empty unless a ranged map of a remote file is open,
# so a hot loop may test it before calling need() and pay nothing on local stores
ranged_maps: dict[int, tuple] = {}


def need(buf, pos: int, n: int) -> None:
    """The reader of ``buf`` is about to read ``buf[pos:pos + n]``: when ``buf`` is a ranged map of a remote
    file (:func:`map_input`), the chunks of that range not fetched yet are fetched first. Anything else
    (bytes, a local map): nothing to do, at the cost of one dictionary test."""
    if ranged_maps:
        e = ranged_maps.get(id(buf))
        if e is not None and e[0]() is buf:
            _remote().fill_range(e[1], pos, pos + n)


def need_unit(buf, pos: int, length_at: int = 0, extra: int = 0, cap: int | None = None) -> None:
    """The reader of ``buf`` is about to read the unit at ``pos`` whose length is the big-endian 32-bit field
    at ``pos + length_at`` (the unit spans that length plus ``extra`` bytes, at most ``cap`` when given: a
    reader refuses longer units without reading them): :func:`need` its length field, then the unit."""
    if ranged(buf):
        head = length_at + 4
        need(buf, pos, head)
        n = int.from_bytes(buf[pos + length_at:pos + head], "big") + extra
        need(buf, pos, max(head, n if cap is None else min(n, cap)))


def ranged(buf) -> bool:
    """``buf`` is a ranged map of a remote file (its reader must call :func:`need`)."""
    if not ranged_maps:
        return False
    e = ranged_maps.get(id(buf))
    return e is not None and e[0]() is buf


def hold(buf, pos: int = 0, n: int | None = None) -> None:
    """What is fetched of ``buf[pos:pos + n]`` (``n`` None: of all of it), a ranged map of a remote file, stays
    fetched while the map lives (for a reader that asks for a region once (:func:`need`) and reads in it
    later, as an index file's view does: nothing of it is evicted meanwhile). Anything else: nothing to do."""
    if ranged(buf):
        unpin = _remote().pin(ranged_maps[id(buf)][1], pos, None if n is None else pos + n)
        if unpin is not None:
            import weakref

            weakref.finalize(buf, unpin)


# ---- outputs ------------------------------------------------------------------------------------------------
#
# Every output lies below an *output root*: the --out / --to / --salvage-out directory, or the directory of a
# single output file (report -o, --manifest). The path up to the root is the user's and is checked with
# realpath against every input tree. Below the root nothing is followed: each directory is opened relative to
# its parent's descriptor with O_NOFOLLOW (and re-checked: its real path is the one we built, in no input
# tree); each file is written under a fresh temporary name created with O_EXCL|O_NOFOLLOW, fsynced and renamed
# into place, and a rename replaces a link instead of writing through it. ``--force`` replaces a link found
# in the way (a directory link is removed and a real directory made); it never follows one.

_O_DIR = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_O_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_NOT_A_DIR = {errno.ELOOP, errno.ENOTDIR, errno.EMLINK}      # what opening a link or file as a directory gives
TEMP_PREFIX = ".mqtool-tmp-"
_MAX_OPEN_DIRS = 64


def _real(p) -> str:
    return os.path.realpath(os.fspath(p))


def _inside(child: str, parent: str) -> bool:
    """``child`` is ``parent`` or lies below it (both real paths)."""
    return child == parent or child.startswith(parent.rstrip(os.sep) + os.sep)


def _input_trees(inputs) -> list[tuple[str, str]]:
    """(as given, real path) of every input tree; an input file stands for its directory."""
    out = []
    for inp in inputs:
        shown, real = str(inp), _real(inp)
        if os.path.isfile(real):
            shown, real = str(Path(inp).parent), os.path.dirname(real)
        out.append((shown, real))
    return out


def _temp_name() -> str:
    return TEMP_PREFIX + os.urandom(8).hex()     # (not secrets: it loads OpenSSL's _hashlib)


def _lstat_at(name: str, dfd: int) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _check_name(name: str, where: str) -> None:
    if name in ("", ".", "..") or "/" in name or "\x00" in name:
        raise OutputError(f"refusing an output name that is not one plain path component: {name!r}", where)


class OutputDir:
    """An output root, opened once, and the way to create anything below it without following links.

    ``inputs`` are the input trees nothing may be written into; ``force`` lets a link found where a
    directory is needed be replaced by a real directory (without ``force`` it is refused).
    ``may_contain_inputs``: the root of a single output file may be a directory that holds an input
    (``report.html`` next to ``store/``); a directory root may not.
    """

    def __init__(self, path: str | os.PathLike, inputs=(), force: bool = False, *,
                 may_contain_inputs: bool = False):
        self.path = Path(path)
        self.force = force
        self.real = _real(path)
        self._trees = _input_trees(inputs)
        self._may_contain = may_contain_inputs
        self._fds: dict[tuple[str, ...], int] = {}
        try:
            fd = os.open(self.real, _O_DIR)
        except OSError as e:
            raise OutputError(f"cannot open output directory: {e.strerror or e}", str(self.path)) from None
        self._fds[()] = fd
        self._recheck((), fd)

    def _where(self, rel) -> str:
        return os.path.join(self.real, *rel)

    def _recheck(self, rel: tuple[str, ...], fd: int) -> None:
        """The directory open at ``fd`` is the one at its real path, and in no input tree."""
        where = self._where(rel)
        try:
            same = os.path.realpath(where) == where and \
                os.path.samestat(os.fstat(fd), os.stat(where, follow_symlinks=False))
        except OSError:
            same = False
        if not same:
            raise OutputError("output directory changed while writing (a link or another directory took its place)",
                              where)
        for shown, tree in self._trees:
            if _inside(where, tree) or (_inside(tree, where) and not (rel == () and self._may_contain)):
                raise OutputError(f"refusing to write inside the input tree {shown}", where)

    def dir_fd(self, rel: tuple[str, ...] = ()) -> int:
        """Descriptor of the directory ``rel`` below the root, created as needed (valid until the next call)."""
        rel = tuple(rel)
        fd = self._fds.get(rel)
        if fd is not None:
            return fd
        parent = self.dir_fd(rel[:-1])
        fd = self._open_dir(parent, rel)
        try:
            self._recheck(rel, fd)
        except BaseException:
            os.close(fd)
            raise
        if len(self._fds) >= _MAX_OPEN_DIRS:        # bounded: many partitions must not exhaust descriptors
            for k in [k for k in self._fds if k]:
                os.close(self._fds.pop(k))
        self._fds[rel] = fd
        return fd

    def _open_dir(self, parent: int, rel: tuple[str, ...]) -> int:
        name, where = rel[-1], self._where(rel)
        _check_name(name, where)
        for _ in range(4):
            try:
                return os.open(name, _O_DIR, dir_fd=parent)
            except FileNotFoundError:
                try:
                    os.mkdir(name, 0o777, dir_fd=parent)
                except FileExistsError:
                    pass
                except OSError as e:
                    raise OutputError(f"cannot create output directory: {e.strerror or e}", where) from None
                continue
            except OSError as e:
                if e.errno not in _NOT_A_DIR:
                    raise OutputError(f"cannot open output directory: {e.strerror or e}", where) from None
            st = _lstat_at(name, parent)
            if st is None:
                continue
            if not stat.S_ISLNK(st.st_mode):
                raise OutputError("output exists and is not a directory", where)
            if not self.force:
                raise OutputError("a symbolic link stands where an output directory goes; refusing to follow it "
                                  "(--force replaces the link)", where)
            os.unlink(name, dir_fd=parent)          # the link itself, never what it points at
        raise OutputError("cannot create output directory (it keeps changing)", where)

    def atomic(self, rel: str | os.PathLike, overwrite: bool | None = None, mode: int | None = None,
               batch: "WriteBatch | None" = None) -> "AtomicWriter":
        """An :class:`AtomicWriter` for the file ``rel`` below the root (``overwrite`` defaults to force);
        with ``batch`` its fsync and rename are the batch's (:class:`WriteBatch`)."""
        return AtomicWriter(self.path / rel, self.force if overwrite is None else overwrite, root=self, mode=mode,
                            batch=batch)

    def write(self, rel: str | os.PathLike, data: bytes, overwrite: bool | None = None) -> None:
        with self.atomic(rel, overwrite) as f:
            f.write(data)

    def scratch_dir(self) -> Path:
        """A new private directory below the root (for an engine that writes by path, e.g. Spark); remove it
        with :meth:`remove_scratch`."""
        root = self.dir_fd(())
        for _ in range(100):
            name = _temp_name()
            try:
                os.mkdir(name, 0o700, dir_fd=root)
            except FileExistsError:
                continue
            return Path(self.real) / name
        raise OutputError("cannot create a scratch directory", str(self.path))

    def remove_scratch(self, path: Path) -> None:
        import shutil

        try:
            shutil.rmtree(Path(path).name, dir_fd=self.dir_fd(()))
        except FileNotFoundError:
            pass

    def move_tree_in(self, src: str | os.PathLike, rel: tuple[str, ...] = (), skip=lambda name: False) -> None:
        """Move the entries of the scratch directory ``src`` to ``rel`` below the root, merging directories.
        Something already at a file's place (a link included) is replaced only with force; a link where a
        directory goes is treated as in :meth:`dir_fd`."""
        dfd = os.dup(self.dir_fd(rel))
        try:
            for entry in sorted(os.scandir(src), key=lambda e: e.name):
                if skip(entry.name):
                    continue
                if entry.is_dir(follow_symlinks=False):
                    self.move_tree_in(entry.path, rel + (entry.name,), skip)
                    continue
                st = _lstat_at(entry.name, dfd)
                if st is not None:
                    where = self._where(rel + (entry.name,))
                    if stat.S_ISDIR(st.st_mode):
                        raise OutputError("output is a directory", where)
                    _refuse_special(st, where)
                    if not self.force:
                        raise OutputError("file exists (use --force to overwrite)", where)
                os.replace(entry.path, entry.name, dst_dir_fd=dfd)
            _fsync_fd(dfd)
        finally:
            os.close(dfd)

    def replace_entries_in(self, src: str | os.PathLike, rel: tuple[str, ...] = ()) -> None:
        """Move each entry of the scratch directory ``src`` to ``rel`` below the root, replacing whatever is at
        its name as a whole (a directory tree, a file or a link: removed, never followed; only with force)."""
        if not os.path.isdir(src):
            return
        dfd = os.dup(self.dir_fd(rel))
        try:
            for entry in sorted(os.scandir(src), key=lambda e: e.name):
                st = _lstat_at(entry.name, dfd)
                if st is not None:
                    if not self.force:
                        raise OutputError("exists (use --force to replace it)", self._where(rel + (entry.name,)))
                    if stat.S_ISDIR(st.st_mode):
                        import shutil

                        shutil.rmtree(entry.name, dir_fd=dfd)      # the fd-based walk: links are not followed
                    else:
                        os.unlink(entry.name, dir_fd=dfd)
                os.replace(entry.path, entry.name, dst_dir_fd=dfd)
            _fsync_fd(dfd)
        finally:
            os.close(dfd)

    def close(self) -> None:
        for fd in self._fds.values():
            try:
                os.close(fd)
            except OSError:
                pass
        self._fds.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()


def _refuse_special(st: os.stat_result, where: str) -> None:
    """An output's place holds a device, FIFO or socket: refused even with --force (the rename would put a
    regular file in place of, say, /dev/null: ``report -o /dev/null --force`` replaced the device node)."""
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
        raise OutputError("output is a device, FIFO or socket, not a file: not replaced (give a file name)", where)


def prepare_output_dir(out: str | os.PathLike, inputs: list[str | os.PathLike], force: bool) -> OutputDir:
    """Check (and create) an output directory; everything below it is written through the returned
    :class:`OutputDir`.

    Refuses a directory inside (or equal to, or containing) any input tree, and a non-empty directory
    unless ``force``.
    """
    outp = Path(out)
    real = _real(outp)
    for shown, tree in _input_trees(inputs):
        if _inside(real, tree) or _inside(tree, real):
            raise OutputError(f"refusing to write inside the input tree {shown}", str(outp))
    if os.path.lexists(outp):
        if not outp.is_dir():
            raise OutputError("output exists and is not a directory", str(outp))
        if any(outp.iterdir()) and not force:
            raise OutputError("output directory is not empty (use --force to overwrite)", str(outp))
    else:
        try:
            outp.mkdir(parents=True)
        except OSError as e:
            raise OutputError(f"cannot create output directory: {e.strerror or e}", str(outp)) from None
    return OutputDir(outp, inputs, force)


def prepare_output_file(out: str | os.PathLike, inputs: list[str | os.PathLike], force: bool) -> Path:
    """Check the target of a single output file (e.g. an HTML report).

    Unlike :func:`prepare_output_dir`, the file may be written into a directory that *contains* an input
    (``report.html`` next to ``store/``): one new file there cannot touch the input. Refused: a file inside
    (or equal to) an input tree, a directory, and an existing file (a link included) unless ``force``, which
    replaces it (a link is replaced, never followed). Creates the parent.
    """
    outp = Path(out)
    if outp.name in ("", ".", ".."):
        raise OutputError("give a file name", str(outp))
    where = os.path.join(_real(outp.parent), outp.name)
    for inp in inputs:
        if os.path.isfile(_real(inp)) and _real(inp) == where:
            raise OutputError("refusing to overwrite an input file", str(outp))
    for shown, tree in _input_trees(inputs):
        if _inside(where, tree):
            raise OutputError(f"refusing to write inside the input tree {shown}", str(outp))
    if os.path.isdir(outp) and not os.path.islink(outp):
        raise OutputError("output is a directory; give a file name", str(outp))
    if os.path.lexists(outp) and not force:
        raise OutputError("file exists (use --force to overwrite)", str(outp))
    try:
        outp.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OutputError(f"cannot create output directory: {e.strerror or e}", str(outp.parent)) from None
    return outp


SALVAGE_FILE_NAME = "salvaged-messages.ndjson"


def salvage_target(out: str | os.PathLike) -> Path:
    """OUT of ``--salvage-out``: the file :data:`SALVAGE_FILE_NAME` inside OUT when OUT is a directory or has
    no suffix (and is no stream: ``/dev/stdout``), else OUT itself."""
    outp = Path(out)
    return outp / SALVAGE_FILE_NAME if outp.is_dir() or not (outp.suffix or _is_stream(outp)) else outp


def open_salvage_file(out: str | os.PathLike, inputs: list[str | os.PathLike], force: bool) -> "AtomicWriter":
    """The writer of ``verify --salvage-out OUT``, the same rule for every family: the file of
    :func:`salvage_target`, then the rule of :func:`prepare_output_file` (refused inside an input tree or over an
    input file, over an existing file unless ``force``; a directory that merely contains the store, ``case/`` for
    ``case/evidence``, is fine), written link-safely."""
    return open_output_file(salvage_target(out), inputs, force)


def _own_descriptor(path: str | os.PathLike) -> int | None:
    """N when ``path`` names this process's open descriptor N: ``/dev/fd/N``, ``/proc/self/fd/N`` (or this
    process's pid, or a thread's), or a link leading there (``/dev/stdout`` is one to ``/proc/self/fd/1``); else
    None. Links are followed one at a time, as far as the descriptor's own entry (not to what it is open on)."""
    p = os.path.abspath(os.fspath(path))
    for _ in range(40):
        head, name = os.path.split(p)
        p = os.path.join(os.path.realpath(head), name)
        parts = p.split(os.sep)     # ['', 'proc', PID, ('task', TID,) 'fd', N]
        if name.isdigit() and parts[-2] == "fd" and len(parts) in (5, 7) and parts[1] == "proc" \
                and parts[2] == str(os.getpid()) and (len(parts) == 5 or parts[3] == "task"):
            return int(name)
        try:
            target = os.readlink(p)
        except OSError:
            return None
        p = os.path.join(head, target)
    return None


def _stream_stat(out: str | os.PathLike) -> os.stat_result | None:
    """What ``out`` leads to when that is a character device, FIFO or socket; else None."""
    try:
        st = os.stat(out)
    except (OSError, ValueError):
        return None
    return st if stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode) or stat.S_ISSOCK(st.st_mode) else None


def _is_stream(out: str | os.PathLike) -> bool:
    return _own_descriptor(out) is not None or _stream_stat(out) is not None


def stream_output(out: str | os.PathLike, inputs=()) -> "StreamWriter | None":
    """The writer of an output that is a stream, not a file, or None when ``out`` is a file's place.

    A stream: one of this process's open descriptors (``/dev/stdout``, ``/dev/stderr``, ``/dev/fd/N``: what the
    shell opened for ``>``, ``|`` or ``3>``), or a character device, FIFO or socket, or a link to one
    (``/dev/null``, a named pipe). It is written in place as it is: no temporary file, no rename, nothing
    replaced, so ``--force`` is not needed. A descriptor open on a file inside an input tree, or on an input
    file, is refused. Everything else (a regular file, also behind a link; a directory; a block device;
    nothing yet) is left to the file rules of :func:`prepare_output_file` and :class:`AtomicWriter`."""
    fd = _own_descriptor(out)
    if fd is not None:
        try:
            st = os.fstat(fd)
        except OSError:
            raise OutputError(f"descriptor {fd} is not open", str(out)) from None
        if stat.S_ISREG(st.st_mode):
            real = os.path.realpath(f"/proc/self/fd/{fd}")
            for inp in inputs:
                if _real(inp) == real:
                    raise OutputError("refusing to overwrite an input file", str(out))
            for shown, tree in _input_trees(inputs):
                if _inside(real, tree):
                    raise OutputError(f"refusing to write inside the input tree {shown}", str(out))
        return StreamWriter(out, fd)
    return StreamWriter(out) if _stream_stat(out) is not None else None


class StreamWriter:
    """Writes a stream output (see :func:`stream_output`) in place: a duplicate of the descriptor ``fd``, or
    ``path`` opened for writing without creating or truncating anything. ``with ... as f``, as
    :class:`AtomicWriter`; a failed run cannot take back what a stream was given."""

    def __init__(self, path: str | os.PathLike, fd: int | None = None, names_inputs: bool = True):
        self.path = Path(path)
        self.fd = fd
        self._names_inputs = names_inputs
        self._f = None

    def __enter__(self):
        try:
            if self.fd is not None:
                for std in (sys.stdout, sys.stderr):      # what was printed there first comes first
                    if std is not None and getattr(std, "fileno", None) and not std.closed:
                        try:
                            if std.fileno() == self.fd:
                                std.flush()
                        except (OSError, ValueError, AttributeError):
                            pass
                fd = os.dup(self.fd)
            else:
                fd = os.open(self.path, os.O_WRONLY | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
        except OSError as e:
            raise OutputError(f"cannot write: {e.strerror or e}", str(self.path)) from None
        self._f = os.fdopen(fd, "wb")
        if self._names_inputs and _remote_staged():
            self._f = _remote().ShownFile(self._f)
        return self._f

    def __exit__(self, exc_type, exc, tb):
        try:
            self._f.close()
        except OSError as e:
            if exc_type is None:
                raise OutputError(f"cannot write: {e.strerror or e}", str(self.path)) from None
        return False


def open_output_file(out: str | os.PathLike, inputs: list[str | os.PathLike], force: bool,
                     mode: int | None = None) -> "AtomicWriter | StreamWriter":
    """:func:`prepare_output_file`, then the :class:`AtomicWriter` that writes it (``with ... as f``); a
    stream (:func:`stream_output`: ``/dev/stdout``, ``/dev/null``, a named pipe) gets a :class:`StreamWriter`."""
    stream = stream_output(out, inputs)
    if stream is not None:
        return stream
    target = prepare_output_file(out, inputs, force)
    root = OutputDir(target.parent, inputs, force, may_contain_inputs=True)
    return AtomicWriter(target, overwrite=force, root=root, mode=mode, own_root=True, names_inputs=True)


def current_umask() -> int:
    """This process's umask, read without changing it where the system tells it (Linux ``/proc``)."""
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    old = os.umask(0o022)       # elsewhere: set and restore (not thread-safe, but brief)
    os.umask(old)
    return old


class AtomicWriter:
    """Write a file under a temporary name in the target directory, fsync, then rename.

    An interrupted run leaves at most a ``.mqtool-tmp-*`` file, never a half-written file under the final
    name. ``overwrite=False`` refuses an existing target (a link included); ``overwrite=True`` replaces it
    (a link is replaced, not followed). ``root``: the :class:`OutputDir` the path lies below (no link below
    it is followed); without one, the file's own directory is the root. ``mode``: permissions to give the
    file; by default those of the umask, as a plain ``open()`` would give it. ``batch``: a :class:`WriteBatch`
    that makes the file durable and renames it into place later, with the others it holds.
    """

    def __init__(self, path: str | os.PathLike, overwrite: bool = False, root: OutputDir | None = None,
                 mode: int | None = None, own_root: bool = False, names_inputs: bool = False,
                 batch: "WriteBatch | None" = None):
        self.path = Path(path)
        self._batch = batch
        self._names_inputs = names_inputs      # text that names input files: remote ones by their URL
        self.overwrite = overwrite
        self.mode = mode if mode is not None else batch.mode if batch is not None else 0o666 & ~current_umask()
        self._root = root
        self._own_root = own_root or root is None
        self._dfd: int | None = None
        self._tmp: str | None = None
        self._f = None

    def _locate(self) -> tuple[OutputDir, tuple[str, ...]]:
        if self._root is None:
            try:    # the path up to the file's directory is the user's own
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise OutputError(f"cannot create output directory: {e.strerror or e}", str(self.path.parent)) \
                    from None
            self._root = OutputDir(self.path.parent)
            return self._root, (self.path.name,)
        try:
            rel = self.path.relative_to(self._root.path).parts
        except ValueError:
            rel = ()
        if not rel:
            raise OutputError("output file is not below its output directory", str(self.path))
        return self._root, rel

    def __enter__(self):
        try:
            root, rel = self._locate()
            self._rel = rel
            self._name = name = rel[-1]
            _check_name(name, str(self.path))
            self._dfd = os.dup(root.dir_fd(rel[:-1]))
            st = _lstat_at(name, self._dfd)
            if st is not None:
                if stat.S_ISDIR(st.st_mode):
                    raise OutputError("output is a directory; give a file name", str(self.path))
                _refuse_special(st, str(self.path))
                if not self.overwrite:
                    raise OutputError("file exists (use --force to overwrite)", str(self.path))
            for _ in range(100):
                tmp = _temp_name()
                try:
                    fd = os.open(tmp, _O_NEW, 0o600, dir_fd=self._dfd)
                except FileExistsError:      # taken (a link planted there included): another name
                    continue
                self._tmp = tmp
                break
            else:
                raise OutputError("cannot create a temporary file", str(self.path.parent))
        except OSError as e:
            self._release()
            raise OutputError(f"cannot write: {e.strerror or e}", str(self.path)) from None
        except BaseException:
            self._release()
            raise
        self._f = os.fdopen(fd, "wb")
        if self._names_inputs and _remote_staged():
            self._f = _remote().ShownFile(self._f)     # a remote store: its URL, not its local shadow
        return self._f

    def __exit__(self, exc_type, exc, tb):
        f, dfd, batch = self._f, self._dfd, self._batch
        try:
            if exc_type is None:
                f.flush()
                os.fchmod(f.fileno(), self.mode)
                if batch is None:
                    os.fsync(f.fileno())
                else:
                    start_writeback(f.fileno())     # the disk starts now; the batch's flush waits less
            f.close()
            if exc_type is None and batch is not None:
                batch._add(self)                    # complete under its temporary name: the batch publishes it
            elif exc_type is None:
                self._publish()
                _fsync_fd(dfd)
            else:
                os.unlink(self._tmp, dir_fd=dfd)
        except BaseException as e:
            try:
                os.unlink(self._tmp, dir_fd=dfd)
            except OSError:
                pass
            self._release()
            if isinstance(e, OSError):
                raise OutputError(f"cannot write: {e.strerror or e}", str(self.path)) from None
            raise
        self._release()
        return False

    def _publish(self) -> None:
        dfd, tmp, name = self._dfd, self._tmp, self._name
        if self.overwrite:
            os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
            return
        try:        # a hard link never replaces: what appeared at the name meanwhile is kept
            os.link(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd, follow_symlinks=False)
        except FileExistsError:
            raise OutputError("file exists (use --force to overwrite)", str(self.path)) from None
        except OSError as e:
            if e.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK, errno.ENOSYS):
                raise
            if _lstat_at(name, dfd) is not None:    # a filesystem without hard links: check, then rename
                raise OutputError("file exists (use --force to overwrite)", str(self.path)) from None
            os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
            return
        os.unlink(tmp, dir_fd=dfd)

    def _release(self) -> None:
        if self._dfd is not None:
            os.close(self._dfd)
            self._dfd = None
        if self._own_root and self._root is not None:
            self._root.close()


def _fsync_fd(fd: int) -> None:
    try:
        os.fsync(fd)
    except OSError:
        pass


class WriteBatch:
    """Many files below one :class:`OutputDir`, each atomic and durable as with :class:`AtomicWriter`, with
    one flush for all of them instead of two per file (its data, then its directory): thousands of small
    outputs (a Kafka log dir's segment indexes, a RocketMQ store's consumequeue files) spent their time
    waiting for the disk.

    Files given ``batch=self`` (:meth:`OutputDir.atomic`, :meth:`write`) are written complete under their
    temporary names and closed, nothing published. :meth:`commit` then, in this order: makes every one's data
    durable (``syncfs(2)`` of the output filesystem where there are many, else an fsync per file), renames
    each into place (replacing or refusing as its writer was told), and makes the directories durable (an
    fsync of each, or one more ``syncfs``). So a final name only ever shows a complete file, whatever the moment
    of a crash; before the commit only ``.mqtool-tmp-*`` names exist. A batch commits by itself once it holds
    ``limit`` files (bounded: temporary files and what is remembered of them). :meth:`abort` removes the
    temporary files not published. As a context manager: commit at the end, also after an error (the files
    written before it are complete, as they were when each was published at once; the error goes on).

    ``lock``: held around everything that touches the output root's directory cache (shared with writers that
    create files in other threads); :meth:`commit` holds it throughout. ``syncfs_from``: the number of files
    from which one ``syncfs`` is cheaper than an fsync each (it also flushes whatever else is dirty on that
    filesystem, so a few files are fsynced one by one)."""

    def __init__(self, out: OutputDir, limit: int = 4096, lock=None, syncfs_from: int = 16):
        import threading    # (here: io.py is imported by every command)

        self.out, self.limit, self.syncfs_from = out, max(1, limit), syncfs_from
        self._lock = lock if lock is not None else threading.RLock()
        self._pending: list[AtomicWriter] = []
        self.committed = 0
        self.mode = 0o666 & ~current_umask()     # the files' permissions, as a plain open() gives (read once)

    def write(self, rel: str | os.PathLike, data, overwrite: bool | None = None) -> None:
        """``data`` as the file ``rel`` below the root, published at the next commit."""
        with self._lock:
            w = self.out.atomic(rel, overwrite, batch=self)
            f = w.__enter__()
        try:
            f.write(data)
        except BaseException as e:
            w.__exit__(type(e), e, e.__traceback__)
            raise
        w.__exit__(None, None, None)

    def _add(self, w: AtomicWriter) -> None:
        with self._lock:
            self._pending.append(w)
            if len(self._pending) >= self.limit:
                self.commit()

    def commit(self) -> None:
        """Publish every file written so far (see the class); on an error the ones not renamed yet are
        removed and the error is raised (as an :class:`OutputError` for an I/O error)."""
        with self._lock:
            pending, self._pending = self._pending, []
            if not pending:
                return
            done = 0
            try:
                synced = len(pending) >= self.syncfs_from and _syncfs(self.out.dir_fd(()))
                if not synced:
                    for w in pending:
                        with _Reopened(self.out, w) as fd:
                            os.fsync(fd)
                dirs: dict[tuple[str, ...], None] = {}
                for w in pending:
                    rel = w._rel[:-1]
                    w._dfd = os.dup(self.out.dir_fd(rel))
                    try:
                        w._publish()
                    finally:
                        os.close(w._dfd)
                        w._dfd = None
                    done += 1
                    dirs[rel] = None
                if not (synced and len(dirs) >= self.syncfs_from and _syncfs(self.out.dir_fd(()))):
                    for rel in dirs:
                        _fsync_fd(self.out.dir_fd(rel))
            except BaseException as e:
                self._drop(pending[done:])
                if isinstance(e, OSError):
                    raise OutputError(f"cannot write: {e.strerror or e}", str(pending[done].path)) from None
                raise
            self.committed += len(pending)

    def abort(self) -> None:
        """Remove the temporary files of everything not committed."""
        with self._lock:
            pending, self._pending = self._pending, []
            self._drop(pending)

    def _drop(self, writers) -> None:
        for w in writers:
            try:
                os.unlink(w._tmp, dir_fd=self.out.dir_fd(w._rel[:-1]))
            except OSError:
                pass

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.commit()
            return False
        try:
            self.commit()
        except BaseException:           # noqa: BLE001 - the first error is the one to report (commit dropped the rest)
            pass
        return False


class _Reopened:
    """A read-only descriptor of a batched writer's temporary file (to fsync it), by name in its directory."""

    def __init__(self, out: OutputDir, w: AtomicWriter):
        self.out, self.w = out, w

    def __enter__(self) -> int:
        self.fd = os.open(self.w._tmp, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0),
                          dir_fd=self.out.dir_fd(self.w._rel[:-1]))
        return self.fd

    def __exit__(self, *exc):
        os.close(self.fd)


def start_writeback(fd: int, offset: int = 0, length: int = 0) -> None:
    """Ask the kernel to start writing ``length`` bytes (0: to the end) of the file open at ``fd`` from
    ``offset`` to disk now, without waiting (Linux: ``posix_fadvise(DONTNEED)`` starts writeback of the dirty
    pages, like ``sync_file_range(SYNC_FILE_RANGE_WRITE)``; pages already clean may leave the page cache).
    Durability still needs an fsync (or :class:`WriteBatch`); this only makes that wait shorter."""
    try:
        os.posix_fadvise(fd, offset, length, os.POSIX_FADV_DONTNEED)
    except (AttributeError, OSError):
        pass


_syncfs_fn = None


def _syncfs(fd: int) -> bool:
    """``syncfs(2)`` of the filesystem holding ``fd`` (Linux): every dirty page and inode of it written and the
    device cache flushed. False where the call does not exist; an OSError when it reports a write error."""
    global _syncfs_fn
    if _syncfs_fn is None:
        try:
            import ctypes   # (here: only a batch of many files needs it)

            fn = ctypes.CDLL(None, use_errno=True).syncfs
            fn.argtypes, fn.restype = (ctypes.c_int,), ctypes.c_int
            _syncfs_fn = (fn, ctypes.get_errno)
        except (OSError, AttributeError, ImportError):
            _syncfs_fn = False
    if not _syncfs_fn:
        return False
    fn, get_errno = _syncfs_fn
    if fn(fd) != 0:
        e = get_errno()
        if e == errno.ENOSYS:
            return False
        raise OSError(e, os.strerror(e))
    return True


def write_atomic(path: str | os.PathLike, data: bytes, overwrite: bool = False) -> None:
    """One small file written atomically; its directory is the output root (see :func:`open_output_file`
    for a file that needs the input-tree checks)."""
    with AtomicWriter(path, overwrite=overwrite) as f:
        f.write(data)


def write_span(out: OutputDir, rel: str, buf, start: int, end: int, chunk: int = 32 << 20) -> None:
    """``buf[start:end]`` (a mapped input, say) into the file ``rel`` below ``out``, atomically, ``chunk``
    bytes at a time (``mqtool carve --salvage-out``)."""
    with out.atomic(rel) as f:
        for a in range(start, end, chunk):
            f.write(buf[a:min(end, a + chunk)])


def temp_dir() -> str:
    """The directory ``tempfile.gettempdir()`` names, without importing :mod:`tempfile` when nothing has yet (it
    loads shutil, bz2, lzma and random: ~3 ms of a command's start-up): its candidates in its order (``TMPDIR``,
    ``TEMP``, ``TMP``, then /tmp, /var/tmp, /usr/tmp, then the working directory), the first that is a directory
    this process may create files in. (tempfile also writes a probe file there; a directory that refuses a file
    all the same only costs what is put there: the verify table's spill then stays in memory.)"""
    loaded = sys.modules.get("tempfile")
    if loaded is not None:
        return loaded.gettempdir()
    names = [os.environ.get(k) for k in ("TMPDIR", "TEMP", "TMP")]
    for d in [n for n in names if n] + ["/tmp", "/var/tmp", "/usr/tmp"]:
        d = os.path.abspath(d)
        if os.path.isdir(d) and os.access(d, os.W_OK | os.X_OK):
            return d
    return os.getcwd()


def scratch_db(directory: str):
    """A new SQLite database in ``directory`` (a :class:`Spool`'s, which removes it) for data a command must
    order after the last item came and that may not fit in memory: nothing is kept durable (no journal, no
    sync), the page cache is small, and sorts spill to temporary files (SQLite's, under ``TMPDIR``)."""
    import sqlite3

    con = sqlite3.connect(os.path.join(directory, "scratch.sqlite"), isolation_level=None)
    for pragma in ("journal_mode = OFF", "synchronous = OFF", "cache_size = -16384", "temp_store = FILE"):
        con.execute(f"PRAGMA {pragma}")
    return con


class SpillList:
    """A list a producer appends to and a consumer then reads once, in order (a range task's findings and
    markers, held until the merge takes them): past ``limit`` items they go, pickled in batches, to a private
    temporary file (unlinked at once: nothing is left behind, whatever ends the process), so what a producer
    holds stays bounded whatever the data makes of their number. Pickled (to another process, a Spark driver)
    it is a plain list of its items."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = SPILL_LIST_LIMIT if limit is None else limit
        self._mem: list = []
        self._file = None
        self._batches = 0
        self._spilled = 0

    def append(self, item) -> None:
        self._mem.append(item)
        if len(self._mem) >= self.limit:
            self._spill()

    def extend(self, items) -> None:
        for item in items:
            self.append(item)

    def _spill(self) -> None:
        import pickle

        if self._file is None:
            import tempfile

            self._file = tempfile.TemporaryFile(dir=temp_dir())
        pickle.dump(self._mem, self._file, pickle.HIGHEST_PROTOCOL)
        self._batches += 1
        self._spilled += len(self._mem)
        self._mem = []

    def __len__(self) -> int:
        return self._spilled + len(self._mem)

    def __iter__(self):
        if self._file is not None:
            import pickle

            self._file.flush()
            self._file.seek(0)
            for _ in range(self._batches):
                yield from pickle.load(self._file)
        yield from self._mem

    def __reduce__(self):
        return (list, (list(self),))

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


#: items a :class:`SpillList` holds in memory (~0.3-1 KB each) before a batch goes to its file
SPILL_LIST_LIMIT = 4096


# ---- spool: the pieces --jobs workers write, copied to stdout in order ---------------------------------------

SPOOL_PREFIX = TEMP_PREFIX + "spool-"
#: a spool directory younger than this is never taken for a dead run's (its maker may not hold its lock yet)
SPOOL_STALE_AFTER = 60.0


class Spool:
    """A private scratch directory (mode 0700, under ``TMPDIR``) where worker processes each write the
    output of one task as a file (:func:`write_piece`); the parent copies the pieces to its output in order
    (:func:`copy_piece`, which removes each piece) and removes the directory at the end (:meth:`close`).
    Nothing crosses a pipe but the piece's name and size.

    A run killed with SIGKILL cannot remove its directory. So the directory is named
    ``.mqtool-tmp-spool-<pid>-<random>`` and its maker holds an exclusive ``flock`` on it for as long as it (or a
    worker it forked) lives; making a spool first removes the spool directories a dead run left
    (:func:`sweep_dead_spools`)."""

    def __init__(self):
        import tempfile

        sweep_dead_spools(tempfile.gettempdir())
        self.dir = tempfile.mkdtemp(prefix=f"{SPOOL_PREFIX}{os.getpid()}-")
        self._lock = _lock_dir(self.dir)

    def piece(self, i: int) -> str:
        return os.path.join(self.dir, f"{i:09d}")

    def close(self) -> None:
        _remove_tree(self.dir)
        _unlock(self._lock)
        self._lock = None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _remove_tree(path: str, lock: int | None = None) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)
    _unlock(lock)


def _lock_dir(path: str) -> int | None:
    """An exclusive ``flock`` on the directory ``path`` (held by the returned descriptor, and by every process
    forked while it is open; the kernel drops it when the last of them ends, however it ends), or None where
    the file system gives no lock."""
    import fcntl

    try:
        fd = os.open(path, _O_DIR)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def _unlock(fd: int | None) -> None:
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:         # another user's process, or not ours to ask: alive as far as we know
        return True
    return True


def sweep_dead_spools(root: str, min_age: float = SPOOL_STALE_AFTER) -> list[str]:
    """Remove the spool directories under ``root`` that runs killed before their clean-up left; returns their
    names. Conservative: only a directory (never a link, never followed) named ``.mqtool-tmp-spool-<pid>-...``,
    owned by this user, untouched for ``min_age`` seconds, whose process is gone and whose lock nobody holds
    (so not a live run in another PID namespace, nor a worker that outlived its parent); directories of
    earlier versions (no pid in the name) are left alone."""
    import fcntl
    import time

    me, now, gone = os.geteuid(), time.time(), []
    try:
        entries = list(os.scandir(root))
    except OSError:
        return gone
    for e in entries:
        name = e.name
        if not name.startswith(SPOOL_PREFIX):
            continue
        pid = name[len(SPOOL_PREFIX):].partition("-")[0]
        if not pid.isdigit() or int(pid) == os.getpid() or _pid_alive(int(pid)):
            continue
        try:
            st = e.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != me or now - st.st_mtime < min_age:
            continue
        path = os.path.join(root, name)
        try:
            fd = os.open(path, _O_DIR)
        except OSError:
            continue
        try:
            same = os.fstat(fd)
            if (same.st_dev, same.st_ino) != (st.st_dev, st.st_ino):
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue            # a live process holds it
            _remove_tree(path)      # (under our lock: a run cannot take it meanwhile)
            gone.append(name)
        finally:
            os.close(fd)
    return gone


class Handoff(Spool):
    """A :class:`Spool` that tasks on other processes -- possibly other machines -- may leave results in,
    for a driver that would otherwise receive them through a slower channel (Spark's task results). The
    driver makes it (a private directory and a random token file in it) and ships it with the tasks; a task
    uses it only when it reads that very token there (:meth:`reachable`: the directory is the driver's, on
    this machine or on a filesystem both share), else it returns its result the usual way. A copy unpickled
    in a task never removes the directory; the driver's does, at :meth:`close`, or when collected or at exit."""

    def __init__(self):
        super().__init__()
        import weakref

        self.token = _temp_name()
        write_piece(os.path.join(self.dir, "token"), [self.token.encode()])
        self._done = weakref.finalize(self, _remove_tree, self.dir, self._lock)

    def __getstate__(self):
        return {"dir": self.dir, "token": self.token}

    def __setstate__(self, state):
        self.dir, self.token = state["dir"], state["token"]
        self._done = self._lock = None

    def close(self) -> None:
        if self._done is not None:
            self._done()

    def reachable(self) -> bool:
        """This process sees the driver's directory (its token is there)."""
        try:
            fd = os.open(os.path.join(self.dir, "token"), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return False
        try:
            return os.read(fd, 64) == self.token.encode()
        finally:
            os.close(fd)

    def put(self, stem: str, data) -> str | None:
        """Leave ``data`` (bytes-like) under a fresh name starting with ``stem`` (a retried or speculative
        task never meets an earlier attempt's file); its name, or None when this process cannot (then send
        the data the usual way)."""
        if not self.reachable():
            return None
        name = f"{stem}-{_temp_name()}"
        try:
            write_piece(os.path.join(self.dir, name), [data])
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(self.dir, name))
            return None
        return name

    def take(self, name: str, size: int):
        """The piece ``name`` (a plain name a task gave, ``size`` bytes) mapped read-only, removed from the
        directory at once (the map keeps its pages); None when it is not there as left (then the caller
        does without it)."""
        if name in ("", ".", "..") or "/" in name or "\x00" in name or name == "token":
            return None
        path = os.path.join(self.dir, name)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            os.unlink(path)
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size != size:
                return None
            return mmap.mmap(fd, size, access=mmap.ACCESS_READ) if size else b""
        except OSError:
            return None
        finally:
            os.close(fd)


def write_piece(path: str, chunks) -> int:
    """Write the byte strings ``chunks`` to a new file ``path`` (never an existing one, never through a link);
    returns the byte count."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    n = 0
    try:
        for c in chunks:
            write_all(fd, c)
            n += len(c)
    finally:
        os.close(fd)
    return n


def copy_piece(path: str, size: int, out) -> None:
    """Append the piece ``path`` (``size`` bytes) to the binary stream ``out`` and remove it: in the kernel
    (``sendfile``) when ``out`` is a file descriptor's stream (a file, a pipe, a terminal), else by reads."""
    out.flush()
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        try:
            ofd = out.fileno()
        except (AttributeError, OSError, ValueError):     # an in-memory stream (tests)
            ofd = None
        pos = 0
        if ofd is not None:
            try:
                while pos < size:
                    k = os.sendfile(ofd, fd, pos, size - pos)
                    if k == 0:
                        break
                    pos += k
            except OSError as e:
                if e.errno not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP) or pos:
                    raise
        while pos < size:       # no sendfile to this descriptor (or none at all): plain copies
            data = os.pread(fd, min(1 << 20, size - pos), pos)
            if not data:
                break
            out.write(data)
            pos += len(data)
        if ofd is None:
            out.flush()
    finally:
        os.close(fd)
        os.unlink(path)


# ---- tasks written straight to one output, in order, by several processes -----------------------------------

def write_all(fd: int, data) -> None:
    """Write every byte of ``data`` (a bytes-like object) to the file descriptor ``fd``."""
    with memoryview(data) as view:
        at, n = 0, len(view)
        while at < n:
            with view[at:] as rest:
                at += os.write(fd, rest)


class Turn:
    """One process's side of :func:`write_in_order`: where the bytes of the task it is on go. While earlier
    tasks are still being written (``mine`` false) the task keeps its bytes, up to ``threshold`` bytes (the hold
    size); :meth:`write` then waits until the earlier tasks are written, and from then on (``mine``) bytes go
    out as they come, in blocks of ``threshold`` (the flush size)."""

    def __init__(self, write, flush: int, hold: int, wait_fd: int | None = None, pass_fd: int | None = None):
        self._write, self._flush, self._hold = write, flush, hold
        self._wait_fd, self._pass_fd = wait_fd, pass_fd
        self.mine = True
        self.threshold = flush

    def _begin(self, first: bool) -> None:
        self.mine = first or self._wait_fd is None
        self.threshold = self._flush if self.mine else self._hold

    def _wait(self) -> None:
        if not self.mine:
            if os.read(self._wait_fd, 1) != b"t":    # the process before gave up (an error, a signal)
                raise _Abandoned
            self.mine = True
            self.threshold = self._flush

    def write(self, data) -> None:
        self._wait()
        self._write(data)

    def _end(self, last: bool) -> None:
        self._wait()                                 # the next task's turn comes after this one's, written or empty
        if not last and self._pass_fd is not None:
            try:
                os.write(self._pass_fd, b"t")
            except BrokenPipeError:                  # the next process is gone: its reply says why
                raise _Abandoned from None
        self.mine = False


class _Abandoned(Exception):
    """The process before this one in the ring stopped without passing the turn on."""


def write_in_order(fd: int, tasks: list, jobs: int, work, flush: int = 1 << 20, hold: int = 64 << 20,
                   child_init=None) -> list:
    """``work(task, turn)`` for each of ``tasks``, in ``jobs`` processes (this one and ``jobs - 1`` forked
    children; task i runs in process i % jobs), each task writing its bytes through ``turn``
    (:class:`Turn`) straight to the file descriptor ``fd`` in task order: a task's bytes go out once every
    earlier task's are written (the turn passes from process to process through a ring of pipes), so a file, a
    pipe or a terminal receives exactly what one process would write. A task keeps at most ``hold`` bytes while
    it waits for its turn (bounded memory whatever the output). Returns the values of ``work`` in task order
    (they cross a pipe pickled: keep them small). An exception in a child is raised here (a child that
    cannot write, e.g. to a closed pipe, raises BrokenPipeError here); the children never outlive the call.
    Needs ``os.fork`` and a process with no other threads (the caller checks); with ``jobs`` 1 runs here.
    ``child_init()``, when given, is called first in each child (e.g. to end it with its parent)."""
    import pickle

    jobs = max(1, min(jobs, len(tasks)))

    def out(data) -> None:
        write_all(fd, data)

    if jobs == 1:
        turn = Turn(out, flush, hold)
        return [work(t, turn) for t in tasks]
    tokens: list = []
    results: list = []
    opened: set[int] = set()           # pipe ends still open in this process

    def close(e: int) -> None:
        if e in opened:
            opened.discard(e)
            os.close(e)

    def participant(k: int) -> list:
        turn = Turn(out, flush, hold, tokens[k][0], tokens[(k + 1) % jobs][1])
        done = []
        for i in range(k, len(tasks), jobs):
            turn._begin(i == 0)
            done.append(work(tasks[i], turn))
            turn._end(i == len(tasks) - 1)
        return done

    import gc

    pids: list[int] = []
    gc.freeze()         # the objects so far stay out of every collection: the children do not copy their pages
    try:
        for _ in range(jobs):
            tokens.append(os.pipe())
            opened.update(tokens[-1])
            results.append(os.pipe())
            opened.update(results[-1])
        for k in range(1, jobs):
            pid = os.fork()
            if pid == 0:                                          # the child: never returns
                code = 1
                try:
                    keep = {tokens[k][0], tokens[(k + 1) % jobs][1], results[k][1]}
                    for e in list(opened - keep):
                        close(e)
                    if child_init is not None:
                        child_init()
                    try:
                        reply = ("ok", participant(k))
                    except _Abandoned:
                        reply = ("abandoned", None)
                    except BaseException as e:                    # noqa: BLE001 - handed to the parent
                        try:
                            reply = ("error", pickle.dumps(e))
                        except Exception:                         # noqa: BLE001 - an exception that does not pickle
                            reply = ("error", pickle.dumps(RuntimeError(f"{type(e).__name__}: {e}")))
                    write_all(results[k][1], pickle.dumps(reply))
                    code = 0
                finally:
                    os._exit(code)
            pids.append(pid)
        mine = {tokens[0][0], tokens[1][1]} | {results[k][0] for k in range(1, jobs)}
        for e in list(opened - mine):
            close(e)
        try:
            own = participant(0)
            abandoned = False
        except _Abandoned:
            own, abandoned = None, True
        finally:
            close(tokens[1][1])               # a child waiting for a turn this process will not give: EOF
            close(tokens[0][0])
        replies = []
        for k in range(1, jobs):
            chunks = []
            while True:
                b = os.read(results[k][0], 1 << 20)
                if not b:
                    break
                chunks.append(b)
            close(results[k][0])
            replies.append(pickle.loads(b"".join(chunks)) if chunks else ("abandoned", None))
        for pid in pids:
            os.waitpid(pid, 0)
        pids.clear()
        for status, value in replies:
            if status == "error":
                raise pickle.loads(value)
        if abandoned or any(status != "ok" for status, _ in replies):
            from mqtool.errors import MqToolError

            raise MqToolError("a worker process died (killed by a signal or out of memory); "
                              "run again, or with --jobs 1")
    finally:
        import signal

        gc.unfreeze()
        for e in list(opened):
            close(e)
        for pid in pids:                      # an error here: end the children this call started
            try:
                os.kill(pid, signal.SIGTERM)
                os.waitpid(pid, 0)
            except OSError:
                pass
    ordered: list = [None] * len(tasks)
    for k, done in enumerate([own] + [v for _, v in replies]):
        ordered[k::jobs] = done
    return ordered
