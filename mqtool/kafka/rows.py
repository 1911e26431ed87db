"""Kafka output rows of ``dump kafka`` on logs: batch, record (``--deep``) and damage rows, every field
declared once (see :mod:`mqtool.rows`). The values come from :meth:`mqtool.kafka.records.Batch.to_row`,
:func:`mqtool.kafka.dump.record_row` (and the compiled walker, which fills :data:`NATIVE_RECORD_KEYS` of a
template row) and :func:`mqtool.kafka.dump.damage_row`; tests hold them to these schemas."""
from __future__ import annotations

from pathlib import Path

from mqtool.rows import Field, RowSchema, export_fields, iso_ms


def _file_name(v) -> str:
    return Path(v).name if v else ""


def _timestamp(v) -> str:
    return iso_ms(v) if isinstance(v, int) and v >= 0 else ""


def _pid(v) -> str:
    return "" if v in (None, -1) else str(v)


def _short(v) -> str:
    from mqtool.ndjson import dumps

    if v is None:
        return ""
    s = v if isinstance(v, str) else dumps(v)
    return s if len(s) <= 60 else s[:57] + "..."


def decoded_text(d) -> str | None:
    """An internal topic's decoded record for a table cell: 'OffsetCommit group=g topic=t partition=0 → offset=5'
    (JSON keeps the whole structure)."""
    from mqtool.ndjson import dumps

    if not isinstance(d, dict):
        return None if d is None else str(d)

    def flat(x) -> str:
        if isinstance(x, dict):
            return " ".join(f"{k}={flat(v)}" for k, v in x.items() if v is not None)
        return dumps(x) if isinstance(x, (list, tuple)) else str(x)

    head = d.get("type") or ""
    key, value = d.get("key"), d.get("value")
    rest = {k: v for k, v in d.items() if k not in ("type", "key", "value", "key_version", "value_version")}
    parts = [head, flat(key) if key is not None else "", ("→ " + flat(value)) if value is not None else "",
             flat(rest) if rest else ""]
    return " ".join(p for p in parts if p)


BATCH = RowSchema("batch", [
    Field("kind", "string", "`batch`, `record` or `damage`", header="Kind", priority=4),
    Field("file", "string", "the `.log` file", header="File", fmt=_file_name, max_width=26, priority=3),
    Field("position", "long", "byte position in `file` (a record: of its batch)",
          header="Pos", justify="right", priority=2),
    Field("size", "long", "batch: total bytes including the 12-byte log overhead; record: the record's size; "
          "damage: bytes skipped", header="Size", justify="right", priority=4),
    Field("magic", "int", "batch format version (0, 1, 2)", header="M", justify="right", priority=6),
    Field("offset", "long", "batch: base offset (for legacy wrappers taken from the inner messages); record: "
          "absolute offset", header="Offset", justify="right", priority=0),
    Field("last_offset", "long", "last offset of the batch", header="Last", justify="right", priority=3),
    Field("count", "int", "records in the batch", header="N", justify="right", priority=3),
    Field("codec", "string", "none/gzip/snappy/lz4/zstd", header="Codec", priority=5),
    Field("timestamp_type", "string", "NoTimestampType/CreateTime/LogAppendTime"),
    Field("timestamp", "long", "batch: max timestamp; record: effective timestamp (the batch max timestamp for "
          "LogAppendTime), epoch ms", header="Timestamp", fmt=_timestamp, priority=1, no_wrap=True),
    Field("base_timestamp", "long", "v2 base timestamp (the delete horizon when `delete_horizon_ms` is set)"),
    Field("partition_leader_epoch", "int", "as stored"),
    Field("producer_id", "long", "as stored (-1: none)", header="PID", justify="right", fmt=_pid, priority=5),
    Field("producer_epoch", "int", "as stored"),
    Field("base_sequence", "int", "as stored"),
    Field("last_sequence", "int", "base sequence + last offset delta"),
    Field("is_transactional", "bool", "attribute bit 4"),
    Field("is_control", "bool", "attribute bit 5"),
    Field("delete_horizon_ms", "long", "set when attribute bit 6 is on"),
    Field("crc", "long", "CRC as stored"),
    Field("crc_ok", "bool", "whether the CRC matches (legacy inner messages have their own CRC32)",
          header="CRC ok", priority=3),
    Field("error", "string", "legacy wrapper whose payload cannot be read"),
    Field("flags", "string", "text summary: txn, control, deleteHorizon, the control type",
          header="Flags", priority=5),
])

