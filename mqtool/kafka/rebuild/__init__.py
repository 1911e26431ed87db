"""Rebuild ``.index`` / ``.timeindex`` / ``.txnindex`` from ``.log`` segments with Kafka's recovery rule.

``LogSegment.recover`` (reference kafka.md §5.3): walk the shallow batches; keep the running max timestamp
and the lastOffset of the batch that first reached it; when more than ``index.interval.bytes`` bytes were
read since the last entry, index the current batch (its lastOffset at its start position) and offer the
running max to the time index (appended only when the timestamp goes strictly up); at the end, offer the
running max once more (the entry a segment gets at roll/close). Aborted transactions come from the ABORT
markers, with the first offset of the producer's open transaction (possibly in an earlier segment) and the
last stable offset at the time of the abort (``ProducerStateManager.lastStableOffset``).

Outputs are written atomically below a directory checked by :func:`mqtool.io.prepare_output_dir`
(no link below it followed), never in place.

``rebuild-index`` for Kafka: write rebuilt indexes to --out and/or compare them with the disk. Output layout:
``<out>/<log dir name>/<partition dir>/<segment>.{index,timeindex,txnindex}`` (the log dir level is omitted
when a single partition dir was given). ``.txnindex`` is written only for segments with aborted transactions
(Kafka creates it lazily). ``--preallocate`` pads the active (last) segment's indexes to 10 MiB of zeros as a
running broker leaves them; other segments are trimmed as at roll/close. Compare findings (``kafka.rebuild-*``):
identical [I], identical-but-preallocated [I], missing-on-disk [I], no-final-entry [I], stale-prefix [W],
differs [W], log-truncated [W] (recovery would stop early).

The package is split by step: :mod:`.txn` (open transactions, marker types), :mod:`.recover` (the recovery
rule and the canonical index bytes), :mod:`.compare` (``--compare``), :mod:`.run` (``run_rebuild``, the
engine entry point; was ``mqtool.kafka.rebuild_ops``).
"""
from __future__ import annotations

from mqtool.kafka.rebuild.compare import _compare
from mqtool.kafka.rebuild.recover import (PREALLOCATED_INDEX_SIZE, PREALLOCATED_TIMEINDEX_SIZE, Recoverer,
                                          SegmentIndexes, recover_segment)
from mqtool.kafka.rebuild.run import run_rebuild
from mqtool.kafka.rebuild.txn import TxnTracker, control_type_of

__all__ = ["run_rebuild", "recover_segment", "Recoverer", "SegmentIndexes", "TxnTracker", "control_type_of",
           "PREALLOCATED_INDEX_SIZE", "PREALLOCATED_TIMEINDEX_SIZE", "_compare"]
