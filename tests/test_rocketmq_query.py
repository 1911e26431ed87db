"""`mqtool query` / `decode-msgid` for RocketMQ against the generated real stores (gen-*).

Ground truth comes from each store's expected.json (written from the broker's own put results) and from
independent raw readings of the index and consumequeue files done here with ``struct`` (a second
implementation of the §4/§6 layouts), never from mqtool's own output. The stores use 100 hash slots, so
bucket collisions are everywhere.
"""
from __future__ import annotations

import ipaddress
import json
import os
import shutil
import stat
import struct
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqtool.errors import UsageError
from mqtool.options import QueryOptions, ScanStats
from mqtool.rocketmq import query as Q
from mqtool.rocketmq.store import open_store
from mqtool.rocketmq.msgid import decode_any, decode_offset_msg_id, decode_uniq_key
from tests.conftest import require_realdata

GEN = ["gen-4.9.7-clean", "gen-4.9.7-kill", "gen-5.1.4-clean", "gen-5.1.4-kill"]
CLEAN = [g for g in GEN if g.endswith("clean")]
# MANIFEST: 4.9.7's ScheduleMessageService re-delivered the two delayed messages to TopicA queue 1 in the
# clean store: two commitlog records that expected.json does not list.
EXTRA_RECORDS = {"gen-4.9.7-clean": 2}
# MANIFEST driver settings for these stores.
SLOTS, ENTRIES, CQ_FILE_SIZE = 100, 400, 800
ROLLBACK = 0xC


# ---- independent ground truth ----------------------------------------------------------------------

def java_hash(s: str) -> int:
    """Java String.hashCode over UTF-16 code units (own implementation for the tests)."""
    h = 0
    for unit in struct.unpack(f">{len(s.encode('utf-16-be', 'surrogatepass')) // 2}H",
                              s.encode("utf-16-be", "surrogatepass")):
        h = (h * 31 + unit) % (1 << 32)
    return h - (1 << 32) if h >= 1 << 31 else h


def index_key_hash(key: str) -> int:
    h = abs(java_hash(key))
    return 0 if h >= 1 << 31 else h


def parse_props(s: str) -> dict:
    out = {}
    for pair in s.split("\x02"):
        if "\x01" in pair:
            k, v = pair.split("\x01", 1)
            out[k] = v
    return out


@dataclass
class Rec:
    offset: int
    msg_id: str
    topic: str
    queue_id: int
    queue_offset: int
    keys: list
    uniq: str | None
    sys_flag: int
    store_ts: int | None
    born_ts: int | None
    store_host: str
    extra: dict = field(default_factory=dict)


def _host(java_text: str) -> tuple[str, int]:
    """'/10.0.0.5:10911' or '/[fd00:0:0:0:0:0:0:5]:10911' → (normalised ip, port)."""
    t = java_text.lstrip("/")
    host, _, port = t.rpartition(":")
    return str(ipaddress.ip_address(host.strip("[]"))), int(port)


def catalog(name: str) -> list[Rec]:
    exp = json.loads((require_realdata("rocketmq", name) / "expected.json").read_text("utf-8"))
    recs = []
    for e in exp["messages"]:
        if "items" in e:            # a putMessages batch: one commitlog record per item
            uniq = e["batchProperties"]["UNIQ_KEY"]
            for i, (it, mid) in enumerate(zip(e["items"], e["msgIds"].split(","))):
                recs.append(Rec(int(mid[-16:], 16), mid, e["sentTopic"], e["sentQueueId"], e["queueOffset"] + i,
                                [k for k in it["keys"].split(" ") if k], uniq, 0, None, None,
                                "10.0.0.5:10911"))
            continue
        props = parse_props(e["storedPropertiesString"])
        recs.append(Rec(e["commitLogOffset"], e["msgId"], e["storedTopic"], e["storedQueueId"], e["queueOffset"],
                        [k for k in props.get("KEYS", "").split(" ") if k], props.get("UNIQ_KEY"),
                        e["storedSysFlag"], e["storeTimestamp"], e["bornTimestamp"], e["storeHost"], e))
    return recs


