"""The binary layout of LiteMQ files, derived once from :mod:`formats.litemq`.

Every reader of LiteMQ bytes takes its layout from here (the record decoder in :mod:`records`, the walker in
:mod:`scan`, the consumequeue and index readers, rebuild-index), so a field is placed in one place:

* :data:`LENGTH` — the record's length prefix (``[u32 len][message]``, ``len`` excludes the prefix);
* :data:`ATTRS` / :data:`BORN` / :data:`TAIL` (and ``*_NAMES``) — the three fixed runs of a message (after
  the body, after ShardingKey, after StoreHost); :data:`FIELDS` gives each field's (offset, size) in its run;
* :data:`STRING_LENGTH_SIZE` / :data:`COUNT_SIZE` (:data:`COUNT`) — the widths of the length and count
  prefixes of the variable fields (strings; tags, keys, properties and the body), checked big-endian;
* :data:`MIN_MESSAGE_LEN` — the smallest encoded message (every string and list empty, padding included);
* :data:`CQ` / :data:`INDEX_ENTRY` (and ``*_NAMES``, ``*_FIELDS``) — the consumequeue and index entries;
* :func:`fingerprint` — a digest of all of it (equal layouts, equal fingerprints), as the other families'.

A schema the readers are not written for (a fixed field that is not a big-endian integer, a prefix of
another width) is a :class:`LayoutError` at import: the readers refuse to start rather than misread.
"""
from __future__ import annotations

import hashlib
import struct

from construct import SizeofError, Struct

from formats import litemq as F
from mqtool.schema_struct import exact_format, field_positions


class LayoutError(ValueError):
    """The LiteMQ schemas are not of the shape the readers are written for."""


def _names(fields) -> tuple[str, ...]:
    return tuple(f.name for f in fields)


def _fixed(fields) -> struct.Struct:
    try:
        return struct.Struct(exact_format(fields))
    except TypeError as e:
        raise LayoutError(str(e)) from None


def _fixed_size(sc) -> int | None:
    try:
        return sc.sizeof()
    except SizeofError:         # its size depends on the data
        return None


def _empty_size(sc) -> int:
    """Bytes a field takes with no content: its size when fixed, else the width of its length/count prefix."""
    size = _fixed_size(sc)
    if size is not None:
        return size
    for empty in ("", [], b""):
        try:
            return len(sc.build(empty))
        except Exception:
            continue
    raise LayoutError(f"field {sc.name!r}: neither fixed nor empty-buildable")


def _reads_big_endian(sc, width: int) -> bool:
    """The field's prefix, with one item (or one byte/character) in it, is ``1`` as a big-endian integer of
    ``width`` bytes: the decoder reads it that way."""
    for one in ("a", b"a", [""], [{"key": "", "value": ""}]):
        try:
            data = sc.build(one)
        except Exception:
            continue
        return data[:width] == (1).to_bytes(width, "big")
    return False


class RecordLayout:
    """What the readers need to know about where things are, from :mod:`formats.litemq`."""

    def __init__(self):
        length = F.Record.lengthfield
        if getattr(length, "fmtstr", None) != ">L":
            raise LayoutError("the record length prefix is not a big-endian u32")
        self.length = struct.Struct(length.fmtstr)
        self.runs = {name: (_fixed(fields), _names(fields)) for name, fields in (
            ("attrs", F.MESSAGE_ATTRS_FIELDS), ("born", F.MESSAGE_BORN_FIELDS), ("tail", F.MESSAGE_TAIL_FIELDS))}
        self.fields: dict[str, tuple[int, int]] = {}
        for fields in (F.MESSAGE_ATTRS_FIELDS, F.MESSAGE_BORN_FIELDS, F.MESSAGE_TAIL_FIELDS):
            self.fields.update(field_positions(Struct(*fields)))
        widths = {sc.name: _empty_size(sc) for sc in F.Message.subcons if _fixed_size(sc) is None}
        strings = {n: w for n, w in widths.items() if n not in ("Tags", "Keys", "Properties", "Body")}
        counts = {n: widths[n] for n in ("Tags", "Keys", "Properties", "Body")}
        if set(strings.values()) != {2} or set(counts.values()) != {4} or not all(
                _reads_big_endian(sc, widths[sc.name]) for sc in F.Message.subcons if sc.name in widths):
            raise LayoutError(f"length prefixes of a width or byte order the decoder does not read: {widths}")
        self.string_length_size, self.count_size = 2, 4
        self.count = struct.Struct(">I")           # u32 counts and body length, as checked just above
        self.min_message_len = sum(_empty_size(sc) for sc in F.Message.subcons)
        self.cq, self.cq_names = _fixed(F.CQ_ENTRY_FIELDS), _names(F.CQ_ENTRY_FIELDS)
        self.cq_fields = field_positions(F.CQEntry)
        self.index_entry, self.index_names = _fixed(F.INDEX_ENTRY_FIELDS), _names(F.INDEX_ENTRY_FIELDS)
        self.index_fields = field_positions(F.IndexEntry)
        self._fingerprint = None

    def fingerprint(self) -> str:
        """A short digest of everything this layout says: equal layouts, equal fingerprints."""
        if self._fingerprint is None:
            facts = repr((self.length.format, self.count.format, sorted((k, s.format, n) for k, (s, n) in self.runs.items()),
                          sorted(self.fields.items()), self.string_length_size, self.count_size,
                          self.min_message_len, self.cq.format, self.cq_names, self.index_entry.format,
                          self.index_names, F.MESSAGE_MAGIC, F.TRAILING_PAD))
            self._fingerprint = hashlib.sha256(facts.encode()).hexdigest()[:16]
        return self._fingerprint


LAYOUT = RecordLayout()

# ---- module-level names for the hot paths -------------------------------------------------------------

LENGTH = LAYOUT.length
COUNT = LAYOUT.count                          # tags/keys/properties counts, body length
ATTRS, ATTRS_NAMES = LAYOUT.runs["attrs"]
BORN, BORN_NAMES = LAYOUT.runs["born"]
TAIL, TAIL_NAMES = LAYOUT.runs["tail"]
FIELDS = LAYOUT.fields                        # name -> (offset, size) inside its fixed run
STRING_LENGTH_SIZE = LAYOUT.string_length_size
COUNT_SIZE = LAYOUT.count_size
MIN_MESSAGE_LEN = LAYOUT.min_message_len
CQ, CQ_NAMES, CQ_FIELDS = LAYOUT.cq, LAYOUT.cq_names, LAYOUT.cq_fields
INDEX_ENTRY, INDEX_NAMES, INDEX_FIELDS = LAYOUT.index_entry, LAYOUT.index_names, LAYOUT.index_fields


def fingerprint() -> str:
    """:meth:`RecordLayout.fingerprint` of the layout the readers use."""
    return LAYOUT.fingerprint()
