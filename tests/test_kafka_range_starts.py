"""Where a Kafka byte-range reader begins and ends (mqtool.kafka.scan.range_start, scan_range, resync).

Found on a generated 1 GiB two-codec log (2026-11-25): ``dump kafka --json`` with its default pool dropped 511
of 17,673 batches without a word. A range start fell inside a compressed batch whose bytes held, by chance, a
header of a sane shape claiming ~700 MB; the start search checked that candidate's CRC (all 700 MB, the whole
budget of the range), then passed over the real batch 20 KB later as "past the budget", so the range owned
nothing, while the range before stopped at that real batch. These tests hold what must be true instead: the
ranges of any split give the whole-file walk, however the candidates near a range start are placed or sized.
Expected events come from the whole-file walk (``scan``), and candidate search from a byte-by-byte search
written here from resync's documented rule.
"""
from __future__ import annotations

import random

import pytest
from hypothesis import given, settings, strategies as st

from builders import kafka_batch, kafka_builder
from mqtool.damage import CheckBudget
from mqtool.kafka import scan as S
from mqtool.kafka.records import Batch

HDR = 61        # a v2 batch header, log overhead included (formats/kafka.py RecordBatchHeader)


def _fake_header(claim: int) -> bytes:
    """A v2 header of a sane shape (passes ``_shape_ok``) whose length field claims ``claim`` bytes after the
    log overhead, with a CRC that will not match."""
    return S._HDR_V2.pack(0, claim, -1, 2, 0x1234567, 0, 0, -1, -1, -1, -1, -1, 0)


def _batch_holding(base: int, inner: bytes, pad: int = 0) -> bytes:
    """A valid v2 batch of two records, the first one's value ``inner`` (bytes that look like a batch header)."""
    B = kafka_builder()
    recs = [B.record(0, 0, b"k", inner), B.record(1, 1, b"k", b"v" + bytes(pad))]
    return B.batch_v2(base, recs, base_ts=B.T0, max_ts=B.T0 + 2)


def _whole(data: bytes) -> list[tuple]:
    return [_key(e) for e in S.scan(data, "x")]


def _key(e) -> tuple:
    return ("batch", e.position, e.base_offset, e.crc_ok) if isinstance(e, Batch) else (e.code, e.position, e.end)


def _ranges(data: bytes, split: int) -> list[tuple]:
    n = len(data)
    got = []
    for a in range(0, n, split):
        got += [_key(e) for e in S.scan_range(data, "x", a, min(n, a + split))]
    return got


def _segment_with_false_starts(sizes: list[int], fakes: dict[int, int]) -> bytes:
    """Batches of ``sizes`` (value padding); batch k in ``fakes`` carries in its first record's value a sane
    header claiming ``fakes[k]`` bytes past it (clipped to what is left of the file below)."""
    parts = []
    for k, pad in enumerate(sizes):
        if k in fakes:
            parts.append(_batch_holding(10 * k, _fake_header(0), pad))
        else:
            parts.append(kafka_batch(10 * k, 2, pad=pad))
    data = bytearray(b"".join(parts))
    n = len(data)
    at = 0
    for k, part in enumerate(parts):
        if k in fakes:
            j = data.find(_fake_header(0), at, at + len(part))
            claim = max(S._MIN_V2_SIZE, min(fakes[k], n - j - 12))
            part = _batch_holding(10 * k, _fake_header(claim), sizes[k])
            data[at:at + len(part)] = part          # same size: only the claim and the CRC change
        at += len(part)
    assert len(data) == n
    return bytes(data)


def test_a_false_candidate_claiming_more_than_the_budget_does_not_hide_the_range_start(monkeypatch):
    """The failure as found, small: a range starts just before a false header (inside a valid batch's record
    value) that claims the rest of the file, more than the range's checking budget; the real batch after it is
    where the range begins, and the ranges give the whole walk (before: the range owned nothing and the batches
    after the false header, up to the next range, were in no range's output)."""
    monkeypatch.setattr(S, "WALK_BUDGET_FLOOR", 0)
    sizes = [1500] * 60             # batches larger than SMALL_CANDIDATE: checked only within the budget
    data = _segment_with_false_starts(sizes, {2: 1 << 30, 30: 1 << 30})
    whole = _whole(data)
    assert [k for k, *_ in whole] == ["batch"] * 60 and all(crc for *_, crc in whole)
    pos2 = whole[2][1]
    split = pos2 + 30               # range 1 starts inside batch 2, before its false header
    fake = data.find(_fake_header(0)[12:16], pos2)
    assert fake > split and len(data) - fake > 8 * split      # it claims more than the start budget
    assert _ranges(data, split) == whole
    # the start search passes the false candidate over (strict budget) and lands on batch 3
    assert S.range_start(data, split, 2 * split) == whole[3][1]


def test_a_real_batch_larger_than_the_start_budget_is_read_by_the_range_before(monkeypatch):
    """A real batch bigger than a range start's (strict) budget: the start search passes it over, so the
    range before reads it (its walk checks the batches it is in step with), then stops where a later range
    begins: no batch is lost or read twice."""
    monkeypatch.setattr(S, "WALK_BUDGET_FLOOR", 0)
    sizes = [100] * 10 + [30_000] + [100] * 10
    data = _segment_with_false_starts(sizes, {})
    whole = _whole(data)
    big = whole[10][1]
    assert len(data) - big > 8 * big        # for a split of about ``big`` its claim is past the start budget
    for split in (big - 5, big, 1000, 997, 4096):
        assert _ranges(data, split) == whole, split


