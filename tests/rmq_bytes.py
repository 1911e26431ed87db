"""Hand-built RocketMQ units for hostile-input tests, encoded with the construct schemas (formats.rocketmq)."""
from __future__ import annotations

import zlib

from formats import rocketmq as F

T0 = 1795338600000


def unit(topic: bytes = b"T", body: bytes = b"hello", props: bytes = b"KEYS\x01k1\x02TAGS\x01a", *,
         phys: int = 0, queue_id: int = 0, queue_offset: int = 0, sysflag: int = 0, version: str = "v1",
         body_crc: int | None = None, store_ts: int = T0) -> bytes:
    total = F.calc_msg_length(version, sysflag, len(body), len(topic), len(props))
    return F.MESSAGE_SCHEMAS[version].build(dict(
        TOTALSIZE=total, BODYCRC=(zlib.crc32(body) & 0x7FFFFFFF) if body_crc is None else body_crc,
        QUEUEID=queue_id, FLAG=0, QUEUEOFFSET=queue_offset, PHYSICALOFFSET=phys, SYSFLAG=sysflag,
        BORNTIMESTAMP=store_ts - 3, BORNHOST="192.168.1.23:51234", STORETIMESTAMP=store_ts, STOREHOSTADDRESS="10.0.0.5:10911",
        RECONSUMETIMES=0, PREPAREDTRANSACTIONOFFSET=0, BODYLENGTH=len(body), BODY=body, TOPICLENGTH=len(topic),
        TOPIC=topic, PROPERTIESLENGTH=len(props), PROPERTIES=props))


def units(n: int, base: int = 0, start: int = 0, **kw) -> bytes:
    """``n`` consecutive valid units whose PHYSICALOFFSET matches where they sit (segment base + start)."""
    out = bytearray()
    for i in range(n):
        out += unit(body=f"message {i}".encode(), phys=base + start + len(out), queue_offset=i, **kw)
    return bytes(out)
