"""Decoded RocketMQ commitlog records and the per-record decoder.

The hot path unpacks the fixed part of a unit with a ``struct.Struct`` derived from
:data:`formats.rocketmq.MessageV1` (IPv4 born/store hosts); any other variant (IPv6 hosts) goes through the
construct schema itself. Properties, body, decompression and host strings are computed only when asked for.
"""
from __future__ import annotations

import zlib
from functools import lru_cache

from construct import ConstructError

from formats import rocketmq as F
from formats.common import format_host
from mqtool import codecs
from mqtool.schema_struct import fixed_prefix_format

# Fixed part of a v1/v2 unit with IPv4 hosts: TOTALSIZE .. BODYLENGTH (88 bytes), derived from the schema.
FIXED, FIXED_NAMES = fixed_prefix_format(F.MessageV1, stop_before="BODY")
FIXED_SIZE = FIXED.size
_unpack_fixed = FIXED.unpack_from
assert FIXED_NAMES[-1] == "BODYLENGTH" and FIXED_SIZE == 88, (FIXED_NAMES, FIXED_SIZE)
PREFIX = __import__("struct").Struct(">ii")
_unpack_prefix = PREFIX.unpack_from
_HOST_V6_FLAGS = F.BORNHOST_V6_FLAG | F.STOREHOSTADDRESS_V6_FLAG


@lru_cache(maxsize=4096)
def _host(addr: bytes, port: int) -> str:
    return format_host(addr, port)


class Message:
    """One message unit, with where it came from (``file``, ``position`` in file, global ``offset``)."""

    __slots__ = ("file", "position", "offset", "size", "version", "body_crc", "queue_id", "flag",
                 "queue_offset", "physical_offset", "sys_flag", "born_timestamp", "_born_host",
                 "store_timestamp", "_store_host", "reconsume_times", "prepared_transaction_offset",
                 "body_start", "body_len", "topic_raw", "props_raw", "_buf", "_pairs", "crc_ok")

    kind = "message"

    @property
    def born_host(self) -> str:
        h = self._born_host
        return h if isinstance(h, str) else _host(*h)

    @property
    def store_host(self) -> str:
        h = self._store_host
        return h if isinstance(h, str) else _host(*h)

    @property
    def store_host_raw(self) -> tuple[bytes, int]:
        h = self._store_host
        if isinstance(h, str):
            from formats.common import parse_host
            return parse_host(h)
        return h

    @property
    def topic(self) -> str:
        return self.topic_raw.decode("utf-8", errors="replace")

    @property
    def stored_body(self) -> bytes:
        return bytes(self._buf[self.body_start:self.body_start + self.body_len])

    @property
    def compression(self) -> str | None:
        if not self.sys_flag & F.COMPRESSED_FLAG:
            return None
        return F.COMPRESSION_TYPES.get((self.sys_flag & F.COMPRESSION_TYPE_MASK) >> 8, "unknown")

    def body(self, max_size: int = 64 * 1024 * 1024) -> bytes:
        """The body as the producer sent it (decompressed when the sysFlag says so)."""
        data = self.stored_body
        c = self.compression
        if c is None:
            return data
        return codecs.decompress(c, data, max_size)

    @property
    def transaction(self) -> str | None:
        return F.TRANSACTION_NAMES[self.sys_flag & F.TRANSACTION_MASK]

    @property
    def property_pairs(self) -> list[tuple[str, str]]:
        p = self._pairs
        if p is None:
            p = self._pairs = F.string_to_property_pairs(self.props_raw.decode("utf-8", errors="replace"))
        return p

    @property
    def properties(self) -> dict[str, str]:
        """Name → value; for a repeated name the last one wins (as the broker does)."""
        return dict(self.property_pairs)

    def prop(self, name: str) -> str | None:
        v = None
        for k, val in self.property_pairs:
            if k == name:
                v = val
        return v

    @property
    def keys(self) -> list[str]:
        k = self.prop(F.PROPERTY_KEYS)
        return [t for t in k.split(F.KEY_SEPARATOR) if t] if k else []

    @property
    def tags(self) -> str | None:
        return self.prop(F.PROPERTY_TAGS)

    @property
    def uniq_key(self) -> str | None:
        return self.prop(F.PROPERTY_UNIQ_KEY)

    @property
    def msg_id(self) -> str:
        """offsetMsgId: store host address + port + PHYSICALOFFSET, upper-case hex."""
        addr, port = self.store_host_raw
        return (addr + port.to_bytes(4, "big", signed=True)
                + self.physical_offset.to_bytes(8, "big", signed=True)).hex().upper()

    def to_row(self, body_mode: str = "none") -> dict:
        from mqtool.common import encode_body

        row = {
            "kind": "message", "file": self.file, "position": self.position, "offset": self.offset,
            "size": self.size, "magic": self.version, "body_crc": self.body_crc, "crc_ok": self.crc_ok,
            "queue_id": self.queue_id, "flag": self.flag, "queue_offset": self.queue_offset,
            "physical_offset": self.physical_offset, "sys_flag": self.sys_flag, "transaction": self.transaction,
            "born_timestamp": self.born_timestamp, "born_host": self.born_host,
            "store_timestamp": self.store_timestamp, "store_host": self.store_host,
            "reconsume_times": self.reconsume_times,
            "prepared_transaction_offset": self.prepared_transaction_offset,
            "topic": self.topic, "properties": self.properties, "keys": self.keys, "tags": self.tags,
            "uniq_key": self.uniq_key, "msg_id": self.msg_id, "body_size": self.body_len,
            "compression": self.compression,
        }
        pairs = self.property_pairs
        if len(pairs) != len(row["properties"]):
            row["property_pairs"] = [list(p) for p in pairs]   # keep duplicated names for the record
        if body_mode != "none":
            try:
                row["body"] = encode_body(self.body(), body_mode)
            except codecs.CodecError as e:
                row["body"] = None
                row["body_error"] = str(e)
        return row


