"""Conformance on the two real LiteMQ stores written by LiteMQ's own storage code (realdata/litemq).

Expected values come from each dataset's expected.json (what was sent / what LiteMQ's code returned).
"""
from __future__ import annotations

import base64
import hashlib
import json
from collections import Counter

import pytest

from conftest import load_json, require_realdata
from mqtool.litemq.records import tag_hash

DATASETS = ["clean", "crash"]


def _store(ds):
    return require_realdata("litemq", ds, "data", "broker")


def _expected(ds):
    return load_json(require_realdata("litemq", ds, "expected.json"))


def _ndjson(out: str):
    return [json.loads(line) for line in out.splitlines() if line.strip()]


@pytest.fixture(scope="module", params=DATASETS)
def dumped(request):
    from click.testing import CliRunner

    from mqtool.cli import cli

    ds = request.param
    store = _store(ds)
    r = CliRunner().invoke(cli, ["dump", "commitlog", str(store), "--json", "--body", "base64"],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.stderr
    rows = _ndjson(r.stdout)
    r2 = CliRunner().invoke(cli, ["dump", "consumequeue", str(store), "--json"], catch_exceptions=False)
    assert r2.exit_code == 0, r2.stderr
    return ds, rows, _ndjson(r2.stdout), _expected(ds)


def test_every_expected_record_found_with_all_fields(dumped):
    ds, rows, _, exp = dumped
    by_offset = {r["offset"]: r for r in rows}
    accepted = [m for m in exp["messages"] if m["accepted"]]
    assert len(rows) == len(accepted) == exp["meta"]["messages_accepted"]
    for m in accepted:
        r = by_offset[m["commitlog_offset"]]
        assert r["size"] == m["store_size_incl_prefix"]
        assert r["file"] == m["commitlog_file"]
        assert r["position"] == m["offset_in_file"]
        assert r["msg_id"] == m["message_id"]
        assert r["topic"] == m["topic"]
        assert r["queue_id"] == m["queue_id"]
        assert r["tags"] == m["tags"]
        assert r["keys"] == m["keys"]
        assert set(r["properties"].items()) == set(m["properties"].items())
        assert list(r["properties"]) == sorted(r["properties"])
        assert r["body_size"] == m["body_len"]
        body = base64.b64decode(r["body"])
        assert len(body) == m["body_len"]
        if m["body_len"]:
            assert hashlib.sha256(body).hexdigest() == m["body_sha256"]
        assert r["message_type_code"] == m["type_code"] and r["message_type"] == m["type"]
        assert r["priority"] == m["priority"] and r["reliability"] == m["reliability"]
        assert r["delay_time"] == m["delay_time"]
        assert r["transaction_id"] == m["transaction_id"]
        assert r["status_code"] == m["message_status"]
        assert r["sharding_key"] == m["sharding_key"]
        assert r["broadcast"] == m["broadcast"]
        assert r["born_timestamp"] == m["born_timestamp"]
        assert r["born_host"] == m["born_host"] and r["store_host"] == m["store_host"]
        assert r["store_timestamp"] == m["store_timestamp_in_record"]
        # fields LiteMQ never fills
        assert (r["queue_offset"], r["commitlog_offset"], r["store_size"]) == (0, 0, 0)
        assert r["stale"] is False
    last = max(rows, key=lambda r: r["offset"])
    assert last["offset"] + last["size"] == exp["meta"]["commitlog_wrote_offset"]


def test_every_consumequeue_entry_and_tag_hash_matched(dumped):
    ds, rows, cq_rows, exp = dumped
    by_pos = {(e["topic"], e["queue_id"], e["queue_offset"]): e for e in cq_rows}
    by_offset = {r["offset"]: r for r in rows}
    n = 0
    for m in exp["messages"]:
        for c in m.get("consumequeue") or []:
            e = by_pos[(c["topic"], c["queue_id"], c["index"])]
            assert e["file"] == c["file"]
            assert e["position"] == c["byte_offset_in_file"]
            assert e["offset"] == m["commitlog_offset"]
            assert e["size"] == c["size"] == m["store_size_incl_prefix"]
            assert e["tag_hash"] == c["tag_hash"]
            assert e["store_timestamp"] == c["timestamp"]
            # our FNV-1a over the record's own tags gives LiteMQ's hash
            rec = by_offset[e["offset"]]
            assert tag_hash([t.encode() for t in rec["tags"]]) == c["tag_hash"]
            n += 1
    assert n == len(cq_rows) == sum(exp["meta"]["consumequeue_entry_counts"].values())
    counts = Counter(f"{e['topic']}/{e['queue_id']}" for e in cq_rows)
    assert dict(counts) == exp["meta"]["consumequeue_entry_counts"]


def test_checkpoint_clean(run_cli):
    exp = _expected("clean")["meta"]["checkpoint_expected"]
    code, out, err = run_cli("dump", "checkpoint", _store("clean"), "--json")
    assert code == 0, err
    (row,) = _ndjson(out)
    assert row["commitlog_flushed_offset"] == exp["commitlog_flushed_offset"]
    assert row["consumequeue_offsets"] == exp["consumequeue_flushed_offsets"]
    assert row["consumer_offsets"] == exp["consumer_offsets"]
    assert row["consumer_offset_count"] == exp["header_consumer_offset_count"]
    assert row["consumer_groups"] == 2


def test_checkpoint_missing_after_crash(run_cli):
    code, out, err = run_cli("dump", "checkpoint", _store("crash"))
    assert code == 2 and "no checkpoint" in err


def test_abort(run_cli):
    code, out, _ = run_cli("dump", "abort", _store("crash"), "--json")
    (row,) = _ndjson(out)
    raw = (_store("crash") / "abort" / "abort").read_bytes()
    assert row["present"] is True and row["start_time"] == int(raw.decode())
    code, out, _ = run_cli("dump", "abort", _store("clean"), "--json")
    (row,) = _ndjson(out)
    assert row["present"] is False


def test_index_sample_gz(run_cli):
    p = require_realdata("litemq", "clean", "extras", "index-20261122091857.gz")
    meta = _expected("clean")["meta"]["index_sample"]
    code, out, err = run_cli("dump", "index", p, "--json")
    assert code == 0, err
    rows = _ndjson(out)
    hdr = rows[0]
    assert hdr["kind"] == "index_header" and hdr["index_count"] == meta["index_count"]
    assert hdr["hash_slot_count"] == meta["max_hash_slots"] and hdr["size"] == 20_003_940
    assert sum(r["kind"] == "index_entry" for r in rows) == meta["total_entries"]


def test_segment_file_and_commitlog_dir_paths(run_cli):
    store = _store("clean")
    code, out, _ = run_cli("dump", "commitlog", store / "commitlog" / "00000000000000000001", "--json")
    rows = _ndjson(out)
    assert code == 0 and rows and all(r["file"].endswith("00000000000000000001") for r in rows)
    assert rows[0]["offset"] == 131072
    code, out, _ = run_cli("dump", "commitlog", store / "commitlog", "--json", "--topic", "audit_log")
    rows = _ndjson(out)
    assert code == 0 and {r["topic"] for r in rows} == {"audit_log"}
    assert len(rows) == sum(1 for m in _expected("clean")["messages"] if m["accepted"] and m["topic"] == "audit_log")


@pytest.mark.parametrize("ds", DATASETS)
def test_order_queue_rule_matches_litemq(ds):
    from mqtool.litemq.records import order_queue

    orders = [m for m in _expected(ds)["messages"] if m["accepted"] and m["type"] == "ORDER"]
    assert len(orders) == 4
    for m in orders:
        assert order_queue(m["sharding_key"]) == m["queue_id"] == m["consumequeue"][0]["queue_id"]
