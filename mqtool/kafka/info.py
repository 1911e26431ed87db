"""Kafka part of ``mqtool info``: one pass over every partition's ``.log`` segments plus the small files.

What it reports and where it comes from (docs/kafka.md, ../shared/reference/kafka.md):

* messages per topic/partition count **records** (v2 records, legacy messages incl. the inner messages of a
  compressed wrapper), not batches; control records (transaction markers, KRaft leader-change/snapshot
  markers) are counted apart. Their time is the record timestamp (the batch max timestamp for LogAppendTime;
  v0 messages have none). Bytes are on-disk batch bytes, shared out over the batch's records. The walk is
  :func:`mqtool.kafka.scan.scan`, the one ``verify`` uses; its ``skipped`` / ``partial-tail`` events are
  the damaged ranges, batches with a bad CRC, a payload that does not inflate or unreadable legacy inner
  messages are damage at their own time: what ``verify`` without ``--deep`` reports damaged (records this
  reads only for their times and that do not decode are a note: verify reads records with ``--deep``);
* queue ends — the log end offset of each partition (last offset + 1 of the last batch, else the base offset of
  the last segment);
* consumer offsets — ``__consumer_offsets`` OffsetCommit records (key version 0/1) decoded by
  :mod:`mqtool.kafka.internal`, the last commit per (group, topic, partition) wins and a tombstone deletes it;
* crash marker — ``.kafka_cleanshutdown`` in the log dir (Kafka's LogManager writes it on a clean shutdown
  and deletes it at start-up; absent, the next start runs log recovery) and ``recovery-point-offset-checkpoint``
  entries behind the log end (data the broker had not flushed/recovered);
* version hints — message format (magic) v0/v1/v2, codecs, KRaft vs ZooKeeper (``meta.properties`` version,
  ``__cluster_metadata``, ``quorum-state``, ``bootstrap.checkpoint``), ``directory.id``, ``partition.metadata``.
"""
from __future__ import annotations

import os
from array import array
from collections import Counter
from pathlib import Path

from formats import kafka as K
from mqtool.common import plural, strict_json
from mqtool.errors import InputError, NotAStoreError, UsageError
from mqtool.kafka.interval import index_interval
from mqtool.info import InfoBuilder
from mqtool.io import map_input, read_input
from mqtool.kafka import indexfiles as KF
from mqtool.kafka import store as L
from mqtool.codecs import CodecError
from mqtool.kafka.lag import apply_commit
from mqtool.kafka.records import Batch, LimitExceeded, control_type_name, header_records, iter_records
from mqtool.kafka.scan import Damage, scan
from mqtool.options import InfoOptions
from mqtool.progress import progress

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"     # LogManager.CleanShutdownFileName
_MAGIC_HINTS = {
    2: "Kafka message format v2 (magic 2, record batches): written by Kafka 0.11+",
    1: "Kafka message format v1 (magic 1, messages with timestamps): the 0.10.x format",
    0: "Kafka message format v0 (magic 0, no timestamps): the pre-0.10 format",
}


class _Stats:
    def __init__(self):
        self.magic_records: Counter = Counter()
        self.magic_batches: Counter = Counter()
        self.codecs: Counter = Counter()
        self.ts_types: Counter = Counter()
        self.control = 0
        self.control_batches = 0
        self.control_types: Counter = Counter()     # control records by type (ABORT, COMMIT, LEADER_CHANGE, ...)
        self.no_timestamp = 0
        self.transactional = 0
        self.delete_horizon = 0
        self.zero_tail = 0
        self.transient = 0
        self.undecodable = 0        # batches, CRC right, whose records were read for their times and do not decode
        self.limits: dict[str, list] = {}     # cap's finding code -> [batches not read whole, first text]
        self.files: dict[str, list[int]] = {}        # group -> [count, bytes]
        self.partitions = 0
        self.partitions_with_data = 0
        self.crash: list[tuple[str | None, bool | None, str, list[str]]] = []

    def capped(self, code: str, text: str) -> None:
        """A batch whose records were not all read: a cap of the reader (``code``), not damage."""
        self.limits.setdefault(code, [0, text])[0] += 1

    def file(self, group: str, path: Path) -> None:
        try:
            size = os.path.getsize(path)
        except OSError:
            size = 0
        c = self.files.setdefault(group, [0, 0])
        c[0] += 1
        c[1] += size


