"""The consumequeue checks: every entry against the record it points at, holes, lag, records no entry reaches."""
from __future__ import annotations

from collections import Counter

from formats import litemq as F
from mqtool.findings import ERROR, INFO, WARNING, Finding
from mqtool.litemq import indexfiles as CQ
from mqtool.litemq.history import INSIDE_RECORD, OVERWRITTEN, PAST_END, stale_reason
from mqtool.litemq.scan import TIME_REGRESSION_MS
from mqtool.litemq.verify.record import expected_entries

#: LiteMQ stamps the consumequeue entry a moment after encoding the record (a few ms at most).
CQ_TIMESTAMP_TOLERANCE_MS = 1000


def _verify_cq(store, live, stale, order, res, abort_present, summary, queue_len, file_size=None):
    qs = CQ.queues(store)
    if not qs:
        yield Finding(WARNING if live else INFO, "no-consumequeue", store.display(store.consumequeue_dir)
                      if store.consumequeue_dir else None, None, None, "no consumequeue files")
    # the end of the live data: where the walk met it, or (no end met) the end of the last record, which ends
    # an exactly full last file (records never cross files, reference/litemq.md §2), 0 with no record at all
    end = res.end_offset if res.end_offset is not None else max((r.offset + r.size for r in live.values()),
                                                                 default=0)
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
                past = e.commitlog_offset >= end
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
                elif e.commitlog_offset >= end:
                    yield Finding(ERROR, "cq-beyond-end", f, pos, e.commitlog_offset,
                                  "entry points past the end of the commitlog data", end, e.commitlog_offset)
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
