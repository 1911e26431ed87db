"""Verify a LiteMQ store: record structure, consumequeue ↔ commitlog, shutdown markers, index.

Severities separate LiteMQ's own behaviour from damage:

* ``info``    — how LiteMQ always behaves (fields it never fills, no entries for delay/broadcast/uncommitted
  transaction messages, two entries per cron message, wrong checkpoint counts, index never flushed...);
* ``warning`` — a state worth knowing that is not broken bytes (unclean shutdown, stale records surviving
  a restart, odd flag values);
* ``error``   — damage: bytes that contradict the format or each other.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from formats import litemq as F
from mqtool.damage import Damage
from mqtool.errors import OutputError
from mqtool.findings import (ERROR, INFO, WARNING, Finding, Summary, born_finding, born_plausible,
                             checkpoint_value_problems)
from mqtool.io import open_salvage_file
from mqtool.litemq import indexfiles as CQ
from mqtool.litemq.history import INSIDE_RECORD, OVERWRITTEN, PAST_END, stale_reason
from mqtool.litemq.store import Store
from mqtool.litemq.records import LiteRecord, fnv1a32, order_queue, tag_hash
from mqtool.litemq.rows import record_row
from mqtool.litemq.scan import TIME_REGRESSION_MS, WalkResult, damage_finding, walk
from mqtool.options import VerifyOptions
from mqtool.columns import iso_ms
from mqtool.ndjson import dumps
from mqtool.schema_struct import field_offsets

#: LiteMQ stamps the consumequeue entry a moment after encoding the record (a few ms at most).
CQ_TIMESTAMP_TOLERANCE_MS = 1000

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
    """Checks on one live record (structure and field values)."""
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
    return out


def run_verify(part: str, store: Store, opts: VerifyOptions):
    summary = Summary()
    summary.extra["family"] = "litemq"

    def gen():
        for fnd in _verify(part, store, opts, summary):
            summary.add(fnd)
            if fnd.code == "unaccounted-bytes" and isinstance(fnd.actual, int):
                summary.skipped_ranges += 1
                summary.skipped_bytes += fnd.actual
            yield fnd

    return gen(), lambda: summary


def _verify(part: str, store: Store, opts: VerifyOptions, summary: Summary):
    res = WalkResult()
    live: dict[int, RecInfo] = {}
    stale: dict[int, LiteRecord] = {}
    never_zero = Counter()
    order = []
    for item in walk(store, carve_stale=True, result=res):
        if isinstance(item, Damage):
            yield damage_finding(item)
            continue
        rec = item
        if rec.stale:
            stale[rec.offset] = rec
            yield Finding(INFO if rec.state == "stale" else ERROR, f"{rec.state}-record", rec.file,
                          rec.position, rec.offset,
                          f"{rec.state} record {rec.m['MessageID']!r} ({rec.m['Topic']}, stored "
                          f"{iso_ms(rec.m['StoreTimestamp'])}) after the end of data")
            continue
        summary.messages += 1
        for fnd in record_findings(rec, opts.max_message_size):
            yield fnd
        m = rec.m
        for k in NEVER_FILLED:
            if m[k] == 0:
                never_zero[k] += 1
        ri = RecInfo(rec.offset, rec.size, rec.file, rec.position, m["Topic"], m["QueueID"], m["MessageType"],
                     m["Broadcast"], tag_hash(rec.raw_tags), m["StoreTimestamp"], m["QueueOffset"],
                     frozenset(fnv1a32(k) for k in rec.raw_keys), m["MessageID"],
                     rec.body_slice[0] == rec.body_slice[1])
        live[rec.offset] = ri
        order.append(rec.offset)
    summary.extra.update(end_offset=res.end_offset, stale_records=res.stale, after_gap_records=res.after_gap,
                         commitlog_file_size=res.file_size)
    for k in NEVER_FILLED:
        if never_zero[k]:
            yield Finding(INFO, "field-never-filled", None, None, None,
                          f"{k} is 0 in {never_zero[k]} of {len(live)} record(s): LiteMQ encodes the message "
                          "before it could set this field", 0, never_zero[k])
    if store.kind in ("segment", "commitlog") and part == "store":
        part = "commitlog"   # a commitlog part alone: the cross-file checks would compare against missing files
    abort_present = bool(store.abort_file and store.abort_file.is_file())
    queue_len: dict = {}
    if part in ("store", "consumequeue"):
        cq = CQ.cq_file_size(opts, store)
        summary.extra["cq_file_size"] = cq.to_dict("bytes")
        if cq.warning:
            yield Finding(WARNING, "cq-geometry", "consumequeue", None, None, cq.warning, cq.value,
                          list(cq.candidates))
        yield from _verify_cq(store, live, stale, order, res, abort_present, summary, queue_len, cq.value)
    if part == "store":
        yield from _verify_markers(store, abort_present, summary, queue_len, res.end_offset)
    if part in ("store", "index"):
        yield from _verify_index(store, live, part == "index")
    if opts.salvage_out:
        _salvage(store, opts)


def _verify_cq(store, live, stale, order, res, abort_present, summary, queue_len, file_size=None):
    qs = CQ.queues(store)
    if not qs:
        yield Finding(WARNING if live else INFO, "no-consumequeue", store.display(store.consumequeue_dir)
                      if store.consumequeue_dir else None, None, None, "no consumequeue files")
    counts: Counter = Counter()
    lag = 0
    total = 0
    max_indexed = -1
    for q in qs:
        prev_off = prev_ts = first_remnant = None
        n = q_remnants = 0
        for item in CQ.read_queue(store, q, file_size=file_size):
            if isinstance(item, Finding):
                yield item
                continue
            e = item
            n += 1
            total += 1
            f, pos = e.file, e.position
            ri = live.get(e.commitlog_offset)
            old = stale.get(e.commitlog_offset)
            if ri is None and old is not None and old.state == "after-gap":
                yield Finding(ERROR, "cq-unreachable-record", f, pos, e.commitlog_offset,
                              "entry points at a record that LiteMQ's reader cannot reach (it lies after "
                              "damage that ends the live data)")
                continue
            if ri is not None:
                reason = stale_reason(e, "start", (ri.topic, ri.queue_id, ri.size))
            else:
                past = res.end_offset is not None and e.commitlog_offset >= res.end_offset
                reason = stale_reason(e, "past-end" if past else "inside")
            # A restart shows as carved older records and no newer ones (an entry past the new end points at one
            # of them), store time going back in the log or in this queue, or an earlier remnant of this queue
            # (newer records after the end mean the end is damage, see scan._end_finding). Without such a
            # sign the entry is damage: a mismatch, or a queue pointing into a zeroed/truncated tail.
            restarted = ((res.stale and not res.after_gap) or res.regressed or q_remnants
                         or (prev_ts is not None and e.timestamp < prev_ts - TIME_REGRESSION_MS))
            prev_ts = e.timestamp
            if reason and restarted:
                if not q_remnants:
                    first_remnant = (f, pos, e.index)
                q_remnants += 1
                what = {PAST_END: "points past the live end of the commitlog" + (
                            f"; the older record there survives as a stale record ({old.m['MessageID']!r})"
                            if old is not None and old.m["Topic"] == q.topic and old.m["QueueID"] == q.queue_id
                            and old.size == e.size else ""),
                        OVERWRITTEN: f"points at a record of {ri.topic!r}/{ri.queue_id} ({ri.size} bytes) "
                                     "that overwrote the one it meant" if ri else "",
                        INSIDE_RECORD: "points inside a newer record (the one it meant was overwritten)"}
                yield Finding(INFO, "cq-stale-entry", f, pos, e.commitlog_offset,
                              f"entry {e.index} is an older run's remnant: it {what[reason]}", None, reason)
                continue
            if ri is None:
                if old is not None:
                    yield Finding(WARNING, "cq-points-to-stale", f, pos, e.commitlog_offset,
                                  "entry points at a stale record (the queue was not rewritten after a restart)")
                elif res.end_offset is not None and e.commitlog_offset >= res.end_offset:
                    yield Finding(ERROR, "cq-beyond-end", f, pos, e.commitlog_offset,
                                  "entry points past the end of the commitlog data", res.end_offset,
                                  e.commitlog_offset)
                else:
                    yield Finding(ERROR, "cq-not-record-start", f, pos, e.commitlog_offset,
                                  "entry does not point at the start of a record")
                continue
            counts[e.commitlog_offset] += 1
            max_indexed = max(max_indexed, e.commitlog_offset)
            if e.size != ri.size:
                yield Finding(ERROR, "cq-size-mismatch", f, pos, e.commitlog_offset,
                              "entry size differs from the record size (prefix included)", ri.size, e.size)
            if ri.topic != q.topic:
                yield Finding(ERROR, "cq-topic-mismatch", f, pos, e.commitlog_offset,
                              "record belongs to another topic", q.topic, ri.topic)
            if ri.queue_id != q.queue_id:
                yield Finding(ERROR, "cq-queue-mismatch", f, pos, e.commitlog_offset,
                              "record's QueueID differs from the queue directory", q.queue_id, ri.queue_id)
            if e.tag_hash != ri.tag_hash:
                yield Finding(ERROR, "cq-tag-hash-mismatch", f, pos, e.commitlog_offset,
                              "tag hash is not FNV-1a of the record's tags", ri.tag_hash, e.tag_hash)
            d = e.timestamp - ri.store_ts
            if abs(d) > CQ_TIMESTAMP_TOLERANCE_MS:
                yield Finding(WARNING, "cq-timestamp-skew", f, pos, e.commitlog_offset,
                              f"entry time differs from the record's StoreTimestamp by {d} ms", ri.store_ts,
                              e.timestamp)
            elif d:
                lag += 1
            if ri.queue_offset and ri.queue_offset != e.index:
                yield Finding(ERROR, "queue-offset-mismatch", f, pos, e.commitlog_offset,
                              "stored QueueOffset differs from the entry index", e.index, ri.queue_offset)
            if ri.type == F.TYPE_TRANSACTION:
                if prev_off is not None and e.commitlog_offset < prev_off:
                    yield Finding(INFO, "tx-entry-at-commit", f, pos, e.commitlog_offset,
                                  "committed transaction: LiteMQ appends its entry at commit time, after "
                                  "later messages, pointing back at the original record", f">= {prev_off}",
                                  e.commitlog_offset)
                continue
            if prev_off is not None and e.commitlog_offset < prev_off:
                yield Finding(WARNING, "cq-order", f, pos, e.commitlog_offset,
                              "entry points before the previous entry of the queue", f">= {prev_off}",
                              e.commitlog_offset)
            prev_off = e.commitlog_offset
        queue_len[(q.topic, q.queue_id)] = n - q_remnants
        if q_remnants:
            yield Finding(WARNING, "cq-remnants", first_remnant[0], first_remnant[1], None,
                          f"{q.topic}/{q.queue_id}: {q_remnants} entr{'y' if q_remnants == 1 else 'ies'} (the first "
                          f"is entry {first_remnant[2]}) match no live record: a restart rewrote the "
                          "queue from entry 0 and the older run's entries after the new count survive "
                          "(`dump consumequeue` marks them stale)", 0, q_remnants)
    summary.extra["cq_entries"] = total
    if lag:
        yield Finding(INFO, "cq-timestamp-lag", None, None, None,
                      f"{lag} entr(y/ies) carry a time a few ms after the record's StoreTimestamp: LiteMQ takes "
                      "it after encoding", 0, lag)
    by_design = Counter()
    for off in order:
        ri = live[off]
        n = counts.get(off, 0)
        want, why = expected_entries(ri)
        tname = F.MESSAGE_TYPES.get(ri.type, str(ri.type))
        if want is None:  # transaction
            if n == 0:
                yield Finding(INFO, "tx-no-entry", ri.file, ri.position, off,
                              f"transaction message {ri.msg_id!r} has no entry: rolled back or still pending "
                              "(LiteMQ writes neither outcome to disk)")
            elif n == 1:
                yield Finding(INFO, "tx-committed", ri.file, ri.position, off,
                              f"transaction message {ri.msg_id!r} has an entry: it was committed")
            else:
                yield Finding(WARNING, "cq-entry-count", ri.file, ri.position, off,
                              "transaction message indexed more than once", 1, n)
            continue
        if n == want:
            if want == 0:
                by_design[tname if ri.type != F.TYPE_NORMAL else "BROADCAST(flag)"] += 1
            elif want == 2:
                yield Finding(INFO, "cron-double-entry", ri.file, ri.position, off,
                              f"cron message {ri.msg_id!r} has two identical entries ({why})", 2, n)
            continue
        if n == 0:
            if off > max_indexed and abort_present:
                yield Finding(WARNING, "cq-missing-at-tail", ri.file, ri.position, off,
                              "record at the tail has no consumequeue entry: the broker stopped between the "
                              "commitlog and consumequeue appends", want, 0)
            else:
                yield Finding(ERROR, "cq-entry-missing", ri.file, ri.position, off,
                              f"{tname} record {ri.msg_id!r} has no consumequeue entry", want, 0)
        elif want == 0:
            yield Finding(WARNING, "cq-unexpected-entry", ri.file, ri.position, off,
                          f"{tname} record is indexed, which LiteMQ never does ({why})", 0, n)
        else:
            yield Finding(WARNING, "cq-entry-count", ri.file, ri.position, off,
                          f"{tname} record has {n} entries", want, n)
    for tname, c in sorted(by_design.items()):
        yield Finding(INFO, "no-cq-by-design", None, None, None,
                      f"{c} {tname} record(s) have no consumequeue entry, as LiteMQ dispatches them", 0, c)


def _verify_markers(store: Store, abort_present: bool, summary: Summary, qlen: dict, log_end: int | None = None):
    ab = store.abort_file
    if abort_present:
        row, fs = CQ.read_abort(ab)
        yield from fs
        when = iso_ms(row["start_time"]) if row["start_time"] else "unknown time"
        yield Finding(WARNING, "unclean-shutdown", store.display(ab), 0, None,
                      f"abort file present (broker started {when}): the last run did not reach Shutdown")
        summary.extra["unclean_shutdown"] = True
    else:
        summary.extra["unclean_shutdown"] = False
        yield Finding(INFO, "no-abort-file", store.display(ab) if ab else None, None, None,
                      "no abort file: the last run reached Broker.Shutdown (which then hangs in "
                      "CommitLog.Close in every LiteMQ version read)")
    cp = store.checkpoint_file
    if cp is None or not cp.is_file():
        yield Finding(INFO if abort_present else WARNING, "checkpoint-missing",
                      store.display(cp) if cp else None, None, None,
                      "no checkpoint file: only a forced flush at shutdown writes it"
                      + (" (expected after a crash)" if abort_present else ""))
        return
    row, fs = CQ.read_checkpoint(cp)
    for fnd in fs:
        yield Finding(fnd.severity, fnd.code, store.display(cp), fnd.position, fnd.offset, fnd.message,
                      fnd.expected, fnd.actual)
    if row is None:
        return
    yield from _checkpoint_values(store.display(cp), row, log_end)
    for group, topics in row["consumer_offsets"].items():
        for topic, qs in topics.items():
            for qid, off in qs.items():
                n = qlen.get((topic, qid))
                if off < 0:
                    continue          # reported by _checkpoint_values
                if n is None:
                    yield Finding(WARNING, "checkpoint-unknown-queue", store.display(cp), None, None,
                                  f"consumer {group} has an offset for {topic}/{qid}, which has no consumequeue")
                elif off > n:
                    yield Finding(WARNING, "consumer-offset-beyond-queue", store.display(cp), None, None,
                                  f"consumer {group} acked {topic}/{qid} up to {off}, the queue has {n} entries",
                                  n, off)


# header fields of the checkpoint: (row key, schema field, epoch-ms time?); see formats/litemq.py
_CP_FIELDS = (("commitlog_flushed_offset", "commitLogFlushedOffset", False), ("cq_flushed_count", "cqFlushedCount", False),
              ("consumer_offset_count", "consumerOffsetCount", False), ("last_flush_time", "lastFlushTime", True),
              ("last_update_time", "lastUpdateTime", True))
_CP_AT = field_offsets(F.CheckpointHeader)


def _checkpoint_values(name: str, row: dict, log_end: int | None):
    """Negative values, times in the future, a flushed offset past the end of the live data."""
    for key, field, is_time in _CP_FIELDS:
        for sev, code, msg, exp, act in checkpoint_value_problems(
                field, row[key], time=is_time, log_end=log_end if key == "commitlog_flushed_offset" else None):
            yield Finding(sev, code, name, _CP_AT[field], None, msg, exp, act)
    for what, table in (("consumequeue offset", {"": row["consumequeue_offsets"]}), ("consumer offset",
                                                                                    row["consumer_offsets"])):
        for group, topics in table.items():
            for topic, qs in topics.items():
                for qid, off in qs.items():
                    label = f"{what} of {group + ' ' if group else ''}{topic}/{qid}"
                    for sev, code, msg, exp, act in checkpoint_value_problems(label, off):
                        yield Finding(sev, code, name, None, None, msg, exp, act)


def _verify_index(store: Store, live: dict, explicit: bool):
    from mqtool.litemq.store import index_files as _index_files

    files = _index_files(store)
    if not files:
        yield Finding(INFO, "index-not-persisted", store.display(store.index_dir) if store.index_dir else None,
                      None, None, "no index file: LiteMQ builds its key index in memory and never flushes it")
        return
    for p in files:
        name = store.display(p)
        entries = []
        n_hdr = None
        for item in CQ.read_index(p):
            if isinstance(item, Finding):
                yield item
                continue
            if item["kind"] == "index_header":
                n_hdr = item
                continue
            entries.append(item)
        if n_hdr is None:
            continue
        count = len(entries)
        for e in entries:
            ri = live.get(e["offset"])
            if ri is None:
                yield Finding(ERROR, "index-dangling", name, e["position"], e["offset"],
                              "index entry does not point at a live record")
            elif e["key_hash"] not in ri.key_hashes:
                yield Finding(ERROR, "index-key-mismatch", name, e["position"], e["offset"],
                              "key hash matches none of the record's keys", sorted(ri.key_hashes), e["key_hash"])
            if not (-1 <= e["next"] < e["entry"]):
                yield Finding(ERROR, "index-bad-chain", name, e["position"], e["offset"],
                              "next must be -1 or an earlier entry", f"-1..{e['entry'] - 1}", e["next"])
        data = CQ.open_index_bytes(p)
        slots = CQ.index_slots(data, n_hdr["hash_slot_count"])
        bad_slots = 0
        for i, h in enumerate(slots):
            if h == -1:
                continue
            if not (0 <= h < count) or entries[h]["key_hash"] % n_hdr["hash_slot_count"] != i:
                bad_slots += 1
        if bad_slots:
            yield Finding(ERROR, "index-bad-slot", name, F.INDEX_HEADER_SIZE, None,
                          f"{bad_slots} slot head(s) point at no entry of that slot", 0, bad_slots)
        yield Finding(INFO, "index-timediff-garbage", name, None, None,
                      "timeDiff mixes ms and s in LiteMQ (storeTimestampMs - nowSeconds): not checked")


def _salvage(store: Store, opts: VerifyOptions):
    with open_salvage_file(opts.salvage_out, [store.root or store.target.parent, store.target], opts.force) as f:
        for item in walk(store, carve_stale=True, with_body=True):
            if isinstance(item, Damage):
                continue
            f.write(dumps(record_row(item, "base64")).encode("utf-8") + b"\n")

