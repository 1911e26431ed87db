"""Walk a construct schema over bytes field by field, for ``mqtool inspect``.

Every field of the schema becomes a :class:`Field`: its path (``BORNHOST.addr``, ``records[2].headers[0].headerKey``),
absolute position, size, raw bytes (only the first/last bytes of a large field are kept), decoded value and
nesting depth. Composite fields (structs, arrays, length-prefixed parts, adapted structs) get a row of their own
with their parts one level deeper. The walk reads the schema itself (``Struct.subcons``, ``Prefixed``,
``Array``, ``IfThenElse``, ``Const``...): no layout is written here.

Where the bytes stop matching the schema (a read past the end of the data, a length that does not fit, a
constant that differs) the walk stops: the failing field gets a row with ``ok=False`` and :attr:`Walker.broken`
says which field, where and why. Lengths are checked against the bytes left before anything is read, and a
large field is never copied whole (bounded memory on huge bodies).

Family engines (``mqtool/<family>/inspect.py``) add their checks to the rows; the renderer draws them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from construct import (Adapter, Array, Bytes, Const, ConstructError, Container, FocusedSeq, GreedyBytes, IfThenElse,
                       Pass, Prefixed, Rebuild, Default, Renamed, StringEncoded, Struct)
from construct.core import evaluate

#: a field larger than this keeps only its first HEAD_KEEP and last TAIL_KEEP bytes for the hex view
HEAD_KEEP, TAIL_KEEP = 96, 32
#: a bytes value larger than this is not decoded into ``value`` (its hex head/tail are still shown)
VALUE_CAP = 4096
#: at most this many rows per walk (a count field claiming millions of items ends the walk with a note)
MAX_ROWS = 20_000


@dataclass
class Field:
    path: str
    name: str
    position: int
    size: int = 0
    depth: int = 0
    value: Any = None
    head: bytes = b""              # the field's first bytes (all of them when size <= HEAD_KEEP + TAIL_KEEP)
    tail: bytes = b""              # its last bytes when the middle is left out
    ok: bool | None = None          # None: not a checked field
    expected: Any = None
    actual: Any = None
    code: str | None = None         # the finding code `mqtool verify` gives when this check fails
    note: str | None = None
    space: str = "file"             # "file": position is in the file; else the name of the buffer it is in
    composite: bool = False
    target: bool = False            # the record the user asked for (Kafka: one record of a batch)

    @property
    def end(self) -> int:
        return self.position + self.size

    @property
    def hex(self) -> str:
        if not self.tail:
            return self.head.hex()
        return f"{self.head.hex()}…{self.tail.hex()}"

    def check(self, ok: bool, expected=None, actual=None, code: str | None = None, note: str | None = None):
        """Mark this field as checked (a failed check is never overwritten by a later passing one)."""
        if self.ok is False and ok:
            return self
        self.ok, self.expected, self.actual = bool(ok), expected, actual
        if code:
            self.code = code
        if note:
            self.note = note
        return self

    def to_row(self, index: int) -> dict:
        row = {"kind": "field", "index": index, "path": self.path, "name": self.name, "depth": self.depth,
               "position": self.position, "size": self.size, "hex": self.hex,
               "hex_complete": not self.tail and len(self.head) == self.size, "value": _jsonable(self.value)}
        if self.space != "file":
            row["space"] = self.space
        if self.ok is not None:
            row.update(ok=self.ok, expected=self.expected, actual=self.actual)
            if self.code:
                row["code"] = self.code
        if self.note:
            row["note"] = self.note
        if self.target:
            row["target"] = True
        return row


class Broken(Exception):
    """The bytes stop matching the schema at ``path`` (``position``): ``reason``."""

    def __init__(self, path: str, position: int, reason: str):
        super().__init__(reason)
        self.path, self.position, self.reason = path, position, reason

    def to_dict(self) -> dict:
        return {"field": self.path, "position": self.position, "reason": self.reason}


class _View:
    """A read-only stream over ``buf[start:end]`` whose positions are those of ``buf`` (construct reads it)."""

    def __init__(self, buf, start: int, end: int):
        self.buf, self.pos, self.end = buf, start, end

    def read(self, n: int | None = -1) -> bytes:
        if n is None or n < 0:
            n = self.end - self.pos
        n = max(0, min(n, self.end - self.pos))
        data = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return data

    def tell(self) -> int:
        return self.pos

    def seek(self, off: int, whence: int = 0) -> int:
        self.pos = off if whence == 0 else self.pos + off if whence == 1 else self.end + off
        return self.pos

    def left(self) -> int:
        return self.end - self.pos


def _text(data: bytes, encoding: str = "utf-8") -> tuple[str, bool]:
    """(text, clean): bytes that are not valid ``encoding`` come out as \\xNN escapes."""
    try:
        return data.decode(encoding), True
    except UnicodeDecodeError:
        return data.decode(encoding, errors="backslashreplace"), False


class Walker:
    """Field-by-field parse of one record. ``hooks`` maps a field path to ``fn(walker, field, ctx)`` run right
    after that field is read (a family adds nested fields or checks there); ``flatten`` names composite fields
    whose parts are shown at the composite's own depth (no row for the composite itself)."""

    def __init__(self, buf, start: int, end: int, space: str = "file",
                 hooks: dict[str, Callable] | None = None, flatten: frozenset = frozenset()):
        self.buf, self.space = buf, space
        self.view = _View(buf, start, end)
        self.fields: list[Field] = []
        self.broken: Broken | None = None
        self.hooks = hooks or {}
        self.flatten = flatten

    # ---- entry points ------------------------------------------------------------------------------------

    def walk(self, schema, depth: int = 0, prefix: str = "", ctx=None):
        """Walk ``schema`` from the current position; its parts at ``depth`` (the schema itself has no row).
        Returns the parsed container, or None when the walk broke (see :attr:`broken`)."""
        try:
            return self._composite_parts(schema, prefix, depth, ctx if ctx is not None else Container())
        except Broken as b:
            if self.broken is None:
                self.broken = b
            return None

    def seek(self, position: int, end: int | None = None) -> None:
        self.view.pos = position
        if end is not None:
            self.view.end = end

    def add(self, path: str, position: int, size: int, depth: int, value=None, raw: bool = True, **kw) -> Field:
        """A row a family adds itself (e.g. one property pair), with its raw bytes from the buffer."""
        f = Field(path, path.rpartition(".")[2], position, size, depth, value, space=self.space, **kw)
        if raw:
            self._keep_raw(f)
        self._append(f)
        return f

    # ---- the walk ---------------------------------------------------------------------------------------

    def _append(self, f: Field) -> None:
        if len(self.fields) >= MAX_ROWS:
            raise Broken(f.path, f.position, f"more than {MAX_ROWS} fields: the rest is not shown")
        self.fields.append(f)

    def _keep_raw(self, f: Field) -> None:
        if f.size <= HEAD_KEEP + TAIL_KEEP:
            f.head = bytes(self.buf[f.position:f.end])
        else:
            f.head = bytes(self.buf[f.position:f.position + HEAD_KEEP])
            f.tail = bytes(self.buf[f.end - TAIL_KEEP:f.end])

    def _fail(self, path: str, position: int, depth: int, reason: str, size: int = 0, **kw) -> Broken:
        """Add the failing field's row and return the Broken to raise."""
        f = Field(path, path.rpartition(".")[2], position, max(0, size), depth, space=self.space, ok=False,
                  note=reason, **kw)
        self._keep_raw(f)
        self.fields.append(f)
        return Broken(path, position, reason)

    def _node(self, sc, name: str, path: str, depth: int, ctx):
        while True:
            if isinstance(sc, Renamed):
                name = sc.name or name
                sc = sc.subcon
            elif isinstance(sc, IfThenElse):
                try:
                    sc = sc.thensubcon if evaluate(sc.condfunc, ctx) else sc.elsesubcon
                except Exception as e:        # a condition over a field that is missing: a schema bug
                    raise self._fail(path, self.view.pos, depth, f"condition cannot be evaluated: {e}") from None
            elif isinstance(sc, (Rebuild, Default)):
                sc = sc.subcon
            else:
                break
        start = self.view.pos
        if sc is Pass or type(sc).__name__ == "Pass":
            f = Field(path, name, start, 0, depth, None, space=self.space, note="absent")
            self._append(f)
            return self._hook(path, f, ctx, None)
        if isinstance(sc, Const):
            return self._const(sc, name, path, depth, ctx)
        if isinstance(sc, (Struct, FocusedSeq, Array, Prefixed)) or (
                isinstance(sc, (Adapter, StringEncoded)) and not _is_leaf(sc.subcon)):
            return self._composite(sc, name, path, depth, ctx)
        return self._leaf(sc, name, path, depth, ctx)

    def _hook(self, path: str, f: Field, ctx, value):
        fn = self.hooks.get(path)
        if fn is not None:
            fn(self, f, ctx)
        return value

    def _composite(self, sc, name: str, path: str, depth: int, ctx):
        start = self.view.pos
        flat = path in self.flatten
        f = None
        if not flat:
            f = Field(path, name, start, 0, depth, space=self.space, composite=True)
            self._append(f)
        try:
            value = self._composite_parts(sc, path, depth if flat else depth + 1, ctx)
        finally:
            if f is not None:
                f.size = self.view.pos - start
                self._keep_raw(f)
        if f is not None:
            f.value = _summary(value)
        return self._hook(path, f, ctx, value)

    def _composite_parts(self, sc, path: str, depth: int, ctx):
        """Walk the parts of a composite construct; returns its parsed value."""
        pre = f"{path}." if path else ""
        if isinstance(sc, Renamed):
            return self._composite_parts(sc.subcon, path, depth, ctx)
        if isinstance(sc, (Struct, FocusedSeq)):
            obj = Container()
            c = Container(_=ctx, _params=ctx.get("_params"), _root=None, _parsing=True, _building=False,
                          _sizing=False, _io=self.view)
            c._root = ctx.get("_root", c) if isinstance(ctx, dict) else c
            focus = evaluate(sc.parsebuildfrom, c) if isinstance(sc, FocusedSeq) else None
            for sub in sc.subcons:
                if focus is not None and sub.name == focus and isinstance(
                        _unwrap(sub), Array):
                    v = self._array_items(_unwrap(sub), path, depth, c)      # items of a counted array
                else:
                    v = self._node(sub, sub.name or "", f"{pre}{sub.name}" if sub.name else path, depth, c)
                if sub.name:
                    obj[sub.name] = v
                    c[sub.name] = v
            return obj.get(focus) if focus is not None else obj
        if isinstance(sc, Array):
            return self._array_items(sc, path, depth, ctx)
        if isinstance(sc, Prefixed):
            return self._prefixed(sc, path, depth, ctx)
        if isinstance(sc, StringEncoded):
            raw = self._composite_parts(sc.subcon, path, depth, ctx)
            text, clean = _text(raw or b"", sc.encoding)
            if not clean and self.fields:
                self._last_composite(path).note = f"not {sc.encoding}"
            return text
        if isinstance(sc, Adapter):
            obj = self._composite_parts(sc.subcon, path, depth, ctx)
            try:
                return sc._decode(obj, ctx, path)
            except Exception as e:
                self._last_composite(path).note = f"does not decode: {e}"
                return obj
        return self._node(sc, path.rpartition(".")[2], path, depth, ctx)

    def _last_composite(self, path: str) -> Field:
        for f in reversed(self.fields):
            if f.path == path:
                return f
        return self.fields[-1]

    def _array_items(self, sc: Array, path: str, depth: int, ctx):
        try:
            count = evaluate(sc.count, ctx)
        except Exception as e:
            raise self._fail(path, self.view.pos, depth, f"item count cannot be evaluated: {e}") from None
        if not isinstance(count, int) or count < 0:
            raise self._fail(path, self.view.pos, depth, f"item count {count} is negative")
        if count > self.view.left():
            raise self._fail(path, self.view.pos, depth,
                             f"item count {count} exceeds the {self.view.left()} bytes left")
        items = []
        for i in range(count):
            items.append(self._node(sc.subcon, f"{path.rpartition('.')[2]}[{i}]", f"{path}[{i}]", depth, ctx))
        return items

    def _prefixed(self, sc: Prefixed, path: str, depth: int, ctx):
        pre = f"{path}." if path else ""
        at = self.view.pos
        n = self._leaf(sc.lengthfield, "length", f"{pre}length", depth, ctx)
        lf = self.fields[-1]
        left = self.view.left()
        if not isinstance(n, int) or n < 0:
            lf.check(False, ">=0", n, note="a negative length")
            raise Broken(lf.path, lf.position, f"length {n} is negative")
        over = n > left
        if over:        # walk the parts in the bytes there are: the first one that runs out is the break
            lf.check(False, f"<={left}", n, note="length does not fit in the bytes left")
            if _unwrap(sc.subcon) is GreedyBytes:          # plain bytes: they are what runs out
                raise self._fail(f"{pre}data", self.view.pos, depth, f"needs {n} bytes, {left} left", size=left)
        outer_end = self.view.end
        inner_end = outer_end if over else self.view.pos + n
        self.view.end = inner_end
        try:
            inner = _unwrap(sc.subcon)
            if isinstance(inner, (Struct, FocusedSeq)) and not getattr(sc.subcon, "name", None):
                value = self._composite_parts(inner, path, depth, ctx)      # its fields beside the length
            else:
                value = self._node(sc.subcon, "data", f"{pre}data", depth, ctx)
            used = self.view.pos - (at + lf.size)
            if over:
                raise Broken(lf.path, lf.position, f"length {n} runs past the {left} bytes left")
            lf.check(used == n, used, n, note=None if used == n else f"the parts use {used} of {n} bytes")
        finally:
            self.view.end = outer_end
            self.view.pos = max(self.view.pos, min(inner_end, outer_end))
        return value

    def _const(self, sc: Const, name: str, path: str, depth: int, ctx):
        value = self._leaf(sc.subcon, name, path, depth, ctx)
        f = self.fields[-1]
        f.check(value == sc.value, _show(sc.value), _show(value))
        if value != sc.value:
            raise Broken(path, f.position, f"{name} is {_show(value)}, the schema wants {_show(sc.value)}")
        return value

    def _leaf(self, sc, name: str, path: str, depth: int, ctx):
        start, left = self.view.pos, self.view.left()
        inner = _unwrap(sc)
        if isinstance(inner, Bytes) or inner is GreedyBytes or type(inner).__name__ == "GreedyBytes":
            if isinstance(inner, Bytes):
                try:
                    n = evaluate(inner.length, ctx)
                except Exception as e:
                    raise self._fail(path, start, depth, f"length cannot be evaluated: {e}") from None
            else:
                n = left
            if not isinstance(n, int) or n < 0:
                raise self._fail(path, start, depth, f"length {n} is negative")
            if n > left:
                broken = self._fail(path, start, depth, f"needs {n} bytes, {left} left", size=left)
                if path in self.hooks:          # the family may still walk what is there (e.g. Kafka records)
                    self.view.pos = start + left
                    self._hook(path, self.fields[-1], ctx, None)
                raise self.broken or broken
            f = Field(path, name, start, n, depth, space=self.space)
            self._keep_raw(f)
            self.view.pos = start + n
            value = bytes(self.buf[start:start + n]) if n <= VALUE_CAP else None
            if value is None:
                f.note = f"{n} bytes (not decoded here: larger than {VALUE_CAP})"
            f.value = value
            self._append(f)
            return self._hook(path, f, ctx, value)
        try:
            value = sc._parsereport(self.view, ctx, path)
        except ConstructError as e:
            raise self._fail(path, start, depth, _reason(e, left), size=min(left, _size_or(sc, left))) from None
        f = Field(path, name, start, self.view.pos - start, depth, value, space=self.space)
        self._keep_raw(f)
        self._append(f)
        return self._hook(path, f, ctx, value)


