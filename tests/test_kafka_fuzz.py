"""Damaged bytes never raise out of the walker: random mutations of a real segment give batches, damage
events, or the documented record-level errors (CodecError/ValueError/IndexError), nothing else."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import FIXTURES
from mqtool.codecs import CodecError
from mqtool.kafka.records import Batch, iter_records
from mqtool.kafka.scan import Damage, scan

SEG = (FIXTURES / "kafka" / "logdir" / "fixture-0" / "00000000000000000000.log").read_bytes()


def _walk(data: bytes) -> int:
    end = 0
    for ev in scan(data, "fuzz"):
        assert isinstance(ev, (Batch, Damage))
        end = ev.end
        if isinstance(ev, Batch):
            try:
                for _r in iter_records(ev):
                    pass
            except (CodecError, ValueError, IndexError):
                pass
    return end


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(SEG) - 1), st.integers(0, 255)), min_size=1, max_size=8))
def test_mutated_segment_never_raises(muts):
    data = bytearray(SEG)
    for pos, val in muts:
        data[pos] = val
    assert _walk(bytes(data)) == len(data)          # the walk accounts for every byte up to the end


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=600), st.integers(0, len(SEG)))
def test_garbage_and_truncation_never_raise(garbage, cut):
    data = SEG[:cut] + garbage + SEG[cut:]
    assert _walk(data) == len(data)
    assert _walk(SEG[:cut]) == cut


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_mutated_real_compressed_segments_never_raise(data):
    """Segments 0 (legacy wrappers: gzip/snappy/lz4 incl. v0's broken lz4 header) and 37 (v2, all codecs)."""
    import os

    from conftest import realdata_root
    base = realdata_root() / "kafka" / "generated-4.0.0-SNAPSHOT" / "recovered" / "forensics-0"
    if not base.exists():
        if os.environ.get("CI", "").lower() == "true":
            raise AssertionError(f"real data not found: {base}")
        return
    seg = (base / data.draw(st.sampled_from(["00000000000000000000.log", "00000000000000000037.log"]))).read_bytes()
    muts = data.draw(st.lists(st.tuples(st.integers(0, len(seg) - 1), st.integers(0, 255)), min_size=1, max_size=6))
    buf = bytearray(seg)
    for pos, val in muts:
        buf[pos] = val
    assert _walk(bytes(buf)) == len(buf)
