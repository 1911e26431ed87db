"""``mqtool inspect`` for RocketMQ: one commitlog unit field by field, from :mod:`formats.rocketmq`.

The unit is walked with the schema its magic names (v1, v2 or the BLANK end-of-file unit;
:class:`mqtool.schemawalk.Walker`); then the checks ``verify`` makes on a unit are set on the fields they
concern, each with the finding code ``verify`` would give: TOTALSIZE against the bytes left and against the length
the fields give, the magic, BODYCRC, PHYSICALOFFSET against where the unit is, whether a compressed body
inflates, the property framing (each pair as a nested field) and the ``__CRC32#`` whole-message CRC.
"""
from __future__ import annotations

import zlib
from pathlib import Path

from formats import rocketmq as F
from mqtool import codecs
from mqtool.common import is_segment_name
from mqtool.errors import UsageError
from mqtool.io import map_input
from mqtool.rocketmq.layout import PREFIX
from mqtool.rocketmq.records import CRC_TAG as _CRC_TAG
from mqtool.rocketmq.store import Segment, forced_commitlog, open_store
from mqtool.schemawalk import Inspection, Walker

_SCHEMA = {F.MESSAGE_MAGIC_CODE_V1: F.MessageV1, F.MESSAGE_MAGIC_CODE_V2: F.MessageV2,
           F.BLANK_MAGIC_CODE: F.BlankUnit}
_MAGICS = "|".join(f"0x{m & 0xFFFFFFFF:08X}" for m in _SCHEMA)
#: a compressed body is inflated (to prove it reads, in bounded memory) only up to this stored size
INFLATE_INPUT_LIMIT = 64 * 1024 * 1024


def inspect(path, offset: int | None = None, position: int | None = None) -> Inspection:
    """The unit at global ``offset`` of the store (or commitlog dir / segment) at ``path``, or at byte
    ``position`` of the file ``path``. UsageError when no file holds it."""
    seg, pos = _locate(path, offset, position)
    with map_input(seg.path, ranged=True) as mi:
        mi.need_unit(pos)       # a remote file: fetch the chunks of this unit only
        return inspect_unit(mi.buf, pos, seg.path, seg.base if _named(seg) else None)


def _named(seg: Segment) -> bool:
    return is_segment_name(seg.name)


def _locate(path, offset, position) -> tuple[Segment, int]:
    p = Path(path)
    if position is not None:
        if not p.is_file():
            raise UsageError("--position needs a file (a commitlog segment); give a store with --offset", str(p))
        size = p.stat().st_size
        if position >= size:
            raise UsageError(f"position {position} is beyond the end of the file ({size} bytes)", str(p))
        base = int(p.name) if is_segment_name(p.name) else 0
        return Segment(str(p), p.name, base, size), position
    segs = forced_commitlog(open_store(path))
    if not segs:
        raise UsageError("no commitlog files found", str(p))
    for s in segs:
        if s.base <= offset < s.end:
            return s, offset - s.base
    holder = [s for s in segs if s.base <= offset]
    if not holder:
        raise UsageError(f"offset {offset} lies before the first commitlog file ({segs[0].name})", str(p))
    if offset >= segs[-1].end:
        raise UsageError(f"offset {offset} is beyond the end of the commitlog (last byte {segs[-1].end - 1})",
                         str(p))
    after = next(s for s in segs if s.base > offset)
    raise UsageError(f"no commitlog file holds offset {offset}: it falls between {holder[-1].name} (ends at "
                     f"{holder[-1].end}) and {after.name}", str(p))


