"""The ``.log`` checks: one pass over each segment's batches (CRC, offsets, records with ``--deep``), and the
KRaft snapshot logs (``bootstrap.checkpoint``, ``<offset>-<epoch>.checkpoint``)."""
from __future__ import annotations

from pathlib import Path

from formats import kafka as K
from mqtool.findings import ERROR, INFO, WARNING
from mqtool.io import map_input
from mqtool.codecs import CodecError, kafka_codec_name as codec_name
from mqtool.kafka.layout import V2_CRC_FROM
from mqtool.kafka.store import Segment
from mqtool.kafka.rebuild.recover import Recoverer
from mqtool.kafka.rebuild.txn import TxnTracker, control_type_of
from mqtool.kafka.records import NATIVE_AREA_MAX, Batch, LimitExceeded, header_records, iter_records, records_area
from mqtool.kafka.scan import Damage, scan
from mqtool.kafka.verify.state import SegmentSeen


class LogChecks:
    """The checks of a segment's ``.log`` (a mixin of :class:`~mqtool.kafka.verify.verifier.KafkaVerifier`)."""

    # -- .log
    def check_log(self, seg: Segment, seen: SegmentSeen, txn: TxnTracker, prev_last, active: bool = True):
        self.stats["segments"] += 1
        path = seg.log
        rec = Recoverer(seg.base_offset, self.interval, txn)
        gaps = 0
        last_read = None        # the last offset of the batch read before (whatever its CRC): gaps are steps
        with map_input(path, ranged=True) as m:     # a remote file: scan() fetches what it reads
            buf = m.buf
            seen.size = len(buf)
            self.stats["bytes"] += len(buf)
            if len(buf) == 0:
                yield self._f(INFO, "empty-segment", path, None, seg.base_offset, "empty segment (no batches)")
                return prev_last
            kinds, inflates = _native_inflate()
            for ev in scan(buf, str(path), fd=m.fileno() if m.mapped else None):
                if m.shrunk():
                    # a mapped file truncated under us: reading on would touch lost pages (SIGBUS)
                    now = m.current_size()
                    rec.stop("file changed")
                    yield self._f(ERROR, "file-changed", path, ev.position,
                                  None, f"the file shrank to {now} bytes while being read; stopped here",
                                  expected=len(buf), actual=now)
                    break
                if isinstance(ev, Damage):
                    rec.stop(f"{ev.code} at {ev.position}")
                    if ev.code == "zero-tail" and not active:
                        yield self._f(WARNING, "zeroed-range", path, ev.position, None,
                                      f"{ev.length} zero bytes from {ev.position} to the end of a segment that is not "
                                      "the active one: Kafka trims a segment when it rolls, so these bytes were "
                                      "zeroed (damage) or the broker died while preallocating",
                                      span=(ev.position, ev.end))
                    elif ev.code == "zero-tail":
                        yield self._f(INFO, "zero-tail", path, ev.position, None,
                                      f"{ev.length} zero bytes from {ev.position} to the end: end of data "
                                      "(preallocated segment), not corruption")
                    elif ev.code == "partial-tail" and seen.batches == 0:
                        # a segment none of whose bytes make a batch: nothing in it is readable (an interrupted
                        # append leaves its tail after readable batches, not instead of them)
                        yield self._f(ERROR, "no-readable-batch", path, ev.position, None,
                                      f"no batch readable in the segment: {ev.message}", actual=ev.length,
                                      span=(ev.position, ev.end))
                    elif ev.code == "partial-tail":
                        yield self._f(WARNING, "partial-tail", path, ev.position, None,
                                      f"{ev.length} bytes at the end do not make a whole batch "
                                      "(interrupted write; Kafka recovery truncates them)", span=(ev.position, ev.end))
                    else:
                        self.summary.skipped_ranges += 1
                        self.summary.skipped_bytes += ev.length
                        yield self._f(ERROR, "skipped-bytes", path, ev.position, None,
                                      f"bytes {ev.position}..{ev.end} ({ev.length}) skipped: {ev.message}",
                                      actual=ev.length, span=(ev.position, ev.end))
                    continue
                b: Batch = ev
                seen.batches += 1
                self.stats["batches"] += 1
                if not b.is_control:
                    self.messages += header_records(b)
                if not b.crc_ok:           # (the batch's bytes are damaged: its span, as info counts it)
                    yield self._f(ERROR, "crc-mismatch", path, b.position, b.base_offset,
                                  f"{'CRC32C' if b.magic == 2 else 'CRC32'} of magic v{b.magic} batch does not match",
                                  expected=b.crc, actual=_actual_crc(b), span=(b.position, b.position + b.size))
                if b.inner_crc_bad:        # (the walk read the inner messages: no --deep needed)
                    yield self._inner_crc_finding(path, b)
                ctype = None
                if b.is_control and b.crc_ok:
                    ctype = control_type_of(b)
                    if ctype == K.CONTROL_ABORT:
                        seen.aborts.add((b.producer_id, b.last_offset))
                rec.feed(b, ctype)
                base = b.base_offset if b.base_offset is not None else b.last_offset
                if seen.head is not None and (not seen.head or not seen.head[-1][2]):
                    seen.head.append((base, b.last_offset, b.crc_ok))
                if b.error:
                    bad = b.error_code == "records-undecodable"
                    yield self._f(ERROR if bad else WARNING, b.error_code, path, b.position, b.last_offset, b.error,
                                  span=(b.position, b.position + b.size) if bad else None)
                if base < seg.base_offset:
                    yield self._f(ERROR, "offset-below-base", path, b.position, base,
                                  f"batch base offset {base} is below the segment's base offset {seg.base_offset}",
                                  expected=f">= {seg.base_offset}", actual=base)
                if b.last_offset - seg.base_offset > 0x7FFFFFFF:
                    yield self._f(ERROR, "offset-overflow", path, b.position, b.last_offset,
                                  "offset minus segment base does not fit in int32 (index entries cannot address it)")
                if prev_last is not None and base <= prev_last:
                    yield self._f(ERROR, "offset-not-increasing", path, b.position, base,
                                  f"batch offsets {base}..{b.last_offset} do not follow the previous last offset "
                                  f"{prev_last}", expected=f"> {prev_last}", actual=base)
                elif prev_last is not None and base != (prev_last if last_read is None else last_read) + 1:
                    # (after a batch whose CRC fails, the step from its offsets: the batch is still there)
                    if seen.batches == 1:
                        seen.boundary_gap = (prev_last, base)      # judged per partition (_segment_gaps)
                    else:
                        gaps += 1
                last_read = b.last_offset
                if b.magic == 2 and b.partition_leader_epoch >= 0:
                    if seen.epochs and seen.epochs[-1][0] == b.partition_leader_epoch:
                        seen.epochs[-1][2] = b.last_offset
                    else:
                        seen.epochs.append([b.partition_leader_epoch, base, b.last_offset])
                if b.crc_ok:      # a batch whose CRC fails may carry a damaged lastOffsetDelta: not a reference
                    prev_last = max(prev_last, b.last_offset) if prev_last is not None else b.last_offset
                if seen.first_offset is None:
                    seen.first_offset = base
                seen.last_offset = b.last_offset if seen.last_offset is None else max(seen.last_offset, b.last_offset)
                seen.by_position[b.position] = (base, b.last_offset, b.max_timestamp)
                seen.by_last.setdefault(b.last_offset, (b.position, b.max_timestamp))
                seen.bases.append(base)
                seen.spans.append((base, b.last_offset, b.max_timestamp))
                if self.deep or self.salvage is not None:
                    gaps += yield from self._check_records(path, b)
                elif b.magic == 2 and b.codec != K.CODEC_NONE and b.crc_ok:
                    # the CRC covers the compressed bytes; only inflating shows the records can be read (by the
                    # compiled decoders where they take the payload: they decline what they do not inflate whole,
                    # and the Python codecs then say what is wrong)
                    kind = kinds.get(b.codec)
                    if kind is not None and inflates(kind, memoryview(buf)[b.position + K.V2_HEADER_SIZE:b.end],
                                                     NATIVE_AREA_MAX, True) is not None:
                        continue
                    try:
                        records_area(b)
                    except CodecError as e:
                        yield self._inflate_finding(path, b, e)
        seen.canonical = rec.finish(True)
        seen.canonical_nofinal = None
        if not _sorted(seen.bases):
            order = sorted(range(len(seen.bases)), key=seen.bases.__getitem__)
            seen.bases = [seen.bases[i] for i in order]
            seen.spans = [seen.spans[i] for i in order]
        seen.interior_gaps = gaps
        if gaps:
            yield self._f(INFO, "offset-gaps", path, None, None,
                          f"{gaps} non-consecutive offset step(s) (normal after compaction or aborted/cleaned data)",
                          actual=gaps)
        if seen.batches == 0 and seen.size == 0:
            yield self._f(INFO, "empty-segment", path, None, seg.base_offset, "empty segment (no batches)")
        return prev_last

    def check_snapshot_log(self, path: Path):
        """KRaft snapshots (``bootstrap.checkpoint``, ``<offset>-<epoch>.checkpoint``): records format, no indexes."""
        seen = SegmentSeen(0)
        yield from self.check_log(Segment(0, log=path), seen, TxnTracker(), None)

    def _check_records(self, path, b: Batch):
        gaps = 0
        prev = None
        n = 0
        # record offsets that do not increase / lie past the batch's last offset: one finding per batch and
        # kind (the first such record, and how many more), not one per record (a batch of 10,000 records with
        # every offsetDelta 0 is one damaged batch)
        steps, beyond = [None, 0], [None, 0]
        try:
            for r in iter_records(b):
                n += 1
                if prev is not None:
                    if r.offset <= prev:
                        if steps[0] is None:
                            steps[0] = (r.offset, prev)
                        steps[1] += 1
                    elif r.offset != prev + 1:
                        gaps += 1
                if r.offset > b.last_offset:
                    if beyond[0] is None:
                        beyond[0] = r.offset
                    beyond[1] += 1
                prev = r.offset
                if self.salvage is not None:
                    self.salvage(b, r)
        except LimitExceeded as e:
            if e.code != b.error_code:          # a legacy wrapper's cap is reported once, with the batch
                yield self._f(WARNING, e.code, path, b.position, b.base_offset, f"records not all checked: {e}")
        except CodecError as e:
            yield self._inflate_finding(path, b, e)
        except (ValueError, IndexError) as e:        # (the batch's bytes cannot be read: its span, as the walk's)
            yield self._f(ERROR, "records-undecodable", path, b.position, b.base_offset,
                          f"records of the batch cannot be read: {e}", span=(b.position, b.position + b.size))
        if steps[1]:
            (off, before), more = steps[0], steps[1] - 1
            yield self._f(ERROR, "record-offsets", path, b.position, off,
                          f"record offset {off} does not increase (previous {before})"
                          + (f"; {more} more record(s) of this batch do not increase" if more else ""))
        if beyond[1]:
            more = beyond[1] - 1
            yield self._f(ERROR, "record-offsets", path, b.position, beyond[0],
                          f"record offset {beyond[0]} beyond the batch's last offset {b.last_offset}"
                          + (f"; {more} more record(s) of this batch lie beyond it" if more else ""))
        self.stats["records"] += n
        return gaps

    def _inner_crc_finding(self, path, b: Batch):
        """``inner-crc-mismatch``: one per legacy wrapper, at the first inner message whose own CRC-32 fails,
        ``actual`` how many do. Its span is the wrapper's bytes: an inner message exists only inside the
        wrapper's compressed value, so no narrower range of the file holds it (info counts the same span)."""
        n = b.inner_crc_bad
        return self._f(ERROR, "inner-crc-mismatch", path, b.position, b.inner_crc_first,
                       f"CRC32 of {n} inner (compressed) legacy message(s) of the wrapper at {b.position} does not "
                       "match" + (f" (the first at offset {b.inner_crc_first})" if b.inner_crc_first is not None
                                  else ""), actual=n, span=(b.position, b.position + b.size))

    def _inflate_finding(self, path, b: Batch, e: Exception):
        """The batch cannot be read (whatever its CRC says): damage of its bytes, its span as info counts it."""
        return self._f(ERROR, "payload-inflate-failed", path, b.position, b.base_offset,
                       f"{codec_name(b.codec)} payload of batch {b.base_offset}..{b.last_offset} does not inflate: {e}",
                       expected=codec_name(b.codec), actual=str(e), span=(b.position, b.position + b.size))


def _sorted(xs) -> bool:
    return all(xs[i] <= xs[i + 1] for i in range(len(xs) - 1))


def _actual_crc(b: Batch) -> int:
    import zlib

    from mqtool.fastcrc import crc32c
    mv = memoryview(b._buf)
    if b.magic == 2:
        return crc32c(mv[b.position + V2_CRC_FROM:b.end])
    return zlib.crc32(mv[b.position + 16:b.end])


def _native_inflate():
    """({codec id: area kind}, ``inflate(kind, data, limit)``) of the compiled helper's decoders (snappy, lz4,
    zstd: ``kafka.c``, the libraries' own code without the GIL; bytes, or None where it declines), or ({}, None)
    without the helper. Asked once per segment (the switch is read here)."""
    from mqtool import native

    mod = native.load("kafka")
    fn = getattr(mod, "inflate", None)
    if fn is None:
        return {}, None
    from mqtool.codecs import kafka_native_codecs

    return {codec: kind for codec, kind in kafka_native_codecs(mod).items() if kind}, fn