@settings(max_examples=80, deadline=None, database=None)
@given(sizes=st.lists(st.integers(0, 3000), min_size=3, max_size=14),
       fakes=st.dictionaries(st.integers(0, 13), st.integers(0, 1 << 20), max_size=4),
       splits=st.lists(st.integers(40, 3000), min_size=1, max_size=3),
       floor=st.sampled_from([0, 512, 1 << 24]))
def test_ranges_meet_whatever_false_candidates_lie_near_their_starts(sizes, fakes, splits, floor):
    """Random segments with false headers (random claims) inside record values, any split, budgets from none
    at all to the real floor: the ranges give the whole walk."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(S, "WALK_BUDGET_FLOOR", floor)
        data = _segment_with_false_starts(sizes, {k: v for k, v in fakes.items() if k < len(sizes)})
        whole = _whole(data)
        for split in splits:
            assert _ranges(data, split) == whole, split


# ---- resync's candidate search (a regular expression in C) against a search byte by byte ----------------------

def _resync_reference(buf, p: int, n: int, until, budget):
    """resync's rule, position by position: the first q > p (q < until, q + 17 <= n) with magic <= 2 at q + 16
    whose entry passes the checks (shape, budget, CRC)."""
    stop = n - 16 if until is None else min(until, n - 16)
    for q in range(p + 1, stop):
        if buf[q + 16] <= 2 and S._frame_ok(buf, q, n, budget):
            return q
    return None


_PIECES = st.one_of(
    st.binary(min_size=1, max_size=300),
    st.integers(1, 3000).map(bytes),                                            # zero runs
    st.tuples(st.integers(0, 50), st.integers(1, 3), st.integers(0, 200)).map(
        lambda t: kafka_batch(t[0], t[1], pad=t[2])),
    st.integers(0, 5000).map(_fake_header),
    st.tuples(st.integers(0, 2), st.integers(0, 255), st.integers(0, 255), st.integers(0, 2000)).map(
        lambda t: (t[3]).to_bytes(12, "big") + bytes([0, 0, 0, 0, t[0], t[1], t[2]])),  # near-miss magics
)


@settings(max_examples=200, deadline=None, database=None)
@given(pieces=st.lists(_PIECES, min_size=1, max_size=12), p=st.integers(-1, 400),
       until=st.one_of(st.none(), st.integers(0, 6000)), budget=st.sampled_from([None, 0, 300, 5000, 1 << 20]),
       strict=st.booleans())
def test_resync_finds_what_a_byte_by_byte_search_finds(pieces, p, until, budget, strict):
    data = b"".join(pieces)
    n = len(data)
    b1 = None if budget is None else CheckBudget(budget, strict)
    b2 = None if budget is None else CheckBudget(budget, strict)
    got = S.resync(data, p, n, until=until, budget=b1)
    want = _resync_reference(data, p, n, until, b2)
    assert got == want
    if b1 is not None:
        assert (b1.spent, b1.unchecked) == (b2.spent, b2.unchecked)


def test_resync_on_random_bytes_matches_the_reference():
    """Larger random inputs (compressed-looking bytes with batches and zero runs between) than hypothesis
    builds: the same answers from many starting points."""
    rng = random.Random(1125)
    for _ in range(20):
        parts = []
        for _k in range(rng.randint(1, 6)):
            parts.append(rng.randbytes(rng.randint(0, 20000)))
            parts.append(kafka_batch(rng.randint(0, 99), rng.randint(1, 4), pad=rng.randint(0, 500)))
            if rng.random() < 0.3:
                parts.append(bytes(rng.randint(1, 5000)))
        data = b"".join(parts)
        for p in (-1, 0, 1, 17, len(data) // 3, len(data) // 2):
            assert S.resync(data, p, len(data)) == _resync_reference(data, p, len(data), None, None)


# ---- a range start inside the last entry before it (bytes deleted at its end shift the next batch into it) ------

def test_a_batch_shifted_into_the_one_before_is_not_a_range_start():
    """The bundled segment with one byte deleted at 78% of its data (the file keeps its size): the batch after
    the deletion now starts one byte inside the valid batch before it, so the whole walk reads that batch and
    then skips from its end; a range starting between them must not begin at the shifted batch (found by
    tests/test_common_split_identity.py with --split-size 64)."""
    from conftest import FIXTURES

    raw = bytearray((FIXTURES / "kafka" / "logdir" / "fixture-0" / "00000000000000000000.log").read_bytes())
    end = len(raw.rstrip(b"\0")) or len(raw)
    at = int(0.78125 * end)
    del raw[at:at + 1]
    data = bytes(raw + bytes(1))
    whole = _whole(data)
    for split in (40, 64, 100, 128, 200):
        assert _ranges(data, split) == whole, split


@settings(max_examples=120, deadline=None, database=None)
@given(sizes=st.lists(st.integers(0, 300), min_size=2, max_size=10), how=st.sampled_from(["delete", "insert", "zero"]),
       where=st.floats(0, 1), k=st.integers(1, 40), seed=st.integers(0, 1 << 16),
       splits=st.lists(st.integers(30, 700), min_size=1, max_size=3))
def test_ranges_meet_after_bytes_are_deleted_inserted_or_zeroed(sizes, how, where, k, seed, splits):
    """Byte-level damage anywhere in a segment of valid batches (the file keeps its size after a deletion, as a
    preallocated one does): the ranges of every split give the whole walk."""
    raw = bytearray(b"".join(kafka_batch(5 * i, 2, pad=p) for i, p in enumerate(sizes)))
    at = int(where * len(raw))
    if how == "delete":
        del raw[at:at + k]
        raw += bytes(k)
    elif how == "insert":
        raw[at:at] = random.Random(seed).randbytes(k)
    else:
        raw[at:at + k] = bytes(len(raw[at:at + k]))
    data = bytes(raw)
    whole = _whole(data)
    for split in splits:
        assert _ranges(data, split) == whole, split
