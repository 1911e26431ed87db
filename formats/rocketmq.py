"""Apache RocketMQ broker store: declarative schemas and constants (no I/O).

Where the files live on a broker (``storePathRootDir``, default ``~/store``)::

    commitlog/<20-digit start offset>              message units (§1), BLANK at each segment end
    consumequeue/<topic>/<queueId>/<20-digit>      20-byte units (§4)
    index/<yyyyMMddHHmmssSSS>                      hash index files (§6)
    checkpoint                                     4096-byte StoreCheckpoint (§7)
    abort, lock, config/*.json                     crash marker, process lock, fastjson metadata (§8)

Every integer is big-endian (Java ``ByteBuffer``). Field names keep the broker's spelling. Section numbers refer
to ``shared/reference/rocketmq.md``; upstream sources are named per schema.
"""
from __future__ import annotations

from construct import (Bytes, Const, IfThenElse, Int8sb, Int16sb, Int32sb, Int64sb, Array, Struct, Padding,
                       this)

from formats.common import Host

# ---- constants (common/.../message/MessageDecoder.java, store/.../CommitLog.java) ----------------

MESSAGE_MAGIC_CODE_V1 = -626843481          # 0xDAA320A7
MESSAGE_MAGIC_CODE_V2 = -626843477          # 0xDAA320AB (5.1.0+: 2-byte topic length)
BLANK_MAGIC_CODE = -875286124               # 0xCBD43194
MAGIC_VERSION = {MESSAGE_MAGIC_CODE_V1: "v1", MESSAGE_MAGIC_CODE_V2: "v2"}
VERSION_MAGIC = {"v1": MESSAGE_MAGIC_CODE_V1, "v2": MESSAGE_MAGIC_CODE_V2}
END_FILE_MIN_BLANK_LENGTH = 8               # CommitLog.END_FILE_MIN_BLANK_LENGTH

# MessageSysFlag.java
COMPRESSED_FLAG = 0x1
MULTI_TAGS_FLAG = 0x2
TRANSACTION_NOT_TYPE = 0x0
TRANSACTION_PREPARED_TYPE = 0x4
TRANSACTION_COMMIT_TYPE = 0x8
TRANSACTION_ROLLBACK_TYPE = 0xC
TRANSACTION_MASK = 0xC
BORNHOST_V6_FLAG = 0x10
STOREHOSTADDRESS_V6_FLAG = 0x20
NEED_UNWRAP_FLAG = 0x40
INNER_BATCH_FLAG = 0x80
COMPRESSION_TYPE_MASK = 0x700               # (flag & 0x700) >> 8: 0/3 zlib, 1 lz4, 2 zstd
COMPRESSION_TYPES = {0: "zlib", 1: "lz4", 2: "zstd", 3: "zlib"}
TRANSACTION_NAMES = {TRANSACTION_NOT_TYPE: None, TRANSACTION_PREPARED_TYPE: "prepared",
                     TRANSACTION_COMMIT_TYPE: "commit", TRANSACTION_ROLLBACK_TYPE: "rollback"}

# Properties (MessageDecoder.NAME_VALUE_SEPARATOR / PROPERTY_SEPARATOR, MessageConst.java)
NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"
PROPERTY_KEYS = "KEYS"
PROPERTY_TAGS = "TAGS"
PROPERTY_UNIQ_KEY = "UNIQ_KEY"
PROPERTY_DELAY_TIME_LEVEL = "DELAY"
PROPERTY_INNER_MULTI_DISPATCH = "INNER_MULTI_DISPATCH"
PROPERTY_INNER_MULTI_QUEUE_OFFSET = "INNER_MULTI_QUEUE_OFFSET"
PROPERTY_CRC32 = "__CRC32#"
KEY_SEPARATOR = " "
LMQ_PREFIX = "%LMQ%"
LMQ_DISPATCH_SEPARATOR = ","               # MixAll.LMQ_DISPATCH_SEPARATOR
CRC32_RESERVED_LEN = 20                     # "__CRC32#" \x01 10 digits \x02
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"      # TopicValidator.RMQ_SYS_SCHEDULE_TOPIC
DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"  # MessageStoreConfig

