"""The dispatcher replayed over the commitlog: every readable message to the consumequeue and index writers."""
from __future__ import annotations

from array import array
from dataclasses import dataclass

from formats import rocketmq as F
from mqtool.findings import WARNING, Finding
from mqtool.rocketmq import dispatch as D
from mqtool.rocketmq.store import RocketStore
from mqtool.rocketmq.scan import Damage
from mqtool.rocketmq.rebuild import native_lane
from mqtool.rocketmq.rebuild.consumequeue import UNIT, QueueBuilder
from mqtool.rocketmq.rebuild.index import _INDEX_KEY_JOIN, IndexBuilder, IndexFileBuilder
from mqtool.rocketmq.rebuild.native_lane import (_IS_N, _QS_FILE_END, _QS_MAXPHYS, _QS_N, _QS_UNITS, _QS_WRITE,
                                                 iter_dispatch_records)
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
                  keep_entry_times: bool = True) -> RebuildResult:
    """Replay the dispatcher over the commitlog; rebuilt files go to the callbacks as they complete.

    ``on_cq_file(topic, queue_id, base, data, last, size)`` (``data`` = the units; the file is ``size``
    bytes, zero after them); ``on_index_file(builder, name, last)`` (``builder.parts()`` / ``to_bytes()``).
    """
    res = RebuildResult()
    rules = settings.rules
    fs = settings.cq_file_size
    queues: dict[tuple[str, int], QueueBuilder] = {}
    topics: dict[bytes, str] = {}

    def emit_cq(qb: QueueBuilder, base: int, data: bytes, last: bool):
        res.cq_files += 1
        on_cq_file(qb.topic, qb.queue_id, base, data, last, max(fs, len(data)))

    index_names: list[str] = []

    def emit_index(ib: IndexFileBuilder, last: bool):
        name = ib.name(index_names[-1] if index_names else None)
        index_names.append(name)
        res.index_files += 1
        on_index_file(ib, name, last)

    idx = (IndexBuilder(settings.hash_slots, settings.index_num, emit_index, keep_entry_times)
           if rules.index_enable else None)

    def on_damage(d: Damage):
        res.damaged += 1
        res.damaged_bytes += d.length
        findings.append(Finding(WARNING, "commitlog-damage", d.file, d.position, d.offset,
                                f"{d.code}: {d.message}; {d.length} bytes skipped, messages in them are not "
                                f"dispatched", d.expected, d.actual))

    lib = native_lane.native_lib()
    # State the compiled loop shares (see mqtool/_native/rmqrebuild.c): queue slot per raw topic + queueId,
    # each queue's current bytearray, its int64 state; the index state is copied in and out around a call.
    keymap: dict[bytes, int] = {}
    qbufs: list = []
    qstate = array("q")
    istate = array("q", bytes(8 * _IS_N))
    no_slots, no_entries = array("i"), bytearray()

    def queue(topic: str, qid: int) -> QueueBuilder:
        qb = queues.get((topic, qid))
        if qb is None:
            if not _safe_component(topic):
                findings.append(Finding(WARNING, "unsafe-topic-name", None, None, None,
                                        f"topic {topic!r} cannot be a directory name; its units are not rebuilt"))
                qb = queues[(topic, qid)] = QueueBuilder(topic, qid, fs, lambda *a: None)
            else:
                qb = queues[(topic, qid)] = QueueBuilder(topic, qid, fs, emit_cq)
            if lib is not None:
                qb.slot = len(qbufs)
                qbufs.append(None)
                qstate.extend((0, -1, 0, 0))             # _QS_MAXPHYS, _QS_WRITE, _QS_FILE_END, _QS_UNITS
        return qb

    def put(qb: QueueBuilder, phys: int, size: int, code: int, qoff: int) -> None:
        """``qb.put`` with the state the compiled loop shares pulled before and pushed after."""
        i = qb.slot * _QS_N
        qb.max_phys = qstate[i + _QS_MAXPHYS]
        qb.put(phys, size, code, qoff)
        buf = qb.buf
        qstate[i + _QS_MAXPHYS] = qb.max_phys
        qstate[i + _QS_WRITE] = -1 if buf is None else (qb.base + len(buf)) // UNIT
        qstate[i + _QS_FILE_END] = 0 if buf is None else (qb.base + fs) // UNIT
        qbufs[qb.slot] = buf

    def lane(buf, pos: int, limit: int, end: int) -> int:
        nonlocal messages, cq_units, last_ts, last_cq_ts, max_offset
        f = idx.current if idx is not None else None
        if f is not None:
            istate[0:_IS_N] = array("q", (1, f.index_count, f.index_num, f.slot_num, f.hash_slot_count, f.begin_ts,
                                          f.end_phy, f.end_ts))
            slots, entries, ts = f.slots, f.entries, f.ts
        else:
            istate[0] = 0
            slots, entries, ts = no_slots, no_entries, None
        npos, n, ncq, lts, lcts, mend, added = lib.run(buf, pos, limit, end, max_size, keymap, qbufs, qstate,
                                                      istate if idx is not None else None, slots, entries, ts)
        if n:
            messages += n
            cq_units += ncq
            last_ts = lts
            if ncq:
                last_cq_ts = lcts
            if mend > max_offset:
                max_offset = mend
            if added:
                f.index_count, f.hash_slot_count, f.end_phy, f.end_ts = istate[1], istate[4], istate[6], istate[7]
                idx.entries += added
                f.maybe_spill()
        return npos

    schedule = F.SCHEDULE_TOPIC
    quick, full = D.quick_props, D.props_dict
    tags_code = D.tags_code
    p_tags, p_keys, p_uniq = F.PROPERTY_TAGS, F.PROPERTY_KEYS, F.PROPERTY_UNIQ_KEY
    multi_key = F.PROPERTY_INNER_MULTI_DISPATCH
    sep = F.KEY_SEPARATOR
    rb_mask, rb_val = F.TRANSACTION_MASK, F.TRANSACTION_ROLLBACK_TYPE
    not_val, commit_val = F.TRANSACTION_NOT_TYPE, F.TRANSACTION_COMMIT_TYPE
    join = _INDEX_KEY_JOIN
    build_index = idx.build if idx is not None else None
    messages = cq_units = 0
    last_ts = last_cq_ts = max_offset = 0
    for phys, size, topic_raw, qid, qoff, sysflag, store_ts, props_raw in \
            iter_dispatch_records(store.segments, max_size, on_damage, on_segment, lane if lib else None):
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
        last_ts = store_ts
        if phys + size > max_offset:
            max_offset = phys + size
        tt = sysflag & rb_mask
        if tt == not_val or tt == commit_val:
            code = tags_code(tags) if tags else 0
            if props is not None and topic == schedule:
                code = D.cq_tags_code(rules, topic, props, store_ts)
            qb = queues.get((topic, qid)) or queue(topic, qid)
            if lib is None:
                qb.put(phys, size, code, qoff)
            else:
                put(qb, phys, size, code, qoff)
                keymap[bytes(topic_raw) + qid.to_bytes(4, "big", signed=True)] = qb.slot
            cq_units += 1
            last_cq_ts = store_ts
            if props is not None and multi_key in props:
                try:
                    targets = D.multi_dispatch_targets(rules, topic, qid, props)
                except D.MultiDispatchError as e:
                    findings.append(Finding(WARNING, "multi-dispatch-unparsable", None, None, phys,
                                            f"message at commitlog offset {phys}: {e}; no LMQ units rebuilt"))
                    targets = []
                for name, lqid, lqoff in targets:
                    if lib is None:
                        queue(name, lqid).put(phys, size, code, lqoff)
                    else:
                        put(queue(name, lqid), phys, size, code, lqoff)
                    cq_units += 1
        if build_index is not None:
            ikeys = [f"{topic}{join}{uniq}"] if uniq is not None else []
            if keys:
                ikeys += [f"{topic}{join}{k}" for k in keys.split(sep) if k]
            build_index(phys, store_ts, tt == rb_val, ikeys)
    res.messages, res.cq_units = messages, cq_units
    res.last_store_ts, res.last_cq_ts, res.max_offset = last_ts, last_cq_ts, max_offset
    for qb in queues.values():
        if qb.slot >= 0:
            qb.units += qstate[qb.slot * _QS_N + _QS_UNITS]
            qb.max_phys = qstate[qb.slot * _QS_N + _QS_MAXPHYS]
        qb.finish()
        findings.extend(qb.findings())
    res.queues = len(queues)
    if idx is not None:
        res.index_entries = idx.entries
        idx.finish()
        res.last_full_index_end_ts = idx.last_full_end_ts
    return res
