"""Column declarations and the spelling of values in cells: data that engines declare and the renderer
draws (:mod:`mqtool.render` knows tables and terminals; this module knows neither)."""
from __future__ import annotations

import os
from collections.abc import Callable, Iterable

from mqtool.plainclass import dataclass

TYPE_CHECKING = False      # typing is not loaded at start-up (issue #20); type checkers read True
if TYPE_CHECKING:
    from typing import Any

_paths = {"base": None}


def set_base(path) -> None:
    """The store a command reads: table cells show file paths below it relative to it (NDJSON keeps them
    whole). A file given itself is shown by its name."""
    if path is None:
        _paths["base"] = None
        return
    p = os.path.abspath(path)
    _paths["base"] = p if os.path.isdir(p) else os.path.dirname(p)


def relative(path: str) -> str:
    base = _paths["base"]
    if not base or not isinstance(path, str):
        return path
    full = os.path.abspath(path)
    return os.path.relpath(full, base) if full.startswith(base + os.sep) else path


def iso_ms(ms: int | None) -> str:
    if ms is None:
        return ""
    import datetime as _dt

    try:
        return _dt.datetime.fromtimestamp(ms / 1000, tz=_dt.timezone.utc).isoformat(timespec="milliseconds") \
            .replace("+00:00", "Z")
    except (OverflowError, OSError, ValueError):
        return str(ms)


_PATH_KEYS = ("file", "path", "segment")


def _decoded(v):
    """A base64 field (see :func:`mqtool.common.put_text`) as text, undecodable bytes as \\xNN."""
    if isinstance(v, list):
        return [_decoded(x) for x in v]
    import base64

    try:
        return base64.b64decode(v).decode("utf-8", errors="surrogateescape")    # shown as \xNN by visible()
    except (ValueError, TypeError):
        return v


@dataclass
class Column:
    key: str
    header: str
    fmt: Callable[[Any], str] | None = None
    justify: str = "left"
    max_width: int | None = None
    no_wrap: bool = False
    priority: int = 5           # 0: essential, never left out or truncated; higher: left out first when narrow

    def cell(self, row: dict) -> str:
        v = row.get(self.key)
        if self.key in _PATH_KEYS and isinstance(v, str):
            v = relative(v)
        elif v is not None and row.get(self.key + "_encoding") == "base64":
            v = _decoded(v)         # bytes that are not UTF-8: people read the text, escapes for the rest
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


def key_columns(keys: Iterable[str]) -> list[Column]:
    """Plain columns for rows without a column list of their own, headed in words ('queue_offset' →
    'Queue offset'; abbreviations such as 'id' and 'crc' upper-cased)."""
    def header(k: str) -> str:
        words = [w.upper() if w in ("id", "crc", "ip", "pid", "ts") else w for w in str(k).split("_")]
        return " ".join(words)[:1].upper() + " ".join(words)[1:]
    return [Column(k, header(k)) for k in keys]