# Default sizes (MessageStoreConfig)
DEFAULT_COMMITLOG_FILE_SIZE = 1024 * 1024 * 1024
CQ_STORE_UNIT_SIZE = 20                     # ConsumeQueue.CQ_STORE_UNIT_SIZE
DEFAULT_CQ_UNITS_PER_FILE = 300_000
DEFAULT_MAX_HASH_SLOTS = 5_000_000
DEFAULT_MAX_INDEX_NUM = 20_000_000
DEFAULT_MAX_MESSAGE_SIZE = 4 * 1024 * 1024
CHECKPOINT_FILE_SIZE = 4096                 # StoreCheckpoint maps OS_PAGE_SIZE
INDEX_HEADER_SIZE = 40                      # IndexHeader.INDEX_HEADER_SIZE
INDEX_SLOT_SIZE = 4                         # IndexFile.hashSlotSize
INDEX_ENTRY_SIZE = 20                       # IndexFile.indexSize

# ---- §1 message unit (MessageExtEncoder#encode / CommitLog#checkMessageAndReturnSize) -------------


def _host(flag_bit):
    """BORNHOST / STOREHOSTADDRESS: 4+4 bytes, or 16+4 when the sysFlag bit is set."""
    return IfThenElse(this.SYSFLAG & flag_bit, Host(16), Host(4))


def message_unit(version: str = "v1"):
    """One commitlog message unit; ``version`` v1 (1-byte topic length) or v2 (2-byte topic length)."""
    return Struct(
        "TOTALSIZE" / Int32sb,                      # whole unit incl. this field
        "MAGICCODE" / Const(VERSION_MAGIC[version], Int32sb),
        "BODYCRC" / Int32sb,                        # crc32(stored body) & 0x7FFFFFFF
        "QUEUEID" / Int32sb,
        "FLAG" / Int32sb,
        "QUEUEOFFSET" / Int64sb,                    # logical queue index (0 for prepared/rollback)
        "PHYSICALOFFSET" / Int64sb,                 # global commitlog offset of this unit
        "SYSFLAG" / Int32sb,
        "BORNTIMESTAMP" / Int64sb,
        "BORNHOST" / _host(BORNHOST_V6_FLAG),
        "STORETIMESTAMP" / Int64sb,
        "STOREHOSTADDRESS" / _host(STOREHOSTADDRESS_V6_FLAG),
        "RECONSUMETIMES" / Int32sb,
        "PREPAREDTRANSACTIONOFFSET" / Int64sb,
        "BODYLENGTH" / Int32sb,
        "BODY" / Bytes(this.BODYLENGTH),
        "TOPICLENGTH" / (Int8sb if version == "v1" else Int16sb),
        "TOPIC" / Bytes(this.TOPICLENGTH),
        "PROPERTIESLENGTH" / Int16sb,
        "PROPERTIES" / Bytes(this.PROPERTIESLENGTH),
    )


MessageV1 = message_unit("v1")
MessageV2 = message_unit("v2")
MESSAGE_SCHEMAS = {"v1": MessageV1, "v2": MessageV2}

# §1.6 BLANK unit written at the end of a full segment (DefaultAppendMessageCallback#doAppend)
BlankUnit = Struct(
    "TOTALSIZE" / Int32sb,                          # bytes from here to the end of the segment
    "MAGICCODE" / Const(BLANK_MAGIC_CODE, Int32sb),
)

# Unit framing shared by every kind: what a scanner reads first.
UnitPrefix = Struct("TOTALSIZE" / Int32sb, "MAGICCODE" / Int32sb)


def calc_msg_length(version: str, sysflag: int, body_len: int, topic_len: int, prop_len: int) -> int:
    """``MessageExtEncoder.calMsgLength``: TOTALSIZE from the variable lengths."""
    bh = 20 if sysflag & BORNHOST_V6_FLAG else 8
    sh = 20 if sysflag & STOREHOSTADDRESS_V6_FLAG else 8
    tl = 1 if version == "v1" else 2
    return 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + bh + 8 + sh + 4 + 8 + 4 + body_len + tl + topic_len + 2 + prop_len


