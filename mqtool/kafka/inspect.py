"""``mqtool inspect`` for Kafka: one batch (or legacy message) field by field, from :mod:`formats.kafka`.

A v2 batch is walked with ``RecordBatch``: the header fields, then the records area, whose records
(``Record``: length, attributes, deltas, key, value, headers) are walked one level deeper, each header one more.
A compressed area is inflated (bounded) and its records are walked there (``space: "records"``, positions inside
the inflated bytes). Checks, each with the code ``verify`` gives: batchLength against the bytes left, the magic,
the CRC-32C over attributes..end, the codec in attributes, recordsCount against the records found, and
lastOffsetDelta against the last record's offsetDelta. A legacy v0/v1 message is walked with ``LegacyMessage``
and its CRC-32 checked; a compressed wrapper's inner messages are walked in its inflated value, each with its
CRC-32. ``--offset N`` finds the segment and the batch holding record offset N and marks the record.
"""
from __future__ import annotations

import struct
import zlib
from pathlib import Path

from formats import kafka as K
from mqtool import codecs
from mqtool.errors import UsageError
from mqtool.fastcrc import crc32c
from mqtool.io import map_input, need
from mqtool.kafka.store import discover
from mqtool.schemawalk import Inspection, Walker

#: a compressed records area is inflated up to this size for the walk
INFLATE_LIMIT = 64 * 1024 * 1024
#: the records of a batch listed field by field (the rest are walked and checked, and the asked one is listed)
RECORD_ROWS = 200
#: records (inner messages) of one batch walked at most: a records area inflating to 64 MiB can hold ~9 M
#: seven-byte records, a walk of minutes; past this the walk stops with a note (``dump --deep`` reads them all)
WALK_LIMIT = 100_000
_ENTRY = struct.Struct(">qi")           # offset, size: the log overhead of every entry
_LOD = struct.Struct(">i")


def inspect(path, offset: int | None = None, position: int | None = None) -> Inspection:
    """The batch holding record ``offset`` of the partition (dir, or one .log segment) at ``path``, or the
    entry at byte ``position`` of the .log file ``path``."""
    p = Path(path)
    if position is not None:
        if not p.is_file():
            raise UsageError("--position needs a file (a .log segment); give a partition directory with --offset",
                             str(p))
        with map_input(p, ranged=True) as mi:       # a remote file: fetched where read (need_unit)
            if position >= len(mi.buf):
                raise UsageError(f"position {position} is beyond the end of the file ({len(mi.buf)} bytes)", str(p))
            mi.need_unit(position, K.LOG_OVERHEAD - 4, K.LOG_OVERHEAD)
            return inspect_entry(mi.buf, position, str(p), None)
    log = _segment_for(p, offset)
    with map_input(log, ranged=True) as mi:         # a remote file: fetched where read (need, need_unit)
        pos = _find(mi.buf, offset, str(log))
        mi.need_unit(pos, K.LOG_OVERHEAD - 4, K.LOG_OVERHEAD)
        return inspect_entry(mi.buf, pos, str(log), offset)


def _segment_for(p: Path, offset: int) -> Path:
    if p.is_file():
        return p
    parts = [part for d in discover(p) for part in d.partitions if part.segments]
    if not parts:
        raise UsageError("no Kafka .log segments found", str(p))
    if len(parts) > 1:
        names = ", ".join(part.label for part in parts[:5])
        raise UsageError(f"{len(parts)} partitions here ({names}{', ...' if len(parts) > 5 else ''}): give one "
                         "partition directory", str(p))
    segs = [s for s in parts[0].segments if s.log is not None]
    holder = [s for s in segs if s.base_offset <= offset]
    if not holder:
        raise UsageError(f"offset {offset} lies before the first segment ({segs[0].name})", str(p))
    return holder[-1].log