def collect(path, b: InfoBuilder, opts: InfoOptions) -> None:
    p = Path(path)
    st = _Stats()
    b.damage_by_file = True          # damage counted by position in each .log, as verify counts it
    if p.is_file():
        kind = L.file_kind(p)
        if kind != "log":
            raise UsageError("info reads a Kafka log dir, a partition dir or one .log segment; for this file try "
                             f"`mqtool dump kafka {p}`", str(p))
        part = L.partition_from_dir(p.parent)
        part.segments = [s for s in part.segments if s.log is not None and s.log.name == p.name] or \
            [L.Segment(L.segment_base(p), log=p)]
        logdirs = [L.LogDir(None, [part])]
        b.store_kind = "Kafka log segment"
    else:
        logdirs = L.discover(p)
        if not logdirs:
            raise NotAStoreError("no Kafka log or partition directory found", str(p))
        if len(logdirs) > 1:
            b.store_kind = f"{len(logdirs)} Kafka log directories"
        elif logdirs[0].path is not None:
            b.store_kind = "Kafka log directory"
        else:
            b.store_kind = "Kafka partition directory"
    multi = len(logdirs) > 1
    if multi:
        b.note(f"{len(logdirs)} log directories under this path (e.g. snapshots of one broker): topics are shown "
               "as <log dir>/<topic>")
    total = sum(_log_bytes(ld) for ld in logdirs)
    with progress(total, "info: scanning logs", enabled=opts.progress) as bar:
        done = [0]
        for ld in logdirs:
            prefix = ""
            if multi and ld.path is not None:
                try:
                    prefix = str(ld.path.relative_to(p)) + "/"
                except ValueError:
                    prefix = ld.path.name + "/"
            _logdir(ld, prefix, b, st, opts, bar, done)
    _summarise(b, st)
    _interval(logdirs, b, opts)


def _interval(logdirs, b: InfoBuilder, opts: InfoOptions) -> None:
    """``index.interval.bytes`` per partition and where it came from (mqtool.kafka.interval)."""
    decided = {}
    warnings = []
    for ld in logdirs:
        for part in ld.partitions:
            dec = index_interval(part, opts)
            decided[part.label if ld.path is None else f"{ld.path.name}/{part.label}"] = dec
            if dec.warning and dec.severity == "warning":
                warnings.append(dec.warning)
            elif dec.warning:
                b.note(dec.warning)
    if not decided:
        return
    kinds = {(d.value, d.source) for d in decided.values()}
    text = (f"{next(iter(decided.values())).value} bytes (from {next(iter(kinds))[1]})" if len(kinds) == 1 else
            ", ".join(f"{k}: {d.value} ({d.source})" for k, d in list(decided.items())[:8])
            + (f" … ({len(decided)} partitions)" if len(decided) > 8 else ""))
    b.size("index.interval.bytes", {k: d.to_dict("bytes") for k, d in decided.items()}, text,
           "; ".join(warnings) or None)


def _log_bytes(ld: L.LogDir) -> int:
    n = 0
    for part in ld.partitions:
        for seg in part.segments:
            if seg.log is not None:
                try:
                    n += os.path.getsize(seg.log)
                except OSError:
                    pass
    return n


