"""Runs of adjoining, well-framed v2 batches whose CRCs all fail (mqtool.kafka.scan).

Kafka follows the lengths (DumpLogSegments prints each such batch with ``isValid: false``, reference
kafka.md section 12), so the walker reports each batch of the run with ``crc_ok`` False when the lengths lead
on to a batch with a valid CRC, a zero tail or exactly the end of the data; a run that ends in bytes that do
not frame stays one ``skipped`` range. Expected positions and offsets are computed from the batch sizes the
builder made (sums of lengths), the CRC damage is one flipped byte in a record value.
"""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings, strategies as st

from builders import kafka_batch
from mqtool.damage import CHECK_BUDGET_FACTOR
from mqtool.kafka import scan as S
from mqtool.kafka.records import Batch

N = 6           # batches of 3 records: offsets 3k .. 3k+2


def _segment(bad: set[int], count: int = N) -> tuple[bytearray, list[int]]:
    """``count`` batches; the CRC of the ones in ``bad`` broken by one flipped byte in the last record's
    value (the second-to-last byte of the batch: the record's header count follows it). Returns the bytes and
    the batch positions."""
    parts = [kafka_batch(3 * k, 3) for k in range(count)]
    pos = [sum(len(b) for b in parts[:k]) for k in range(count)]
    data = bytearray(b"".join(parts))
    for k in bad:
        data[pos[k] + len(parts[k]) - 2] ^= 0x01
    return data, pos


def _events(data) -> list[tuple]:
    return [("batch", e.position, e.base_offset, e.crc_ok) if isinstance(e, Batch) else (e.code, e.position, e.end)
            for e in S.scan(bytes(data), "x")]


@pytest.mark.parametrize("bad", [{1, 2}, {1, 2, 3}, {0, 1}, {3, 4, 5}, {0, 1, 2, 3, 4, 5}],
                         ids=["two", "three", "at-start", "at-eof", "all"])
def test_every_batch_of_a_bad_run_is_read(bad):
    data, pos = _segment(bad)
    assert _events(data) == [("batch", pos[k], 3 * k, k not in bad) for k in range(N)]


def test_bad_run_before_a_zero_tail():
    data, pos = _segment({4, 5})
    data += bytes(4096)                                 # preallocated
    assert _events(data) == [("batch", pos[k], 3 * k, k < 4) for k in range(N)] + \
        [("zero-tail", len(data) - 4096, len(data))]


def test_bad_run_ending_in_garbage_is_skipped():
    """Batches 2 and 3 fail their CRC, batch 4's header is overwritten: the lengths of 2 and 3 are not
    confirmed by anything after them (a batch's length is not under its CRC), so 2 .. 4 are one skipped range
    up to batch 5, as a single bad batch before garbage always was."""
    data, pos = _segment({2, 3})
    data[pos[4]:pos[4] + 20] = b"\xee" * 20
    assert _events(data) == [("batch", pos[0], 0, True), ("batch", pos[1], 3, True),
                             ("skipped", pos[2], pos[5]), ("batch", pos[5], 15, True)]


def test_bad_run_longer_than_the_hop_limit_is_skipped(monkeypatch):
    monkeypatch.setattr(S, "BAD_RUN_HOPS", 3)
    data, pos = _segment({1, 2, 3, 4})                 # four in a row: from batch 1 the run is too long
    assert _events(data) == [("batch", pos[0], 0, True), ("skipped", pos[1], pos[5]), ("batch", pos[5], 15, True)]
    data, pos = _segment({1, 2, 3})                    # three: within the limit
    assert _events(data) == [("batch", pos[k], 3 * k, k not in (1, 2, 3)) for k in range(N)]