def _unwrap(sc):
    while isinstance(sc, (Renamed, Rebuild, Default)):
        sc = sc.subcon
    return sc


def _is_leaf(sc) -> bool:
    """A construct read as one value: no struct, array or length prefix inside it."""
    sc = _unwrap(sc)
    if isinstance(sc, (Struct, FocusedSeq, Array, Prefixed)):
        return False
    if isinstance(sc, (Adapter, StringEncoded)):
        return _is_leaf(sc.subcon)
    return True


def _size_or(sc, default: int) -> int:
    try:
        return sc.sizeof()
    except Exception:
        return default


def _reason(e: ConstructError, left: int) -> str:
    msg = str(e).splitlines()[-1] if str(e) else type(e).__name__
    if "stream read less" in msg or "StreamError" in type(e).__name__:
        return f"the data ends here ({left} bytes left)"
    return msg


def _show(v):
    return f"0x{v & 0xFFFFFFFF:08X}" if isinstance(v, int) and not isinstance(v, bool) else v


def _jsonable(value):
    """Bytes as text (invalid UTF-8 as \\xNN escapes); containers as plain dicts and lists."""
    if isinstance(value, (bytes, bytearray)):
        return _text(bytes(value))[0]
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items() if not str(k).startswith("_")}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    return value


def _summary(value):
    """The value of a composite row: text and scalars as they are, collections as a count."""
    if isinstance(value, (str, int, float)) or value is None:
        return value
    if isinstance(value, list):
        return f"{len(value)} items"
    return None


