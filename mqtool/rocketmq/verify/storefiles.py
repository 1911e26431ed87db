"""Store-level checks: the abort marker, then the checkpoint (:mod:`.checkpoint`) and the config files
(:mod:`.config`)."""
from __future__ import annotations

from collections.abc import Iterator

from mqtool.findings import WARNING, Finding
from mqtool.rocketmq.verify.checkpoint import _verify_checkpoint
from mqtool.rocketmq.verify.config import _verify_config
from mqtool.rocketmq.verify.context import _Ctx


def _verify_store_files(ctx: _Ctx) -> Iterator[Finding]:
    store = ctx.store
    if store.abort:
        yield ctx.f(WARNING, "unclean-shutdown", store.abort, None, None,
                    "abort file present: the broker did not shut down cleanly. On restart it recovers from the "
                    "checkpoint, truncates the commitlog after the last valid message and deletes index files "
                    "newer than the checkpoint — verify and copy before restarting")
    yield from _verify_checkpoint(ctx)
    yield from _verify_config(ctx)
