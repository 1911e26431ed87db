"""Fast decoding of LiteMQ records, consumequeue entries and hashes.

The fixed-size runs of the message are decoded with the ``struct.Struct`` objects of :mod:`mqtool.litemq.layout`
(derived once from :mod:`formats.litemq`, the single source of truth); tests check this fast path against
the construct schema with hypothesis.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from formats import litemq as F
from mqtool.errors import DecodeError as _DecodeError
from mqtool.litemq.layout import ATTRS, ATTRS_NAMES, BORN, BORN_NAMES, COUNT, TAIL, TAIL_NAMES

_U32 = COUNT

STRING_FIELDS = ("MessageID", "Topic", "TransactionID", "ShardingKey", "BornHost", "StoreHost")


def fnv1a32(data: bytes) -> int:
    """FNV-1a 32-bit (offset basis 2166136261, prime 16777619)."""
    h = 0x811C9DC5
    for b in data:
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return h


def tag_hash(raw_tags) -> int:
    """Consumequeue tag hash: FNV-1a 32 over each tag followed by one 0x00 byte; 0 with no tags."""
    if not raw_tags:
        return 0
    return fnv1a32(b"".join(bytes(t) + b"\x00" for t in raw_tags))


def order_queue(sharding_key: str, queues: int = F.ORDER_QUEUE_COUNT) -> int:
    """Queue LiteMQ picks for an order message: h = h*31 + rune over the key (Go int64), abs(h % n)."""
    h = 0
    for ch in sharding_key:
        h = (h * 31 + ord(ch)) & 0xFFFFFFFFFFFFFFFF
    if h >= 1 << 63:
        h -= 1 << 64
    r = abs(h) % queues  # Go: remainder keeps the dividend's sign, then abs
    return r


class DecodeError(_DecodeError):
    """A length inside the message runs past the record (field name and in-record offset)."""

    def __init__(self, field_name: str, at: int, need: int, left: int):
        super().__init__(f"{field_name}: needs {need} bytes at +{at}, {left} left in the record")
        self.field = field_name
        self.at = at


@dataclass(eq=False, slots=True)
class LiteRecord:
    """One decoded commitlog record and where it came from."""

    file: str
    position: int            # of the length prefix, in the file
    offset: int              # global commitlog offset (file index * file size + position)
    length: int              # the u32 prefix value (excludes the prefix itself)
    m: dict                  # Go field names -> values (strings decoded, replacement chars if bad)
    raw_tags: list
    raw_keys: list
    consumed: int            # bytes the fields used (length == consumed + 6 when sound)
    padding: bytes
    bad_utf8: tuple = ()
    state: str = "live"      # live | stale | after-gap
    body_slice: tuple = (0, 0)   # (start, end) in the file, for --body
    body: bytes | None = None    # filled only when asked for

    @property
    def size(self) -> int:
        return self.length + F.LENGTH_PREFIX

    @property
    def stale(self) -> bool:
        return self.state != "live"


class RawText(str):
    """A string field whose bytes are not valid UTF-8: reads as the text with replacement characters, and
    keeps the exact bytes in ``raw`` (rows give them losslessly)."""

    __slots__ = ("raw",)

    def __new__(cls, raw: bytes):
        t = super().__new__(cls, raw.decode("utf-8", errors="replace"))
        t.raw = bytes(raw)
        return t

    def __reduce__(self):               # rows cross process boundaries with --jobs
        return (RawText, (self.raw,))


def _str(buf, p: int, end: int, name: str, start: int, bad: list):
    q = p + 2
    if q > end:
        raise DecodeError(name, p - start, 2, end - p)
    e = q + ((buf[p] << 8) | buf[p + 1])
    if e > end:
        raise DecodeError(name, q - start, e - q, end - q)
    raw = buf[q:e]
    try:
        return raw.decode("utf-8"), raw, e
    except UnicodeDecodeError:
        bad.append(name)
        return RawText(raw), raw, e


def _count(buf, p: int, end: int, name: str, start: int) -> tuple[int, int]:
    if p + 4 > end:
        raise DecodeError(name, p - start, 4, end - p)
    (n,) = _U32.unpack_from(buf, p)
    # each element needs at least 2 bytes: check before building anything
    if n * 2 > end - p - 4:
        raise DecodeError(name, p - start, n * 2, end - p - 4)
    return n, p + 4


def decode_message(buf, start: int, end: int):
    """Decode ``Message.Encode()`` bytes ``buf[start:end]`` (``start`` = the magic).

    Returns ``(fields, raw_tags, raw_keys, consumed, bad_utf8, body_start, body_end)``; raises
    :class:`DecodeError` when a length runs past ``end``. The magic is not checked here.
    """
    bad: list = []
    m: dict = {}
    p = start + 4
    m["MessageID"], _, p = _str(buf, p, end, "MessageID", start, bad)
    m["Topic"], _, p = _str(buf, p, end, "Topic", start, bad)
    raw_tags, tags = [], []
    n, p = _count(buf, p, end, "Tags", start)
    for _ in range(n):
        s, raw, p = _str(buf, p, end, "Tags", start, bad)
        tags.append(s)
        raw_tags.append(raw)
    m["Tags"] = tags
    raw_keys, keys = [], []
    n, p = _count(buf, p, end, "Keys", start)
    for _ in range(n):
        s, raw, p = _str(buf, p, end, "Keys", start, bad)
        keys.append(s)
        raw_keys.append(raw)
    m["Keys"] = keys
    props = []
    n, p = _count(buf, p, end, "Properties", start)
    for _ in range(n):
        k, _, p = _str(buf, p, end, "Properties", start, bad)
        v, _, p = _str(buf, p, end, "Properties", start, bad)
        props.append((k, v))
    m["Properties"] = props
    if p + 4 > end:
        raise DecodeError("Body", p - start, 4, end - p)
    (blen,) = _U32.unpack_from(buf, p)
    p += 4
    if p + blen > end:
        raise DecodeError("Body", p - start, blen, end - p)
    body_start, body_end = p, p + blen
    p = body_end
    if p + ATTRS.size > end:
        raise DecodeError("MessageType", p - start, ATTRS.size, end - p)
    m.update(zip(ATTRS_NAMES, ATTRS.unpack_from(buf, p)))
    p += ATTRS.size
    m["TransactionID"], _, p = _str(buf, p, end, "TransactionID", start, bad)
    if p + 1 > end:
        raise DecodeError("MessageStatus", p - start, 1, end - p)
    m["MessageStatus"] = buf[p]
    p += 1
    m["ShardingKey"], _, p = _str(buf, p, end, "ShardingKey", start, bad)
    if p + BORN.size > end:
        raise DecodeError("Broadcast", p - start, BORN.size, end - p)
    m.update(zip(BORN_NAMES, BORN.unpack_from(buf, p)))
    p += BORN.size
    m["BornHost"], _, p = _str(buf, p, end, "BornHost", start, bad)
    m["StoreHost"], _, p = _str(buf, p, end, "StoreHost", start, bad)
    if p + TAIL.size > end:
        raise DecodeError("QueueID", p - start, TAIL.size, end - p)
    m.update(zip(TAIL_NAMES, TAIL.unpack_from(buf, p)))
    p += TAIL.size
    return m, raw_tags, raw_keys, p - start, tuple(dict.fromkeys(bad)), body_start, body_end


def encoded_length(fields: dict) -> int:
    """What ``len`` must be for these fields: the written bytes plus the 6 overcounted bytes."""
    def s(x: str) -> int:
        return 2 + len(x.encode("utf-8"))

    n = 4 + s(fields["MessageID"]) + s(fields["Topic"])
    n += 4 + sum(s(t) for t in fields["Tags"])
    n += 4 + sum(s(k) for k in fields["Keys"])
    n += 4 + sum(s(k) + s(v) for k, v in fields["Properties"])
    n += 4 + len(fields["Body"])
    n += ATTRS.size + s(fields["TransactionID"]) + 1 + s(fields["ShardingKey"]) + BORN.size
    n += s(fields["BornHost"]) + s(fields["StoreHost"]) + TAIL.size
    return n + F.TRAILING_PAD


def encode_record(fields: dict) -> bytes:
    """Build one record ``[u32 len][message]`` through the construct schema (fixtures, tests)."""
    obj = dict(fields)
    obj["Properties"] = [dict(key=k, value=v) for k, v in fields["Properties"]]
    obj.setdefault("Padding", bytes(F.TRAILING_PAD))
    return F.Record.build(obj)


def new_fields(**kw) -> dict:
    """A message with LiteMQ's defaults (priority 3, reliability 1, host 0.0.0.0:10911) and overrides."""
    d = dict(MessageID="", Topic="", Tags=[], Keys=[], Properties=[], Body=b"", MessageType=0, Priority=3,
             Reliability=1, DelayTime=0, TransactionID="", MessageStatus=0, ShardingKey="", Broadcast=0,
             BornTimestamp=0, BornHost="0.0.0.0:10911", StoreHost="0.0.0.0:10911", QueueID=0, QueueOffset=0,
             CommitLogOffset=0, StoreSize=0, StoreTimestamp=0, ConsumeStartTime=0, ConsumeEndTime=0,
             ConsumeCount=0)
    d.update(kw)
    return d


@dataclass(slots=True)
class CQEntry:
    file: str
    position: int
    topic: str
    queue_id: int
    index: int               # logical queue offset (entry number)
    commitlog_offset: int
    size: int
    tag_hash: int
    timestamp: int
    raw: bytes = field(default=b"", repr=False)
    stale: bool = False
    stale_reason: str | None = None   # see mqtool.litemq.history
