"""Adapters and helpers shared by the family schemas (Java hashes, host:port, varints)."""
from __future__ import annotations

import ipaddress

from construct import Adapter, Bytes, Int32sb, Struct


def java_string_hash(s: str) -> int:
    """Java ``String.hashCode`` (over UTF-16 code units, int32 wrap-around), as a signed int."""
    h = 0
    data = s.encode("utf-16-be", errors="surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
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
