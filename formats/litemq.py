"""LiteMQ on-disk formats: declarative construct schemas and constants only (no I/O).

LiteMQ (github.com/toby-yogurt/litemq, read at commit 535b5f77) is a Go broker modelled on RocketMQ.
A broker data directory (``DataPath``, default ``./data/broker``) holds::

    commitlog/<%020d file index>              records [u32 len][Message.Encode()]   pkg/storage/commitlog.go
    consumequeue/<topic>/<queueId>/<%020d>    24-byte entries                       pkg/storage/consumequeue.go
    checkpoint/checkpoint                     forced-flush checkpoint               pkg/storage/checkpoint.go
    abort/abort                               ASCII start time (ms) while running   pkg/storage/abort.go
    index/<yyyyMMddHHmmss>                    key index (built, never flushed)      pkg/storage/indexfile.go

Every integer is big-endian; strings are raw UTF-8 with no terminator. Facts follow the code (and the
real stores it wrote), not LiteMQ's docs/storage-format.md, which is wrong in many places.
Field names keep the Go spelling.
"""
from __future__ import annotations

from construct import (
    Array, Bytes, Const, Default, GreedyBytes, GreedyRange, GreedyString, If, Int8ub, Int16ub, Int32sb,
    Int32ub, Int64sb, PascalString, Prefixed, PrefixedArray, RepeatUntil, Struct, this,
)

# ---- constants -------------------------------------------------------------------------------

MESSAGE_MAGIC = 0x4C4D5101      # pkg/protocol/message.go: first 4 bytes of Message.Encode()
CHECKPOINT_MAGIC = 0x4C4D5103   # pkg/storage/checkpoint.go
INDEX_MAGIC = 0x4C4D5104        # pkg/storage/indexfile.go
MESSAGE_MAGIC_BYTES = MESSAGE_MAGIC.to_bytes(4, "big")

#: Message.Size() counts the MessageID as 8+len but Encode writes 2+len: every encoded message ends with
#: 6 unwritten (zero) bytes that the length prefix includes.
TRAILING_PAD = 6
LENGTH_PREFIX = 4

DEFAULT_COMMITLOG_FILE_SIZE = 1 * 1024 * 1024 * 1024   # pkg/common/config/config.go DefaultBrokerConfig
DEFAULT_CQ_FILE_SIZE = 600 * 1024 * 1024                # code default (configs/broker.toml says 600000000)
CQ_ENTRY_SIZE = 24
CHECKPOINT_HEADER_SIZE = 38
INDEX_HEADER_SIZE = 40
INDEX_HASH_SLOTS = 5_000_000                            # pkg/storage/indexfile.go
INDEX_ENTRY_SIZE = 20
INDEX_SLOT_SIZE = 4
ORDER_QUEUE_COUNT = 4                                   # pkg/broker/order_message_manager.go

# MessageType (pkg/protocol/message.go); the docs leave out 5 (Cron).
MESSAGE_TYPES = {0: "NORMAL", 1: "DELAY", 2: "TRANSACTION", 3: "BROADCAST", 4: "ORDER", 5: "CRON"}
TYPE_NORMAL, TYPE_DELAY, TYPE_TRANSACTION, TYPE_BROADCAST, TYPE_ORDER, TYPE_CRON = range(6)
# MessageStatus (pkg/protocol/message.go); the docs swap 2 and 3.
MESSAGE_STATUSES = {0: "NORMAL", 1: "PREPARED", 2: "ROLLBACK", 3: "COMMIT", 4: "DEAD"}

# ---- commitlog record (pkg/protocol/message.go Message.Encode, pkg/storage/commitlog.go) -------

#: u16 length + raw bytes (``binary.BigEndian.PutUint16(uint16(len(s)))``); strings are UTF-8.
ShortString = PascalString(Int16ub, "utf8")

#: Fixed fields right after the body: MessageType, Priority, Reliability, DelayTime (written as u64).
MESSAGE_ATTRS_FIELDS = [
    "MessageType" / Int8ub,
    "Priority" / Int8ub,
    "Reliability" / Int8ub,
    "DelayTime" / Int64sb,
]
#: Broadcast flag (only 1 is true on decode) then BornTimestamp (ms).
MESSAGE_BORN_FIELDS = [
    "Broadcast" / Int8ub,
    "BornTimestamp" / Int64sb,
]
#: Fixed tail after StoreHost: 4+8+8+4+8+8+8+4 = 52 bytes. QueueOffset, CommitLogOffset, StoreSize and the
#: consume fields are always 0 in broker-written records (the message is encoded before they are set).
MESSAGE_TAIL_FIELDS = [
    "QueueID" / Int32ub,
    "QueueOffset" / Int64sb,
    "CommitLogOffset" / Int64sb,
    "StoreSize" / Int32ub,
    "StoreTimestamp" / Int64sb,
    "ConsumeStartTime" / Int64sb,
    "ConsumeEndTime" / Int64sb,
    "ConsumeCount" / Int32ub,
]

Property = Struct("key" / ShortString, "value" / ShortString)

