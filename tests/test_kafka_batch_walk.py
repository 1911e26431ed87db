"""The compiled batch walk (kafka.c ``walk_batches``, :func:`mqtool.kafka.scan.batch_walk`) changes nothing that
:func:`mqtool.kafka.scan.scan` yields.

* The header table it reads by (``layout.BATCH_FIELDS_V2``) is the schema's: offsets and sizes from construct's
  ``K.RecordBatchHeader``, signedness from each field's own format string.
* Each batch it takes comes with the fields ``struct`` unpacks from the same bytes (``_HDR_V2``), and it takes
  exactly the v2 batches whose CRC-32C holds (checked against the ``crc32c`` package, a second implementation),
  stopping at the first entry it does not take, before ``stop``, within ``limit``.
* ``scan`` with the walk and with the walk off (``batch_walk`` -> None) yields equal events on hypothesis-built
  logs: v2 batches of every codec, legacy messages, flipped bytes (bad CRCs), garbage, cut tails, zero tails;
  over bytes and over a mapped file with a page window of one page, with ``--max-bytes`` cut-offs, and with a
  spent budget. The walk must have run (a spy counts what it took): the comparison is not between two Python walks.
"""
from __future__ import annotations

import mmap
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builders import kafka_batch, kafka_builder, kafka_legacy_message
from formats import kafka as K
from mqtool import pages
from mqtool.damage import CheckBudget
from mqtool.kafka import layout as L
from mqtool.kafka import scan as S
from mqtool.kafka.records import Batch

WALK = S.batch_walk()
needs_walk = pytest.mark.skipif(WALK is None, reason="compiled kafka helper or ISA-L not there (MQTOOL_NATIVE=0?)")
BK = kafka_builder()


def test_header_table_is_the_schemas():
    from construct import FormatField

    from mqtool.schema_struct import field_positions

    want = {}
    for sub in K.RecordBatchHeader.subcons:
        fmt = sub.subcon.fmtstr
        assert isinstance(sub.subcon, FormatField) and fmt[0] == ">"
        want[sub.name] = fmt[1].islower()
    positions = field_positions(K.RecordBatchHeader)
    assert list(L.BATCH_FIELDS_V2) == list(want)
    assert {k: v[:2] for k, v in L.BATCH_FIELDS_V2.items()} == positions
    assert {k: v[2] for k, v in L.BATCH_FIELDS_V2.items()} == want
    assert not L.BATCH_FIELDS_V2["crc"][2] and L.BATCH_FIELDS_V2["baseOffset"][2]      # Int32ub, Int64sb


# ---- generated logs -----------------------------------------------------------------------------------------

def _codec_batch(base: int, n: int, codec: int, **kw) -> bytes:
    recs = [BK.record(i, i, f"k{i}".encode(), f"value-{i}".encode() * 3) for i in range(n)]
    return BK.batch_v2(base, recs, codec=codec, compress=BK.COMPRESS.get(codec), base_ts=BK.T0, max_ts=BK.T0 + n,
                       **kw)


@st.composite
def logs(draw):
    """(bytes, [(position, length) of each entry built]) of a log with damage between and inside entries."""
    parts, base = [], 0
    for _ in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(["v2", "v2", "v2", "codec", "legacy", "garbage", "zeros"]))
        if kind == "v2":
            n = draw(st.integers(1, 4))
            parts.append(kafka_batch(base, n, pad=draw(st.integers(0, 300)),
                                     pid=draw(st.sampled_from([-1, 7])), attrs=draw(st.sampled_from([0, 0x10, 0x20]))))
            base += n
        elif kind == "codec":
            parts.append(_codec_batch(base, 3, draw(st.sampled_from(sorted(BK.COMPRESS)))))
            base += 3
        elif kind == "legacy":
            parts.append(kafka_legacy_message(base, b"legacy", magic=draw(st.integers(0, 1))))
            base += 1
        elif kind == "garbage":
            parts.append(draw(st.binary(min_size=1, max_size=40)))
        else:
            parts.append(bytes(draw(st.integers(1, 64))))
    data = bytearray(b"".join(parts))
    for _ in range(draw(st.integers(0, 3))):           # flipped bytes: bad CRCs, bad lengths, bad magics
        if data:
            data[draw(st.integers(0, len(data) - 1))] ^= draw(st.integers(1, 255))
    if data and draw(st.booleans()):
        del data[draw(st.integers(0, len(data) - 1)):]  # a cut tail
    if draw(st.booleans()):
        data += bytes(draw(st.integers(1, 100)))        # a zero tail
    return bytes(data)


