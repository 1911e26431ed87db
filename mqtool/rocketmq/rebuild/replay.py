"""The dispatcher replayed over the commitlog: every readable message to the consumequeue and index writers."""
from __future__ import annotations

from dataclasses import dataclass

from formats import rocketmq as F
from mqtool.findings import WARNING, Finding
from mqtool.rocketmq import dispatch as D
from mqtool.rocketmq.store import RocketStore
from mqtool.rocketmq.scan import Damage
from mqtool.rocketmq.rebuild import native_lane
from mqtool.rocketmq.rebuild.consumequeue import QueueBuilder
from mqtool.rocketmq.rebuild.index import _INDEX_KEY_JOIN, IndexBuilder, IndexFileBuilder
from mqtool.rocketmq.rebuild.native_lane import iter_dispatch_records
from mqtool.rocketmq.rebuild.output import _safe_component
from mqtool.rocketmq.rebuild.settings import Settings


@dataclass
class RebuildResult:
    messages: int = 0
    cq_units: int = 0
    index_entries: int = 0
    queues: int = 0
    index_files: int = 0
    cq_files: int = 0
    last_store_ts: int = 0
    last_cq_ts: int = 0
    last_full_index_end_ts: int = 0
    max_offset: int = 0
    damaged: int = 0
    damaged_bytes: int = 0


def rebuild_store(store: RocketStore, settings: Settings, on_cq_file, on_index_file, findings: list[Finding],
                  max_size: int = F.DEFAULT_MAX_MESSAGE_SIZE, on_segment=None,
                  keep_entry_times: bool = True, *, jobs: int | None = None,
                  chunk_bytes: int | None = None, index_stream=None, prestart=None, on_queue=None) -> RebuildResult:
    """Replay the dispatcher over the commitlog; rebuilt files go to the callbacks as they complete.

    ``on_cq_file(topic, queue_id, base, data, last, size)`` (``data`` = the units, a bytearray the builder
    hands over and never changes again; the file is ``size`` bytes, zero after them); ``on_index_file(builder, name, last)`` (``builder.parts()`` / ``to_bytes()``).
    ``jobs`` / ``chunk_bytes``: the compiled lane's parse workers and their range size (defaults: the CPUs,
    :data:`native_lane.CHUNK_BYTES`); they change the speed, never the output. ``index_stream(name, entries_at)``
    (without ``keep_entry_times``): an index file's writer that takes its entries while it is built
    (:meth:`~mqtool.rocketmq.rebuild.output.DirSink.index_stream`); ``on_index_file`` then finishes it.
    ``prestart``: :func:`native_lane.prestart`'s early ranges of the first segment (taken over, and closed).
    ``on_queue(topic, queue_id)``: a queue whose files will be written got its first unit (the output may
    prepare its directory meanwhile).
    """
    try:
        replay = Replay(settings, on_cq_file, on_index_file, findings, max_size, keep_entry_times, jobs,
                        chunk_bytes, index_stream, prestart, on_queue)
    except BaseException:
        if prestart is not None:
            prestart.close()
        raise
    try:
        replay.dispatch(store.segments, on_segment)
    finally:
        if replay.native is not None:
            replay.native.close()
    return replay.finish()