def _find(buf, offset: int, file: str) -> int:
    """Position of the entry holding record ``offset``: walk the entries' log overhead from the start."""
    n, p = len(buf), 0
    while p + K.HEADER_SIZE_UP_TO_MAGIC <= n:
        need(buf, p, K.V2_HEADER_SIZE)              # a remote file: this entry's header
        base, size = _ENTRY.unpack_from(buf, p)
        if size == 0 and base == 0:
            break                                   # zero fill: end of data
        magic = buf[p + K.MAGIC_OFFSET]
        if size < K.MIN_RECORD_OVERHEAD or p + K.LOG_OVERHEAD + size > n or magic > 2:
            raise UsageError(f"offset {offset} not reached: the entry at position {p} does not frame (see it with "
                             f"`mqtool inspect {file} --position {p}`)", file)
        if magic == 2:
            last = base + _LOD.unpack_from(buf, p + K.V2_ATTRIBUTES_OFFSET + 2)[0]
            if base <= offset <= last:
                return p
            if base > offset:
                break
        elif base >= offset:                        # legacy: the entry's offset is its (last inner) message's
            return p
        p += K.LOG_OVERHEAD + size
    raise UsageError(f"offset {offset} is in no batch of this segment", file)


def inspect_entry(buf, pos: int, file: str, target: int | None) -> Inspection:
    n = len(buf)
    left = n - pos
    ins = Inspection("kafka", file, pos, target, "batch", 0)
    size = magic = None
    if left >= K.HEADER_SIZE_UP_TO_MAGIC:
        size = _ENTRY.unpack_from(buf, pos)[1]
        magic = buf[pos + K.MAGIC_OFFSET]
        magic = magic - 256 if magic > 127 else magic
    legacy = magic in (0, 1)
    ins.kind = "legacy-message" if legacy else "batch"
    low = K.MIN_RECORD_OVERHEAD if legacy else K.V2_HEADER_SIZE - K.LOG_OVERHEAD
    framed = size is not None and low <= size <= left - K.LOG_OVERHEAD
    end = pos + K.LOG_OVERHEAD + size if framed else n
    state = {"target": target}
    w = Walker(buf, pos, end, flatten=frozenset({"header"}),
               hooks={"records": lambda w, f, ctx: _records(w, f, ctx, state),
                      "value": lambda w, f, ctx: _inner_messages(w, f, ctx, state)})
    obj = w.walk(K.LegacyMessage if legacy else K.RecordBatch)
    ins.fields, ins.broken = w.fields, w.broken
    by = {f.path: f for f in w.fields}
    size_name, crc_name, magic_name = ("size", "crc", "magic") if legacy else \
        ("header.batchLength", "header.crc", "header.magic")
    if size_name in by and isinstance(by[size_name].value, int):
        f = by[size_name]
        size = f.value
        if size < low:
            f.check(False, f">={low}", size, "kafka.skipped-bytes", "below the smallest entry")
        elif not framed:
            f.check(False, f"<={left - K.LOG_OVERHEAD}", size, "kafka.partial-tail", "runs past the end of the file")
        else:
            f.check(True, f"<={left - K.LOG_OVERHEAD}", size)
    if magic_name in by and isinstance(by[magic_name].value, int):
        f = by[magic_name]
        f.check(f.value in (0, 1, 2), "0|1|2", f.value, "kafka.skipped-bytes")
    if framed and crc_name in by:
        f = by[crc_name]
        start = pos + (K.LEGACY_MAGIC_OFFSET if legacy else K.V2_ATTRIBUTES_OFFSET)
        actual = (zlib.crc32 if legacy else crc32c)(memoryview(buf)[start:end]) & 0xFFFFFFFF
        f.check(actual == f.value, actual, f.value, "kafka.crc-mismatch",
                None if actual == f.value else f"CRC-{'32' if legacy else '32C'} of bytes {start - pos}.."
                f"{end - pos} of the entry")
    attrs = by.get("attributes" if legacy else "header.attributes")
    if attrs is not None and isinstance(attrs.value, int):
        codec = attrs.value & K.CODEC_MASK
        attrs.check(codec in K.CODEC_NAMES, "codec 0-4", codec, "kafka.records-undecodable")
        attrs.note = _attributes_text(attrs.value, legacy)
    ins.keep_span(buf, end if framed else max((f.end for f in w.fields), default=pos))
    if obj is not None and not legacy:
        h = obj.header
        found = state.get("found")
        if found is not None and "header.recordsCount" in by:
            by["header.recordsCount"].check(found == h.recordsCount, found, h.recordsCount,
                                            "kafka.records-undecodable", None if found == h.recordsCount else
                                            f"{found} records in the records area")
        last = state.get("last_delta")
        if last is not None and "header.lastOffsetDelta" in by:
            by["header.lastOffsetDelta"].check(
                last <= h.lastOffsetDelta, f">={last}", h.lastOffsetDelta, "kafka.record-offsets",
                None if last == h.lastOffsetDelta else
                "lastOffsetDelta is below the last record's offsetDelta" if last > h.lastOffsetDelta else
                "above the last record's offsetDelta (records removed by compaction)")
        ins.summary = {"base_offset": h.baseOffset, "last_offset": h.baseOffset + h.lastOffsetDelta,
                       "records_count": h.recordsCount, "codec": K.CODEC_NAMES.get(h.attributes & K.CODEC_MASK),
                       "producer_id": h.producerId, "max_timestamp": h.maxTimestamp,
                       "target_offset": target, "target_found": state.get("marked", False) if target is not None
                       else None}
    elif obj is not None:
        ins.summary = {"base_offset": state.get("first_inner", obj.offset), "last_offset": obj.offset,
                       "codec": K.CODEC_NAMES.get(obj.attributes & K.CODEC_MASK), "timestamp": obj.timestamp,
                       "target_offset": target,
                       "target_found": (state.get("marked", False) if obj.attributes & K.CODEC_MASK
                                        else obj.offset == target) if target is not None else None}
        for name in ("key", "value"):
            if name in by and isinstance(by[name].value, bytes):
                by[name].value = by[name].value.decode("utf-8", errors="backslashreplace")
    if target is not None and state.get("unwalked") and not state.get("marked"):
        # the records were not walked (inflating past the cap, a broken stream): whether one has it is unknown
        ins.summary["target_found"] = None
        ins.notes.append(f"offset {target} is within the batch's range, but not all its records are walked here "
                         "(see the note or check on its records): whether one has it is not known")
    elif target is not None and ins.summary.get("target_found") is False:
        ins.notes.append(f"offset {target} is within the batch's range but no record has it (compacted away?)")
    return ins


