"""Apache Kafka partition-log on-disk formats: declarative construct schemas and constants only.

Where the files live on a broker: ``<log.dir>/<topic>-<partition>/`` holds ``<20-digit base offset>.log``
segments with their ``.index``, ``.timeindex`` and ``.txnindex`` files, ``<offset>.snapshot`` producer-state
snapshots, ``leader-epoch-checkpoint`` and ``partition.metadata``; the log dir itself holds the text
checkpoints (parsed in :mod:`mqtool.kafka.checkpoints`) and ``meta.properties``.

Upstream sources (apache/kafka trunk, 4.0): ``clients/.../common/record/DefaultRecordBatch.java``,
``DefaultRecord.java``, ``LegacyRecord.java``, ``ControlRecordType.java``, ``EndTransactionMarker.java``,
``storage/.../internals/log/OffsetIndex.java``, ``TimeIndex.java``, ``TransactionIndex.java``
(``AbortedTxn``), ``ProducerStateManager.java`` / ``ProducerSnapshot.json``; coordinator records from
``group-coordinator/src/main/resources/common/message/*.json`` and ``transaction-coordinator/.../*.json``.
All multi-byte integers are big-endian. See also ``../shared/reference/kafka.md``.
"""
from __future__ import annotations

from construct import (Array, Bytes, GreedyBytes, If, Int8sb, Int16sb, Int32sb,
                       Int32ub, Int64sb, Prefixed, PrefixedArray, Struct, VarInt, ZigZag, this)

# ---- constants ---------------------------------------------------------------------------------

LOG_OVERHEAD = 12                 # offset int64 + size int32 (Records.LOG_OVERHEAD)
MAGIC_OFFSET = 16                 # magic sits at byte 16 in every format (Records.MAGIC_OFFSET)
HEADER_SIZE_UP_TO_MAGIC = 17      # Records.HEADER_SIZE_UP_TO_MAGIC
MIN_RECORD_OVERHEAD = 14          # LegacyRecord.RECORD_OVERHEAD_V0: smallest legal `size`

# DefaultRecordBatch
V2_HEADER_SIZE = 61               # RECORD_BATCH_OVERHEAD
V2_CRC_OFFSET = 17
V2_ATTRIBUTES_OFFSET = 21         # CRC32C covers [21, end of batch)
V2_RECORDS_COUNT_OFFSET = 57

# LegacyRecord
LEGACY_CRC_OFFSET = 12            # relative to the start of the entry (after offset+size)
LEGACY_MAGIC_OFFSET = 16          # CRC32 covers [16, end of message)
V0_HEADER_SIZE = 12 + 4 + 1 + 1   # log overhead, crc, magic, attributes
V1_HEADER_SIZE = V0_HEADER_SIZE + 8

# Compression codec ids (CompressionType), attribute bits 0-2 in every magic.
CODEC_MASK = 0x07
CODEC_NONE, CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}

# v2 batch attribute bits (DefaultRecordBatch)
TIMESTAMP_TYPE_MASK = 0x08        # 0 CreateTime, 1 LogAppendTime
TRANSACTIONAL_FLAG_MASK = 0x10
CONTROL_FLAG_MASK = 0x20
DELETE_HORIZON_FLAG_MASK = 0x40
# legacy (v1) attribute bit 3 = timestamp type
LEGACY_TIMESTAMP_TYPE_MASK = 0x08

NO_TIMESTAMP = -1
TIMESTAMP_TYPES = {-1: "NoTimestampType", 0: "CreateTime", 1: "LogAppendTime"}

# ControlRecordType
CONTROL_TYPES = {0: "ABORT", 1: "COMMIT", 2: "LEADER_CHANGE", 3: "SNAPSHOT_HEADER", 4: "SNAPSHOT_FOOTER",
                 5: "KRAFT_VERSION", 6: "KRAFT_VOTERS"}
CONTROL_ABORT, CONTROL_COMMIT = 0, 1

# Index files (OffsetIndex / TimeIndex / TransactionIndex)
OFFSET_INDEX_ENTRY_SIZE = 8
TIME_INDEX_ENTRY_SIZE = 12
TXN_INDEX_ENTRY_SIZE = 34
DEFAULT_SEGMENT_INDEX_BYTES = 10 * 1024 * 1024      # segment.index.bytes
DEFAULT_INDEX_INTERVAL_BYTES = 4096                 # index.interval.bytes

# Producer snapshot (ProducerStateManager)
PRODUCER_SNAPSHOT_VERSION = 1
PRODUCER_SNAPSHOT_CRC_OFFSET = 2
PRODUCER_SNAPSHOT_ENTRIES_OFFSET = 6                # CRC32C covers [6, EOF)
PRODUCER_SNAPSHOT_ENTRY_SIZE = 46

