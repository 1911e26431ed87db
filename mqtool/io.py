"""Evidence-safe file access: read-only inputs, atomic outputs.

Every input goes through :func:`open_input` / :func:`map_input`; nothing in mqtool opens a store file
for writing. Every output goes through :class:`AtomicWriter` (temp name, fsync, rename) into a directory
checked by :func:`prepare_output_dir`.
"""
from __future__ import annotations

import errno
import mmap
import os
import stat
import tempfile
import weakref
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


def open_input(path: str | os.PathLike):
    """Open a store file read-only (binary). Never blocks on FIFOs: they are refused up front."""
    p = Path(path)
    _check_regular(p)
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
    return os.fdopen(fd, "rb", buffering=1 << 20)


def read_input(path: str | os.PathLike, limit: int | None = None) -> bytes:
    """Read a (small) store file whole, read-only. ``limit`` caps how much is read."""
    with open_input(path) as f:
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
        weakref.finalize(mm, _guard.unwatch, slot)


class MappedInput:
    """A read-only view of a whole file: the bytes themselves for small files, mmap(ACCESS_READ) beyond
    :data:`READ_WHOLE_LIMIT`.

    Supports slicing and ``len``; ``close`` releases the map. Use as a context manager. A mapped file that
    is truncated by someone else while we read it would fault (SIGBUS) on the lost pages: scanners call
    :meth:`shrunk` between records and stop cleanly when it says so.
    """

    def __init__(self, path: str | os.PathLike, whole_limit: int | None = None):
        self.path = str(path)
        self._f = open_input(path)
        self._mm = None
        self._faults = 0
        limit = READ_WHOLE_LIMIT if whole_limit is None else whole_limit
        try:
            size = os.fstat(self._f.fileno()).st_size
            self.initial_size = size
            if size == 0:
                self.buf = b""
            elif size <= limit:
                self.buf = _read_exactly(self._f, size, self.path)
            else:
                self._mm = mmap.mmap(self._f.fileno(), 0, access=mmap.ACCESS_READ)
                self.buf = self._mm
                _guard_map(self._mm)
                self._faults = _guard.faults() if _guard is not None else 0
        except OSError as e:
            self._f.close()
            raise InputError(f"cannot map: {e.strerror or e}", self.path) from None
        except BaseException:
            self._f.close()
            raise

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


def _data_start(fd: int | None, pos: int, end: int) -> int:
    """Next position >= pos that is not inside a hole of a sparse file (``end`` when only holes follow).
    Without an fd or SEEK_DATA support: ``pos``."""
    if fd is None or not hasattr(os, "SEEK_DATA"):
        return pos
    try:
        d = os.lseek(fd, pos, os.SEEK_DATA)
    except OSError as e:
        return end if e.errno == errno.ENXIO else pos
    return min(max(d, pos), end)


def _last_data_end(fd: int | None, start: int, end: int) -> int:
    """End of the last data region of a sparse file that begins before ``end`` (``end`` when unknown)."""
    if fd is None or not hasattr(os, "SEEK_HOLE"):
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


def first_nonzero(buf, start: int, end: int, fd: int | None = None) -> int:
    """Position of the first non-zero byte in ``buf[start:end]``, or -1.

    Compares 1 MiB chunks against zeros (C speed) and, given the file descriptor of a sparse file,
    jumps over its holes with SEEK_DATA without touching them: a 2 GiB hole costs one system call.
    """
    p = start
    while p < end:
        p = _data_start(fd, p, end)
        if p >= end:
            return -1
        q = min(end, p + _ZERO_CHUNK)
        chunk = buf[p:q]
        if chunk != _ZEROS[:q - p]:
            return p + (len(chunk) - len(chunk.lstrip(b"\x00")))
        p = q
    return -1


def last_nonzero(buf, start: int, end: int, fd: int | None = None) -> int:
    """Position of the last non-zero byte in ``buf[start:end]``, or -1 (chunked, from the end)."""
    first = first_nonzero(buf, start, end, fd)
    if first < 0:
        return -1
    q = max(first + 1, _last_data_end(fd, first, end))
    while q > first:
        p = max(first, q - _ZERO_CHUNK)
        chunk = buf[p:q]
        if chunk != _ZEROS[:q - p]:
            return p + len(chunk.rstrip(b"\x00")) - 1
        q = p
    return first


