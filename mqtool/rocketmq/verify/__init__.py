"""``mqtool verify`` for RocketMQ stores: every check yields a Finding; nothing stops at the first one.

Checks (reference §1, §3–§8):

* commitlog: segment names/sizes/gaps; per unit magic, size bounds (before any allocation), TOTALSIZE against
  the field lengths, body CRC, a compressed body inflates (``body-inflate-failed``), stored PHYSICALOFFSET against the real offset (stale or shifted data), BLANK
  placement and size, properties, the 5.x ``__CRC32#`` whole-message CRC, queue-offset continuity per queue for
  dispatched messages, what lies after the end of data; damaged ranges are skipped by resync and counted;
* consumequeue: every unit against the message it points at (start, size, topic, queue, queue offset, tagsCode),
  holes, dangling units, queues behind the commitlog, file naming and sizes, LMQ multi-dispatch;
* index: header against entries, entries against messages (start, key hash, time), slot and chain sanity
  (ranges, cycles, bucket), files newer than the checkpoint;
* store: abort marker, checkpoint against the data (``checkpoint-negative``, ``checkpoint-future``,
  ``checkpoint-beyond-log-end``, ``checkpoint-ahead``/``-behind``), config files and their ``.bak``.

The package is split by check; this module re-exports the names callers use (``from mqtool.rocketmq.verify
import verify_store``):

* :mod:`.run` — ``verify_store``: the parts in order, one findings iterator and the summary;
* :mod:`.context` — ``_Ctx`` (state of one run) and ``_each_file`` (a file that cannot be read is one finding);
* :mod:`.commitlog` — the commitlog walk and the light dispatch pass; :mod:`.segments` — segment files;
  :mod:`.units` — the checks of one message/BLANK/damage/end event; :mod:`.dispatched` — what the dispatcher
  does with a message; :mod:`.native_lane` — the fast lane (compiled ``rmqverify`` and its Python twin) and the
  cross-reference table the commitlog pass fills for the consumequeue and index checks (``new_xref``: a file
  it proves clean skips their per-entry loops);
  :mod:`.ranges` — the same check over byte ranges (``--jobs``, Spark), merged in order;
* :mod:`.consumequeue`, :mod:`.index` — those parts; :mod:`.storefiles` (the abort marker, then
  :mod:`.checkpoint` and :mod:`.config`) — the store's own files;
* :mod:`.salvage` — ``--salvage-out``.

The switch tests turn (``USE_FAST_LANE``) lives in :mod:`.native_lane`: set it there (the compiled helpers follow
``mqtool.native``).
"""
from __future__ import annotations

from mqtool.rocketmq.verify.commitlog import _scan_for_dispatch, _verify_commitlog
from mqtool.rocketmq.verify.consumequeue import _cq_behind, _verify_consumequeue, _verify_queue
from mqtool.rocketmq.verify.context import _Ctx, _each_file
from mqtool.rocketmq.verify.index import _verify_index, _verify_index_file
from mqtool.rocketmq.verify.native_lane import _fast_lane, _native_lane
from mqtool.rocketmq.verify.ranges import RangeVerify, verify_commitlog_ranges, verify_range_task
from mqtool.rocketmq.verify.run import verify_store
from mqtool.rocketmq.verify.salvage import _Salvage
from mqtool.rocketmq.verify.storefiles import _verify_store_files

__all__ = ["verify_store", "verify_range_task", "verify_commitlog_ranges", "RangeVerify",
           # used by mqtool.rocketmq.verifyplan and fuzz/rocketmq_targets.py
           "_Ctx", "_each_file", "_scan_for_dispatch", "_verify_commitlog", "_verify_consumequeue", "_verify_queue",
           "_cq_behind", "_verify_index", "_verify_index_file", "_verify_store_files", "_Salvage", "_fast_lane",
           "_native_lane"]