def raw_index_entries(store: Path) -> set[tuple[int, int]]:
    """(keyHash, phyOffset) of every written entry of every index file."""
    out = set()
    for f in sorted((store / "index").iterdir()):
        data = f.read_bytes()
        assert len(data) == 40 + SLOTS * 4 + ENTRIES * 20
        count = struct.unpack_from(">i", data, 36)[0]
        for k in range(1, count):
            kh, phy = struct.unpack_from(">iq", data, 40 + SLOTS * 4 + k * 20)
            out.add((kh, phy))
    return out


def raw_cq_unit(store: Path, topic: str, qid: int, n: int) -> tuple[int, int, int] | None:
    base = (n * 20) // CQ_FILE_SIZE * CQ_FILE_SIZE
    f = store / "consumequeue" / topic / str(qid) / f"{base:020d}"
    if not f.is_file():
        return None
    data = f.read_bytes()
    unit = struct.unpack_from(">qiq", data, n * 20 - base)
    return None if unit == (0, 0, 0) else unit


_CACHE: dict = {}


def store_of(name: str):
    if name not in _CACHE:
        root = require_realdata("rocketmq", name, "store")
        _CACHE[name] = (root, open_store(root), catalog(name), raw_index_entries(root))
    return _CACHE[name]


def q(store, **kw):
    stats = ScanStats()
    rows = list(Q.run_query(store, QueryOptions(**kw), stats))
    return rows, stats


def offsets(rows) -> set[int]:
    return {r["offset"] for r in rows}


# ---- --msg-id ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", GEN)
def test_msg_id_returns_exactly_that_message(name):
    root, store, recs, _ = store_of(name)
    for r in recs:
        rows, stats = q(store, msg_id=r.msg_id)
        assert [x["offset"] for x in rows] == [r.offset], r.msg_id
        assert rows[0]["msg_id"] == r.msg_id and rows[0]["topic"] == r.topic
        assert rows[0]["keys"] == r.keys and stats.damaged == 0


@pytest.mark.parametrize("name", CLEAN)
def test_msg_id_batch_list_and_scan(name):
    _, store, recs, _ = store_of(name)
    batch = [r for r in recs if "batch" in " ".join(r.keys)]
    assert len(batch) == 3
    ids = ",".join(r.msg_id for r in batch)
    assert offsets(q(store, msg_id=ids)[0]) == {r.offset for r in batch}
    assert offsets(q(store, msg_id=ids, scan=True)[0]) == {r.offset for r in batch}


def test_msg_id_that_is_a_unique_key_says_so():
    _, store, recs, _ = store_of("gen-5.1.4-clean")
    rows, stats = q(store, msg_id=recs[0].uniq)
    assert rows == [] and any("--unique-key" in n for n in stats.notes)


def test_msg_id_not_at_a_message_start():
    _, store, recs, _ = store_of("gen-5.1.4-clean")
    mid = decode_offset_msg_id(recs[1].msg_id)
    bad = recs[1].msg_id[:-16] + f"{mid['physical_offset'] + 3:016X}"
    rows, stats = q(store, msg_id=bad)
    assert rows == [] and stats.notes


# ---- --offset ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["gen-4.9.7-kill", "gen-5.1.4-clean"])
def test_offset_and_containing(name):
    _, store, recs, _ = store_of(name)
    for r in recs[::7]:
        assert offsets(q(store, offset=r.offset)[0]) == {r.offset}
        assert q(store, offset=r.offset + 5)[0] == []
        rows, _ = q(store, offset=r.offset + 5, containing=True)
        assert offsets(rows) == {r.offset} and rows[0]["containing"] == r.offset + 5
    assert q(store, offset=10 ** 12)[0] == []


# ---- --topic/--queue/--queue-offset --------------------------------------------------------------------