def _logdir(ld: L.LogDir, prefix: str, b: InfoBuilder, st: _Stats, opts: InfoOptions, bar, done) -> None:
    label = prefix.rstrip("/") or None
    _identity(ld, label, b, st)
    leos: dict[tuple[str, int], int] = {}
    commits: dict[tuple[str, str, int], tuple[int, str]] = {}
    for part in ld.partitions:
        st.partitions += 1
        topic = part.topic if part.topic is not None else part.label
        if part.dir_suffix:     # a partition dir being deleted / a future replica / a stray: kept apart
            topic += f" [{part.dir_suffix.rsplit('-', 1)[-1]}]"
        if part.transient:
            st.transient += len(part.transient)
        queue = part.partition if part.partition is not None else 0
        leo = _partition(part, prefix + topic, queue, b, st, commits, bar, done, prefix)
        if part.topic is not None and not part.dir_suffix:
            leos[(part.topic, part.partition)] = leo
        b.set_queue_end(prefix + topic, queue, leo)
        for seg in part.segments + part.transient:
            for kind in ("index", "timeindex", "txnindex"):
                f = getattr(seg, kind)
                if f is not None:
                    st.file("index", f)
        for _, f in part.snapshots:
            st.file("snapshot", f)
        for _, _, f in part.kraft_snapshots:
            st.file("snapshot", f)
        for f in (part.leader_epoch_checkpoint, part.partition_metadata):
            if f is not None:
                st.file("checkpoint", f)
        if part.quorum_state is not None:
            st.file("metadata", part.quorum_state)
    for (group, topic, partition), (offset, source) in sorted(commits.items()):
        b.add_consumer_offset(group, prefix + topic, partition, offset, source)
    for f in ld.checkpoints.values():
        st.file("checkpoint", f)
    _crash(ld, label, leos, st)


def _identity(ld: L.LogDir, label: str | None, b: InfoBuilder, st: _Stats) -> None:
    where = f"{label}: " if label else ""
    kraft_signs = []
    if ld.meta_properties is not None:
        st.file("metadata", ld.meta_properties)
        props = KF.read_properties(ld.meta_properties)
        ver = props.get("version")
        if ver == "1":
            kraft_signs.append("meta.properties version=1")
        elif ver == "0":
            b.hint("ZooKeeper mode: meta.properties version=0 (broker.id, cluster.id)")
        if "directory.id" in props:
            b.hint("Kafka 3.7+: meta.properties has directory.id (KIP-858)")
        ident = {k: props[k] for k in ("version", "cluster.id", "broker.id", "node.id", "directory.id") if k in props}
        b.fact(f"{where}meta.properties", ident)
    if any(p.topic == "__cluster_metadata" for p in ld.partitions):
        kraft_signs.append("__cluster_metadata log")
    if any(p.quorum_state is not None for p in ld.partitions):
        kraft_signs.append("quorum-state")
    if ld.bootstrap_checkpoint is not None:
        st.file("metadata", ld.bootstrap_checkpoint)
        kraft_signs.append("bootstrap.checkpoint")
    if kraft_signs:
        b.hint("KRaft mode: " + ", ".join(kraft_signs))
    if any(p.partition_metadata is not None for p in ld.partitions):
        b.hint("Kafka 2.8+: partition.metadata (topic IDs, KIP-516)")