class Blank:
    """BLANK end-of-file unit."""

    __slots__ = ("file", "position", "offset", "size")
    kind = "blank"

    def __init__(self, file, position, offset, size):
        self.file, self.position, self.offset, self.size = file, position, offset, size

    def to_row(self, body_mode: str = "none") -> dict:
        return {"kind": "blank", "file": self.file, "position": self.position, "offset": self.offset,
                "size": self.size}


class DecodeFailure(Exception):
    """Internal: a unit cannot be framed at this position (``code`` is a finding code)."""

    def __init__(self, code: str, message: str, expected=None, actual=None):
        super().__init__(message)
        self.code, self.message, self.expected, self.actual = code, message, expected, actual


def decode_message(buf, pos: int, end: int, base: int, file: str, max_size: int, check_crc: bool = True,
                   crc_view=None) -> Message:
    """Decode the unit at ``buf[pos]`` (must not extend past ``end``). Raises :class:`DecodeFailure`.

    Bounds are checked before anything is sliced; a body CRC mismatch does not fail the decode (``crc_ok``).
    """
    left = end - pos
    if left < 8:
        raise DecodeFailure("truncated-record", f"{left} bytes left, a unit needs at least 8")
    total, magic = _unpack_prefix(buf, pos)
    version = F.MAGIC_VERSION.get(magic)
    if version is None:
        raise DecodeFailure("bad-magic", f"illegal magic code 0x{magic & 0xFFFFFFFF:08X}",
                            "0xDAA320A7|0xDAA320AB|0xCBD43194", f"0x{magic & 0xFFFFFFFF:08X}")
    if total < F.MIN_MESSAGE_SIZE:
        raise DecodeFailure("bad-size", f"TOTALSIZE {total} below the minimum unit {F.MIN_MESSAGE_SIZE}",
                            f">={F.MIN_MESSAGE_SIZE}", total)
    if total > left:
        raise DecodeFailure("truncated-record", f"TOTALSIZE {total} runs past the end of data ({left} bytes left)",
                            f"<={left}", total)
    if total > max_size:
        raise DecodeFailure("bad-size", f"TOTALSIZE {total} exceeds the max message size {max_size}",
                            f"<={max_size}", total)
    m = Message()
    sys_flag = _unpack_prefix(buf, pos + 32)[1]
    if not sys_flag & _HOST_V6_FLAGS:
        (_, _, m.body_crc, m.queue_id, m.flag, m.queue_offset, m.physical_offset, m.sys_flag,
         m.born_timestamp, baddr, bport, m.store_timestamp, saddr, sport, m.reconsume_times,
         m.prepared_transaction_offset, body_len) = _unpack_fixed(buf, pos)
        m._born_host = (baddr, bport)
        m._store_host = (saddr, sport)
        p = pos + FIXED_SIZE
    else:
        p = _decode_fixed_slow(m, buf, pos, total, version)
        body_len = m.body_len
    if body_len < 0 or p + body_len > pos + total:
        raise DecodeFailure("bad-length-field", f"BODYLENGTH {body_len} does not fit in TOTALSIZE {total}",
                            f"<={pos + total - p}", body_len)
    m.body_start = p
    m.body_len = body_len
    p += body_len
    if version == "v1":
        if p + 1 > pos + total:
            raise DecodeFailure("bad-length-field", "topic length runs past TOTALSIZE")
        tl = buf[p] - 256 if buf[p] > 127 else buf[p]
        p += 1
    else:
        if p + 2 > pos + total:
            raise DecodeFailure("bad-length-field", "topic length runs past TOTALSIZE")
        tl = int.from_bytes(buf[p:p + 2], "big", signed=True)
        p += 2
    if tl < 0 or p + tl + 2 > pos + total:
        raise DecodeFailure("bad-length-field", f"TOPICLENGTH {tl} does not fit in TOTALSIZE {total}",
                            f"<={pos + total - p - 2}", tl)
    m.topic_raw = bytes(buf[p:p + tl])
    p += tl
    pl = int.from_bytes(buf[p:p + 2], "big", signed=True)
    p += 2
    if pl < 0 or p + pl > pos + total:
        raise DecodeFailure("bad-length-field", f"PROPERTIESLENGTH {pl} does not fit in TOTALSIZE {total}",
                            f"<={pos + total - p}", pl)
    m.props_raw = bytes(buf[p:p + pl])
    p += pl
    expected = F.calc_msg_length(version, m.sys_flag, body_len, tl, pl)
    if expected != total or p != pos + total:
        raise DecodeFailure("size-mismatch", f"TOTALSIZE {total} differs from the length computed from the "
                            f"fields ({expected})", expected, total)
    m.file = file
    m.position = pos
    m.offset = base + pos
    m.size = total
    m.version = version
    m._buf = buf
    m._pairs = None
    if check_crc:
        view = crc_view if crc_view is not None else buf
        m.crc_ok = (zlib.crc32(view[m.body_start:m.body_start + body_len]) & 0x7FFFFFFF) == m.body_crc
    else:
        m.crc_ok = None
    return m


