"""The shared state of one RocketMQ verify run (:class:`_Ctx`) and the per-file loop every file check uses."""
from __future__ import annotations

from collections.abc import Iterator

from mqtool.errors import InputError
from mqtool.findings import ERROR, Finding, Summary
from mqtool.options import VerifyOptions
from mqtool.rocketmq.store import RocketStore


class _Ctx:
    """Shared state of one verify run."""

    def __init__(self, store: RocketStore, opts: VerifyOptions):
        self.store = store
        self.opts = opts
        self.summary = Summary()
        self.aborted = bool(store.abort)
        # per (topic, queue): highest queue offset a dispatched message claims (+1) and how many we saw
        self.dispatched_next: dict[tuple[str, int], int] = {}
        # per (topic, queue): where its last message checked ends (global offset): a queue-offset gap found at
        # the next one follows from damage after there (Finding.lost_from)
        self.queue_end: dict[tuple[str, int], int] = {}
        self.last_store_ts = 0
        self.data_end: int | None = None       # global offset where commitlog data ends
        self.salvage = None
        self.xref = None       # what the commitlog pass saw of each message (verify/native_lane.new_xref), or None
        self.want_xref = False     # the consumequeue and index checks follow the commitlog pass (run.py)
        self.index_ahead = None    # index checks run on a thread during the commitlog pass (verify/index.py)

    def f(self, severity, code, file, position, offset, message, expected=None, actual=None,
          span=None, lost_from=None) -> Finding:
        fd = Finding(severity, code, file, position, offset, message, expected, actual, span, lost_from=lost_from)
        self.summary.add(fd)
        return fd


def _each_file(ctx: _Ctx, items, reader, check, kind: str | None = None) -> Iterator[Finding]:
    """``check(item)``'s findings for every item; a file that cannot be read is one finding and the others go
    on. The shared commitlog ``reader`` is closed at the end. A runner with ``each_file`` (the distributed
    verify, :mod:`mqtool.rocketmq.verifyplan`) gives the findings of the ``kind`` ("queue", "index") items."""
    hook = getattr(ctx.opts.runner, "each_file", None) if kind else None
    if hook is not None:
        yield from hook(kind, ctx, items, reader, check)
        return
    try:
        for item in items:
            try:
                yield from check(item)
            except InputError as e:
                yield ctx.f(ERROR, "file-unreadable", e.file, e.offset, None, f"cannot read: {e.message}")
    finally:
        if reader is not None:
            reader.close()
