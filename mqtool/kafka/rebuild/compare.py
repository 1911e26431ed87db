"""``rebuild-index --compare``: each rebuilt index file against the store's (``kafka.rebuild-*`` findings)."""
from __future__ import annotations

from pathlib import Path

from mqtool.findings import ERROR, INFO, WARNING
from mqtool.kafka import indexfiles as F
from mqtool.errors import InputError


_READERS = {"index": F.read_offset_index, "timeindex": F.read_time_index, "txnindex": F.read_txn_index}


def _entries(kind: str, data: bytes | None, path: Path = Path("x")):
    """(the entries, a sequence of tuples, and the reader's result) of ``data``, or of the file ``path`` when
    ``data`` is None (an .index/.timeindex read up to its entries: a large preallocated file costs no more)."""
    f = _READERS[kind](path, data)
    return f.entries, f


def _compare(seg, built: dict, res, f, counts):
    for kind in ("index", "timeindex", "txnindex"):
        disk_path = getattr(seg, kind)
        data = built.get(kind)
        if disk_path is None:
            if data:
                counts["differing"] += 1
                yield f(INFO if kind != "txnindex" else WARNING, "missing-on-disk",
                        seg.log.with_suffix(f".{kind}"), None, None,
                        f"no .{kind} on disk; the rebuild has {len(data)} bytes of entries")
            continue
        if data is None:
            data = b""
        try:
            theirs, info = _entries(kind, None, disk_path)
            same = info.size == len(data) and F.read_capped(disk_path, max(len(data), 1)) == data
        except InputError as e:
            yield f(ERROR, "file-unreadable", disk_path, None, None, f"cannot read: {e.message}")
            continue
        if same:
            counts["identical"] += 1
            yield f(INFO, "identical", disk_path, None, None, "byte-identical to the rebuild")
            continue
        mine, _ = _entries(kind, data)
        if mine == theirs and info.garbage_tail == 0:
            counts["identical"] += 1
            yield f(INFO, "identical-but-preallocated", disk_path, len(data), None,
                    f"same entries; the disk file is padded with {info.size - len(data)} zero bytes "
                    "(running or crashed broker)")
            continue
        counts["differing"] += 1
        if kind == "timeindex" and theirs == mine[:-1]:
            yield f(INFO, "no-final-entry", disk_path, None, None,
                    "same entries except the closing max-timestamp entry (active segment of a running broker)")
        elif len(theirs) < len(mine) and mine[:len(theirs)] == theirs:
            yield f(WARNING, "stale-prefix", disk_path, len(theirs) * info.entry_size, None,
                    f"the disk's {len(theirs)} entries are the first of the rebuild's {len(mine)}: the index "
                    "covers only a prefix of the log (written before the log grew)",
                    expected=len(mine), actual=len(theirs))
        else:
            k = next((i for i, (a, b) in enumerate(zip(mine, theirs)) if a != b), min(len(mine), len(theirs)))
            yield f(WARNING, "differs", disk_path, k * info.entry_size, None,
                    f"differs from the canonical rebuild at entry {k} "
                    f"(disk {len(theirs)} entries, rebuild {len(mine)})",
                    expected=list(mine[k]) if k < len(mine) else None,
                    actual=list(theirs[k]) if k < len(theirs) else None)
