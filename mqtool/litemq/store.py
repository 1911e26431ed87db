"""Where things are in a LiteMQ broker data directory, and whether a path is LiteMQ at all.

Layout (pkg/broker/broker.go NewBroker, pkg/storage/*)::

    <data>/commitlog/00000000000000000000 ...        file *index* (%020d), no extension, preallocated
    <data>/consumequeue/<topic>/<queueId>/<%020d>    24-byte entries, preallocated
    <data>/checkpoint/checkpoint                     a file inside a directory of the same name
    <data>/abort/abort                               a file inside a directory of the same name
    <data>/index/                                    empty in practice

LiteMQ's document names segments ``<20 digits>.log``; those names are accepted too.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from formats import litemq as F
from formats import rocketmq as _R
from mqtool.errors import MqToolError, NotAStoreError
from mqtool.io import is_regular_file, open_input, read_input
from mqtool.plainclass import dataclass, field

#: RocketMQ's message magics (a RocketMQ commitlog is told apart from a LiteMQ one by them)
_ROCKETMQ_MAGICS = frozenset(m.to_bytes(4, "big", signed=True)
                             for m in (_R.MESSAGE_MAGIC_CODE_V1, _R.MESSAGE_MAGIC_CODE_V2))


def is_rocketmq_magic(b: bytes) -> bool:
    return bytes(b) in _ROCKETMQ_MAGICS


SEGMENT_RE = re.compile(r"^(\d{20})(\.log)?$")
_MAX_UP = 4


def segment_index(name: str) -> int | None:
    m = SEGMENT_RE.match(name)
    return int(m.group(1)) if m else None


@dataclass
class Segment:
    index: int
    path: Path
    size: int
    base: int = 0            # global offset of byte 0 (index * nominal file size)

    @property
    def name(self) -> str:
        return self.path.name


@dataclass
class Store:
    """A (possibly partial) LiteMQ data directory and what the user pointed at."""

    root: Path | None
    target: Path
    kind: str                # root | commitlog | segment | consumequeue | cq_topic | cq_queue | cq_file |
    #                          checkpoint | index_dir | index_file | abort
    notes: list = field(default_factory=list)

    def _sub(self, name: str) -> Path | None:
        return self.root / name if self.root is not None else None

    @property
    def commitlog_dir(self) -> Path | None:
        if self.kind == "commitlog":
            return self.target
        if self.kind == "segment":
            return self.target.parent
        return self._sub("commitlog")

    @property
    def consumequeue_dir(self) -> Path | None:
        return self._sub("consumequeue")

    @property
    def checkpoint_file(self) -> Path | None:
        if self.kind == "checkpoint":
            return self.target
        d = self._sub("checkpoint")
        return d / "checkpoint" if d is not None else None

    @property
    def abort_file(self) -> Path | None:
        if self.kind == "abort":
            return self.target
        d = self._sub("abort")
        return d / "abort" if d is not None else None

    @property
    def index_dir(self) -> Path | None:
        if self.kind == "index_dir":
            return self.target
        return self._sub("index")

    def display(self, p: Path) -> str:
        """Path relative to the store root when possible (stable in findings and rows)."""
        base = self.root if self.root is not None else self.target.parent
        try:
            return str(Path(p).relative_to(base))
        except ValueError:
            return str(p)


def _head(path: Path, n: int = 8) -> bytes:
    try:
        return read_input(path, n)
    except Exception:
        return b""


def _gz_head(path: Path, n: int = 8) -> bytes:
    try:
        import gzip

        with open_input(path) as raw, gzip.GzipFile(fileobj=raw, mode="rb") as f:
            return f.read(n)
    except (OSError, EOFError, MqToolError):
        return b""


def list_segments(d: Path) -> list[Segment]:
    """Commitlog (or consumequeue) files of a directory, in file-index order."""
    segs = []
    try:
        entries = list(os.scandir(d))
    except OSError:
        return []
    for e in entries:
        idx = segment_index(e.name)
        try:
            if idx is None or not e.is_file():
                continue
            size = e.stat().st_size
        except OSError:              # a symlink loop, a file gone meanwhile: see irregular_segments
            continue
        segs.append(Segment(idx, Path(e.path), size))
    segs.sort(key=lambda s: (s.index, s.path.name))
    return segs


def irregular_segments(d: Path) -> list[tuple[Path, str]]:
    """Entries of a directory named like a segment that are no readable regular file (directory, FIFO,
    device, socket, symlink loop or dangling link), with the reason; :func:`list_segments` leaves them out."""
    import stat as st

    out = []
    try:
        entries = list(os.scandir(d))
    except OSError:
        return []
    for e in entries:
        if segment_index(e.name) is None:
            continue
        try:
            mode = os.stat(e.path).st_mode
        except OSError as err:
            out.append((Path(e.path), f"cannot stat: {err.strerror}"))
            continue
        if st.S_ISREG(mode):
            continue
        kind = ("directory" if st.S_ISDIR(mode) else "FIFO" if st.S_ISFIFO(mode) else
                "device" if st.S_ISCHR(mode) or st.S_ISBLK(mode) else "socket" if st.S_ISSOCK(mode) else "special")
        out.append((Path(e.path), f"not a regular file ({kind})"))
    return sorted(out)


def nominal_file_size(segs: list[Segment]) -> int:
    """The commitlog file size: every LiteMQ file is preallocated to it (the most common size)."""
    if not segs:
        return 0
    sizes = [s.size for s in segs if s.size]
    if not sizes:
        return 0
    return max(set(sizes), key=lambda v: (sizes.count(v), v))


def assign_bases(segs: list[Segment]) -> int:
    fs = nominal_file_size(segs)
    for s in segs:
        s.base = s.index * fs
    return fs


def _looks_like_root(d: Path) -> bool:
    return (d / "commitlog").is_dir() or ((d / "consumequeue").is_dir() and
                                          ((d / "checkpoint").is_dir() or (d / "abort").is_dir()))


def _find_root(p: Path) -> Path | None:
    cur = p if p.is_dir() else p.parent
    for _ in range(_MAX_UP + 1):
        if _looks_like_root(cur):
            return cur
        if cur.parent == cur:
            break
        cur = cur.parent
    return None


def _parts_below(p: Path, root: Path) -> tuple[str, ...]:
    """``p``'s path components below ``root`` (an ancestor :func:`_find_root` found by walking up ``p``'s
    path): compared as written, not resolved, so a part that is a symlink to another disk (a commitlog/
    mounted elsewhere) is still that part."""
    return Path(os.path.abspath(p)).relative_to(os.path.abspath(root)).parts


def _root_score(root: Path) -> int:
    cl = root / "commitlog"
    segs = list_segments(cl) if cl.is_dir() else []
    for s in segs[:4]:
        h = _head(s.path)
        if len(h) >= 8 and h[4:8] == F.MESSAGE_MAGIC_BYTES:
            return 100
        if len(h) >= 8 and is_rocketmq_magic(h[4:8]):
            return 0
    # no record to look at: decide by LiteMQ's directories (RocketMQ's checkpoint/abort are files)
    if (root / "checkpoint").is_dir() or (root / "abort").is_dir():
        return 60
    return 0


def sniff(path) -> int:
    """0 = not LiteMQ; 100 = certain (a record or file magic says so)."""
    p = Path(path)
    if is_regular_file(p):
        h = _head(p)
        if len(h) >= 8 and h[4:8] == F.MESSAGE_MAGIC_BYTES:
            return 100
        if len(h) >= 4 and int.from_bytes(h[:4], "big") in (F.CHECKPOINT_MAGIC, F.INDEX_MAGIC):
            return 100
        if h[:2] == b"\x1f\x8b" and int.from_bytes(_gz_head(p)[:4], "big") == F.INDEX_MAGIC:
            return 90
        root = _find_root(p)
        if root is None:
            return 0
        score = _root_score(root)
        if not score:
            return 0
        if p.parent.name == "abort" or p.parent.name == "checkpoint" or "consumequeue" in p.parts \
                or p.parent.name in ("commitlog", "index"):
            return score - 10
        return 0
    if p.is_dir():
        root = _find_root(p)
        if root is not None:
            return _root_score(root)
        # a bare directory of segments (a copied commitlog/)
        for s in list_segments(p)[:4]:
            h = _head(s.path)
            if len(h) >= 8 and h[4:8] == F.MESSAGE_MAGIC_BYTES:
                return 90
        return 0
    return 0


def resolve(path) -> Store:
    """What a path is inside a LiteMQ store. Raises NotAStoreError when it is none of the known parts."""
    p = Path(path)
    root = _find_root(p)
    if p.is_dir():
        if root is not None and p.resolve() == root.resolve():
            return Store(root, p, "root")
        if root is None:
            if list_segments(p):
                return Store(None, p, "commitlog")
            raise NotAStoreError("not a LiteMQ data directory (no commitlog/)", str(p))
        rel = _parts_below(p, root)
        if rel == ("commitlog",):
            return Store(root, p, "commitlog")
        if rel == ("consumequeue",):
            return Store(root, p, "consumequeue")
        if len(rel) == 2 and rel[0] == "consumequeue":
            return Store(root, p, "cq_topic")
        if len(rel) == 3 and rel[0] == "consumequeue":
            return Store(root, p, "cq_queue")
        if rel == ("index",):
            return Store(root, p, "index_dir")
        if rel in (("checkpoint",), ("abort",)):
            return Store(root, p / rel[0], rel[0])
        if list_segments(p):
            return Store(None, p, "commitlog")
        raise NotAStoreError("not a LiteMQ store part", str(p))
    if not is_regular_file(p):
        raise NotAStoreError("not a regular file or directory", str(p))
    h = _head(p)
    if len(h) >= 4 and int.from_bytes(h[:4], "big") == F.CHECKPOINT_MAGIC:
        return Store(root, p, "checkpoint")
    if len(h) >= 4 and int.from_bytes(h[:4], "big") == F.INDEX_MAGIC or \
            (h[:2] == b"\x1f\x8b" and int.from_bytes(_gz_head(p)[:4], "big") == F.INDEX_MAGIC):
        return Store(root, p, "index_file")
    if root is not None:
        rel = _parts_below(p, root)
        if len(rel) == 4 and rel[0] == "consumequeue":
            return Store(root, p, "cq_file")
        if rel == ("abort", "abort"):
            return Store(root, p, "abort")
        if rel == ("checkpoint", "checkpoint"):
            return Store(root, p, "checkpoint")
        if rel[0] == "index":
            return Store(root, p, "index_file")
        if rel[0] == "commitlog":
            return Store(root, p, "segment")
    if len(h) >= 8 and h[4:8] == F.MESSAGE_MAGIC_BYTES:
        return Store(root, p, "segment")
    if p.name == "abort" or p.parent.name == "abort":
        return Store(root, p, "abort")
    raise NotAStoreError("not a LiteMQ store file", str(p))


def commitlog_segments(store: Store) -> tuple[list[Segment], int]:
    """Segments to scan and the nominal file size. A single segment file is scanned alone."""
    d = store.commitlog_dir
    segs = list_segments(d) if d is not None and d.is_dir() else []
    fs = assign_bases(segs)
    if store.kind == "segment":
        segs = [s for s in segs if s.path.name == store.target.name] or \
               [Segment(segment_index(store.target.name) or 0, store.target, store.target.stat().st_size)]
        if not fs:
            fs = segs[0].size
            segs[0].base = segs[0].index * fs
    return segs, fs


@dataclass
class Queue:
    topic: str
    queue_id: int
    dir: Path
    files: list


def list_queues(store: Store, topic: str | None = None, queue: int | None = None) -> list[Queue]:
    """Consumequeues under the store (or the part pointed at), sorted by topic and queue id."""
    base = store.consumequeue_dir
    out: list[Queue] = []
    if store.kind == "cq_file":
        qd = store.target.parent
        segs = [s for s in list_segments(qd) if s.path.name == store.target.name]
        try:
            qid = int(qd.name)
        except ValueError:
            qid = -1
        return [Queue(qd.parent.name, qid, qd, segs)]
    if store.kind == "cq_queue":
        candidates = [(store.target.parent.name, store.target)]
    elif store.kind == "cq_topic":
        candidates = [(store.target.name, q) for q in _subdirs(store.target)]
    else:
        if base is None or not base.is_dir():
            return []
        candidates = [(t.name, q) for t in _subdirs(base) for q in _subdirs(t)]
    for tname, qd in candidates:
        try:
            qid = int(qd.name)
        except ValueError:
            continue
        if topic is not None and tname != topic:
            continue
        if queue is not None and qid != queue:
            continue
        segs = list_segments(qd)
        out.append(Queue(tname, qid, qd, segs))
    out.sort(key=lambda q: (q.topic, q.queue_id))
    return out


def _subdirs(d: Path) -> list[Path]:
    try:
        return sorted((Path(e.path) for e in os.scandir(d) if e.is_dir()), key=lambda x: x.name)
    except OSError:
        return []


def index_files(store: Store) -> list:
    """The key-index files of a store (the file itself when one index file was given)."""
    if store.kind == "index_file":
        return [store.target]
    d = store.index_dir
    if d is None or not d.is_dir():
        return []
    return sorted(p for p in d.iterdir() if p.is_file() and not p.name.startswith("."))


def nothing_written(store: Store) -> bool:
    """No consume-queue or index file of the store holds a byte: nothing was ever written to it (a fresh
    broker's, whose commitlog/ holds no file yet either). Queue and index files appear only with their first
    entry (LiteMQ preallocates them then)."""
    for q in list_queues(store):
        if any(s.size for s in q.files):
            return False
    for p in index_files(store):
        try:
            if p.stat().st_size:
                return False
        except OSError:
            return False            # a file we cannot even stat: not the picture of a fresh store
    return True
