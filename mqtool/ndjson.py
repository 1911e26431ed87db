"""NDJSON encoding of rows: the exact bytes ``--json`` writes, shared by the renderer that writes them and by
the engines that pre-render lines in worker processes or compiled helpers (no terminal, no rich here)."""
from __future__ import annotations

import base64
import datetime as _dt
import json
from typing import Any, Iterable, Iterator

try:  # optional fast path
    import orjson as _orjson
except Exception:  # pragma: no cover - exercised when orjson is absent
    _orjson = None

_OPTS = None


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


class CleanLines(PreRenderedLines):
    """:class:`PreRenderedLines` whose maker knows that no line carries a :data:`DAMAGED_MARKS` mark (rows of bytes
    with a valid CRC): written the same, but nobody needs to search them for marks."""

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

# A row that says its bytes are damaged (a failed CRC, a body that does not inflate), as it reads in an NDJSON
# line; these keys cannot occur inside a string value of a line (there the quotes are escaped).
DAMAGED_MARKS = (b'"crc_ok":false', b'"body_error":"')


class Spooled:
    """Rows a worker process wrote as NDJSON to a spool piece (:class:`mqtool.io.Spool`): ``count`` rows in
    ``size`` bytes at ``path``; ``marked``: those of its lines that carry a :data:`DAMAGED_MARKS` mark (so the
    caller can note damaged rows without reading the piece). Counts as one item for the caller's iteration."""

    __slots__ = ("path", "size", "count", "marked")

    def __init__(self, path: str, size: int, count: int, marked: list):
        self.path, self.size, self.count, self.marked = path, size, count, marked


def spool_blocks(rows: Iterable, tally: list) -> Iterator[bytes]:
    """The bytes :func:`mqtool.render.write_ndjson` writes for ``rows`` (dicts or pre-rendered lines), in
    blocks; adds the line count to ``tally[0]`` and appends each line with a damage mark to ``tally[1]``."""
    pending: list = []
    for r in rows:
        if type(r) is PreRenderedLines or type(r) is PreRendered or type(r) is CleanLines:
            if pending:
                yield from _tallied(ndjson_blocks(pending), tally)
                pending.clear()
            if type(r) is PreRendered:
                r = r.encode("utf-8", "surrogateescape") + b"\n"
            yield from _tallied((r,), tally)
        else:
            pending.append(r)
            if len(pending) >= 256:
                yield from _tallied(ndjson_blocks(pending), tally)
                pending.clear()
    if pending:
        yield from _tallied(ndjson_blocks(pending), tally)


def _tallied(blocks, tally: list) -> Iterator[bytes]:
    for b in blocks:
        tally[0] += b.count(b"\n")
        if any(m in b for m in DAMAGED_MARKS):
            tally[1].extend(line for line in b.splitlines() if any(m in line for m in DAMAGED_MARKS))
        yield b
