"""Writing rebuilt files under ``--out`` (consumequeue/<topic>/<queueId>/<name>, index/<name>, checkpoint)."""
from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING

from formats import rocketmq as F
from mqtool.io import OutputDir
from mqtool.rocketmq.rebuild.consumequeue import UNIT
from mqtool.rocketmq.rebuild.index import IndexFileBuilder

if TYPE_CHECKING:
    from mqtool.rocketmq.rebuild.replay import RebuildResult


class DirSink:
    """Writes rebuilt files under ``out`` (consumequeue/<topic>/<queueId>/<name>, index/<name>, checkpoint).

    Consumequeue files (immutable bytes) are written by a few background threads, so their writes and fsyncs
    overlap each other and the rest of the run; each is still atomic (temp name, fsync, rename, through
    :mod:`mqtool.io`). Creating a file under the output root (directory lookup, temp name) is serialised by a
    lock; :meth:`flush` waits for every write and raises the first error."""

    WRITERS = 4

    def __init__(self, out: OutputDir, force: bool, trim: bool):
        self.out, self.force, self.trim = out, force, trim
        self.written = 0
        self._lock = threading.Lock()
        self._pool = None
        self._pending: list = []

    def cq_file(self, topic: str, queue_id: int, name: str, data: bytes, last: bool, size: int) -> None:
        """``data``: the units; the file is ``size`` bytes, zero after them (written sparse), or with
        ``--trim`` the last file ends after its last non-zero unit."""
        if last and self.trim:
            data = data.rstrip(b"\x00")
            data += bytes(-len(data) % UNIT)
            size = len(data)
        path = Path("consumequeue", topic, str(queue_id), name)
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor   # (here: only --out needs it)

            self._pool = ThreadPoolExecutor(self.WRITERS, thread_name_prefix="mqtool-rebuild-out")
        if len(self._pending) >= 2 * self.WRITERS:          # bounded: at most this many files' bytes held
            self._pending.pop(0).result()
            self.written += 1
        self._pending.append(self._pool.submit(self._write, path, [data], max(size, len(data)), False))

    def index_file(self, name: str, ib: "IndexFileBuilder") -> None:
        pieces, size = ib.parts()               # (here: the builder is read again by --compare after this)
        self._write(Path("index", name), pieces, size)

    def flush(self) -> None:
        """Wait for the background writes; the first error is raised (the others' files are complete)."""
        pending, self._pending = self._pending, []
        error = None
        for fut in pending:
            try:
                fut.result()
                self.written += 1
            except BaseException as e:          # noqa: BLE001 - re-raised below, after every write ended
                error = error or e
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        if error is not None:
            raise error

    def _write(self, path: Path, pieces: list, size: int, count: bool = True) -> None:
        """The pieces, then zeros up to ``size`` as a hole (reads back as zeros; no page is written for it)."""
        with self._lock:                        # the output root's directory cache is not thread-safe
            w = self.out.atomic(path, overwrite=self.force)
            f = w.__enter__()
        try:
            n = 0
            for piece in pieces:
                f.write(piece)
                n += len(piece)
            if size > n:
                f.flush()
                f.truncate(size)
        except BaseException as e:
            w.__exit__(type(e), e, e.__traceback__)
            raise
        w.__exit__(None, None, None)
        if count:
            self.written += 1

    def checkpoint(self, data: bytes) -> None:
        self._write(Path("checkpoint"), [data], len(data))
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