def inspect_unit(buf, pos: int, file: str, base: int | None) -> Inspection:
    """Walk the unit at ``buf[pos]``; ``base`` is the global offset of byte 0 (None: unknown)."""
    n = len(buf)
    left = n - pos
    ins = Inspection("rocketmq", file, pos, None if base is None else base + pos, "message", 0)
    total = magic = None
    if left >= PREFIX.size:
        total, magic = PREFIX.unpack_from(buf, pos)
    schema = _SCHEMA.get(magic, F.MessageV1)
    ins.kind = "blank" if magic == F.BLANK_MAGIC_CODE else "message"
    framed = total is not None and (F.END_FILE_MIN_BLANK_LENGTH if ins.kind == "blank" else F.MIN_MESSAGE_SIZE) \
        <= total <= left
    end = pos + total if framed and ins.kind == "message" else pos + min(left, 8) if ins.kind == "blank" else n
    w = Walker(buf, pos, end, hooks={"PROPERTIES": _properties})
    obj = w.walk(schema)
    ins.fields, ins.broken = w.fields, w.broken
    if ins.broken is not None and framed and end < n and "left" in ins.broken.reason:
        ins.broken.reason += " inside TOTALSIZE"
        w.fields[-1].note = ins.broken.reason
    by = {f.path: f for f in w.fields}
    _check_size(by, ins, total, left, magic, obj)
    if "MAGICCODE" in by and magic is not None and magic not in _SCHEMA:
        by["MAGICCODE"].check(False, _MAGICS, f"0x{magic & 0xFFFFFFFF:08X}", "bad-magic")
    if "MAGICCODE" in by and magic in _SCHEMA:
        by["MAGICCODE"].value = f"0x{magic & 0xFFFFFFFF:08X} ({F.MAGIC_VERSION.get(magic, 'BLANK')})"
        by["MAGICCODE"].code = "bad-magic"
    if obj is not None or "BODY" in by:
        _check_body(buf, by, ins)
    if "PHYSICALOFFSET" in by and isinstance(by["PHYSICALOFFSET"].value, int):
        f = by["PHYSICALOFFSET"]
        if base is None:
            f.note = "the file name gives no base offset: not checked"
        else:
            f.check(f.value == base + pos, base + pos, f.value, "physical-offset-mismatch")
    if "SYSFLAG" in by:
        by["SYSFLAG"].note = _sysflag_text(by["SYSFLAG"].value)
    for name in ("TOPIC",):
        if name in by and isinstance(by[name].value, bytes):
            by[name].value = by[name].value.decode("utf-8", errors="backslashreplace")
    _prop_crc(buf, pos, by, obj)
    ins.keep_span(buf, pos + total if framed else max((f.end for f in w.fields), default=pos))
    if obj is not None and ins.kind == "message":
        pairs = [(f.name, f.value) for f in w.fields if f.path.startswith("PROPERTIES.")]
        props = dict(pairs)
        ins.summary = {"version": F.MAGIC_VERSION.get(magic), "topic": by["TOPIC"].value,
                       "queue_id": obj.QUEUEID, "queue_offset": obj.QUEUEOFFSET,
                       "keys": props.get(F.PROPERTY_KEYS), "tags": props.get(F.PROPERTY_TAGS),
                       "uniq_key": props.get(F.PROPERTY_UNIQ_KEY), "body_size": obj.BODYLENGTH,
                       "store_timestamp": obj.STORETIMESTAMP}
    return ins


def _check_size(by, ins: Inspection, total, left: int, magic, obj) -> None:
    f = by.get("TOTALSIZE")
    if f is None or total is None:
        return
    if ins.kind == "blank":
        f.check(total == left, left, total, "blank-size-mismatch", "a BLANK unit runs to the end of the segment")
        return
    if total < F.MIN_MESSAGE_SIZE:
        f.check(False, f">={F.MIN_MESSAGE_SIZE}", total, "bad-size")
    elif total > left:
        f.check(False, f"<={left}", total, "truncated-record", f"runs past the end of the file ({left} bytes left)")
    elif obj is not None:
        version = F.MAGIC_VERSION.get(magic, "v1")
        want = F.calc_msg_length(version, obj.SYSFLAG, obj.BODYLENGTH, obj.TOPICLENGTH, obj.PROPERTIESLENGTH)
        f.check(want == total, want, total, "size-mismatch", None if want == total else
                "TOTALSIZE differs from the length the fields give")
    else:
        f.check(True, f"<={left}", total)


