"""The compiled verify lane reading the segment with pread into a buffer of its own (``rmqverify.scan(...,
fd)``) == the same lane reading the map == no lane at all (the full Python path).

The lane reads a chunk at a time (``rmqverify.chunk``): a unit the chunk cuts is read again from its start, a
unit longer than the chunk gets a buffer of its size, a short read (the file shrank) ends the walk where the
bytes end. Chunks here are swept from 64 bytes (every unit cut, most longer than the chunk) to the default, on
generated stores with every awkward unit kind, with ``--jobs`` ranges, and on every real RocketMQ store.
Files are mapped (``io.READ_WHOLE_LIMIT`` 0), as files above 16 MiB are, so the scanner hands the lane the fd.
"""
from __future__ import annotations

import mmap
import types

import pytest

from builders import rocketmq_unit
from formats import rocketmq as F
from mqtool import io
from mqtool.findings import Summary
from mqtool.options import VerifyOptions
from mqtool.rocketmq import ops
from mqtool.rocketmq.verify import native_lane as verify

from tests.conftest import require_realdata

NATIVE = verify._native_lane()
pytestmark = pytest.mark.skipif(NATIVE is None, reason="compiled helper rmqverify not built (or MQTOOL_NATIVE=0)")

CHUNKS = [64, 200, 1000, 4096, None]        # None: the default


@pytest.fixture
def chunk():
    old = NATIVE.chunk()
    yield NATIVE.chunk
    NATIVE.chunk(old)


class _Spy:
    """Counts the lane's calls that read through the fd (and those that read the map)."""

    def __init__(self, monkeypatch):
        self.fd_calls = self.map_calls = 0
        real = NATIVE.scan

        def scan(*args):
            if len(args) > 13 and args[13] >= 0:
                self.fd_calls += 1
            else:
                self.map_calls += 1
            return real(*args)

        monkeypatch.setattr(NATIVE, "scan", scan)


def _verify(path, monkeypatch, *, reads_fd=True, lane_on=True, part="store", huge=False, **kw):
    """verify with the map lane (``reads_fd`` False) or the pread lane, the page cache's pages taken as small
    (the pread lane stays the pread lane) or, ``huge``, as huge (the scanner then walks the map)."""
    from mqtool.rocketmq import scan

    monkeypatch.setattr(scan, "huge_backed", lambda buf, pos, end: huge)
    monkeypatch.setattr(scan, "_huge_files", {})
    monkeypatch.setattr(io, "READ_WHOLE_LIMIT", 0)
    monkeypatch.setattr(verify, "READS_FD", reads_fd)
    monkeypatch.setattr(verify, "USE_FAST_LANE", lane_on)
    findings, summary_fn = ops.verify(part, str(path), VerifyOptions(progress=False, **kw))
    return [dict(f.to_dict(), lost_from=f.lost_from) for f in findings], summary_fn().to_dict()


def _store(root, n=400, big_every=37, big=9000):
    """A one-segment store: units of many sizes (some far longer than the small chunks), interleaved queues,
    a non-UTF-8 topic, a bad CRC, a queue-offset gap, a PHYSICALOFFSET shift, a run of garbage bytes, then zero
    fill. PHYSICALOFFSET = where the unit sits unless shifted."""
    data = bytearray()
    qoff: dict = {}
    for i in range(n):
        topic = b"T\xff" if i % 61 == 0 else (b"TopicA", b"TopicB", "Té".encode())[i % 3]
        key = (topic, i % 4)
        qo = qoff.get(key, 0) + (3 if i == 150 else 0)
        qoff[key] = qo + 1
        body = bytes([65 + i % 26]) * (big + i if i % big_every == 0 else 10 + (i * 7) % 300)
        unit = rocketmq_unit(topic, body, b"KEYS\x01k%d u%d\x02TAGS\x01t%d\x02UNIQ_KEY\x01U%08d" % (i, i, i % 5, i),
                             phys=len(data) + (24 if 200 <= i < 230 else 0), queue_id=i % 4, queue_offset=qo,
                             store_ts=5000 + i, body_crc=1 if i == 77 else None)
        data += unit
        if i == 300:
            data += b"\x13" * 57                                  # damage: the walk resyncs after it
    seg = root / "commitlog" / f"{0:020d}"
    seg.parent.mkdir(parents=True)
    seg.write_bytes(bytes(data) + bytes(65536 - len(data) % 65536))
    return root


@pytest.mark.parametrize("size", CHUNKS)
def test_pread_lane_equals_map_lane_equals_no_lane(tmp_path, monkeypatch, chunk, size):
    store = _store(tmp_path / "store")
    off = _verify(store, monkeypatch, lane_on=False, part="commitlog")
    mapped = _verify(store, monkeypatch, reads_fd=False, part="commitlog")
    if size is not None:
        chunk(size)
    spy = _Spy(monkeypatch)
    got = _verify(store, monkeypatch, part="commitlog")
    assert spy.fd_calls > 0
    assert got == mapped == off
    codes = {f["code"] for f in off[0]}
    assert {"not-utf8", "crc-mismatch", "queue-offset-gap", "physical-offset-mismatch"} <= codes
    assert off[1]["messages"] > 390


@pytest.mark.parametrize("size", [64, 333, None])
def test_pread_lane_in_ranges_equals_one_pass(tmp_path, monkeypatch, chunk, size):
    store = _store(tmp_path / "store", n=600)
    one = _verify(store, monkeypatch, lane_on=False, jobs=1)
    if size is not None:
        chunk(size)
    assert _verify(store, monkeypatch, jobs=2, split_size=8192) == one
    from mqtool.ranges import InlineRunner
    assert _verify(store, monkeypatch, runner=InlineRunner(), split_size=4096) == one