def _partition(part: L.Partition, topic: str, queue: int, b: InfoBuilder, st: _Stats, commits: dict,
               bar, done, prefix: str) -> int:
    stream = str(part.path)
    leo = part.segments[-1].base_offset if part.segments else 0
    is_offsets = part.topic == "__consumer_offsets"
    had_data = False
    byte_base = 0
    for seg in part.segments:
        if seg.log is None:
            continue
        st.file("log", seg.log)
        try:
            m = map_input(seg.log, ranged=True)         # a remote file: scan() fetches what it reads
        except InputError as e:     # a FIFO, directory, link loop... named like a segment: damage, as verify says
            b.add_damage(str(seg.log), None, None, 0, "file-unreadable", f"cannot read: {e.message}", stream)
            continue
        with m:
            buf = m.buf
            size = len(buf)
            if size:
                b.add_log_file(str(seg.log), byte_base, size, stream)
            byte_base += size
            for ev in scan(buf, str(seg.log), fd=m.fileno() if m.mapped else None):
                if isinstance(ev, Damage):
                    if ev.code == "zero-tail" and seg is not part.segments[-1]:
                        # zeros at the end of a segment that is not the active one (verify: zeroed-range)
                        b.add_damage(str(seg.log), ev.position, None, ev.length, "zeroed-range", ev.message, stream)
                    elif ev.code == "zero-tail":
                        st.zero_tail += 1
                    elif ev.code in ("skipped", "partial-tail"):
                        code = "skipped-bytes" if ev.code == "skipped" else "partial-tail"
                        b.add_damage(str(seg.log), ev.position, None, ev.length, code, ev.message, stream)
                    continue
                had_data = True
                leo = max(leo, ev.last_offset + 1)
                _batch(ev, topic, queue, stream, b, st, commits if is_offsets else None, prefix + part.label)
        done[0] += size
        bar.update_to(done[0])
    if had_data:
        st.partitions_with_data += 1
    return leo


def _batch(bt: Batch, topic: str, queue: int, stream: str, b: InfoBuilder, st: _Stats, commits: dict | None,
           source: str) -> None:
    st.magic_batches[bt.magic] += 1
    st.codecs[K.CODEC_NAMES.get(bt.codec, str(bt.codec))] += 1
    st.ts_types[K.TIMESTAMP_TYPES.get(bt.timestamp_type, str(bt.timestamp_type))] += 1
    if bt.is_transactional:
        st.transactional += 1
    if bt.delete_horizon_ms is not None:
        st.delete_horizon += 1
    file = bt.file
    at = bt.max_timestamp if bt.max_timestamp >= 0 else None
    if not bt.crc_ok:
        b.add_damage(file, bt.position, bt.base_offset, bt.size, "crc-mismatch",
                     f"{'CRC32C' if bt.magic == 2 else 'CRC32'} of a magic v{bt.magic} batch does not match "
                     f"(offsets {bt.base_offset}..{bt.last_offset})", stream, at_time=at)
    if bt.inner_crc_bad:        # inner legacy messages whose own CRC fails: the wrapper's bytes (as verify)
        b.add_damage(file, bt.position, bt.base_offset, bt.size, "inner-crc-mismatch",
                     f"CRC32 of {bt.inner_crc_bad} inner (compressed) legacy message(s) of the wrapper does not "
                     "match", stream, at_time=at)
    if bt.is_control:
        st.control += header_records(bt)        # (0 when the CRC fails: the count is then no reference)
        st.control_batches += 1
        if bt.crc_ok:
            _control_types(bt, st)
        return
    n = header_records(bt)
    stamps = None
    if commits is None and n and bt.error is None and (bt.codec == K.CODEC_NONE or bt.magic < 2) and (
            n == 1 or bt.timestamp_type == 1 or
            (bt.magic == 2 and bt.delete_horizon_ms is None and bt.base_timestamp == bt.max_timestamp)):
        # every record's time is the batch max timestamp: no need to decode (as verify without --deep)
        stamps = array("q", [bt.max_timestamp]) * n
    pairs = []                  # (key, value) of offset commits: only for __consumer_offsets
    # Damage is what verify without --deep reports damaged (its findings' spans): a legacy wrapper whose inner
    # messages are unreadable (the walk reads them), a v2 payload that does not inflate. Records read here only
    # for their times that then do not decode are counted apart (st.undecodable): verify reads them with --deep.
    if bt.error is not None:
        if bt.error_code == "records-undecodable":
            b.add_damage(file, bt.position, bt.base_offset, bt.size, bt.error_code,
                         f"records of the batch cannot be read: {bt.error}", stream, at_time=at)
        else:
            st.capped(bt.error_code, bt.error)
        stamps = array("q", [bt.max_timestamp]) * n
    try:
        if stamps is None:
            stamps = array("q")     # 8 bytes a record (the records themselves are not kept)
            for r in iter_records(bt):
                t = r.timestamp
                stamps.append(t if t is not None and 0 <= t < 1 << 63 else -1)
                if commits is not None:
                    pairs.append((r.key, r.value))
    except (CodecError, ValueError, IndexError) as e:
        if isinstance(e, CodecError) and bt.magic == 2:
            b.add_damage(file, bt.position, bt.base_offset, bt.size, "payload-inflate-failed",
                         f"the {K.CODEC_NAMES.get(bt.codec, bt.codec)} payload does not inflate: {e}", stream,
                         at_time=at)
        elif isinstance(e, LimitExceeded):         # a cap of this reader, not damage (verify: a warning)
            st.capped(e.code, str(e))
        elif bt.crc_ok:
            st.undecodable += 1
        stamps = array("q", [bt.max_timestamp]) * n
        pairs = []
    if not stamps:
        return
    st.magic_records[bt.magic] += len(stamps)
    share, extra = divmod(bt.size, len(stamps))
    for i, ts in enumerate(stamps):
        if ts < 0:
            st.no_timestamp += 1
            ts = -1
        b.add_message(topic, queue, ts, share + (extra if i == 0 else 0), stream)
    for key, value in pairs:
        apply_commit(key, value, commits, source)


