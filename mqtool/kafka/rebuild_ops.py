"""``mqtool rebuild-index`` for Kafka: write rebuilt indexes to --out and/or compare them with the disk.

Output layout: ``<out>/<log dir name>/<partition dir>/<segment>.{index,timeindex,txnindex}`` (the log dir
level is omitted when a single partition dir was given). ``.txnindex`` is written only for segments with
aborted transactions (Kafka creates it lazily). ``--preallocate`` pads the active (last) segment's indexes
to 10 MiB of zeros as a running broker leaves them; other segments are trimmed as at roll/close.

Compare findings (``kafka.rebuild-*``): identical [I], identical-but-preallocated [I], missing-on-disk [I],
no-final-entry [I], stale-prefix [W], differs [W], log-truncated [W] (recovery would stop early).
"""
from __future__ import annotations

from pathlib import Path

from mqtool.findings import ERROR, INFO, WARNING, Finding, Summary
from mqtool.io import map_input, prepare_output_dir, read_input
from mqtool.kafka import indexfiles as F
from mqtool.kafka.interval import index_interval
from mqtool.kafka.store import LogDir, discover, partition_from_dir
from mqtool.kafka.rebuild import TxnTracker, recover_segment
from mqtool.errors import InputError, NotAStoreError


def _entries(kind: str, data: bytes):
    if kind == "index":
        f = F.read_offset_index(Path("x"), data)
    elif kind == "timeindex":
        f = F.read_time_index(Path("x"), data)
    else:
        f = F.read_txn_index(Path("x"), data)
    return [tuple(e) for e in f.entries], f


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
                        with map_input(seg.log) as m:
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
                    if out is not None:
                        for kind, data in built.items():
                            out.write(target_dir / f"{seg.name}.{kind}", data)
                            counts["written"] += 1
                    if opts.compare:
                        yield from _compare(seg, built, res, f, counts)
        summary.extra.update(counts)
        summary.extra["index_interval_bytes"] = intervals

    def summary_fn():
        summary.messages = counts["segments"]
        return summary

    return findings(), summary_fn


def _compare(seg, built: dict, res, f, counts):
    for kind in ("index", "timeindex", "txnindex"):
        disk_path = getattr(seg, kind)
        data = built.get(kind)
        if disk_path is None:
            if data:
                counts["differing"] += 1
                yield f(INFO if kind != "txnindex" else WARNING, "missing-on-disk",
                        seg.log.with_suffix(f".{kind}"), None, None,
                        f"no .{kind} on disk; the rebuild has {len(data)} bytes of entries")
            continue
        try:
            disk = read_input(disk_path)
        except InputError as e:
            yield f(ERROR, "file-unreadable", disk_path, None, None, f"cannot read: {e.message}")
            continue
        if data is None:
            data = b""
        if disk == data:
            counts["identical"] += 1
            yield f(INFO, "identical", disk_path, None, None, "byte-identical to the rebuild")
            continue
        mine, _ = _entries(kind, data)
        theirs, info = _entries(kind, disk)
        if mine == theirs and info.garbage_tail == 0:
            counts["identical"] += 1
            yield f(INFO, "identical-but-preallocated", disk_path, len(data), None,
                    f"same entries; the disk file is padded with {len(disk) - len(data)} zero bytes "
                    "(running or crashed broker)")
            continue
        counts["differing"] += 1
        if kind == "timeindex" and theirs == mine[:-1]:
            yield f(INFO, "no-final-entry", disk_path, None, None,
                    "same entries except the closing max-timestamp entry (active segment of a running broker)")
        elif len(theirs) < len(mine) and mine[:len(theirs)] == theirs:
            yield f(WARNING, "stale-prefix", disk_path, len(theirs) * info.entry_size, None,
                    f"the disk's {len(theirs)} entries are the first of the rebuild's {len(mine)}: the index "
                    "covers only a prefix of the log (written before the log grew)",
                    expected=len(mine), actual=len(theirs))
        else:
            k = next((i for i, (a, b) in enumerate(zip(mine, theirs)) if a != b), min(len(mine), len(theirs)))
            yield f(WARNING, "differs", disk_path, k * info.entry_size, None,
                    f"differs from the canonical rebuild at entry {k} "
                    f"(disk {len(theirs)} entries, rebuild {len(mine)})",
                    expected=list(mine[k]) if k < len(mine) else None,
                    actual=list(theirs[k]) if k < len(theirs) else None)
