"""RocketMQ part of ``mqtool info``: one commitlog pass plus the small files, fed into an InfoBuilder.

What it reports and where it comes from (reference §1–§8):

* messages per topic/queue, first/last STORETIMESTAMP, unit bytes — the commitlog scan (the same
  :class:`~mqtool.rocketmq.scan.SegmentScanner` verify uses, CRC checked); damaged ranges are what verify
  reports damaged: the scanner's ``Damage`` events, messages whose bytes are not what the broker wrote
  (:func:`~mqtool.rocketmq.records.unit_damage`: body CRC, a body that does not inflate, whole-message CRC)
  and the bytes missing between or at the end of segments (verify's segment layout check), counted as
  verify counts them;
* queue ends (next logical offset) — the last non-zero unit of each consumequeue, else the commitlog's
  highest QUEUEOFFSET + 1 per queue when there is no consumequeue;
* consumer offsets — ``config/consumerOffset.json`` (``offsetTable``: ``"topic@group" → {queueId: offset}``),
  its ``.bak`` when the main file does not parse;
* crash marker — ``abort`` (present = unclean shutdown), ``abort.bak`` (5.1+);
* version hints — message magic v1/v2, 5.x compression-type bits, the checkpoint's 5.x fields, 5.x-only
  files (``abort.bak``, ``compaction/``, ``timerwheel``).
"""
from __future__ import annotations

import os
from pathlib import Path

from formats import rocketmq as F
from mqtool.common import plural
from mqtool.info import InfoBuilder, total_size
from mqtool.options import InfoOptions
from mqtool.columns import iso_ms
from mqtool.progress import progress
from mqtool.rocketmq import indexfiles
from mqtool.rocketmq.store import RocketStore, cq_filter, open_store
from mqtool.rocketmq.records import Message, unit_damage
from mqtool.rocketmq.scan import Damage, End, SegmentScanner


def collect(path, b: InfoBuilder, opts: InfoOptions) -> None:
    s = open_store(path)
    b.store_kind = _kind(s, Path(path))
    cp = _checkpoint(s, b)
    dispatched = _commitlog(s, b, opts, cp)
    _consumequeue(s, b, dispatched, opts)
    _index(s, b, opts)
    _config(s, b)
    _crash(s, b)
    _other_files(s, b)
    order = ["commitlog", "consumequeue", "index", "checkpoint", "config", "markers"]
    b.files.sort(key=lambda f: order.index(f.group) if f.group in order else len(order))


def _kind(s: RocketStore, p: Path) -> str:
    if s.root and str(Path(s.root)) == str(p):
        return "RocketMQ store root"
    if p.is_file():
        return "RocketMQ single file"
    if s.commitlog_dir and str(p) == s.commitlog_dir:
        return "RocketMQ commitlog directory"
    if s.consumequeue_dir:
        return "RocketMQ consumequeue directory"
    if s.index_dir:
        return "RocketMQ index directory"
    if s.config_dir:
        return "RocketMQ config directory"
    return "RocketMQ store part"


def _checkpoint(s: RocketStore, b: InfoBuilder) -> dict | None:
    if not s.checkpoint:
        return None
    try:
        cp = indexfiles.read_checkpoint(s.checkpoint)
    except Exception as e:  # unreadable checkpoint: say so, go on
        b.note(f"checkpoint unreadable: {e}")
        return None
    b.add_files("checkpoint", 1, cp["file_size"])
    b.fact("checkpoint", {k: cp.get(k) for k in ("physicMsgTimestamp", "logicsMsgTimestamp", "indexMsgTimestamp")})
    # reference §7: masterFlushedOffset exists from 5.0.0, confirmPhyOffset from 5.1.1 (zero when unused)
    if cp.get("confirmPhyOffset"):
        b.hint("5.1.1+: checkpoint confirmPhyOffset is set")
    elif cp.get("masterFlushedOffset"):
        b.hint("5.x: checkpoint masterFlushedOffset is set")
    return cp


