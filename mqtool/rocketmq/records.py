"""Decoded RocketMQ commitlog records and the per-record decoder.

The hot path unpacks the fixed part of a unit with :data:`layout.FIXED` (derived from
:data:`formats.rocketmq.MessageV1`, IPv4 born/store hosts) and frames the tail with :func:`layout.frame_tail`;
any other variant (IPv6 hosts) goes through the construct schema itself. Properties, body, decompression and
host strings are computed only when asked for.
"""
from __future__ import annotations

import mmap
import struct
import zlib
from functools import lru_cache


from formats import rocketmq as F
from formats import common as FC      # its functions load the real module when called
from mqtool import codecs
from mqtool.common import put_body, put_text
from mqtool.fastcrc import crc32
from mqtool.rocketmq.layout import (FIXED, FIXED_NAMES, FIXED_SIZE, HOST_V6_FLAGS, MAGIC_TOPIC_LENGTH_SIZE, PREFIX,
                                    TOPIC_LENGTH_SIZE, DecodeFailure, body_start, frame_tail, head_format,
                                    narrow, property_dict, property_pairs)

__all__ = ["FIXED", "FIXED_NAMES", "FIXED_SIZE", "PREFIX", "DecodeFailure", "property_dict", "property_pairs",
           "Message", "Blank", "decode_message", "decode_common"]
_unpack_fixed = FIXED.unpack_from
_unpack_prefix = PREFIX.unpack_from
_unpack_sys_flag = narrow(["SYSFLAG"]).unpack_from      # (needs the whole fixed part: TOTALSIZE >= it is checked)
_HOST_V6_FLAGS = HOST_V6_FLAGS
_TL_SIZE = MAGIC_TOPIC_LENGTH_SIZE
_MAGIC_V1, _MAGIC_V2 = F.MESSAGE_MAGIC_CODE_V1, F.MESSAGE_MAGIC_CODE_V2
_MIN_SIZE = F.MIN_MESSAGE_SIZE
_PORT_OFFSET = struct.Struct(">iq")       # msgId tail: store port (int32) + PHYSICALOFFSET (int64)
_new = object.__new__
_SLICES_TO_BYTES = (bytes, mmap.mmap)     # buffers whose slices are bytes (others take the careful path)


_KEYS, _TAGS, _UNIQ, _KEY_SEP = F.PROPERTY_KEYS, F.PROPERTY_TAGS, F.PROPERTY_UNIQ_KEY, F.KEY_SEPARATOR
_TXN_NAMES, _TXN_MASK = F.TRANSACTION_NAMES, F.TRANSACTION_MASK


@lru_cache(maxsize=4096)
def _host(addr: bytes, port: int) -> str:
    return FC.format_host(addr, port)


@lru_cache(maxsize=4096)
def _msgid_prefix(addr: bytes, port: int) -> str:
    return (addr + port.to_bytes(4, "big", signed=True)).hex().upper()


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
            p = self._pairs = property_pairs(self.props_raw.decode("utf-8", errors="replace"))
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
        """The UNIQ_KEY the broker reads (the last one: a batch item's is its batch's)."""
        return self.prop(F.PROPERTY_UNIQ_KEY)

    @property
    def uniq_keys(self) -> list[str]:
        """Every UNIQ_KEY, in stored order. A plain batch's item carries its own id (the one its producer was
        given) and then the batch's, appended by the broker with the batch's properties."""
        return [v for k, v in self.property_pairs if k == F.PROPERTY_UNIQ_KEY]

    @property
    def msg_id(self) -> str:
        """offsetMsgId: store host address + port + PHYSICALOFFSET, upper-case hex."""
        addr, port = self.store_host_raw
        phys = self.physical_offset
        if phys >= 0:
            return _msgid_prefix(addr, port) + f"{phys:016X}"
        return (addr + _PORT_OFFSET.pack(port, phys)).hex().upper()

    def to_row(self, body_mode: str = "none") -> dict:
        """The dump row: the keys of ``mqtool.rocketmq.rows.MESSAGE``, in its order."""
        pairs = self._pairs
        try:
            props_text, props_lossless = self.props_raw.decode("utf-8"), True
        except UnicodeDecodeError:
            props_text, props_lossless = self.props_raw.decode("utf-8", errors="replace"), False
        if pairs is None:        # straight to the dict; the pair list only when a name repeats
            props, n = property_dict(props_text)
            pairs = self.property_pairs if n != len(props) else props
        else:
            props = dict(pairs)
        k = props.get(_KEYS)
        sys_flag = self.sys_flag
        bh, sh = self._born_host, self._store_host
        row = {
            "kind": "message", "file": self.file, "position": self.position, "offset": self.offset,
            "size": self.size, "magic": self.version, "body_crc": self.body_crc, "crc_ok": self.crc_ok,
            "queue_id": self.queue_id, "flag": self.flag, "queue_offset": self.queue_offset,
            "physical_offset": self.physical_offset, "sys_flag": sys_flag,
            "transaction": _TXN_NAMES[sys_flag & _TXN_MASK],
            "born_timestamp": self.born_timestamp, "born_host": bh if isinstance(bh, str) else _host(*bh),
            "store_timestamp": self.store_timestamp, "store_host": sh if isinstance(sh, str) else _host(*sh),
            "reconsume_times": self.reconsume_times,
            "prepared_transaction_offset": self.prepared_transaction_offset,
            "topic": None, "properties": props,
            "keys": [t for t in k.split(_KEY_SEP) if t] if k else [], "tags": props.get(_TAGS),
            "uniq_key": props.get(_UNIQ),
            "msg_id": _msgid_prefix(*sh) + f"{self.physical_offset:016X}"
            if self.physical_offset >= 0 and not isinstance(sh, str) else self.msg_id,
            "body_size": self.body_len,
            "compression": self.compression if sys_flag & F.COMPRESSED_FLAG else None,
        }
        if len(pairs) != len(props):
            row["property_pairs"] = [list(p) for p in pairs]   # keep duplicated names for the record
        put_text(row, "topic", self.topic_raw)
        if not props_lossless:      # the dict above is for reading; the exact bytes are here
            put_text(row, "properties_raw", self.props_raw)
        if body_mode != "none":
            try:
                put_body(row, "body", self.body(), body_mode)
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
        """The dump row: the keys of ``mqtool.rocketmq.rows.BLANK``."""
        return {"kind": "blank", "file": self.file, "position": self.position, "offset": self.offset,
                "size": self.size}


