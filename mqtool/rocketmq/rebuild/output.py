"""Writing rebuilt files under ``--out`` (consumequeue/<topic>/<queueId>/<name>, index/<name>, checkpoint)."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from formats import rocketmq as F
from mqtool.io import OutputDir
from mqtool.rocketmq.rebuild.consumequeue import UNIT
from mqtool.rocketmq.rebuild.index import IndexFileBuilder

if TYPE_CHECKING:
    from mqtool.rocketmq.rebuild.replay import RebuildResult


class DirSink:
    """Writes rebuilt files under ``out`` (consumequeue/<topic>/<queueId>/<name>, index/<name>, checkpoint)."""

    def __init__(self, out: OutputDir, force: bool, trim: bool):
        self.out, self.force, self.trim = out, force, trim
        self.written = 0

    def cq_file(self, topic: str, queue_id: int, name: str, data: bytes, last: bool, size: int) -> None:
        """``data``: the units; the file is ``size`` bytes, zero after them (written sparse), or with
        ``--trim`` the last file ends after its last non-zero unit."""
        if last and self.trim:
            data = data.rstrip(b"\x00")
            data += bytes(-len(data) % UNIT)
            size = len(data)
        self._write(Path("consumequeue", topic, str(queue_id), name), [data], max(size, len(data)))

    def index_file(self, name: str, ib: "IndexFileBuilder") -> None:
        pieces, size = ib.parts()
        self._write(Path("index", name), pieces, size)

    def _write(self, path: Path, pieces: list, size: int) -> None:
        """The pieces, then zeros up to ``size`` as a hole (reads back as zeros; no page is written for it)."""
        with self.out.atomic(path, overwrite=self.force) as f:
            n = 0
            for piece in pieces:
                f.write(piece)
                n += len(piece)
            if size > n:
                f.flush()
                f.truncate(size)
        self.written += 1

    def checkpoint(self, data: bytes) -> None:
        self.out.write("checkpoint", data, overwrite=self.force)
        self.written += 1


def _safe_component(name: str) -> bool:
    return bool(name) and name not in (".", "..") and "/" not in name and "\\" not in name and "\x00" not in name


def checkpoint_bytes(res: RebuildResult) -> bytes:
    """A 4096-byte ``StoreCheckpoint`` consistent with the rebuilt files.

    physicMsgTimestamp = store time of the last commitlog message; logicsMsgTimestamp = store time of the last
    message given a consumequeue unit; indexMsgTimestamp = endTimestamp of the last *full* index file (0 if
    none), as the broker sets it at index rollover; masterFlushedOffset and confirmPhyOffset = 0, as a broker
    without controller/auto-switch HA leaves them.
    """
    return F.Checkpoint.build(dict(physicMsgTimestamp=res.last_store_ts, logicsMsgTimestamp=res.last_cq_ts,
                                   indexMsgTimestamp=res.last_full_index_end_ts, masterFlushedOffset=0,
                                   confirmPhyOffset=0))
