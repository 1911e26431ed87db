"""RocketMQ output rows: every field of ``dump commitlog`` / ``query`` message and BLANK rows declared once
(see :mod:`mqtool.rows`). The values come from :meth:`mqtool.rocketmq.records.Message.to_row` (and the
compiled row builder, configured with :data:`NATIVE_KEYS`); tests hold both to :data:`MESSAGE`."""
from __future__ import annotations

from mqtool.rows import Field, RowSchema, export_fields, iso_ms

MESSAGE = RowSchema("message", [
    Field("kind", "string", '`"message"` or `"blank"` (BLANK end-of-file unit, with `--include-blank`)'),
    Field("file", "string", "segment file"),
    Field("position", "long", "byte position in `file` (`xxd -s POSITION FILE` shows the unit)"),
    Field("offset", "long", "global commitlog offset (segment name + position)",
          header="Offset", justify="right", no_wrap=True, priority=0),
    Field("size", "int", "TOTALSIZE of the unit", header="Size", justify="right", no_wrap=True, priority=3),
    Field("magic", "string", '`"v1"` (0xDAA320A7, 1-byte topic length) or `"v2"` (0xDAA320AB, 2-byte topic length)',
          header="Ver", priority=7),
    Field("body_crc", "long", "stored BODYCRC"),
    Field("crc_ok", "bool", "whether `crc32(stored body) & 0x7FFFFFFF` matches `body_crc`", header="CRC", priority=3),
    Field("queue_id", "int", "QUEUEID as stored", header="Q", justify="right", priority=1),
    Field("flag", "int", "FLAG as stored"),
    Field("queue_offset", "long", "QUEUEOFFSET as stored", header="QOffset", justify="right", priority=1),
    Field("physical_offset", "long", "PHYSICALOFFSET as stored (equals `offset` in a sound store)"),
    Field("sys_flag", "int", "SYSFLAG"),
    Field("transaction", "string", '`null`, `"prepared"`, `"commit"` or `"rollback"` (sysFlag bits 2–3)',
          header="Txn", priority=5),
    Field("born_timestamp", "long", "BORNTIMESTAMP, epoch ms"),
    Field("born_host", "string", '`"ip:port"`, IPv6 as `"[ip]:port"`', header="Born host", priority=6),
    Field("store_timestamp", "long", "STORETIMESTAMP, epoch ms",
          header="Stored (UTC)", fmt=iso_ms, no_wrap=True, priority=2),
    Field("store_host", "string", '`"ip:port"`, IPv6 as `"[ip]:port"`'),
    Field("reconsume_times", "int", "RECONSUMETIMES as stored"),
    Field("prepared_transaction_offset", "long", "PREPAREDTRANSACTIONOFFSET as stored"),
    Field("topic", "string", "topic name", header="Topic", max_width=40, priority=0),
    Field("properties", "map<string,string>",
          "object of all properties (a repeated name keeps its last value, as the broker does)"),
    Field("keys", "array<string>", "KEYS split on spaces", header="Keys", max_width=30, priority=2),
    Field("tags", "string", "TAGS", header="Tags", max_width=20, priority=3),
    Field("uniq_key", "string", "UNIQ_KEY (client message id)"),
    Field("msg_id", "string", "the broker's offsetMsgId: store host + physical offset, upper-case hex",
          header="MsgId", no_wrap=True, priority=0),
    Field("body_size", "int", "stored body length (compressed size when compressed)",
          header="Body", justify="right", priority=4),
    Field("compression", "string", '`null`, `"zlib"`, `"lz4"` or `"zstd"`', header="Comp", priority=5),
    Field("property_pairs", "array<array<string>>", "only when a name repeats: every pair in on-disk order",
          optional=True),
    Field("topic_encoding", "string", '`"base64"` when the topic bytes are not UTF-8 (`topic` is then base64)',
          optional=True, export=False),
    Field("properties_raw", "string", "only when the property blob is not UTF-8: base64 of its exact bytes",
          optional=True, export=False),
    Field("properties_raw_encoding", "string", '`"base64"` with `properties_raw`', optional=True, export=False),
    Field("body", "string", "only with `--body`: the decompressed body as text, hex or base64",
          optional=True, header="Body data", max_width=60, priority=2),
    Field("body_encoding", "string", '`"base64"` when `--body text` meets bytes that are not UTF-8',
          optional=True, export=False),
    Field("body_error", "string", "with `--body`, when the body cannot be inflated (`body` is then null)",
          optional=True),
])

BLANK = RowSchema("blank", MESSAGE.pick("kind", "file", "position", "offset", "size"))

#: columns of the message table (``dump commitlog``, ``query``), in table order; ``body`` with ``--body``
MESSAGE_TABLE = ("offset", "size", "magic", "topic", "queue_id", "queue_offset", "tags", "keys", "store_timestamp",
                 "born_host", "transaction", "compression", "body_size", "crc_ok", "msg_id")
MESSAGE_COLUMNS = MESSAGE.columns(MESSAGE_TABLE)
BODY_COLUMN = MESSAGE["body"].column()

#: the row keys the compiled row builder fills, in row order (mqtool/_native/rmqdump.c takes them by position):
#: every key but the lossless markers and the body error, which only the Python path writes
NATIVE_KEYS = MESSAGE.names(exclude=("topic_encoding", "properties_raw", "properties_raw_encoding",
                                     "body_encoding", "body_error"))

#: columns every exported row has before the row's own (the store path as given)
CONTEXT = (Field("store", "string", "the store path as given"),)
ROW_FIELDS = export_fields(CONTEXT, [MESSAGE, BLANK])

#: ``dump consumequeue`` rows (:meth:`mqtool.rocketmq.indexfiles.CqUnit.to_row`)
CQ_UNIT = RowSchema("cq_unit", [
    Field("kind", "string", '`"cq_unit"`'),
    Field("topic", "string", "the queue's topic (from its directory)", header="Topic"),
    Field("queue_id", "int", "the queue id (from its directory)", header="Q", justify="right"),
    Field("file", "string", "consumequeue file", header="File", max_width=50),
    Field("position", "long", "byte position of the 20-byte unit in `file`"),
    Field("queue_offset", "long", "logical index of the unit in its queue", header="QOffset", justify="right"),
    Field("offset", "long", "commitlog offset of the message", header="CL offset", justify="right"),
    Field("size", "int", "message size", header="Size", justify="right"),
    Field("tags_code", "long", "tags hash code (or the delivery time of a delayed message)",
          header="TagsCode", justify="right"),
    Field("state", "string", "`unit`, `blank-fill` (the filler the broker writes) or `zero`", header="State"),
])
CQ_COLUMNS = CQ_UNIT.columns(("topic", "queue_id", "queue_offset", "offset", "size", "tags_code", "state", "file"))
