"""Rebuild LiteMQ consumequeues (and, on request, a key index file) from the commitlog.

Dispatch rules, as LiteMQ's code applies them (pkg/broker/message_handler.go & co.):

* normal, order and direct (empty-body) records: one entry in ``<Topic>/<QueueID>``;
* delay (type 1): none; broadcast (type 3 or flag 1): none;
* cron (type 5): two identical entries;
* transaction (type 2): one entry appended *at commit time*, none when rolled back or pending. The
  commitlog cannot tell which happened, nor when: with the store's own consumequeue present (the default)
  a transaction record is placed where that queue has it; without it (``--no-store-hints``) none is.

The entry timestamp is the record's StoreTimestamp. LiteMQ takes it a moment later (after opening a new
commitlog file it can be 1 ms later); with store hints, an entry whose store counterpart (same queue
index, offset and size) differs by at most the tolerance keeps the store's timestamp, and each such use is
reported. Files are ``%020d`` file indexes, zero-filled to the file size as LiteMQ preallocates them.

The package is split by step: :mod:`.dispatch` (records -> entries, store hints), :mod:`.consumequeue` and
:mod:`.index` (the writers), :mod:`.compare` (``--compare``), :mod:`.run` (``run_rebuild``).
"""
from __future__ import annotations

from mqtool.litemq.indexfiles import broker_toml_sizes, cq_file_size  # noqa: F401  (the one place that decides)
from mqtool.litemq.rebuild.consumequeue import queue_files
from mqtool.litemq.rebuild.dispatch import dispatch
from mqtool.litemq.rebuild.index import build_index
from mqtool.litemq.rebuild.run import run_rebuild

__all__ = ["run_rebuild", "dispatch", "queue_files", "build_index", "broker_toml_sizes", "cq_file_size"]