def _records(w: Walker, area, ctx, state: dict) -> None:
    """Walk the records of the area (inflated first when compressed), one level below the area's row."""
    h = ctx.header
    area.composite = True
    codec = h.attributes & K.CODEC_MASK
    count = h.recordsCount
    area.value = f"{count} records, {K.CODEC_NAMES.get(codec, codec)}"
    if codec == K.CODEC_NONE:
        start, stop = area.position, area.end
    else:
        data = _inflated(w, area, codec, "records")
        if data is None:
            state["unwalked"] = True
            return
        area.note = f"records walked in the inflated bytes ({len(data)}): positions there, not in the file"
        start, stop = 0, len(data)
    buf, space = (w.buf, w.space) if codec == K.CODEC_NONE else (data, "records")
    pos, found, last, skipped, broken = start, 0, None, 0, None
    while pos < stop and broken is None:
        if found >= WALK_LIMIT:
            state["unwalked"] = True
            area.note = ((area.note + "; ") if area.note else "") + \
                f"the walk stopped after {WALK_LIMIT} records (`mqtool dump kafka --deep` reads them all)"
            found = last = None         # the count checks need every record
            break
        i = found
        rw = Walker(buf, pos, stop, space=space)         # one record; its rows are kept or dropped below
        row = rw.add(f"records[{i}]", pos, 0, area.depth + 1, raw=False, composite=True)
        rec = rw.walk(K.Record, depth=area.depth + 2, prefix=f"records[{i}]")
        row.size = rw.view.pos - pos
        rw._keep_raw(row)
        pos, broken = rw.view.pos, rw.broken
        off = None
        if rec is not None:
            found += 1
            last = rec.offsetDelta
            off = h.baseOffset + rec.offsetDelta
            row.value = f"offset {off}"
            for f in rw.fields:
                if f.name in ("key", "value", "headerKey", "headerValue") and isinstance(f.value, bytes):
                    f.value = f.value.decode("utf-8", errors="backslashreplace")
        if state["target"] is not None and off == state["target"]:
            row.target = True
            state["marked"] = True
        if i < RECORD_ROWS or row.target or broken is not None:
            w.fields.extend(rw.fields)
        else:
            skipped += 1
    if skipped:
        area.note = ((area.note + "; ") if area.note else "") + \
            f"{skipped} records after the first {RECORD_ROWS} checked but not listed"
    if broken is not None and w.broken is None:
        w.broken = broken
    state["found"], state["last_delta"] = found, last