def _event(e):
    if isinstance(e, Batch):
        return ("batch",) + tuple(getattr(e, f) for f in Batch.__dataclass_fields__ if f != "_buf")
    return ("damage", e.position, e.length, e.code, e.message)


class _Spy:
    def __init__(self, fn):
        self.fn, self.taken = fn, 0

    def __call__(self, *a):
        q, run = self.fn(*a)
        self.taken += len(run)
        return q, run


def _both(monkeypatch, buf, **kw):
    """(events with the walk, events without it, batches the walk took)."""
    spy = _Spy(WALK)
    with monkeypatch.context() as m:
        m.setattr(S, "batch_walk", lambda: spy)
        fast = [_event(e) for e in S.scan(buf, "x", **kw)]
    with monkeypatch.context() as m:
        m.setattr(S, "batch_walk", lambda: None)
        slow = [_event(e) for e in S.scan(buf, "x", **kw)]
    return fast, slow, spy.taken


@needs_walk
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=logs(), cut=st.one_of(st.none(), st.integers(0, 4000)))
def test_scan_is_the_same_with_the_walk(monkeypatch, data, cut):
    fast, slow, _taken = _both(monkeypatch, data, max_bytes=cut)
    assert fast == slow


@needs_walk
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=logs(), cut=st.one_of(st.none(), st.integers(0, 4000)))
def test_scan_of_a_mapped_file_with_a_one_page_window(monkeypatch, tmp_path_factory, data, cut):
    path = tmp_path_factory.mktemp("walk") / "00000000000000000000.log"
    path.write_bytes(data or b"\0")
    monkeypatch.setattr(pages, "WINDOW", mmap.PAGESIZE)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        fast, slow, _taken = _both(monkeypatch, m, max_bytes=cut)
    assert fast == slow


@needs_walk
def test_the_walk_takes_the_valid_batches(monkeypatch):
    """A clean log of many batches: the walk takes every one (the comparison above is not vacuous)."""
    data = b"".join(kafka_batch(3 * k, 3, pad=k) for k in range(200)) + _codec_batch(600, 3, K.CODEC_ZSTD)
    fast, slow, taken = _both(monkeypatch, data)
    assert fast == slow and taken == 201 == len(fast)


@needs_walk
def test_a_spent_budget_leaves_batches_to_the_python_walk(monkeypatch):
    data = b"".join(kafka_batch(3 * k, 3, pad=5000) for k in range(20))
    for budget in (CheckBudget(0), CheckBudget(10 ** 6, strict=True), CheckBudget(4000)):
        spent = CheckBudget(budget.budget, budget.strict)
        spent.spent = budget.budget                     # nothing left: large batches are not checked
        for b in (budget, spent):
            fast, slow, taken = [], [], 0
            for walk in (_Spy(WALK), None):
                c = CheckBudget(b.budget, b.strict)
                c.spent = b.spent
                with monkeypatch.context() as m:
                    m.setattr(S, "batch_walk", lambda w=walk: w)
                    got = [_event(e) for e in S.scan(data, "x", budget=c)]
                if walk is None:
                    slow = got
                else:
                    fast, taken = got, walk.taken
            assert fast == slow
            if b.strict or b.spent >= b.budget:
                assert taken == 0


# ---- the helper itself ----------------------------------------------------------------------------------------

def _python_walk(buf, pos, stop, limit):
    """What walk_batches must give, written from the format reference: v2 entries whose stored CRC-32C (crc32c
    package) is that of the bytes from the attributes to the end."""
    from crc32c import crc32c

    out, p = [], pos
    while len(out) < 64 and p < stop and limit - p >= 61:
        size = struct.unpack_from(">i", buf, p + 8)[0]
        if buf[p + 16] != 2 or size < 49 or size > limit - p - 12:
            break
        if crc32c(bytes(buf[p + 21:p + 12 + size])) != struct.unpack_from(">I", buf, p + 17)[0]:
            break
        out.append((p,) + S._HDR_V2.unpack_from(buf, p))
        p += 12 + size
    return p, out