def _check_body(buf, by, ins: Inspection) -> None:
    body, crc = by.get("BODY"), by.get("BODYCRC")
    if body is None or body.ok is False:
        return
    view = memoryview(buf)[body.position:body.end]
    if crc is not None:
        actual = zlib.crc32(view) & 0x7FFFFFFF
        crc.check(actual == crc.value, actual, crc.value, "crc-mismatch",
                  None if actual == crc.value else "BODYCRC is not the CRC of the body bytes")
    flag = by["SYSFLAG"].value if "SYSFLAG" in by else 0
    if flag & F.COMPRESSED_FLAG:
        codec = F.COMPRESSION_TYPES.get((flag & F.COMPRESSION_TYPE_MASK) >> 8, "unknown")
        if body.size > INFLATE_INPUT_LIMIT:
            body.note = f"{codec}-compressed, {body.size} bytes: too large to inflate here"
            return
        try:
            size = codecs.check_inflates(codec, view)
        except codecs.CodecError as e:
            body.check(False, f"{codec} stream", str(e), "body-inflate-failed")
        else:
            body.check(True, f"{codec} stream", f"inflates to {size} bytes")
            body.note = f"{codec}-compressed, {size} bytes inflated"
    elif isinstance(body.value, bytes):
        body.value = body.value.decode("utf-8", errors="backslashreplace")


def _properties(w: Walker, field, ctx) -> None:
    """Each ``name\\x01value\\x02`` pair of PROPERTIES as a nested field; a segment that is no pair fails."""
    raw = bytes(w.buf[field.position:field.end])
    field.composite = True
    at, pairs = field.position, 0
    for i, seg in enumerate(raw.split(F.PROPERTY_SEPARATOR.encode())):
        size = len(seg) + (at + len(seg) < field.end)        # the separator belongs to its pair
        if not seg and at + len(seg) >= field.end:
            break
        name, sep, value = seg.partition(F.NAME_VALUE_SEPARATOR.encode())
        text = name.decode("utf-8", errors="backslashreplace")
        f = w.add(f"PROPERTIES.{text}" if text and sep else f"PROPERTIES[{i}]", at, size, field.depth + 1,
                  value.decode("utf-8", errors="backslashreplace") if sep else None)
        if not (name and sep and value):
            f.check(False, "name\\x01value", seg.decode("utf-8", errors="backslashreplace"),
                    note="not a name\\x01value pair: the broker drops it")
        else:
            pairs += 1
        at += size
    field.value = f"{pairs} pairs"


def _prop_crc(buf, pos: int, by, obj) -> None:
    """The ``__CRC32#`` pair (when present at the end of PROPERTIES): CRC32 of the unit up to the pair."""
    f = by.get(f"PROPERTIES.{F.PROPERTY_CRC32}")
    props = by.get("PROPERTIES")
    if f is None or obj is None or props is None:
        return
    raw = bytes(buf[props.position:props.end])
    if _CRC_TAG not in raw[-F.CRC32_RESERVED_LEN:]:
        return
    digits = raw[-11:-1]
    if not digits.isdigit():
        f.check(False, "10 digits", digits.decode("latin-1"), "prop-crc-malformed")
        return
    stored = F.decode_prop_crc(digits.decode())
    actual = zlib.crc32(memoryview(buf)[pos:props.end - F.CRC32_RESERVED_LEN]) & 0x7FFFFFFF
    f.check(stored == actual, actual, stored, "prop-crc-mismatch")


_FLAGS = [(F.COMPRESSED_FLAG, "compressed"), (F.MULTI_TAGS_FLAG, "multi-tags"),
          (F.BORNHOST_V6_FLAG, "born host IPv6"), (F.STOREHOSTADDRESS_V6_FLAG, "store host IPv6"),
          (F.NEED_UNWRAP_FLAG, "need unwrap"), (F.INNER_BATCH_FLAG, "inner batch")]


def _sysflag_text(flag) -> str | None:
    if not isinstance(flag, int):
        return None
    parts = [name for bit, name in _FLAGS if flag & bit]
    tx = F.TRANSACTION_NAMES.get(flag & F.TRANSACTION_MASK)
    if tx:
        parts.append(f"transaction {tx}")
    if flag & F.COMPRESSION_TYPE_MASK:
        parts.append(F.COMPRESSION_TYPES.get((flag & F.COMPRESSION_TYPE_MASK) >> 8, "unknown"))
    return ", ".join(parts) or None