# Compression framings as stored
XERIAL_SNAPPY_MAGIC = b"\x82SNAPPY\x00"             # snappy-java SnappyCodec header (then int32 version, compat)
LZ4_FRAME_MAGIC = b"\x04\x22\x4d\x18"               # 0x184D2204 little-endian
ZSTD_FRAME_MAGIC = b"\x28\xb5\x2f\xfd"
GZIP_MAGIC = b"\x1f\x8b"

# File suffixes (LogFileUtils) and transient suffixes appended to them (LogFileUtils / UnifiedLog)
SUFFIXES = (".log", ".index", ".timeindex", ".txnindex", ".snapshot")
TRANSIENT_SUFFIXES = (".deleted", ".cleaned", ".swap")

# ---- .log: legacy messages v0/v1 (LegacyRecord) ---------------------------------------------

# A message as it sits in the log: log overhead, then the record; key/value length -1 = null.
LegacyMessage = Struct(
    "offset" / Int64sb,                                # message offset (wrapper: offset of the last inner message)
    "size" / Int32sb,                                  # bytes after this field
    "crc" / Int32ub,                                   # CRC32 (IEEE) of [magic, end of message)
    "magic" / Int8sb,                                  # 0 or 1
    "attributes" / Int8sb,                             # codec bits 0-2, v1: bit 3 timestamp type
    "timestamp" / If(this.magic >= 1, Int64sb),        # v1 only
    "keyLength" / Int32sb,
    "key" / If(this.keyLength >= 0, Bytes(this.keyLength)),
    "valueLength" / Int32sb,
    "value" / If(this.valueLength >= 0, Bytes(this.valueLength)),
)

# Fixed prefix of a legacy message (for the fast header walk); v1 adds the timestamp.
LegacyHeaderV0 = Struct("offset" / Int64sb, "size" / Int32sb, "crc" / Int32ub, "magic" / Int8sb,
                        "attributes" / Int8sb)
LegacyHeaderV1 = Struct("offset" / Int64sb, "size" / Int32sb, "crc" / Int32ub, "magic" / Int8sb,
                        "attributes" / Int8sb, "timestamp" / Int64sb)

# ---- .log: record batch v2 (DefaultRecordBatch / DefaultRecord) ------------------------------

RecordBatchHeader = Struct(
    "baseOffset" / Int64sb,            # outside the CRC
    "batchLength" / Int32sb,           # bytes after this field
    "partitionLeaderEpoch" / Int32sb,  # outside the CRC; -1 = none
    "magic" / Int8sb,                  # 2
    "crc" / Int32ub,                   # CRC32C of [attributes, end of batch)
    "attributes" / Int16sb,
    "lastOffsetDelta" / Int32sb,
    "baseTimestamp" / Int64sb,         # deleteHorizonMs when attributes bit 6 is set
    "maxTimestamp" / Int64sb,
    "producerId" / Int64sb,
    "producerEpoch" / Int16sb,
    "baseSequence" / Int32sb,
    "recordsCount" / Int32sb,
)

# A whole batch: the header then the records area (compressed as one stream when codec != 0).
RecordBatch = Struct(
    "header" / RecordBatchHeader,
    "records" / Bytes(this.header.batchLength - (V2_HEADER_SIZE - LOG_OVERHEAD)),
)

# Record header (DefaultRecord): key never null, value -1 = null.
RecordHeader = Struct(
    "headerKeyLength" / ZigZag,
    "headerKey" / Bytes(this.headerKeyLength),
    "headerValueLength" / ZigZag,
    "headerValue" / If(this.headerValueLength >= 0, Bytes(this.headerValueLength)),
)

# One record inside the (decompressed) records area: zigzag varint length, then the body.
RecordBody = Struct(
    "attributes" / Int8sb,                                  # unused, 0
    "timestampDelta" / ZigZag,                              # varlong
    "offsetDelta" / ZigZag,
    "keyLength" / ZigZag,                                   # -1 = null
    "key" / If(this.keyLength >= 0, Bytes(this.keyLength)),
    "valueLength" / ZigZag,                                 # -1 = null (tombstone)
    "value" / If(this.valueLength >= 0, Bytes(this.valueLength)),
    "headerCount" / ZigZag,
    "headers" / Array(this.headerCount, RecordHeader),
)
Record = Prefixed(ZigZag, RecordBody)

# Control records (ControlRecordType / EndTransactionMarker). Newer key versions may add fields.
ControlRecordKey = Struct(
    "version" / Int16sb,
    "type" / Int16sb,
    "rest" / GreedyBytes,
)
EndTxnMarker = Struct(
    "version" / Int16sb,             # 0
    "coordinatorEpoch" / Int32sb,
    "rest" / GreedyBytes,
)

# ---- index files -------------------------------------------------------------------------------

