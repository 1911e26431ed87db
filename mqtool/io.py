"""Evidence-safe file access: read-only inputs, atomic outputs.

Every input goes through :func:`open_input` / :func:`map_input`; nothing in mqtool opens a store file
for writing. Every output goes through :class:`AtomicWriter` (temp name, fsync, rename) into a directory
checked by :func:`prepare_output_dir`.
"""
from __future__ import annotations

import mmap
import os
import stat
import tempfile
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
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
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


class MappedInput:
    """A read-only view of a whole file: mmap(ACCESS_READ) when possible, bytes for empty files.

    Supports slicing and ``len``; ``close`` releases the map. Use as a context manager.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = str(path)
        self._f = open_input(path)
        try:
            size = os.fstat(self._f.fileno()).st_size
            if size == 0:
                self.buf = b""
                self._mm = None
            else:
                self._mm = mmap.mmap(self._f.fileno(), 0, access=mmap.ACCESS_READ)
                self.buf = self._mm
        except OSError as e:
            self._f.close()
            raise InputError(f"cannot map: {e.strerror or e}", self.path) from None

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


def map_input(path: str | os.PathLike) -> MappedInput:
    return MappedInput(path)


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
