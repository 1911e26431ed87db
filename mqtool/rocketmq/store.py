"""RocketMQ store layout: recognise a store root / part / single file and list what is where.

A store root holds ``commitlog/``, ``consumequeue/``, ``index/``, ``checkpoint``, ``abort``, ``lock`` and
``config/``; any of them may be missing in a damaged or harvested store. Commitlog segments are named by their
20-digit start offset; the global offset of a byte is ``int(name) + position``.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from formats import rocketmq as F
from mqtool.common import is_segment_name
from mqtool.errors import NotAStoreError
from mqtool.io import is_regular_file, read_input
from mqtool.plainclass import dataclass, field

_MAGICS = {F.MESSAGE_MAGIC_CODE_V1, F.MESSAGE_MAGIC_CODE_V2, F.BLANK_MAGIC_CODE}
_INDEX_NAME = re.compile(r"^\d{17}$")


@dataclass(frozen=True)
class Segment:
    path: str
    name: str
    base: int      # global offset of byte 0
    size: int      # file size on disk

    @property
    def end(self) -> int:
        return self.base + self.size


def segment_gaps(segs: list[Segment]) -> list[tuple[Segment, Segment]]:
    """(previous, next) for every pair of consecutive segment files with bytes missing between them: the
    names are global offsets, so a file that starts after the end of the one before means a lost file (or a
    truncated one). A 0-byte file tells nothing about its size and makes no gap."""
    return [(a, b) for a, b in zip(segs, segs[1:]) if a.size and b.base > a.end]


def common_size(segs: list[Segment]) -> int:
    """The segment size the files agree on: the size most files but the last have (the last may be short)."""
    sizes = [s.size for s in segs]
    return max(set(sizes[:-1]), key=sizes.count) if len(segs) > 1 else sizes[0]


def gap_cause(prev: Segment, seg: Segment, common: int) -> str:
    """Why the bytes between ``prev`` and ``seg`` (a pair of :func:`segment_gaps`) are in no file, ``common``
    being the segment size: ``prev`` is short by exactly the gap (the names are consecutive: no file is
    missing), else a file is missing (or ``prev`` is short as well)."""
    if prev.size < common and prev.base + common == seg.base:
        return (f"{prev.name} ends {seg.base - prev.end} bytes short of the segment size (truncated); no file is "
                "missing between them")
    return (f"a segment file is missing between {prev.name} and {seg.name}"
            + (" (or that one was truncated)" if prev.size != common else ""))


@dataclass
class QueueFiles:
    topic: str
    queue_id: int
    dir: str
    files: list[Segment] = field(default_factory=list)   # base = byte offset in the queue (units × 20)


@dataclass
class RocketStore:
    """What a path holds. ``root`` is None when a single part or file was given."""

    path: str
    root: str | None = None
    commitlog_dir: str | None = None
    segments: list[Segment] = field(default_factory=list)
    consumequeue_dir: str | None = None
    cq_file: str | None = None          # a single consumequeue file was given
    index_dir: str | None = None
    index_files: list[str] = field(default_factory=list)
    checkpoint: str | None = None
    abort: str | None = None
    lock: str | None = None
    config_dir: str | None = None
    extra_files: list[str] = field(default_factory=list)
    unreadable: list[tuple[str, str]] = field(default_factory=list)   # (dir, reason) met while listing

    def _ls(self, p: Path) -> list[str]:
        try:
            return os.listdir(p)
        except OSError as e:
            if (str(p), e.strerror) not in self.unreadable:
                self.unreadable.append((str(p), e.strerror or str(e)))
            return []

    # ---- consumequeue discovery ----
    def queues(self, topic: str | None = None, queue_id: int | None = None) -> list[QueueFiles]:
        out: list[QueueFiles] = []
        if self.cq_file:
            p = Path(self.cq_file)
            qid = _int_or(p.parent.name, 0)
            q = QueueFiles(p.parent.parent.name, qid, str(p.parent),
                           [_segment(p, _int_or(p.name, 0))])
            return [q]
        if not self.consumequeue_dir:
            return out
        base = Path(self.consumequeue_dir)
        topics = sorted(d for d in self._ls(base) if (base / d).is_dir())
        for t in topics:
            if topic is not None and t != topic:
                continue
            for qd in sorted(self._ls(base / t), key=lambda s: (_int_or(s, 1 << 62), s)):
                if not (base / t / qd).is_dir():
                    continue
                qid = _int_or(qd, None)
                if qid is None or (queue_id is not None and qid != queue_id):
                    continue
                files = sorted((f for f in self._ls(base / t / qd) if is_segment_name(f)), key=int)
                out.append(QueueFiles(t, qid, str(base / t / qd),
                                      [_segment(base / t / qd / f, int(f)) for f in files]))
        return out


def _int_or(s: str, default):
    try:
        return int(s)
    except ValueError:
        return default


def _listdir(p: Path) -> list[str]:
    try:
        return os.listdir(p)
    except OSError:
        return []


def _segment(p: Path, base: int) -> Segment:
    try:
        size = os.stat(p).st_size
    except OSError:
        size = 0
    return Segment(str(p), p.name, base, size)


def _first_magic(p: Path) -> int | None:
    try:
        head = read_input(p, 8)
    except Exception:
        return None
    if len(head) < 8:
        return None
    return int.from_bytes(head[4:8], "big", signed=True)


def list_segments(d: Path) -> list[Segment]:
    names = sorted((n for n in _listdir(d) if is_segment_name(n)), key=int)
    return [_segment(d / n, int(n)) for n in names]


def _is_commitlog_dir(d: Path) -> bool:
    segs = [n for n in _listdir(d) if is_segment_name(n)]
    if not segs:
        return False
    for n in sorted(segs)[:3]:
        m = _first_magic(d / n)
        if m in _MAGICS:
            return True
    return False


def _holds_no_message(d: Path, most: int = 64) -> bool:
    """``d`` (a commitlog directory) has no segment file, or only files with no message at their start: 0 bytes
    long, or zero where the first unit's size and magic would be (what a broker pre-allocates and has not
    written yet). At most ``most`` files are looked at; more is no fresh store."""
    names = [n for n in _listdir(d) if is_segment_name(n)]
    if len(names) > most:
        return False
    for n in names:
        if not is_regular_file(d / n):
            return False
        try:
            head = read_input(d / n, 8)
        except Exception:
            return False
        if head.strip(b"\0"):
            return False
    return True


def _fresh_root(p: Path) -> bool:
    """``p`` is a RocketMQ store root whose commitlog holds no message yet (a fresh broker's, or one whose
    files are all empty): its commitlog directory says nothing, so the rest of the root must: a consumequeue/,
    config/ or index/ directory, or an abort or lock file, and nothing of LiteMQ's layout (checkpoint/ and
    abort/ are directories there)."""
    if not _holds_no_message(p / "commitlog") or (p / "checkpoint").is_dir() or (p / "abort").is_dir():
        return False
    return any((p / d).is_dir() for d in ("consumequeue", "config", "index")) \
        or any(is_regular_file(p / f) for f in ("abort", "lock"))


def sniff(path) -> int:
    """How sure we are that ``path`` is (part of) a RocketMQ store: 0 no … 100 certain."""
    p = Path(path)
    if p.is_dir():
        if (p / "commitlog").is_dir():
            if _is_commitlog_dir(p / "commitlog"):
                return 100
            if (p / "checkpoint").is_dir():          # LiteMQ keeps checkpoint/checkpoint
                return 0
            if is_regular_file(p / "checkpoint") and os.path.getsize(p / "checkpoint") == F.CHECKPOINT_FILE_SIZE:
                return 70
            return 60 if _fresh_root(p) else 0
        if p.name == "commitlog" and _is_commitlog_dir(p):
            return 100
        if p.name == "commitlog" and _fresh_root(p.parent):
            return 60
        if is_regular_file(p / "checkpoint") and os.path.getsize(p / "checkpoint") == F.CHECKPOINT_FILE_SIZE:
            return 70
        if (p / "config").is_dir() and any(n.endswith(".json") for n in _listdir(p / "config")) \
                and not (p / "checkpoint").is_dir():
            return 60
        if p.name == "config" and any(n.endswith((".json", ".json.bak")) for n in _listdir(p)):
            return 50
        if p.name == "index" and any(_INDEX_NAME.match(n) for n in _listdir(p)):
            return 70
        for anc in (p, p.parent, p.parent.parent):
            if anc.name == "consumequeue":
                root = anc.parent
                if (root / "checkpoint").is_dir() or (root / "abort").is_dir():   # LiteMQ's layout
                    return 0
                return 40
        return 0
    if not is_regular_file(p):
        return 0
    name = p.name
    if is_segment_name(name):
        m = _first_magic(p)
        if m in _MAGICS:
            return 100
        if p.parent.parent.parent.name == "consumequeue" and os.path.getsize(p) % F.CQ_STORE_UNIT_SIZE == 0:
            return 60
        return 0
    if _INDEX_NAME.match(name):
        return 60
    if name == "checkpoint" and os.path.getsize(p) == F.CHECKPOINT_FILE_SIZE:
        return 60
    if name.endswith((".json", ".json.bak")) and p.parent.name == "config":
        return 50
    return 0


def open_store(path) -> RocketStore:
    """Resolve what ``path`` is: a store root, one of its parts, or a single file."""
    p = Path(path)
    s = RocketStore(path=str(p))
    if p.is_file():
        if is_segment_name(p.name) and _first_magic(p) in _MAGICS:
            s.segments = [_segment(p, int(p.name))]
            s.commitlog_dir = str(p.parent)
        elif is_segment_name(p.name):
            s.cq_file = str(p)
        elif _INDEX_NAME.match(p.name):
            s.index_files = [str(p)]
        elif p.name == "checkpoint":
            s.checkpoint = str(p)
        elif p.name in ("abort", "lock"):
            setattr(s, p.name, str(p))
        else:
            s.extra_files = [str(p)]
        return s
    if not p.is_dir():
        raise NotAStoreError("not a file or directory", str(p))
    if p.name == "commitlog" and not (p / "commitlog").is_dir():
        s.commitlog_dir = str(p)
        s.segments = list_segments(p)
        parent = p.parent
        if (parent / "consumequeue").is_dir() or (parent / "index").is_dir() or (parent / "checkpoint").is_file():
            _fill_root(s, parent, keep_commitlog=True)
        return s
    if p.name == "index" and not (p / "commitlog").is_dir():
        s.index_dir = str(p)
        s.index_files = sorted(str(p / n) for n in _listdir(p) if _INDEX_NAME.match(n))
        return s
    if p.name == "config" and not (p / "commitlog").is_dir():
        s.config_dir = str(p)
        return s
    if "consumequeue" in (p.name, p.parent.name, p.parent.parent.name) and not (p / "commitlog").is_dir():
        _fill_cq_subtree(s, p)
        return s
    _fill_root(s, p)
    return s


def _fill_cq_subtree(s: RocketStore, p: Path) -> None:
    """A consumequeue dir, a topic dir or a queue dir: expose it as a (filtered) consumequeue root."""
    if p.name == "consumequeue":
        s.consumequeue_dir = str(p)
        root = p.parent
    elif p.parent.name == "consumequeue":
        s.consumequeue_dir = str(p.parent)
        s.extra_files = [f"topic={p.name}"]
        root = p.parent.parent
    else:
        s.consumequeue_dir = str(p.parent.parent)
        s.extra_files = [f"topic={p.parent.name}", f"queue={p.name}"]
        root = p.parent.parent.parent
    if (root / "commitlog").is_dir():
        s.root = str(root)
        s.commitlog_dir = str(root / "commitlog")
        s.segments = list_segments(root / "commitlog")


def _fill_root(s: RocketStore, p: Path, keep_commitlog: bool = False) -> None:
    s.root = str(p)
    if not keep_commitlog and (p / "commitlog").is_dir():
        s.commitlog_dir = str(p / "commitlog")
        s.segments = list_segments(p / "commitlog")
    if (p / "consumequeue").is_dir():
        s.consumequeue_dir = str(p / "consumequeue")
    if (p / "index").is_dir():
        s.index_dir = str(p / "index")
        s.index_files = sorted(str(p / "index" / n) for n in _listdir(p / "index") if _INDEX_NAME.match(n))
    for name in ("checkpoint", "abort", "lock"):
        if os.path.lexists(p / name):
            setattr(s, name, str(p / name))
    if (p / "config").is_dir():
        s.config_dir = str(p / "config")


def forced_commitlog(s: RocketStore) -> list[Segment]:
    """Segments to read as commitlog: the store's, or the single 20-digit file given (read as a commitlog
    because the user asked for one, whatever its first bytes say)."""
    if s.segments:
        return s.segments
    if s.cq_file:
        p = Path(s.cq_file)
        return [_segment(p, int(p.name))]
    return []


def cq_filter(s: RocketStore) -> tuple[str | None, int | None]:
    """(topic, queue) implied by a path that named a topic or queue directory."""
    topic = queue = None
    for e in s.extra_files:
        if e.startswith("topic="):
            topic = e[6:]
        elif e.startswith("queue="):
            queue = _int_or(e[6:], None)
    return topic, queue
