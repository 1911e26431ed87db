"""``verify_store``: the checks of the part asked for, in order, as one findings iterator."""
from __future__ import annotations

from collections.abc import Iterator

from mqtool.errors import NotAStoreError
from mqtool.findings import Finding
from mqtool.options import VerifyOptions
from mqtool.rocketmq.store import RocketStore
from mqtool.rocketmq.verify.commitlog import _scan_for_dispatch, _verify_commitlog
from mqtool.rocketmq.verify.consumequeue import _verify_consumequeue
from mqtool.rocketmq.verify.context import _Ctx
from mqtool.rocketmq.verify.index import _verify_index, start_chains
from mqtool.rocketmq.verify.salvage import _Salvage
from mqtool.rocketmq.verify.storefiles import _verify_store_files


def verify_store(store: RocketStore, part: str, opts: VerifyOptions):
    """Returns (findings iterator, summary function) per the engine contract."""
    nothing = not (store.segments or store.consumequeue_dir or store.cq_file or store.index_files
                   or store.checkpoint or store.config_dir)
    if nothing:
        raise NotAStoreError("nothing to verify here (no commitlog, consumequeue, index, checkpoint or config)",
                             store.path)
    ctx = _Ctx(store, opts)
    ctx.want_xref = part in ("store", "consumequeue", "index")    # the cross-checks follow the commitlog pass

    def run() -> Iterator[Finding]:
        if opts.salvage_out:
            ctx.salvage = _Salvage(opts.salvage_out, store, opts.force)
        complete = False
        try:
            if part == "store":
                start_chains(ctx)             # the index files' chain checks, on a thread meanwhile
            if part in ("store", "commitlog"):
                yield from _verify_commitlog(ctx)
            # the index entry checks, on a thread during the queue checks (a distributed verify's merge: against
            # the table its tasks brought back, its runner's)
            table = ctx.xref if ctx.xref is not None else getattr(opts.runner, "xref", None)
            if ctx.index_ahead is not None and table is not None:
                ctx.index_ahead.check(table)
            elif part in ("consumequeue", "index"):
                yield from _scan_for_dispatch(ctx)
            if part in ("store", "consumequeue"):
                yield from _verify_consumequeue(ctx)
            if part in ("store", "index"):
                yield from _verify_index(ctx)
            if part == "store":
                yield from _verify_store_files(ctx)
            complete = True
        finally:
            if ctx.salvage is not None:
                # an interrupted run (error, Ctrl-C, consumer gone) discards its temp file: no half-written
                # salvage file ever appears under the final name
                ctx.salvage.close(commit=complete)
                ctx.summary.extra["salvaged"] = ctx.salvage.count
                ctx.summary.extra["salvage_file"] = ctx.salvage.path if complete else None

    return run(), lambda: ctx.summary
