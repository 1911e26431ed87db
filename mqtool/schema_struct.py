"""Derive ``struct.Struct`` fast paths from construct schemas (the schema stays the single source of truth).

:func:`fixed_prefix_format` walks a construct ``Struct`` field by field and translates fixed-size fields
(integers, fixed ``Bytes``, ``Const`` of a format field, adapted hosts) into one ``struct`` format string,
stopping at the first field whose size depends on data. Conditional fields are resolved with a ``choose``
callback so a caller can derive the common variant (e.g. IPv4 hosts) and fall back to construct for others.
"""
from __future__ import annotations

import struct

import construct
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


def fixed_prefix_fields(schema: Struct, choose=lambda ite: ite.elsesubcon,
                        stop_before: str | None = None) -> list[tuple[str, str]]:
    """[(field name, struct format code)] for the longest fixed-size prefix of ``schema`` (see below)."""
    out = []
    for sub in schema.subcons:
        if stop_before is not None and sub.name == stop_before:
            break
        r = _fmt_of(sub, choose)
        if r is None:
            break
        codes = _split_codes(r[0])
        assert len(codes) == len(r[1]), (sub.name, r)
        out += [(f"{sub.name}{n}", c) for n, c in zip(r[1], codes)]
    return out


def field_positions(schema: Struct, choose=lambda ite: ite.elsesubcon,
                    stop_before: str | None = None) -> dict[str, tuple[int, int]]:
    """{field name: (byte offset, size)} over the fixed-size prefix of ``schema``, in schema order."""
    out, o = {}, 0
    for name, code in fixed_prefix_fields(schema, choose, stop_before):
        size = struct.calcsize(">" + code)
        out[name] = (o, size)
        o += size
    return out


def field_offsets(schema: Struct, choose=lambda ite: ite.elsesubcon) -> dict[str, int]:
    """{field name: byte offset} over the fixed-size prefix of ``schema`` (for findings that name a field)."""
    return {name: at for name, (at, _) in field_positions(schema, choose).items()}


def exact_format(fields) -> str:
    """The ``struct`` format of a schema (or a list of ``name / Int..`` fields) made *only* of fixed-size
    big-endian integer fields; ``TypeError`` names the first field that is not one (no prefix is taken)."""
    subcons = fields.subcons if isinstance(fields, Struct) else fields
    codes = []
    for f in subcons:
        sub = _unwrap(f.subcon) if isinstance(f, Renamed) else f
        if not isinstance(sub, FormatField):
            raise TypeError(f"field {f.name!r} is not a fixed-size integer")
        if sub.fmtstr[0] != ">":
            raise TypeError(f"field {f.name!r} is not big-endian")
        codes.append(sub.fmtstr[1:])
    return ">" + "".join(codes)


def layout_notation(sc) -> str:
    """The field sequence of a construct schema as a string (names, integer formats, zigzag varints, the
    conditions and lengths of byte fields and arrays): what a compiled walker written for it must implement
    (``mqtool/_native/kafka.c`` spells the string it implements; a helper whose string differs stays off)."""
    if sc is construct.ZigZag:
        return "zigzag"
    if isinstance(sc, Renamed):
        return f"{sc.name}={layout_notation(sc.subcon)}"
    if isinstance(sc, FormatField):
        return f"int{sc.fmtstr}"
    if isinstance(sc, construct.Prefixed):
        return f"prefixed({layout_notation(sc.lengthfield)},{layout_notation(sc.subcon)})"
    if isinstance(sc, Struct):
        return "{" + ",".join(layout_notation(s) for s in sc.subcons) + "}"
    if isinstance(sc, IfThenElse):
        return f"if({sc.condfunc!r},{layout_notation(sc.thensubcon)},{layout_notation(sc.elsesubcon)})"
    if isinstance(sc, Bytes):
        return f"bytes({sc.length!r})"
    if isinstance(sc, construct.Array):
        return f"array({sc.count!r},{layout_notation(sc.subcon)})"
    if sc is construct.Pass:
        return "pass"
    raise TypeError(f"no layout notation for {type(sc).__name__}")


def _split_codes(fmt: str) -> list[str]:
    """"i4sq" -> ["i", "4s", "q"]."""
    codes, num = [], ""
    for ch in fmt:
        if ch.isdigit():
            num += ch
        else:
            codes.append(num + ch)
            num = ""
    return codes


def fixed_prefix_format(schema: Struct, choose=lambda ite: ite.elsesubcon, stop_before: str | None = None):
    """Return (struct.Struct, [field names]) for the longest fixed-size prefix of ``schema``.

    Nested fixed structs contribute dotted names (``BORNHOST.addr``). ``stop_before`` ends the prefix at a field.
    """
    fields = fixed_prefix_fields(schema, choose, stop_before)
    return struct.Struct(">" + "".join(c for _, c in fields)), [n for n, _ in fields]


def selected_format(schema: Struct, wanted: list[str], choose=lambda ite: ite.elsesubcon,
                    stop_before: str | None = None) -> struct.Struct:
    """A ``struct.Struct`` over the same fixed prefix that unpacks only ``wanted`` (in schema order; the other
    fields become pad bytes of their size), for hot loops that need a few fields of a wide header."""
    fields = fixed_prefix_fields(schema, choose, stop_before)
    names = [n for n, _ in fields]
    missing = [w for w in wanted if w not in names]
    if missing:
        raise KeyError(f"not in the fixed prefix: {missing}")
    if [n for n in names if n in wanted] != list(wanted):
        raise ValueError("wanted fields must be given in schema order")
    fmt = ">"
    for n, c in fields:
        fmt += c if n in wanted else f"{struct.calcsize('>' + c)}x"
    return struct.Struct(fmt)
