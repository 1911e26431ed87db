"""The binary layout of a RocketMQ commitlog unit, derived once from :mod:`formats.rocketmq`.

Every reader of units takes its layout from here — the Python decoders (:mod:`records`), the fast lanes of
``verify`` and ``rebuild-index`` and the configuration of the compiled core — so a field is placed, a length
is framed and a property string is split in exactly one place:

* :data:`FIXED` / :data:`FIXED_NAMES` — the fixed part (TOTALSIZE .. BODYLENGTH) of a unit with IPv4 hosts,
  which v1 and v2 share; :data:`FIELDS` gives each field's (offset, size); :func:`narrow` a struct over the
  same bytes that unpacks only some fields; :func:`head_fields` the same table for any host variant.
* :func:`frame_tail` — the variable tail rule (BODY, TOPICLENGTH, TOPIC, PROPERTIESLENGTH, PROPERTIES): the
  signed lengths, each fitting in TOTALSIZE, and TOTALSIZE equal to the length the fields give.
* :func:`property_pairs` / :func:`property_dict` — ``MessageDecoder#string2messageProperties``.
* :func:`native_config` — the same facts by field name for the compiled helpers, with a :func:`fingerprint`.
"""
from __future__ import annotations

import struct

from formats import rocketmq as F
from mqtool import schemacache
from mqtool import fastcrc, native
from mqtool.errors import DecodeError
from mqtool.schemacache import sha256

# ---- the layout object ----------------------------------------------------------------------------------

HOST_V6_FLAGS = F.BORNHOST_V6_FLAG | F.STOREHOSTADDRESS_V6_FLAG
_HOST_VARIANTS = (0, F.BORNHOST_V6_FLAG, F.STOREHOSTADDRESS_V6_FLAG, HOST_V6_FLAGS)
_TAIL = ["BODYLENGTH", "BODY", "TOPICLENGTH", "TOPIC", "PROPERTIESLENGTH", "PROPERTIES"]
_SIGNED = ("b", "h", "i", "l", "q")


class LayoutError(ValueError):
    """The message schemas are not of the shape the readers are written for (the compiled core then stays
    off and the Python readers refuse to start)."""


def _choose(sys_flag: int):
    """The branch of each sysFlag-conditional field (the host variants) for this ``sys_flag``."""
    ctx = {"SYSFLAG": sys_flag}
    return lambda ite: ite.thensubcon if ite.condfunc(ctx) else ite.elsesubcon


