"""RocketMQ message ids (reference §2): the broker's offsetMsgId and the client's UNIQ_KEY.

* offsetMsgId (``MessageDecoder#createMessageId``): store host address (4 or 16 bytes), store port (int),
  PHYSICALOFFSET (long), all big-endian, rendered as upper-case hex: 32 chars (IPv4) or 56 chars (IPv6).
* UNIQ_KEY (``MessageClientIDSetter``): producer IP (4 or 16 bytes), low 16 bits of the pid, class-loader
  hash (int), ms since the start of the month in the producer's time zone (int), counter (short).

Both are 32 or 56 hex characters, so a copied id can be either; :func:`decode_any` gives both readings and
says which one is plausible.
"""
from __future__ import annotations

import datetime as dt
import re

from formats import common as FC      # its functions load the real module when called
from mqtool.errors import UsageError

_HEX = re.compile(r"^[0-9A-Fa-f]+$")
_ID_LENGTHS = (32, 56)          # 16 bytes (IPv4) / 28 bytes (IPv6)


def split_ids(text: str) -> list[str]:
    """Ids from a user's string: a batch send prints its msgIds comma-separated; spaces are tolerated."""
    return [t for t in re.split(r"[\s,]+", text.strip()) if t]


def _id_bytes(value: str, what: str) -> bytes:
    s = value.strip()
    if not _HEX.match(s) or len(s) not in _ID_LENGTHS:
        raise UsageError(f"not {what} (32 or 56 hex chars): {value!r}")
    return bytes.fromhex(s)


def encode_offset_msg_id(addr: bytes, port: int, physical_offset: int) -> str:
    return (bytes(addr) + port.to_bytes(4, "big", signed=True)
            + physical_offset.to_bytes(8, "big", signed=True)).hex().upper()


def decode_offset_msg_id(msg_id: str) -> dict:
    """offsetMsgId → store host and physical offset (32 hex chars IPv4, 56 IPv6)."""
    b = _id_bytes(msg_id, "an offsetMsgId")
    alen = 4 if len(b) == 16 else 16
    addr, port = b[:alen], int.from_bytes(b[alen:alen + 4], "big", signed=True)
    return {"kind": "offset_msg_id", "msg_id": msg_id.strip().upper(), "store_host": FC.format_host(addr, port),
            "physical_offset": int.from_bytes(b[alen + 4:], "big", signed=True),
            "_addr": addr, "_port": port}


def _month_start_ms(ref_ms: int, months_back: int = 0) -> int:
    t = dt.datetime.fromtimestamp(ref_ms / 1000, tz=dt.timezone.utc)
    y, m = t.year, t.month - months_back
    while m < 1:
        y, m = y - 1, m + 12
    return int(dt.datetime(y, m, 1, tzinfo=dt.timezone.utc).timestamp() * 1000)


def decode_uniq_key(key: str, reference_ms: int | None = None) -> dict:
    """UNIQ_KEY (MessageClientIDSetter): producer IP, pid, class-loader hash, ms since month start, counter.

    The time field counts from the start of a month in the producer's time zone. With ``reference_ms``
    (e.g. the message's born timestamp) the month is the one (of the reference's UTC month and the one
    before) that puts the id time closest to the reference; ``approx_time_ms`` is then that time read as UTC
    and ``producer_utc_offset_min`` the producer's apparent UTC offset (reference − id time, rounded to 15 min).
    """
    b = _id_bytes(key, "a unique key")
    alen = 4 if len(b) == 16 else 16
    ip = FC.format_host(b[:alen], 0).rsplit(":", 1)[0].strip("[]")
    pid = int.from_bytes(b[alen:alen + 2], "big")
    loader = int.from_bytes(b[alen + 2:alen + 6], "big", signed=True)
    # Unsigned, as getNearlyTimeFromID reads it: after ~24.8 days the producer's int wraps negative.
    since_month = int.from_bytes(b[alen + 6:alen + 10], "big")
    counter = int.from_bytes(b[alen + 10:alen + 12], "big")
    row = {"kind": "uniq_key", "uniq_key": key.strip().upper(), "client_ip": ip, "pid": pid,
           "class_loader_hash": loader, "ms_since_month_start": since_month, "counter": counter}
    if reference_ms is not None and reference_ms > 0:
        # The producer's month starts up to ±14 h away from the UTC month start; try this month and the
        # previous one (the id time can lie in the previous UTC month when the producer is ahead of UTC).
        best = min((_month_start_ms(reference_ms, back) + since_month for back in (0, 1)),
                   key=lambda t: abs(reference_ms - t))
        row["approx_time_ms"] = best
        row["producer_utc_offset_min"] = int(round((reference_ms - best) / 60000 / 15)) * 15
    return row


def _plausible_offset_msg_id(d: dict) -> bool:
    return 0 < d["_port"] <= 65535 and d["physical_offset"] >= 0


def decode_any(value: str, reference_ms: int | None = None) -> dict:
    """Both readings of a 32/56-hex id (an operator often does not know which kind was copied), and which
    one is plausible: an offsetMsgId has a TCP port (1..65535) and a non-negative offset; a UNIQ_KEY read
    as an offsetMsgId usually gives a port far above 65535 (pid and class-loader hash bytes)."""
    off = decode_offset_msg_id(value)
    plausible = _plausible_offset_msg_id(off)
    off.pop("_addr")
    off.pop("_port")
    uk = decode_uniq_key(value, reference_ms)
    return {"id": value.strip().upper(),
            "likely": "offset_msg_id" if plausible else "uniq_key",
            "as_offset_msg_id": {k: v for k, v in off.items() if k != "kind"},
            "as_uniq_key": {k: v for k, v in uk.items() if k != "kind"}}
