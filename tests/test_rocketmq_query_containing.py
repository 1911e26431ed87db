"""`query --offset N --containing` jumps to a largest message before N instead of walking the segment from its
start (a remote segment is then fetched from there only). The answer must be the whole walk's: the old walk
from the segment's start is the second implementation here, run on every offset of a damaged segment (a
corrupt body, zeroed bytes longer than the largest message, the zero tail)."""
from __future__ import annotations

import pytest

from formats import rocketmq as F
from mqtool.options import QueryOptions, ScanStats
from mqtool.rocketmq import query as Q
from mqtool.rocketmq.scan import SegmentScanner
from mqtool.rocketmq.store import open_store

MIB = 1 << 20


def _whole_walk(seg, pos):
    return SegmentScanner(seg).events()


@pytest.fixture(scope="module")
def damaged(tmp_path_factory):
    from builders import rocketmq_unit

    store = tmp_path_factory.mktemp("containing") / "store"
    seg = store / "commitlog" / ("0" * 20)
    seg.parent.mkdir(parents=True)
    data, starts = bytearray(), []
    for i in range(70):
        starts.append(len(data))
        data += rocketmq_unit(body=bytes([i + 1]) * (150_000 + 977 * i), phys=len(data), queue_offset=i)
    data = bytearray(data + bytes(16 * MIB - len(data)))
    # a corrupt body in unit 10 (CRC mismatch: damage up to the next unit), units 30..62 zeroed (more than the
    # largest message: the jump finds no unit before the offsets just after it and falls back)
    data[starts[10] + 5000:starts[10] + 5100] = b"\xff" * 100
    data[starts[30]:starts[63]] = bytes(starts[63] - starts[30])
    assert starts[63] - starts[30] > F.DEFAULT_MAX_MESSAGE_SIZE
    seg.write_bytes(data)
    return store, starts, len(data)


def _answer(store, off):
    stats = ScanStats()
    rows = list(Q.run_query(open_store(str(store)), QueryOptions(offset=off, containing=True), stats))
    return rows, stats.notes, stats.damaged


def test_containing_equals_the_walk_from_the_start(damaged, monkeypatch):
    store, starts, size = damaged
    offsets = set()
    for s in starts:
        offsets.update((s, s + 1, s + 4999, s + 5050, s + 70_000))
    offsets.update((starts[30] + 1, starts[40], starts[62] + 10, starts[63] - 1, starts[-1] + 200_000, size - 1,
                    F.DEFAULT_MAX_MESSAGE_SIZE - 1, F.DEFAULT_MAX_MESSAGE_SIZE + 3))
    jumped = {off: _answer(store, off) for off in sorted(offsets)}
    monkeypatch.setattr(Q, "_walk_to", _whole_walk)
    for off in sorted(offsets):
        assert jumped[off] == _answer(store, off), off
    found = [off for off, (rows, _, _) in jumped.items() if rows]
    assert len(found) > 100 and any(rows == [] for rows, _, _ in jumped.values())
