"""Stores on remote storage (``s3://``, ``hdfs://``, ``gs://``, ``file://``, anything fsspec knows).

The verbs read stores through :mod:`mqtool.io` only (``open_input`` / ``map_input`` / ``read_input``) and find
their files with ordinary directory walks. A remote store is therefore *staged*: :func:`stage` lists the remote
tree once (names and sizes, no data) and builds a local *shadow* of it in a private temporary directory, every
file a sparse file of the remote size. Nothing is fetched then. Bytes are fetched by *chunks*
(:func:`chunk_size`, 8 MiB by default; one ranged request each, written into the shadow, so memory stays
bounded) where a reader reads (:func:`fill_range`):

* ``open_input`` reads a shadow through a reader that fetches the chunks each read covers; ``read_input(path,
  limit)`` of a small prefix fetches it into memory only (:func:`peek`: store detection costs a few bytes);
* ``map_input(path, ranged=True)``: the scanner says which window it is about to read (``mqtool.io.need`` /
  ``need_unit``, and :class:`mqtool.pages.PageWindow` for sequential scans), since a memory map cannot trap
  the first touch of a page here; a map made without ``ranged`` gets the whole file before it is mapped
  (a bounded dump's first try: a prefix, :func:`first_rows`), kept while the map lives (:func:`pin`).

Files and ranges a verb never reads are never fetched. The fetched chunks are a cache: past
:func:`cache_limit` the least recently used chunks this process fetched are evicted (marked missing, their
blocks released with ``fallocate(PUNCH_HOLE)``), except the window each reader is in, pinned files and
ranges, and chunks another process is in (record locks, :func:`_relock`). The shadow is removed when the
process ends.

What is fetched is recorded beside the shadow (a fetch map per file, not in the tree: discovery must see the
store only), so that other processes on the same machine (the ``--jobs`` workers, Spark executors of
``local[N]``) open the same shadow and fetch what is still missing themselves, under a file lock; a chunk not
fetched is never read as its zero-filled shadow by a reader that says what it reads.

Remote names are hostile: a name that is not one plain local path component (empty, ``.``, ``..``, a NUL, a
``/`` or a name longer than 255 bytes) is skipped with a warning, never used to build a local path.

Where the credentials come from: the filesystem's own usual sources (for S3: ``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_PROFILE``, ``AWS_ENDPOINT_URL``...); extra fsspec
options as JSON in ``MQTOOL_STORAGE_OPTIONS`` (e.g. ``{"client_kwargs": {"region_name": "eu-west-1"}}``).
"""
from __future__ import annotations

import atexit
import fcntl
import hashlib
import io
import json
import os
import re
import shutil
import tempfile
import threading
from collections import OrderedDict
from pathlib import Path

from mqtool.errors import InputError, OutputError

BLOCK = 8 << 20                 # bytes per ranged request
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_MARK = ".mqtool-remote.json"
_ROOT_PREFIX = "mqtool-remote-"         # mqtool.io._SHADOW_MARK: such paths are read through fill_range()

# bytes fetched by this process, per remote URL (tests and --verbose read it)
fetched: dict[str, int] = {}
_lock = threading.Lock()
_stages: dict[str, Path] = {}       # url -> shadow of the store (one per run)
_shadow_roots: list[Path] = []


def is_remote(path) -> bool:
    """``path`` is a URL with a scheme (``s3://``, ``hdfs://``, ``file://``...), not a local path."""
    return isinstance(path, str) and _URL.match(path) is not None


def storage_options(url: str) -> dict:
    """fsspec options for ``url``: ``MQTOOL_STORAGE_OPTIONS`` (JSON), plus for S3 the endpoint of
    ``AWS_ENDPOINT_URL`` / ``AWS_ENDPOINT_URL_S3`` when set (an S3-compatible server)."""
    raw = os.environ.get("MQTOOL_STORAGE_OPTIONS")
    try:
        opts = json.loads(raw) if raw else {}
    except ValueError:
        raise InputError("MQTOOL_STORAGE_OPTIONS is not JSON", "environment") from None
    if not isinstance(opts, dict):
        raise InputError("MQTOOL_STORAGE_OPTIONS must be a JSON object", "environment")
    scheme = _URL.match(url).group(1).lower()
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    if scheme in ("s3", "s3a") and endpoint and "endpoint_url" not in opts:
        opts["endpoint_url"] = endpoint
    return opts


def filesystem(url: str):
    """(fsspec filesystem, path within it) for ``url``; a usage error (exit 2) without fsspec."""
    try:
        import fsspec
    except ImportError:
        raise InputError("remote storage needs fsspec (pip install 'mqtool[remote]')", url) from None
    u = url
    if u.lower().startswith("s3a://"):          # Hadoop's name for the same store
        u = "s3://" + u[6:]
    try:
        return fsspec.core.url_to_fs(u, **storage_options(url))
    except (ImportError, ValueError, OSError) as e:
        why = (str(e).replace("\\n", "\n").strip().splitlines() or [type(e).__name__])[0][:200]
        if u.lower().startswith("hdfs://"):
            why += ("; hdfs:// is pyarrow's HadoopFileSystem, which needs a JVM and libhdfs (JAVA_HOME, "
                    "HADOOP_HOME, ARROW_LIBHDFS_DIR); webhdfs:// reaches the same cluster over HTTP without them")
        raise InputError(f"cannot use this storage: {why}", url) from None


