"""The catalogue of finding codes: every code any command emits is registered here, once.

One entry is one line of :data:`_TABLE`: ``code | families | severities | class | meaning``.

* ``families``: ``R`` RocketMQ, ``L`` LiteMQ, ``K`` Kafka (Kafka codes carry their ``kafka.`` prefix).
* ``severities``: the levels the code is emitted at (``E`` error, ``W`` warning, ``I`` info); the first is
  the usual one. Tests fail when code emits a code at a level not listed here, so this table is where a
  severity is decided.
* ``class``: a key of :data:`CLASSES` (likely causes and what to do next, shared by codes of one kind).

``mqtool explain CODE`` prints an entry; ``tools/gen_code_docs.py`` writes the docs' tables from it.
Adding a code is adding one line.
"""
from __future__ import annotations

from mqtool.plainclass import dataclass

from mqtool.families import REGISTRY

FAMILY_NAMES = {f.letter: f.name for f in REGISTRY.values()}
SEVERITY_NAMES = {"E": "error", "W": "warning", "I": "info"}

#: class → (likely causes, what to do next)
CLASSES: dict[str, tuple[str, str]] = {
    "damage": ("disk or file-system corruption, an interrupted or partial copy, bytes overwritten by another "
               "program",
               "save what is readable with `mqtool verify store STORE --salvage-out DIR`; restore the file from a "
               "replica or backup. Findings listed as its consequences (caused_by) need no separate action."),
    "lost": ("a file deleted by hand or by a retention job run on a copy, an incomplete copy or restore",
             "look for the missing file in replicas or backups: the messages in it are lost otherwise. Index and "
             "queue findings pointing into the gap follow from it (caused_by)."),
    "pointer": ("the index or queue file disagrees with the log: the log is damaged or truncated there (see "
                "caused_by), the index itself was damaged, or the two were copied at different moments",
                "deal with the root finding first when there is one; otherwise rebuild the indexes into a separate "
                "directory: `mqtool rebuild-index STORE --out DIR --compare`"),
    "crash": ("the broker was killed, crashed or lost power, or the copy was taken while it was running",
              "usually repaired by the broker's recovery at its next start; copy stores only while the broker is "
              "stopped"),
    "normal": ("normal behaviour of the broker, reported so that nothing is hidden",
               "nothing to do"),
    "content": ("a client wrote unusual values, or bytes changed where no checksum covers them",
                "look at the record: `mqtool dump commitlog STORE --from-offset OFFSET --limit 1` (Kafka: "
                "`mqtool dump kafka FILE --deep`)"),
    "io": ("not a regular file (FIFO, device, directory, symlink loop), no read permission, or a file that "
           "changed while being read (broker still running)",
           "check the file's type and permissions; copy the store while the broker is stopped and verify the copy"),
    "geometry": ("a store written with non-default file sizes, or a file truncated or extended",
                 "compare the file sizes with the broker's configuration; give sizes explicitly (`--broker-conf`, "
                 "`--cq-file-size`)"),
    "config": ("a config file edited by hand, or written partly during a crash",
               "compare it with its .bak copy (the broker loads the .bak when the file does not parse)"),
    "compare": ("`rebuild-index --compare`: the store's index files differ from what its log implies",
                "if the store's index is damaged, use the rebuilt files from --out; if the log is damaged, deal "
                "with that first (`mqtool verify store`)"),
    "history": ("remnants of older data that the broker overwrote (a restart rewrote files from the start)",
                "the live data is not affected; `mqtool dump commitlog STORE --include-stale` shows the remnants"),
}

