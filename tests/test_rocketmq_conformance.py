"""Conformance: our RocketMQ reading of the real stores agrees with what the brokers wrote (expected.json)."""
from __future__ import annotations

import hashlib
import json

import pytest

from conftest import load_json, require_realdata
from mqtool.rocketmq.store import open_store, sniff
from mqtool.rocketmq.scan import End, Damage, scan_store_segments
from mqtool.rocketmq.records import Message, Blank

GEN_STORES = ["gen-4.9.7-clean", "gen-4.9.7-kill", "gen-5.1.4-clean", "gen-5.1.4-kill"]


def _messages(store_dir):
    out = {}
    damage = []
    for ev in scan_store_segments(open_store(store_dir).segments):
        if isinstance(ev, Message):
            out[ev.offset] = ev
        elif isinstance(ev, Damage):
            damage.append(ev)
    return out, damage


def _host(text: str) -> str:
    """expected.json writes Java's InetSocketAddress ("/1.2.3.4:5", "/[2001:db8:0:0:0:0:0:1]:5")."""
    import ipaddress

    t = text.lstrip("/")
    if t.startswith("["):
        addr, _, port = t[1:].partition("]:")
        return f"[{ipaddress.IPv6Address(addr)}]:{port}"
    return t


def _expected_units(entry):
    """One (offset, expected fields) per commitlog unit; a batch entry expands to its items."""
    if "items" in entry:
        offsets = [int(mid[-16:], 16) for mid in entry["msgIds"].split(",")]
        for i, (item, off) in enumerate(zip(entry["items"], offsets)):
            yield off, {**entry, **item, "queueOffset": entry["queueOffset"] + i,
                        "msgId": entry["msgIds"].split(",")[i], "storedTopic": entry["sentTopic"],
                        "storedQueueId": entry["sentQueueId"], "batch": True}
    else:
        yield entry["commitLogOffset"], entry


@pytest.mark.parametrize("name", GEN_STORES)
def test_every_expected_message_is_found_with_its_fields(name):
    base = require_realdata("rocketmq", name)
    exp = load_json(base / "expected.json")
    msgs, damage = _messages(base / "store")
    assert damage == []
    checked = 0
    for entry in exp["messages"]:
        for off, e in _expected_units(entry):
            m = msgs.get(off)
            assert m is not None, f"no message at {off} ({e['note']})"
            assert m.topic == e["storedTopic"]
            assert m.queue_id == e["storedQueueId"]
            assert m.queue_offset == e["queueOffset"]
            if "storedSysFlag" in e:
                assert m.sys_flag == e["storedSysFlag"]
            assert m.msg_id == e["msgId"]
            assert m.physical_offset == off
            assert (m.tags or None) == (e.get("tags") or None)
            assert m.keys == [k for k in (e.get("keys") or "").split(" ") if k]
            assert m.crc_ok is True
            assert hashlib.sha256(m.stored_body).hexdigest() == e["storedBodySha256"]
            assert m.body_len == e["storedBodyLength"]
            if "uncompressedBodySha256" in e:
                assert hashlib.sha256(m.body()).hexdigest() == e["uncompressedBodySha256"]
            if "storeTimestamp" in e:
                assert m.store_timestamp == e["storeTimestamp"]
            if "bornTimestamp" in e:
                assert m.born_timestamp == e["bornTimestamp"]
            if "bornHost" in e:
                assert m.born_host == _host(e["bornHost"])
            if "storeHost" in e:
                assert m.store_host == _host(e["storeHost"])
            if "storedPropertiesString" in e:
                assert m.props_raw.decode("utf-8") == e["storedPropertiesString"]
            assert m.reconsume_times == e.get("reconsumeTimes", 0)
            assert m.prepared_transaction_offset == e.get("preparedTransactionOffset", 0)
            if "wroteBytes" in e and "items" not in entry:
                assert m.size == e["wroteBytes"]
            checked += 1
    assert checked >= 525


@pytest.mark.parametrize("name", GEN_STORES)
def test_variants_decode(name):
    """v2 magic (5.1.4 long topic), IPv6 hosts and every compression present decode."""
    base = require_realdata("rocketmq", name)
    msgs, _ = _messages(base / "store")
    versions = {m.version for m in msgs.values()}
    assert ("v2" in versions) == name.startswith("gen-5")
    v6 = [m for m in msgs.values() if m.sys_flag & 0x30 == 0x30]
    assert v6 and v6[0].store_host == "[fd00::5]:10911" and v6[0].born_host == "[2001:db8::1]:54321"
    assert len(v6[0].msg_id) == 56
    comps = {m.compression for m in msgs.values()} - {None}
    assert comps == ({"zlib", "lz4", "zstd"} if name.startswith("gen-5") else {"zlib"})