def test_a_unit_longer_than_the_chunk_gets_a_buffer_of_its_size(tmp_path, chunk):
    """Lane level: chunk 64, units of 5 KB: every unit is read whole (the buffer grows), all consumed."""
    size = len(rocketmq_unit(b"T", b"x" * 5000))
    data = b"".join(rocketmq_unit(b"T", b"x" * 5000, phys=i * size, queue_offset=i) for i in range(8))
    assert size > 5000 and len(data) == 8 * size
    path = tmp_path / "seg"
    path.write_bytes(data + bytes(100))
    chunk(64)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        for fd in (f.fileno(), -1):
            ctx = types.SimpleNamespace(opts=VerifyOptions(max_message_size=1 << 22), summary=Summary(),
                                        dispatched_next={}, last_store_ts=0, shift=0, queue_end={})
            lane = verify._fast_lane(ctx, {}, False)
            args = (mm, None, 0, len(data), len(mm), 0) + ((fd,) if fd >= 0 else ())
            assert lane(*args) == (len(data), 8)
            assert ctx.queue_end == {("T", 0): len(data)}


def test_a_file_shorter_than_its_map_ends_the_walk_where_the_bytes_end(tmp_path, chunk):
    """The file shrinks under a live map: pread returns fewer bytes than the map's length promises; the lane
    consumes the units read whole and stops (it never reads the lost pages through the map)."""
    u = len(rocketmq_unit(b"T", b"y" * 700))
    units = [rocketmq_unit(b"T", b"y" * 700, phys=i * u, queue_offset=i) for i in range(20)]
    data = b"".join(units)
    path = tmp_path / "seg"
    path.write_bytes(data + bytes(8192 - len(data) % 8192))
    for size in (64, 2048, 1 << 19):
        chunk(size)
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            n = len(mm)
            with open(path, "r+b") as w:
                w.truncate(u * 11 + 300)                       # 11 whole units, then part of the 12th
            try:
                ctx = types.SimpleNamespace(opts=VerifyOptions(max_message_size=1 << 22), summary=Summary(),
                                            dispatched_next={}, last_store_ts=0, shift=0, queue_end={})
                lane = verify._fast_lane(ctx, {}, False)
                assert lane(mm, None, 0, n, n, 0, f.fileno()) == (u * 11, 11)
            finally:
                with open(path, "r+b") as w:
                    w.write(data + bytes(8192 - len(data) % 8192))


def test_a_remote_shadow_is_read_through_its_map(tmp_path, monkeypatch):
    """A remote file's local shadow is sparse until fetched (mqtool.remote): the lane must not pread it."""
    from mqtool.rocketmq import scan

    store = _store(tmp_path / "store", n=50)
    seg = store / "commitlog" / f"{0:020d}"
    monkeypatch.setattr(scan, "_ranged", lambda buf: True)
    spy = _Spy(monkeypatch)
    got = _verify(store, monkeypatch, part="commitlog")
    assert spy.fd_calls == 0 and spy.map_calls > 0
    assert got == _verify(store, monkeypatch, lane_on=False, part="commitlog")
    assert seg.exists()


def test_pread_lane_on_every_real_store(monkeypatch, chunk):
    root = require_realdata("rocketmq")
    stores = sorted(p.parent for p in root.rglob("commitlog") if p.is_dir())   # every store with a commitlog
    assert len(stores) >= 6
    for store in stores:
        off = _verify(store, monkeypatch, lane_on=False)
        for size in (97, None):
            if size is not None:
                chunk(size)
            else:
                chunk(512 << 10)
            assert _verify(store, monkeypatch) == off, (store, size)


def test_chunk_hook_refuses_nonsense():
    old = NATIVE.chunk()
    with pytest.raises(ValueError):
        NATIVE.chunk(8)
    with pytest.raises(ValueError):
        NATIVE.chunk(1 << 40)
    assert NATIVE.chunk() == old
    assert old >= F.MIN_MESSAGE_SIZE


# ---- which lane: the map where the page cache holds huge pages (mqtool.pages.huge_backed) ------------------------

def test_huge_pages_take_the_map_and_answer_the_same(tmp_path, monkeypatch):
    """Where the scanner finds the file's pages mapped huge it walks the map (no fd to the lane), elsewhere it
    reads: the findings are the same either way (the pages' size is the kernel's business, not the answer's)."""
    path = _store(tmp_path)
    read = _verify(path, monkeypatch, lane_on=False)
    for huge, lane in ((False, "fd_calls"), (True, "map_calls")):
        spy = _Spy(monkeypatch)
        assert _verify(path, monkeypatch, huge=huge) == read
        assert getattr(spy, lane) > 0 and getattr(spy, "map_calls" if lane == "fd_calls" else "fd_calls") == 0


def test_huge_share_reports_a_share_or_nothing(tmp_path):
    """The kernel's answer is a share of the range (or None where PAGEMAP_SCAN is missing); a range outside the
    buffer is refused; huge_backed is False for a buffer too short to hold one huge page or not a map."""
    from mqtool import pages

    p = tmp_path / "f"
    p.write_bytes(b"\x07" * (6 << 20))
    with open(p, "rb") as f, mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as m:
        NATIVE.madvise(m, 0, len(m), 22)                # populated: every page present
        share = NATIVE.huge_share(m, 0, len(m))
        assert share is None or 0.0 <= share <= 1.0
        for bad in ((0, 0), (-1, 10), (0, len(m) + 1), (len(m), 1)):
            with pytest.raises(ValueError):
                NATIVE.huge_share(m, *bad)
        assert pages.huge_backed(m, len(m) - (1 << 20), len(m)) is False
        assert isinstance(pages.huge_backed(m, 0, len(m)), bool)
    assert pages.huge_backed(bytearray(8 << 20), 0, 8 << 20) is False