class Replay:
    """One run of :func:`rebuild_store`, in steps: the writers (consumequeue per queue, index) and the state
    shared with the compiled lane are set up here; :meth:`dispatch` walks the commitlog and hands every message
    to them; :meth:`finish` flushes the last files and fills in the result."""

    def __init__(self, settings: Settings, on_cq_file, on_index_file, findings: list[Finding], max_size: int,
                 keep_entry_times: bool, jobs: int | None = None, chunk_bytes: int | None = None,
                 index_stream=None, prestart=None, on_queue=None):
        self.res = RebuildResult()
        self.on_queue = on_queue
        self.rules = settings.rules
        self.fs = settings.cq_file_size
        self.on_cq_file, self.on_index_file = on_cq_file, on_index_file
        self.findings = findings
        self.max_size = max_size
        self.queues: dict[tuple[str, int], QueueBuilder] = {}
        self.index_names: list[str] = []
        self.index_stream = index_stream
        self.idx = (IndexBuilder(settings.hash_slots, settings.index_num, self.emit_index, keep_entry_times,
                                 self.open_index_stream if index_stream is not None else None)
                    if self.rules.index_enable else None)
        lib = native_lane.native_lib()
        if lib is None and prestart is not None:
            prestart.close()
        self.native = (native_lane.SharedState(lib, max_size, self.fs, self.idx, self.res, jobs, chunk_bytes,
                                               prestart)
                       if lib is not None else None)

    # -- where finished files and damage go --
    def emit_cq(self, qb: QueueBuilder, base: int, data: bytes, last: bool):
        self.res.cq_files += 1
        self.on_cq_file(qb.topic, qb.queue_id, base, data, last, max(self.fs, len(data)))

    def emit_index(self, ib: IndexFileBuilder, last: bool):
        index_names = self.index_names
        name = ib.name(index_names[-1] if index_names else None)
        index_names.append(name)
        self.res.index_files += 1
        self.on_index_file(ib, name, last)

    def open_index_stream(self, ib: IndexFileBuilder):
        """The output stream of the index file being built, under the name :meth:`emit_index` will give it (its
        first entry is put: the name no longer changes)."""
        return self.index_stream(ib.name(self.index_names[-1] if self.index_names else None), ib.entries_at)

    def on_damage(self, d: Damage):
        res = self.res
        res.damaged += 1
        res.damaged_bytes += d.length
        self.findings.append(Finding(WARNING, "commitlog-damage", d.file, d.position, d.offset,
                                     f"{d.code}: {d.message}; {d.length} bytes skipped, messages in them are not "
                                     f"dispatched", d.expected, d.actual))

    def queue(self, topic: str, qid: int) -> QueueBuilder:
        """The writer of a queue, created at its first unit (one whose topic cannot be a directory name gets a
        writer that drops its files, and a finding)."""
        qb = self.queues.get((topic, qid))
        if qb is None:
            if not _safe_component(topic):
                self.findings.append(Finding(WARNING, "unsafe-topic-name", None, None, None,
                                             f"topic {topic!r} cannot be a directory name; its units are not "
                                             f"rebuilt"))
                qb = self.queues[(topic, qid)] = QueueBuilder(topic, qid, self.fs, lambda *a: None)
            else:
                qb = self.queues[(topic, qid)] = QueueBuilder(topic, qid, self.fs, self.emit_cq)
                if self.on_queue is not None:
                    self.on_queue(topic, qid)
            if self.native is not None:
                self.native.add_queue(qb)
        return qb

    # -- the walk --
    def dispatch(self, segments, on_segment=None) -> None:
        """Every readable message of ``segments``, in commitlog order, to the consumequeue and index writers
        (``CommitLog#checkMessageAndReturnSize`` + ``DefaultDispatcher``); runs the compiled lane takes are
        counted by it."""
        res, rules, queues, queue, findings = self.res, self.rules, self.queues, self.queue, self.findings
        native = self.native
        if native is not None:
            native.segments = list(segments)
        put = native.put if native is not None else None
        keymap = native.keymap if native is not None else None
        topics: dict[bytes, str] = {}
        schedule = F.SCHEDULE_TOPIC
        quick, full = D.quick_props, D.props_dict
        tags_code = D.tags_code
        p_tags, p_keys, p_uniq = F.PROPERTY_TAGS, F.PROPERTY_KEYS, F.PROPERTY_UNIQ_KEY
        multi_key = F.PROPERTY_INNER_MULTI_DISPATCH
        sep = F.KEY_SEPARATOR
        rb_mask, rb_val = F.TRANSACTION_MASK, F.TRANSACTION_ROLLBACK_TYPE
        not_val, commit_val = F.TRANSACTION_NOT_TYPE, F.TRANSACTION_COMMIT_TYPE
        join = _INDEX_KEY_JOIN
        build_index = self.idx.build if self.idx is not None else None
        messages = cq_units = max_offset = 0
        for phys, size, topic_raw, qid, qoff, sysflag, store_ts, props_raw in \
                iter_dispatch_records(segments, self.max_size, self.on_damage, on_segment,
                                      native.lane if native is not None else None,
                                      native.segment if native is not None else None):
            messages += 1
            topic = topics.get(topic_raw)
            if topic is None:
                topic = topics[bytes(topic_raw)] = bytes(topic_raw).decode("utf-8", "replace")
            ptext = props_raw.decode("utf-8", "replace") if props_raw else ""
            props = None
            q = quick(ptext) if topic != schedule else None
            if q is None:
                props = full(ptext) if ptext else {}
                tags, keys, uniq = props.get(p_tags), props.get(p_keys), props.get(p_uniq)
            else:
                tags, keys, uniq = q
            res.last_store_ts = store_ts
            if phys + size > max_offset:
                max_offset = phys + size
            tt = sysflag & rb_mask
            if tt == not_val or tt == commit_val:
                code = tags_code(tags) if tags else 0
                if props is not None and topic == schedule:
                    code = D.cq_tags_code(rules, topic, props, store_ts)
                qb = queues.get((topic, qid)) or queue(topic, qid)
                if put is None:
                    qb.put(phys, size, code, qoff)
                else:
                    put(qb, phys, size, code, qoff)
                    keymap[bytes(topic_raw) + qid.to_bytes(4, "big", signed=True)] = qb.slot
                cq_units += 1
                res.last_cq_ts = store_ts
                if props is not None and multi_key in props:
                    try:
                        targets = D.multi_dispatch_targets(rules, topic, qid, props)
                    except D.MultiDispatchError as e:
                        findings.append(Finding(WARNING, "multi-dispatch-unparsable", None, None, phys,
                                                f"message at commitlog offset {phys}: {e}; no LMQ units rebuilt"))
                        targets = []
                    for name, lqid, lqoff in targets:
                        if put is None:
                            queue(name, lqid).put(phys, size, code, lqoff)
                        else:
                            put(queue(name, lqid), phys, size, code, lqoff)
                        cq_units += 1
            if build_index is not None:
                ikeys = [f"{topic}{join}{uniq}"] if uniq is not None else []
                if keys:
                    ikeys += [f"{topic}{join}{k}" for k in keys.split(sep) if k]
                build_index(phys, store_ts, tt == rb_val, ikeys)
        res.messages += messages
        res.cq_units += cq_units
        if max_offset > res.max_offset:
            res.max_offset = max_offset

    # -- the end --
    def finish(self) -> RebuildResult:
        """Flush every queue's last file and the last index file; the result. A streamed index file goes
        first: its end (header, slot table, fsync of its entries) is the longest write of the run's end, and
        so overlaps the consumequeue files' (nothing else is told of a streamed file: the order changes no
        output)."""
        res = self.res
        streamed = self.idx is not None and self.index_stream is not None
        if streamed:
            self._finish_index()
        for qb in self.queues.values():
            if self.native is not None:
                self.native.collect(qb)
            qb.finish()
            self.findings.extend(qb.findings())
        res.queues = len(self.queues)
        if self.idx is not None and not streamed:
            self._finish_index()
        return res

    def _finish_index(self) -> None:
        res = self.res
        res.index_entries = self.idx.entries
        self.idx.finish()
        res.last_full_index_end_ts = self.idx.last_full_end_ts