def _decode_fixed_slow(m: Message, buf, pos: int, total: int, version: str) -> int:
    """IPv6 variants: parse the header with the construct schema itself. Returns the body start."""
    schema = F.MESSAGE_SCHEMAS[version]
    # Parse only the fixed fields: give construct the unit bytes (bounded by TOTALSIZE already checked).
    try:
        c = schema.parse(bytes(buf[pos:pos + total]))
    except ConstructError as e:
        raise DecodeFailure("bad-length-field", f"header does not parse: {e}") from None
    m.body_crc, m.queue_id, m.flag = c.BODYCRC, c.QUEUEID, c.FLAG
    m.queue_offset, m.physical_offset, m.sys_flag = c.QUEUEOFFSET, c.PHYSICALOFFSET, c.SYSFLAG
    m.born_timestamp, m._born_host = c.BORNTIMESTAMP, c.BORNHOST
    m.store_timestamp, m._store_host = c.STORETIMESTAMP, c.STOREHOSTADDRESS
    m.reconsume_times, m.prepared_transaction_offset = c.RECONSUMETIMES, c.PREPAREDTRANSACTIONOFFSET
    m.body_len = c.BODYLENGTH
    bh = 20 if m.sys_flag & F.BORNHOST_V6_FLAG else 8
    sh = 20 if m.sys_flag & F.STOREHOSTADDRESS_V6_FLAG else 8
    return pos + 4 * 5 + 8 + 8 + 4 + 8 + bh + 8 + sh + 4 + 8 + 4