_TABLE = """
# --- RocketMQ: commitlog
body-inflate-failed | R | E | damage | a compressed body (zlib, lz4, zstd) does not inflate within 64 MiB although BODYCRC, computed over the stored compressed bytes, matches: SYSFLAG (no CRC covers it) or the body is not what the broker wrote; the whole unit is a damaged range
truncated-record | R | E | damage | a message's TOTALSIZE runs past the end of the data: the segment was cut short or the length field damaged
bad-magic | RL | E | damage | a message unit (RocketMQ) or record (LiteMQ) does not start with a known magic code: the bytes at this position are no message
bad-size | R | E | damage | a TOTALSIZE below the smallest unit or above --max-message-size
bad-length-field | R | E | damage | a body, topic or properties length does not fit inside the message
size-mismatch | R | E | damage | TOTALSIZE differs from the length computed from the message's own fields
zeroed-range | RL | E | damage | zero bytes where data should be: later data follows, so these zeros are damage, not the end of data
crc-mismatch | R | E | damage | the body CRC stored in the message does not match the body (the whole unit is a damaged range)
prop-crc-mismatch | R | E | damage | the whole-message CRC (__CRC32# property) does not match: header or properties changed (the whole unit is a damaged range)
prop-crc-malformed | R | E | content | the __CRC32# property is not 10 digits
physical-offset-mismatch | R | E | damage | the stored PHYSICALOFFSET is not where the message is: stale data, or bytes inserted or removed before it
not-utf8 | R | W | content | topic or properties are not UTF-8
blank-size-mismatch | R | E | damage | a BLANK end-of-file unit claims another size than what is left in the segment
blank-in-last-segment | R | I | normal | the last segment is full (BLANK at its end) and the next one was not created yet
missing-blank | R | W | damage | a segment ends in zero fill without its BLANK unit although later segments hold data
data-after-end | R | W | history | non-zero bytes after the end of data (stale data from a truncation or reuse)
zero-fill | R | I | normal | data ends here; the rest is preallocated zero fill
born-timestamp-implausible | RL | W | content | a message's born time lies more than a year before, or more than a day after, its store time (e.g. 1970 in a message stored in 2026): a wrong producer clock or a damaged field no checksum covers
queue-offset-gap | R | W | lost | a queue's QUEUEOFFSET jumps forward: messages of the queue are missing in between
queue-offset-repeat | R | W | content | a queue's QUEUEOFFSET repeats or goes back
segment-missing | RL | E | lost | a commitlog segment file between two others is missing: its messages are lost
segment-size | R | E | geometry | a segment's size differs from the others (the broker refuses to load it)
segment-name | R | W | geometry | the first segment's name is not a multiple of the segment size
segment-overlap | R | E | damage | a segment starts inside the previous one
segment-unused | R | W | lost | an all-zero segment between others: its data was lost or never written
segment-empty | R | E,I | lost | an empty segment file (info when it is the last one: the broker deletes it at start)
commitlog-empty | RL | W,I | lost | a commitlog directory with no segment file (info when no queue or index file holds a byte either: a fresh store)
file-unreadable | RL | E | io | a file named like a store file cannot be read (FIFO, device, directory, symlink loop, permission)
file-changed | RL | E | io | a file shrank while being read; the scan of that file stopped there
dir-unreadable | R | E | io | a store directory cannot be listed
# --- RocketMQ: consume queues
cq-dangling | R | E | pointer | a consume-queue unit points past the end of the commitlog data or into bytes that are not there
cq-not-message-start | R | E | pointer | a consume-queue unit points at an offset where no message starts
cq-size-mismatch | RL | E | pointer | a queue unit's or entry's size differs from the size of the message it points at
cq-wrong-message | R | E | pointer | the message a unit points at belongs to another topic and is not multi-dispatched to it
cq-queue-offset-mismatch | R | E | pointer | the message's QUEUEOFFSET differs from the unit's position in the queue
cq-tags-code-mismatch | R | E | pointer | the unit's tagsCode is not the hash of the message's tag (or its delivery time)
cq-bad-unit | R | E | damage | a unit whose offset or size cannot be valid
cq-blank-fill-misplaced | R | W | damage | a blank-fill unit after real units
cq-hole | R | E | damage | zero units inside a queue, with units after them
cq-behind | R | W,E | crash | a queue ends before the last message the commitlog has for it (not yet dispatched)
cq-missing | R | E,W | lost | a queue has messages in the commitlog but no consume-queue files (warning after a crash)
cq-file-gap | R | E | lost | a consume-queue file is missing between two others
cq-file-size | RL | W,E | geometry | a consume-queue file size is not the expected one
cq-geometry | RL | W | geometry | the consume-queue files disagree on their size, or a stated size does not fit them: the candidates are named
# --- RocketMQ: index files
index-not-message-start | R | E | pointer | an index entry points at an offset where no message starts
index-hash-mismatch | R | E | pointer | an index entry's key hash matches none of the message's keys
index-time-mismatch | R | W | pointer | an index entry's timeDiff disagrees with the message's store time
index-bad-slot | RL | E | damage | hash slot heads that point at no entry of that slot: the slot table is damaged
index-bad-link | R | E | damage | an index entry's previous-entry link does not point at an older entry
index-chain-cycle | R | E | damage | a slot's chain reaches an entry twice
index-wrong-slot | R | E | damage | an entry is chained from a slot its key hash does not belong to
index-unreachable | R | W | pointer | entries no slot chain reaches (overwritten or damaged chains)
index-header | R | E,W | damage | the index header's counts are impossible
index-slot-count | R | I | normal | hashSlotCount counts every put (RocketMQ 4.7.0 and earlier), not the used slots
index-geometry | R | W | geometry | hash slot and entry counts cannot be told from the index files (or stated counts do not fit them): the candidates are named; the file is not checked entry by entry
index-truncated | RL | E | damage | an index file shorter than its header or its entries
index-after-checkpoint | R | I,W | crash | the index file is newer than the checkpoint's indexMsgTimestamp
# --- RocketMQ: checkpoint, abort, config
checkpoint-missing | RL | W,I | crash | no checkpoint file (info after a crash, or in a store with nothing written yet)
checkpoint-size | R | W | geometry | the checkpoint is not the size the broker maps
checkpoint-ahead | R | W | lost | the checkpoint's flush time is newer than the last message: flushed data is gone
checkpoint-behind | R | I | crash | messages were stored after the checkpoint's flush time (written but not yet checkpointed)
checkpoint-negative | RL | E | damage | a checkpoint time, offset or count is negative: a broker never writes one (garbage or overwritten bytes)
checkpoint-future | RL | W | content | a checkpoint time lies more than an hour after now: a wrong broker clock, or not a time
checkpoint-beyond-log-end | RL | W | lost | a checkpoint offset lies past the end of the log data: data the broker had written is not in these files
unclean-shutdown | RL | W | crash | the abort file is present: the last run did not shut down cleanly
config-unparsable | R | W,E | config | a config/*.json file does not parse (error when no usable .bak exists)
config-bak-unparsable | R | W | config | a config .bak file does not parse
config-differs-from-bak | R | I | config | a config file differs from its .bak
config-unreadable | R | E | io | a config file cannot be read
# --- RocketMQ: rebuild-index --compare
commitlog-damage | R | W | damage | damaged commitlog bytes were skipped: messages in them are not in the rebuilt indexes
compare-summary | R | I | compare | counts of rebuilt files that are identical to, or differ from, the store's
cq-file-before-commitlog | R | I | normal | a store consume-queue file whose units all point into deleted commitlog files
cq-file-missing-on-disk | R | W | compare | a rebuilt consume-queue file has no counterpart in the store
cq-file-unexpected | R | E | compare | a store consume-queue file the commitlog does not explain
cq-file-size-differs | RL | W,I | geometry | the store's consume-queue file size differs from the one the rebuild used
cq-units-before-commitlog | R | I | normal | store units pointing below the first commitlog file (deleted by retention)
cq-units-not-on-disk | R | W | crash | rebuilt units the store does not have yet (not dispatched before the stop)
cq-unit-zeroed | R | E | compare | a unit is all zero in the store while data follows it
cq-unit-unexpected | R | E | compare | a unit in the store that the commitlog does not explain
cq-unit-differs | R | E | compare | a store unit differs from the rebuilt one
cq-more-differences | R | E | compare | further differing units of this file (counted, not listed)
index-entries-not-on-disk | R | W | crash | rebuilt index entries the store does not have yet
index-entries-unexpected | R | E | compare | the store's index file has more entries than the rebuild
index-entry-differs | R | E | compare | a store index entry differs from the rebuilt one
index-file-missing-on-disk | R | W | compare | a rebuilt index file has no counterpart in the store
index-file-unexpected | R | E | compare | a store index file beyond those the commitlog explains
index-geometry-differs | R | E | geometry | the store's index file size differs from the rebuild's (slot / entry counts)
index-header-differs | R | E | compare | an index header field differs from the rebuild
index-more-differences | R | E | compare | further differences in this index file (counted, not listed)
index-slot-differs | R | E | compare | a hash slot's newest entry differs from the rebuild
index-slots-differ | R | E | compare | slots differ as a consequence of differing entries
index-stale-bytes | R | W | history | non-zero bytes after the last index entry
cq-put-skipped | R | W | content | the rebuild skips a message that ends at or below its queue's maxPhysicOffset, as the broker does
cq-put-repeated | R | W | content | the rebuild skips a message whose queue offset is behind the queue's write position, as the broker does
cq-offset-gap | R | W | lost | a message's queue offset is ahead of the queue's write position (messages of the queue missing before it)
cq-offset-out-of-range | R | W | damage | the rebuild skips a message whose queue offset puts its unit at a negative byte position or past 2^63 (no consume queue file can hold it)
multi-dispatch-unparsable | R | W | content | a multi-dispatch (LMQ) property cannot be parsed; no LMQ units rebuilt for it
unsafe-topic-name | R | W | content | a topic name that cannot be a directory name; its units are not rebuilt
# --- LiteMQ: commitlog walk
bad-length | L | E | damage | a record length prefix that cannot be right: the live data ends at this damage
truncated-length | L | E | damage | fewer than 4 bytes left for a length prefix
field-overrun | L | E | damage | a record field runs past the record
length-mismatch | L | E | damage | the length prefix disagrees with the encoded fields
data-after-gap | L | E | lost | records newer than the live data lie after damage that ends the live data: LiteMQ cannot reach them
after-gap-record | L | E | lost | a record after the damage that ends the live data (newer than it: LiteMQ cannot reach it)
stale-record | L | I | history | a record of an older run found after the end of data
stale-records | L | W | history | records of an older run survive after the end of data (a restart rewrote the file from offset 0)
overwritten-record | L | W | history | the live data ends inside an older record that a restart overwrote
unaccounted-bytes | L | W,I | history | non-zero bytes after the end of data that are no whole record
end-of-data | L | I | normal | end of data: zero fill to the end of the file (LiteMQ preallocation)
no-commitlog | L | W | lost | the data directory has no commitlog directory (gone, or never copied)
segment-size-mismatch | L | W | geometry | a commitlog file's size differs from the others (LiteMQ preallocates every file)
store-time-regression | L | W | history | the store time goes back: an old run's records may follow new data
commitlog-offset-mismatch | L | E | damage | a record's stored CommitLogOffset is not where it is
store-size-mismatch | L | E | damage | a record's stored StoreSize is not its size
queue-offset-mismatch | L | E | pointer | a record's stored QueueOffset differs from its entry index
oversized-message | L | W | content | a body larger than --max-message-size
padding-not-zero | L | W | content | the 6 trailing bytes LiteMQ never writes are not zero
bad-utf8 | L | W | content | text fields that are not UTF-8
unknown-message-type | L | W | content | MessageType outside 0..5
unknown-status | L | W | content | MessageStatus outside 0..4
broadcast-flag-value | L | W | content | the Broadcast byte is neither 0 nor 1
consume-fields-set | L | W,E | content | consume fields are set although LiteMQ never writes them
tx-status | L | W | content | a transaction message whose status is not PREPARED
order-queue-mismatch | L | W | content | an order message is not in the queue its sharding key gives
store-host-differs | L | I | content | StoreHost differs from BornHost (LiteMQ copies one into the other)
empty-body | L | I | content | an empty body (written below the broker API)
field-never-filled | L | I | normal | a field LiteMQ never fills is 0 in every record
# --- LiteMQ: consume queues
cq-not-record-start | L | E | pointer | an entry does not point at the start of a record
cq-beyond-end | L | E | pointer | an entry points past the end of the commitlog data
cq-unreachable-record | L | E | pointer | an entry points at a record LiteMQ's reader cannot reach (after damage that ends the live data)
cq-points-to-stale | L | W | history | an entry points at a stale record (the queue was not rewritten after a restart)
cq-stale-entry | L | I | history | an older run's consume-queue entry (past the live end, or pointing at a record of another topic, queue or size): a restart rewrote the queue
cq-remnants | L | W | history | a queue holds entries of an older run after a restart (each listed as cq-stale-entry)
cq-topic-mismatch | L | E | pointer | the record an entry points at belongs to another topic
cq-queue-mismatch | L | E | pointer | the record's QueueID differs from the queue directory
cq-tag-hash-mismatch | L | E | pointer | an entry's tag hash is not the hash of the record's tags
cq-timestamp-skew | L | W | pointer | an entry's time differs from the record's store time
cq-timestamp-lag | L | I | normal | entries carry a time a few ms after the record's (LiteMQ takes it after encoding)
cq-entry-missing | L | E | lost | a record that must have a consume-queue entry has none
cq-missing-at-tail | L | W | crash | the last records have no entry: the broker stopped between the commitlog and queue appends
cq-unexpected-entry | L | W | content | a record LiteMQ never indexes has an entry
cq-entry-count | L | W | content | a record has an unexpected number of entries
cq-order | L | W | pointer | an entry points before the previous entry of its queue
cq-stale-entries | L | W | history | non-zero entries after the end of the queue (older entries surviving a restart)
cq-end-not-zero | L | W | damage | an entry with size 0 but other non-zero fields ends the queue
cq-partial-entry | L | W | damage | trailing bytes that make no whole entry
cq-file-missing | L | E | lost | a consume-queue file is missing between two others
cq-file-size-mismatch | L | W | geometry | a consume-queue file's size differs from the queue's others
no-consumequeue | L | W,I | lost | no consume-queue files
no-cq-by-design | L | I | normal | records LiteMQ dispatches without a consume-queue entry
cron-double-entry | L | I | normal | a cron message has two identical entries, as LiteMQ writes them
tx-no-entry | L | I | normal | a transaction message without entry: rolled back or still pending
tx-committed | L | I | normal | a transaction message with an entry: it was committed
tx-entry-at-commit | L | I | normal | a committed transaction's entry appended at commit time, after later messages
consumer-offset-beyond-queue | L | W | pointer | a consumer acknowledged further than the queue has entries
checkpoint-unknown-queue | L | W | pointer | a consumer offset for a queue that has no consume queue
# --- LiteMQ: checkpoint, abort, index
checkpoint-truncated | L | E | damage | the checkpoint is shorter than its header
checkpoint-bad | L | E | damage | the checkpoint cannot be parsed
checkpoint-version | L | W | content | the checkpoint has an unknown version
checkpoint-trailing | L | W | damage | bytes after the checkpoint's last parsable record
checkpoint-count-quirk | L | I | normal | consumerOffsetCount counts (group, topic, queue) triples, as LiteMQ writes it
checkpoint-flushed-zero | L | I | normal | commitLogFlushedOffset is 0, as always in LiteMQ
abort-unreadable | L | W | damage | the abort file does not hold decimal epoch milliseconds
no-abort-file | L | I | normal | no abort file: the last run reached Shutdown
index-bad-magic | L | E | damage | an index file without the index magic
index-trailing | L | W | damage | bytes after the index entries
index-bad-chain | L | E | damage | an index entry's next link is neither -1 nor an earlier entry
index-dangling | L | E | pointer | an index entry does not point at a live record
index-key-mismatch | L | E | pointer | an index entry's key hash matches none of the record's keys
index-timediff-garbage | L | I | normal | LiteMQ's timeDiff mixes ms and s: not checked
index-not-persisted | L | I | normal | no index file: LiteMQ keeps its key index in memory and never flushes it
# --- LiteMQ: rebuild-index --compare
rebuild-identical | L | I | compare | all rebuilt consume-queue files are byte-identical to the store's
rebuild-entry-differs | L | W | compare | a rebuilt entry differs from the store's
rebuild-size-differs | L | W | geometry | rebuilt and store file sizes differ
rebuild-missing-file | L | W | compare | the store has a consume-queue file the rebuild does not
rebuild-stale-entries | L | W | history | store entries of an older run after the rebuilt ones (a restart rewrote the queue from entry 0): counted per file, not differences
rebuild-missing-in-store | L | W | compare | the rebuild has a consume-queue file the store does not
rebuild-index-count | L | W | compare | index entry counts differ
rebuild-index-entries | L | W | compare | index entries differ in key hash, offset or chain
rebuild-index-equivalent | L | I | compare | the rebuilt index matches the store's (times not compared)
rebuild-index-slots | L | W | compare | the index slot tables differ
rebuild-index-unreadable | L | W | damage | the store's index file is truncated
tx-commit-from-store | L | I | compare | a transaction entry placed where the store's queue has it (its commit time is not in the commitlog)
timestamp-from-store | L | I | compare | an entry time taken from the store's queue
# --- Kafka: .log
kafka.crc-mismatch | K | E | damage | a batch's CRC (v2 CRC32C, legacy CRC32) does not match
kafka.skipped-bytes | K | E | damage | damaged bytes skipped up to the next valid batch
kafka.partial-tail | K | W | crash | bytes at the end of a segment that make no whole batch (interrupted write; recovery truncates them)
kafka.zero-tail | K | I | normal | zero bytes at the end of the active segment: end of data (preallocated)
kafka.zeroed-range | K | W | damage | zeros to the end of a segment that is not the active one (Kafka trims segments at roll)
kafka.segment-gap | K | E,I | lost | offsets in no segment between two segments: a deleted or lost segment, its records lost (info when the partition looks compacted)
kafka.segment-log-missing | K | E | lost | index files of a middle or last segment whose .log is gone: that segment's records are lost
kafka.orphan-index | K | W | normal | index files below the first .log or in a partition without one: an unfinished retention delete (Kafka removes them at startup)
kafka.payload-inflate-failed | K | E | damage | a compressed batch whose payload does not inflate although its CRC (over the compressed bytes) matches (checked without --deep; the batch is a damaged range)
kafka.file-unreadable | K | E | io | a segment, index or checkpoint path that cannot be read
kafka.file-changed | K | E | io | a segment shrank while being read; its scan stopped there
kafka.offset-below-base | K | E | damage | a batch's base offset is below the segment's base offset
kafka.offset-not-increasing | K | E | damage | batch offsets do not follow the previous batch's last offset
kafka.offset-overflow | K | E | damage | an offset minus the segment base does not fit in 32 bits
kafka.records-undecodable | K | E | damage | the records inside a batch cannot be decoded (the batch is a damaged range; records of a v2 batch are read with --deep only)
kafka.record-offsets | K | E | damage | a record offset beyond its batch's last offset
kafka.inner-crc-mismatch | K | E | damage | the CRC of an inner (compressed) legacy message does not match: one finding per wrapper (offset of the first such message, actual = how many), checked without --deep; its span is the whole wrapper, since the inner message exists only inside the wrapper's compressed value
kafka.offset-gaps | K | I | normal | non-consecutive offsets inside segments (normal after compaction)
kafka.transient-file | K | I | normal | a .deleted/.cleaned/.swap file (the broker's work in progress)
kafka.empty-segment | K | I | normal | a segment without batches
# --- Kafka: .index
kafka.index-missing | K | I | normal | no .index file (Kafka rebuilds it at startup)
kafka.index-size | K | E | damage | the .index length is not a multiple of its entry size
kafka.index-sanity | K | E | damage | the last entry's offset is below the base offset (Kafka's sanity check fails)
kafka.index-garbage-tail | K | E | damage | non-zero bytes after the .index entries
kafka.index-preallocated | K | I | normal | .index entries followed by zero bytes (preallocated by a running or crashed broker)
kafka.index-not-monotonic | K | E | damage | .index entries do not increase
kafka.index-position-not-batch | K | E | pointer | an .index entry points at a position where no batch starts
kafka.index-offset-mismatch | K | E | pointer | an .index entry's offset is not the last offset of the batch at its position
kafka.index-append-path | K | I | normal | an entry holds the last offset of a later batch (multi-batch append)
kafka.index-covers-prefix | K | W | crash | the .index stops early: written for an older, shorter log
kafka.index-noncanonical | K | I | normal | consistent .index entries that differ from the recovery rule's
# --- Kafka: .timeindex
kafka.timeindex-missing | K | I | normal | no .timeindex file (Kafka rebuilds it at startup)
kafka.timeindex-size | K | E | damage | the .timeindex length is not a multiple of its entry size
kafka.timeindex-sanity | K | E | damage | the last entry is below the first (Kafka's sanity check fails)
kafka.timeindex-garbage-tail | K | E | damage | non-zero bytes after the .timeindex entries
kafka.timeindex-preallocated | K | I | normal | .timeindex entries followed by zero bytes (preallocated)
kafka.timeindex-out-of-order | K | E | damage | a .timeindex timestamp not after the previous entry's
kafka.timeindex-timestamp-mismatch | K | E | pointer | a .timeindex timestamp differs from the batch's max timestamp
kafka.timeindex-offset-not-found | K | E | pointer | a .timeindex offset that is in no batch of the log
kafka.timeindex-record-offset | K | I | normal | the entry holds the offset of the record with the max timestamp (Kafka 2.x append path)
kafka.timeindex-no-final-entry | K | I | crash | the closing max-timestamp entry is absent (active segment)
kafka.timeindex-covers-prefix | K | W | crash | the .timeindex stops early: written for an older, shorter log
kafka.timeindex-noncanonical | K | I | normal | consistent .timeindex entries that differ from the recovery rule's
# --- Kafka: .txnindex, snapshots, checkpoints
kafka.txnindex-size | K | E | damage | the .txnindex length is not a multiple of 34
kafka.txnindex-no-marker | K | E | pointer | a .txnindex entry without its ABORT marker in the segment
kafka.txnindex-missing-entry | K | E | lost | an ABORT marker but no .txnindex file
kafka.txnindex-mismatch | K | W | pointer | a .txnindex entry's first offset / LSO differ from what the log implies
kafka.snapshot-crc | K | E | damage | a producer snapshot's CRC32C does not match
kafka.snapshot-malformed | K | E | damage | a producer snapshot cannot be parsed
kafka.snapshot-beyond-log-end | K | W | lost | a snapshot's offset is past the log end
kafka.snapshot-stray | K | I,W | normal | a producer snapshot Kafka would delete as stray at startup (warning when it lies between two segment bases)
kafka.checkpoint-negative | K | E | damage | a negative offset in an offset checkpoint, or a negative epoch or start offset in leader-epoch-checkpoint: Kafka never writes one
kafka.batch-records-limit | K | W | content | a batch claims more records than the cap (MQTOOL_KAFKA_MAX_BATCH_RECORDS, default 1,048,576): the records past it are not checked
kafka.record-headers-limit | K | W | content | a record claims more headers than the cap (MQTOOL_KAFKA_MAX_RECORD_HEADERS, default 65,536): its headers are not checked
kafka.no-readable-batch | K | E | damage | a segment in which no batch can be read (e.g. its only batch claims more bytes than the file holds)
kafka.rebuild-offset-overflow | K | W | damage | an index or time entry whose offset does not fit 32 bits from the segment base: the rebuild skips it, as the broker would roll the segment
kafka.checkpoint-malformed | K | E | damage | a checkpoint file cannot be parsed
kafka.checkpoint-beyond-log-end | K | W | lost | a checkpoint offset is past the log end: the log lost data after it was written
kafka.index-interval | K | W,I | geometry | the segments' .index spacing points at different index.interval.bytes values: the ranges are named (info when most segments agree)
kafka.checkpoint-unknown-partition | K | W | lost | a checkpoint lists a partition with no directory
kafka.leader-epoch-beyond-log-end | K | E | lost | a leader epoch starts past the log end
kafka.leader-epoch-mismatch | K | W | pointer | a batch's partition leader epoch differs from the checkpoint's epoch for its offset
kafka.leader-epoch-mid-batch | K | W | pointer | a leader epoch starts inside a batch
kafka.partition-metadata-malformed | K | E | damage | partition.metadata does not parse
# --- Kafka: rebuild-index --compare
kafka.rebuild-identical | K | I | compare | byte-identical to the rebuild
kafka.rebuild-identical-but-preallocated | K | I | normal | same entries; the store's file is padded with zeros (running or crashed broker)
kafka.rebuild-differs | K | W | compare | differs from the canonical rebuild
kafka.rebuild-stale-prefix | K | W | crash | the store's entries are a prefix of the rebuild's: the index covers only older data
kafka.rebuild-no-final-entry | K | I | crash | the same entries except the closing max-timestamp entry (active segment)
kafka.rebuild-missing-on-disk | K | I,W | compare | no index file of this kind in the store
kafka.rebuild-log-truncated | K | W | crash | Kafka's recovery would truncate the log here
kafka.rebuild-file-unreadable | K | E | io | a log or index file cannot be read
"""