@pytest.mark.parametrize("name", ["apache-rocketmq-fork-4e25b979", "shaoxubao-c4dcaab0"])
def test_harvested_unit_test_commitlogs(name):
    base = require_realdata("rocketmq", name, "store")
    seg = base / "commitlog" if (base / "commitlog").is_dir() else base / "unit_test_store" / "commitlog"
    events = list(scan_store_segments(open_store(seg).segments))
    msgs = [e for e in events if isinstance(e, Message)]
    blanks = [e for e in events if isinstance(e, Blank)]
    assert len(msgs) == 47 and all(m.topic == "abc" and m.crc_ok for m in msgs)
    assert len(blanks) == 1 and blanks[0].position == 8084 and blanks[0].size == 8192 - 8084
    assert not [e for e in events if isinstance(e, Damage)]


@pytest.mark.parametrize("name", ["gen-4.9.7-kill", "gen-5.1.4-kill"])
def test_crash_stores_end_cleanly_at_zero_fill(name):
    base = require_realdata("rocketmq", name, "store")
    events = list(scan_store_segments(open_store(base).segments))
    assert not [e for e in events if isinstance(e, Damage)]
    ends = [e for e in events if isinstance(e, End)]
    # the preallocated sixth file is all zeros: data ends at its first byte, nothing follows
    assert ends[-1].reason == "zero-fill" and ends[-1].position == 0 and ends[-1].trailing_nonzero == -1
    assert ends[-1].file.endswith("00000000000000327680")


def test_every_store_is_recognised_as_rocketmq():
    root = require_realdata("rocketmq")
    for d in sorted(root.iterdir()):
        if (d / "store").is_dir():
            assert sniff(d / "store") > 0, d


def test_cli_dump_json_counts_every_message(run_cli):
    store = require_realdata("rocketmq", "gen-5.1.4-clean", "store")
    exp = load_json(store.parent / "expected.json")
    n_units = sum(len(e["items"]) if "items" in e else 1 for e in exp["messages"])
    code, out, err = run_cli("dump", "commitlog", store, "--json")
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    assert len(rows) == n_units
    fields = ["kind", "file", "position", "offset", "size", "magic", "body_crc", "crc_ok", "queue_id", "flag",
              "queue_offset", "physical_offset", "sys_flag", "transaction", "born_timestamp", "born_host",
              "store_timestamp", "store_host", "reconsume_times", "prepared_transaction_offset", "topic",
              "properties", "keys", "tags", "uniq_key", "msg_id", "body_size", "compression"]
    for r in rows:
        assert all(f in r for f in fields)
    txn = {r["transaction"] for r in rows}
    assert {"prepared", "commit", "rollback", None} <= txn


def test_cli_dump_body_decompressed(run_cli):
    store = require_realdata("rocketmq", "gen-5.1.4-clean", "store")
    exp = load_json(store.parent / "expected.json")
    e = next(x for x in exp["messages"] if "ZSTD" in x["note"])
    code, out, err = run_cli("dump", "commitlog", store, "--json", "--key", e["keys"], "--body", "base64")
    assert code == 0
    import base64

    (row,) = [json.loads(line) for line in out.splitlines()]
    assert hashlib.sha256(base64.b64decode(row["body"])).hexdigest() == e["uncompressedBodySha256"]
    assert row["compression"] == "zstd"


def test_dump_config_parses_every_config_file(run_cli):
    root = require_realdata("rocketmq")
    seen = 0
    for cfg in sorted(root.glob("*/store/config")):
        code, out, err = run_cli("dump", "config", cfg.parent, "--json")
        assert code == 0, err
        rows = [json.loads(line) for line in out.splitlines()]
        names = {p.name for p in cfg.iterdir() if p.name.endswith((".json", ".json.bak"))}
        assert {r["name"] for r in rows} == names
        for r in rows:
            assert r["ok"], r
            seen += 1
    assert seen >= 40


def test_fastjson_integer_keys_become_ints():
    store = require_realdata("rocketmq", "gen-4.9.7-clean", "store")
    from mqtool.rocketmq.configfiles import load_config

    v, err = load_config(store / "config" / "delayOffset.json")
    assert err is None and v["offsetTable"] == {1: 1, 2: 1}   # MANIFEST: delayOffset.json = {1:1,2:1}
