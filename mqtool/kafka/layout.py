"""The fixed-size structs of Kafka log segments and their index files, derived once from :mod:`formats.kafka`
(:func:`mqtool.schema_struct.exact_format`, answered from :mod:`mqtool.schemacache` at start-up: construct is not
loaded; a field that is not a fixed big-endian integer is a ``TypeError`` at import). The records area inside a v2
batch is variable-length: its layout is ``records.RECORD_LAYOUT``, the notation the compiled walker
(``mqtool/_native/kafka.c``) checks before it runs."""
from __future__ import annotations

import struct

from formats import kafka as K
from mqtool import schemacache

BATCH_HEADER_V2 = struct.Struct(schemacache.exact(K, "RecordBatchHeader"))     # baseOffset .. recordsCount
LEGACY_HEADER_V0 = struct.Struct(schemacache.exact(K, "LegacyHeaderV0"))      # message sets, magic 0
LEGACY_HEADER_V1 = struct.Struct(schemacache.exact(K, "LegacyHeaderV1"))      # message sets, magic 1 (+ timestamp)
OFFSET_ENTRY = struct.Struct(schemacache.exact(K, "OffsetIndexEntry"))        # .index
TIME_ENTRY = struct.Struct(schemacache.exact(K, "TimeIndexEntry"))            # .timeindex
TXN_ENTRY = struct.Struct(schemacache.exact(K, "AbortedTxn"))                 # .txnindex
SNAPSHOT_ENTRY = struct.Struct(schemacache.exact(K, "ProducerSnapshotEntry"))  # .snapshot entries


def _fields(module, name: str, fmt: str) -> dict[str, tuple[int, int, bool]]:
    """{field name: (offset, size, signed)} of a schema of fixed big-endian integers, from its struct format."""
    names = list(schemacache.offsets(module, name))
    codes = fmt.lstrip("<>!=@")
    assert len(names) == len(codes)
    out, at = {}, 0
    for field, code in zip(names, codes):
        size = struct.calcsize(">" + code)
        out[field] = (at, size, code.islower())
        at += size
    return out


#: the v2 batch header's fields in schema order, (offset, size, signed) each: the table the compiled batch walk
#: (``kafka.c`` ``walk_batches``) reads the header by; its values are those ``BATCH_HEADER_V2.unpack_from`` gives
BATCH_FIELDS_V2 = _fields(K, "RecordBatchHeader", BATCH_HEADER_V2.format)
V2_CRC_AT = BATCH_FIELDS_V2["crc"][0]               # the stored CRC-32C
V2_CRC_FROM = BATCH_FIELDS_V2["attributes"][0]      # ... of the bytes from here to the batch's end
