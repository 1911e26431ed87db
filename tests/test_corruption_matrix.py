"""Reduced corruption matrix (the full one: ``python tools/corruption_matrix.py``).

Every damage kind, at most two positions each, on two real stores per family: a clean one and a crashed
one (preallocated zero segment after the data). Targets: every event reported with the right code at the
right place, every message whose bytes are intact recovered by salvage, no false finding.
"""
from __future__ import annotations

import sys

import pytest

from conftest import ROOT, realdata_root, require_realdata

sys.path.insert(0, str(ROOT))

from tools.corruption import ADAPTERS, KINDS, load_adapter, run_family, table  # noqa: E402

REDUCED = {"rocketmq": ["gen-5.1.4-clean", "gen-4.9.7-kill"],
           "litemq": ["clean", "crash"],
           "kafka": None}          # None: every store the adapter lists


@pytest.mark.parametrize("family", sorted(ADAPTERS))
def test_reduced_corruption_matrix(family):
    if load_adapter(family) is None:
        pytest.skip(f"no corruption adapter for {family} yet (tools/corruption/{family}.py)")
    require_realdata(family)
    outcomes = run_family(family, realdata_root(), stores=REDUCED.get(family), max_events_per_kind=2)
    assert outcomes, "no store with a log found"
    rows = table(outcomes)
    if family == "rocketmq":
        assert {r["kind"] for r in rows} == set(KINDS)
    misses = [(o.store, o.kind, o.label, o.missing, f"{o.recovered}/{o.untouched}",
               [(f["code"], f["file"], f["position"]) for f in o.false_findings[:3]])
              for o in outcomes if o.missing or o.false_findings or o.recovered < o.untouched]
    assert misses == []
    for r in rows:
        assert r["reported_pct"] == 100 and r["recovered_pct"] == 100 and r["false_findings"] == 0, r


def test_the_matrix_can_fail(tmp_path):
    """A verifier that reports nothing and salvages nothing scores 0 % / 0 %."""
    adapter = load_adapter("rocketmq")
    store = require_realdata("rocketmq", "gen-4.9.7-clean", "store")

    class Blind(type(adapter)):
        def verify(self, store, salvage_dir):
            return [], set()

    blind = Blind()
    msgs = blind.messages(store)
    from tools.corruption import run_event
    from collections import Counter

    ev = next(e for e in blind.events(store, msgs) if e.kind == "body-bitflip")
    out = run_event(blind, "rocketmq", store, msgs, Counter(), ev, tmp_path)
    assert not out.reported and out.recovered == 0 and out.untouched == len(msgs) - 1
