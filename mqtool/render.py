"""Rendering: records/findings → rich tables (people) or NDJSON (scripts). Never reads a store file.

Data goes to stdout, humans' text (errors, progress, summaries in table mode) to stderr.
"""
from __future__ import annotations

import base64
import datetime as _dt
import json
import os
import sys
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn, \
    DownloadColumn
from rich.table import Table

try:  # optional fast path
    import orjson as _orjson
except Exception:  # pragma: no cover - exercised when orjson is absent
    _orjson = None


def _no_color() -> bool:
    return bool(os.environ.get("NO_COLOR"))


_state = {"no_color": False, "quiet": False}


def configure(no_color: bool = False, quiet: bool = False) -> None:
    _state["no_color"] = no_color or _no_color()
    _state["quiet"] = quiet


def stdout_console() -> Console:
    return Console(no_color=_state["no_color"] or _no_color(), soft_wrap=False)


def stderr_console() -> Console:
    return Console(stderr=True, no_color=_state["no_color"] or _no_color())


def quiet() -> bool:
    return _state["quiet"]


def hint(text: str) -> None:
    """A suggestion for the next command, on stderr (suppressed by ``--quiet``)."""
    if not _state["quiet"]:
        sys.stderr.write(f"mqtool: hint: {text}\n")


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
    """``--json`` given, or stdout is not a terminal → NDJSON."""
    return flag or not stdout_is_tty()


def _default(o: Any):
    if isinstance(o, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(o)).decode("ascii")
    if isinstance(o, (set, frozenset, tuple)):
        return list(o)
    if isinstance(o, _dt.datetime):
        return o.isoformat()
    if hasattr(o, "to_dict"):
        return o.to_dict()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


if _orjson is not None:
    _OPTS = _orjson.OPT_NON_STR_KEYS

    def dumps(obj: Any) -> str:
        try:
            return _orjson.dumps(obj, default=_default, option=_OPTS).decode("utf-8")
        except TypeError:  # e.g. ints beyond 64 bits, or non-UTF-8 file names (surrogate escapes)
            return _json_dumps(obj)
else:
    def dumps(obj: Any) -> str:
        return _json_dumps(obj)


def _json_dumps(obj: Any) -> str:
    s = json.dumps(obj, default=_default, ensure_ascii=False, separators=(",", ":"))
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        # A non-UTF-8 file name (os gives it with surrogate escapes): write \udcXX escapes, so the line is
        # valid UTF-8 and Python's json.loads gives back the exact name (os.fsencode → original bytes).
        s = json.dumps(obj, default=_default, ensure_ascii=True, separators=(",", ":"))
    return s


def encode_row_fast(row: dict) -> bytes | None:
    """The line :func:`write_ndjson` writes for ``row`` (without its newline) when it uses orjson; None when
    it would not (no orjson, or a value only the careful writer takes). For code that renders lines from a
    template row (the Kafka compiled helper) and must match this writer byte for byte."""
    if _orjson is None:
        return None
    try:
        return _orjson.dumps(row, default=_default, option=_OPTS)
    except TypeError:
        return None


class PreRendered(str):
    """A row already serialised as one NDJSON line (by a worker process of ``--jobs``)."""

    __slots__ = ()


class PreRenderedLines(bytes):
    """Several rows already serialised and encoded as NDJSON, each line ending in ``\n`` (the bytes
    :func:`write_ndjson` would write for them); counts as one item for the caller's iteration."""

    __slots__ = ()


def ndjson_blocks(rows: Iterable[dict], size: int = 64 << 10) -> list[PreRenderedLines]:
    """The bytes :func:`write_ndjson` writes for ``rows``, as blocks of about ``size`` bytes (small enough to
    stay below malloc's mmap threshold); needs orjson (:data:`CAN_PRERENDER_LINES`)."""
    enc = _orjson.dumps
    opt = _OPTS | _orjson.OPT_APPEND_NEWLINE
    blocks: list[PreRenderedLines] = []
    out: list[bytes] = []
    add = out.append
    n = 0
    for r in rows:
        try:
            b = enc(r, default=_default, option=opt)
        except TypeError:  # as write_ndjson does
            b = (_json_dumps(r) + "\n").encode("utf-8")
        add(b)
        n += len(b)
        if n >= size:
            blocks.append(PreRenderedLines(b"".join(out)))
            out.clear()
            n = 0
    if out:
        blocks.append(PreRenderedLines(b"".join(out)))
    return blocks


CAN_PRERENDER_LINES = _orjson is not None


def write_ndjson(rows: Iterable[dict], out=None) -> int:
    """Write one JSON object per line; returns the count.

    With orjson, lines are encoded straight to bytes and written to the binary layer of ``out`` in batches
    (after flushing its text layer, so the order of earlier text output is kept).
    """
    out = out or sys.stdout
    binary = getattr(out, "buffer", None) if _orjson is not None else None
    if binary is None:
        n = 0
        w = out.write
        for r in rows:
            n += 1
            if type(r) is PreRenderedLines:
                w(r.decode("utf-8", errors="surrogateescape"))
                continue
            w(r if type(r) is PreRendered else dumps(r))
            w("\n")
        out.flush()
        return n
    out.flush()
    enc = _orjson.dumps
    opt = _OPTS | _orjson.OPT_APPEND_NEWLINE
    w = binary.write
    batch: list[bytes] = []
    add = batch.append
    n = 0
    size = 0
    try:
        for r in rows:
            if type(r) is PreRendered:
                line = r.encode("utf-8", errors="surrogateescape") + b"\n"
            elif type(r) is PreRenderedLines:     # a big block: write it as it is, after what is batched
                if batch:
                    w(b"".join(batch))
                    batch.clear()
                    size = 0
                w(r)
                n += 1
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
                w(b"".join(batch) if len(batch) > 1 else batch[0])
                batch.clear()
                size = 0
    finally:
        if batch:
            w(b"".join(batch))
        binary.flush()
    return n


