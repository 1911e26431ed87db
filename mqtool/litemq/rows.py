"""Decoded LiteMQ records → output rows (NDJSON field names) and table columns, with the row schemas (every field
declared once: see mqtool.rows). No I/O."""
from __future__ import annotations

from formats import litemq as F
from mqtool.common import ENCODING_SUFFIX, put_body, put_text
from mqtool.litemq.records import CQEntry, LiteRecord, RawText
from mqtool.columns import Column, iso_ms, key_columns
from mqtool.rows import Field, RowSchema, export_fields


def record_row(rec: LiteRecord, body_mode: str = "none") -> dict:
    """The dump row: the keys of :data:`RECORD`, in its order."""
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
    """The keys of :data:`CQ`, in its order."""
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


def _enc(name: str) -> Field:
    return Field(name + ENCODING_SUFFIX, "string", f'`"base64"` when `{name}` is not UTF-8 (then base64 of the bytes)',
                 optional=True, export=False)


# Every field of the rows above, once (see mqtool.rows): types are the Parquet/Spark types.
RECORD = RowSchema("message", [
    Field("kind", "string", '`"message"`'),
    Field("file", "string", "segment (relative to the data dir)", header="File", max_width=48, priority=5),
    Field("position", "long", "byte position of the length prefix in `file`"),
    Field("offset", "long", "global commitlog offset = file index × file size + position",
          header="Offset", justify="right", priority=0),
    Field("size", "long", "record size including the 4-byte prefix (what the consumequeue stores)",
          header="Size", justify="right", priority=3),
    Field("msg_id", "string", "LiteMQ's MessageID (`<unixNanos>-0` from clients, `msg-<nanos>` when the broker "
          "made it)", header="MessageID", max_width=28, priority=0),
    Field("topic", "string", "as stored", header="Topic", priority=0),
    Field("queue_id", "long", "the record's QueueID (u32 on disk)", header="Q", justify="right", priority=1),
    Field("tags", "array<string>", "as stored", header="Tags", max_width=20, priority=3),
    Field("keys", "array<string>", "as stored", header="Keys", max_width=24, priority=2),
    Field("properties", "map<string,string>", "map, rendered with sorted keys (on disk the order is Go's random "
          "map order)"),
    Field("body_size", "long", "body length", header="Body", justify="right", priority=4),
    Field("message_type", "string", "NORMAL, DELAY, TRANSACTION, BROADCAST, ORDER, CRON", header="Type", priority=5),
    Field("message_type_code", "int", "NORMAL 0, DELAY 1, TRANSACTION 2, BROADCAST 3, ORDER 4, CRON 5"),
    Field("priority", "int", "as stored"),
    Field("reliability", "int", "as stored"),
    Field("delay_time", "long", "an absolute ms time, 0 unless delay"),
    Field("transaction_id", "string", "the producer's transaction id"),
    Field("status", "string", "NORMAL, PREPARED, ROLLBACK, COMMIT, DEAD"),
    Field("status_code", "int", "NORMAL 0, PREPARED 1, ROLLBACK 2, COMMIT 3, DEAD 4 (transactions are always "
          "PREPARED on disk)"),
    Field("sharding_key", "string", "as stored"),
    Field("broadcast", "bool", "true only for byte value 1, as LiteMQ decodes it"),
    Field("born_timestamp", "long", "epoch ms"),
    Field("born_host", "string", "`host:port` text"),
    Field("store_host", "string", "`host:port` text"),
    Field("store_timestamp", "long", "epoch ms", header="Stored (UTC)", fmt=_ts, priority=2, no_wrap=True),
    Field("queue_offset", "long", "raw record field: always 0 in LiteMQ-written records"),
    Field("commitlog_offset", "long", "raw record field: always 0 in LiteMQ-written records"),
    Field("store_size", "long", "raw record field (u32): always 0 in LiteMQ-written records"),
    Field("consume_start_time", "long", "raw field, always 0"),
    Field("consume_end_time", "long", "raw field, always 0"),
    Field("consume_count", "long", "raw field (u32), always 0"),
    Field("stale", "bool", "true for records carved after the end of data",
          header="Stale", fmt=lambda v: "STALE" if v else "", priority=1),
    Field("state", "string", "with `stale`: `stale` (older than the live data: a restart overwrote the file from "
          "offset 0) or `after-gap` (newer: damage hides them)", optional=True),
    Field("bad_utf8", "array<string>", "names of fields whose bytes are not UTF-8 (shown with U+FFFD)",
          optional=True),
    *(_enc(n) for n in _TEXT_FIELDS.values()),
    _enc("tags"), _enc("keys"),
    Field("properties_raw", "array<array<string>>", "with a property that is not UTF-8: every `[name, value]` "
          "pair as base64", optional=True, export=False),
    _enc("properties_raw"),
    Field("body", "string", "only with `--body text|hex|base64`", optional=True, header="Body", max_width=60,
          priority=5),
    _enc("body"),
    Field("cq_queue_offset", "long", "`query --queue-offset` only: the entry index the row was found through",
          optional=True, export=False, header="QOffset", justify="right"),
])

CQ = RowSchema("cq_entry", [
    Field("kind", "string", '`"cq_entry"`'),
    RECORD["file"],
    Field("position", "long", "byte position of the entry in `file`"),
    RECORD["topic"], RECORD["queue_id"],
    Field("queue_offset", "long", "entry index", header="QOffset", justify="right"),
    Field("offset", "long", "commitlog offset", header="CommitLog offset", justify="right"),
    Field("size", "long", "record size including the prefix", header="Size", justify="right"),
    Field("tag_hash", "long", "FNV-1a 32 over each tag + `\\0`", header="TagHash", justify="right"),
    RECORD["store_timestamp"], RECORD["stale"],
    Field("stale_reason", "string", "why the entry is stale", header="Stale", fmt=lambda v: v.upper() if v else ""),
])

MESSAGE_TABLE = ("offset", "size", "topic", "queue_id", "message_type", "msg_id", "tags", "keys", "store_timestamp",
                 "body_size", "stale")
MESSAGE_COLUMNS = RECORD.columns(MESSAGE_TABLE)
BODY_COLUMN = RECORD["body"].column()
QUERY_QUEUE_OFFSET_COLUMN = RECORD["cq_queue_offset"].column()

# The consumequeue table: its columns keep the renderer's defaults (no width limits but the file's, no
# priorities), as before the schema.
_PLAIN = dict(priority=5, no_wrap=False, max_width=None)
CQ_COLUMNS = CQ.columns(("topic", "queue_id", "queue_offset", "offset", "size", "tag_hash", "store_timestamp",
                         "stale_reason", "file"),
                        topic=_PLAIN, queue_id=_PLAIN, size=_PLAIN, store_timestamp=_PLAIN,
                        file=dict(max_width=48, priority=5))

CONTEXT = (Field("store", "string", "the store path as given"),)
ROW_FIELDS = export_fields(CONTEXT, [RECORD])


def columns_for(rows_kind: str) -> list[Column]:
    return {"message": MESSAGE_COLUMNS, "cq_entry": CQ_COLUMNS}.get(rows_kind, [])


def generic_columns(keys) -> list[Column]:
    return key_columns(keys)