#: The encoded message (what follows the u32 length prefix).
Message = Struct(
    "magic" / Const(MESSAGE_MAGIC, Int32ub),
    "MessageID" / ShortString,
    "Topic" / ShortString,
    "Tags" / PrefixedArray(Int32ub, ShortString),
    "Keys" / PrefixedArray(Int32ub, ShortString),
    "Properties" / PrefixedArray(Int32ub, Property),   # Go map order: random on disk
    "Body" / Prefixed(Int32ub, GreedyBytes),
    *MESSAGE_ATTRS_FIELDS,
    "TransactionID" / ShortString,
    "MessageStatus" / Int8ub,
    "ShardingKey" / ShortString,
    *MESSAGE_BORN_FIELDS,
    "BornHost" / ShortString,
    "StoreHost" / ShortString,
    *MESSAGE_TAIL_FIELDS,
    "Padding" / Default(Bytes(TRAILING_PAD), bytes(TRAILING_PAD)),   # the Size() overcount, always zero
)

#: One commitlog record: ``[u32 len][len bytes]``; ``len`` excludes the prefix. No CRC, no file header.
Record = Prefixed(Int32ub, Message)

#: Size of the fixed tail (MESSAGE_TAIL_FIELDS); tests check it against the schema.
FIXED_TAIL_SIZE = 52

# ---- consumequeue (pkg/storage/consumequeue.go) ----------------------------------------------

#: 24-byte entry. ``Size`` includes the 4-byte prefix; ``TagHash`` is FNV-1a 32 over each tag followed by
#: 0x00 (0 with no tags); ``Timestamp`` is the store time in ms taken by AppendMessage.
CQ_ENTRY_FIELDS = [
    "CommitLogOffset" / Int64sb,
    "Size" / Int32sb,
    "TagHash" / Int32ub,
    "Timestamp" / Int64sb,
]
CQEntry = Struct(*CQ_ENTRY_FIELDS)

# ---- checkpoint (pkg/storage/checkpoint.go) ---------------------------------------------------

CHECKPOINT_HEADER_FIELDS = [
    "magic" / Const(CHECKPOINT_MAGIC, Int32ub),
    "version" / Int16ub,
    "commitLogFlushedOffset" / Int64sb,   # always 0: CommitLog.Commit is never called
    "cqFlushedCount" / Int32sb,           # counts (topic,queue) pairs, though records are per topic
    "consumerOffsetCount" / Int32sb,      # counts (group,topic,queue) triples, though records are per group
    "lastFlushTime" / Int64sb,
    "lastUpdateTime" / Int64sb,
]
CheckpointHeader = Struct(*CHECKPOINT_HEADER_FIELDS)

QueueOffset = Struct("queueId" / Int32sb, "offset" / Int64sb)
TopicOffsets = Struct(
    "topic" / ShortString,
    "queueCount" / Int32sb,
    "queues" / Array(this.queueCount, QueueOffset),
)
GroupOffsets = Struct(
    "group" / ShortString,
    "topicCount" / Int32sb,
    "topics" / Array(this.topicCount, TopicOffsets),
)

#: The whole file. The counts are wrong (see above), so the consumequeue section is read until it holds
#: ``cqFlushedCount`` queues (empty when 0, which is all LiteMQ ever writes) and the consumer section is
#: read until EOF whatever ``consumerOffsetCount`` says; ``trailing`` keeps any bytes that do not parse.
Checkpoint = Struct(
    "header" / CheckpointHeader,
    "consumequeue" / If(this.header.cqFlushedCount > 0,
                        RepeatUntil(lambda obj, lst, ctx: sum(len(t.queues) for t in lst)
                                    >= ctx.header.cqFlushedCount, TopicOffsets)),
    "consumers" / GreedyRange(GroupOffsets),
    "trailing" / GreedyBytes,
)

# ---- index file (pkg/storage/indexfile.go; never flushed by the broker) -----------------------

IndexHeader = Struct(
    "magic" / Const(INDEX_MAGIC, Int32ub),
    "version" / Int16ub,
    "createTime" / Int64sb,       # ms; in fact the flush time
    "lastUpdate" / Int64sb,       # ms
    "hashSlotCount" / Int32sb,    # 5,000,000
    "indexCount" / Int32sb,
    "reserved" / Default(Bytes(10), bytes(10)),
)
IndexSlot = Int32sb               # head entry index of the chain, -1 = empty
INDEX_ENTRY_FIELDS = [
    "keyHash" / Int32ub,          # FNV-1a 32 of the key bytes (no topic prefix); slot = keyHash % slots
    "phyOffset" / Int64sb,        # global commitlog offset of the record
    "timeDiff" / Int32sb,         # int32(storeTimestampMs - nowSeconds): meaningless
    "next" / Int32sb,             # previous entry index in the chain, -1 = end
]
IndexEntry = Struct(*INDEX_ENTRY_FIELDS)
IndexFile = Struct(
    "header" / IndexHeader,
    "slots" / Array(this.header.hashSlotCount, IndexSlot),
    "entries" / Array(this.header.indexCount, IndexEntry),
)

# ---- abort (pkg/storage/abort.go) -------------------------------------------------------------

#: Broker start time as decimal Unix milliseconds in ASCII, no newline (13 bytes today).
Abort = Struct("startTimeMs" / GreedyString("ascii"))
