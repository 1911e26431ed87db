"""Derive ``struct.Struct`` fast paths from construct schemas (the schema stays the single source of truth).

:func:`fixed_prefix_format` walks a construct ``Struct`` field by field and translates fixed-size fields
(integers, fixed ``Bytes``, ``Const`` of a format field, adapted hosts) into one ``struct`` format string,
stopping at the first field whose size depends on data. Conditional fields are resolved with a ``choose``
callback so a caller can derive the common variant (e.g. IPv4 hosts) and fall back to construct for others.
"""
from __future__ import annotations

import struct

from construct import (Adapter, Bytes, Const, FormatField, IfThenElse, Renamed, Struct, Subconstruct)


def _unwrap(sc):
    while isinstance(sc, Renamed):
        sc = sc.subcon
    return sc


def _fmt_of(sc, choose) -> tuple[str, list[str]] | None:
    """(format characters, field-name suffixes) for a fixed-size construct, or None."""
    sc = _unwrap(sc)
    if isinstance(sc, FormatField):
        return sc.fmtstr[1:], [""]
    if isinstance(sc, Const):
        return _fmt_of(sc.subcon, choose)
    if isinstance(sc, Bytes) and isinstance(sc.length, int):
        return f"{sc.length}s", [""]
    if isinstance(sc, IfThenElse):
        return _fmt_of(choose(sc), choose)
    if isinstance(sc, Adapter) or (isinstance(sc, Subconstruct) and not isinstance(sc, Struct)):
        return _fmt_of(sc.subcon, choose)
    if isinstance(sc, Struct):
        fmt, names = "", []
        for sub in sc.subcons:
            r = _fmt_of(sub, choose)
            if r is None:
                return None
            fmt += r[0]
            names += [f".{sub.name}{n}" if sub.name else n for n in r[1]]
        return fmt, names
    return None


def fixed_prefix_format(schema: Struct, choose=lambda ite: ite.elsesubcon, stop_before: str | None = None):
    """Return (struct.Struct, [field names]) for the longest fixed-size prefix of ``schema``.

    Nested fixed structs contribute dotted names (``BORNHOST.addr``). ``stop_before`` ends the prefix at a field.
    """
    fmt, names = ">", []
    for sub in schema.subcons:
        if stop_before is not None and sub.name == stop_before:
            break
        r = _fmt_of(sub, choose)
        if r is None:
            break
        fmt += r[0]
        names += [f"{sub.name}{n}" for n in r[1]]
    return struct.Struct(fmt), names
