"""Per-partition and per-log-dir checks: gaps between segments, orphaned files, snapshots, partition metadata,
the log dir's checkpoint files."""
from __future__ import annotations

import bisect

from mqtool.findings import ERROR, INFO, WARNING, checkpoint_value_problems
from mqtool.kafka import indexfiles as F
from mqtool.kafka.store import LogDir, Partition, looks_compacted, orphan_segments, stray_snapshots
from mqtool.kafka.verify.state import SegmentSeen


class PartitionChecks:
    """The checks of a partition's and a log dir's own files (a mixin of
    :class:`~mqtool.kafka.verify.verifier.KafkaVerifier`)."""

    def _segment_gaps(self, p: Partition, seen_all: list[SegmentSeen]):
        """Offsets missing between two segments. Retention deletes only from the start and a roll starts the
        new segment at the next offset, so a gap at a segment boundary means a deleted (or lost) segment,
        unless the partition is compacted (the cleaner keeps segment base offsets while removing records):
        an error (data lost) when nothing else in the partition shows compaction, info otherwise."""
        gaps = [s for s in seen_all if s.boundary_gap is not None]
        if not gaps:
            return
        compacted = looks_compacted(p.topic, sum(s.interior_gaps for s in seen_all))
        by_base = {s.base: seg for seg in p.segments for s in seen_all if s.base == seg.base_offset}
        for s in gaps:
            last, base = s.boundary_gap
            seg = by_base.get(s.base)
            yield self._f(INFO if compacted else ERROR, "segment-gap", seg.log if seg else None, None, base,
                          f"offsets {last + 1}..{base - 1} are in no segment: the previous segment ends at {last} "
                          f"and this one starts at {base} (a deleted or lost segment"
                          + (", or compaction" if compacted else "; the partition shows no sign of compaction")
                          + ")", expected=last + 1, actual=base)

    def _orphans(self, p: Partition):
        """Index files whose .log is gone, and producer snapshots Kafka would delete as strays."""
        for seg, where in orphan_segments(p):
            files = [f for f in (seg.index, seg.timeindex, seg.txnindex) if f is not None]
            names = ", ".join(f.name for f in files)
            if where == "inside":
                yield self._f(ERROR, "segment-log-missing", files[0], None, seg.base_offset,
                              f"{names} but no {seg.name}.log: the log segment starting at offset {seg.base_offset} "
                              "is missing (deleted or lost), its index files remain")
            else:
                yield self._f(WARNING, "orphan-index", files[0], None, seg.base_offset,
                              f"{names} without a {seg.name}.log "
                              + ("before the first segment: a retention delete that did not finish (Kafka "
                                 "deletes such files at startup)" if where == "before" else
                                 "and the partition has no .log at all"))
        bases = [s.base_offset for s in p.segments if s.log is not None]
        for off, f in stray_snapshots(p):
            inside = bool(bases) and bases[0] < off < bases[-1]
            yield self._f(WARNING if inside else INFO, "snapshot-stray", f, None, off,
                          f"producer snapshot at offset {off} matches no segment base offset"
                          + (": the segment it was taken for is missing" if inside else "")
                          + " (Kafka deletes such a snapshot when it loads the partition)")

    # -- per-partition files
    def check_partition_files(self, p: Partition, seen_all: list[SegmentSeen], leo: int):
        for off, path in p.snapshots:
            s = F.read_snapshot(path)
            if s.size >= 10 and not s.crc_ok:
                yield self._f(ERROR, "snapshot-crc", path, 2, None,
                              "producer snapshot CRC32C does not match (Kafka: CorruptSnapshotException)",
                              expected=s.crc)
            if s.problem:
                yield self._f(ERROR, "snapshot-malformed", path, None, None, s.problem.strip())
            if seen_all and off > leo:
                yield self._f(WARNING, "snapshot-beyond-log-end", path, None, off,
                              f"snapshot offset {off} is beyond the log end offset {leo}", expected=f"<= {leo}", actual=off)
            for ent in s.entries:
                if seen_all and ent[3] >= leo:
                    yield self._f(WARNING, "snapshot-beyond-log-end", path, None, ent[3],
                                  f"producer {ent[0]}: last offset {ent[3]} is not in the log (log end offset {leo})",
                                  expected=f"< {leo}", actual=ent[3])
        if p.leader_epoch_checkpoint is not None:
            c = F.read_leader_epoch_checkpoint(p.leader_epoch_checkpoint)
            if c.problem:
                yield self._f(ERROR, "checkpoint-malformed", p.leader_epoch_checkpoint, None, None, c.problem)
            runs = [r for s in seen_all for r in s.epochs]
            entries = sorted(c.entries, key=lambda x: x[1])
            starts = [o for _e, o in entries]
            reported = set()
            for e, o in entries:
                if e < 0 or o < 0:
                    yield from self._negative(p.leader_epoch_checkpoint, f"epoch {e} start offset", min(e, o))
                    continue
                if o > leo:
                    yield self._f(ERROR, "leader-epoch-beyond-log-end", p.leader_epoch_checkpoint, None, o,
                                  f"epoch {e} starts at {o}, beyond the log end offset {leo}")
                    continue
                for s in seen_all:
                    j = bisect.bisect_right(s.bases, o) - 1
                    if j >= 0 and s.spans[j][0] < o <= s.spans[j][1]:
                        yield self._f(WARNING, "leader-epoch-mid-batch", p.leader_epoch_checkpoint, None, o,
                                      f"epoch {e} starts at {o}, inside batch {s.spans[j][0]}..{s.spans[j][1]} "
                                      "(an epoch begins at a batch boundary)")
            # Every v2 batch's partitionLeaderEpoch must be the epoch the checkpoint gives for its offsets.
            for ple, first, last in runs:
                lo = bisect.bisect_right(starts, first) - 1
                hi = bisect.bisect_right(starts, last) - 1
                for k in range(max(lo, 0), hi + 1) if hi >= 0 else ():
                    e, o = entries[k]
                    if e != ple and (e, o) not in reported:
                        reported.add((e, o))
                        yield self._f(WARNING, "leader-epoch-mismatch", p.leader_epoch_checkpoint, None, o,
                                      f"checkpoint says epoch {e} from offset {o}, but batches {max(first, o)}.."
                                      f"{last} carry partition leader epoch {ple}", expected=ple, actual=e)
                if lo < 0 and entries and ("before", ple) not in reported:
                    reported.add(("before", ple))
                    yield self._f(WARNING, "leader-epoch-mismatch", p.leader_epoch_checkpoint, None, first,
                                  f"batches from offset {first} carry partition leader epoch {ple}, but the "
                                  f"checkpoint's first epoch starts at {entries[0][1]}", expected=ple, actual=None)
        if p.partition_metadata is not None:
            props = F.read_properties(p.partition_metadata)
            if props.get("version") != "0" or len(props.get("topic_id", "")) != 22:
                yield self._f(ERROR, "partition-metadata-malformed", p.partition_metadata, None, None,
                              f"expected 'version: 0' and a 22-character topic_id, found {props}")

    def _negative(self, path, what: str, value: int):
        for sev, code, msg, exp, act in checkpoint_value_problems(what, value):
            yield self._f(sev, code, path, None, None, msg, expected=exp, actual=act)

    # -- log-dir checkpoints
    def check_logdir_checkpoints(self, ld: LogDir, leos: dict):
        for name, path in sorted(ld.checkpoints.items()):
            c = F.read_offset_checkpoint(path)
            if c.problem:
                yield self._f(ERROR, "checkpoint-malformed", path, None, None, c.problem)
            # Kafka reads the entries into a map (OffsetCheckpointFile): a partition listed again replaces the
            # earlier line. The findings are per partition, and the partitions with no directory are one
            # finding per file (a hostile file listing a million of them is one line, not a million).
            last = {(topic, part): off for topic, part, off in c.entries}
            if len(last) < len(c.entries):
                yield self._f(ERROR, "checkpoint-malformed", path, None, None,
                              f"{len(c.entries) - len(last)} line(s) repeat a partition listed before (a broker "
                              "writes each once; Kafka keeps the last)")
            unknown = [tp for tp in last if tp not in leos]
            if unknown:
                shown = ", ".join(f"{t}-{q}" for t, q in unknown[:5]) + (", ..." if len(unknown) > 5 else "")
                yield self._f(WARNING, "checkpoint-unknown-partition", path, None,
                              last[unknown[0]] if len(unknown) == 1 else None,
                              f"{shown} {'is' if len(unknown) == 1 else f'({len(unknown)} partitions) are'} "
                              "listed but without a partition directory", actual=len(unknown))
            for (topic, part), off in last.items():
                hit = leos.get((topic, part))
                if hit is None:
                    continue
                if off < 0:
                    yield from self._negative(path, f"{name}: {topic}-{part}", off)
                    continue
                leo, _p = hit
                if name != "cleaner-offset-checkpoint" and off > leo:
                    yield self._f(WARNING, "checkpoint-beyond-log-end", path, None, off,
                                  f"{name}: {topic}-{part} at {off}, beyond the log end offset {leo}: the log lost "
                                  "data after the checkpoint was written, or the files were copied at different "
                                  "moments (non-atomic copy of a running broker)",
                                  expected=f"<= {leo}", actual=off)
