"""``mqtool inspect`` for LiteMQ: one commitlog record field by field, from :mod:`formats.litemq` ``Record``.

A record is ``[u32 length][Message]`` with no CRC: the checks are the length prefix against the bytes left and
against the bytes the fields use, the magic, the six trailing bytes LiteMQ never writes (zero), and the
stored CommitLogOffset / StoreSize (always 0 in broker-written records; when set they must be right). Each
string, tag, key and property is a nested field with its own length.
"""
from __future__ import annotations

from pathlib import Path

from formats import litemq as F
from mqtool.errors import UsageError
from mqtool.io import map_input
from mqtool.litemq.store import commitlog_segments, resolve, segment_index
from mqtool.schemawalk import Inspection, Walker


def inspect(path, offset: int | None = None, position: int | None = None) -> Inspection:
    """The record at global commitlog ``offset`` of the store at ``path``, or at byte ``position`` of the
    commitlog file ``path``."""
    p = Path(path)
    if position is not None:
        if not p.is_file():
            raise UsageError("--position needs a file (a commitlog file); give a store with --offset", str(p))
        segs, _ = commitlog_segments(resolve(p)) if segment_index(p.name) is not None else ([], 0)
        base = segs[0].base if len(segs) == 1 else None
        with map_input(p, ranged=True) as mi:       # a remote file: the record's bytes only (need_unit)
            if position >= len(mi.buf):
                raise UsageError(f"position {position} is beyond the end of the file ({len(mi.buf)} bytes)", str(p))
            mi.need_unit(position, extra=4, cap=len(mi.buf) - position)
            return inspect_record(mi.buf, position, str(p), base)
    segs, _ = commitlog_segments(resolve(p))
    if not segs:
        raise UsageError("no commitlog files found", str(p))
    for s in segs:
        if s.base <= offset < s.base + s.size:
            with map_input(s.path, ranged=True) as mi:      # a remote file: the record's bytes only
                mi.need_unit(offset - s.base, extra=4, cap=len(mi.buf) - (offset - s.base))
                return inspect_record(mi.buf, offset - s.base, str(s.path), s.base)
    last = max(s.base + s.size for s in segs)
    if offset >= last:
        raise UsageError(f"offset {offset} is beyond the end of the commitlog (last byte {last - 1})", str(p))
    raise UsageError(f"no commitlog file holds offset {offset} (a file is missing)", str(p))


def inspect_record(buf, pos: int, file: str, base: int | None) -> Inspection:
    n = len(buf)
    ins = Inspection("litemq", file, pos, None if base is None else base + pos, "record", 0)
    w = Walker(buf, pos, n)
    obj = w.walk(F.Record)
    ins.fields, ins.broken = w.fields, w.broken
    by = {f.path: f for f in w.fields}
    length = by.get("length")
    if length is not None and isinstance(length.value, int):
        left = n - pos - F.LENGTH_PREFIX
        if length.value == 0:
            length.note = "length 0: the end of the data (zero fill)"
        if length.value > left:
            length.check(False, f"<={left}", length.value, "bad-length", "runs past the end of the file")
        elif length.ok is False:
            length.code = "length-mismatch"
    if "magic" in by:
        by["magic"].code = "bad-magic"
        if isinstance(by["magic"].value, int):
            by["magic"].value = f"0x{by['magic'].value:08X}"
    pad = by.get("Padding")
    if pad is not None and pad.ok is None:
        zero = bytes(pad.size)
        pad.check(pad.value == zero, zero.hex(), (pad.value or b"").hex(), "padding-not-zero")
    if obj is not None and base is not None:
        cl = by.get("CommitLogOffset")
        if cl is not None:
            cl.check(cl.value in (0, base + pos), f"0|{base + pos}", cl.value, "commitlog-offset-mismatch")
        ss = by.get("StoreSize")
        size = F.LENGTH_PREFIX + length.value
        if ss is not None:
            ss.check(ss.value in (0, size), f"0|{size}", ss.value, "store-size-mismatch")
    body = by.get("Body.data")
    if body is not None and isinstance(body.value, bytes):
        body.value = by["Body"].value = body.value.decode("utf-8", errors="backslashreplace")
    framed = length is not None and isinstance(length.value, int) and length.value <= n - pos - F.LENGTH_PREFIX
    ins.keep_span(buf, pos + F.LENGTH_PREFIX + length.value if framed and length.value
                  else max((f.end for f in w.fields), default=pos))
    if obj is not None:
        ins.summary = {"topic": obj.Topic, "queue_id": obj.QueueID, "message_id": obj.MessageID,
                       "tags": list(obj.Tags), "keys": list(obj.Keys),
                       "type": F.MESSAGE_TYPES.get(obj.MessageType), "body_size": len(obj.Body) if isinstance(
                           obj.Body, bytes) else by["Body.length"].value,
                       "store_timestamp": obj.StoreTimestamp}
    return ins