@needs_walk
@settings(max_examples=300, deadline=None)
@given(data=logs(), pos=st.integers(0, 200), stop=st.integers(0, 5000), limit=st.integers(0, 5000))
def test_walk_batches_against_a_reference(data, pos, stop, limit):
    pos = min(pos, len(data))
    assert WALK(data, pos, stop, limit) == _python_walk(data, pos, stop, min(limit, len(data)))


@needs_walk
def test_walk_batches_stops_at_64_and_at_hostile_lengths():
    data = b"".join(kafka_batch(k, 1) for k in range(100))
    q, run = WALK(data, 0, len(data), len(data))
    assert len(run) == 64 and q == run[-1][0] + len(kafka_batch(63, 1))
    hostile = bytearray(kafka_batch(0, 1))
    struct.pack_into(">i", hostile, 8, 0x7FFFFFFF)      # a length far past the buffer
    assert WALK(bytes(hostile), 0, 10, len(hostile)) == (0, [])
    struct.pack_into(">i", hostile, 8, -5)
    assert WALK(bytes(hostile), 0, 10, len(hostile)) == (0, [])


@needs_walk
def test_walk_batches_refuses_layouts_that_do_not_fit():
    from mqtool import native

    fn = native.load("kafka").walk_batches
    data = kafka_batch(0, 1)
    with pytest.raises(ValueError):
        fn(data, 0, 1, len(data), S._WALK_FIELDS[:1], S._WALK_ROLES)
    with pytest.raises(ValueError):      # the magic field said to be the 8-byte base offset
        fn(data, 0, 1, len(data), S._WALK_FIELDS, (S._WALK_ROLES[0], 0) + S._WALK_ROLES[2:])
    with pytest.raises(ValueError):      # the smallest batch too small for the header
        fn(data, 0, 1, len(data), S._WALK_FIELDS, S._WALK_ROLES[:5] + (10,))
    assert fn(data, 0, 1, len(data), S._WALK_FIELDS, S._WALK_ROLES)[0] == len(data)


def test_no_walk_without_isal(monkeypatch):
    """Without ISA-L's CRC-32C (the ``fast`` extra) there is no walk: the Python walk reads everything."""
    import sys

    monkeypatch.setitem(sys.modules, "isal.isal_zlib", None)
    monkeypatch.setattr(S, "_walker", {})
    assert S.batch_walk() is None
    data = kafka_batch(0, 2)
    assert [e.position for e in S.scan(data, "x")] == [0]


# ---- the header walk (batch_offsets: no CRC) --------------------------------------------------------------------

HEADERS = S.header_walk()


@pytest.mark.skipif(HEADERS is None, reason="compiled kafka helper not built, or MQTOOL_NATIVE=0")
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=logs())
def test_batch_offsets_are_the_same_with_the_header_walk(monkeypatch, data):
    spy = _Spy(HEADERS)
    with monkeypatch.context() as m:
        m.setattr(S, "header_walk", lambda: spy)
        fast = list(S.batch_offsets(data, "x"))
    with monkeypatch.context() as m:
        m.setattr(S, "header_walk", lambda: None)
        slow = list(S.batch_offsets(data, "x"))
    assert fast == slow
    clean = b"".join(kafka_batch(2 * k, 2) for k in range(100))
    spy.taken = 0
    with monkeypatch.context() as m:
        m.setattr(S, "header_walk", lambda: spy)
        assert list(S.batch_offsets(clean, "x")) == [(2 * k, 2 * k + 1) for k in range(100)]
    assert spy.taken == 100


@pytest.mark.skipif(HEADERS is None, reason="compiled kafka helper not built, or MQTOOL_NATIVE=0")
@settings(max_examples=200, deadline=None)
@given(data=logs(), pos=st.integers(0, 200), stop=st.integers(0, 5000))
def test_header_walk_against_a_reference(data, pos, stop):
    """The framing rule of batch_offsets' loop, written again: magic 2, a length of at least the v2 header's, the
    entry inside the data."""
    pos = min(pos, len(data))
    out, p = [], pos
    while len(out) < 64 and p < stop and len(data) - p >= 61:
        size = struct.unpack_from(">i", data, p + 8)[0]
        if data[p + 16] != 2 or size < 49 or size > len(data) - p - 12:
            break
        out.append((p,) + S._HDR_V2.unpack_from(data, p))
        p += 12 + size
    assert HEADERS(data, pos, stop, len(data)) == (p, out)