def _count(url: str, n: int, root=None) -> None:
    with _lock:
        fetched[url] = fetched.get(url, 0) + n
    if root is not None:            # and in the shadow, for every process that reads it (--jobs, Spark)
        try:
            fd = os.open(os.path.join(root, "state", "fetched"), os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            raw = os.pread(fd, 32, 0)
            os.pwrite(fd, str((int(raw) if raw.strip() else 0) + n).ljust(32).encode(), 0)
        finally:
            os.close(fd)


def fetched_by_all(shadow) -> int:
    """Bytes fetched into the shadow of ``shadow`` (a path in it) by every process that read it."""
    root = _shadow_root_of(os.fspath(shadow))
    try:
        raw = (root / "state" / "fetched").read_bytes() if root is not None else b""
    except OSError:
        return 0
    return int(raw) if raw.strip() else 0


def _plain_component(name: str) -> bool:
    return name not in ("", ".", "..") and "/" not in name and "\x00" not in name and \
        len(name.encode("utf-8", "surrogateescape")) <= 255


def _new_root() -> Path:
    root = Path(tempfile.mkdtemp(prefix=_ROOT_PREFIX))
    _shadow_roots.append(root)
    if len(_shadow_roots) == 1:
        atexit.register(_cleanup)
    return root


def _cleanup() -> None:
    while _handles:
        _close_quietly(_handles.popitem()[1])
    _close_use_files()
    for r in _shadow_roots:
        shutil.rmtree(r, ignore_errors=True)
    _shadow_roots.clear()


def stage(url: str, warn=None) -> Path:
    """The local shadow of the remote store (or file) ``url``: its tree with sparse files of the remote sizes,
    nothing fetched yet. ``warn(message)`` hears about skipped names."""
    url = url.rstrip("/") or url
    if url in _stages:
        return _stages[url]
    fs, top = filesystem(url)
    try:
        info = fs.info(top)
    except FileNotFoundError:
        raise InputError("no such file or directory", url) from None
    except (OSError, ValueError) as e:
        raise InputError(f"cannot list: {e}", url) from None
    root = _new_root()
    tree = root / "tree"
    tree.mkdir()
    files: dict[str, dict] = {}
    # the shadow of the store is <tmp>/mqtool-remote-*/tree/<the URL's last name>: the name a store's files
    # may be labelled by (a Kafka partition as "logs/orders-0"); "store" when that name is not plain ASCII
    # text, so that the shadow's path is always plain and output can always show it as the URL
    last = ([p for p in top.split("/") if p] or [""])[-1]
    name = last if _plain_component(last) and last.isascii() and last.isprintable() and "\\" not in last \
        and '"' not in last else "store"
    if info.get("type") == "directory":
        try:
            listing = fs.find(top, withdirs=True, detail=True)
        except (OSError, ValueError) as e:
            raise InputError(f"cannot list: {e}", url) from None
        base = tree / name
        base.mkdir()
        prefix = top.rstrip("/") + "/"
        for key in sorted(listing):
            meta = listing[key]
            if not key.startswith(prefix):
                continue
            parts = key[len(prefix):].split("/")
            if not all(_plain_component(p) for p in parts):
                if warn:
                    warn(f"skipped a remote name that is not a plain path: {key!r}")
                continue
            local = base.joinpath(*parts)
            if meta.get("type") == "directory":
                local.mkdir(parents=True, exist_ok=True)
                continue
            local.parent.mkdir(parents=True, exist_ok=True)
            _shadow_file(local, int(meta.get("size") or 0))
            files[str(local.relative_to(root))] = {"key": key, "size": int(meta.get("size") or 0)}
        shown = base
    else:
        local = tree / name
        _shadow_file(local, int(info.get("size") or 0))
        files[str(local.relative_to(root))] = {"key": top, "size": int(info.get("size") or 0)}
        shown = local
    (root / "state").mkdir()
    doc = {"url": url, "protocol": fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0],
           "files": files, "shown": str(shown.relative_to(root)), "chunk": chunk_size(), "top": top}
    (root / _MARK).write_text(json.dumps(doc))
    _stages[url] = shown
    return shown


# ---- paths shown as their URL ------------------------------------------------------------------------------

_SHADOW_IN_TEXT = re.compile(re.escape(tempfile.gettempdir().rstrip(os.sep)) + re.escape(os.sep)
                             + re.escape(_ROOT_PREFIX) + r"[^" + re.escape(os.sep) + r"]+")
_shown_prefixes: dict[str, tuple[str, str] | None] = {}     # shadow root -> (shadow of the URL, URL), or None


def shown(text):
    """``text`` (a path, or a message naming paths) with every local shadow of a remote store replaced by the
    URL it stands for (``<tmp>/mqtool-remote-…/tree/s3/bucket/store/commitlog/0…`` → ``s3://bucket/store/
    commitlog/0…``): what output shows. Works in any process on the machine (the URL is read from the
    shadow's mark); anything else is returned as it is."""
    if type(text) is not str or _ROOT_PREFIX not in text:
        return text
    for m in set(_SHADOW_IN_TEXT.findall(text)):
        pair = _shown_prefixes.get(m, False)
        if pair is False:
            pair = None
            root = _shadow_root_of(os.path.join(m, "tree", "x"))
            if root is not None and (root / _MARK).is_file():
                try:
                    doc = json.loads((root / _MARK).read_text())
                    if doc.get("shown"):
                        pair = (os.path.join(m, doc["shown"]), doc["url"])
                except (OSError, ValueError):
                    pass
            _shown_prefixes[m] = pair
        if pair is not None:
            text = text.replace(pair[0], pair[1])
    return text


