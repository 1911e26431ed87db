"""What a string from the data may look like on a terminal.

Topics, keys, tags, property names, Kafka keys/values/headers, file and directory names are all chosen by
whoever wrote the store. Shown raw, a control character can clear the screen, set the window title, plant a
hyperlink or reorder the text around it. :func:`visible` shows every such character as a visible escape, in
the spirit of ``ls -b`` and git's path quoting:

* C0 controls, DEL and C1 controls: ``\\x1b``, ``\\x7f``, ``\\u009b`` (``\\t``, ``\\n``, ``\\r`` for the usual three);
* bidirectional overrides, embeddings, isolates and marks (U+202A–U+202E, U+2066–U+2069, U+200E, U+200F,
  U+061C) and the line/paragraph separators U+2028/U+2029: ``\\u202e``;
* a byte that was not valid UTF-8 (kept by Python as a surrogate escape, e.g. in a file name): ``\\xff``;
* the backslash itself: ``\\\\`` (so an escape on screen is never ambiguous with the same text in the data).

Everything else, any script included, is shown as it is. NDJSON is not passed through this: it is exact data
for programs (JSON already escapes C0 controls).
"""
from __future__ import annotations

import re

#: Code points JSON leaves as they are but a terminal acts on: DEL and the C1 controls, the bidirectional marks,
#: embeddings, overrides and isolates, and the line/paragraph separators (inclusive ranges). mqtool.ndjson
#: escapes them in every line it writes; :func:`visible` escapes them with the C0 controls.
ACTIVE_RANGES = ((0x7F, 0x9F), (0x61C, 0x61C), (0x200E, 0x200F), (0x2028, 0x202E), (0x2066, 0x2069))
ACTIVE_CLASS = "".join(chr(a) if a == b else f"{chr(a)}-{chr(b)}" for a, b in ACTIVE_RANGES)

_UNSAFE = re.compile(f"[\\\\\x00-\x1f{ACTIVE_CLASS}\ud800-\udfff]")
_SHORT = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(m: re.Match) -> str:
    c = m.group()
    short = _SHORT.get(c)
    if short is not None:
        return short
    o = ord(c)
    if o < 0x80:
        return f"\\x{o:02x}"
    if 0xDC80 <= o <= 0xDCFF:           # surrogateescape: the original byte
        return f"\\x{o - 0xDC00:02x}"
    return f"\\u{o:04x}"


def visible(value) -> str:
    """``value`` as text that cannot control a terminal (see the module docstring)."""
    s = value if isinstance(value, str) else str(value)
    return _UNSAFE.sub(_escape, s) if _UNSAFE.search(s) else s
