"""What the broker's dispatcher does with a message (queue offsets it claims, LMQ targets): the state the
commitlog pass leaves for the consumequeue and index checks."""
from __future__ import annotations

from formats import rocketmq as F
from mqtool.rocketmq.records import Message
from mqtool.rocketmq.verify.context import _Ctx


def queue_step(m: Message) -> int:
    """How many queue offsets ``m`` takes: INNER_NUM for an inner batch (at least 1), else 1."""
    if m.sys_flag & F.INNER_BATCH_FLAG:
        try:
            return max(1, int(m.prop("INNER_NUM") or 1))
        except ValueError:
            return 1
    return 1


def _note_dispatch(ctx: _Ctx, m: Message) -> tuple[str, int] | None:
    """Record what the broker's dispatcher does with ``m``; returns its (topic, queue) when dispatched."""
    if m.store_timestamp > ctx.last_store_ts:
        ctx.last_store_ts = m.store_timestamp
    txn = m.sys_flag & F.TRANSACTION_MASK
    if txn in (F.TRANSACTION_PREPARED_TYPE, F.TRANSACTION_ROLLBACK_TYPE):
        return None
    key = (m.topic, m.queue_id)
    nxt = m.queue_offset + queue_step(m)
    if nxt > ctx.dispatched_next.get(key, 0):
        ctx.dispatched_next[key] = nxt
    if F.PROPERTY_INNER_MULTI_DISPATCH.encode() in m.props_raw:
        for q, off in _lmq_targets(m):
            k = (q, 0)
            if off + 1 > ctx.dispatched_next.get(k, 0):
                ctx.dispatched_next[k] = off + 1
    return key


def _lmq_targets(m: Message) -> list[tuple[str, int]]:
    disp = m.prop(F.PROPERTY_INNER_MULTI_DISPATCH)
    offs = m.prop(F.PROPERTY_INNER_MULTI_QUEUE_OFFSET)
    if not disp or offs is None:
        return []
    queues = disp.split(F.LMQ_DISPATCH_SEPARATOR)
    try:
        offsets = [int(x) for x in offs.split(F.LMQ_DISPATCH_SEPARATOR)]
    except ValueError:
        return []
    return [(q, o) for q, o in zip(queues, offsets) if q.startswith(F.LMQ_PREFIX)]