def test_a_run_is_checked_once(monkeypatch):
    """Each entry's CRC is computed at most twice (once looking ahead, once read), however long the run."""
    calls = []
    real = S._span_crc

    def span(fn, buf, a, b):
        calls.append(a)
        return real(fn, buf, a, b)

    monkeypatch.setattr(S, "_span_crc", span)
    monkeypatch.setattr(S, "BAD_RUN_HOPS", 1000)
    count = 200
    data, pos = _segment(set(range(1, count - 1)), count)
    events = _events(data)
    assert [e[3] for e in events] == [True] + [False] * (count - 2) + [True]
    assert len(calls) == len(set(calls)) <= count          # look-ahead: each position once


def _near_miss_run(count: int, pad: int) -> bytes:
    """``count`` well-shaped v2 headers, each followed by ``pad`` bytes and claiming exactly its own
    ``61 + pad`` bytes (so each leads to the next), every CRC wrong: a crafted run ending at the end of the
    data."""
    out = bytearray()
    for _ in range(count):
        out += S._HDR_V2.pack(0, 49 + pad, -1, 2, 12345, 0, 0, -1, -1, -1, -1, -1, 0) + b"\xab" * pad
    return bytes(out)


def test_crafted_bad_runs_cost_linear_checking(crc_bytes):
    """20000 shaped entries with bad CRCs back to back: the look-ahead checks each once (a run longer than
    the hop limit is skipped), so the bytes checksummed stay within the walk's budget."""
    seen = crc_bytes
    data = kafka_batch(0, 1) + _near_miss_run(20000, 40)
    n = len(data)
    events = list(S.scan(data, "x"))
    assert [getattr(e, "code", "batch") for e in events] == ["batch", "skipped"]
    assert events[1].end == n
    assert seen[0] <= CHECK_BUDGET_FACTOR * n + S.WALK_BUDGET_FLOOR
    assert seen[0] <= 3 * n                 # resync (each candidate once) + look-ahead + the one decode


def test_ranges_meet_across_bad_runs():
    """scan_range over every split of a segment with bad runs (one crossing each boundary) gives the whole walk."""
    data, pos = _segment({1, 2, 4, 5}, 8)
    data = bytes(data)
    whole = _events(data)
    n = len(data)
    for split in (17, 50, 94, 100, 150, 200, 333):
        got = []
        for a in range(0, n, split):
            got += [("batch", e.position, e.base_offset, e.crc_ok) if isinstance(e, Batch)
                    else (e.code, e.position, e.end) for e in S.scan_range(data, "x", a, min(n, a + split))]
        assert got == whole, split


def _store(tmp_path, data: bytes):
    part = tmp_path / "t-0"
    part.mkdir()
    (part / "00000000000000000000.log").write_bytes(bytes(data))
    return part


def test_verify_reports_each_bad_batch(tmp_path, run_cli):
    data, pos = _segment({1, 2})
    code, out, err = run_cli("verify", "store", _store(tmp_path, data), "--json")
    assert code == 1, err
    rows = [json.loads(x) for x in out.splitlines()]
    crc = [(r["position"], r["offset"]) for r in rows if r.get("code") == "kafka.crc-mismatch"]
    assert crc == [(pos[1], 3), (pos[2], 6)]
    assert not [r for r in rows if r.get("code") == "kafka.skipped-bytes"]


def test_dump_shows_the_records_of_each_bad_batch(tmp_path, run_cli):
    data, pos = _segment({1, 2, 3})
    code, out, err = run_cli("dump", "kafka", _store(tmp_path, data), "--json", "--deep")
    rows = [json.loads(x) for x in out.splitlines()]
    batches = [(r["position"], r["crc_ok"]) for r in rows if r["kind"] == "batch"]
    assert batches == [(pos[k], k not in (1, 2, 3)) for k in range(N)]
    assert [r["offset"] for r in rows if r["kind"] == "record"] == list(range(3 * N))
    assert not [r for r in rows if r["kind"] == "damage"]
    # the note on stderr says the batches were met, not skipped (they were shown), and the exit says damage
    assert code == 1 and "3 damaged ranges met while reading" in err and "skipped" not in err, err