OffsetIndexEntry = Struct(           # OffsetIndex: 8 bytes
    "relativeOffset" / Int32sb,      # offset - segment base offset (the batch's lastOffset)
    "position" / Int32sb,            # byte position of the batch in the .log
)
TimeIndexEntry = Struct(             # TimeIndex: 12 bytes
    "timestamp" / Int64sb,
    "relativeOffset" / Int32sb,
)
AbortedTxn = Struct(                 # TransactionIndex / AbortedTxn: 34 bytes
    "version" / Int16sb,             # 0
    "producerId" / Int64sb,
    "firstOffset" / Int64sb,
    "lastOffset" / Int64sb,          # offset of the ABORT marker
    "lastStableOffset" / Int64sb,
)

# ---- producer state snapshot ------------------------------------------------------------------

ProducerSnapshotEntry = Struct(      # ProducerSnapshot.json ProducerEntry, 46 bytes
    "producerId" / Int64sb,
    "producerEpoch" / Int16sb,
    "lastSequence" / Int32sb,
    "lastOffset" / Int64sb,
    "offsetDelta" / Int32sb,
    "timestamp" / Int64sb,
    "coordinatorEpoch" / Int32sb,
    "currentTxnFirstOffset" / Int64sb,
)
ProducerSnapshot = Struct(
    "version" / Int16sb,             # 1
    "crc" / Int32ub,                 # CRC32C of [6, EOF)
    "producerEntries" / PrefixedArray(Int32sb, ProducerSnapshotEntry),
)

# ---- Kafka "message" encodings (coordinator records, KRaft metadata frames) -------------------
# Non-flexible versions: string = int16 length (-1 null) + UTF-8, bytes = int32 length, array = int32 count.
# Flexible versions: compact lengths = uvarint(len + 1) (0 = null), and a tagged-field section per struct.

String16 = Struct("length" / Int16sb, "data" / If(this.length >= 0, Bytes(this.length)))
Bytes32 = Struct("length" / Int32sb, "data" / If(this.length >= 0, Bytes(this.length)))
CompactString = Struct("lengthPlusOne" / VarInt,
                       "data" / If(this.lengthPlusOne > 0, Bytes(this.lengthPlusOne - 1)))
CompactBytes = CompactString
TaggedField = Struct("tag" / VarInt, "data" / Prefixed(VarInt, GreedyBytes))
TaggedFields = PrefixedArray(VarInt, TaggedField)

# __consumer_offsets keys: int16 version (= record type) then the struct.
OffsetCommitKey = Struct("group" / String16, "topic" / String16, "partition" / Int32sb)     # key v0, v1
GroupMetadataKey = Struct("group" / String16)                                             # key v2


def OffsetCommitValue(version: int):
    """OffsetCommitValue v0-v3 (non-flexible); v4 is flexible (see OffsetCommitValueV4)."""
    return Struct(
        "offset" / Int64sb,
        "leaderEpoch" / If(version >= 3, Int32sb),
        "metadata" / String16,
        "commitTimestamp" / Int64sb,
        "expireTimestamp" / If(version == 1, Int64sb),
    )


OffsetCommitValueV4 = Struct("offset" / Int64sb, "leaderEpoch" / Int32sb, "metadata" / CompactString,
                             "commitTimestamp" / Int64sb, "taggedFields" / TaggedFields)


def GroupMetadataMember(version: int):
    flexible = version >= 4
    s, b = (CompactString, CompactBytes) if flexible else (String16, Bytes32)
    return Struct(
        "memberId" / s,
        "groupInstanceId" / If(version >= 3, s),
        "clientId" / s,
        "clientHost" / s,
        "rebalanceTimeout" / If(version >= 1, Int32sb),
        "sessionTimeout" / Int32sb,
        "subscription" / b,
        "assignment" / b,
        "taggedFields" / If(flexible, TaggedFields),
    )


def GroupMetadataValue(version: int):
    flexible = version >= 4
    s = CompactString if flexible else String16
    members = Struct("count" / VarInt, "items" / Array(lambda ctx: max(ctx.count - 1, 0),
                                                        GroupMetadataMember(version))) if flexible \
        else PrefixedArray(Int32sb, GroupMetadataMember(version))
    return Struct(
        "protocolType" / s,
        "generation" / Int32sb,
        "protocol" / s,
        "leader" / s,
        "currentStateTimestamp" / If(version >= 2, Int64sb),
        "members" / members,
        "taggedFields" / If(flexible, TaggedFields),
    )


# Consumer protocol (clients/.../ConsumerProtocolSubscription.json / ConsumerProtocolAssignment.json), the
# embedded-protocol bytes of GroupMetadataValue members when protocolType == "consumer". Version-prefixed
# (int16), never flexible.
TopicPartitions = Struct("topic" / String16, "partitions" / PrefixedArray(Int32sb, Int32sb))


