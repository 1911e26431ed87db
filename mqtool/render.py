"""Rendering: records/findings → rich tables (people) or NDJSON (scripts). Never reads a store file.

Data goes to stdout, humans' text (errors, progress, summaries in table mode) to stderr. Everything shown to a
person passes :func:`mqtool.sanitize.visible` (no control character or bidi override from the data reaches
the terminal) and reaches rich as :class:`rich.text.Text` (data is never parsed as rich markup).
"""
from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator

from mqtool.columns import Column, iso_ms, key_columns, relative, set_base  # noqa: F401  (re-exported)
from mqtool.io import copy_piece, read_input
from mqtool import ndjson as _ndjson
from mqtool.ndjson import (CleanLines, Direct, PreRendered, PreRenderedLines, Spooled, _default, _json_dumps, dumps,  # noqa: F401
                           encode_row_fast, is_plain, ndjson_blocks)
from mqtool.progress import NoProgress, set_drawer
from mqtool.sanitize import visible

TYPE_CHECKING = False   # typing is not loaded at start-up (issue #20); type checkers read True
if TYPE_CHECKING:       # rich itself is imported where something is drawn
    from typing import Any

    from rich.console import Console
    from rich.table import Table
    from rich.text import Text


_RICH = {"Console": "rich.console", "Table": "rich.table", "Text": "rich.text"}


