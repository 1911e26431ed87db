"""Commitlog segment files: sizes, names, gaps and overlaps."""
from __future__ import annotations

from collections.abc import Iterator

from mqtool.findings import ERROR, INFO, WARNING, Finding
from mqtool.io import is_regular_file
from mqtool.rocketmq.store import Segment, common_size, gap_cause, segment_gaps
from mqtool.rocketmq.verify.context import _Ctx


def _verify_segments_layout(ctx: _Ctx) -> Iterator[Finding]:
    segs = ctx.store.segments
    if not segs:
        return
    # a name whose file is no regular file (a dangling or looping link, a directory, a FIFO) holds no bytes of
    # the log: the walker reports it (file-unreadable); it is not empty, of a size, or the end of a gap
    odd = {s.path for s in segs if not is_regular_file(s.path)}
    segs = [Segment(s.path, s.name, s.base, 0) if s.path in odd else s for s in segs]
    common = common_size(segs)
    gaps = segment_gaps(segs)
    for i, s in enumerate(segs):
        last = i == len(segs) - 1
        if s.path in odd:
            pass
        elif s.size == 0:
            yield ctx.f(INFO if last else ERROR, "segment-empty", s.path, 0, s.base,
                        "empty segment file" + (" (the broker deletes a 0-byte last file at start)" if last else ""))
        elif s.size != common:
            yield ctx.f(ERROR, "segment-size", s.path, 0, s.base,
                        f"segment is {s.size} bytes, the others are {common} (the broker refuses to load this)",
                        common, s.size, span=(s.base + s.size, s.base + common) if s.size < common else None)
        if i:
            prev = segs[i - 1]
            if (prev, s) in gaps:
                yield ctx.f(ERROR, "segment-missing", s.path, 0, s.base,
                            f"gap of {s.base - prev.end} bytes before this segment: {gap_cause(prev, s, common)}",
                            prev.end, s.base, span=(prev.end, s.base))
            elif s.base < prev.end:
                yield ctx.f(ERROR, "segment-overlap", s.path, 0, s.base,
                            f"segment starts inside the previous one ({prev.name} ends at {prev.end})",
                            prev.end, s.base)
    if segs[0].base % max(common, 1) and common:
        yield ctx.f(WARNING, "segment-name", segs[0].path, 0, segs[0].base,
                    f"first segment name {segs[0].base} is not a multiple of the segment size {common}")
