"""Recognise Kafka log dirs, partition dirs and single Kafka files; list segments in base-offset order.

A *log dir* holds ``<topic>-<partition>`` directories plus the text checkpoints and ``meta.properties``;
a *partition dir* holds ``<20-digit base offset>.log`` segments with their ``.index`` / ``.timeindex`` /
``.txnindex``, ``<offset>.snapshot`` files, ``leader-epoch-checkpoint`` and ``partition.metadata``.
``.deleted`` / ``.cleaned`` / ``.swap`` suffixes (appended to a normal name) are recognised and kept apart.
"""
from __future__ import annotations

import os
import re
import struct
import zlib
from pathlib import Path

from mqtool.errors import MqToolError
from mqtool.io import read_input
from mqtool.plainclass import dataclass, field

from formats import kafka as K

SEGMENT_FILE = re.compile(r"^(\d{20})\.(log|index|timeindex|txnindex|snapshot)((?:\.deleted|\.cleaned|\.swap)?)$")
KRAFT_SNAPSHOT = re.compile(r"^(\d{20})-(\d{10})\.checkpoint((?:\.deleted|\.part)?)$")
PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<part>\d+)(?P<suffix>\.[0-9a-f]{32}-(?:delete|future|stray)|-future|-stray|-delete)?\Z", re.S)
LOGDIR_CHECKPOINTS = ("recovery-point-offset-checkpoint", "replication-offset-checkpoint",
                      "log-start-offset-checkpoint", "cleaner-offset-checkpoint")
PARTITION_FILES = ("leader-epoch-checkpoint", "partition.metadata", "quorum-state")
KAFKA_NAMES = set(LOGDIR_CHECKPOINTS) | set(PARTITION_FILES) | {"bootstrap.checkpoint"}


@dataclass
class Segment:
    base_offset: int
    log: Path | None = None
    index: Path | None = None
    timeindex: Path | None = None
    txnindex: Path | None = None
    suffix: str = ""            # "", ".deleted", ".cleaned", ".swap"

    @property
    def name(self) -> str:
        return f"{self.base_offset:020d}"


@dataclass
class Partition:
    path: Path
    topic: str | None
    partition: int | None
    dir_suffix: str | None = None
    segments: list[Segment] = field(default_factory=list)          # live segments, base-offset order
    transient: list[Segment] = field(default_factory=list)         # .deleted / .cleaned / .swap
    snapshots: list[tuple[int, Path]] = field(default_factory=list)
    kraft_snapshots: list[tuple[int, int, Path]] = field(default_factory=list)
    leader_epoch_checkpoint: Path | None = None
    partition_metadata: Path | None = None
    quorum_state: Path | None = None

    @property
    def label(self) -> str:
        return self.path.name


@dataclass
class LogDir:
    path: Path | None
    partitions: list[Partition] = field(default_factory=list)
    checkpoints: dict[str, Path] = field(default_factory=dict)
    meta_properties: Path | None = None
    bootstrap_checkpoint: Path | None = None


def _listdir(p: Path) -> list[str]:
    try:
        return sorted(os.listdir(p))
    except OSError:
        return []


def _is_partition_dir(p: Path) -> bool:
    for n in _listdir(p):
        if SEGMENT_FILE.match(n) or KRAFT_SNAPSHOT.match(n) or n in PARTITION_FILES:
            return True
    return False


def _is_log_dir(p: Path) -> bool:
    names = _listdir(p)
    if any(n in LOGDIR_CHECKPOINTS or n == "bootstrap.checkpoint" for n in names):
        return True
    return any(PARTITION_DIR.match(n) and (p / n).is_dir() and _is_partition_dir(p / n) for n in names)


def _looks_like_log_bytes(path: Path) -> bool:
    """First entry of a file frames as a Kafka batch with a valid CRC (for oddly named .log files)."""
    try:
        head = read_input(path, 1 << 16)
    except (OSError, MqToolError):
        return False
    if len(head) < 17:
        return False
    size = struct.unpack_from(">i", head, 8)[0]
    magic = head[16]
    if size < K.MIN_RECORD_OVERHEAD or magic > 2 or 12 + size > len(head):
        return False
    entry = head[:12 + size]
    if magic == 2:
        from mqtool.fastcrc import crc32c
        return size >= 49 and crc32c(entry[21:]) == struct.unpack_from(">I", entry, 17)[0]
    return zlib.crc32(entry[16:]) == struct.unpack_from(">I", entry, 12)[0]


def sniff(path) -> int:
    """0 = not Kafka; 95 = certainly a Kafka file, partition dir or log dir; 60 = a dir holding such dirs."""
    p = Path(path)
    if p.is_file():
        n = p.name
        if SEGMENT_FILE.match(n) or KRAFT_SNAPSHOT.match(n):
            return 95
        if n in KAFKA_NAMES:
            return 90
        if n.endswith((".log", ".checkpoint")) and _looks_like_log_bytes(p):
            return 70
        return 0
    if not p.is_dir():
        return 0
    if _is_partition_dir(p) or _is_log_dir(p):
        return 95
    for n in _listdir(p):
        c = p / n
        if c.is_dir() and (_is_log_dir(c) or any((c / m).is_dir() and _is_log_dir(c / m) for m in _listdir(c))):
            return 60
    return 0


