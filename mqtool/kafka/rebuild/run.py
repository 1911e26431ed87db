"""``run_rebuild``: the engine entry point (discover, recover each segment, write and/or compare)."""
from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path

from mqtool.findings import ERROR, INFO, WARNING, Finding, Summary
from mqtool.io import WriteBatch, map_input, prepare_output_dir
from mqtool.kafka.interval import index_interval
from mqtool.kafka.store import LogDir, discover, partition_from_dir
from mqtool.errors import InputError, NotAStoreError
from mqtool.kafka.rebuild.compare import _compare
from mqtool.kafka.rebuild.recover import recover_segment
from mqtool.kafka.rebuild.txn import TxnTracker


def run_rebuild(path: Path, opts):
    if path.is_file():
        logdirs = [LogDir(None, [partition_from_dir(path.parent)])]
    else:
        logdirs = discover(path)
    if not logdirs:
        raise NotAStoreError("no Kafka log or partition directory found", str(path))
    out = prepare_output_dir(opts.out, [path], opts.force) if opts.out else None
    summary = Summary()
    counts = {"segments": 0, "written": 0, "identical": 0, "differing": 0}
    intervals: dict = {}

    def f(sev, code, file, pos, off, msg, expected=None, actual=None):
        x = Finding(sev, f"kafka.rebuild-{code}", str(file), pos, off, msg, expected, actual)
        summary.add(x)
        return x

    def findings():
        # Outputs are published in batches (mqtool.io.WriteBatch): one flush for many files, not two per file
        # (a log dir of 20,000 empty segments spent ~46 s in fsync); a file's name still only ever shows it
        # complete.
        batch = WriteBatch(out) if out is not None else None
        with batch or nullcontext():
            yield from walk(batch)
        summary.extra.update(counts)
        summary.extra["index_interval_bytes"] = intervals

    def walk(batch):
        for ld in logdirs:
            for part in ld.partitions:
                txn = TxnTracker()
                dec = index_interval(part, opts)
                interval = dec.value
                intervals[part.label] = dec.to_dict("bytes")
                if dec.warning:
                    x = Finding(INFO if dec.severity == "info" else WARNING, "kafka.index-interval", str(part.path), None, None, dec.warning,
                                dec.value, list(dec.candidates))
                    summary.add(x)
                    yield x
                if out is not None:
                    rel = Path(part.path.name) if ld.path is None else Path(ld.path.name) / part.path.name
                    target_dir = rel
                for i, seg in enumerate(part.segments):
                    if seg.log is None:
                        continue
                    counts["segments"] += 1
                    active = i == len(part.segments) - 1
                    try:
                        with map_input(seg.log, ranged=True) as m:  # remote: scan() fetches what it reads
                            res = recover_segment(m.buf, str(seg.log), seg.base_offset, interval, True, txn,
                                                  fd=m.fileno() if m.mapped else None)
                    except InputError as e:       # a FIFO, device, directory... where a segment should be
                        yield f(ERROR, "file-unreadable", seg.log, None, None, f"cannot read: {e.message}; "
                                "no index rebuilt for this segment")
                        continue
                    if res.stop_reason:
                        yield f(WARNING, "log-truncated", seg.log, res.valid_bytes, None,
                                f"recovery would truncate the log at {res.valid_bytes}: {res.stop_reason}")
                    for pos, off in res.overflow:
                        yield f(WARNING, "offset-overflow", seg.log, pos, off,
                                f"offset {off} is not within 2^31-1 of the segment base {seg.base_offset}: "
                                "no index entry for it (Kafka would split this segment)")
                    pre = bool(opts.preallocate) and active
                    built = {"index": res.index_bytes(pre), "timeindex": res.timeindex_bytes(pre)}
                    if res.aborted:
                        built["txnindex"] = res.txnindex_bytes()
                    if batch is not None:
                        for kind, data in built.items():
                            batch.write(target_dir / f"{seg.name}.{kind}", data)
                            counts["written"] += 1
                    if opts.compare:
                        yield from _compare(seg, built, res, f, counts)

    def summary_fn():
        summary.messages = counts["segments"]
        return summary

    return findings(), summary_fn