class MessageLayout:
    """Everything the readers need to know about where things are in a unit, from the v1/v2 schemas.

    ``fixed``/``names``: the struct of the fixed part TOTALSIZE .. BODYLENGTH with IPv4 hosts (v1 and v2
    share it); ``fields``: name -> (offset, size) of that part; ``heads``: the same table for every
    (version, host variant); ``topic_length_size``: version -> width of TOPICLENGTH; ``properties_length_size``.
    """

    def __init__(self, schemas: dict):
        from mqtool.schema_struct import field_positions, fixed_prefix_fields, fixed_prefix_format

        self.schemas = schemas
        v1 = schemas["v1"]
        self.fixed, self.names = fixed_prefix_format(v1, stop_before="BODY")
        self.codes = dict(fixed_prefix_fields(v1, stop_before="BODY"))
        self.fields = field_positions(v1, stop_before="BODY")
        self.heads = {(v, flags): field_positions(sc, _choose(flags), stop_before="BODY")
                      for v, sc in schemas.items() for flags in _HOST_VARIANTS}
        self.topic_length_size, props_sizes = {}, set()
        for v, sc in schemas.items():
            subs = {s.name: s for s in sc.subcons}
            order = [s.name for s in sc.subcons]
            if "BODYLENGTH" not in order or order[order.index("BODYLENGTH"):] != _TAIL:
                raise LayoutError(f"{v}: the unit does not end {', '.join(_TAIL)}")
            if fixed_prefix_format(sc, stop_before="BODY")[0].format != self.fixed.format:
                raise LayoutError(f"{v}: its fixed part differs from v1's")
            for name in ("TOPICLENGTH", "PROPERTIESLENGTH"):
                if getattr(subs[name].subcon, "fmtstr", "  ")[1] not in _SIGNED:
                    raise LayoutError(f"{v}: {name} is not a signed integer")
            self.topic_length_size[v] = subs["TOPICLENGTH"].sizeof()
            props_sizes.add(subs["PROPERTIESLENGTH"].sizeof())
        if props_sizes != {2} or not all(n in (1, 2) for n in self.topic_length_size.values()):
            raise LayoutError("length fields of a width the tail framing does not read")
        if self.names[-1] != "BODYLENGTH" or not all(c in _SIGNED for n, c in self.codes.items() if "." not in n):
            raise LayoutError("the fixed part is not signed integers up to BODYLENGTH")
        self.properties_length_size = 2
        self._fingerprint = None

    def facts(self) -> tuple:
        """What this layout says, as plain values (the schema cache holds them: :meth:`from_facts`)."""
        return (self.fixed.format, tuple(self.names), self.codes, self.fields, self.heads, self.topic_length_size,
                self.properties_length_size)

    @classmethod
    def from_facts(cls, facts: tuple) -> "MessageLayout":
        """The layout :meth:`facts` describes (no schema object needed)."""
        lay = cls.__new__(cls)
        fmt, names, lay.codes, lay.fields, lay.heads, lay.topic_length_size, lay.properties_length_size = facts
        lay.fixed, lay.names, lay.schemas, lay._fingerprint = struct.Struct(fmt), list(names), None, None
        return lay

    def at(self, names) -> tuple[tuple[int, int], ...]:
        """(offset, size) of each of ``names`` in the fixed part, in the order given."""
        return tuple(self.fields[n] for n in names)

    def fingerprint(self) -> str:
        """A short digest of everything this layout says: equal layouts, equal fingerprints."""
        if self._fingerprint is None:
            self._fingerprint = self._digest()
        return self._fingerprint

    def _digest(self) -> str:
        facts = repr((sorted(self.heads.items()), sorted(self.topic_length_size.items()),
                      self.properties_length_size, _TAIL, sorted(F.VERSION_MAGIC.items()), F.BLANK_MAGIC_CODE,
                      F.MIN_MESSAGE_SIZE))
        return sha256(facts.encode()).hexdigest()[:16]


# derived from the schemas, or (same facts) from the schema cache while they are unchanged (mqtool.schemacache)
LAYOUT = MessageLayout.from_facts(schemacache.derive(("formats.rocketmq", "MessageLayout"),
                                                     lambda: MessageLayout(F.MESSAGE_SCHEMAS).facts()))
_current: list = [None, None]


def current() -> MessageLayout | None:
    """The layout of the schemas :mod:`formats.rocketmq` holds now, or None when they do not derive (what the
    compiled core checks before it is configured: a drifted schema turns it off). While the schema objects
    have not been built, they are the unchanged sources the cache was checked against: that is :data:`LAYOUT`."""
    if not schemacache.is_loaded(F):
        return LAYOUT
    key = (F.MessageV1, F.MessageV2)
    if _current[0] != key:
        try:
            lay = MessageLayout({"v1": F.MessageV1, "v2": F.MessageV2})
        except LayoutError:
            lay = None
        _current[:] = [key, lay]
    return _current[1]


# ---- module-level names for the hot Python paths ------------------------------------------------------

FIXED, FIXED_NAMES = LAYOUT.fixed, LAYOUT.names
FIXED_SIZE = FIXED.size
FIELDS: dict[str, tuple[int, int]] = LAYOUT.fields          # name -> (offset, size)
CODES: dict[str, str] = LAYOUT.codes                        # name -> struct code
PREFIX, _ = schemacache.prefix_format(F, "UnitPrefix")      # TOTALSIZE, MAGICCODE: what a scanner reads first
TOPIC_LENGTH_SIZE = LAYOUT.topic_length_size
PROPERTIES_LENGTH_SIZE = LAYOUT.properties_length_size
MAGIC_TOPIC_LENGTH_SIZE = {F.VERSION_MAGIC[v]: n for v, n in TOPIC_LENGTH_SIZE.items()}
TAIL_NAMES = _TAIL


def head_fields(sys_flag: int = 0, version: str = "v1") -> dict[str, tuple[int, int]]:
    """{field: (offset, size)} of the fixed part for the host variant ``sys_flag`` selects."""
    return LAYOUT.heads[(version, sys_flag & HOST_V6_FLAGS)]


