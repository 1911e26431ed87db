"""The bounded fuzz run of one target of ``fuzz/targets.py`` (random bytes and mutations of the real seeds), shared
by the per-family fuzz test files. ``MQTOOL_FUZZ_EXAMPLES`` scales every budget."""
from __future__ import annotations

import os
import sys

from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import ROOT, realdata_root

sys.path.insert(0, str(ROOT))

from fuzz.targets import TARGETS, seeds  # noqa: E402

SCALE = float(os.environ.get("MQTOOL_FUZZ_EXAMPLES", "1"))
SEEDS = seeds(realdata_root())
BUDGET = {"store": 60, "scan_file": 40, "index": 40, "scan": 60, "consumequeue": 60, "checkpoint": 40}


def _settings(name: str, base: int = 120):
    return settings(max_examples=max(1, int(BUDGET.get(name, base) * SCALE)), deadline=None, database=None,
                    suppress_health_check=list(HealthCheck))


@st.composite
def mutated(draw, corpus: list[bytes]):
    """A real seed with byte changes, a cut, an insertion or a duplicated slice."""
    data = bytearray(draw(st.sampled_from(corpus)))
    for _ in range(draw(st.integers(0, 12))):
        if not data:
            break
        i = draw(st.integers(0, len(data) - 1))
        data[i] = draw(st.integers(0, 255))
    op = draw(st.sampled_from(["none", "cut", "insert", "dup", "zero"]))
    if data and op != "none":
        i = draw(st.integers(0, len(data)))
        if op == "cut":
            data = data[:i]
        elif op == "insert":
            data[i:i] = draw(st.binary(min_size=1, max_size=64))
        elif op == "dup":
            j = draw(st.integers(i, min(len(data), i + 512)))
            data[i:i] = data[i:j]
        else:
            data[i:i + 4096] = bytes(len(data[i:i + 4096]))
    return bytes(data)


def _inputs(name: str):
    rnd = st.binary(min_size=0, max_size=2048)
    if SEEDS.get(name):
        return st.one_of(rnd, mutated(SEEDS[name]))
    return rnd


def _make(name: str):
    target = TARGETS[name]

    @_settings(name)
    @given(data=_inputs(name))
    def run(data):
        target(data)

    return run
