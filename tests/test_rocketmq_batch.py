"""RocketMQ plain batch items (issue 15, "RocketMQ batch items"): each stored item carries its own UNIQ_KEY (the
id its producer was given) and then its batch's, appended by the broker with the batch properties. ``query
--unique-key`` finds an item by either.

Ground truth: the real stores' expected.json (``items[].sentProperties.UNIQ_KEY``, ``batchProperties.UNIQ_KEY``,
``msgIds`` = offsetMsgIds whose last 16 hex digits are the items' commitlog offsets). The broker-written index
holds the batch's id for every item and not the items' own ids (the dispatch reads the properties into a map, the
last value wins): the own id is found by the scan the query falls back to.
"""
from __future__ import annotations

import json
import shutil

import pytest

from builders import rocketmq_unit
from conftest import FIXTURES, load_json, require_realdata
from formats import rocketmq as F


def _rows(out):
    return [json.loads(x) for x in out.splitlines() if x.strip()]


def _batch(ds):
    exp = load_json(require_realdata("rocketmq", ds, "expected.json"))
    b = next(m for m in exp["messages"] if "items" in m)
    offsets = [int(i[-16:], 16) for i in b["msgIds"].split(",")]
    own = [it["sentProperties"]["UNIQ_KEY"] for it in b["items"]]
    return offsets, own, b["batchProperties"]["UNIQ_KEY"]


@pytest.mark.parametrize("ds", ["gen-4.9.7-clean", "gen-5.1.4-clean", "gen-4.9.7-kill", "gen-5.1.4-kill"])
def test_real_batch_items_found_by_own_and_batch_unique_key(run_cli, ds):
    store = require_realdata("rocketmq", ds, "store")
    offsets, own, batch_id = _batch(ds)
    clean = ds.endswith("clean")
    for off, uid in zip(offsets, own):
        for extra in ((), ("--scan",)):
            code, out, err = run_cli("query", store, "--unique-key", uid, "--json", *extra)
            rows = _rows(out)
            assert code == 0 and [r["offset"] for r in rows] == [off], (uid, extra, err)
            assert rows[0]["via"] == "scan"
            if not extra and clean:
                assert "not in the index" in err     # the broker did not index an item's own id
    code, out, err = run_cli("query", store, "--unique-key", batch_id, "--json")
    rows = _rows(out)
    assert code == 0 and sorted(r["offset"] for r in rows) == offsets
    if clean:
        assert {r["via"] for r in rows} == {"index"}
    code, out, _ = run_cli("query", store, "--unique-key", batch_id, "--scan", "--json")
    assert sorted(r["offset"] for r in _rows(out)) == offsets


def test_generated_batch_items(run_cli, tmp_path):
    """A batch of three appended to the fixture store's last segment as the broker stores a plain batch:
    one unit per item, the item's properties then the batch's (with the batch's UNIQ_KEY)."""
    store = tmp_path / "store"
    shutil.copytree(FIXTURES / "rocketmq" / "store", store)
    code, out, _ = run_cli("dump", "commitlog", store, "--json")
    last = max(_rows(out), key=lambda r: r["offset"])
    seg = sorted((store / "commitlog").iterdir())[-1]
    base = int(seg.name)
    pos = last["offset"] + last["size"] - base
    batch_props = [("UNIQ_KEY", "0A0000020000000000000000000000FF"), ("WAIT", "true")]
    own = [f"0A00000200000000000000000000{i:04X}" for i in range(3)]   # unlike the fixture's ids
    data = bytearray(seg.read_bytes())
    offsets = []
    for i, uid in enumerate(own):
        props = F.properties_to_string([("KEYS", f"bk-{i}"), ("UNIQ_KEY", uid), ("WAIT", "true")] + batch_props)
        unit = rocketmq_unit(b"Batched", b"item %d" % i, props.encode(), queue_offset=i, phys=base + pos)
        offsets.append(base + pos)
        data[pos:pos + len(unit)] = unit
        pos += len(unit)
    seg.write_bytes(bytes(data))
    for off, uid in zip(offsets, own):
        code, out, err = run_cli("query", store, "--unique-key", uid, "--json")
        rows = _rows(out)
        assert code == 0 and [r["offset"] for r in rows] == [off], err
        assert rows[0]["uniq_key"] == batch_props[0][1]                 # what the broker reads: the last
        assert [p[1] for p in rows[0]["property_pairs"] if p[0] == "UNIQ_KEY"] == [uid, batch_props[0][1]]
    code, out, _ = run_cli("query", store, "--unique-key", batch_props[0][1], "--json")
    assert sorted(r["offset"] for r in _rows(out)) == offsets
    code, out, err = run_cli("query", store, "--unique-key", "0A0000020000000000000000000000FE", "--json")
    assert code == 1 and _rows(out) == []
