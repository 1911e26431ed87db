"""Adapters and helpers shared by the family schemas (Java hashes, host:port, varints)."""
from __future__ import annotations

import array
import ipaddress
import sys
from operator import mul

from construct import Adapter, Bytes, Int32sb, Struct


_HASH_TABLE_LEN = 1024
_POW31_DESC = [pow(31, _HASH_TABLE_LEN - 1 - i, 1 << 32) for i in range(_HASH_TABLE_LEN)]   # 31^1023 .. 31^0


def java_string_hash(s: str) -> int:
    """Java ``String.hashCode`` (over UTF-16 code units, int32 wrap-around), as a signed int.

    ``h = sum(unit[i] * 31^(n-1-i)) mod 2^32``, evaluated with a table of powers in C-level ``sum(map())``
    (several times faster than a per-unit loop); strings over 1,024 units take the loop.
    """
    if s.isascii():
        units = s.encode("ascii")
    else:
        units = array.array("H", s.encode("utf-16-le", errors="surrogatepass"))
        if sys.byteorder == "big":
            units.byteswap()
    n = len(units)
    if n <= _HASH_TABLE_LEN:
        h = sum(map(mul, units, _POW31_DESC[_HASH_TABLE_LEN - n:])) & 0xFFFFFFFF
    else:
        h = 0
        for u in units:
            h = (31 * h + u) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def format_host(addr: bytes, port: int) -> str:
    """``ip:port`` for IPv4, ``[ip]:port`` for IPv6 (RFC 5952 text form)."""
    if len(addr) == 4:
        return f"{ipaddress.IPv4Address(bytes(addr))}:{port}"
    return f"[{ipaddress.IPv6Address(bytes(addr))}]:{port}"


def parse_host(text: str) -> tuple[bytes, int]:
    """Inverse of :func:`format_host`."""
    if text.startswith("["):
        host, _, port = text[1:].partition("]:")
        return ipaddress.IPv6Address(host).packed, int(port)
    host, _, port = text.rpartition(":")
    return ipaddress.IPv4Address(host).packed, int(port)


class HostAdapter(Adapter):
    """A {addr, port} struct <-> "ip:port" text."""

    def _decode(self, obj, context, path):
        return format_host(obj.addr, obj.port)

    def _encode(self, obj, context, path):
        addr, port = parse_host(obj)
        return dict(addr=addr, port=port)


def Host(addr_len):
    """Broker host encoding: address bytes (4 or 16) then int32 port, big-endian."""
    return HostAdapter(Struct("addr" / Bytes(addr_len), "port" / Int32sb))