def map_input(path: str | os.PathLike, whole_limit: int | None = None) -> MappedInput:
    return MappedInput(path, whole_limit)


def _is_within(child: Path, parent: Path) -> bool:
    try:
        child.resolve().relative_to(parent.resolve())
        return True
    except ValueError:
        return False


def prepare_output_dir(out: str | os.PathLike, inputs: list[str | os.PathLike], force: bool) -> Path:
    """Check (and create) an output directory.

    Refuses a directory inside (or equal to, or containing) any input tree, and a non-empty directory
    unless ``force``.
    """
    outp = Path(out)
    for inp in inputs:
        ip = Path(inp)
        if ip.is_file():
            ip = ip.parent
        if _is_within(outp, ip) or _is_within(ip, outp):
            raise OutputError(f"refusing to write inside the input tree {ip}", str(outp))
    if outp.exists():
        if not outp.is_dir():
            raise OutputError("output exists and is not a directory", str(outp))
        if any(outp.iterdir()) and not force:
            raise OutputError("output directory is not empty (use --force to overwrite)", str(outp))
    else:
        try:
            outp.mkdir(parents=True)
        except OSError as e:
            raise OutputError(f"cannot create output directory: {e.strerror or e}", str(outp)) from None
    return outp


def prepare_output_file(out: str | os.PathLike, inputs: list[str | os.PathLike], force: bool) -> Path:
    """Check the target of a single output file (e.g. an HTML report).

    Unlike :func:`prepare_output_dir`, the file may be written into a directory that *contains* an input
    (``report.html`` next to ``store/``): one new file there cannot touch the input. Refused: a file inside
    (or equal to) an input tree, a directory, and an existing file unless ``force``. Creates the parent.
    """
    outp = Path(out)
    for inp in inputs:
        ip = Path(inp)
        if ip.is_file():
            if outp.resolve() == ip.resolve():
                raise OutputError("refusing to overwrite an input file", str(outp))
            ip = ip.parent
        if _is_within(outp, ip):
            raise OutputError(f"refusing to write inside the input tree {ip}", str(outp))
    if outp.is_dir():
        raise OutputError("output is a directory; give a file name", str(outp))
    if outp.exists() and not force:
        raise OutputError("file exists (use --force to overwrite)", str(outp))
    try:
        outp.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OutputError(f"cannot create output directory: {e.strerror or e}", str(outp.parent)) from None
    return outp


class AtomicWriter:
    """Write a file under a temporary name in the target directory, fsync, then rename.

    An interrupted run leaves at most a ``.mqtool-tmp-*`` file, never a half-written file under the final
    name. ``overwrite=False`` refuses an existing target.
    """

    def __init__(self, path: str | os.PathLike, overwrite: bool = False):
        self.path = Path(path)
        self.overwrite = overwrite
        self._tmp: str | None = None
        self._f = None

    def __enter__(self):
        if self.path.exists() and not self.overwrite:
            raise OutputError("file exists (use --force to overwrite)", str(self.path))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, self._tmp = tempfile.mkstemp(prefix=".mqtool-tmp-", dir=self.path.parent)
        self._f = os.fdopen(fd, "wb")
        return self._f

    def __exit__(self, exc_type, exc, tb):
        f = self._f
        try:
            if exc_type is None:
                f.flush()
                os.fsync(f.fileno())
            f.close()
            if exc_type is None:
                os.replace(self._tmp, self.path)
                _fsync_dir(self.path.parent)
            else:
                os.unlink(self._tmp)
        except BaseException:
            if self._tmp and os.path.exists(self._tmp):
                os.unlink(self._tmp)
            raise
        return False


def _fsync_dir(d: Path) -> None:
    try:
        fd = os.open(d, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_atomic(path: str | os.PathLike, data: bytes, overwrite: bool = False) -> None:
    with AtomicWriter(path, overwrite=overwrite) as f:
        f.write(data)


def move_output(src: str | os.PathLike, dst: str | os.PathLike) -> None:
    """Rename a finished output file/dir (e.g. Spark's part files) into place; both sides are outputs."""
    os.replace(src, dst)
    _fsync_dir(Path(dst).parent)
