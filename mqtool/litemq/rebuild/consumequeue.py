"""The consumequeue writer: a queue's entries as ``%020d`` files, zero-filled to the file size."""
from __future__ import annotations

from mqtool.litemq.layout import CQ as CQS


def queue_files(entries, fs: int, trim: bool):
    """Split a queue's entries into ``[(file_index, bytes, full_size)]``."""
    data = b"".join(CQS.pack(*e) for e in entries)
    out = []
    for i in range(0, max(len(data), 1), fs):
        chunk = data[i:i + fs]
        if not chunk and i:
            break
        out.append((i // fs, chunk, len(chunk) if trim else fs))
    return out
