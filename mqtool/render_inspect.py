"""The terminal view of ``mqtool inspect``: a hex editor's template view of one record.

A hexdump of the record's bytes (absolute file positions, 16 per line) where each field's bytes carry the
colour of the field's number in the field list below it, with the number marked at the byte where the field
starts; then the field list (nested fields indented), each checked field with its verdict, and a last line that
says whether every check passes or where the bytes stop matching the schema. Large records show their first
and last bytes only. Never reads a file: everything comes from the :class:`mqtool.schemawalk.Inspection`.
"""
from __future__ import annotations

from rich.table import Table
from rich.text import Text

from mqtool import render
from mqtool.schemawalk import Inspection

_WIDTH = 16
_PALETTE = ("cyan", "yellow", "green", "magenta", "bright_blue", "bright_red", "bright_cyan", "bright_yellow",
            "bright_green", "bright_magenta")
_FAILED = "bold white on red"
_VALUE_CHARS = 80


def _leaves(ins: Inspection):
    """(number, field) of every field that owns its bytes in the file: no part of it is shown in the file
    (a composite whose parts lie in inflated bytes, e.g. a compressed records area, owns its bytes)."""
    out = []
    fields = ins.fields
    for i, f in enumerate(fields):
        if f.space != "file" or f.size <= 0:
            continue
        nxt = fields[i + 1] if i + 1 < len(fields) else None
        if f.composite and nxt is not None and nxt.depth > f.depth and nxt.space == "file":
            continue
        out.append((i, f))
    return out


def _owners(ins: Inspection, shown: list[tuple[int, int]]) -> dict[int, int]:
    """Byte position -> field number, for the bytes shown only (bounded whatever the field sizes)."""
    owner: dict[int, int] = {}
    for i, f in _leaves(ins):
        for a, b in shown:
            for p in range(max(a, f.position), min(b, f.end)):
                owner.setdefault(p, i)
    return owner


def _style(ins: Inspection, i: int | None) -> str:
    if i is None:
        return "dim"
    f = ins.fields[i]
    if f.ok is False:
        return _FAILED
    return _PALETTE[i % len(_PALETTE)] + (" underline" if (i // len(_PALETTE)) % 2 else "")


def _hex_lines(ins: Inspection, markers: bool):
    """The hexdump lines (rich Text) of the kept bytes of the record span."""
    chunks = [(ins.position, ins.head)]
    if ins.tail:
        chunks.append((ins.tail_at, ins.tail))
    shown = [(at, at + len(data)) for at, data in chunks]
    owner = _owners(ins, shown)
    starts = {}
    for i, f in _leaves(ins):
        starts.setdefault(f.position, i)
    out = []
    for n, (at, data) in enumerate(chunks):
        if n:
            out.append(Text(f"          … {ins.tail_at - (ins.position + len(ins.head))} bytes not shown …",
                            style="dim"))
        lo, hi = at, at + len(data)
        line = lo - lo % _WIDTH
        while line < hi:
            hexpart, asc, labels = Text(f"{line:08x}  "), Text(" |"), []
            for k in range(_WIDTH):
                p = line + k
                sep = " " if k != 7 else "  "
                if lo <= p < hi:
                    b = data[p - lo]
                    st = _style(ins, owner.get(p))
                    hexpart.append(f"{b:02x}", style=st)
                    hexpart.append(sep)
                    asc.append(chr(b) if 0x20 <= b < 0x7F else ".", style=st)
                    if p in starts:
                        labels.append((10 + k * 3 + (k > 7), str(starts[p]), _style(ins, starts[p])))
                else:
                    hexpart.append("  " + sep)
                    asc.append(" ")
            asc.append("|")
            out.append(hexpart + asc)
            if markers and labels:
                mark = Text()
                for col, label, st in labels:
                    if len(mark.plain) < col:          # a label that would overrun the one before is left out
                        mark.append(" " * (col - len(mark.plain)))
                        mark.append("^" + label, style=st)
                out.append(mark)
            line += _WIDTH
    return out


def _value_text(v) -> str:
    if isinstance(v, (bytes, bytearray)):
        try:
            s = bytes(v).decode("utf-8")
            s = s if s.isprintable() else bytes(v).hex()
        except UnicodeDecodeError:
            s = bytes(v).hex()
    else:
        s = "" if v is None else str(v)
    s = render.visible(s)
    return s if len(s) <= _VALUE_CHARS else s[:_VALUE_CHARS - 1] + "…"


def _check_text(f) -> Text:
    if f.ok is None:
        return Text(render.visible(f.note or ""), style="dim")
    if f.ok:
        t = Text("ok", style="green")
    else:
        t = Text("FAIL", style="bold red")
        if f.expected is not None or f.actual is not None:
            t.append(render.visible(f" expected {f.expected}, found {f.actual}"))
    if f.code and f.ok is False:
        t.append(render.visible(f" [{f.code}]"), style="dim")
    if f.note:
        t.append(render.visible(f"; {f.note}"), style="dim")
    return t


def render_inspection(ins: Inspection) -> None:
    con = render.stdout_console()
    where = f"{ins.file} position {ins.position}"
    if ins.offset is not None:
        where += f" (offset {ins.offset})"
    con.print(render.text(f"{ins.family} {ins.kind}, {ins.size} bytes: {where}", "bold"), soft_wrap=True)
    markers = not con.is_terminal or con.no_color or con.color_system is None
    for line in _hex_lines(ins, markers):
        con.print(line, soft_wrap=True)
    table = Table(box=None, pad_edge=False, show_edge=False)
    name_width = min(32, max((2 * f.depth + len(f.name) + 2 for f in ins.fields), default=8))
    for name, justify in (("#", "right"), ("Field", "left"), ("Pos", "right"), ("Size", "right"),
                          ("Value", "left"), ("Check", "left")):
        fixed = name in ("#", "Field", "Pos", "Size")
        table.add_column(name, justify=justify, no_wrap=fixed, overflow="ellipsis" if fixed else "fold",
                         min_width=name_width if name == "Field" else None if fixed else 16 if name == "Value" else 8,
                         max_width=40 if name == "Value" else None)
    leaves = {i for i, _ in _leaves(ins)}
    for i, f in enumerate(ins.fields):
        name = Text("  " * f.depth)
        name.append(render.visible(f.name), style=_style(ins, i) if i in leaves else "bold" if f.composite else "")
        if f.target:
            name.append(" ◀", style="bold")
        pos = str(f.position) if f.space == "file" else f"{f.space}+{f.position}"
        table.add_row(str(i), name, pos, str(f.size), _value_text(f.value), _check_text(f))
    con.print(table)
    for n in ins.notes:
        con.print(render.text(n, "yellow"))
    checked = sum(1 for f in ins.fields if f.ok is not None)
    failed = ins.failed
    if ins.broken is not None:
        b = ins.broken
        con.print(render.text(f"the schema breaks at {b.path} (position {b.position}): {b.reason}; "
                              "no field after it is shown", "bold red"))
    if failed:
        first = failed[0]
        con.print(render.text(f"{len(failed)} of {checked} checks fail; first: {first.path} at position "
                              f"{first.position}", "bold red"))
    elif ins.broken is None:
        con.print(render.text(f"all {checked} checks pass", "green"))