def shown_row(row: dict) -> dict:
    """A row (dict) with :func:`shown` applied to its text values (in place; returned)."""
    for k, v in row.items():
        if type(v) is str and _ROOT_PREFIX in v:
            row[k] = shown(v)
    return row


class _ShownWriter(io.RawIOBase):
    """A binary stream that writes complete lines to ``out`` with the shadows of the stores staged by this
    process shown as their URLs (:func:`show_urls_on_streams`); an incomplete last line is held until its
    end or a flush."""

    def __init__(self, out):
        super().__init__()
        self.out = out
        self.hold = b""

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:
        data = self.hold + bytes(b)
        cut = data.rfind(b"\n") + 1
        self.hold = data[cut:]
        if cut:
            self.out.write(_shown_bytes(data[:cut]))
        return len(b)

    def flush(self) -> None:
        if self.hold:
            self.out.write(_shown_bytes(self.hold))
            self.hold = b""
        self.out.flush()

    def fileno(self) -> int:
        # no descriptor to write to: whatever writes to the real one (sendfile of spool pieces, forked
        # writers) would bypass the rewrite, so such writers take their in-process path here
        raise io.UnsupportedOperation("output shown through mqtool.remote has no descriptor of its own")

    def isatty(self) -> bool:
        return self.out.isatty()


def _shown_bytes(data: bytes) -> bytes:
    if _ROOT_PREFIX.encode() not in data:
        return data
    for url, shadow in sorted(_stages.items(), key=lambda kv: -len(str(kv[1]))):
        data = data.replace(os.fsencode(str(shadow)), _safe_url(url))
    return data


def _safe_url(url: str) -> bytes:
    """``url`` as output shows it in place of a shadow path: as it is when it is plain printable ASCII,
    else with JSON's escapes (``\\u001b``, ``\\"``, ``\\\\``; non-ASCII, ``<``, ``>`` and ``&`` as ``\\uXXXX``),
    which are valid in an NDJSON string, cannot control a terminal and are plain text in HTML."""
    text = json.dumps(url)[1:-1]
    for c in "<>&":
        text = text.replace(c, f"\\u{ord(c):04x}")
    return text.encode("ascii")


def staged() -> bool:
    """This process has staged a remote store (its output may name shadows: :class:`ShownFile`)."""
    return bool(_stages)


class ShownFile:
    """A binary output file (a report, a salvage or manifest file) that names every store staged by this
    process by its URL, not its shadow, as :func:`show_urls_on_streams` does for stdout and stderr. Bytes
    that may begin a shadow path are held back (at most a shadow path's length) until the next write or a
    flush."""

    def __init__(self, f):
        self._f = f
        self._hold = b""

    def write(self, b) -> int:
        data = _shown_bytes(self._hold + bytes(b))
        keep = _partial_tail(data)
        self._f.write(data[:len(data) - keep])
        self._hold = data[len(data) - keep:]
        return len(b)

    def flush(self) -> None:
        if self._hold:
            self._f.write(self._hold)
            self._hold = b""
        self._f.flush()

    def close(self) -> None:
        self.flush()
        self._f.close()

    def __getattr__(self, name):
        return getattr(self._f, name)


def _partial_tail(data: bytes) -> int:
    """Length of the longest end of ``data`` that is the beginning of some staged shadow path."""
    best = 0
    for shadow in _stages.values():
        s = os.fsencode(str(shadow))
        for n in range(min(len(s) - 1, len(data)), best, -1):
            if data.endswith(s[:n]):
                best = n
                break
    return best


def show_urls_on_streams():
    """Until the returned function is called (it flushes and puts the streams back), stdout and stderr show
    every store staged by this process by its URL, not its shadow (NDJSON, tables, notes and errors alike).
    The shadow's own path is plain ASCII (see :func:`stage`), so it reads the same escaped or not; the URL
    put in its place is escaped by :func:`_safe_url`."""
    import sys

    was = {}
    for name in ("stdout", "stderr"):
        cur = getattr(sys, name)
        try:
            cur.flush()
            binary = cur.buffer
        except (AttributeError, ValueError):
            continue
        was[name] = cur
        setattr(sys, name, io.TextIOWrapper(io.BufferedWriter(_ShownWriter(binary)), encoding=cur.encoding,
                                            errors=cur.errors, line_buffering=cur.line_buffering or name == "stderr"))

    def undo():
        for name, cur in was.items():
            wrapped = getattr(sys, name)
            try:
                wrapped.flush()
            except (OSError, ValueError):
                pass
            setattr(sys, name, cur)

    return undo


