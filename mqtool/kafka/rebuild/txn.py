"""Aborted transactions across a partition's segments (``ProducerStateManager``'s view) and the control
record type of a marker batch."""
from __future__ import annotations

from formats import kafka as K
from mqtool.common import java_long
from mqtool.kafka.records import Batch, iter_records


class TxnTracker:
    """Open transactions across the segments of one partition (ProducerStateManager's view of them)."""

    def __init__(self):
        self.ongoing: dict[int, int] = {}     # pid -> first offset (insertion = first-offset order)

    def observe(self, b: Batch, control_type: int | None):
        """Feed one batch; returns an AbortedTxn tuple when ``b`` is an ABORT marker."""
        if not b.is_transactional or b.producer_id < 0:
            return None
        pid = b.producer_id
        if not b.is_control:
            if pid not in self.ongoing:
                self.ongoing[pid] = b.base_offset
            return None
        first = self.ongoing.pop(pid, None)
        if control_type != K.CONTROL_ABORT:
            return None
        marker = java_long(b.last_offset)     # (Kafka's longs: baseOffset + lastOffsetDelta, + 1, wrap)
        others = [o for p, o in self.ongoing.items() if p != pid]
        lso = min(others) if others else java_long(marker + 1)
        return (0, pid, first if first is not None else marker, marker, lso)


def control_type_of(b: Batch) -> int | None:
    try:
        for r in iter_records(b):
            return r.control_type
    except (ValueError, Exception):  # noqa: BLE001 - a damaged marker is simply not a marker
        return None
    return None