def _control_types(bt: Batch, st: _Stats) -> None:
    """Count the control records of a batch whose CRC holds by their type, read from the control record key as
    ``dump kafka --deep`` reads it (a record without a readable key has no type; a batch whose records do not
    decode is counted as undecodable, as for data batches). Not records: they are not on the timeline."""
    try:
        for r in iter_records(bt):
            if r.control_type is not None:
                st.control_types[control_type_name(r.control_type)] += 1
    except LimitExceeded as e:
        st.capped(e.code, str(e))
    except (CodecError, ValueError, IndexError):
        st.undecodable += 1


def _crash(ld: L.LogDir, label: str | None, leos: dict, st: _Stats) -> None:
    if ld.path is None:
        st.crash.append((label, None, "a partition directory alone: the log dir's clean-shutdown marker cannot be "
                         "checked", []))
        return
    behind = []
    rp = ld.checkpoints.get("recovery-point-offset-checkpoint")
    if rp is not None:
        c = KF.read_offset_checkpoint(rp)
        for topic, partition, off in c.entries:
            leo = leos.get((topic, partition))
            if leo is not None and off < leo:
                behind.append((topic, partition, off, leo))
    marker = ld.path / CLEAN_SHUTDOWN_FILE
    rp_text = ""
    if rp is None:
        rp_text = "no recovery-point-offset-checkpoint"
    elif behind:
        behind.sort(key=lambda x: -(x[3] - x[2]))
        t, q, off, leo = behind[0]
        rp_text = (f"the recovery point is behind the log end in {len(behind)} partition(s) "
                   f"(e.g. {t}-{q}: {off} < {leo}): not flushed/recovered data after it")
    else:
        rp_text = "every recovery point equals its log end offset"
    if os.path.lexists(marker):
        st.file("markers", marker)
        epoch = ""
        try:
            txt = read_input(marker, 4096).decode("utf-8", errors="replace").strip()
            if txt:
                epoch = f" (broker epoch {strict_json(txt).get('brokerEpoch')})"
        except (OSError, ValueError, AttributeError):
            pass
        st.crash.append((label, bool(behind),
                         f"{CLEAN_SHUTDOWN_FILE} present: the last run shut down cleanly{epoch}; {rp_text}",
                         [str(marker)]))
        return
    # No marker: Kafka will run log recovery at the next start. With recovery points behind the log end that
    # is the state a crash (or a copy of a running broker) leaves; with every recovery point at the log end
    # the marker may just be lost (copies that drop hidden files) — then we cannot tell.
    why = (f"no {CLEAN_SHUTDOWN_FILE}: Kafka runs log recovery at the next start (the broker crashed, was killed or "
           "was running when this copy was taken")
    if behind:
        st.crash.append((label, True, f"{why}); {rp_text}", []))
    else:
        st.crash.append((label, None, f"{why}, or a copy lost the hidden marker); {rp_text}, as after a clean "
                         "shutdown" if rp is not None else f"{why}); {rp_text}", []))


