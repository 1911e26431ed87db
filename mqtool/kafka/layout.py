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
