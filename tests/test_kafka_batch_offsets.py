"""``mqtool.kafka.scan.batch_offsets``: the (first, last) offsets of the batches a walk without CRCs yields, read
from v2 headers alone while the batches frame one another, and by the walk itself from anything else on.

The reference is the walk (``scan(..., check_crc=False)``) on the same bytes: segments built from v2 batches
(offset jumps included), legacy v0/v1 messages and gzip wrappers, zero runs and garbage, then damaged (bytes
set, inserted, deleted). Both as bytes and through a mapped file (the page window)."""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings, strategies as st

from builders import kafka_batch, kafka_legacy_message, kafka_legacy_wrapper
from mqtool.io import map_input
from mqtool.kafka import scan as S
from mqtool.kafka.records import Batch


def _walked(data) -> list[tuple[int, int]]:
    return [(e.base_offset if e.base_offset is not None else e.last_offset, e.last_offset)
            for e in S.scan(data, "x", check_crc=False) if isinstance(e, Batch)]


_piece = st.one_of(
    st.tuples(st.just("v2"), st.integers(0, 1 << 40), st.integers(1, 4)),
    st.tuples(st.just("legacy"), st.integers(0, 1 << 40), st.sampled_from([0, 1])),
    st.tuples(st.just("wrapper"), st.integers(3, 1 << 40), st.integers(1, 3)),
    st.tuples(st.just("zeros"), st.integers(1, 300), st.just(0)),
    st.tuples(st.just("junk"), st.binary(min_size=1, max_size=80), st.just(0)),
)


def _build(pieces) -> bytes:
    out = bytearray()
    for kind, a, b in pieces:
        if kind == "v2":
            out += kafka_batch(a, b)
        elif kind == "legacy":
            out += kafka_legacy_message(a, b"value %d" % a, magic=b)
        elif kind == "wrapper":
            out += kafka_legacy_wrapper(a, [kafka_legacy_message(a - b + i, b"in", magic=1) for i in range(b)])
        elif kind == "zeros":
            out += bytes(a)
        else:
            out += a
    return bytes(out)


_edit = st.tuples(st.sampled_from(["set", "insert", "delete"]), st.integers(0, 1 << 20), st.binary(min_size=1,
                                                                                                  max_size=8))


def _damaged(data: bytes, edits) -> bytes:
    out = bytearray(data)
    for how, at, what in edits:
        if not out:
            break
        at %= len(out)
        if how == "set":
            out[at:at + len(what)] = what[:len(out) - at]
        elif how == "insert":
            out[at:at] = what
        else:
            del out[at:at + len(what)]
    return bytes(out)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_piece, min_size=1, max_size=12), st.lists(_edit, max_size=4))
def test_batch_offsets_equal_the_walk(pieces, edits):
    data = _damaged(_build(pieces), edits)
    assert list(S.batch_offsets(data, "x")) == _walked(data)


def test_batch_offsets_through_a_mapped_file(tmp_path, monkeypatch):
    """A mapped segment of v2 batches, then a legacy message, an offset jump and a zero tail, read with a page
    window of one page (pages released and the window moved at every page): the walk's offsets. Expected by
    hand from the builder's arguments: v2 batches of 3 records at 0, 3, .. 27, a legacy v1 message at 30, v2
    batches at 100, 103."""
    import mqtool.pages as P

    monkeypatch.setattr(P, "WINDOW", P.PAGE)
    data = b"".join(kafka_batch(3 * k, 3, pad=700) for k in range(10)) + kafka_legacy_message(30, b"v", magic=1) \
        + kafka_batch(100, 3) + kafka_batch(103, 3) + bytes(5000)
    f = tmp_path / "00000000000000000000.log"
    f.write_bytes(data)
    want = [(3 * k, 3 * k + 2) for k in range(10)] + [(30, 30), (100, 102), (103, 105)]
    with map_input(f) as m:
        assert list(S.batch_offsets(m.buf, str(f), fd=m.fileno())) == want == _walked(m.buf)