def _shadow_file(path: Path, size: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        os.ftruncate(fd, size)
    finally:
        os.close(fd)


# ---- fetching on open -----------------------------------------------------------------------------------------

_docs: dict[str, dict] = {}         # shadow root -> its mark document
_fs_cache: dict[str, object] = {}


def _shadow_root_of(path: str) -> Path | None:
    """The shadow root that ``path`` lies in, or None. Only a private directory of ours counts (directly in the
    temporary directory, owned by this user, no access for others, as mkdtemp makes it): a local store that
    merely looks like a shadow is an input, and nothing is ever fetched into it."""
    tmp = os.path.realpath(tempfile.gettempdir())
    real = os.path.realpath(path)
    if not real.startswith(tmp + os.sep):
        return None
    rest = real[len(tmp) + 1:].split(os.sep)
    if len(rest) < 3 or not rest[0].startswith(_ROOT_PREFIX) or rest[1] != "tree":
        return None
    root = Path(tmp) / rest[0]
    try:
        st = os.stat(root, follow_symlinks=False)
    except OSError:
        return None
    if st.st_uid != os.getuid() or st.st_mode & 0o077:
        return None
    return root


def _entry(path):
    """(shadow root, its mark document, the file's path in it, its entry) of a shadow file, or None."""
    root = _shadow_root_of(os.fspath(path))
    if root is None or not (root / _MARK).is_file():
        return None
    key = str(root)
    doc = _docs.get(key)
    if doc is None:
        doc = _docs[key] = json.loads((root / _MARK).read_text())
    rel = os.path.relpath(os.path.realpath(path), os.path.realpath(root))
    ent = doc["files"].get(rel)
    return None if ent is None else (root, doc, rel, ent)


def _state_file(root: Path, rel: str) -> Path:
    return root / "state" / hashlib.sha256(rel.encode("utf-8", "surrogateescape")).hexdigest()


def chunk_size() -> int:
    """Bytes per ranged request and per unit of the shadow's fetch map: ``MQTOOL_REMOTE_CHUNK_MB`` (MiB, a
    positive integer; default 8). Fixed for a staged store when it is staged (kept in its mark)."""
    raw = os.environ.get("MQTOOL_REMOTE_CHUNK_MB")
    if not raw:
        return BLOCK
    try:
        mb = int(raw)
    except ValueError:
        mb = 0
    if mb <= 0:
        raise InputError("MQTOOL_REMOTE_CHUNK_MB must be a positive whole number of MiB", "environment")
    return mb << 20


def cache_limit() -> int:
    """Bytes of fetched chunks this process keeps in the shadows before it evicts the least recently used
    ones: ``MQTOOL_REMOTE_CACHE_MB`` (MiB; default 1024)."""
    raw = os.environ.get("MQTOOL_REMOTE_CACHE_MB")
    try:
        mb = int(raw) if raw else CACHE_MB
    except ValueError:
        mb = -1
    if mb <= 0:
        raise InputError("MQTOOL_REMOTE_CACHE_MB must be a positive whole number of MiB", "environment")
    return mb << 20


CACHE_MB = 1024
_lru: OrderedDict = OrderedDict()   # ((shadow root, rel), chunk number) -> bytes; chunks this process fetched
_cached = [0]                       # their total
_pins: dict[tuple[str, str], int] = {}      # (shadow root, rel) -> maps that need the file whole
_pinned: dict = {}                          # ((shadow root, rel), chunk number) -> readers that need that chunk
_handles: OrderedDict = OrderedDict()       # (url, key) -> an open remote file (seek + read = one ranged GET)
_MAX_HANDLES = 8
_recent: OrderedDict = OrderedDict()    # file -> (first chunk, end chunk) of its latest fill: the window in use
_RECENT_FILES = 8
_known: dict = {}       # path as given -> None (no shadow) or (root, doc, rel, entry, chunks known fetched)


def _after_fork_in_child() -> None:
    """A worker forked from a process that fetched (``--jobs``): it evicts only what it fetches itself, so it
    drops the parent's cache list (else it could punch out chunks the parent still reads), and opens its own
    remote files and filesystems."""
    _lru.clear()
    _cached[0] = 0
    _pins.clear()
    _pinned.clear()
    _close_use_files()                  # the parent's: this process takes its own locks
    _known.clear()
    _recent.clear()
    _handles.clear()
    _fs_cache.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _chunk_of(doc: dict) -> int:
    return int(doc.get("chunk") or BLOCK)


def fetched_prefix(path) -> int | None:
    """How many leading bytes of the shadow file ``path`` are fetched (its size when all are); None when
    ``path`` is not the shadow of a remote file (its bytes are all there)."""
    e = _entry(path)
    if e is None:
        return None
    root, doc, rel, ent = e
    try:
        bits = _state_file(root, rel).read_bytes()
    except OSError:
        return 0
    n = len(bits) - len(bits.lstrip(b"\x01"))
    return min(ent["size"], n * _chunk_of(doc))


def fill_range(path, start: int, end: int | None) -> None:
    """Before bytes ``[start, end)`` of ``path`` are read (``end`` None: to its end): when it is the shadow
    of a remote file, fetch the chunks of that range not fetched yet (one ranged request each, written into
    the sparse shadow), under the file's lock so that processes sharing the shadow fetch each chunk once.
    Anything else: nothing to do. Chunks this process knows are there cost a lookup, no system call."""
    key = path if type(path) is str else os.fspath(path)
    k = _known.get(key, False)
    if k is False:
        e = _entry(path)
        k = _known[key] = None if e is None else (e + (bytearray(-(-e[3]["size"] // _chunk_of(e[1]))),))
    if k is None:
        return
    root, doc, rel, ent, have = k
    size = ent["size"]
    end = size if end is None else min(size, end)
    start = max(0, start)
    if start >= end:
        return
    c = _chunk_of(doc)
    lo, hi = start // c, (end - 1) // c + 1
    fkey = (str(root), rel)
    moved = _recent.get(fkey) != (lo, hi)
    _recent[fkey] = (lo, hi)                # the window in use in this file: not evicted
    _recent.move_to_end(fkey)
    if moved:
        _relock(fkey)                       # ... by any process (then the fetch map is read again below)
    if len(_recent) > _RECENT_FILES:
        _relock(_recent.popitem(last=False)[0])
    for i in range(lo, hi):                 # recently used: evicted last
        if (fkey, i) in _lru:
            _lru.move_to_end((fkey, i))
    if not moved and have.find(0, lo, hi) < 0:
        return
    fd = os.open(_state_file(root, rel), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        bits = os.pread(fd, hi, 0).ljust(hi, b"\x00")
        missing = [i for i in range(lo, hi) if bits[i] != 1]
        for i in range(lo, hi):
            have[i] = bits[i] == 1
        if missing:
            url = doc["url"]
            shown = _url_of(doc, ent)
            out = os.open(os.path.join(root, rel), os.O_WRONLY)
            try:
                for i in missing:
                    pos, n = i * c, min(c, size - i * c)
                    _fetch_into(url, ent["key"], shown, out, pos, n, root)
                    os.pwrite(fd, b"\x01", i)
                    have[i] = 1
                    _lru[(fkey, i)] = n
                    _cached[0] += n
            finally:
                os.close(out)
    finally:
        os.close(fd)
    if _cached[0] > cache_limit():
        _evict(cache_limit())


def _url_of(doc: dict, ent: dict) -> str:
    """The URL of a staged file as errors name it: the store's URL and the file's key below it."""
    top, key = doc.get("top"), ent["key"]
    if top is not None and (key == top or key.startswith(top.rstrip("/") + "/")):
        return doc["url"] + key[len(top.rstrip("/")):]
    return f"{doc['protocol']}://{key}"


def _remote_file(url: str, key: str):
    h = _handles.get((url, key))
    if h is None:
        fs = _fs_cache.get(url)
        if fs is None:
            fs = _fs_cache[url] = filesystem(url)[0]
        h = _handles[(url, key)] = _open_ranged(fs, key)
        while len(_handles) > _MAX_HANDLES:
            _close_quietly(_handles.popitem(last=False)[1])
    else:
        _handles.move_to_end((url, key))
    return h


def _close_quietly(h) -> None:
    try:
        h.close()
    except Exception:       # noqa: BLE001 -- a remote handle that cannot close cleanly holds nothing of ours
        pass


def _fetch_into(url: str, key: str, shown: str, out: int, pos: int, n: int, root=None) -> None:
    """Bytes ``[pos, pos + n)`` of the remote file, written at ``pos`` of the shadow (``out``)."""
    try:
        f = _remote_file(url, key)
        got = 0
        while got < n:
            data = _read_range(f, pos + got, pos + n)
            if not data:
                raise InputError("remote file is shorter than listed (changed while staged?)", shown, pos + got)
            os.pwrite(out, data, pos + got)
            got += len(data)
        _count(url, got, root)
    except InputError:
        raise
    except (OSError, ValueError, RuntimeError) as e:
        _close_quietly(_handles.pop((url, key), None) or io.BytesIO())
        raise InputError(f"remote read failed: {e}", shown, pos) from None


def _read_range(f, start: int, end: int) -> bytes:
    """Bytes ``[start, end)`` of the open remote file ``f`` in one request: fsspec's buffered files fetch a
    range exactly with ``_fetch_range`` (their read would go through a read-ahead cache that some
    filesystems, WebHDFS among them, always use); other file objects seek and read."""
    fetch = getattr(f, "_fetch_range", None)
    if fetch is not None and getattr(f, "size", None) is not None:
        return fetch(start, end)
    f.seek(start)
    return f.read(end - start)


def peek(path, n: int) -> bytes | None:
    """The first ``n`` bytes of the shadow file ``path`` fetched straight into memory (one ranged request,
    nothing written to the shadow): what a header probe costs. None when ``path`` is no shadow, when ``n``
    is more than a chunk or when its first chunk is fetched already (read the shadow then)."""
    e = _entry(path)
    if e is None:
        return None
    root, doc, rel, ent = e
    if n > _chunk_of(doc):
        return None
    try:
        if _state_file(root, rel).read_bytes()[:1] == b"\x01":
            return None
    except OSError:
        pass
    n = min(n, ent["size"])
    if n <= 0:
        return b""
    url, shown = doc["url"], _url_of(doc, ent)
    try:
        data = _read_range(_remote_file(url, ent["key"]), 0, n)
    except (OSError, ValueError, RuntimeError) as e:
        raise InputError(f"remote read failed: {e}", shown, 0) from None
    _count(url, len(data), root)
    return data


def pin(path, start: int = 0, end: int | None = None):
    """While the returned function is not called, no chunk of the shadow file ``path`` is evicted (a reader
    that maps it without saying which ranges it reads needs all of it), or with ``start``/``end`` no chunk of
    that range (a reader that fetched it and reads it again later); None for anything else."""
    e = _entry(path)
    if e is None:
        return None
    fkey = (str(e[0]), e[2])
    if start == 0 and end is None:
        table, keys = _pins, [fkey]
    else:
        c = _chunk_of(e[1])
        stop = e[3]["size"] if end is None else min(end, e[3]["size"])
        table, keys = _pinned, [(fkey, i) for i in range(max(0, start) // c, (stop - 1) // c + 1)]
    for k in keys:
        table[k] = table.get(k, 0) + 1
    _relock(fkey)
    done = []

    def unpin():
        if not done:
            done.append(1)
            for k in keys:
                left = table.get(k, 1) - 1
                if left > 0:
                    table[k] = left
                else:
                    table.pop(k, None)
            _relock(fkey)
            if _cached[0] > cache_limit():      # what the pin kept past the cache goes now, not at the next fetch
                _evict(cache_limit())
    return unpin


def _evict(limit: int) -> None:
    """Drop the least recently used chunks this process fetched until they total at most ``limit`` bytes
    (pinned files, and the range of the latest fill of each of the last 8 files read — the window a reader
    is in — excepted): the chunk is marked missing in the fetch map, then its blocks are released
    (``fallocate(PUNCH_HOLE)``; the shadow stays a sparse file of the remote size). A chunk read again is
    fetched again. The windows are spared newest first while they fit in ``limit`` (the newest always): the
    window a reader left in a file it no longer reads must not hold the cache full (every later fetch would
    evict what the current reader fetched just ahead). Chunks another process is in are spared too
    (:func:`_relock`)."""
    spared, total = {}, 0
    for fkey in reversed(_recent):
        lo, hi = _recent[fkey]
        total += (hi - lo) * _chunk_of(_docs.get(fkey[0]) or {})
        if spared and total > limit:
            break
        spared[fkey] = (lo, hi)
    for k in list(_lru):
        if _cached[0] <= limit:
            return
        fkey, i = k
        win = spared.get(fkey)
        if fkey in _pins or k in _pinned or (win is not None and win[0] <= i < win[1]):
            continue
        use = _use_fd(fkey)
        try:
            if use is not None:
                fcntl.lockf(use, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, i)
        except OSError:
            continue                        # another process reads in this chunk: kept
        root, rel = fkey
        n = _lru.pop(k)
        _cached[0] -= n
        c = _chunk_of(_docs.get(root) or {})
        try:
            fd = os.open(_state_file(Path(root), rel), os.O_RDWR)
        except OSError:
            _unlock(use, i, 1)
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.pwrite(fd, b"\x00", i)
            for k in _known.values():
                if k is not None and str(k[0]) == root and k[2] == rel:
                    k[4][i] = 0
            out = os.open(os.path.join(root, rel), os.O_WRONLY)
            try:
                if not _punch(out, i * c, n):
                    os.pwrite(fd, b"\x01", i)      # the file system keeps the blocks: the bytes stay good
            finally:
                os.close(out)
        except OSError:
            pass
        finally:
            os.close(fd)
            _unlock(use, i, 1)
            held = _used.get(fkey)
            if held is not None:
                held[1].discard(i)          # (a chunk of an old window of this process: its lock went with it)


# ---- chunks in use, across processes ---------------------------------------------------------------------------
#
# Processes that share a shadow (--jobs workers, Spark executors of one machine) each evict only the chunks they
# fetched, but they read each other's. So each process holds a shared record lock (``fcntl.lockf``) on byte i
# of a file's *use file* (its fetch map's name + ".use") for every chunk i it is in: the window of its latest
# fetch request in the file (as :func:`_evict` spares it in-process), its pinned chunks, all of a file pinned
# whole. A process evicts a chunk only under an exclusive lock on that byte taken without waiting: a chunk that
# another process is in is kept. A reader whose window moves takes its locks first, then reads the fetch map
# again (a chunk evicted before it got there is fetched again). The use file stays open while the process
# runs: closing any descriptor of a file drops all of the process's record locks on it.

_use_fds: dict = {}         # (shadow root, rel) -> descriptor of its use file
_used: dict = {}            # (shadow root, rel) -> (all chunks?, set of chunk numbers) this process holds locks on


def _use_fd(fkey):
    fd = _use_fds.get(fkey)
    if fd is None:
        try:
            fd = os.open(str(_state_file(Path(fkey[0]), fkey[1])) + ".use",
                         os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
        except OSError:
            return None
        _use_fds[fkey] = fd
    return fd


def _close_use_files() -> None:
    for fd in _use_fds.values():
        try:
            os.close(fd)
        except OSError:
            pass
    _use_fds.clear()
    _used.clear()


def _unlock(fd, start: int, n: int) -> None:
    if fd is not None:
        try:
            fcntl.lockf(fd, fcntl.LOCK_UN, n, start)
        except OSError:
            pass


def _runs(ids) -> list[tuple[int, int]]:
    """(start, length) of the runs of consecutive numbers in ``ids``."""
    out: list = []
    for i in sorted(ids):
        if out and out[-1][0] + out[-1][1] == i:
            out[-1] = (out[-1][0], out[-1][1] + 1)
        else:
            out.append((i, 1))
    return out


def _relock(fkey) -> None:
    """Make this process's locks on the use file of ``fkey`` the chunks it is in now (window, pins): the new
    ones are taken (waiting for an eviction in progress) before the old ones are released."""
    whole = fkey in _pins
    want = set()
    if not whole:
        win = _recent.get(fkey)
        if win is not None:
            want.update(range(win[0], win[1]))
        want.update(i for (f, i) in _pinned if f == fkey)
    old_whole, old = _used.get(fkey, (False, set()))
    if whole == old_whole and want == old:
        return
    fd = _use_fd(fkey)
    if fd is None:
        return
    try:
        if whole:
            fcntl.lockf(fd, fcntl.LOCK_SH, 0, 0)             # from byte 0 to any end
        else:
            for a, n in _runs(want - (set() if old_whole else old)):
                fcntl.lockf(fd, fcntl.LOCK_SH, n, a)
            if old_whole:
                at = 0
                for a, n in _runs(want):
                    if a > at:
                        _unlock(fd, at, a - at)
                    at = a + n
                _unlock(fd, at, 0)                          # (length 0: to any end)
            else:
                for a, n in _runs(old - want):
                    _unlock(fd, a, n)
    except OSError:
        return
    if whole or want:
        _used[fkey] = (whole, want)
    else:
        _used.pop(fkey, None)


_libc = []


def _punch(fd: int, pos: int, n: int) -> bool:
    """Release the blocks of ``[pos, pos + n)`` of ``fd`` (they read as zeros after); False where the system
    cannot."""
    if not _libc:
        try:
            import ctypes
            import ctypes.util

            lib = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            lib.fallocate.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64)
            _libc.append(lib)
        except (OSError, AttributeError):
            _libc.append(None)
    lib = _libc[0]
    return lib is not None and lib.fallocate(fd, 3, pos, n) == 0      # FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE


# ---- bounded reads: a prefix first, more only when the answer needs it ---------------------------------------

FIRST_PREFIX = 1 << 20          # bytes of each mapped remote file fetched for the first try of a bounded read
PREFIX_GROWTH = 16              # each further try fetches this many times more (the last try: whole files)
MAX_BOUNDED_ROWS = 10000        # rows a bounded read holds back while it tries (beyond: whole files at once)
# how much of a remote file's shadow mqtool.io.MappedInput has fetched before it maps it (None: all of it)
MAP_PREFIX: list = [None]


def is_staged(path) -> bool:
    """``path`` lies in the shadow of a remote store staged by this process."""
    return _ROOT_PREFIX in os.fspath(path) and _shadow_root_of(os.fspath(path)) is not None


def first_rows(run, limit: int):
    """The first ``limit`` rows of a dump over staged remote stores, fetching a prefix of each file it maps
    instead of the whole file. ``run()`` starts the dump afresh and returns ``(rows, state)``; the result is
    ``(first rows, state of the try that gave them)``.

    Why the rows are those of a whole-file read: a walker maps the file and reads it in order; bytes past
    the fetched prefix read as zeros. A row (a unit, a batch, a damage report) that ends inside the
    prefix was decided from fetched bytes only (a unit is decoded from its own bytes; a forward scan for the
    next unit stops at the first one it finds, and one found inside the prefix is the one the whole file
    has). So a try is kept when each of its ``limit`` rows ends inside the fetched prefix of its file.
    Otherwise (a row reaching past the prefix, a row without a position, or fewer rows than ``limit``
    while a mapped file is not all fetched: the walk may have stopped at the zeros) the dump is started
    again with a prefix ``PREFIX_GROWTH`` times longer, finally with whole files, and the rows and state of
    the discarded try are dropped (nothing of it was shown)."""
    if limit > MAX_BOUNDED_ROWS or not _stages:
        return run()
    prefix = FIRST_PREFIX
    while True:
        MAP_PREFIX[0] = prefix
        rows, state = run()
        got: list = []
        ok = True
        try:
            for r in rows:
                got.append(r)
                if prefix is not None and not _inside_fetched(r):
                    ok = False
                    break
                if len(got) >= limit:
                    break
            else:
                ok = prefix is None or not _partly_fetched()
        finally:
            MAP_PREFIX[0] = None
            close = getattr(rows, "close", None)
            if close is not None:
                close()
        if ok:
            return iter(got), state
        prefix = None if prefix >= max((e["size"] for _, e in _staged_files()), default=0) \
            else prefix * PREFIX_GROWTH


def _inside_fetched(row) -> bool:
    """The row's bytes (``file``, ``position``, ``size``) lie in what is fetched of its file."""
    if not isinstance(row, dict):
        return False
    file, pos, size = row.get("file"), row.get("position"), row.get("size")
    if not isinstance(file, str):
        return False
    have = fetched_prefix(file)
    if have is None:
        return True                 # a local file
    if not isinstance(pos, int) or not isinstance(size, int):
        return False
    return pos + size <= have


def _staged_files():
    for shadow in _stages.values():
        root = _shadow_root_of(str(shadow))
        if root is None:
            continue
        doc = _docs.get(str(root)) or json.loads((root / _MARK).read_text())
        for rel, ent in doc["files"].items():
            yield root / rel, ent


def _partly_fetched() -> bool:
    """Some file of a staged store is fetched in part (a prefix of it)."""
    for path, ent in _staged_files():
        have = fetched_prefix(path)
        if have is not None and 0 < have < ent["size"]:
            return True
    return False


def _open_ranged(fs, key: str):
    """``key`` opened for reading with no read-ahead cache (each read is one ranged request of what it asks);
    filesystems whose ``open`` takes no such options are opened plainly."""
    try:
        return fs.open(key, "rb", block_size=BLOCK, cache_type="none")
    except TypeError:
        return fs.open(key, "rb")


def shadows_of(paths) -> list[tuple[str, str]]:
    """(shadow root, its mark document) of the staged shadows among ``paths``: what a Spark reader carries to
    its executors so that :func:`restore` can rebuild a shadow on a machine that lacks it."""
    out = []
    for p in paths:
        root = _shadow_root_of(os.fspath(p))
        if root is not None and (root / _MARK).is_file() and str(root) not in [r for r, _ in out]:
            out.append((str(root), (root / _MARK).read_text()))
    return out


def carried_env() -> dict[str, str]:
    """What an executor needs to reach the storage as the driver does: the driver's ``AWS_*`` variables,
    ``MQTOOL_STORAGE_OPTIONS`` and the chunk and cache sizes (``MQTOOL_REMOTE_*``), sent with the tasks in
    memory as Spark sends its Hadoop configuration, never written to disk. :func:`restore` sets those the
    executor does not have itself."""
    return {k: v for k, v in os.environ.items()
            if k.startswith(("AWS_", "MQTOOL_REMOTE_")) or k == "MQTOOL_STORAGE_OPTIONS"}


def restore(shadows, env: dict | None = None) -> None:
    """On an executor: make each shadow of :func:`shadows_of` exist at the same local path (names and sparse
    sizes only; bytes are fetched by this machine when its tasks open them). Built beside it and renamed into
    place, so concurrent tasks on one machine agree on one copy."""
    for k, v in (env or {}).items():
        os.environ.setdefault(k, v)
    for root, text in shadows:
        rootp = Path(root)
        if (rootp / _MARK).is_file():
            _forget_if_new(root)
            continue
        doc = json.loads(text)
        try:
            rootp.parent.mkdir(parents=True, exist_ok=True)
            build = Path(tempfile.mkdtemp(prefix=".build-", dir=rootp.parent))
        except OSError as e:
            raise InputError(f"cannot rebuild the local shadow of a remote store: {e}", root) from None
        for rel, ent in doc["files"].items():
            parts = rel.split("/")
            if not all(_plain_component(x) for x in parts):
                continue
            local = build.joinpath(*parts)
            local.parent.mkdir(parents=True, exist_ok=True)
            _shadow_file(local, int(ent["size"]))
        (build / "tree").mkdir(exist_ok=True)
        (build / "state").mkdir()
        (build / _MARK).write_text(text)
        try:
            os.rename(build, rootp)
        except OSError:                     # another task made it first
            shutil.rmtree(build, ignore_errors=True)
        _forget_if_new(root)


_root_ino: dict[str, int] = {}


def _forget_if_new(root: str) -> None:
    """A shadow this process knew may have been removed and rebuilt since (an executor's temporary directory
    cleaned): what this process remembers of it (fetched chunks, its mark) is then dropped."""
    try:
        ino = os.stat(root).st_ino
    except OSError:
        return
    if _root_ino.get(root) == ino:
        return
    _root_ino[root] = ino
    _docs.pop(root, None)
    for key in [k for k, v in _known.items() if v is not None and str(v[0]) == root]:
        del _known[key]
    for k in [k for k in _lru if k[0][0] == root]:
        _cached[0] -= _lru.pop(k)
    _pins_now = [k for k in _pins if k[0] == root]
    for k in _pins_now:
        del _pins[k]
    for k in [k for k in _pinned if k[0][0] == root]:
        del _pinned[k]
    for k in [k for k in _use_fds if k[0] == root]:
        os.close(_use_fds.pop(k))
        _used.pop(k, None)


# ---- outputs ---------------------------------------------------------------------------------------------------

def export_to(url: str, force: bool, write) -> dict:
    """Run ``write(local_dir)`` (an export into a fresh private directory), then :func:`upload_tree` it to
    ``url``; the local copy is removed either way. Returns what ``write`` returned."""
    filesystem(url)                 # a missing fsspec or a bad URL fails before the export runs
    tmp = Path(tempfile.mkdtemp(prefix="mqtool-upload-"))
    try:
        counts = write(tmp / "out")
        upload_tree(tmp / "out", url, force)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return counts


def upload_tree(local: Path, url: str, force: bool) -> None:
    """Copy the finished local dataset ``local`` to ``url``: every file first under a temporary prefix
    (``url/.mqtool-tmp-<random>/``), then copied to its final key and the temporary keys removed.

    Object stores have no rename and no multi-object transaction: readers may see some final keys before
    the others appear, and a key that appears between the existence check and the copy is overwritten. What
    is promised: nothing is written under ``url`` when the export fails before upload, an existing key is
    never replaced without ``force``, and a dataset whose upload broke leaves at most the temporary prefix."""
    import secrets

    fs, top = filesystem(url)
    top = top.rstrip("/")
    rels = sorted(p.relative_to(local).as_posix() for p in local.rglob("*") if p.is_file())
    if not force:
        clash = [r for r in rels if fs.exists(f"{top}/{r}")]
        if clash:
            raise OutputError("exists (use --force to overwrite)", f"{url.rstrip('/')}/{clash[0]}")
    tmp = f"{top}/.mqtool-tmp-{secrets.token_hex(8)}"
    try:
        for r in rels:
            fs.put_file(str(local / r), f"{tmp}/{r}")
        for r in rels:
            fs.copy(f"{tmp}/{r}", f"{top}/{r}")
    except (OSError, ValueError) as e:
        raise OutputError(f"cannot write: {e}", url) from None
    finally:
        try:
            fs.rm(tmp, recursive=True)
        except (OSError, ValueError):
            pass
