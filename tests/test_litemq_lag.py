"""`mqtool query --unconsumed-by GROUP` and `info`'s lag per group for LiteMQ.

Ground truth: expected.json of the real stores: ``meta.consumer_offsets_acked`` (what the driver acked,
which the clean shutdown wrote to checkpoint/checkpoint), ``meta.consumequeue_entry_counts`` and every
message's consumequeue entries (topic, queue, index) with its commitlog offset.
"""
from __future__ import annotations

import json
import shutil

import pytest

from tests.conftest import load_json, require_realdata


def _store(ds):
    return require_realdata("litemq", ds, "data", "broker")


def _ndjson(out: str):
    rows = [json.loads(x) for x in out.splitlines() if x.strip()]
    return [r for r in rows if r["kind"] != "unconsumed-summary"], [r for r in rows if r["kind"] == "unconsumed-summary"]


def _want(ds: str, acked: dict) -> list[tuple]:
    """(topic, queue, entry index, commitlog offset) of every entry at or after the acked offsets."""
    out = []
    for m in load_json(require_realdata("litemq", ds, "expected.json"))["messages"]:
        for e in m.get("consumequeue") or []:
            off = acked.get(e["topic"], {}).get(str(e["queue_id"]))
            if off is not None and e["index"] >= off:
                out.append((e["topic"], e["queue_id"], e["index"], m["commitlog_offset"]))
    return sorted(out)


@pytest.mark.parametrize("group", ["cg-orders", "cg-pay"])
def test_clean_store_unconsumed_entries(run_cli, group):
    meta = load_json(require_realdata("litemq", "clean", "expected.json"))["meta"]
    acked = meta["consumer_offsets_acked"][group]
    code, out, err = run_cli("query", _store("clean"), "--unconsumed-by", group, "--json")
    assert code == 0, err
    rows, summary = _ndjson(out)
    assert sorted((r["topic"], r["queue_id"], r["cq_queue_offset"], r["offset"]) for r in rows) == \
        _want("clean", acked)
    assert all(r["group"] == group and r["committed_offset"] == acked[r["topic"]][str(r["queue_id"])] for r in rows)
    counts = meta["consumequeue_entry_counts"]
    assert {(s["topic"], s["queue"]): (s["committed_offset"], s["max_offset"], s["unconsumed"]) for s in summary} == \
        {(t, int(q)): (off, counts[f"{t}/{q}"], counts[f"{t}/{q}"] - off)
         for t, qs in acked.items() for q, off in qs.items()}


def test_clean_store_info_lag_per_group(run_cli):
    meta = load_json(require_realdata("litemq", "clean", "expected.json"))["meta"]
    code, out, _ = run_cli("info", _store("clean"), "--json")
    lag = {(g["group"], g["topic"]): g for g in json.loads(out)["consumer_groups"]}
    counts = meta["consumequeue_entry_counts"]
    for group, topics in meta["consumer_offsets_acked"].items():
        for topic, qs in topics.items():
            g = lag[(group, topic)]
            assert g["queues"] == len(qs) and g["committed"] == sum(qs.values())
            assert g["lag"] == sum(counts[f"{topic}/{q}"] - off for q, off in qs.items())


def test_unknown_group_lists_the_checkpoint_groups(run_cli):
    code, out, err = run_cli("query", _store("clean"), "--unconsumed-by", "nobody")
    assert code == 1 and out == "" and "known groups (2): 'cg-orders', 'cg-pay'" in err


def test_crash_store_has_no_offsets_then_offsets_file(run_cli, tmp_path):
    # MANIFEST: after the crash checkpoint/ is empty (the async flush never forces a checkpoint)
    code, out, err = run_cli("query", _store("crash"), "--unconsumed-by", "cg-orders")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "checkpoint" in err and "--offsets" in err
    acked = {"orders.v1": {"0": 5}}
    f = tmp_path / "acked.json"
    f.write_text(json.dumps({"cg-orders": acked}))
    code, out, err = run_cli("query", _store("crash"), "--unconsumed-by", "cg-orders", "--offsets", f, "--json")
    assert code == 0, err
    rows, _ = _ndjson(out)
    assert sorted((r["topic"], r["queue_id"], r["cq_queue_offset"], r["offset"]) for r in rows) == \
        _want("crash", acked)


def test_damaged_checkpoint_is_a_clear_error(run_cli, tmp_path):
    dst = tmp_path / "broker"
    shutil.copytree(_store("clean"), dst)
    cp = dst / "checkpoint" / "checkpoint"
    cp.write_bytes(cp.read_bytes()[:20])
    code, out, err = run_cli("query", dst, "--unconsumed-by", "cg-orders")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "checkpoint" in err and "Traceback" not in err