@pytest.mark.parametrize("name", GEN)
def test_queue_offset_returns_dispatched_messages(name):
    root, store, recs, _ = store_of(name)
    checked = 0
    for r in recs:
        if r.sys_flag & 0xC in (0x4, 0xC):       # PREPARED / ROLLBACK: never in a consume queue (§5)
            continue
        unit = raw_cq_unit(root, r.topic, r.queue_id, r.queue_offset)
        if name.endswith("clean"):
            assert unit is not None, (r.topic, r.queue_id, r.queue_offset)
        if unit is None:
            continue
        assert unit[0] == r.offset
        rows, stats = q(store, topic=r.topic, queue=r.queue_id, queue_offset=r.queue_offset)
        assert [x["offset"] for x in rows] == [r.offset], (r.topic, r.queue_id, r.queue_offset)
        assert rows[0]["via"] == "consumequeue" and "cq_mismatch" not in rows[0] and stats.damaged == 0
        if checked % 25 == 0:                    # the scan answer on a sample (each is a full scan)
            scan_rows, _ = q(store, topic=r.topic, queue=r.queue_id, queue_offset=r.queue_offset, scan=True)
            assert offsets(scan_rows) == {r.offset}
        checked += 1
    assert checked > 400


@pytest.mark.parametrize("name", CLEAN)
def test_queue_count_and_lmq(name):
    root, store, recs, _ = store_of(name)
    a1 = sorted((r for r in recs if r.topic == "TopicA" and r.queue_id == 1), key=lambda r: r.queue_offset)
    rows, _ = q(store, topic="TopicA", queue=1, queue_offset=38, count=5)     # crosses a CQ file boundary
    assert [x["offset"] for x in rows] == [r.offset for r in a1 if 38 <= r.queue_offset < 43]
    c_units = sorted((r for r in recs if r.topic == "TopicC" and r.sys_flag & 0xC not in (0x4, 0xC)),
                     key=lambda r: r.queue_offset)
    rows, stats = q(store, topic="TopicC", queue=0, queue_offset=0, count=100)   # runs past the queue's end
    assert [x["offset"] for x in rows] == [r.offset for r in c_units]
    assert any("ends before" in n for n in stats.notes) and stats.damaged == 0
    lmq = next(r for r in recs if "lmq-1" in r.keys)
    for t in ("%LMQ%lmqA", "%LMQ%lmqB"):
        assert raw_cq_unit(root, t, 0, 0)[0] == lmq.offset
        assert offsets(q(store, topic=t, queue=0, queue_offset=0)[0]) == {lmq.offset}
        assert offsets(q(store, topic=t, queue=0, queue_offset=0, scan=True)[0]) == {lmq.offset}


def test_queue_unit_disagreeing_with_message_is_reported(tmp_path):
    root = require_realdata("rocketmq", "gen-5.1.4-clean", "store")
    dst = tmp_path / "store"
    shutil.copytree(root / "commitlog", dst / "commitlog")
    shutil.copytree(root / "consumequeue" / "TopicB", dst / "consumequeue" / "TopicB")
    f = dst / "consumequeue" / "TopicB" / "0" / f"{0:020d}"
    os.chmod(f, stat.S_IRUSR | stat.S_IWUSR)
    data = bytearray(f.read_bytes())
    size = struct.unpack_from(">i", data, 3 * 20 + 8)[0]
    struct.pack_into(">i", data, 3 * 20 + 8, size + 1)          # unit 3 now claims a wrong size
    f.write_bytes(bytes(data))
    rows, stats = q(open_store(dst), topic="TopicB", queue=0, queue_offset=3)
    assert len(rows) == 1 and any("size" in p for p in rows[0]["cq_mismatch"]) and stats.damaged == 1


# ---- --key ---------------------------------------------------------------------------------------------

def _expected_for_key(recs, entries, key, topic=None):
    """(indexed set, all holders): catalog messages holding `key` (in `topic`), and those the broker indexed
    (not ROLLBACK, and an entry with hash(topic#key) at their offset in the raw index)."""
    holders = [r for r in recs if key in r.keys and (topic is None or r.topic == topic)]
    indexed = {r.offset for r in holders
               if r.sys_flag & 0xC != ROLLBACK and (index_key_hash(f"{r.topic}#{key}"), r.offset) in entries}
    return indexed, holders


def _check_extras(rows, recs, key_field, value, seen_extras):
    known = {r.offset for r in recs}
    for x in rows:
        if x["offset"] not in known:
            assert value in x[key_field] if key_field == "keys" else x[key_field] == value
            seen_extras.add(x["offset"])