def test_carve_keeps_to_entries_that_pass_every_check(tmp_path, run_cli):
    """carve shows only entries whose CRC is valid (its promise: random bytes give none), so a bad run is
    left out there, as a single bad batch is: the batches before and after it are two runs."""
    data, pos = _segment({1, 2})
    img = tmp_path / "x.img"
    img.write_bytes(b"\x07" * 5 + bytes(data))
    code, out, err = run_cli("carve", img, "--family", "kafka", "--json")
    rows = [json.loads(x) for x in out.splitlines()]
    assert [(r["image_position"], r["offset"]) for r in rows if r["kind"] == "batch"] == \
        [(5 + pos[k], 3 * k) for k in (0, 3, 4, 5)]
    assert rows[-1]["runs"] == {"kafka": 2}


@settings(max_examples=60, deadline=None, database=None)
@given(sizes=st.lists(st.tuples(st.integers(1, 4), st.integers(0, 50), st.booleans()), min_size=3, max_size=12),
       garbage=st.one_of(st.none(), st.tuples(st.integers(0, 11), st.binary(min_size=1, max_size=20))),
       tail=st.integers(0, 300), cut=st.one_of(st.none(), st.floats(0, 1)), hops=st.sampled_from([1, 2, 3, 64]),
       splits=st.lists(st.integers(1, 400), min_size=1, max_size=3))
def test_ranges_meet_across_random_bad_runs(sizes, garbage, tail, cut, hops, splits):
    """Random segments (batches of random sizes, random ones with a bad CRC, maybe overwritten bytes, a zero
    tail, a cut): the ranges of every split give the whole walk, whatever the hop limit."""
    parts = [kafka_batch(3 * k, n, pad=pad) for k, (n, pad, _bad) in enumerate(sizes)]
    pos = [sum(len(b) for b in parts[:k]) for k in range(len(parts))]
    data = bytearray(b"".join(parts))
    for k, (_n, _pad, bad) in enumerate(sizes):
        if bad:
            data[pos[k] + len(parts[k]) - 2] ^= 0x01
    if garbage is not None:
        at = pos[garbage[0] % len(pos)]
        data[at:at + len(garbage[1])] = garbage[1][:len(data) - at]
    data += bytes(tail)
    if cut is not None:
        del data[int(cut * len(data)):]
    data = bytes(data)
    n = len(data)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(S, "BAD_RUN_HOPS", hops)
        whole = _events(data)
        for split in splits:
            got = []
            for a in range(0, n, split):
                got += [("batch", e.position, e.base_offset, e.crc_ok) if isinstance(e, Batch)
                        else (e.code, e.position, e.end) for e in S.scan_range(data, "x", a, min(n, a + split))]
            assert got == whole, split


@pytest.mark.parametrize("bad", [{1}, {1, 2}])
def test_bad_crc_batches_do_not_look_like_compaction(tmp_path, run_cli, bad):
    """Segments 0 (batches of offsets 0..2, 3..5, 6..8) and 30 (offsets 9..29 in no segment: a lost
    segment, an error unless the partition shows compaction). The batches in ``bad`` fail their CRC; their
    offsets still follow on, so there is no interior offset gap and no sign of compaction."""
    from builders import kafka_builder

    batches = [kafka_batch(3 * k, 3) for k in range(3)]
    seg0 = bytearray(b"".join(batches))
    for k in bad:
        at = sum(len(b) for b in batches[:k + 1]) - 2
        seg0[at] ^= 0x01
    part = tmp_path / "orders-0"
    kafka_builder().write_segments(part, {0: bytes(seg0), 30: kafka_batch(30, 3)}, 4096)
    code, out, err = run_cli("verify", "store", part, "--json")
    rows = [json.loads(x) for x in out.splitlines()]
    found = {(r["code"], r["severity"]) for r in rows if r["kind"] == "finding"}
    assert ("kafka.segment-gap", "error") in found, rows
    assert not [c for c, _ in found if c == "kafka.offset-gaps"]
    assert [r["offset"] for r in rows if r.get("code") == "kafka.crc-mismatch"] == [3 * k for k in sorted(bad)]
