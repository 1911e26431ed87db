"""``run_rebuild``: the engine entry point (settings, sinks, the replay, the summary)."""
from __future__ import annotations

import time
from pathlib import Path

from formats import rocketmq as F
from mqtool.errors import NotAStoreError
from mqtool.findings import INFO, Finding, Summary
from mqtool.io import prepare_output_dir
from mqtool.options import RebuildOptions
from mqtool.progress import progress
from mqtool.rocketmq.rebuild import native_lane
from mqtool.rocketmq.store import RocketStore
from mqtool.rocketmq.rebuild.compare import CompareSink, CompareState
from mqtool.rocketmq.rebuild.output import DirSink, checkpoint_bytes
from mqtool.rocketmq.rebuild.replay import rebuild_store
from mqtool.rocketmq.rebuild.settings import geometry_findings, resolve_settings


def run_rebuild(store: RocketStore, opts: RebuildOptions):
    """Engine entry point: ``(findings_iter, summary_fn)`` (see :mod:`mqtool.cli`)."""
    if not store.segments:
        raise NotAStoreError("no commitlog segments here: rebuild-index needs the commitlog", store.path)
    pre = native_lane.prestart(store.segments, F.DEFAULT_MAX_MESSAGE_SIZE)   # parsing starts meanwhile
    try:
        return _run_rebuild(store, opts, pre)
    except BaseException:
        if pre is not None:
            pre.close()
        raise


def _run_rebuild(store: RocketStore, opts: RebuildOptions, pre):
    settings = resolve_settings(opts, store)
    findings: list[Finding] = []
    cmp_state = CompareState()
    summary = Summary()
    out_sink = None
    if opts.out:
        root = store.root or store.commitlog_dir or store.path
        inputs = [p for p in (root, store.commitlog_dir, store.consumequeue_dir, store.index_dir) if p]
        if store.commitlog_dir and Path(store.commitlog_dir).name == "commitlog":
            inputs.append(str(Path(store.commitlog_dir).parent))     # the store root, even if a file was given
        out = prepare_output_dir(opts.out, inputs, opts.force)
        out_sink = DirSink(out, opts.force, opts.trim)
    cmp_sink = CompareSink(store, settings, findings, cmp_state) if opts.compare else None

    def on_cq(topic, qid, base, data, last, size):
        name = f"{base:020d}"
        if out_sink is not None:
            out_sink.cq_file(topic, qid, name, data, last, size)
        if cmp_sink is not None:
            cmp_sink.cq_file(topic, qid, base, data + bytes(size - len(data)) if len(data) < size else data)

    def on_index(ib, name, last):
        if out_sink is not None:
            out_sink.index_file(name, ib)
        if cmp_sink is not None:
            cmp_sink.index_file(ib, name)

    def run():
        t0 = time.perf_counter()
        findings.extend(geometry_findings(settings, store))
        try:
            with progress(sum(seg.size for seg in store.segments), "rebuilding") as bar:
                res = rebuild_store(store, settings, on_cq, on_index, findings,
                                    on_segment=lambda seg: bar.advance(seg.size), keep_entry_times=opts.compare,
                                    index_stream=out_sink.index_stream if out_sink and not cmp_sink else None,
                                    prestart=pre, on_queue=out_sink.queue_dir if out_sink else None)
        except BaseException:
            if out_sink is not None:
                try:
                    out_sink.flush()            # the writes under way end before the error goes on
                except BaseException:           # noqa: BLE001 - the first error is the one to report
                    pass
            raise
        if out_sink is not None:
            out_sink.flush()                    # every consumequeue file written (or the first error)
        if cmp_sink is not None:
            cmp_sink.cq_finish()
            cmp_sink.index_finish()
        if out_sink is not None and opts.write_checkpoint:
            out_sink.checkpoint(checkpoint_bytes(res))
        elapsed = time.perf_counter() - t0
        if cmp_sink is not None:
            c = cmp_state
            findings.append(Finding(INFO, "compare-summary", store.root or store.path, None, None,
                                    f"{c.cq_files} consumequeue + {c.index_files} index files rebuilt: "
                                    f"{c.identical} identical on disk, {c.differs} differ, {c.behind} behind (a "
                                    f"prefix of the rebuild), {c.missing_on_disk} missing on disk, "
                                    f"{c.extra_on_disk} on disk only"))
        for f in findings:
            summary.add(f)
            yield f
        summary.messages = res.messages
        summary.skipped_ranges, summary.skipped_bytes = res.damaged, res.damaged_bytes
        extra = {
            "written": out_sink.written if out_sink else 0,
            "out": str(out_sink.out.path) if out_sink else None,
            "consumequeue_files": res.cq_files, "queues": res.queues, "cq_units": res.cq_units,
            "index_files": res.index_files, "index_entries": res.index_entries,
            "damaged_ranges": res.damaged,
            "cq_file_size": settings.cq_file_size, "max_hash_slots": settings.hash_slots,
            "max_index_num": settings.index_num, "settings_from": settings.sources,
            "settings_evidence": {"mappedFileSizeConsumeQueue": settings.cq_decision.evidence,
                                  "maxHashSlotNum/maxIndexNum": settings.index_geometries.summary()},
            "seconds": round(elapsed, 3),
        }
        if cmp_sink is not None:
            extra.update(identical=cmp_state.identical, differs=cmp_state.differs, behind=cmp_state.behind,
                         missing_on_disk=cmp_state.missing_on_disk, extra_on_disk=cmp_state.extra_on_disk)
        summary.extra.update(extra)

    return run(), lambda: summary