@pytest.mark.parametrize("name", GEN)
def test_key_returns_exactly_the_indexed_holders(name):
    _, store, recs, entries = store_of(name)
    keys = sorted({k for r in recs for k in r.keys})
    extras: set[int] = set()
    for key in keys:
        indexed, holders = _expected_for_key(recs, entries, key)
        if name.endswith("clean"):
            non_rollback = {r.offset for r in holders if r.sys_flag & 0xC != ROLLBACK}
            assert indexed == non_rollback, key        # the broker indexed every one of them
        rows, stats = q(store, key=key, max=1000)
        got = offsets(rows)
        _check_extras(rows, recs, "keys", key, extras)
        assert got - extras == indexed, key
        assert all(key in x["keys"] and x["via"] == "index" for x in rows)
        assert stats.damaged == 0
        for topic in sorted({r.topic for r in holders}):
            t_indexed, _ = _expected_for_key(recs, entries, key, topic)
            t_rows, _ = q(store, key=key, topic=topic, max=1000)
            _check_extras(t_rows, recs, "keys", key, extras)
            assert offsets(t_rows) - extras == t_indexed, (key, topic)
            assert all(x["topic"] == topic for x in t_rows)
    assert len(extras) == EXTRA_RECORDS.get(name, 0)


@pytest.mark.parametrize("name", CLEAN)
def test_scan_equals_index_and_finds_rollback(name):
    _, store, recs, entries = store_of(name)
    keys = sorted({k for r in recs for k in r.keys})
    sample = keys[::11] + ["txl-1", "tx-0", "delay-1", "batch-1", "v6-both", "lmq-1", "orderA-1"]
    for key in sample:
        idx, _ = q(store, key=key, max=1000)
        scan, stats = q(store, key=key, max=1000, scan=True)
        indexed_rows = [x for x in scan if x["indexed"]]
        assert offsets(indexed_rows) == offsets(idx), key
        assert all(x["via"] == "scan" for x in scan)
        rolled = [x for x in scan if not x["indexed"]]
        assert all(x["transaction"] == "rollback" for x in rolled)
        if rolled:
            assert any("ROLLBACK" in n for n in stats.notes)
    for r in recs[::29]:
        if r.uniq:
            idx, _ = q(store, unique_key=r.uniq)
            scan, _ = q(store, unique_key=r.uniq, scan=True)
            assert offsets(idx) == {x["offset"] for x in scan if x["indexed"]} != set(), r.uniq
    rollback = [r for r in recs if r.sys_flag & 0xC == ROLLBACK]
    assert rollback
    for r in rollback:
        for key in r.keys:
            scan, _ = q(store, key=key, scan=True)
            assert r.offset in offsets(scan)
            assert r.offset not in offsets(q(store, key=key)[0])


def test_hash_collision_is_filtered_out():
    """A key with the same Java hash as a stored one ('re' → 'fS' keeps 31·a+b): the chain offers the
    stored message, mqtool reads it and drops it."""
    _, store, recs, entries = store_of("gen-5.1.4-clean")
    real, fake = "orderA-5", "ordfSA-5"
    assert java_hash(f"TopicA#{real}") == java_hash(f"TopicA#{fake}")
    target = next(r for r in recs if real in r.keys)
    assert (index_key_hash(f"TopicA#{fake}"), target.offset) in entries
    assert q(store, key=fake, topic="TopicA")[0] == []
    assert q(store, key=fake)[0] == []
    assert offsets(q(store, key=real, topic="TopicA")[0]) == {target.offset}


def test_key_max_keeps_the_newest_and_time_window():
    _, store, recs, _ = store_of("gen-5.1.4-clean")
    holders = sorted((r for r in recs if "user-0" in r.keys), key=lambda r: r.offset)
    assert len(holders) > 3
    rows, _ = q(store, key="user-0", max=3)
    assert [x["offset"] for x in rows] == [r.offset for r in holders[-3:]]
    assert [x["offset"] for x in q(store, key="user-0", max=3, scan=True)[0]] == [r.offset for r in holders[-3:]]
    lo, hi = holders[1].store_ts, holders[3].store_ts
    want = {r.offset for r in holders if lo <= r.store_ts <= hi}
    assert offsets(q(store, key="user-0", begin=lo, end=hi)[0]) == want
    assert offsets(q(store, key="user-0", begin=lo, end=hi, scan=True)[0]) == want


