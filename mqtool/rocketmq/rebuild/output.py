"""Writing rebuilt files under ``--out`` (consumequeue/<topic>/<queueId>/<name>, index/<name>, checkpoint)."""
from __future__ import annotations

import os
import threading
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING

from formats import rocketmq as F
from mqtool.io import OutputDir, WriteBatch, start_writeback
from mqtool.rocketmq.rebuild.consumequeue import UNIT
from mqtool.rocketmq.rebuild.index import IndexFileBuilder

if TYPE_CHECKING:
    from mqtool.rocketmq.rebuild.replay import RebuildResult


class DirSink:
    """Writes rebuilt files under ``out`` (consumequeue/<topic>/<queueId>/<name>, index/<name>, checkpoint).

    Consumequeue files (immutable bytes) are written by a few background threads, so their writes overlap each
    other and the rest of the run; each is still atomic and durable: written under a temporary name (the disk
    starts on it at once), published by :meth:`flush` with all the others (:class:`mqtool.io.WriteBatch`: one
    flush, then the renames, then the directories; a store of thousands of queues paid two flushes per file).
    An index file can be streamed (:meth:`index_stream`): its entries are written by the same threads while it
    is built, its header and slot table when it is finished. Creating a file under the output root (directory
    lookup, temp name) is serialised by a lock; :meth:`flush` waits for every write, publishes the complete
    files and raises the first error."""

    WRITERS = 4

    def __init__(self, out: OutputDir, force: bool, trim: bool):
        self.out, self.force, self.trim = out, force, trim
        self.written = 0
        self._lock = threading.RLock()
        self._batch = WriteBatch(out, lock=self._lock)
        self._pool = None
        self._pending: list = []
        self._dirs: list = []                   # queue directories being made ahead of their files
        self._streams: set = set()              # index files being streamed, not finished yet

    def _submit(self, fn, *args):
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor   # (here: only --out needs it)

            self._pool = ThreadPoolExecutor(self.WRITERS, thread_name_prefix="mqtool-rebuild-out")
        return self._pool.submit(fn, *args)

    def cq_file(self, topic: str, queue_id: int, name: str, data: bytes, last: bool, size: int) -> None:
        """``data``: the units; the file is ``size`` bytes, zero after them (written sparse), or with
        ``--trim`` the last file ends after its last non-zero unit."""
        if last and self.trim:
            data = data.rstrip(b"\x00")
            data += bytes(-len(data) % UNIT)
            size = len(data)
        path = Path("consumequeue", topic, str(queue_id), name)
        self._bounded()
        self._pending.append(self._submit(self._write, path, [data], max(size, len(data)), False))

    def queue_dir(self, topic: str, queue_id: int) -> None:
        """A queue got its first unit: its directory is made now, in the background (its files come at the end
        of the run, all at once: making thousands of directories then was part of the run's tail). Best
        effort: a directory that cannot be made here fails the file's own write, in its place."""
        self._dirs.append(self._submit(self._make_dir, ("consumequeue", topic, str(queue_id))))

    def _make_dir(self, rel: tuple) -> None:
        with self._lock:
            self.out.dir_fd(rel)

    def _bounded(self) -> None:
        if len(self._pending) >= 2 * self.WRITERS:          # bounded: at most this many files' bytes held
            self._pending.pop(0).result()
            self.written += 1

    def index_file(self, name: str, ib: "IndexFileBuilder") -> None:
        stream = ib.stream
        if stream is None:
            pieces, size = ib.parts()           # (here: the builder is read again by --compare after this)
            self._write(Path("index", name), pieces, size)
            return
        if stream.name != name:
            raise AssertionError(f"index file streamed as {stream.name} is finished as {name}")
        self._streams.discard(stream)
        self._bounded()                         # header, slot table, the last entries: in the background
        self._pending.append(self._submit(stream.finish, lambda: ib.head_pieces(last_use=True), ib.entries,
                                          ib.file_size))

    def index_stream(self, name: str, entries_at: int) -> "_IndexStream":
        """An index file (``index/<name>``) written while it is built: ``put(entries)`` writes the next
        entries (from ``entries_at`` on) in the background; :meth:`index_file` finishes it."""
        stream = _IndexStream(self, name, entries_at)
        self._streams.add(stream)
        return stream

    def flush(self) -> None:
        """Wait for the background writes and publish the files (:class:`~mqtool.io.WriteBatch`); the first
        error is raised (the others' files are published, complete)."""
        pending, self._pending = self._pending, []
        error = None
        for fut in self._dirs:
            fut.exception()                     # (see queue_dir: the file's write reports the problem)
        self._dirs.clear()
        for fut in pending:
            try:
                fut.result()
                self.written += 1
            except BaseException as e:          # noqa: BLE001 - re-raised below, after every write ended
                error = error or e
        for stream in list(self._streams):      # never finished (the run failed): no file, no temp file left
            self._streams.discard(stream)
            stream.abort()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        try:
            self._batch.commit()
        except BaseException as e:              # noqa: BLE001 - raised below unless an earlier error was
            error = error or e
        if error is not None:
            raise error

    def _write(self, path: Path, pieces: list, size: int, count: bool = True, batch: bool = True) -> None:
        """The pieces, then zeros up to ``size`` as a hole (reads back as zeros; no page is written for it);
        published by :meth:`flush` (``batch``) or now."""
        with self._lock:                        # the output root's directory cache is not thread-safe
            w = self.out.atomic(path, overwrite=self.force, batch=self._batch if batch else None)
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
        self._write(Path("checkpoint"), [data], len(data), batch=False)     # (after flush: published now)
        self.written += 1