def _inflated(w: Walker, node, codec: int, what: str):
    """The compressed bytes ``node`` spans, inflated (capped at INFLATE_LIMIT) with the stream checked on
    ``node``; None when its ``what`` are not walked (too large: a note; a broken stream: a failed check)."""
    name = K.CODEC_NAMES.get(codec, codec)
    try:
        data = codecs.decompress_kafka(codec, memoryview(w.buf)[node.position:node.end], INFLATE_LIMIT)
    except codecs.CodecTooLarge:
        node.note = f"inflates past {INFLATE_LIMIT} bytes: its {what} are not walked here"
        return None
    except codecs.CodecError as e:
        node.check(False, f"{name} stream", str(e), "kafka.payload-inflate-failed")
        return None
    node.check(True, f"{name} stream", f"inflates to {len(data)} bytes")
    return data


def _inner_messages(w: Walker, value, ctx, state: dict) -> None:
    """A legacy wrapper (codec in attributes): its value is a compressed message set; walk the inner messages
    in the inflated bytes (``space: "messages"``), each with its own CRC-32."""
    codec = ctx.attributes & K.CODEC_MASK
    if not codec or value.size == 0:
        return
    name = K.CODEC_NAMES.get(codec, codec)
    value.composite = True
    data = _inflated(w, value, codec, "messages")
    if data is None:
        state["unwalked"] = True
        return
    value.value = None
    value.note = f"a {name} message set: inner messages walked in the inflated bytes ({len(data)})"
    sub = Walker(data, 0, len(data), space="messages")
    found = []
    while sub.view.pos < len(data) and sub.broken is None:
        if len(found) >= WALK_LIMIT:
            state["unwalked"] = True
            value.note += f"; the walk stopped after {WALK_LIMIT} messages (`mqtool dump kafka --deep` reads them all)"
            break
        i = len(found)
        row = sub.add(f"messages[{i}]", sub.view.pos, 0, value.depth + 1, raw=False, composite=True)
        m = sub.walk(K.LegacyMessage, depth=value.depth + 2, prefix=f"messages[{i}]")
        row.size = sub.view.pos - row.position
        sub._keep_raw(row)
        if m is None:
            break
        crc = next(f for f in sub.fields if f.path == f"messages[{i}].crc")
        actual = zlib.crc32(memoryview(data)[row.position + K.LEGACY_MAGIC_OFFSET:row.end]) & 0xFFFFFFFF
        crc.check(actual == m.crc, actual, m.crc, "kafka.inner-crc-mismatch")
        found.append((row, m.offset))
    last_inner = found[-1][1] if found else 0
    for row, inner in found:              # magic 1: inner offsets count back from the wrapper's
        off = inner if ctx.magic == 0 else ctx.offset - last_inner + inner
        state.setdefault("first_inner", off)
        row.value = f"offset {off}"
        if state["target"] is not None and off == state["target"]:
            row.target = True
            state["marked"] = True
    w.fields.extend(sub.fields)
    if sub.broken is not None and w.broken is None:
        w.broken = sub.broken


def _attributes_text(a: int, legacy: bool) -> str:
    parts = [K.CODEC_NAMES.get(a & K.CODEC_MASK, f"codec {a & K.CODEC_MASK}")]
    if legacy:
        if a & K.LEGACY_TIMESTAMP_TYPE_MASK:
            parts.append("LogAppendTime")
        return ", ".join(parts)
    parts.append("LogAppendTime" if a & K.TIMESTAMP_TYPE_MASK else "CreateTime")
    for bit, name in ((K.TRANSACTIONAL_FLAG_MASK, "transactional"), (K.CONTROL_FLAG_MASK, "control"),
                      (K.DELETE_HORIZON_FLAG_MASK, "delete horizon")):
        if a & bit:
            parts.append(name)
    return ", ".join(parts)