#: the whole-message CRC property as it ends the properties: name and separator (its value follows)
CRC_TAG = (F.PROPERTY_CRC32 + F.NAME_VALUE_SEPARATOR).encode()


def prop_crc_digits(m: Message) -> bytes | None:
    """The stored ``__CRC32#`` value of a unit (its 10 digits, when it is well formed), or None when its
    properties do not end with one."""
    if CRC_TAG not in m.props_raw[-F.CRC32_RESERVED_LEN:]:
        return None
    return m.props_raw[-11:-1]


def unit_damage(m: Message) -> list | tuple:
    """What shows that a unit's bytes are not what the broker wrote, as (code, text, expected, actual) tuples:
    the body CRC fails; or it holds and the compressed body still does not inflate (the CRC covers the stored
    bytes); the whole-message CRC (``__CRC32#``) fails. Each is damage of the whole unit
    ``[offset, offset + size)``, as verify's findings and ``info``'s damaged ranges both count it."""
    if m.crc_ok and not m.sys_flag & F.COMPRESSED_FLAG and CRC_TAG not in m.props_raw[-F.CRC32_RESERVED_LEN:]:
        return ()                         # (the common unit: nothing more to look at)
    out = []
    if not m.crc_ok:
        out.append(("crc-mismatch", f"body CRC mismatch (topic {m.topic}, queue {m.queue_id}, queue offset "
                    f"{m.queue_offset})", m.body_crc, zlib.crc32(m.stored_body) & 0x7FFFFFFF))
    elif m.sys_flag & F.COMPRESSED_FLAG:
        try:
            codecs.check_inflates(m.compression, m._buf[m.body_start:m.body_start + m.body_len])
        except codecs.CodecError as e:
            out.append(("body-inflate-failed", f"{m.compression} body does not inflate ({e}; topic {m.topic}, "
                        f"queue {m.queue_id}, queue offset {m.queue_offset})", m.compression, str(e)))
    digits = prop_crc_digits(m)
    if digits is not None and digits.isdigit():
        stored = F.decode_prop_crc(digits.decode())
        actual = zlib.crc32(bytes(m._buf[m.position:m.position + m.size - F.CRC32_RESERVED_LEN])) & 0x7FFFFFFF
        if stored != actual:
            out.append(("prop-crc-mismatch", "whole-message CRC (__CRC32# property) mismatch: header or "
                        "properties changed", stored, actual))
    return out


def decode_message(buf, pos: int, end: int, base: int, file: str, max_size: int, check_crc: bool = True,
                   crc_view=None) -> Message:
    """Decode the unit at ``buf[pos]`` (must not extend past ``end``). Raises :class:`DecodeFailure`.

    Bounds are checked before anything is sliced; a body CRC mismatch does not fail the decode (``crc_ok``).
    The common case goes through :func:`decode_common`; anything else, including every failure, through
    :func:`_decode_checked`, which gives the precise reason.
    """
    m = decode_common(buf, pos, end, base, file, max_size, check_crc, crc_view)
    if m is None:
        return _decode_checked(buf, pos, end, base, file, max_size, check_crc, crc_view)
    return m


