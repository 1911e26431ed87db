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
#: damage kinds a family's stores cannot have: LiteMQ never flushes its key index (index/ is empty in every
#: real store), Kafka has no consume queues (its .index/.timeindex corruption is index-entry-corruption)
NOT_APPLICABLE = {"rocketmq": set(), "litemq": {"index-entry-corruption"}, "kafka": {"cq-entry-corruption"}}


@pytest.mark.parametrize("family", sorted(ADAPTERS))
def test_reduced_corruption_matrix(family):
    if load_adapter(family) is None:
        pytest.skip(f"no corruption adapter for {family} yet (tools/corruption/{family}.py)")
    require_realdata(family)
    outcomes = run_family(family, realdata_root(), stores=REDUCED.get(family), max_events_per_kind=2)
    assert outcomes, "no store with a log found"
    rows = table(outcomes)
    assert {r["kind"] for r in rows} == set(KINDS) - NOT_APPLICABLE[family]
    assert all(r["detectable"] > 0 for r in rows if r["kind"] != "body-bitflip" or family != "litemq")
    misses = [(o.store, o.kind, o.label, o.missing, f"{o.recovered}/{o.untouched}",
               [(f["code"], f["file"], f["position"]) for f in o.false_findings[:3]])
              for o in outcomes if o.missing or o.false_findings or o.recovered < o.untouched]
    assert misses == []
    for r in rows:
        assert r["reported_pct"] == 100 and r["recovered_pct"] == 100 and r["false_findings"] == 0, r


@pytest.mark.parametrize("family,store,kind", [
    ("rocketmq", ("rocketmq", "gen-4.9.7-clean", "store"), "body-bitflip"),
    ("litemq", ("litemq", "clean", "data", "broker"), "truncate-mid-record"),
    ("kafka", ("kafka", "kafka-python-3.0.12-patched", "kp-0"), "body-bitflip"),
])
def test_the_matrix_can_fail(tmp_path, family, store, kind):
    """A verifier that reports nothing and salvages nothing scores 0 % / 0 %."""
    adapter = load_adapter(family)
    store = require_realdata(*store)

    class Blind(type(adapter)):
        def verify(self, store, salvage_dir):
            return [], set()

    blind = Blind()
    msgs = blind.messages(store)
    from tools.corruption import run_event
    from collections import Counter

    ev = next(e for e in blind.events(store, msgs) if e.kind == kind)
    out = run_event(blind, family, store, msgs, Counter(), ev, tmp_path)
    assert out.detectable and not out.reported and out.recovered == 0 and 0 < out.untouched < len(msgs)


def test_litemq_body_flip_is_counted_as_undetectable():
    """LiteMQ records have no checksum: a body flip is n/d (outside (a)), yet nothing may be lost or reported."""
    require_realdata("litemq", "clean")
    outs = run_family("litemq", realdata_root(), kinds=["body-bitflip"], stores=["clean"], max_events_per_kind=1)
    assert [o.detectable for o in outs] == [False]
    assert outs[0].recovered == outs[0].untouched and outs[0].false_findings == []
    row, = table(outs)
    assert row["undetectable"] == 1 and row["detectable"] == 0
