"""query on the real LiteMQ stores; expected answers from expected.json."""
from __future__ import annotations

import gzip
import json
import shutil

import pytest

from conftest import load_json, require_realdata


def _store(ds):
    return require_realdata("litemq", ds, "data", "broker")


def _exp(ds):
    return [m for m in load_json(require_realdata("litemq", ds, "expected.json"))["messages"] if m["accepted"]]


def _rows(out):
    return [json.loads(x) for x in out.splitlines() if x.strip()]


@pytest.fixture(scope="module")
def indexed_copy(tmp_path_factory):
    """clean/ with its flushed index sample put where LiteMQ would have written it."""
    dst = tmp_path_factory.mktemp("idx") / "broker"
    shutil.copytree(_store("clean"), dst)
    (dst / "index").mkdir(exist_ok=True)
    gz = require_realdata("litemq", "clean", "extras", "index-20261122091857.gz")
    (dst / "index" / "20261122091857").write_bytes(gzip.decompress(gz.read_bytes()))
    return dst


@pytest.mark.parametrize("key", ["user-42", "order-0001", "ключ-1", "tx", "delay-long", "no-such-key"])
def test_by_key_scan_and_index_agree_with_expected(run_cli, indexed_copy, key):
    want = {m["commitlog_offset"] for m in _exp("clean") if key in m["keys"]}
    code, out, _ = run_cli("query", _store("clean"), "--key", key, "--json")
    assert {r["offset"] for r in _rows(out)} == want and code == (0 if want else 1)
    code, out, _ = run_cli("query", indexed_copy, "--key", key, "--json")
    # the index holds SendMessage-accepted messages: the empty-body direct write is not in it
    want_idx = {m["commitlog_offset"] for m in _exp("clean") if key in m["keys"] and m["body_len"] > 0}
    assert {r["offset"] for r in _rows(out)} == want_idx


@pytest.mark.parametrize("ds", ["clean", "crash"])
def test_by_offset_and_msg_id(run_cli, ds):
    exp = _exp(ds)
    for m in exp[::15]:
        code, out, _ = run_cli("query", _store(ds), "--offset", m["commitlog_offset"], "--json")
        (r,) = _rows(out)
        assert r["msg_id"] == m["message_id"] and r["size"] == m["store_size_incl_prefix"]
        code, out, _ = run_cli("query", _store(ds), "--offset", m["commitlog_offset"] + 5, "--containing",
                               "--json")
        assert _rows(out)[0]["offset"] == m["commitlog_offset"]
        code, out, _ = run_cli("query", _store(ds), "--msg-id", m["message_id"], "--json")
        assert [r["offset"] for r in _rows(out)] == [m["commitlog_offset"]]
    code, out, err = run_cli("query", _store(ds), "--offset", exp[0]["commitlog_offset"] + 1)
    assert code == 1 and "no message" in err


@pytest.mark.parametrize("ds", ["clean", "crash"])
def test_by_queue_offset(run_cli, ds):
    want = {}
    for m in _exp(ds):
        for c in m["consumequeue"]:
            want.setdefault((c["topic"], c["queue_id"]), {})[c["index"]] = m["message_id"]
    for (topic, q), entries in want.items():
        code, out, _ = run_cli("query", _store(ds), "--topic", topic, "--queue", q, "--queue-offset", 0,
                               "--count", 1000, "--json")
        got = {r["cq_queue_offset"]: r["msg_id"] for r in _rows(out)}
        assert got == entries


def test_by_time(run_cli):
    exp = _exp("clean")
    t0 = exp[40]["store_timestamp_in_record"]
    t1 = exp[90]["store_timestamp_in_record"]
    want = {m["commitlog_offset"] for m in exp if t0 <= m["store_timestamp_in_record"] <= t1}
    code, out, _ = run_cli("query", _store("clean"), "--time-from", t0, "--time-to", t1, "--json")
    assert {r["offset"] for r in _rows(out)} == want


def test_unique_key_is_a_usage_error(run_cli):
    code, _, err = run_cli("query", _store("clean"), "--unique-key", "x")
    assert code == 2 and "--msg-id" in err