def decode_common(buf, pos: int, end: int, base: int, file: str, max_size: int, check_crc: bool = True,
                  crc_view=None) -> Message | None:
    """The common unit (v1/v2 magic, IPv4 hosts, every length consistent, a ``bytes``/``mmap`` buffer) with one
    unpack of the schema-derived :data:`FIXED` and integer compares before any slice; None for anything else
    (never raises: the caller takes the careful path)."""
    if end - pos >= FIXED_SIZE and type(buf) in _SLICES_TO_BYTES:
        (total, magic, body_crc, queue_id, flag, queue_offset, physical_offset, sys_flag, born_ts, baddr, bport,
         store_ts, saddr, sport, reconsume, prepared, body_len) = _unpack_fixed(buf, pos)
        stop = pos + total
        if (magic == _MAGIC_V1 or magic == _MAGIC_V2) and _MIN_SIZE <= total <= end - pos \
                and total <= max_size and not sys_flag & _HOST_V6_FLAGS and body_len >= 0:
            try:
                tp, tl, pp = frame_tail(buf, pos, pos + FIXED_SIZE + body_len, stop, _TL_SIZE[magic])
            except DecodeFailure:
                return None
            version = "v1" if magic == _MAGIC_V1 else "v2"
            m = _new(Message)
            m.size, m.body_crc, m.queue_id, m.flag = total, body_crc, queue_id, flag
            m.queue_offset, m.physical_offset, m.sys_flag = queue_offset, physical_offset, sys_flag
            m.born_timestamp, m._born_host, m.store_timestamp = born_ts, (baddr, bport), store_ts
            m._store_host, m.reconsume_times, m.prepared_transaction_offset = (saddr, sport), reconsume, \
                prepared
            m.body_start = bs = pos + FIXED_SIZE
            m.body_len = body_len
            m.topic_raw = buf[tp:tp + tl]
            m.props_raw = buf[pp:stop]
            m.file, m.position, m.offset, m.version, m._buf, m._pairs = file, pos, base + pos, version, \
                buf, None
            if check_crc:
                m.crc_ok = (crc32((crc_view if crc_view is not None else buf)[bs:bs + body_len])
                            & 0x7FFFFFFF) == body_crc
            else:
                m.crc_ok = None
            return m
    return None


def _decode_checked(buf, pos: int, end: int, base: int, file: str, max_size: int, check_crc: bool,
                    crc_view) -> Message:
    """The careful decoder: every rule checked in order, with the precise failure; IPv6 hosts via construct."""
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
    sys_flag = _unpack_sys_flag(buf, pos)[0]
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
    stop = pos + total
    tp, tl, pp = frame_tail(buf, pos, p + body_len, stop, TOPIC_LENGTH_SIZE[version])
    m.topic_raw = bytes(buf[tp:tp + tl])
    m.props_raw = bytes(buf[pp:stop])
    m.file = file
    m.position = pos
    m.offset = base + pos
    m.size = total
    m.version = version
    m._buf = buf
    m._pairs = None
    if check_crc:
        view = crc_view if crc_view is not None else buf
        m.crc_ok = (crc32(view[m.body_start:m.body_start + body_len]) & 0x7FFFFFFF) == m.body_crc
    else:
        m.crc_ok = None
    return m


def _schema_parses_tail(buf, pos: int, p: int, stop: int, tl_size: int) -> bool:
    """Whether the schema parses the tail from ``p`` (every length non-negative and inside the unit): the
    framing rule holds but for TOTALSIZE equality, which the schema does not check."""
    try:
        frame_tail(buf, pos, p, stop, tl_size)
    except DecodeFailure as e:
        return e.code == "size-mismatch"
    return True


def _decode_fixed_slow(m: Message, buf, pos: int, total: int, version: str) -> int:
    """IPv6 variants: the fixed part by the struct derived for this host variant (:func:`layout.head_format`);
    a unit the schema itself would not parse (a length that is negative or does not fit) is parsed with the
    construct schema, for its exact error. Returns the body start."""
    head = head_format(_unpack_sys_flag(buf, pos)[0], version)
    stop = pos + total
    if head.size <= total:
        (_, _, body_crc, queue_id, flag, queue_offset, physical_offset, sys_flag, born_ts, baddr, bport, store_ts,
         saddr, sport, reconsume, prepared, body_len) = head.unpack_from(buf, pos)
        p = pos + head.size
        if 0 <= body_len <= stop - p and _schema_parses_tail(buf, pos, p + body_len, stop, TOPIC_LENGTH_SIZE[version]):
            m.body_crc, m.queue_id, m.flag, m.queue_offset = body_crc, queue_id, flag, queue_offset
            m.physical_offset, m.sys_flag, m.born_timestamp, m._born_host = physical_offset, sys_flag, born_ts, \
                (baddr, bport)
            m.store_timestamp, m._store_host, m.reconsume_times = store_ts, (saddr, sport), reconsume
            m.prepared_transaction_offset, m.body_len = prepared, body_len
            return p
    schema = F.MESSAGE_SCHEMAS[version]
    # Parse only the fixed fields: give construct the unit bytes (bounded by TOTALSIZE already checked).
    from construct import ConstructError

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
    return pos + body_start(m.sys_flag, version)