def _commitlog(s: RocketStore, b: InfoBuilder, opts: InfoOptions, cp: dict | None) -> dict:
    """Scan every segment; returns {(topic, queue): highest QUEUEOFFSET + 1} of dispatchable messages."""
    segs = s.segments
    dispatched: dict[tuple[str, int], int] = {}
    if not segs:
        return dispatched
    magics = {"v1": 0, "v2": 0}
    comp: dict[str, int] = {}
    data_end = None
    used_segments = 0
    after_cp = 0
    cp_ms = cp.get("physicMsgTimestamp") if cp else None
    total = sum(x.size for x in segs)
    done = 0
    lost = _lost_bytes(s)

    def lost_before(at):
        while lost and lost[-1].span[0] < at:
            f = lost.pop()
            b.add_damage(f.file, None, f.span[0], f.span[1] - f.span[0], f.code, f.message)

    with progress(total, "info: scanning commitlog", enabled=opts.progress) as bar:
        for seg in segs:
            lost_before(seg.base)
            b.add_log_file(seg.path, seg.base, seg.size)
            has_data = False
            for ev in SegmentScanner(seg, max_size=opts.max_message_size, check_crc=True).events():
                if isinstance(ev, Message):
                    has_data = True
                    topic = ev.topic
                    b.add_message(topic, ev.queue_id, ev.store_timestamp, ev.size)
                    magics[ev.version] = magics.get(ev.version, 0) + 1
                    if ev.sys_flag & F.COMPRESSED_FLAG:
                        c = ev.compression or "unknown"
                        comp[c] = comp.get(c, 0) + 1
                        if ev.sys_flag & F.COMPRESSION_TYPE_MASK:
                            b.hint("5.x: compression-type bits in sysFlag (LZ4/ZSTD/ZLIB)")
                    if cp_ms and ev.store_timestamp > cp_ms:
                        after_cp += 1
                    txn = ev.sys_flag & F.TRANSACTION_MASK
                    if txn not in (F.TRANSACTION_PREPARED_TYPE, F.TRANSACTION_ROLLBACK_TYPE):
                        k = (topic, ev.queue_id)
                        if ev.queue_offset + 1 > dispatched.get(k, 0):
                            dispatched[k] = ev.queue_offset + 1
                    for code, text, _, _ in unit_damage(ev):
                        b.add_damage(ev.file, ev.position, ev.offset, ev.size, code, text,
                                     at_time=ev.store_timestamp)
                elif isinstance(ev, Damage):
                    has_data = True
                    b.add_damage(ev.file, ev.position, ev.offset, ev.length, ev.code, ev.message)
                elif isinstance(ev, End):
                    if has_data or ev.position:
                        data_end = ev.offset if ev.reason != "blank" else seg.end
            if has_data:
                used_segments += 1
            done += seg.size
            bar.update_to(done)
        lost_before(float("inf"))
    sizes = {x.size for x in segs}
    detail = f"{used_segments} with data; segment size {'/'.join(str(z) for z in sorted(sizes))}"
    if data_end is not None:
        detail += f"; data ends at offset {data_end}"
    b.add_files("commitlog", len(segs), total, detail)
    b.fact("commitlog offsets", {"first": segs[0].base, "data_end": data_end})
    b.fact("message magic", {k: v for k, v in magics.items() if v})
    if comp:
        b.fact("compressed messages", comp)
    if magics.get("v2"):
        b.hint(f"5.x: message magic v2 (0xDAA320AB, long topic names) in {plural(magics['v2'], 'message')}")
    elif magics.get("v1"):
        b.hint("4.x or 5.x: message magic v1 only (5.x writes v1 for topics shorter than 128 bytes)")
    if cp_ms:
        b.fact("messages newer than checkpoint", after_cp)
    return dispatched


def _lost_bytes(s: RocketStore) -> list:
    """verify's segment layout findings that name missing bytes (a segment missing or cut short), the last
    first."""
    from mqtool.options import VerifyOptions
    from mqtool.rocketmq.verify.context import _Ctx
    from mqtool.rocketmq.verify.segments import _verify_segments_layout

    return sorted((f for f in _verify_segments_layout(_Ctx(s, VerifyOptions(progress=False))) if f.span),
                  key=lambda f: f.span, reverse=True)


def _consumequeue(s: RocketStore, b: InfoBuilder, dispatched: dict, opts: InfoOptions) -> None:
    topic, queue = cq_filter(s)            # a topic or queue directory was named: only those queues
    queues = s.queues(topic, queue)
    if not queues:
        for (t, q), end in dispatched.items():
            b.set_queue_end(t, q, end)
        if dispatched:
            b.note("no consumequeue: queue ends (for lag) are taken from the commitlog's highest QUEUEOFFSET")
        return
    nfiles = 0
    nbytes = 0
    for q in queues:
        nfiles += len(q.files)
        nbytes += sum(f.size for f in q.files)
        end = indexfiles.cq_queue_end(q, lambda p, e: b.note(f"{p}: unreadable ({e})"))
        b.set_queue_end(q.topic, q.queue_id, end)
    topics = {q.topic for q in queues}
    b.add_files("consumequeue", nfiles, nbytes, f"{plural(len(topics), 'topic')}, {plural(len(queues), 'queue')}")
    cq = indexfiles.cq_file_size(s, opts)
    b.size("consumequeue file size", cq.to_dict("bytes"), f"{cq.value} bytes (from {cq.source}: {cq.evidence})",
           cq.warning)