def iso_ms(ms: int | None) -> str:
    if ms is None:
        return ""
    try:
        return _dt.datetime.fromtimestamp(ms / 1000, tz=_dt.timezone.utc).isoformat(timespec="milliseconds") \
            .replace("+00:00", "Z")
    except (OverflowError, OSError, ValueError):
        return str(ms)


@dataclass
class Column:
    key: str
    header: str
    fmt: Callable[[Any], str] | None = None
    justify: str = "left"
    max_width: int | None = None
    no_wrap: bool = False

    def cell(self, row: dict) -> str:
        v = row.get(self.key)
        if self.fmt is not None:
            return self.fmt(v)
        if v is None:
            return ""
        if isinstance(v, bool):
            return "yes" if v else "NO"
        if isinstance(v, (list, tuple)):
            return " ".join(str(x) for x in v)
        if isinstance(v, dict):
            return " ".join(f"{k}={val}" for k, val in v.items())
        return str(v)


def render_table(rows: Iterable[dict], columns: list[Column], title: str | None = None,
                 console: Console | None = None, batch: int = 2000) -> int:
    """Print rows as rich tables, in chunks so an endless stream still shows up. Returns the count."""
    console = console or stdout_console()
    n = 0
    table = None
    for r in rows:
        if table is None:
            table = _new_table(columns, title if n == 0 else None)
        table.add_row(*[c.cell(r) for c in columns])
        n += 1
        if n % batch == 0:
            console.print(table)
            table = None
    if table is not None:
        console.print(table)
    return n


def _new_table(columns: list[Column], title: str | None) -> Table:
    t = Table(title=title, show_lines=False, header_style="bold")
    for c in columns:
        t.add_column(c.header, justify=c.justify, overflow="ellipsis" if c.no_wrap else "fold",
                     max_width=c.max_width, no_wrap=c.no_wrap)
    return t


def emit(rows: Iterable[dict], columns: list[Column], as_json: bool, title: str | None = None) -> int:
    """Send rows to stdout as NDJSON or a table."""
    if want_json(as_json):
        return write_ndjson(rows)
    return render_table(rows, columns, title=title)


def progress(total_bytes: int, description: str = "scanning", enabled: bool | None = None):
    """A byte-progress bar on stderr when stderr is a terminal (else a no-op object)."""
    if enabled is None:
        enabled = stderr_is_tty() and not _state["quiet"]
    if not enabled or total_bytes <= 0:
        return _NoProgress()
    return _Progress(total_bytes, description)


class _NoProgress:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False

    def advance(self, n: int) -> None:
        pass

    def update_to(self, n: int) -> None:
        pass


class _Progress:
    def __init__(self, total: int, description: str):
        self._p = Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(),
                           TransferSpeedColumn(), TimeRemainingColumn(), console=stderr_console(),
                           transient=True)
        self._total = total
        self._desc = description

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

FINDING_COLUMNS = [
    Column("severity", "Severity"),
    Column("code", "Code"),
    Column("file", "File", max_width=48),
    Column("position", "Pos", justify="right"),
    Column("offset", "Offset", justify="right"),
    Column("expected", "Expected", max_width=24),
    Column("actual", "Actual", max_width=24),
    Column("message", "Message", max_width=80),
]


def render_verify(findings: Iterator, summary_fn: Callable[[], Any], as_json: bool) -> Any:
    """Render a verify run: NDJSON findings then a summary object, or tables (summary first for people).

    ``findings`` yields Finding objects; ``summary_fn`` is called after they are exhausted.
    """
    if want_json(as_json):
        write_ndjson(f.to_dict() for f in findings)
        s = summary_fn()
        write_ndjson([s.to_dict()])
        return s
    found = list(findings)
    s = summary_fn()
    con = stdout_console()
    t = Table(title="Findings by code", header_style="bold")
    t.add_column("Severity")
    t.add_column("Code")
    t.add_column("Count", justify="right")
    for (sev, code), cnt in sorted(s.by_code.items(), key=lambda kv: (["error", "warning", "info"].index(kv[0][0])
                                                                        if kv[0][0] in ("error", "warning", "info")
                                                                        else 3, kv[0][1])):
        t.add_row(_sev_style(sev), code, str(cnt))
    if s.by_code:
        con.print(t)
        tf = Table(title="Findings by file", header_style="bold")
        tf.add_column("File")
        tf.add_column("Count", justify="right")
        for fname, cnt in sorted(s.by_file.items()):
            tf.add_row(fname, str(cnt))
        con.print(tf)
        order = {"error": 0, "warning": 1, "info": 2}
        render_table((f.to_dict() for f in sorted(found, key=lambda f: (order.get(f.severity, 3)))),
                     FINDING_COLUMNS, title="Findings", console=con)
    verdict_style = {"sound": "bold green", "sound-with-warnings": "bold yellow", "damaged": "bold red"}
    con.print(f"[{verdict_style.get(s.verdict, 'bold')}]verdict: {s.verdict}[/]  "
              f"errors={s.errors} warnings={s.warnings} infos={s.infos} messages={s.messages} "
              f"skipped_ranges={s.skipped_ranges} skipped_bytes={s.skipped_bytes}")
    return s


def _sev_style(sev: str) -> str:
    return {"error": "[red]error[/]", "warning": "[yellow]warning[/]", "info": "[blue]info[/]"}.get(sev, sev)