def ConsumerProtocolSubscription(version: int):
    return Struct(
        "topics" / PrefixedArray(Int32sb, String16),
        "userData" / Bytes32,
        "ownedPartitions" / If(version >= 1, PrefixedArray(Int32sb, TopicPartitions)),
        "generationId" / If(version >= 2, Int32sb),
        "rackId" / If(version >= 3, String16),
    )


ConsumerProtocolAssignment = Struct(
    "assignedPartitions" / PrefixedArray(Int32sb, TopicPartitions),
    "userData" / Bytes32,
)

# __transaction_state (TransactionLogKey v0 / TransactionLogValue v0, v1 flexible)
TransactionLogKey = Struct("transactionalId" / String16)


def TransactionLogValue(version: int):
    flexible = version >= 1
    s = CompactString if flexible else String16
    topic = Struct("topic" / s,
                   "partitionIds" / (Struct("count" / VarInt, "items" / Array(lambda c: max(c.count - 1, 0),
                                                                               Int32sb))
                                     if flexible else PrefixedArray(Int32sb, Int32sb)),
                   "taggedFields" / If(flexible, TaggedFields))
    partitions = Struct("count" / VarInt, "items" / Array(lambda c: max(c.count - 1, 0), topic)) if flexible \
        else Struct("count" / Int32sb, "items" / Array(lambda c: max(c.count, 0), topic))
    return Struct(
        "producerId" / Int64sb,
        "producerEpoch" / Int16sb,
        "transactionTimeoutMs" / Int32sb,
        "transactionStatus" / Int8sb,
        "transactionPartitions" / partitions,       # count -1 (or compact 0) = null
        "transactionLastUpdateTimestampMs" / Int64sb,
        "transactionStartTimestampMs" / Int64sb,
        "taggedFields" / If(flexible, TaggedFields),
    )


TRANSACTION_STATUS = {0: "Empty", 1: "Ongoing", 2: "PrepareCommit", 3: "PrepareAbort", 4: "CompleteCommit",
                      5: "CompleteAbort", 6: "Dead", 7: "PrepareEpochFence"}

CONSUMER_OFFSETS_KEY_TYPES = {0: "OffsetCommit", 1: "OffsetCommit", 2: "GroupMetadata",
                              3: "ConsumerGroupMetadata", 4: "ConsumerGroupPartitionMetadata",
                              5: "ConsumerGroupMemberMetadata", 6: "ConsumerGroupTargetAssignmentMetadata",
                              7: "ConsumerGroupTargetAssignmentMember", 8: "ConsumerGroupCurrentMemberAssignment",
                              9: "ShareGroupPartitionMetadata", 10: "ShareGroupMemberMetadata",
                              11: "ShareGroupMetadata", 12: "ShareGroupTargetAssignmentMetadata",
                              13: "ShareGroupTargetAssignmentMember", 14: "ShareGroupCurrentMemberAssignment",
                              15: "ShareGroupStatePartitionMetadata"}

# KRaft metadata record frame (MetadataRecordSerde): unsigned varints, then the flexible message struct.
MetadataRecordFrame = Struct(
    "frameVersion" / VarInt,         # 1
    "apiKey" / VarInt,
    "version" / VarInt,
    "data" / GreedyBytes,
)
METADATA_RECORD_TYPES = {0: "RegisterBrokerRecord", 1: "UnregisterBrokerRecord", 2: "TopicRecord",
                         3: "PartitionRecord", 4: "ConfigRecord", 5: "PartitionChangeRecord",
                         7: "FenceBrokerRecord", 8: "UnfenceBrokerRecord",
                         9: "RemoveTopicRecord", 10: "DelegationTokenRecord", 11: "UserScramCredentialRecord",
                         12: "FeatureLevelRecord", 14: "ClientQuotaRecord",
                         15: "ProducerIdsRecord", 17: "BrokerRegistrationChangeRecord", 18: "AccessControlEntryRecord",
                         19: "RemoveAccessControlEntryRecord", 20: "NoOpRecord", 21: "ZkMigrationStateRecord",
                         22: "RemoveUserScramCredentialRecord", 23: "BeginTransactionRecord",
                         24: "EndTransactionRecord", 25: "AbortTransactionRecord",
                         26: "RemoveDelegationTokenRecord", 27: "RegisterControllerRecord"}


# ---- fast-path derivation ---------------------------------------------------------------------

def struct_format(schema) -> str:
    """A ``struct`` format string for a schema made only of fixed-size big-endian integer fields (``TypeError``
    for any other field). The derivation itself is :func:`mqtool.schema_struct.exact_format`, shared by every
    family; this name stays as the schema module's adapter."""
    from mqtool.schema_struct import exact_format
    return exact_format(schema)
