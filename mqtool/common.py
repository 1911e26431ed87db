"""Small helpers shared by every family (no I/O)."""
from __future__ import annotations

import base64
import json
import re


def _finite(text: str) -> float:
    """A JSON number with a fraction or exponent; one that overflows to infinity (``1e999999``) is refused,
    as are NaN and Infinity (not JSON): no writer of a store file emits them, and no count or offset holds them."""
    v = float(text)
    if v != v or v in (float("inf"), float("-inf")):
        raise ValueError(f"number {text[:40]!r} is not finite")
    return v


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON")


#: a JSON decoder for what a store (or a user's file) holds: raises ValueError on NaN/Infinity and on numbers
#: that overflow (their output would not be JSON again: NDJSON carries values through)
STRICT_JSON = json.JSONDecoder(parse_float=_finite, parse_constant=_no_constant)


def strict_json(text: str):
    """``text`` decoded by :data:`STRICT_JSON`; ValueError (never RecursionError) when nested too deeply."""
    try:
        return STRICT_JSON.decode(text)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def encode_body(data: bytes | None, mode: str):
    """Body as requested by ``--body``: text (UTF-8, replacement chars), hex, base64; None for none."""
    if data is None or mode == "none":
        return None
    if mode == "text":
        return bytes(data).decode("utf-8", errors="replace")
    if mode == "hex":
        return bytes(data).hex()
    if mode == "base64":
        return base64.b64encode(bytes(data)).decode("ascii")
    raise ValueError(f"unknown body mode {mode!r}")


ENCODING_SUFFIX = "_encoding"


def put_text(row: dict, name: str, raw: bytes) -> None:
    """``row[name]`` = the bytes as text when they are valid UTF-8; otherwise base64 of the exact bytes and
    ``row[name + "_encoding"] = "base64"``, so no byte is lost (tables decode it again for people)."""
    try:
        row[name] = bytes(raw).decode("utf-8")
    except UnicodeDecodeError:
        row[name] = base64.b64encode(bytes(raw)).decode("ascii")
        row[name + ENCODING_SUFFIX] = "base64"


def put_body(row: dict, name: str, data: bytes | None, mode: str) -> None:
    """``--body`` into ``row[name]``: text losslessly (see :func:`put_text`), hex or base64."""
    if mode == "text" and data is not None:
        put_text(row, name, data)
    else:
        row[name] = encode_body(data, mode)


_SEGMENT_NAME = re.compile(r"^\d{20}$")


def is_segment_name(name: str) -> bool:
    """RocketMQ/LiteMQ style 20-digit file names."""
    return bool(_SEGMENT_NAME.match(name))


def parse_time(value: str | int | None) -> int | None:
    """Epoch milliseconds from an int string or an ISO-8601 time (UTC unless it says otherwise)."""
    import datetime as dt

    if value is None:
        return None
    if isinstance(value, int):
        return value
    s = str(value).strip()
    if re.fullmatch(r"-?\d+", s):
        return int(s)
    try:
        t = dt.datetime.fromisoformat(s.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"not a time: {value!r} (use epoch ms or ISO-8601)") from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.timezone.utc)
    return int(t.timestamp() * 1000)


def plural(n: int, word: str, many: str | None = None) -> str:
    """'1 topic', '2 topics', '1 entry', '3 entries' (``many`` for irregular plurals)."""
    if n == 1:
        return f"{n} {word}"
    if many is None:
        many = word[:-1] + "ies" if word.endswith("y") and word[-2:-1] not in "aeiou" else \
            word + "es" if word.endswith(("s", "x", "ch", "sh")) else word + "s"
    return f"{n} {many}"


def java_long(v: int) -> int:
    """``v`` as a Java long holds it (two's complement, 64 bits): the brokers' offset arithmetic (an offset plus
    a size, a last offset plus one) wraps there, where a hostile offset near 2^63 takes a Python int past it."""
    return ((v + (1 << 63)) & ((1 << 64) - 1)) - (1 << 63)