def _summarise(b: InfoBuilder, st: _Stats) -> None:
    order = ["log", "index", "snapshot", "checkpoint", "metadata", "markers"]
    details = {"log": f"{plural(st.partitions, 'partition')}, {st.partitions_with_data} with data",
               "index": ".index, .timeindex, .txnindex", "snapshot": "producer / KRaft snapshots",
               "checkpoint": "offset, leader-epoch checkpoints, partition.metadata",
               "metadata": "meta.properties, quorum-state, bootstrap.checkpoint", "markers": CLEAN_SHUTDOWN_FILE}
    for g in order:
        if g in st.files:
            b.add_files(g, st.files[g][0], st.files[g][1], details[g])
    if st.zero_tail and b.files and b.files[0].group == "log":
        b.files[0].detail += f"; {st.zero_tail} preallocated (zero-filled) segment tail(s)"
    for magic in (2, 1, 0):
        if st.magic_batches.get(magic):
            b.hint(_MAGIC_HINTS[magic] + f" — {plural(st.magic_batches[magic], 'batch')}")
    if st.codecs.get("zstd"):
        b.hint("Kafka 2.1+: zstd-compressed batches")
    if st.delete_horizon:
        b.hint(f"log cleaner delete horizon set (KIP-534) in {plural(st.delete_horizon, 'batch')}")
    if st.magic_records:
        b.fact("records by message format", {f"v{k}": v for k, v in sorted(st.magic_records.items())})
    if st.codecs:
        b.fact("batches by codec", dict(sorted(st.codecs.items())))
    if st.ts_types:
        b.fact("batches by timestamp type", dict(sorted(st.ts_types.items())))
    if st.control_batches or st.transactional:
        tx = {"control_batches": st.control_batches, "control_records": st.control,
              "transactional_batches": st.transactional}
        if st.control_types:
            tx["control_types"] = dict(sorted(st.control_types.items()))
        b.fact("transactions", tx)
    b.fact("partitions", {"total": st.partitions, "with_data": st.partitions_with_data})
    if st.transient:
        b.note(f"{st.transient} segment(s) named .deleted/.cleaned/.swap (being deleted or compacted by the broker) "
               "are not part of the live logs and not counted; `mqtool dump kafka` reads them")
    for code, (count, text) in st.limits.items():
        b.note(f"{plural(count, 'batch')} not read whole ({code}: {text}): counted by their headers, at the "
               "batch's newest time")
    if st.undecodable:
        b.note(f"{plural(st.undecodable, 'batch')} with a CRC that holds had records that do not decode when read "
               "for their times (not counted as damage: `verify` reads records only with --deep, and every such "
               "batch then: `mqtool verify store PATH --deep`)")
    if st.no_timestamp:
        b.note(f"{st.no_timestamp} records carry no timestamp (message format v0, or -1): counted, but not on the "
               "timeline")
    if st.crash:
        known = [c for c in st.crash if c[1] is not None]
        unclean = True if any(c[1] for c in known) else (False if known and len(known) == len(st.crash) else None)
        if len(st.crash) == 1:
            detail = st.crash[0][2]
        else:
            detail = "; ".join(f"{lab or '-'}: {'UNCLEAN' if u else 'clean' if u is False else '?'}"
                               for lab, u, _, _ in st.crash)
            ref = next((c for c in st.crash if c[1]), st.crash[0])
            detail += f" — {ref[0] or '-'}: {ref[2]}"
        b.set_crash(unclean, detail, [f for c in st.crash for f in c[3]])