def partition_from_dir(p: Path) -> Partition:
    m = PARTITION_DIR.match(p.name)
    part = Partition(p, m.group("topic") if m else None, int(m.group("part")) if m else None,
                     m.group("suffix") if m else None)
    segs: dict[tuple[int, str], Segment] = {}
    for n in _listdir(p):
        f = p / n
        m = SEGMENT_FILE.match(n)
        if m:
            base, kind, suffix = int(m.group(1)), m.group(2), m.group(3)
            if kind == "snapshot":
                part.snapshots.append((base, f))
                continue
            seg = segs.setdefault((base, suffix), Segment(base, suffix=suffix))
            setattr(seg, kind, f)
            continue
        m = KRAFT_SNAPSHOT.match(n)
        if m:
            part.kraft_snapshots.append((int(m.group(1)), int(m.group(2)), f))
        elif n == "leader-epoch-checkpoint":
            part.leader_epoch_checkpoint = f
        elif n == "partition.metadata":
            part.partition_metadata = f
        elif n == "quorum-state":
            part.quorum_state = f
    for (base, suffix), seg in sorted(segs.items()):
        (part.segments if not suffix else part.transient).append(seg)
    part.snapshots.sort()
    part.kraft_snapshots.sort()
    return part


def looks_compacted(topic: str | None, interior_gaps: int) -> bool:
    """Offsets missing between segments are normal when the cleaner compacted the partition (it keeps the
    segment base offsets while removing records): an internal ``__`` topic, or offsets missing inside
    segments, says so."""
    return (topic or "").startswith("__") or interior_gaps > 0


def orphan_segments(part: Partition) -> list[tuple[Segment, str]]:
    """Segments that have index files but no ``.log``, each with where its base offset lies among the
    ``.log`` bases: "before" the first, "inside" (a middle or the last .log is missing), or "alone" (the
    partition has no .log at all)."""
    bases = [s.base_offset for s in part.segments if s.log is not None]
    out = []
    for s in part.segments:
        if s.log is None:
            out.append((s, "alone" if not bases else "before" if s.base_offset < bases[0] else "inside"))
    return out


def stray_snapshots(part: Partition) -> list[tuple[int, Path]]:
    """Producer snapshots with no ``.log`` of the same base offset, except the largest one when it lies past
    every segment base (the snapshot a clean shutdown writes at the log end): the files Kafka's
    ``ProducerStateManager.removeStraySnapshots`` deletes when it loads the partition."""
    bases = {s.base_offset for s in part.segments if s.log is not None}
    snaps = [(o, f) for o, f in part.snapshots if o not in bases]
    if snaps and (not bases or snaps[-1][0] > max(bases)):
        snaps = snaps[:-1]
    return snaps


def logdir_from_dir(p: Path) -> LogDir:
    ld = LogDir(p)
    for n in _listdir(p):
        f = p / n
        if f.is_dir() and _is_partition_dir(f):
            ld.partitions.append(partition_from_dir(f))
        elif n in LOGDIR_CHECKPOINTS:
            ld.checkpoints[n] = f
        elif n == "meta.properties":
            ld.meta_properties = f
        elif n == "bootstrap.checkpoint":
            ld.bootstrap_checkpoint = f
    ld.partitions.sort(key=lambda q: (q.topic or "", q.partition if q.partition is not None else -1, q.path.name))
    return ld


def discover(path) -> list[LogDir]:
    """Every log dir under ``path`` (a partition dir becomes a LogDir without a path)."""
    p = Path(path)
    if p.is_file():
        raise ValueError("discover() takes a directory")
    if _is_log_dir(p):
        return [logdir_from_dir(p)]
    if _is_partition_dir(p):
        return [LogDir(None, [partition_from_dir(p)])]
    out = []
    for n in _listdir(p):
        c = p / n
        if c.is_dir() and sniff(c):
            out.extend(discover(c))
    return out


def file_kind(path: Path) -> str | None:
    """log | index | timeindex | txnindex | snapshot | kraft-snapshot | offset-checkpoint | leader-epoch-checkpoint
    | partition-metadata | meta-properties | quorum-state | None."""
    n = path.name
    m = SEGMENT_FILE.match(n)
    if m:
        return m.group(2)
    if KRAFT_SNAPSHOT.match(n) or n == "bootstrap.checkpoint":
        return "kraft-snapshot"
    if n in LOGDIR_CHECKPOINTS:
        return "offset-checkpoint"
    if n == "leader-epoch-checkpoint":
        return "leader-epoch-checkpoint"
    if n == "partition.metadata":
        return "partition-metadata"
    if n == "meta.properties":
        return "meta-properties"
    if n == "quorum-state":
        return "quorum-state"
    for suf in (".log", ".index", ".timeindex", ".txnindex", ".snapshot"):
        if n.endswith(suf):
            return suf[1:]
    if n.endswith(".checkpoint"):
        return "kraft-snapshot"
    return None


def segment_base(path: Path) -> int:
    """Base offset from a segment-style file name (0 when the name carries none)."""
    m = re.match(r"^(\d{20})", path.name)
    return int(m.group(1)) if m else 0
