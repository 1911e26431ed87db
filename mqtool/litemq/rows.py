"""Decoded LiteMQ records → output rows (NDJSON field names) and table columns. No I/O."""
from __future__ import annotations

from formats import litemq as F
from mqtool.common import encode_body
from mqtool.litemq.records import CQEntry, LiteRecord
from mqtool.render import Column, iso_ms


def record_row(rec: LiteRecord, body_mode: str = "none") -> dict:
    m = rec.m
    row = {
        "kind": "message",
        "file": rec.file,
        "position": rec.position,
        "offset": rec.offset,
        "size": rec.size,
        "msg_id": m["MessageID"],
        "topic": m["Topic"],
        "queue_id": m["QueueID"],
        "tags": m["Tags"],
        "keys": m["Keys"],
        "properties": dict(sorted(m["Properties"])),
        "body_size": rec.body_slice[1] - rec.body_slice[0],
        "message_type": F.MESSAGE_TYPES.get(m["MessageType"], f"UNKNOWN({m['MessageType']})"),
        "message_type_code": m["MessageType"],
        "priority": m["Priority"],
        "reliability": m["Reliability"],
        "delay_time": m["DelayTime"],
        "transaction_id": m["TransactionID"],
        "status": F.MESSAGE_STATUSES.get(m["MessageStatus"], f"UNKNOWN({m['MessageStatus']})"),
        "status_code": m["MessageStatus"],
        "sharding_key": m["ShardingKey"],
        "broadcast": m["Broadcast"] == 1,
        "born_timestamp": m["BornTimestamp"],
        "born_host": m["BornHost"],
        "store_host": m["StoreHost"],
        "store_timestamp": m["StoreTimestamp"],
        "queue_offset": m["QueueOffset"],
        "commitlog_offset": m["CommitLogOffset"],
        "store_size": m["StoreSize"],
        "consume_start_time": m["ConsumeStartTime"],
        "consume_end_time": m["ConsumeEndTime"],
        "consume_count": m["ConsumeCount"],
        "stale": rec.stale,
    }
    if rec.stale:
        row["state"] = rec.state
    if rec.bad_utf8:
        row["bad_utf8"] = list(rec.bad_utf8)
    if body_mode != "none" and rec.body is not None:
        row["body"] = encode_body(rec.body, body_mode)
    return row


def cq_row(e: CQEntry) -> dict:
    return {
        "kind": "cq_entry",
        "file": e.file,
        "position": e.position,
        "topic": e.topic,
        "queue_id": e.queue_id,
        "queue_offset": e.index,
        "offset": e.commitlog_offset,
        "size": e.size,
        "tag_hash": e.tag_hash,
        "store_timestamp": e.timestamp,
        "stale": e.stale,
        "stale_reason": e.stale_reason,
    }


def _ts(v):
    return iso_ms(v) if isinstance(v, int) and v > 0 else ""


MESSAGE_COLUMNS = [
    Column("offset", "Offset", justify="right"),
    Column("size", "Size", justify="right"),
    Column("topic", "Topic"),
    Column("queue_id", "Q", justify="right"),
    Column("message_type", "Type"),
    Column("msg_id", "MessageID", max_width=28),
    Column("tags", "Tags", max_width=20),
    Column("keys", "Keys", max_width=24),
    Column("store_timestamp", "Stored (UTC)", fmt=_ts),
    Column("body_size", "Body", justify="right"),
    Column("stale", "Stale", fmt=lambda v: "STALE" if v else ""),
]

CQ_COLUMNS = [
    Column("topic", "Topic"),
    Column("queue_id", "Q", justify="right"),
    Column("queue_offset", "QOffset", justify="right"),
    Column("offset", "CommitLog offset", justify="right"),
    Column("size", "Size", justify="right"),
    Column("tag_hash", "TagHash", justify="right"),
    Column("store_timestamp", "Stored (UTC)", fmt=_ts),
    Column("stale_reason", "Stale", fmt=lambda v: v.upper() if v else ""),
    Column("file", "File", max_width=48),
]


def columns_for(rows_kind: str) -> list[Column]:
    return {"message": MESSAGE_COLUMNS, "cq_entry": CQ_COLUMNS}.get(rows_kind, [])


def generic_columns(keys) -> list[Column]:
    return [Column(k, k) for k in keys]
