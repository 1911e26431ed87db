"""The checks of one record on its own (fields LiteMQ never fills, flag values, times, sizes) and what the
cross-file checks keep of it (:class:`RecInfo`, :func:`expected_entries`)."""
from __future__ import annotations

from dataclasses import dataclass

from formats import litemq as F
from mqtool.findings import ERROR, INFO, WARNING, Finding, born_finding, born_plausible
from mqtool.litemq.records import LiteRecord, order_queue
from mqtool.plainclass import replace

NEVER_FILLED = ("QueueOffset", "CommitLogOffset", "StoreSize", "ConsumeStartTime", "ConsumeEndTime",
                "ConsumeCount")


@dataclass(slots=True)
class RecInfo:
    """What the cross-file checks need of a record (no bodies kept)."""

    offset: int
    size: int
    file: str
    position: int
    topic: str
    queue_id: int
    type: int
    broadcast: int
    tag_hash: int
    store_ts: int
    queue_offset: int
    key_hashes: frozenset
    msg_id: str
    empty_body: bool


def expected_entries(ri: RecInfo) -> tuple[int | None, str]:
    """(entries LiteMQ's dispatch gives this record, why); None = depends on a later commit."""
    if ri.type == F.TYPE_DELAY:
        return 0, "delay messages are never dispatched (the scheduler cannot re-append them)"
    if ri.type == F.TYPE_BROADCAST or ri.broadcast == 1:
        return 0, "broadcast messages get no entry (no broadcast group is ever registered)"
    if ri.type == F.TYPE_TRANSACTION:
        return None, "transaction messages get one entry only when committed"
    if ri.type == F.TYPE_CRON:
        return 2, "cron messages get two identical entries (LiteMQ bug: fallback append + normal append)"
    return 1, "one entry"


def record_findings(rec: LiteRecord, max_message_size: int = 4 * 1024 * 1024) -> list[Finding]:
    """Checks on one live record (structure and field values). An error says the record's bytes are damaged
    (fields that contradict themselves): its span is the record (:mod:`mqtool.causes`; ``info`` counts it)."""
    out = []
    body_len = rec.body_slice[1] - rec.body_slice[0]
    if body_len > max_message_size:
        out.append(Finding(WARNING, "oversized-message", rec.file, rec.position, rec.offset,
                           "body larger than --max-message-size (LiteMQ's MaxMessageSize defaults to 4 MiB)",
                           max_message_size, body_len))
    m = rec.m
    f, pos, off = rec.file, rec.position, rec.offset
    if not born_plausible(m["BornTimestamp"], m["StoreTimestamp"]):
        out.append(born_finding(f, pos, off, m["BornTimestamp"], m["StoreTimestamp"]))
    if rec.length != rec.consumed + F.TRAILING_PAD:
        out.append(Finding(ERROR, "length-mismatch", f, pos, off,
                           "length prefix disagrees with the encoded fields (+6 overcount)",
                           rec.consumed + F.TRAILING_PAD, rec.length))
    if rec.padding != bytes(len(rec.padding)):
        out.append(Finding(WARNING, "padding-not-zero", f, pos, off,
                           "the 6 trailing bytes LiteMQ never writes are not zero", "000000000000",
                           rec.padding.hex()))
    if rec.bad_utf8:
        out.append(Finding(WARNING, "bad-utf8", f, pos, off,
                           f"invalid UTF-8 in {', '.join(rec.bad_utf8)} (shown with replacement characters)"))
    if m["MessageType"] not in F.MESSAGE_TYPES:
        out.append(Finding(WARNING, "unknown-message-type", f, pos, off, "MessageType outside 0..5", "0..5",
                           m["MessageType"]))
    if m["MessageStatus"] not in F.MESSAGE_STATUSES:
        out.append(Finding(WARNING, "unknown-status", f, pos, off, "MessageStatus outside 0..4", "0..4",
                           m["MessageStatus"]))
    if m["Broadcast"] not in (0, 1):
        out.append(Finding(WARNING, "broadcast-flag-value", f, pos, off,
                           "Broadcast byte is neither 0 nor 1 (LiteMQ's decoder treats it as false)", "0|1",
                           m["Broadcast"]))
    if m["CommitLogOffset"] and m["CommitLogOffset"] != off:
        out.append(Finding(ERROR, "commitlog-offset-mismatch", f, pos, off,
                           "stored CommitLogOffset is not where the record is", off, m["CommitLogOffset"]))
    if m["StoreSize"] and m["StoreSize"] != rec.size:
        out.append(Finding(ERROR, "store-size-mismatch", f, pos, off, "stored StoreSize is not the record size",
                           rec.size, m["StoreSize"]))
    if m["ConsumeStartTime"] or m["ConsumeEndTime"] or m["ConsumeCount"]:
        sev = ERROR if m["ConsumeEndTime"] and m["ConsumeEndTime"] < m["ConsumeStartTime"] else WARNING
        out.append(Finding(sev, "consume-fields-set", f, pos, off,
                           "consume fields are set; LiteMQ never writes them into records", 0,
                           [m["ConsumeStartTime"], m["ConsumeEndTime"], m["ConsumeCount"]]))
    if m["MessageType"] == F.TYPE_TRANSACTION and m["MessageStatus"] != 1:
        out.append(Finding(WARNING, "tx-status", f, pos, off,
                           "LiteMQ stores transaction messages as PREPARED (1) and never rewrites them", 1,
                           m["MessageStatus"]))
    if m["MessageType"] == F.TYPE_ORDER and m["ShardingKey"]:
        q = order_queue(m["ShardingKey"])
        if q != m["QueueID"]:
            out.append(Finding(WARNING, "order-queue-mismatch", f, pos, off,
                               "order message is not in the queue LiteMQ derives from its sharding key", q,
                               m["QueueID"]))
    if m["StoreHost"] != m["BornHost"]:
        out.append(Finding(INFO, "store-host-differs", f, pos, off, "StoreHost differs from BornHost "
                           "(LiteMQ copies one into the other)", m["BornHost"], m["StoreHost"]))
    if rec.body_slice[0] == rec.body_slice[1]:
        out.append(Finding(INFO, "empty-body", f, pos, off,
                           "empty body: written below the broker API (SendMessage rejects empty bodies)"))
    return [replace(x, span=(off, off + rec.size)) if x.severity == ERROR else x for x in out]