def _head_format(version: str, flags: int) -> str:
    from mqtool.schema_struct import fixed_prefix_format

    return fixed_prefix_format(F.MESSAGE_SCHEMAS[version], _choose(flags), stop_before="BODY")[0].format


# the fixed part of every (version, host variant) as a struct: the fields of FIXED, hosts 4 or 16 bytes wide
_HEADS = {(v, flags): struct.Struct(schemacache.derive(("formats.rocketmq", "head_format", v, flags),
                                                       lambda v=v, flags=flags: _head_format(v, flags)))
          for v in TOPIC_LENGTH_SIZE for flags in _HOST_VARIANTS}


def head_format(sys_flag: int, version: str = "v1") -> struct.Struct:
    """The struct of the fixed part (TOTALSIZE .. BODYLENGTH, the fields of :data:`FIXED_NAMES`) for the host
    variant ``sys_flag`` selects."""
    return _HEADS[(version, sys_flag & HOST_V6_FLAGS)]


def body_start(sys_flag: int, version: str = "v1") -> int:
    """Offset of BODY inside a unit of this host variant."""
    at_, size = head_fields(sys_flag, version)["BODYLENGTH"]
    return at_ + size


def at(names) -> tuple[tuple[int, int], ...]:
    """(offset, size) of each of ``names`` in :data:`FIXED`, in the order given."""
    return LAYOUT.at(names)


def narrow(names) -> struct.Struct:
    """A struct over the bytes of :data:`FIXED` that unpacks only ``names`` (in schema order)."""
    def compute():
        from mqtool.schema_struct import selected_format

        return selected_format(F.MessageV1, list(names), stop_before="BODY").format

    return struct.Struct(schemacache.derive(("formats.rocketmq", "narrow", tuple(names)), compute))


# ---- variable tail ------------------------------------------------------------------------------------

class DecodeFailure(DecodeError):
    """A unit cannot be framed at this position (``code`` is a finding code)."""

    def __init__(self, code: str, message: str, expected=None, actual=None):
        super().__init__(message)
        self.code, self.message, self.expected, self.actual = code, message, expected, actual


def frame_tail(buf, pos: int, p: int, stop: int, tl_size: int) -> tuple[int, int, int]:
    """The variable tail of the unit at ``pos`` that ends at ``stop`` (``pos + TOTALSIZE``, already checked
    to lie inside the data), TOPICLENGTH at ``p`` and ``tl_size`` bytes wide (:data:`TOPIC_LENGTH_SIZE`).

    Returns (topic start, topic length, properties start); the properties run to ``stop``. Raises
    :class:`DecodeFailure` with the first rule broken: a length field past TOTALSIZE, a negative length (Java
    reads them signed), a length that does not fit, or TOTALSIZE unequal to the length the fields give.
    """
    tp = p + tl_size
    if tp > stop:
        raise DecodeFailure("bad-length-field", "topic length runs past TOTALSIZE")
    if tl_size == 1:
        tl = buf[p]
        if tl >= 0x80:
            tl -= 0x100
    else:
        tl = (buf[p] << 8) | buf[p + 1]
        if tl >= 0x8000:
            tl -= 0x10000
    pp = tp + tl + 2
    if tl < 0 or pp > stop:
        raise DecodeFailure("bad-length-field", f"TOPICLENGTH {tl} does not fit in TOTALSIZE {stop - pos}",
                            f"<={stop - tp - 2}", tl)
    pl = (buf[pp - 2] << 8) | buf[pp - 1]
    if pl >= 0x8000:
        pl -= 0x10000
    if pl < 0 or pp + pl > stop:
        raise DecodeFailure("bad-length-field", f"PROPERTIESLENGTH {pl} does not fit in TOTALSIZE {stop - pos}",
                            f"<={stop - pp}", pl)
    if pp + pl != stop:
        expected, total = pp + pl - pos, stop - pos
        raise DecodeFailure("size-mismatch", f"TOTALSIZE {total} differs from the length computed from the "
                            f"fields ({expected})", expected, total)
    return tp, tl, pp


# ---- properties ---------------------------------------------------------------------------------------