RECORD = RowSchema("record", [
    *BATCH.pick("kind", "file", "position"),
    Field("batch_offset", "long", "base offset of the record's batch"),
    *BATCH.pick("offset", "timestamp", "timestamp_type", "size"),
    Field("key_size", "int", "key length (-1 = null)"),
    Field("value_size", "int", "value length (-1 = null)"),
    Field("sequence", "int", "base sequence + offset delta (-1: none)"),
    Field("header_keys", "array<string>", "the header keys in stored order"),
    *BATCH.pick("producer_id", "is_transactional", "is_control", "crc_ok"),
    Field("header_keys_encoding", "string", '`"base64"` when a header key is not UTF-8 (every key is then base64)',
          optional=True, export=False),
    Field("control_type", "string", "control records: ABORT/COMMIT/LEADER_CHANGE/SNAPSHOT_HEADER/…", optional=True),
    Field("coordinator_epoch", "int", "transaction markers: the coordinator epoch", optional=True),
    Field("key", "string", "with `--print-data`: the key (`--body text|hex|base64`)", optional=True,
          header="Key", fmt=_short, max_width=30, priority=1),
    Field("key_encoding", "string", '`"base64"` when a text key is not UTF-8', optional=True, export=False),
    Field("value", "string", "with `--print-data`: the value (`--body text|hex|base64`)", optional=True,
          header="Value", fmt=_short, max_width=40, priority=2),
    Field("value_encoding", "string", '`"base64"` when a text value is not UTF-8', optional=True, export=False),
    Field("headers", "array<array<string>>", "with `--print-data`: ordered `[key, value]` pairs (a key may "
          "repeat; value null for a null header value)", optional=True),
    Field("headers_encoding", "string", '`"base64"` when a header key or text value is not UTF-8 (every pair '
          "of the record is then base64)", optional=True, export=False),
    Field("decoded", "json", "with `--print-data` on internal topics: the decoded record", optional=True,
          export=False, header="Decoded", fmt=lambda v: decoded_text(v) or "", max_width=60, priority=1),
    BATCH["flags"],
])

DAMAGE = RowSchema("damage", [
    *BATCH.pick("kind", "file", "position", "size"),
    Field("damage", "string", "`skipped` / `partial-tail` / `zero-tail` / `records-undecodable` / "
          "`batch-records-limit` / `record-headers-limit`"),
    Field("message", "string", "what was found"),
])

KINDS = (BATCH, RECORD, DAMAGE)

# ---- rows of the index files (``dump kafka`` on a .index / .timeindex / .txnindex) ----------------------------------

_FILE = Field("file", "string", "the index file", header="File", fmt=_file_name)
_POSITION = Field("position", "long", "byte position of the entry in `file`", header="Pos", justify="right")
_RELATIVE = Field("relative_offset", "long", "offset relative to the segment's base offset (as stored)")

INDEX_ENTRY = RowSchema("index_entry", [
    Field("kind", "string", '`"index_entry"`'), _FILE, _POSITION,
    Field("offset", "long", "absolute offset (base + relative)", header="Offset", justify="right"),
    _RELATIVE,
    Field("log_position", "long", "byte position of the batch in the `.log`", header="Log position",
          justify="right"),
])
TIME_INDEX_ENTRY = RowSchema("time_index_entry", [
    Field("kind", "string", '`"time_index_entry"`'), _FILE, _POSITION,
    Field("timestamp", "long", "epoch ms as stored", header="Timestamp", justify="right"),
    Field("time", "string", "`timestamp` as ISO-8601 UTC", header="Time"),
    Field("offset", "long", "absolute offset (base + relative)", header="Offset", justify="right"),
    _RELATIVE,
])
ABORTED_TXN = RowSchema("aborted_txn", [
    Field("kind", "string", '`"aborted_txn"`'), _FILE, _POSITION,
    Field("version", "int", "entry version"),
    Field("producer_id", "long", "the aborted transaction's producer", header="PID", justify="right"),
    Field("first_offset", "long", "first offset of the transaction", header="First", justify="right"),
    Field("last_offset", "long", "offset of its ABORT marker", header="Last", justify="right"),
    Field("last_stable_offset", "long", "the LSO when it was aborted", header="LSO", justify="right"),
])
#: the table of each index file kind, in table order
FILE_TABLES = {
    "index": (INDEX_ENTRY, ("file", "position", "offset", "log_position")),
    "timeindex": (TIME_INDEX_ENTRY, ("file", "position", "timestamp", "time", "offset")),
    "txnindex": (ABORTED_TXN, ("file", "position", "producer_id", "first_offset", "last_offset",
                               "last_stable_offset")),
}

#: the log table (``dump kafka``, ``query``) for batch and record rows, in table order
LOG_TABLE = ("kind", "file", "position", "offset", "last_offset", "count", "size", "magic", "codec", "timestamp",
             "producer_id", "flags", "crc_ok", "decoded", "key", "value")
_ALL = {f.name: f for k in KINDS for f in k}
LOG_COLUMNS = [_ALL[n].column() for n in LOG_TABLE]

#: the record-row keys the compiled walker sets per record (mqtool/_native/kafka.c takes them by position);
#: every other key, the key order and the batch-level values come from a template row made by record_row
NATIVE_RECORD_KEYS = ("offset", "timestamp", "size", "key_size", "value_size", "sequence", "header_keys", "key",
                      "value", "headers")

CONTEXT = (Field("store", "string", "the store path as given"),
           Field("topic", "string", "from the partition directory (`__cluster_metadata` for KRaft snapshots)"),
           Field("partition", "int", "from the partition directory"))
ROW_FIELDS = export_fields(CONTEXT, KINDS)