# ---- one inspected record ------------------------------------------------------------------------------------

#: the hex view keeps at most this many bytes from the start of a record and from its end
SPAN_HEAD, SPAN_TAIL = 2048, 256


@dataclass
class Inspection:
    """One record walked field by field: what ``mqtool inspect`` shows (NDJSON rows or the hex view)."""

    family: str
    file: str
    position: int                   # where the record starts in ``file``
    offset: int | None              # the store offset asked for / of the record (RocketMQ/LiteMQ: global offset)
    kind: str                       # message, blank, batch, legacy-message, record
    size: int                       # bytes of the record span shown (its own size when it frames)
    fields: list[Field] = field(default_factory=list)
    broken: Broken | None = None
    summary: dict = field(default_factory=dict)     # family facts for the summary row (topic, keys, codec...)
    head: bytes = b""               # the span's first SPAN_HEAD bytes
    tail: bytes = b""               # its last SPAN_TAIL bytes when the span is longer than both
    tail_at: int = 0                # position of ``tail`` in the file
    notes: list[str] = field(default_factory=list)

    def keep_span(self, buf, end: int) -> None:
        """Keep the bytes of [position, end) for the hex view (bounded: first and last bytes only)."""
        end = max(self.position, min(end, len(buf)))
        self.size = end - self.position
        if self.size <= SPAN_HEAD + SPAN_TAIL:
            self.head = bytes(buf[self.position:end])
        else:
            self.head = bytes(buf[self.position:self.position + SPAN_HEAD])
            self.tail_at = end - SPAN_TAIL
            self.tail = bytes(buf[self.tail_at:end])

    @property
    def failed(self) -> list[Field]:
        return [f for f in self.fields if f.ok is False]

    @property
    def ok(self) -> bool:
        return self.broken is None and not self.failed

    def summary_row(self) -> dict:
        checked = [f for f in self.fields if f.ok is not None]
        first = next((f for f in self.fields if f.ok is False), None)
        row = {"kind": "record", "family": self.family, "file": self.file, "position": self.position,
               "offset": self.offset, "record_kind": self.kind, "size": self.size, "fields": len(self.fields),
               "checked": len(checked), "failed": len(self.failed), "ok": self.ok,
               "first_failure": None if first is None else {"field": first.path, "position": first.position,
                                                             "reason": first.note or _failure_text(first)},
               "break": None if self.broken is None else self.broken.to_dict()}
        row.update({k: _jsonable(v) for k, v in self.summary.items()})
        if self.notes:
            row["notes"] = list(self.notes)
        return row

    def rows(self):
        for i, f in enumerate(self.fields):
            yield f.to_row(i)
        yield self.summary_row()


def _failure_text(f: Field) -> str:
    return f"expected {f.expected}, found {f.actual}"