@dataclass(frozen=True)
class CodeInfo:
    code: str
    families: tuple[str, ...]
    severities: tuple[str, ...]
    klass: str
    meaning: str

    @property
    def severity(self) -> str:
        """The usual severity (the first listed)."""
        return self.severities[0]

    @property
    def causes(self) -> str:
        return CLASSES[self.klass][0]

    @property
    def action(self) -> str:
        return CLASSES[self.klass][1]

    def to_dict(self) -> dict:
        return {"code": self.code, "families": list(self.families), "severity": self.severity,
                "severities": list(self.severities), "class": self.klass, "meaning": self.meaning,
                "causes": self.causes, "action": self.action}


def _parse(text: str) -> dict[str, CodeInfo]:
    out: dict[str, CodeInfo] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        code, fam, sev, klass, meaning = (p.strip() for p in line.split("|", 4))
        if code in out:
            raise ValueError(f"finding code {code} registered twice")
        if klass not in CLASSES:
            raise ValueError(f"finding code {code}: unknown class {klass}")
        out[code] = CodeInfo(code, tuple(FAMILY_NAMES[c] for c in fam),
                             tuple(SEVERITY_NAMES[s] for s in sev.split(",")), klass, meaning)
    return out


REGISTRY: dict[str, CodeInfo] = _parse(_TABLE)


def lookup(code: str) -> CodeInfo | None:
    """The entry of ``code``; a Kafka code may be given without its ``kafka.`` prefix."""
    return REGISTRY.get(code) or REGISTRY.get(f"kafka.{code}")
