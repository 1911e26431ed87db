"""Engine entry points for the Kafka family (see the contract in :mod:`mqtool.cli`)."""
from __future__ import annotations

from pathlib import Path

from mqtool.errors import NotAStoreError, UsageError
from mqtool.findings import Summary
from mqtool.kafka import store as L


def dump(part: str, path, opts, stats):
    from mqtool.kafka.dump import LOG_COLUMNS, columns_for, dump_path

    if part not in ("kafka", "commitlog"):
        raise UsageError(f"'dump {part}' does not apply to Kafka stores; use 'dump kafka' (or 'dump commitlog')")
    p = Path(path)
    kind = L.file_kind(p) if p.is_file() else None
    if p.is_file() and kind is None:
        raise NotAStoreError("not a Kafka file (expected .log, .index, .timeindex, .txnindex, .snapshot, "
                             ".checkpoint or a checkpoint/metadata file)", str(p))
    columns = columns_for(kind) if p.is_file() else LOG_COLUMNS
    if not p.is_file():
        from mqtool.kafka.dump import lost_segment_notes

        for note in lost_segment_notes(p, getattr(opts, "topic", None)):
            stats.damage(note)
    if (getattr(opts, "jobs", 1) != 1 or getattr(opts, "runner", None) is not None) \
            and kind in (None, "log", "kraft-snapshot"):
        from mqtool.kafka.ranges import parallel_dump_rows

        par = parallel_dump_rows(p, opts, stats)
        if par is not None:
            return columns, par, f"kafka: {p}"
    return columns, dump_path(p, opts, stats), f"kafka: {p}"


def _targets(path: Path):
    """(logdirs, only_base, only_kind) for a verify/rebuild path: a file narrows to its segment."""
    if path.is_file():
        kind = L.file_kind(path)
        if kind is None:
            raise NotAStoreError("not a Kafka file", str(path))
        part = L.partition_from_dir(path.parent)
        if kind in ("log", "index", "timeindex", "txnindex"):
            return [L.LogDir(None, [part])], L.segment_base(path), kind
        return [L.LogDir(None, [part])], None, kind
    dirs = L.discover(path)
    if not dirs:
        raise NotAStoreError("no Kafka log or partition directory found", str(path))
    return dirs, None, None


def verify(part: str, path, opts):
    if part not in ("store", "commitlog", "index"):
        raise UsageError(f"'verify {part}' does not apply to Kafka stores (use store, commitlog or index)")
    from mqtool.kafka.verify import KafkaVerifier      # (not at import: dump does not need the checks)

    p = Path(path)
    logdirs, only_base, only_kind = _targets(p)
    v = KafkaVerifier(opts, part)
    salvage_ctx = None
    if getattr(opts, "salvage_out", None):
        from mqtool.kafka.dump import SalvageWriter
        inputs = [p] + [ld.path for ld in logdirs if ld.path is not None]     # the input trees
        salvage_ctx = SalvageWriter(opts.salvage_out, getattr(opts, "force", False), inputs)
        v.salvage = salvage_ctx.write

    def findings():
        try:
            yield from v.run_logdirs(logdirs, only_base, only_kind)
        finally:
            if salvage_ctx is not None:
                salvage_ctx.close()

    def summary() -> Summary:
        s = v.summary
        s.messages = v.messages
        return s

    return findings(), summary


def rebuild(path, opts):
    from mqtool.kafka.rebuild import run_rebuild
    return run_rebuild(Path(path), opts)


def query(path, opts, stats):
    from mqtool.kafka.query import run_query
    return run_query(Path(path), opts, stats)