MIN_MESSAGE_SIZE = calc_msg_length("v1", 0, 0, 0, 0)   # 91


def properties_to_string(pairs) -> str:
    """``messageProperties2String``: ``name\\x01value\\x02`` for every pair (a trailing \\x02 included)."""
    return "".join(f"{k}{NAME_VALUE_SEPARATOR}{v}{PROPERTY_SEPARATOR}" for k, v in pairs)


def string_to_property_pairs(text: str) -> list[tuple[str, str]]:
    """``string2messageProperties`` but keeping every pair in order (duplicates too): split on \x02; segments
    shorter than 3 chars are skipped; the name ends at the first \x01; pairs with an empty name or value are
    dropped — exactly what the broker keeps. A trailing \x02 is optional. The splitting itself is written once,
    in :func:`mqtool.rocketmq.layout.property_pairs`; this is the schema module's adapter to it."""
    from mqtool.rocketmq.layout import property_pairs
    return property_pairs(text)


def decode_prop_crc(digits: str) -> int:
    """§1.7: the ``__CRC32#`` value is written least-significant digit first."""
    v = 0
    for ch in reversed(digits):
        v = v * 10 + (ord(ch) - 48)
    return v


def encode_prop_crc(crc: int) -> str:
    return str(crc)[::-1].ljust(10, "0")


# ---- §4 consume queue (store/.../ConsumeQueue.java) ----------------------------------------------

CqUnit = Struct(
    "offset" / Int64sb,       # commitlog physical offset
    "size" / Int32sb,         # message TOTALSIZE
    "tagsCode" / Int64sb,     # String.hashCode(TAGS) widened, or delivery time for SCHEDULE_TOPIC_XXXX
)
CQ_BLANK_SIZE = 0x7FFFFFFF    # fillPreBlank unit: offset 0, size Integer.MAX_VALUE, tagsCode 0

# ---- §6 index file (store/.../index/IndexHeader.java, IndexFile.java) ----------------------------

IndexHeader = Struct(
    "beginTimestamp" / Int64sb,
    "endTimestamp" / Int64sb,
    "beginPhyOffset" / Int64sb,
    "endPhyOffset" / Int64sb,
    "hashSlotCount" / Int32sb,
    "indexCount" / Int32sb,   # next entry number; starts at 1
)
IndexSlot = Int32sb           # newest entry number in the bucket, 0 = empty
IndexEntry = Struct(
    "keyHash" / Int32sb,      # abs(String.hashCode(topic#key)), MIN_VALUE -> 0
    "phyOffset" / Int64sb,
    "timeDiff" / Int32sb,     # seconds since header.beginTimestamp
    "prevIndex" / Int32sb,    # previous entry in the same bucket, 0 = end
)


def index_file(hash_slot_num: int, index_num: int):
    """A whole index file: header, slot table, then ``index_num`` entries (entry 0 never written)."""
    return Struct(
        "header" / IndexHeader,
        "slots" / Array(hash_slot_num, IndexSlot),
        "entries" / Array(index_num, IndexEntry),
    )


def index_file_size(hash_slot_num: int, index_num: int) -> int:
    return INDEX_HEADER_SIZE + hash_slot_num * INDEX_SLOT_SIZE + index_num * INDEX_ENTRY_SIZE


# ---- §7 checkpoint (store/.../StoreCheckpoint.java) ----------------------------------------------

Checkpoint = Struct(
    "physicMsgTimestamp" / Int64sb,
    "logicsMsgTimestamp" / Int64sb,
    "indexMsgTimestamp" / Int64sb,
    "masterFlushedOffset" / Int64sb,   # 5.0.0+
    "confirmPhyOffset" / Int64sb,      # 5.1.1+
    Padding(CHECKPOINT_FILE_SIZE - 40),
)
