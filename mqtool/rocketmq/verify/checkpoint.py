"""The checkpoint file: its size, its values (times, offsets) and its times against the commitlog data."""
from __future__ import annotations

import os
from collections.abc import Iterator

from formats import rocketmq as F
from mqtool.errors import InputError
from mqtool.findings import ERROR, INFO, WARNING, Finding, checkpoint_value_problems
from mqtool.rocketmq import indexfiles
from mqtool.schemacache import offsets
from mqtool.rocketmq.verify.context import _Ctx


def _verify_checkpoint(ctx: _Ctx) -> Iterator[Finding]:
    store = ctx.store
    if store.checkpoint:
        try:
            size = os.path.getsize(store.checkpoint)
        except OSError:
            size = None           # reported below when it cannot be read
        if size is not None and size != F.CHECKPOINT_FILE_SIZE:
            yield ctx.f(WARNING, "checkpoint-size", store.checkpoint, 0, None,
                        f"checkpoint is {size} bytes, the broker maps {F.CHECKPOINT_FILE_SIZE}",
                        F.CHECKPOINT_FILE_SIZE, size)
        try:
            cp = indexfiles.read_checkpoint(store.checkpoint)
        except InputError as e:
            yield ctx.f(ERROR, "file-unreadable", store.checkpoint, None, None, f"cannot read: {e.message}")
            cp = None
        if cp is not None:
            yield from _checkpoint_values(ctx, cp)
        if cp is not None and ctx.last_store_ts:
            phys = cp["physicMsgTimestamp"]
            if phys > ctx.last_store_ts:
                yield ctx.f(WARNING, "checkpoint-ahead", store.checkpoint, 0, None,
                            f"physicMsgTimestamp {phys} is newer than the last message in the commitlog "
                            f"({ctx.last_store_ts}): flushed data is missing", ctx.last_store_ts, phys)
            elif phys < ctx.last_store_ts:
                yield ctx.f(INFO, "checkpoint-behind", store.checkpoint, 0, None,
                            f"messages stored after the checkpoint's physicMsgTimestamp {phys} "
                            f"(last message {ctx.last_store_ts}): written after the last flush record",
                            ctx.last_store_ts, phys)
    elif store.root and store.segments:
        yield ctx.f(INFO, "checkpoint-missing", store.root, None, None, "no checkpoint file")


# StoreCheckpoint (reference §7): three epoch-ms times, then 5.x offsets. confirmPhyOffset is a commitlog offset
# of this store (the broker truncates to it at recovery); masterFlushedOffset is the master's, which a slave
# may not have yet, so only its sign is checked.
_CP_TIMES = ("physicMsgTimestamp", "logicsMsgTimestamp", "indexMsgTimestamp")


def _checkpoint_values(ctx: _Ctx, cp: dict) -> Iterator[Finding]:
    segs = ctx.store.segments
    # where the data ends (the range runner of --jobs does not track it: the end of the files bounds it)
    end = (ctx.data_end if ctx.data_end is not None else segs[-1].end) if segs else None
    for name in _CP_TIMES + ("masterFlushedOffset", "confirmPhyOffset"):
        for sev, code, msg, exp, act in checkpoint_value_problems(
                name, cp[name], time=name in _CP_TIMES, log_end=end if name == "confirmPhyOffset" else None):
            yield ctx.f(sev, code, ctx.store.checkpoint, _CP_AT[name], None, msg, exp, act)


_CP_AT = offsets(F, "Checkpoint")
