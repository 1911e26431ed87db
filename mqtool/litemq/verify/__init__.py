"""Verify a LiteMQ store: record structure, consumequeue ↔ commitlog, shutdown markers, index.

Severities separate LiteMQ's own behaviour from damage:

* ``info``    — how LiteMQ always behaves (fields it never fills, no entries for delay/broadcast/uncommitted
  transaction messages, two entries per cron message, wrong checkpoint counts, index never flushed...);
* ``warning`` — a state worth knowing that is not broken bytes (unclean shutdown, stale records surviving
  a restart, odd flag values);
* ``error``   — damage: bytes that contradict the format or each other.

The package is split by check: :mod:`.run` (``run_verify``: the commitlog walk, whose damage events become
findings there, then the other parts), :mod:`.record` (one record on its own), :mod:`.consumequeue`,
:mod:`.checkpoint` (abort file and checkpoint), :mod:`.index`, :mod:`.salvage` (``--salvage-out``).
"""
from __future__ import annotations

from mqtool.litemq.verify.consumequeue import CQ_TIMESTAMP_TOLERANCE_MS
from mqtool.litemq.verify.record import NEVER_FILLED, RecInfo, expected_entries, record_findings
from mqtool.litemq.verify.run import run_verify

__all__ = ["run_verify", "record_findings", "RecInfo", "expected_entries", "NEVER_FILLED",
           "CQ_TIMESTAMP_TOLERANCE_MS"]
