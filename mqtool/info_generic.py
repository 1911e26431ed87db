"""Fallback ``info`` collector for a family that has no ``mqtool/<family>/info.py`` yet.

It reads what the family's existing ``ops.dump("commitlog", …)`` yields: rows of kind ``"message"`` with the
shared NDJSON names (``topic``, ``queue_id``, ``store_timestamp``, ``size``; see README "NDJSON fields"), and
the damaged ranges the dump reports through :class:`~mqtool.options.ScanStats`. Crash marker, version hints,
files and consumer lag need the family's own collector (docs/info.md, "Adding a family"); a note says so.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING

from mqtool.options import DumpOptions, InfoOptions, ScanStats

if TYPE_CHECKING:                   # the model is handed in by mqtool.info.build_info (which imports this module)
    from mqtool.info import InfoBuilder

# "<file>@<position> (offset <offset>): <code>: <message>; skipped <n> bytes" (mqtool.rocketmq.ops wording)
_NOTE = re.compile(r"^(?P<file>.+)@(?P<pos>\d+) \(offset (?P<off>-?\d+)\): (?P<code>[\w-]+): (?P<msg>.*?)"
                   r"(?:; skipped (?P<len>\d+) bytes)?$")


def collect(path, b: InfoBuilder, opts: InfoOptions, ops, family: str) -> None:
    stats = ScanStats()
    _, rows, _ = ops.dump("commitlog", path, DumpOptions(max_message_size=opts.max_message_size), stats)
    b.store_kind = f"{family} store (basic view)"
    seen = 0

    def take_damage():
        nonlocal seen
        while seen < stats.damaged:
            text = stats.notes[seen] if seen < len(stats.notes) else "damaged range"
            m = _NOTE.match(text)
            if m:
                b.add_damage(m["file"], int(m["pos"]), int(m["off"]), int(m["len"] or 0), m["code"], m["msg"])
            else:
                b.add_damage("?", None, None, 0, "damaged", text)
            seen += 1

    for r in rows:
        take_damage()
        if r.get("kind", "message") != "message":
            continue
        ts = r.get("store_timestamp")
        if ts is None:
            ts = r.get("timestamp")
        b.add_message(str(r.get("topic")), r.get("queue_id", r.get("partition")), int(ts or 0),
                      int(r.get("size") or 0))
    take_damage()
    b.note(f"basic view from `mqtool dump commitlog` rows: the {family} family has no info collector yet, so "
           "the crash marker, version hints, files and consumer lag are not shown")
