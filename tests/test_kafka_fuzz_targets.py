"""Bounded fuzzing of every Kafka decoder entry point (random bytes and mutations of the real logs).

Targets: ``fuzz/kafka_targets.py`` (merged into ``fuzz.targets.TARGETS`` as ``kafka.*``); the long run is
``python fuzz/run.py --target kafka.scan ...``. ``MQTOOL_FUZZ_EXAMPLES`` scales the budget.
``tests/test_kafka_fuzz.py`` (older) mutates the fixture segment only.
"""
from __future__ import annotations

import struct
import sys
import tracemalloc

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT))

from fuzz.targets import TARGETS  # noqa: E402
from fuzzcase import _make  # noqa: E402

NAMES = sorted(n for n in TARGETS if n.startswith("kafka."))


def test_every_entry_point_has_a_target():
    assert NAMES == ["kafka.decompress", "kafka.index_files", "kafka.internal", "kafka.scan", "kafka.text_files",
                     "kafka.verify_partition"]


@pytest.mark.parametrize("name", NAMES)
def test_fuzz_target(name):
    _make(name)()


def test_hostile_batch_lengths_cost_nothing():
    """Batch lengths and record counts claiming gigabytes: memory stays small, the walk ends."""
    target = TARGETS["kafka.scan"]
    tracemalloc.start()
    try:
        for size in (0x7FFFFFFF, 1 << 30, 1 << 20, 61):
            data = bytearray(4096)
            for p in range(0, 4096 - 61, 97):
                struct.pack_into(">qiibI", data, p, 0, size, 0, 2, 0)
                struct.pack_into(">i", data, p + 57, 0x7FFFFFFF)      # record count
            target(bytes(data))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20, peak


def test_found_by_fuzzing_quorum_state_not_an_object(tmp_path):
    """quorum-state holding JSON that is no object (or nested past the recursion limit) is a problem, not a
    crash (found by the text_files target)."""
    from mqtool.kafka.indexfiles import read_quorum_state

    for text in ("[1, 2]", "7", "[" * 100_000):
        p = tmp_path / "quorum-state"
        p.write_text(text)
        assert "problem" in read_quorum_state(p)


def test_found_by_fuzzing_short_transaction_state_value():
    """A __transaction_state record whose value is 0 or 1 byte long let struct.error out of the decoder
    (dump --print-data would crash; found by the internal target)."""
    from mqtool.kafka.internal import decode_transaction_state

    for value in (b"", b"\x00"):
        d = decode_transaction_state(b"\x00\x00\x00\x01t", value)
        assert d["value_error"] == "value shorter than its version" and d["key"] == {"transactionalId": "t"}


def test_target_catches_a_broken_decoder(monkeypatch):
    import fuzz.kafka_targets as T

    def broken(*a, **k):
        raise KeyError("boom")

    monkeypatch.setattr(T, "decoder_for", lambda topic: broken)
    with pytest.raises(KeyError):
        TARGETS["kafka.internal"](b"\x01\x02\x03")