# ---- --unique-key --------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", GEN)
def test_unique_key_returns_it(name):
    _, store, recs, entries = store_of(name)
    extras: set[int] = set()
    for r in recs:
        if r.uniq is None:
            continue
        rows, _ = q(store, unique_key=r.uniq)
        _check_extras(rows, recs, "uniq_key", r.uniq, extras)
        want = {x.offset for x in recs if x.uniq == r.uniq and x.sys_flag & 0xC != ROLLBACK
                and (index_key_hash(f"{x.topic}#{r.uniq}"), x.offset) in entries}
        if want:
            assert offsets(rows) - extras == want, r.uniq
        else:   # not in the index (a ROLLBACK is never indexed): the query scans instead of answering "none"
            assert {x["via"] for x in rows} == {"scan"}, r.uniq
            assert offsets(rows) - extras == {x.offset for x in recs if x.uniq == r.uniq}, r.uniq
        if r.sys_flag & 0xC != ROLLBACK and name.endswith("clean"):
            assert r.offset in offsets(rows)
        assert all(x["uniq_key"] == r.uniq for x in rows)
        info = rows[0]["uniq_key_info"] if rows else None
        if info and r.born_ts:
            assert info["client_ip"] == "fd00::2"
            assert abs(info["approx_time_ms"] - r.born_ts) < 60_000
    assert len(extras) == EXTRA_RECORDS.get(name, 0)


def test_unique_key_shared_by_a_batch():
    """Surprise in the data: the three records of a putMessages batch all carry the batch's UNIQ_KEY."""
    _, store, recs, _ = store_of("gen-4.9.7-clean")
    batch = [r for r in recs if any(k.startswith("batch-") for k in r.keys)]
    rows, _ = q(store, unique_key=batch[0].uniq)
    assert offsets(rows) == {r.offset for r in batch}