def __getattr__(name: str):
    """``render.Console`` / ``Table`` / ``Text``: rich is imported when something is drawn, not before (NDJSON
    output and the one-line messages need none of it)."""
    if name in _RICH:
        import importlib

        return getattr(importlib.import_module(_RICH[name]), name)
    if name in ("_orjson", "_OPTS", "CAN_PRERENDER_LINES"):      # loaded when first used (mqtool.ndjson)
        return getattr(_ndjson, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _no_color() -> bool:
    return bool(os.environ.get("NO_COLOR"))


_state = {"color": "auto", "quiet": False, "as": "auto", "fields": None}
OUTPUT_MODES = ("auto", "table", "vertical", "json", "csv", "tsv")


def configure(no_color: bool | None = None, quiet: bool | None = None, color: str | None = None) -> None:
    """Set the global output options; ``None`` leaves a setting as it is (options may come at any level)."""
    if no_color is not None:
        _state["color"] = "never" if no_color else "auto"
    if color is not None:
        _state["color"] = color
    if quiet is not None:
        _state["quiet"] = quiet


def configure_output(mode: str | None = None, fields: list[str] | None = None) -> None:
    """``--as MODE`` and ``--fields a,b``; called with no argument, back to the defaults."""
    _state["as"] = mode or "auto"
    _state["fields"] = fields or None
    set_base(None)


def output_mode(as_json: bool = False) -> str:
    """table, vertical, json, csv or tsv: ``--json``/``--as`` when given, else a table on a terminal."""
    if as_json:
        return "json"
    if _state["as"] != "auto":
        return _state["as"]
    return "table" if stdout_is_tty() else "json"


def _colorless() -> bool:
    return _state["color"] == "never" or (_state["color"] == "auto" and _no_color())


def _console(stderr: bool = False, **kw) -> Console:
    from rich.console import Console

    forced = _state["color"] == "always" or None
    if _colorless():            # no escape sequence at all: NO_COLOR, --no-color, --color never
        kw["color_system"] = None
    return Console(stderr=stderr, no_color=_colorless(), force_terminal=forced, **kw)


def stdout_console() -> Console:
    return _console(soft_wrap=False)


def stderr_console() -> Console:
    return _console(stderr=True)


def text(value, style: str = "") -> Text:
    """A table cell, title or line for a person: sanitised (:func:`visible`), never parsed as markup."""
    from rich.text import Text

    return Text(visible("" if value is None else value), style=style)


def say(message: str) -> None:
    """One line for a person on stderr: ``mqtool: <message>``, sanitised."""
    sys.stderr.write(f"mqtool: {visible(message)}\n")


def quiet() -> bool:
    return _state["quiet"]


def hint(message: str) -> None:
    """A suggestion for the next command, on stderr (suppressed by ``--quiet``)."""
    if not _state["quiet"]:
        say(f"hint: {message}")


def stdout_is_tty() -> bool:
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False


def stderr_is_tty() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def want_json(flag: bool) -> bool:
    """``--json`` given, or stdout is not a terminal (and no other ``--as``) → NDJSON."""
    return output_mode(flag) == "json"


class _TextSink:
    """A binary stream's ``write``/``flush`` over a text ``write`` (for :class:`Direct` rows on a text stream)."""

    def __init__(self, w):
        self._w = w

    def write(self, b) -> int:
        self._w(bytes(b).decode("utf-8", errors="surrogateescape"))
        return len(b)

    def flush(self) -> None:
        pass


def write_ndjson(rows: Iterable[dict], out=None) -> int:
    """Write one JSON object per line; returns the count.

    With orjson, lines are encoded straight to bytes and written to the binary layer of ``out`` in batches
    (after flushing its text layer, so the order of earlier text output is kept). On stdout (``out`` not
    given), ``--fields`` keeps those keys of every row, in that order (records and summaries alike).
    """
    if out is None and _state["fields"]:
        rows = _project(rows, _state["fields"])
    out = out or sys.stdout
    _orjson = _ndjson._load()
    binary = getattr(out, "buffer", None) if _orjson is not None else None
    if binary is None:
        n = 0
        w = out.write
        for r in rows:
            n += 1
            if type(r) is Spooled:
                n += r.count - 1
                r = PreRenderedLines(read_input(r.path))
            if type(r) is Direct:
                n += r.write(_TextSink(w)) - 1
                continue
            if type(r) is PreRenderedLines or type(r) is CleanLines:
                w(r.decode("utf-8", errors="surrogateescape"))
                continue
            w(r if type(r) is PreRendered else dumps(r))
            w("\n")
        out.flush()
        return n
    out.flush()
    enc = _orjson.dumps
    opt = _ndjson._OPTS | _orjson.OPT_APPEND_NEWLINE
    safe = _ndjson.escape_active_bytes         # on whole batches: one fast scan of mostly ASCII bytes
    w = binary.write
    batch: list[bytes] = []
    add = batch.append
    n = 0
    size = 0
    try:
        for r in rows:
            if type(r) is PreRendered:
                line = r.encode("utf-8", errors="surrogateescape") + b"\n"
            elif type(r) is PreRenderedLines or type(r) is CleanLines:   # a big block: as it is, after the batch
                if batch:
                    w(safe(b"".join(batch)))
                    batch.clear()
                    size = 0
                w(r)
                n += 1
                continue
            elif type(r) is Direct:             # its producer writes the lines itself, after what is batched
                if batch:
                    w(safe(b"".join(batch)))
                    batch.clear()
                    size = 0
                n += r.write(binary)
                continue
            elif type(r) is Spooled:            # a worker's piece: copied in the kernel, after what is batched
                if batch:
                    w(safe(b"".join(batch)))
                    batch.clear()
                    size = 0
                copy_piece(r.path, r.size, binary)
                n += r.count
                continue
            else:
                try:
                    line = enc(r, default=_default, option=opt)
                except TypeError:  # ints beyond 64 bits, non-UTF-8 file names: the careful writer
                    line = (_json_dumps(r) + "\n").encode("utf-8")
            r = None                  # a row with a large body: its line alone is kept from here
            add(line)
            size += len(line)
            n += 1
            # ~25 KB per write: below malloc's mmap threshold (pre-rendered too); large lines go at once, so
            # memory is one row's line whatever the bodies (never a batch of them)
            if len(batch) >= 32 or size >= 1 << 16:
                w(safe(b"".join(batch) if len(batch) > 1 else batch[0]))
                batch.clear()
                size = 0
    finally:
        if batch:
            w(safe(b"".join(batch)))
        binary.flush()
    return n


#: how many lines :func:`write_ndjson_plain_first` writes with json before it hands the rest to orjson
PLAIN_FIRST_LINES = 64


def write_ndjson_plain_first(rows: Iterable[dict], out=None) -> int:
    """:func:`write_ndjson` with the same bytes, for output that is mostly a few lines (verify's findings and
    summary): the first :data:`PLAIN_FIRST_LINES` rows that json writes as orjson does (:func:`mqtool.ndjson.
    is_plain`) are written with json, so a small run never loads orjson; any other row, and the rest of a long
    run, go to :func:`write_ndjson`. Only on a UTF-8 stream (orjson writes UTF-8 bytes)."""
    import codecs
    from itertools import chain

    if out is None and _state["fields"]:
        rows = _project(rows, _state["fields"])
    out = out or sys.stdout
    try:
        utf8 = codecs.lookup(out.encoding or "").name == "utf-8"
    except (AttributeError, LookupError):
        utf8 = False
    if not utf8:
        return write_ndjson(rows, out)
    it = iter(rows)
    n = 0
    for r in it:
        if n >= PLAIN_FIRST_LINES or not is_plain(r):
            return n + write_ndjson(chain((r,), it), out)
        out.write(_json_dumps(r) + "\n")
        n += 1
    out.flush()
    return n


def render_table(rows: Iterable[dict], columns: list[Column], title: str | None = None,
                 console: Console | None = None, batch: int = 2000) -> int:
    """Print rows as tables that fit the console (see :mod:`mqtool.tables`), in chunks so an endless stream
    still shows up, or as ``field: value`` blocks when one record is shown or a row cannot fit. Returns the
    count."""
    from itertools import chain, islice

    from mqtool import tables

    console = console or stdout_console()
    mode = _state["as"] if _state["as"] in ("table", "vertical") else "auto"
    if _state["fields"]:
        columns = tables.select(columns, _state["fields"], Column)
    it = iter(rows)
    sample = list(islice(it, 200))
    if not sample:
        return 0
    fitted = None
    if mode == "table" and not console.is_terminal:
        fitted = (columns, tables.natural_widths(columns, sample))    # for less -S or a ticket: every column
        console.width = max(console.width, tables.table_width(fitted[1]))
    elif mode != "vertical" and not (mode == "auto" and len(sample) == 1):
        fitted = tables.fit(columns, sample, console.width) if not _state["fields"] else \
            (columns, tables.natural_widths(columns, sample))
    if fitted is None:
        return _render_vertical(chain(sample, it), columns, title, console)
    shown, widths = fitted
    hidden = [c.header for c in columns if c not in shown and tables.content_widths([c], sample)[0]]
    if hidden:
        _note_hidden(hidden, console.width)
    n = 0
    it = chain(sample, it)
    while True:
        chunk = list(islice(it, batch))
        if not chunk:
            return n
        console.print(_TableRows.of(shown, widths, chunk, title if n == 0 else None, console))
        n += len(chunk)


class _TableRows:
    """One batch of a table, drawn as rich draws the table :func:`_new_table` makes of these rows, at a small
    fraction of its cost (rich measures and wraps every cell of every row: ~0.7 ms a row).

    The column widths are rich's own, measured on a stand-in table holding each column's widest cell (a
    column's width depends only on its widest cell); the title, header and rules are rich's own, rendered once;
    a cell that fits its column is padded here, a plain (ASCII) cell that does not is divided into lines by
    rich's word division, any other by rich itself. ``tests/test_common_tables.py`` checks the output equals
    rich's table."""

    def __init__(self, columns: list[Column], widths: list[int], frame: list, box, cells: list[list[str]]) -> None:
        self.columns, self.widths = columns, widths
        self.head, self.bottom = frame[:-1], frame[-1]     # title, header and rules (with their styles), last rule
        self.box, self.cells = box, cells

    @classmethod
    def of(cls, columns: list[Column], fitted: list[int] | None, rows: list[dict], title: str | None,
           console: "Console"):
        """The batch as a :class:`_TableRows`, or as the rich table itself when this rich's table does not look
        as this class assumes (or does not say its column widths)."""
        from rich.cells import cell_len
        from rich.text import Text

        cells = [[visible(c.cell(r)) for c in columns] for r in rows]       # as shown (visible: once only)
        widest = [max(col, key=lambda v: len(v) if v.isascii() else cell_len(v)) for col in zip(*cells)]
        proxy = _new_table(columns, fitted, title)
        proxy.add_row(*[Text(v) for v in widest])
        try:        # as Table.__rich_console__ measures them (the widths are not public)
            options = console.options
            room = (options.max_width if proxy.width is None else proxy.width) - proxy._extra_width
            widths = proxy._calculate_column_widths(console, options.update_width(room))
            plain = (proxy.box is not None and proxy.show_edge and proxy.pad_edge and proxy.show_header
                     and not (proxy.collapse_padding or proxy.show_lines or proxy.leading or proxy.row_styles
                              or proxy.show_footer or proxy.expand or proxy.border_style)
                     and proxy.style in ("", "none")
                     and tuple(proxy.padding) == (0, 1, 0, 1) and len(widths) == len(columns)
                     and min(widths, default=0) > 2)
        except (AttributeError, TypeError, ValueError):
            plain = False
        if not plain:
            table = _new_table(columns, fitted, title)
            for row in cells:
                table.add_row(*[Text(v) for v in row])
            return table
        frame = _new_table(columns, fitted, title)     # no row: title, header and rules at these widths
        for col, w in zip(frame.columns, widths):
            col.width, col.min_width, col.max_width = w - 2, None, None
        lines = console.render_lines(frame, options, pad=False)
        box = proxy.box.substitute(options, safe=console.safe_box if proxy.safe_box is None else proxy.safe_box)
        return cls(columns, widths, lines, box, cells)

    def __rich_console__(self, console: "Console", options):
        from rich.segment import Segment

        new_line = Segment.line()
        for line in self.head:
            yield from line
            yield new_line
        box, last = self.box, len(self.cells) - 1
        for i, row in enumerate(self.cells):
            edge = (box.foot_left, box.foot_vertical, box.foot_right) if i == last else \
                (box.mid_left, box.mid_vertical, box.mid_right)
            for line in self._row(console, options, row, edge):
                yield Segment(line)
                yield new_line
        yield from self.bottom
        yield new_line

    def _row(self, console: "Console", options, row: list[str], edge) -> list[str]:
        from rich._wrap import divide_line
        from rich.cells import cell_len
        from rich.text import Text

        cells: list[list[str]] = []
        for c, w, s in zip(self.columns, self.widths, row):
            inner = w - 2
            ascii_ = s.isascii()
            t = s if c.justify == "left" else s.rstrip()   # (right and centre justification drop trailing blanks)
            n = len(t) if ascii_ else cell_len(t)
            if n <= inner:
                gap = inner - n
                cells.append([t + " " * gap if c.justify == "left" else " " * gap + t if c.justify == "right"
                              else " " * (gap // 2) + t + " " * (gap - gap // 2)])
            elif ascii_ and c.justify in ("left", "right") and not (c.priority == 0 or c.no_wrap):
                # rich's own word division (Text.wrap); a line's trailing blanks become padding
                cuts = [0, *divide_line(s, inner, fold=True), len(s)]
                parts = (s[a:b].rstrip() for a, b in zip(cuts, cuts[1:]))
                cells.append([p.ljust(inner) if c.justify == "left" else p.rjust(inner) for p in parts])
            else:           # wide characters, centred or unbreakable cells: drawn by rich itself
                opts = options.update(width=inner, justify=c.justify, no_wrap=c.priority == 0 or c.no_wrap,
                                      overflow="fold", height=None)
                cells.append(["".join(seg.text for seg in line)
                              for line in console.render_lines(Text(s), opts, pad=True)])
        height = max(len(x) for x in cells)
        left, mid, right = edge
        return [left + mid.join(" " + (x[k] if k < len(x) else " " * (w - 2)) + " "
                                for x, w in zip(cells, self.widths)) + right for k in range(height)]


def _note_hidden(headers: list[str], width: int) -> None:
    if not _state["quiet"]:
        say(f"{width} columns wide: left out {', '.join(headers)} (--fields to choose columns, --as vertical "
            "for every field)")


def _render_vertical(rows: Iterable[dict], columns: list[Column], title: str | None, console: Console) -> int:
    """One block per record, ``field: value`` lines (empty fields left out), as psql's expanded view."""
    from rich.text import Text

    label = max(len(c.header) for c in columns)
    if title:
        console.print(text(title, style="bold"))
    n = 0
    for r in rows:
        n += 1
        console.print(Text(f"-[ record {n} ]" + "-" * max(0, min(console.width, 60) - 14 - len(str(n))),
                           style="dim"))
        for c in columns:
            value = c.cell(r)
            if value != "":
                console.print(Text(f"{c.header.rjust(label)} : ", style="bold") + text(value), soft_wrap=False)
    return n


def _new_table(columns: list[Column], widths: list[int] | None = None, title: str | None = None) -> Table:
    from rich.table import Table

    t = Table(title=text(title) if title else None, show_lines=False, header_style="bold")
    for i, c in enumerate(columns):
        whole = c.priority == 0 or c.no_wrap
        t.add_column(c.header, justify=c.justify, overflow="fold",
                     max_width=None if whole else c.max_width, no_wrap=whole,
                     min_width=widths[i] if whole and widths else None)
    return t


def write_delimited(rows: Iterable[dict], columns: list[Column], delimiter: str) -> int:
    """CSV or TSV: a header of field names, then one line per record (lists space-joined, objects as JSON).
    Exact data into a pipe or file; on a terminal every cell passes :func:`visible` (the data's escape
    sequences would otherwise reach the terminal raw: CSV on a terminal is read by a person)."""
    import csv

    keys = _state["fields"] or [c.key for c in columns]
    w = csv.writer(sys.stdout, delimiter=delimiter, lineterminator="\n")
    cell = (lambda v: visible(_flat(v))) if stdout_is_tty() else _flat
    w.writerow([cell(k) for k in keys])
    n = 0
    for r in as_dicts(rows):
        w.writerow([cell(r.get(k)) for k in keys])
        n += 1
    return n


def _flat(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return " ".join(_flat(x) for x in v)
    if isinstance(v, (dict, bytes, bytearray)):
        return dumps(v)
    return str(v)


def as_dicts(rows: Iterable) -> Iterator[dict]:
    """Rows as dicts, whether given as dicts or already rendered to NDJSON (by workers or a helper)."""
    for r in rows:
        if type(r) is Direct:
            for b in r.blocks():
                for line in bytes(b).splitlines():
                    yield json.loads(line)
            continue
        if type(r) is Spooled:
            r = PreRenderedLines(read_input(r.path))
        if type(r) is PreRenderedLines or type(r) is CleanLines:
            for line in r.splitlines():
                yield json.loads(line)
        elif type(r) is PreRendered:
            yield json.loads(r)
        else:
            yield r


def _project(rows: Iterable, fields: list[str]) -> Iterator[dict]:
    for r in as_dicts(rows):
        yield {k: r.get(k) for k in fields}


def emit(rows: Iterable[dict], columns: list[Column], as_json: bool, title: str | None = None) -> int:
    """Send rows to stdout as NDJSON, a table, ``field: value`` blocks, CSV or TSV."""
    mode = output_mode(as_json)
    if mode == "json":
        return write_ndjson(rows)           # (--fields: applied there)
    if mode in ("csv", "tsv"):
        return write_delimited(rows, columns, "," if mode == "csv" else "\t")
    return render_table(rows, columns, title=title)


def progress(total_bytes: int, description: str = "scanning", enabled: bool | None = None):
    """A byte-progress bar on stderr when stderr is a terminal and colour is on (else a no-op object)."""
    if enabled is None:
        enabled = stderr_is_tty() and not _state["quiet"]
    # no colour means no terminal escape at all, and a live bar moves the cursor
    if not enabled or total_bytes <= 0 or _colorless():
        return NoProgress()
    return _Progress(total_bytes, description)


class _Progress:
    def __init__(self, total: int, description: str):
        from rich.progress import (BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn,
                                   TransferSpeedColumn)

        self._p = Progress(TextColumn("{task.description}", markup=False), BarColumn(), DownloadColumn(),
                           TransferSpeedColumn(), TimeRemainingColumn(), console=stderr_console(),
                           transient=True)
        self._total = total
        self._desc = visible(description)

    def __enter__(self):
        self._p.__enter__()
        self._task = self._p.add_task(self._desc, total=self._total)
        return self

    def __exit__(self, *a):
        return self._p.__exit__(*a)

    def advance(self, n: int) -> None:
        self._p.advance(self._task, n)

    def update_to(self, n: int) -> None:
        self._p.update(self._task, completed=n)


# ---- findings -------------------------------------------------------------------------------

set_drawer(progress)       # engines report progress through mqtool.progress; this draws it


FINDING_COLUMNS = [
    Column("id", "Id", priority=1),
    Column("severity", "Severity", priority=0),
    Column("code", "Code", priority=0),
    Column("file", "File", max_width=48, priority=1),
    Column("position", "Pos", justify="right", priority=0),
    Column("offset", "Offset", justify="right", priority=3),
    Column("expected", "Expected", max_width=24, priority=4),
    Column("actual", "Actual", max_width=24, priority=4),
    Column("message", "Message", max_width=80, priority=2),
    Column("caused_by", "Caused by", priority=3),
]


_SEV_ORDER = {"error": 0, "warning": 1, "info": 2}
_SEV_STYLE = {"error": "bold red", "warning": "yellow", "info": "blue"}


def render_verify(findings: Iterator, summary_fn: Callable[[], Any], as_json: bool, *, linker=None,
                  view: str = "compact", all_findings: bool = False, store: str | None = None,
                  family: str | None = None) -> Any:
    """Render a verify run: NDJSON findings then a summary object, or (on a terminal) the findings for people
    and the summary line.

    ``findings`` yields Finding objects; ``summary_fn`` is called after they are exhausted. Every finding gets
    an ``id`` and, when it follows from another, ``caused_by`` (:mod:`mqtool.causes`; pass one ``linker`` for
    all stores of a run, so ids stay unique). On a terminal ``view`` is ``compact`` (one line per root finding,
    ``file:position: severity[code] message``, with its number of consequences; ``all_findings`` lists them
    too) or ``table``.
    """
    from mqtool.causes import Linker, linked

    linker = linker or Linker()
    findings, summary_fn = linked(findings, summary_fn, store, family, linker)
    if want_json(as_json):
        write_ndjson_plain_first(f.to_dict() for f in findings)
        s = summary_fn()
        write_ndjson_plain_first([s.to_dict()])
        return s
    from mqtool.findings import KeptFindings

    with KeptFindings(lambda sev: _SEV_ORDER.get(sev, 3)) as kept:     # (memory bounded; its spool goes at
        kept.extend(findings)                                            # the end, an error's too)
        s = summary_fn()
        con = stdout_console()
        if view == "table":
            _findings_tables(con, kept, s)
        else:
            _findings_compact(con, kept, linker.consequences, all_findings, store)
    con.print(summary_line(s))
    return s


def summary_line(s) -> "Text":
    """The one-line verdict of a verify run (terminal)."""
    from rich.text import Text

    verdict_style = {"sound": "bold green", "sound-with-warnings": "bold yellow", "damaged": "bold red"}
    d = s.to_dict()
    head = visible(f"{d['family']} {d['store']}: ") if d.get("store") else ""
    roots = d["errors"] + d["warnings"] + d["infos"] - d.get("consequences", 0)
    return Text.assemble(head, (f"verdict: {s.verdict}", verdict_style.get(s.verdict, "bold")),
                         f"\n  errors={d['errors']} warnings={d['warnings']} infos={d['infos']} "
                         f"(root findings {roots}, consequences {d.get('consequences', 0)})"
                         f"\n  messages={d['messages']} damaged_ranges={d['damaged_ranges']} "
                         f"damaged_bytes={d['damaged_bytes']}")


def finding_location(f, store: str | None = None) -> str:
    """``file:position`` (``file@offset`` without a position; ``store`` for store-wide findings); a file
    inside ``store`` is named relative to it."""
    name = f.file
    if name is not None and store:
        root = os.path.join(store, "")
        if name.startswith(root) and len(name) > len(root):
            name = name[len(root):]
    if name is None:
        return "store" if f.offset is None else f"@{f.offset}"
    if f.position is not None:
        return f"{name}:{f.position}"
    return name if f.offset is None else f"{name}@{f.offset}"


def finding_line(f, consequences: int = 0, store: str | None = None, follows: bool = True) -> "Text":
    """One finding, compiler style: ``file:position: severity[code] message``."""
    from rich.text import Text

    t = Text.assemble(visible(f"{finding_location(f, store)}: "),
                      (visible(f"{f.severity}[{f.code}]"), _SEV_STYLE.get(f.severity, "")), visible(f" {f.message}"))
    if consequences:
        t.append(f" (and {consequences} consequence{'s' if consequences != 1 else ''})", "dim")
    if f.caused_by and follows:
        t.append(f" (follows from {f.caused_by})", "dim")
    return t


#: the compact view lists at most this many root findings of one severity and code (``--all-findings``: all);
#: the others are counted in one line: thousands of alike lines (a hostile index gives millions) tell a person
#: nothing more, and drawing them took minutes
ROOTS_SHOWN_PER_CODE = 200


def _findings_compact(con: Console, kept, consequences, all_findings: bool, store=None) -> None:
    hidden = 0
    shown: dict[tuple[str, str], int] = {}
    over: dict[tuple[str, str], int] = {}       # (severity, code) -> roots not listed
    lines = _Lines(con)
    for f, root in kept.roots(consequences=all_findings):
        if root:
            n = consequences.get(f.id, 0)
            if not all_findings:
                hidden += n
                key = (f.severity, f.code)
                if shown.get(key, 0) >= ROOTS_SHOWN_PER_CODE:
                    over[key] = over.get(key, 0) + 1
                    continue
                shown[key] = shown.get(key, 0) + 1
            lines.add(finding_line(f, n, store))
        else:
            line = finding_line(f, store=store, follows=False)
            line.pad_left(4)
            lines.add(line)
    lines.flush()
    from mqtool.common import plural

    for (sev, code), k in over.items():
        con.print(text(_not_shown(f"{plural(k, f'more {sev}[{code}] finding')} like those above", k), "dim"),
                  highlight=False)
    if hidden:
        con.print(_not_shown(f"{plural(hidden, 'finding that follows', 'findings that follow')} from those above",
                             hidden), style="dim", highlight=False)


def _not_shown(what: str, n: int) -> str:
    """The compact view's note on ``n`` findings (``what``) it does not list."""
    many = n != 1
    return (f"({what} {'are' if many else 'is'} not shown: --all-findings lists {'them' if many else 'it'}, "
            "--json gives every finding)")


class _Lines:
    """Lines printed a few hundred at a time (one ``print`` each: rich's cost per call, not per line, is what
    made a long list slow); the output is the same as one ``print`` per line."""

    def __init__(self, console: "Console", size: int = 500) -> None:
        self.console, self.size, self.lines = console, size, []

    def add(self, line: "Text") -> None:
        self.lines.append(line)
        if len(self.lines) >= self.size:
            self.flush()

    def flush(self) -> None:
        """Each run of lines that fit the width is printed without word division (``no_wrap``: what rich's
        division gives a line that fits is that line, and dividing was most of the cost); the others as rich
        divides them."""
        from itertools import groupby

        from rich.cells import cell_len
        from rich.text import Text

        width = self.console.width

        def fits(line) -> bool:
            plain = line.plain
            if "\t" in plain or "\n" in plain:
                return False
            return (len(plain) if plain.isascii() else cell_len(plain)) <= width

        for short, run in groupby(self.lines, key=fits):
            self.console.print(Text("\n").join(run), no_wrap=True if short else None)
        self.lines = []


def _findings_tables(con: Console, kept, s) -> None:
    from rich.table import Table

    t = Table(title="Findings by code", header_style="bold")
    t.add_column("Severity")
    t.add_column("Code")
    t.add_column("Count", justify="right")
    for (sev, code), cnt in sorted(s.by_code.items(), key=lambda kv: (_SEV_ORDER.get(kv[0][0], 3), kv[0][1])):
        t.add_row(_sev_style(sev), text(code), str(cnt))
    if s.by_code:
        con.print(t)
        tf = Table(title="Findings by file", header_style="bold")
        tf.add_column("File")
        tf.add_column("Count", justify="right")
        for fname, cnt in sorted(s.by_file.items()):
            tf.add_row(text(relative(fname)), str(cnt))
        con.print(tf)
        render_table((f.to_dict() for f in kept.by_severity()), FINDING_COLUMNS, title="Findings", console=con)


def _sev_style(sev: str) -> Text:
    return text(sev, {"error": "red", "warning": "yellow", "info": "blue"}.get(sev, ""))


#: summary fields a multi-store run adds up in its total
TOTAL_FIELDS = ("errors", "warnings", "infos", "consequences", "messages", "damaged_ranges", "damaged_bytes")


def render_total(summaries: list, as_json: bool) -> dict:
    """The closing total of a run over several stores (a ``kind: total`` object in NDJSON)."""
    dicts = [s.to_dict() for s in summaries]
    total = {"kind": "total", "stores": len(dicts)}
    for k in TOTAL_FIELDS:
        total[k] = sum(d.get(k) or 0 for d in dicts)
    total["damaged_stores"] = sum(1 for s in summaries if s.verdict == "damaged")
    if want_json(as_json):
        write_ndjson([total])
    else:
        stdout_console().print(text(f"total over {total['stores']} stores: {total['damaged_stores']} damaged; "
                                    + " ".join(f"{k}={total[k]}" for k in TOTAL_FIELDS)), highlight=False)
    return total
