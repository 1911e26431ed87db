"""NDJSON encoding of rows: the exact bytes ``--json`` writes, shared by the renderer that writes them and by
the engines that pre-render lines in worker processes or compiled helpers (no terminal, no rich here)."""
from __future__ import annotations

import binascii
import json
import re
from collections.abc import Iterable, Iterator

from mqtool.sanitize import ACTIVE_CLASS, ACTIVE_RANGES

TYPE_CHECKING = False      # typing is not loaded at start-up (issue #20); type checkers read True
if TYPE_CHECKING:
    from typing import Any


_LIB: list = []         # [orjson or None] once :func:`_load` ran


def _load():
    """orjson (the optional fast path; None when absent), imported when a line is first encoded with it, so
    a run that writes a few plain lines (:func:`is_plain`) never loads it. Then sets ``_orjson``, ``_OPTS``
    and ``CAN_PRERENDER_LINES`` (which other modules read as ``ndjson.<name>``)."""
    if _LIB:
        return _LIB[0]
    try:
        import orjson as lib
    except Exception:  # pragma: no cover - exercised when orjson is absent
        lib = None
    g = globals()
    g["_OPTS"] = lib.OPT_NON_STR_KEYS if lib is not None else None
    g["CAN_PRERENDER_LINES"] = lib is not None
    g["_orjson"] = lib
    _LIB.append(lib)
    return lib


def __getattr__(name: str):
    if name in ("_orjson", "_OPTS", "CAN_PRERENDER_LINES"):
        _load()
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# JSON lets DEL, the C1 controls (U+009B is a CSI), bidirectional overrides and U+2028/9 stand unescaped in a
# string, and json and orjson write them so; a line shown on a terminal would then act on it. Every line this
# module writes has them as \uXXXX (the same string to every JSON reader), as the compiled writer
# (mqcore.h mq_json_str) does.
_ACTIVE = re.compile(f"[{ACTIVE_CLASS}]")
# A line is valid UTF-8, so an encoded one holds such a code point only where it holds one of these bytes (the
# first byte of its UTF-8 form): bytes.find on them is far faster than the regex.
_ACTIVE_LEADS = tuple(sorted({chr(a).encode()[:1] for lo, hi in ACTIVE_RANGES for a in range(lo, hi + 1)}))


def _u_escape(m: re.Match) -> str:
    return f"\\u{ord(m.group()):04x}"


def escape_active(s: str) -> str:
    """JSON text ``s`` with every code point of :data:`mqtool.sanitize.ACTIVE_RANGES` written as ``\\uXXXX`` (they
    occur only inside strings, where the escape means the same character)."""
    if s.isascii() and "\x7f" not in s:
        return s
    return _ACTIVE.sub(_u_escape, s)


def escape_active_bytes(b: bytes) -> bytes:
    """:func:`escape_active` of JSON text encoded as UTF-8 (one line or many)."""
    if b.isascii() and b"\x7f" not in b:
        return b
    for lead in _ACTIVE_LEADS:
        if lead in b:
            return escape_active(b.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")
    return b


def _default(o: Any):
    if isinstance(o, (bytes, bytearray, memoryview)):
        return binascii.b2a_base64(bytes(o), newline=False).decode("ascii")     # = base64.b64encode
    if isinstance(o, (set, frozenset, tuple)):
        return list(o)
    import datetime

    if isinstance(o, datetime.datetime):
        return o.isoformat()
    if hasattr(o, "to_dict"):
        return o.to_dict()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def dumps(obj: Any) -> str:
    lib = _load()
    if lib is None:
        return _json_dumps(obj)
    try:
        return escape_active(lib.dumps(obj, default=_default, option=lib.OPT_NON_STR_KEYS).decode("utf-8"))
    except TypeError:  # e.g. ints beyond 64 bits, or non-UTF-8 file names (surrogate escapes)
        return _json_dumps(obj)


def is_plain(obj: Any, depth: int = 0) -> bool:
    """Whether ``obj`` holds only values json and orjson write alike (so :func:`_json_dumps` gives the bytes
    :func:`dumps` gives without loading orjson): str, int, bool, None, and lists, tuples and str-keyed dicts
    of them. Not a float (the two format some differently), not a non-str key, not a value ``_default`` turns."""
    t = type(obj)
    if t is str or t is int or t is bool or obj is None:
        return True
    if depth > 16:
        return False
    if t is dict:
        return all(type(k) is str and is_plain(v, depth + 1) for k, v in obj.items())
    if t is list or t is tuple:
        return all(is_plain(v, depth + 1) for v in obj)
    return False


def _json_dumps(obj: Any) -> str:
    s = json.dumps(obj, default=_default, ensure_ascii=False, separators=(",", ":"))
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        # A non-UTF-8 file name (os gives it with surrogate escapes): write \udcXX escapes, so the line is
        # valid UTF-8 and Python's json.loads gives back the exact name (os.fsencode → original bytes).
        s = json.dumps(obj, default=_default, ensure_ascii=True, separators=(",", ":"))
    return escape_active(s)


def encode_row_fast(row: dict) -> bytes | None:
    """The line :func:`write_ndjson` writes for ``row`` (without its newline) when it uses orjson; None when
    it would not (no orjson, or a value only the careful writer takes). For code that renders lines from a
    template row (the Kafka compiled helper) and must match this writer byte for byte."""
    lib = _load()
    if lib is None:
        return None
    try:
        return escape_active_bytes(lib.dumps(row, default=_default, option=lib.OPT_NON_STR_KEYS))
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
    lib = _load()
    enc = lib.dumps
    opt = lib.OPT_NON_STR_KEYS | lib.OPT_APPEND_NEWLINE
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
            blocks.append(PreRenderedLines(escape_active_bytes(b"".join(out))))
            out.clear()
            n = 0
    if out:
        blocks.append(PreRenderedLines(escape_active_bytes(b"".join(out))))
    return blocks


class Direct:
    """NDJSON lines a producer writes itself (``dump commitlog --json`` with the compiled helper: its workers write
    their ranges straight to the output, in order). Only a caller that asked for them gets them
    (``DumpOptions.write_direct``). ``write(binary)`` writes every line to the binary stream (what was written to it
    before must be flushed first, which it does) and returns the row count; ``blocks()`` gives the same bytes in
    blocks (each valid until the next is asked for) to a caller that cannot hand over a stream. ``on_marked``,
    when the caller sets it before either, is called with each line that carries a :data:`DAMAGED_MARKS` mark
    (without its newline), in output order. Counts as ``write``'s return for the writer."""

    __slots__ = ("write", "blocks", "on_marked")

    def __init__(self, write, blocks):
        self.write, self.blocks, self.on_marked = write, blocks, None

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
