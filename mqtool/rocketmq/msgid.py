"""RocketMQ message ids (reference §2): the broker's offsetMsgId and the client's UNIQ_KEY."""
from __future__ import annotations

import datetime as dt
import re

from formats.common import format_host
from mqtool.errors import UsageError

_HEX = re.compile(r"^[0-9A-Fa-f]+$")


def encode_offset_msg_id(addr: bytes, port: int, physical_offset: int) -> str:
    return (bytes(addr) + port.to_bytes(4, "big", signed=True)
            + physical_offset.to_bytes(8, "big", signed=True)).hex().upper()


def decode_offset_msg_id(msg_id: str) -> dict:
    """offsetMsgId → store host and physical offset (32 hex chars IPv4, 56 IPv6)."""
    s = msg_id.strip()
    if not _HEX.match(s) or len(s) not in (32, 56):
        raise UsageError(f"not an offsetMsgId (32 or 56 hex chars): {msg_id!r}")
    b = bytes.fromhex(s)
    alen = 4 if len(b) == 16 else 16
    addr, port = b[:alen], int.from_bytes(b[alen:alen + 4], "big", signed=True)
    return {"kind": "offset_msg_id", "msg_id": s.upper(), "store_host": format_host(addr, port),
            "physical_offset": int.from_bytes(b[alen + 4:], "big", signed=True),
            "_addr": addr, "_port": port}


def decode_uniq_key(key: str, reference_ms: int | None = None) -> dict:
    """UNIQ_KEY (MessageClientIDSetter): producer IP, pid, class-loader hash, ms since month start, counter.

    The time field is relative to the start of a month in the producer's time zone; with ``reference_ms``
    (e.g. the message's born timestamp) the month is taken from it (UTC), otherwise it is left relative.
    """
    s = key.strip()
    if not _HEX.match(s) or len(s) not in (32, 56):
        raise UsageError(f"not a unique key (32 or 56 hex chars): {key!r}")
    b = bytes.fromhex(s)
    alen = 4 if len(b) == 16 else 16
    ip = format_host(b[:alen], 0).rsplit(":", 1)[0].strip("[]")
    pid = int.from_bytes(b[alen:alen + 2], "big")
    loader = int.from_bytes(b[alen + 2:alen + 6], "big", signed=True)
    since_month = int.from_bytes(b[alen + 6:alen + 10], "big", signed=True)
    counter = int.from_bytes(b[alen + 10:alen + 12], "big")
    row = {"kind": "uniq_key", "uniq_key": s.upper(), "client_ip": ip, "pid": pid, "class_loader_hash": loader,
           "ms_since_month_start": since_month, "counter": counter}
    if reference_ms is not None:
        ref = dt.datetime.fromtimestamp(reference_ms / 1000, tz=dt.timezone.utc)
        start = ref.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        row["approx_time_ms"] = int(start.timestamp() * 1000) + since_month
    return row


def decode_any(value: str) -> dict:
    """Both readings of a 32/56-hex id; an operator often does not know which kind was copied."""
    off = decode_offset_msg_id(value)
    off.pop("_addr")
    off.pop("_port")
    uk = decode_uniq_key(value)
    return {"id": value.strip().upper(),
            "as_offset_msg_id": {k: v for k, v in off.items() if k != "kind"},
            "as_uniq_key": {k: v for k, v in uk.items() if k != "kind"}}