class _IndexStream:
    """One index file written while it is built (see :meth:`DirSink.index_stream`): entries at their place as
    they become final (``os.pwrite`` on the file's temporary name, in the sink's threads, at most two pieces
    in flight), then the header and slot table at offset 0, the size, fsync and rename (:mod:`mqtool.io`'s
    atomic writer: an interrupted run leaves no file under the name)."""

    def __init__(self, sink: DirSink, name: str, entries_at: int):
        self.sink, self.name, self.at = sink, name, entries_at
        with sink._lock:
            self._w = sink.out.atomic(Path("index", name), overwrite=sink.force, batch=sink._batch)
            self._f = self._w.__enter__()
        self._fd = self._f.fileno()
        self._inflight: deque = deque()

    def put(self, data) -> None:
        """Write ``data`` (entries; no longer changed by the caller) after the ones put before."""
        while len(self._inflight) >= 2:
            self._inflight.popleft().result()
        self._inflight.append(self.sink._submit(_pwrite_all, self._fd, data, self.at, True))
        self.at += len(data)

    def finish(self, head_pieces, tail, size: int) -> None:
        """(In a writer thread.) The last entries, the header and slot table (``head_pieces()``), the size."""
        try:
            while self._inflight:
                self._inflight.popleft().result()
            _pwrite_all(self._fd, tail, self.at)
            at = 0
            for piece in head_pieces():
                _pwrite_all(self._fd, piece, at)
                at += len(piece)
            self._f.truncate(max(size, self.at + len(tail)))
        except BaseException as e:
            self._w.__exit__(type(e), e, e.__traceback__)
            raise
        self._w.__exit__(None, None, None)

    def abort(self) -> None:
        for fut in self._inflight:
            try:
                fut.result()
            except BaseException:               # noqa: BLE001 - the file is dropped anyway
                pass
        self._inflight.clear()
        err = RuntimeError("rebuild ended before this index file was finished")
        try:
            self._w.__exit__(RuntimeError, err, None)
        except BaseException:                   # noqa: BLE001 - dropping the temporary file is best effort
            pass


def _pwrite_all(fd: int, data, at: int, writeback: bool = False) -> None:
    """``data`` at ``at``; ``writeback``: the disk starts on it now (the flush at the end waits less)."""
    view = memoryview(data).cast("B")
    start = at
    while view:
        n = os.pwrite(fd, view, at)
        view, at = view[n:], at + n
    if writeback:
        start_writeback(fd, start, at - start)


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
