"""The shutdown markers: the abort file and the checkpoint (its header values, its counts)."""
from __future__ import annotations

from formats import litemq as F
from mqtool.findings import INFO, WARNING, Finding, Summary, checkpoint_value_problems
from mqtool.litemq import indexfiles as CQ
from mqtool.litemq.store import Store, nothing_written
from mqtool.columns import iso_ms
from mqtool.schema_struct import field_offsets


def _verify_markers(store: Store, abort_present: bool, summary: Summary, qlen: dict, log_end: int | None = None):
    # nothing written yet (no record, live or stale; no queue or index byte): the broker was made but has not
    # started (Start makes the abort file, only a shutdown writes the checkpoint: reference/litemq.md §5, §7)
    fresh = not summary.messages and not summary.extra.get("stale_records") and nothing_written(store)
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
                      "no abort file: " + ("nothing written yet (the broker has not started)" if fresh else
                                           "the last run reached Broker.Shutdown (which then hangs in "
                                           "CommitLog.Close in every LiteMQ version read)"))
    cp = store.checkpoint_file
    if cp is None or not cp.is_file():
        yield Finding(INFO if abort_present or fresh else WARNING, "checkpoint-missing",
                      store.display(cp) if cp else None, None, None,
                      "no checkpoint file: only a forced flush at shutdown writes it"
                      + (" (expected after a crash)" if abort_present else
                         " (and nothing is written yet)" if fresh else ""))
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