_NV, _PS = F.NAME_VALUE_SEPARATOR, F.PROPERTY_SEPARATOR


def property_pairs(text: str) -> list[tuple[str, str]]:
    """``MessageDecoder#string2messageProperties`` keeping every pair in order (duplicates too).

    Split on \\x02 (a trailing one is optional); the name ends at the first \\x01; a pair survives when both
    its name and its value are non-empty (which implies the broker's "segment of at least 3 chars" rule).
    """
    out = []
    for seg in text.split(_PS):
        k, _, v = seg.partition(_NV)
        if k and v:
            out.append((k, v))
    return out


def property_dict(text: str) -> tuple[dict[str, str], int]:
    """(name -> value with the last one winning, as the broker keeps them; the number of pairs)."""
    pairs = property_pairs(text)
    return dict(pairs), len(pairs)


# ---- the layout for the compiled core -----------------------------------------------------------------

def fingerprint() -> str:
    """:meth:`MessageLayout.fingerprint` of the layout the Python readers use."""
    return LAYOUT.fingerprint()


def native_ok() -> bool:
    """Whether the compiled core may run: the schemas in :mod:`formats.rocketmq` still derive to the layout it
    is configured with (:data:`LAYOUT`, by fingerprint). A schema that drifted from it, or no longer derives,
    turns every RocketMQ helper off; the Python readers give the same answers without it."""
    cur = current()
    return cur is not None and cur.fingerprint() == LAYOUT.fingerprint()


def native_config() -> tuple[dict[str, tuple[int, int]], dict[str, int]]:
    """What ``rmqcore.configure`` gets, by name: {field name: (offset, size)} of the fixed part and the framing
    constants (TOPICLENGTH widths, PROPERTIESLENGTH width, magic codes, minimum size, IPv6 host flags)."""
    lay = current()
    return dict(lay.fields), {
        "tl_v1": lay.topic_length_size["v1"], "tl_v2": lay.topic_length_size["v2"],
        "pl_size": lay.properties_length_size, "magic_v1": F.MESSAGE_MAGIC_CODE_V1,
        "magic_v2": F.MESSAGE_MAGIC_CODE_V2, "blank_magic": F.BLANK_MAGIC_CODE, "min_size": F.MIN_MESSAGE_SIZE,
        "v6_flags": HOST_V6_FLAGS}


_core: dict[str, object] = {}
CRC_KEEP = object()                # native_core()'s default: the CRC-32 chosen last (at first "auto")
_crc_choice: list = ["auto"]


def native_core(crc=CRC_KEEP):
    """The compiled RocketMQ core (``mqtool._native.rmqcore``) configured with :func:`native_config`, or None:
    not built, switched off (``MQTOOL_NATIVE``, :mod:`mqtool.native`), a schema that drifted (:func:`native_ok`),
    or a layout whose fingerprint is not the one the C code was written for (its ``configure`` refuses). Every
    RocketMQ part (verify, rebuild, dump, decode) runs only on a configured core.

    ``crc``: the CRC-32 the core checks bodies with: "auto" (the core's own when the CPU lets it fold with
    carry-less multiplication, else ISA-L called back when installed, else the core's slicing-by-8), a callable
    equal to ``zlib.crc32``, or None (the core's own: folding or slicing-by-8). The choice stays until another
    one is given (the default keeps it)."""
    if crc is not CRC_KEEP:
        _crc_choice[0] = crc
    crc = _crc_choice[0]
    if not native_ok():
        return None
    mod = native.load("rmqcore")
    if mod is None:
        return None
    if crc == "auto":       # the core's own CRC when it folds with carry-less multiplication (no call per body)
        hw = getattr(getattr(mod, "verify", None), "crc32_hardware", lambda: False)()
        crc = fastcrc.crc32 if fastcrc.IMPLEMENTATION == "isal" and not hw else None
    fields, framing = native_config()
    key = (id(mod), crc, repr(sorted(fields.items())), repr(sorted(framing.items())))
    if _core.get("key") != key:
        _core.clear()
        try:
            mod.configure(fields, **framing, crc32=crc)
        except (ValueError, TypeError, OverflowError):     # refused: the Python readers run instead
            return None
        _core["key"] = key
    return mod
