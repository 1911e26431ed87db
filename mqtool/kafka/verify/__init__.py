"""Kafka checks → findings. One pass over each ``.log``; index files are checked against what that pass saw.

Stable finding codes (``kafka.*``); severity in brackets:

log      segment-gap [E; I when the partition looks compacted] (offsets between two segments are in none),
         crc-mismatch [E], skipped-bytes [E], partial-tail [W], zero-tail [I], offset-below-base [E],
         offset-not-increasing [E], offset-overflow [E], records-undecodable [E], record-offsets [E],
         payload-inflate-failed [E] (a compressed batch whose payload does not inflate; checked without --deep),
         inner-crc-mismatch [E] (per legacy wrapper; span: the wrapper), offset-gaps [I], transient-file [I], empty-segment [I]
.index   index-missing [I], index-size [E], index-sanity [E], index-garbage-tail [E], index-preallocated [I],
         index-not-monotonic [E], index-position-not-batch [E], index-offset-mismatch [E],
         index-append-path [I] (entry written by a multi-batch append: offset of a later batch's end),
         index-covers-prefix [W], index-noncanonical [I]
.timeindex  timeindex-missing [I], timeindex-size [E], timeindex-sanity [E], timeindex-garbage-tail [E],
         timeindex-preallocated [I], timeindex-out-of-order [E], timeindex-timestamp-mismatch [E],
         timeindex-offset-not-found [E], timeindex-record-offset [I] (Kafka 2.x: offset of the record with
         the max timestamp inside the batch, not the batch's last offset), timeindex-no-final-entry [I],
         timeindex-covers-prefix [W], timeindex-noncanonical [I]
.txnindex   txnindex-size [E], txnindex-no-marker [E], txnindex-missing-entry [E], txnindex-mismatch [W]
.snapshot   snapshot-crc [E], snapshot-malformed [E], snapshot-beyond-log-end [W], snapshot-stray [I; W when its
         offset lies between two segment bases] (no .log of that base; Kafka deletes it at load)
orphans  segment-log-missing [E] (.index/.timeindex/.txnindex of a middle or last segment whose .log is gone),
         orphan-index [W] (index files before the first .log, or in a partition with no .log)
checkpoints checkpoint-malformed [E], checkpoint-negative [E], checkpoint-beyond-log-end [W], checkpoint-unknown-partition [W],
         leader-epoch-beyond-log-end [E], leader-epoch-mismatch [W], leader-epoch-mid-batch [W],
         partition-metadata-malformed [E]

The package is split by check: :mod:`.verifier` (``KafkaVerifier``: the walk over log dirs, partitions and
segments), :mod:`.log` (the ``.log`` pass), :mod:`.indexes` (``.index``, ``.timeindex``, ``.txnindex``),
:mod:`.partition` (segment gaps, orphans, snapshots, metadata, log-dir checkpoints), :mod:`.state`
(``SegmentSeen``). ``from mqtool.kafka.verify import KafkaVerifier`` keeps working.
"""
from __future__ import annotations

from mqtool.kafka.verify.state import SegmentSeen
from mqtool.kafka.verify.verifier import KafkaVerifier

__all__ = ["KafkaVerifier", "SegmentSeen"]