# ---- --time-from/--time-to -----------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["gen-4.9.7-clean", "gen-5.1.4-kill"])
def test_time_window_skips_segments(name, monkeypatch):
    _, store, recs, _ = store_of(name)
    timed = sorted((r for r in recs if r.store_ts), key=lambda r: r.offset)
    scanned = []
    real = Q.SegmentScanner

    def spy(seg, *a, **kw):
        scanned.append(seg.path)
        return real(seg, *a, **kw)

    for r in timed[len(timed) // 3::97]:
        lo = hi = r.store_ts
        scanned.clear()
        monkeypatch.setattr(Q, "SegmentScanner", spy)
        rows, _ = q(store, time_from=lo, time_to=hi)
        monkeypatch.setattr(Q, "SegmentScanner", real)
        assert len(set(scanned)) < len([s for s in store.segments if s.size])
        full, _ = q(store, time_from=lo, time_to=hi, scan=True)
        assert offsets(rows) == offsets(full)
        want = {x.offset for x in timed if lo <= x.store_ts <= hi}
        known = {x.offset for x in recs}
        assert want <= offsets(rows) and all(x["store_timestamp"] == lo for x in rows)
        assert all(x["offset"] not in known or x["offset"] in want or x["store_timestamp"] == lo for x in rows)
    a_rows, _ = q(store, time_from=timed[0].store_ts, time_to=timed[-1].store_ts, topic="TopicC")
    assert offsets(a_rows) >= {x.offset for x in timed if x.topic == "TopicC"}


# ---- no index / selector rules -------------------------------------------------------------------------

def test_scan_answers_without_index_dir(tmp_path):
    root, store, recs, _ = store_of("gen-5.1.4-kill")
    dst = tmp_path / "store"
    shutil.copytree(root, dst, ignore=shutil.ignore_patterns("index"))
    copy = open_store(dst)
    assert not copy.index_files
    for key in ["orderA-7", "user-3", "txl-0", "v6-both", "big-zip-LZ4"]:
        want = offsets(q(store, key=key)[0])
        assert want
        assert offsets(q(copy, key=key, scan=True)[0]) == want
        rows, stats = q(copy, key=key)                     # falls back to the scan, and says so
        assert offsets(rows) == want and any("no index files" in n for n in stats.notes)
    for r in recs[::50]:
        want = offsets(q(store, unique_key=r.uniq)[0])
        assert r.offset in want and offsets(q(copy, unique_key=r.uniq, scan=True)[0]) == want


def test_damaged_index_chain_is_reported_not_fatal(tmp_path):
    root, store, recs, _ = store_of("gen-5.1.4-clean")
    dst = tmp_path / "store"
    shutil.copytree(root, dst)
    target = next(r for r in recs if "orderA-9" in r.keys)
    h = index_key_hash("TopicA#orderA-9")
    for f in sorted((dst / "index").iterdir()):
        os.chmod(f, stat.S_IRUSR | stat.S_IWUSR)
        data = bytearray(f.read_bytes())
        struct.pack_into(">i", data, 40 + (h % SLOTS) * 4, 5000)     # slot points past the file
        f.write_bytes(bytes(data))
    rows, stats = q(open_store(dst), key="orderA-9", topic="TopicA")
    # the damage is reported and the answer does not depend on it: a cut chain makes the query scan (issue #15)
    assert stats.damaged >= 1 and offsets(rows) == {target.offset}
    assert {r["via"] for r in rows} == {"scan"} and any("scan" in n for n in stats.notes)
    assert offsets(q(open_store(dst), key="orderA-9", topic="TopicA", scan=True)[0]) == {target.offset}


@pytest.mark.parametrize("kw", [dict(), dict(key="a", msg_id="0A00000500002A9F0000000000000000"),
                                dict(queue=1, queue_offset=0), dict(offset=1, key="x"),
                                dict(key="a", containing=True), dict(unique_key="XYZ"), dict(msg_id="12"),
                                dict(key="a", max=0), dict(key="orderA-0 user-0")])
def test_bad_selectors_are_usage_errors(kw):
    _, store, _, _ = store_of("gen-5.1.4-clean")
    with pytest.raises(UsageError):
        q(store, **kw)


# ---- decode-msgid --------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", GEN)
def test_decode_msgid_gives_store_host_and_offset(name):
    _, _, recs, _ = store_of(name)
    for r in recs:
        d = decode_any(r.msg_id)
        ip, port = _host(r.store_host if r.store_host.startswith("/") else "/" + r.store_host)
        host = d["as_offset_msg_id"]["store_host"]
        got_ip, _, got_port = host.rpartition(":")
        assert (str(ipaddress.ip_address(got_ip.strip("[]"))), int(got_port)) == (ip, port)
        assert d["as_offset_msg_id"]["physical_offset"] == r.offset
        assert d["likely"] == "offset_msg_id"
        if r.uniq:
            u = decode_any(r.uniq)
            assert u["likely"] == "uniq_key" and u["as_uniq_key"]["client_ip"] == "fd00::2"


def test_decode_uniq_key_time_and_offset():
    _, _, recs, _ = store_of("gen-5.1.4-clean")
    r = recs[0]
    d = decode_uniq_key(r.uniq, r.born_ts)
    assert abs(d["approx_time_ms"] - r.born_ts) < 60_000 and d["producer_utc_offset_min"] == 0
    assert d["pid"] == int(r.uniq[32:36], 16)


def test_cli_query_and_decode(run_cli):
    root, _, recs, _ = store_of("gen-5.1.4-clean")
    r = next(x for x in recs if "orderA-17" in x.keys)
    code, out, err = run_cli("query", root, "--key", "orderA-17", "--json")
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    assert [x["offset"] for x in rows] == [r.offset] and rows[0]["msg_id"] == r.msg_id
    code, out, _ = run_cli("query", root, "--msg-id", rows[0]["msg_id"], "--json", "--body", "text")
    assert code == 0 and json.loads(out)["offset"] == r.offset and "body" in json.loads(out)
    code, out, err = run_cli("query", root, "--key", "no-such-key-anywhere", "--json")
    assert code == 1 and out == "" and "no message found" in err
    code, _, err = run_cli("query", root, "--msg-id", "nothex", "--json")
    assert code == 2 and len(err.strip().splitlines()) == 1
    code, _, err = run_cli("query", root, "--key", "a", "--offset", "0")
    assert code == 2
    code, out, _ = run_cli("decode-msgid", r.msg_id, "--json")
    d = json.loads(out)
    assert code == 0 and d["as_offset_msg_id"]["physical_offset"] == r.offset
    assert d["as_offset_msg_id"]["store_host"] == "10.0.0.5:10911"


# ---- id layouts from hand-built bytes (§2) -------------------------------------------------------------


@given(st.sampled_from([4, 16]), st.integers(1, 65535), st.integers(0, 2 ** 63 - 1),
       st.binary(min_size=16, max_size=16))
def test_offset_msg_id_layout(alen, port, off, addr):
    raw = addr[:alen] + struct.pack(">iq", port, off)
    d = decode_any(raw.hex())                 # lower case in: accepted, upper case out
    assert d["id"] == raw.hex().upper() and d["likely"] == "offset_msg_id"
    assert d["as_offset_msg_id"]["physical_offset"] == off
    ip = ipaddress.ip_address(addr[:alen])
    assert d["as_offset_msg_id"]["store_host"] == (f"{ip}:{port}" if alen == 4 else f"[{ip}]:{port}")


@given(st.sampled_from([4, 16]), st.integers(0x100, 0xFFFF), st.integers(-2 ** 31, 2 ** 31 - 1),
       st.integers(0, 31 * 86_400_000), st.integers(0, 0xFFFF))
def test_uniq_key_layout(alen, pid, loader, since, counter):
    ip = bytes(range(1, alen + 1))
    raw = ip + struct.pack(">HiIH", pid, loader, since, counter)   # day 25+ no longer fits a signed int
    d = decode_uniq_key(raw.hex().upper())
    assert (d["pid"], d["class_loader_hash"], d["ms_since_month_start"], d["counter"]) == (pid, loader, since, counter)
    assert d["client_ip"] == str(ipaddress.ip_address(ip))
    assert decode_any(raw.hex())["likely"] == "uniq_key"     # any pid > 0 makes the "port" > 65535


# ---- the repository's fixture store (always present, no real data needed) ------------------------------

def test_fixture_store_index_equals_scan_and_msg_ids():
    from mqtool.rocketmq.scan import iter_messages

    root = Path(__file__).resolve().parent.parent / "fixtures" / "rocketmq" / "store"
    store = open_store(root)
    msgs = list(iter_messages(store.segments))
    assert msgs and store.index_files
    for m in msgs:
        assert [x["offset"] for x in q(store, msg_id=m.msg_id)[0]] == [m.offset]
    keys = sorted({k for m in msgs for k in m.keys})
    uniqs = sorted({m.uniq_key for m in msgs if m.uniq_key})
    for kind, values in (("key", keys), ("unique_key", uniqs)):
        for v in values:
            idx, stats = q(store, **{kind: v, "max": 1000})
            scan, _ = q(store, **{kind: v, "max": 1000, "scan": True})
            assert offsets(idx) == {x["offset"] for x in scan if x["indexed"]} and stats.damaged == 0, v
            holders = {m.offset for m in msgs
                       if (v in m.keys if kind == "key" else m.uniq_key == v) and m.transaction != "rollback"}
            assert offsets(idx) == holders, v


def test_wiped_index_headers_do_not_hide_entries(tmp_path):
    root, store, recs, _ = store_of("gen-4.9.7-kill")
    dst = tmp_path / "store"
    shutil.copytree(root, dst)
    for f in sorted((dst / "index").iterdir()):
        os.chmod(f, stat.S_IRUSR | stat.S_IWUSR)
        data = bytearray(f.read_bytes())
        data[:40] = bytes(40)                      # header gone: no times, indexCount 0
        f.write_bytes(bytes(data))
    copy = open_store(dst)
    for key in ["orderA-3", "user-3", "tx-0"]:
        assert offsets(q(copy, key=key)[0]) == offsets(q(store, key=key)[0]) != set()