def _index(s: RocketStore, b: InfoBuilder, opts: InfoOptions) -> None:
    if not s.index_files:
        return
    entries = 0
    first = last = None
    geos = indexfiles.index_geometries(s.index_files, opts)
    g = geos.main()
    b.size("index geometry", geos.summary(),          # g is None: no index file could be read (a FIFO, a loop)
           f"{g.slots} hash slots, {g.entries} entries per file (from {g.source}: {g.evidence})"
           if g is not None and g.slots else "unknown", "; ".join(geos.warnings()) or None)
    for p in s.index_files:
        try:
            v = indexfiles.read_index_file(p, geos.of(p), entries=False)   # the header only
        except Exception as e:
            b.note(f"{p}: unreadable ({e})")
            continue
        entries += v.entry_count
        bt, et = v.header.get("beginTimestamp", 0), v.header.get("endTimestamp", 0)
        if bt > 0:
            first = bt if first is None else min(first, bt)
        if et > 0:
            last = et if last is None else max(last, et)
    detail = f"{entries} entries"
    if first is not None:
        detail += f", {iso_ms(first)} … {iso_ms(last)}"
    b.add_files("index", len(s.index_files), total_size(s.index_files), detail)


def _load(p: Path):
    from mqtool.rocketmq.configfiles import load_with_backup

    return load_with_backup(p)


def _config(s: RocketStore, b: InfoBuilder) -> None:
    if not s.config_dir:
        return
    d = Path(s.config_dir)
    try:
        names = sorted(n for n in os.listdir(d) if (d / n).is_file())
    except OSError as e:
        b.note(f"{d}: {e.strerror or e}")
        return
    b.add_files("config", len(names), total_size(d / n for n in names), ", ".join(names[:8])
                + (" …" if len(names) > 8 else ""))
    if (d / "topics.json").exists():
        v, src = _load(d / "topics.json")
        if isinstance(v, dict) and isinstance(v.get("topicConfigTable"), dict):
            b.fact("topics in config", len(v["topicConfigTable"]))
        elif v is None:
            b.note(f"config/topics.json unusable ({src})")
    if (d / "consumerOffset.json").exists() or (d / "consumerOffset.json.bak").exists():
        v, src = _load(d / "consumerOffset.json")
        if v is None:
            b.note(f"consumer offsets unusable ({src}); try `mqtool dump config {d}`")
            return
        if src.endswith(".bak"):
            b.note("config/consumerOffset.json does not parse: consumer offsets are from its .bak")
        table = v.get("offsetTable") if isinstance(v, dict) else None
        if not isinstance(table, dict):
            return
        for tg, qmap in table.items():
            topic, sep, group = str(tg).partition("@")
            if not sep or not isinstance(qmap, dict):
                continue
            for qid, off in qmap.items():
                try:
                    b.add_consumer_offset(group, topic, int(qid), int(off), f"config/{src}")
                except (TypeError, ValueError):
                    continue


def _crash(s: RocketStore, b: InfoBuilder) -> None:
    root = Path(s.root) if s.root else None
    bak = root / "abort.bak" if root else None
    has_bak = bool(bak and os.path.lexists(bak))
    if has_bak:
        b.hint("5.1+: abort.bak present")
    if s.abort:
        from mqtool.io import read_input

        try:
            pid = read_input(s.abort, limit=64).decode("ascii", errors="replace").strip()
        except Exception:
            pid = ""
        if pid:
            b.hint("5.x: abort file holds the broker pid")
        b.set_crash(True, "abort file present: the broker did not shut down cleanly (crash, kill or power loss)"
                    + (f"; broker pid {pid}" if pid else ""),
                    [s.abort] + ([str(bak)] if has_bak else []))
    elif root is not None:
        b.set_crash(False, "no abort file: the last run shut down cleanly (or the broker never started)",
                    [str(bak)] if has_bak else [])
    else:
        b.set_crash(None, "not a store root: the crash marker cannot be checked")


def _other_files(s: RocketStore, b: InfoBuilder) -> None:
    if not s.root:
        return
    root = Path(s.root)
    # reference §0 (store layout) / §9: files only 5.x brokers write
    for name in ("compaction", "timerwheel", "timerlog", "batchconsumequeue", "epochFileCheckpoint",
                 "brokerIdentity", "kvStore", "tiered_index_file", "config/timercheck"):
        if (root / name).exists():
            b.hint(f"5.x: {name} present")
    dledger = sorted(n for n in os.listdir(root) if n.startswith("dledger-")) if root.is_dir() else []
    if dledger:
        b.note(f"{', '.join(dledger)}: a DLedger commitlog, which mqtool does not read yet; the figures above "
               "cover the plain commitlog/ only")
    small = [root / n for n in ("abort", "abort.bak", "lock") if os.path.lexists(root / n)]
    if small:
        b.add_files("markers", len(small), total_size(small), ", ".join(p.name for p in small))
