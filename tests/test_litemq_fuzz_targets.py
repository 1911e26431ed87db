"""Bounded fuzzing of every LiteMQ decoder entry point (random bytes and mutations of the real stores).

Targets: ``fuzz/litemq_targets.py`` (merged into ``fuzz.targets.TARGETS`` as ``litemq.*``); the long run is
``python fuzz/run.py --target litemq.walk ...``. ``MQTOOL_FUZZ_EXAMPLES`` scales the budget.
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

NAMES = sorted(n for n in TARGETS if n.startswith("litemq."))


def test_every_entry_point_has_a_target():
    assert NAMES == ["litemq.abort", "litemq.checkpoint", "litemq.consumequeue", "litemq.decode_message",
                     "litemq.index", "litemq.record", "litemq.verify_store", "litemq.walk"]


@pytest.mark.parametrize("name", NAMES)
def test_fuzz_target(name):
    _make(name)()


def test_hostile_lengths_cost_nothing():
    """Length prefixes and string/array counts claiming gigabytes: memory stays small, nothing raised."""
    target = TARGETS["litemq.record"]
    tracemalloc.start()
    try:
        for length in (0xFFFFFFFF, 0x7FFFFFFF, 1 << 30, 200):
            data = bytearray(4096)
            for p in range(0, 4096 - 16, 64):
                struct.pack_into(">I4sHI", data, p, length, b"LMQ\x01", 0xFFFF, 0xFFFFFFFF)
            target(bytes(data))
            TARGETS["litemq.decode_message"](bytes(data[4:]))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20, peak


def test_target_catches_a_broken_decoder(monkeypatch):
    """The harness can fail: a decoder that lets out a stray exception is caught."""
    import fuzz.litemq_targets as T

    def broken(*a, **k):
        raise KeyError("boom")

    monkeypatch.setattr(T, "decode_message", broken)
    with pytest.raises(KeyError):
        TARGETS["litemq.decode_message"](b"\x00" * 64)
