"""Decoded LiteMQ records → output rows (NDJSON field names) and table columns. No I/O."""
from __future__ import annotations

from formats import litemq as F
from mqtool.common import ENCODING_SUFFIX, put_body, put_text
from mqtool.litemq.records import CQEntry, LiteRecord, RawText
from mqtool.columns import Column, iso_ms, key_columns


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
        _lossless(row, m)
    if body_mode != "none" and rec.body is not None:
        put_body(row, "body", rec.body, body_mode)
    return row


# Row keys of LiteMQ's string fields (Go names), for giving non-UTF-8 bytes back exactly.
_TEXT_FIELDS = {"MessageID": "msg_id", "Topic": "topic", "TransactionID": "transaction_id",
                "ShardingKey": "sharding_key", "BornHost": "born_host", "StoreHost": "store_host"}


def _lossless(row: dict, m: dict) -> None:
    """Fields with bytes that are not UTF-8 (:class:`RawText`): base64 of the exact bytes with a
    ``<field>_encoding`` marker; for the lists every item is base64, for properties ``properties_raw``."""
    for go, key in _TEXT_FIELDS.items():
        if isinstance(m[go], RawText):
            put_text(row, key, m[go].raw)
    for go, key in (("Tags", "tags"), ("Keys", "keys")):
        if any(isinstance(t, RawText) for t in m[go]):
            row[key] = [_b64(t) for t in m[go]]
            row[key + ENCODING_SUFFIX] = "base64"
    if any(isinstance(x, RawText) for kv in m["Properties"] for x in kv):
        row["properties_raw"] = [[_b64(k), _b64(v)] for k, v in m["Properties"]]
        row["properties_raw" + ENCODING_SUFFIX] = "base64"


def _b64(t: str) -> str:
    import base64

    return base64.b64encode(t.raw if isinstance(t, RawText) else t.encode("utf-8")).decode("ascii")


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
    Column("offset", "Offset", justify="right", priority=0),
    Column("size", "Size", justify="right", priority=3),
    Column("topic", "Topic", priority=0),
    Column("queue_id", "Q", justify="right", priority=1),
    Column("message_type", "Type", priority=5),
    Column("msg_id", "MessageID", max_width=28, priority=0),
    Column("tags", "Tags", max_width=20, priority=3),
    Column("keys", "Keys", max_width=24, priority=2),
    Column("store_timestamp", "Stored (UTC)", fmt=_ts, priority=2, no_wrap=True),
    Column("body_size", "Body", justify="right", priority=4),
    Column("stale", "Stale", fmt=lambda v: "STALE" if v else "", priority=1),
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
    return key_columns(keys)
