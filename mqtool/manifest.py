"""sha256 manifest of a store: what was examined, so an operator can prove it later.

Family-agnostic: every regular file under the given path (symlinked files and directories are followed, as
the commands follow them; a directory reached twice — a symlink loop — is listed once). Each row has the
path relative to the root, size, mtime and sha256; special files (FIFOs, devices, sockets) and unreadable
entries are listed with what they are and no hash. Files are read through :func:`mqtool.io.open_input`
(read-only, never blocking) in 1 MiB chunks.
"""
from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path
from typing import Iterator

from mqtool.errors import InputError
from mqtool.io import open_input
from mqtool.columns import iso_ms
from mqtool.sanitize import visible

CHUNK = 1 << 20


def _kind(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "directory"
    if stat.S_ISFIFO(mode):
        return "fifo"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    if stat.S_ISSOCK(mode):
        return "socket"
    return "special"


def file_sha256(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open_input(path) as f:
        while True:
            try:
                b = f.read(CHUNK)
            except OSError as e:
                raise InputError(f"read failed: {e.strerror or e}", str(path)) from None
            if not b:
                break
            h.update(b)
    return h.hexdigest()


def _row(root: Path, p: Path) -> dict:
    rel = str(p.relative_to(root)) if p != root else p.name
    row = {"kind": "manifest_entry", "path": rel, "type": None, "size": None, "mtime": None, "mtime_ns": None,
           "sha256": None, "error": None}
    if p.is_symlink():
        try:
            row["link_target"] = os.readlink(p)
        except OSError:
            pass
    try:
        st = os.stat(p)
    except OSError as e:
        row["type"] = "unreadable"
        row["error"] = e.strerror or str(e)
        return row
    row["type"] = _kind(st.st_mode)
    row["mtime_ns"] = st.st_mtime_ns
    row["mtime"] = iso_ms(st.st_mtime_ns // 1_000_000)
    if row["type"] != "file":
        return row
    row["size"] = st.st_size
    try:
        row["sha256"] = file_sha256(p)
    except InputError as e:
        row["error"] = e.message
    return row


def walk(path: str | os.PathLike) -> Iterator[Path]:
    """Every non-directory entry under ``path`` in sorted order (or ``path`` itself when it is not a dir)."""
    root = Path(path)
    if not root.is_dir():
        yield root
        return
    seen: set[tuple[int, int]] = set()

    def visit(d: Path) -> Iterator[Path]:
        try:
            st = os.stat(d)
        except OSError:
            yield d
            return
        key = (st.st_dev, st.st_ino)
        if key in seen:
            return
        seen.add(key)
        try:
            names = sorted(os.listdir(d), key=os.fsencode)
        except OSError:
            yield d
            return
        for n in names:
            p = d / n
            try:
                is_dir = stat.S_ISDIR(os.stat(p).st_mode)
            except OSError:
                is_dir = False
            if is_dir:
                yield from visit(p)
            else:
                yield p

    yield from visit(root)


def manifest_rows(path: str | os.PathLike) -> Iterator[dict]:
    """Entries, then one ``manifest`` summary row (counts and a digest over every entry's hash and path)."""
    root = Path(path)
    base = root if root.is_dir() else root.parent
    digest = hashlib.sha256()
    files = total = problems = 0
    for p in walk(root):
        if p.is_dir() and p != root:        # an unlistable directory
            rel = str(p.relative_to(base))
            row = {"kind": "manifest_entry", "path": rel, "type": "unreadable", "size": None, "mtime": None,
                   "mtime_ns": None, "sha256": None, "error": "cannot list directory"}
        else:
            row = _row(base, p)
        if row["sha256"]:
            files += 1
            total += row["size"]
        else:
            problems += row["type"] in ("file", "unreadable") or row["error"] is not None
        digest.update(f"{row['sha256'] or '-'}  {row['path']}\n".encode("utf-8", "surrogateescape"))
        yield row
    # realpath, not Path.resolve(): a symlink loop given as the path is listed (unreadable), not an error
    yield {"kind": "manifest", "root": os.path.realpath(root), "files": files, "bytes": total,
           "unhashed": problems, "digest": digest.hexdigest()}


def sha256sum_lines(rows, for_terminal: bool = False) -> Iterator[str]:
    """``sha256sum -c`` compatible lines for the hashed entries. A name holding a backslash, newline or
    carriage return is escaped as coreutils does (the line starts with a backslash). ``for_terminal``:
    names shown with :func:`mqtool.sanitize.visible` instead (for a person, not for ``sha256sum -c``)."""
    for r in rows:
        if r.get("kind") == "manifest_entry" and r.get("sha256"):
            path = r["path"]
            if for_terminal:
                yield f"{r['sha256']}  {visible(path)}\n"
            elif any(c in path for c in "\\\n\r"):
                esc = path.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
                yield f"\\{r['sha256']}  {esc}\n"
            else:
                yield f"{r['sha256']}  {path}\n"
