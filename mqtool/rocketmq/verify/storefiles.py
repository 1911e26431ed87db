"""Store-level checks: the abort marker, the checkpoint against the data, config files and their ``.bak``."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

from formats import rocketmq as F
from mqtool.errors import InputError
from mqtool.findings import ERROR, INFO, WARNING, Finding, checkpoint_value_problems
from mqtool.rocketmq import indexfiles
from mqtool.schema_struct import field_offsets
from mqtool.rocketmq.verify.context import _Ctx


def _verify_store_files(ctx: _Ctx) -> Iterator[Finding]:
    store = ctx.store
    if store.abort:
        yield ctx.f(WARNING, "unclean-shutdown", store.abort, None, None,
                    "abort file present: the broker did not shut down cleanly. On restart it recovers from the "
                    "checkpoint, truncates the commitlog after the last valid message and deletes index files "
                    "newer than the checkpoint — verify and copy before restarting")
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
    if store.config_dir:
        from mqtool.rocketmq.configfiles import load_config

        d = Path(store.config_dir)
        try:
            names = sorted(os.listdir(d))
        except OSError as e:
            yield ctx.f(ERROR, "config-unreadable", str(d), None, None, str(e))
            return
        for name in names:
            if not name.endswith(".json"):
                continue
            v, err = load_config(d / name)
            bak = d / (name + ".bak")
            if err:
                bv, berr = load_config(bak) if bak.exists() else (None, "no .bak")
                yield ctx.f(WARNING if berr is None else ERROR, "config-unparsable", str(d / name), None, None,
                            f"{err}" + ("; the .bak parses and the broker would load it" if berr is None else
                                        f"; no usable .bak ({berr})"))
                continue
            if bak.exists():
                bv, berr = load_config(bak)
                if berr:
                    yield ctx.f(WARNING, "config-bak-unparsable", str(bak), None, None, berr)
                elif bv != v:
                    yield ctx.f(INFO, "config-differs-from-bak", str(d / name), None, None,
                                f"{name} differs from its .bak ({_diff_summary(bv, v)})")


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


_CP_AT = field_offsets(F.Checkpoint)


def _diff_summary(old, new) -> str:
    if isinstance(old, dict) and isinstance(new, dict):
        parts = []
        for k in sorted(set(old) | set(new), key=str):
            if old.get(k) != new.get(k):
                o, n = old.get(k), new.get(k)
                if isinstance(o, dict) and isinstance(n, dict):
                    added = len(set(n) - set(o))
                    removed = len(set(o) - set(n))
                    changed = sum(1 for x in set(o) & set(n) if o[x] != n[x])
                    parts.append(f"{k}: +{added} -{removed} ~{changed}")
                else:
                    parts.append(f"{k} changed")
        return "; ".join(parts) or "same keys"
    return "content changed"
