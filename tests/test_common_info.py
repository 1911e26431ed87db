"""mqtool info: the generic model (timeline, lag) and the RocketMQ collector on real stores and damaged copies.

Expected values come from the real stores' expected.json (written from the broker's own put results), the
consumerOffset.json bytes, MANIFEST.md facts, or are hand-computed.
"""
from __future__ import annotations

import json
import re
import shutil
from collections import Counter, defaultdict

import pytest
from rich.console import Console

from conftest import FIXTURES, load_json, require_realdata
from mqtool.info import InfoBuilder, build_info, parse_bucket
from mqtool.options import InfoOptions
from mqtool.render_info import render_info

FIXTURE_STORE = FIXTURES / "rocketmq" / "store"


# ---- generic model --------------------------------------------------------------------------------

def test_parse_bucket():
    assert parse_bucket("auto") is None and parse_bucket(None) is None
    assert parse_bucket("250ms") == 250
    assert parse_bucket("10s") == 10_000
    assert parse_bucket("1m") == 60_000
    assert parse_bucket("2h") == 7_200_000
    assert parse_bucket("1d") == 86_400_000
    assert parse_bucket("1500") == 1500
    for bad in ("x", "0s", "-1m", "1y"):
        with pytest.raises(ValueError):
            parse_bucket(bad)


def test_auto_bucket_and_counts():
    b = InfoBuilder("test", "/x")
    t0 = 1_795_338_000_000          # 2026-11-22T08:20:00Z, a whole minute
    # 3 messages in minute 0, none in minute 1, 2 in minute 5 → span 6 minutes
    for dt in (0, 1_000, 59_999, 300_000, 359_000):
        b.add_message("T", 0, t0 + dt, 100)
    info = b.finish(InfoOptions(max_buckets=6))
    tl = info.timeline
    # narrowest width with at most 6 buckets over [t0, t0+359s]: 1 min (6 buckets); 30 s would need 12
    assert tl.bucket_ms == 60_000 and tl.bucket == "1m"
    assert [x.count for x in tl.buckets] == [3, 0, 0, 0, 0, 2]
    assert [x.bytes for x in tl.buckets] == [300, 0, 0, 0, 0, 200]
    assert tl.start == t0 and tl.peak == 3
    info = b.finish(InfoOptions(bucket_ms=120_000))
    assert [x.count for x in info.timeline.buckets] == [3, 0, 2]


def test_implausible_times_stay_out_of_the_timeline():
    b = InfoBuilder("test", "/x")
    b.add_message("T", 0, 1_795_338_000_000, 10)
    b.add_message("T", 0, 5, 10)                     # 1970: a flipped timestamp
    b.add_message("T", 0, 1_795_338_000_500, 10)
    info = b.finish(InfoOptions())
    assert info.messages == 3 and info.timeline.implausible == 1
    assert info.first_store_time == 1_795_338_000_000
    assert sum(x.count for x in info.timeline.buckets) == 2
    assert info.timeline.bucket_ms <= 20                 # 500 ms span: fine buckets, not decades
    assert any("implausible" in n for n in info.notes)


def test_damage_is_placed_between_its_neighbours_in_time():
    b = InfoBuilder("test", "/x")
    t0 = 1_795_338_000_000
    b.add_message("T", 0, t0, 10)
    b.add_message("T", 0, t0 + 10_000, 10)
    b.add_damage("seg", 100, 100, 50, "bad-magic", "x")
    b.add_message("T", 0, t0 + 30_000, 10)
    b.add_message("T", 0, t0 + 59_000, 10)
    info = b.finish(InfoOptions(bucket_ms=10_000))
    d = info.damage[0]
    assert (d.time_before, d.time_after) == (t0 + 10_000, t0 + 30_000)
    assert [x.damaged for x in info.timeline.buckets] == [False, True, True, True, False, False]
    assert info.damage_total == 1 and info.damaged_bytes == 50


def test_lag_against_queue_ends():
    b = InfoBuilder("test", "/x")
    b.set_queue_end("T", 0, 100)
    b.set_queue_end("T", 1, 5)
    b.add_consumer_offset("g", "T", 0, 40)
    b.add_consumer_offset("g", "T", 1, 9)          # committed beyond the end (queue truncated): lag 0
    b.add_consumer_offset("g", "U", 0, 3)          # no queue end known
    lags = {(c.topic, c.queue): c.lag for c in b.finish().consumers}
    assert lags == {("T", 0): 60, ("T", 1): 0, ("U", 0): None}


# ---- RocketMQ on real stores ----------------------------------------------------------------------

def _expected_by_topic(exp):
    msgs, nbytes, ends, times = Counter(), Counter(), defaultdict(int), []
    for e in exp["messages"]:
        if "items" in e:
            topic, n = e["sentTopic"], e.get("msgNum", len(e["items"]))
        else:
            topic, n = e["storedTopic"], 1
            times.append(e["storeTimestamp"])
            if e["storedSysFlag"] & 0xC not in (0x4, 0xC):
                ends[(topic, e["storedQueueId"])] = max(ends[(topic, e["storedQueueId"])], e["queueOffset"] + 1)
        msgs[topic] += n
        nbytes[topic] += e["wroteBytes"]
    return msgs, nbytes, ends, times


def test_clean_514_counts_times_and_lag():
    store = require_realdata("rocketmq", "gen-5.1.4-clean", "store")
    exp = load_json(store.parent / "expected.json")
    info = build_info(store, None, InfoOptions())
    msgs, nbytes, ends, times = _expected_by_topic(exp)
    got = {t.topic: t for t in info.topics}
    assert info.messages == sum(msgs.values())
    for topic, n in msgs.items():
        assert got[topic].messages == n, topic
        assert got[topic].bytes == nbytes[topic], topic
    assert info.first_store_time == min(times) and info.last_store_time == max(times)
    # lag: consumerOffset.json read here with a regex (a second reader), queue ends from expected.json
    text = (store / "config" / "consumerOffset.json").read_text()
    committed = {int(q): int(v) for q, v in re.findall(r"(\d+):(\d+)", text.split('"TopicA@ConsumerGroupA"')[1])}
    lag = {c.queue: c.lag for c in info.consumers if c.topic == "TopicA" and c.group == "ConsumerGroupA"}
    assert lag == {q: ends[("TopicA", q)] - off for q, off in committed.items()}
    assert info.crash["unclean"] is False and info.damage_total == 0
    assert any("v2" in h for h in info.version_hints)
    assert info.timeline.buckets and sum(x.count for x in info.timeline.buckets) == info.messages


@pytest.mark.parametrize("name", ["gen-4.9.7-kill", "gen-5.1.4-kill"])
def test_kill_stores_show_the_crash_marker(name):
    store = require_realdata("rocketmq", name, "store")
    info = build_info(store, None, InfoOptions())
    assert info.crash["unclean"] is True and info.crash["files"][0].endswith("abort")
    cl = next(f for f in info.files if f.group == "commitlog")
    assert cl.count == 6 and cl.bytes == 6 * 65536          # MANIFEST: a 6th, preallocated file
    assert info.damage_total == 0
    if name.startswith("gen-5"):
        assert any("abort.bak" in h for h in info.version_hints)


def test_metadata_only_store(run_cli):
    store = require_realdata("rocketmq", "rtwchina-e04b4b65", "store")
    code, out, err = run_cli("info", store, "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["messages"] == 0 and d["crash"]["unclean"] is True     # MANIFEST: abort (0 bytes)
    assert d["consumers"] and all(c["lag"] is None for c in d["consumers"])
    assert d["timeline"]["buckets"] == []


def _damaged_copy(tmp_path, name="gen-5.1.4-kill"):
    src = require_realdata("rocketmq", name, "store")
    dst = tmp_path / "store"
    shutil.copytree(src, dst)
    for p in dst.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    seg = dst / "commitlog" / "00000000000000065536"
    data = bytearray(seg.read_bytes())
    data[20_000:20_400] = b"\xAB" * 400                 # garbage over a few messages in the middle
    seg.write_bytes(bytes(data))
    return dst, seg


def test_damaged_copy_marks_the_timeline_and_exits_1(run_cli, tmp_path):
    store, seg = _damaged_copy(tmp_path)
    code, out, err = run_cli("info", store, "--json")
    assert code == 1
    d = json.loads(out)
    assert d["damage_total"] >= 1
    dmg = d["damage"][0]
    assert dmg["file"] == str(seg) and dmg["position"] <= 20_000 < dmg["position"] + dmg["length"]
    assert dmg["time_before"] <= dmg["time_after"]
    assert any(b["damaged"] for b in d["timeline"]["buckets"])
    assert "--salvage-out" in err and "mqtool verify store" in err
    code, out, err = run_cli("--quiet", "info", store, "--json")
    assert code == 1 and err == ""


def test_terminal_rendering_of_a_damaged_store(tmp_path):
    store, _ = _damaged_copy(tmp_path)
    info = build_info(store, None, InfoOptions())
    con = Console(record=True, width=100, no_color=True, force_terminal=False)
    render_info(info, con)
    text = con.export_text()
    for want in ("RocketMQ store root", "UNCLEAN SHUTDOWN", "Timeline", "x = damaged range", "TopicA",
                 "Damaged ranges", "commitlog"):
        assert want in text, want
    assert len(text.splitlines()) < 90


def test_fixture_store_via_cli(run_cli):
    code, out, err = run_cli("info", FIXTURE_STORE, "--json", "--bucket", "1s")
    assert code == 0, err
    d = json.loads(out)
    code2, out2, _ = run_cli("dump", "commitlog", FIXTURE_STORE, "--json")
    rows = [json.loads(x) for x in out2.splitlines()]
    assert d["messages"] == len(rows)
    assert d["timeline"]["bucket_ms"] == 1000
    assert {t["topic"] for t in d["topics"]} >= {r["topic"] for r in rows}
    code, out, err = run_cli("info", FIXTURE_STORE, "--bucket", "soon")
    assert code == 2 and "bucket" in err


# ---- property: bounded-memory histogram == naive bucketing ----------------------------------------

from hypothesis import given, settings, strategies as st  # noqa: E402


@settings(max_examples=150, deadline=None)
@given(data=st.data(), span=st.sampled_from([40, 2_000, 600_000, 3 * 86_400_000]),
       max_keys=st.integers(min_value=8, max_value=64), max_buckets=st.integers(min_value=1, max_value=80))
def test_timeline_matches_naive_bucketing(data, span, max_keys, max_buckets):
    """Whatever coarsening the bounded histogram did, each bucket holds exactly the messages whose store
    time falls in it (a naive count is the second implementation)."""
    import mqtool.info as mi

    times = data.draw(st.lists(st.integers(min_value=0, max_value=span), min_size=1, max_size=400))
    old = mi._HIST_MAX_KEYS
    mi._HIST_MAX_KEYS = max_keys
    try:
        base = 1_795_000_000_000
        b = mi.InfoBuilder("test", "/x")
        for t in times:
            b.add_message("T", 0, base + t, 7)
        tl = b.finish(InfoOptions(max_buckets=max_buckets)).timeline
    finally:
        mi._HIST_MAX_KEYS = old
    w = tl.bucket_ms
    assert len(tl.buckets) <= max_buckets or w == b._hist.res
    assert tl.start % w == 0 and tl.start <= base + min(times) < tl.start + w
    naive = Counter((base + t - tl.start) // w for t in times)
    assert [x.count for x in tl.buckets] == [naive.get(i, 0) for i in range(len(tl.buckets))]
    assert [x.bytes for x in tl.buckets] == [7 * naive.get(i, 0) for i in range(len(tl.buckets))]


def test_damage_before_the_first_and_after_the_last_message():
    b = InfoBuilder("test", "/x")
    t0 = 1_795_338_000_000
    b.add_damage("seg", 0, 0, 10, "bad-magic", "head")            # nothing before it
    b.add_message("T", 0, t0, 10)
    b.add_message("T", 0, t0 + 50_000, 10)
    b.add_damage("seg", 900, 900, 10, "truncated-record", "tail")  # nothing after it
    info = b.finish(InfoOptions(bucket_ms=10_000))
    head, tail = info.damage
    assert (head.time_before, head.time_after) == (None, t0)
    assert (tail.time_before, tail.time_after) == (t0 + 50_000, None)
    assert [x.damaged for x in info.timeline.buckets] == [True, False, False, False, False, True]


def test_terminal_chart_never_wider_than_the_console():
    from mqtool.render_info import timeline_chart

    b = InfoBuilder("test", "/x")
    t0 = 1_795_338_000_000
    for i in range(500):
        b.add_message("T", 0, t0 + i * 1000, 1)
    tl = b.finish(InfoOptions(bucket_ms=1000)).timeline
    assert len(tl.buckets) == 500
    for width in (40, 80, 120):
        text = timeline_chart(tl, width).plain
        assert max(len(line) for line in text.splitlines()) <= width
        assert "500" not in text.splitlines()[0] or width >= 500


def test_generic_fallback_agrees_with_the_rocketmq_collector(tmp_path):
    """The basic view (for families without a collector) is built from `dump commitlog` rows; on a RocketMQ
    store it must count the same messages per queue and the same damaged ranges as the real collector."""
    from mqtool import info_generic
    from mqtool.rocketmq import ops

    store, seg = _damaged_copy(tmp_path)
    full = build_info(store, None, InfoOptions())
    b = InfoBuilder("rocketmq", str(store))
    info_generic.collect(store, b, InfoOptions(), ops, "rocketmq")
    basic = b.finish(InfoOptions())

    def per_queue(i):
        return {(t.topic, q.queue): (q.messages, q.bytes) for t in i.topics for q in t.queues if q.messages}

    assert per_queue(basic) == per_queue(full)
    assert basic.first_store_time == full.first_store_time and basic.last_store_time == full.last_store_time
    assert [(d.file, d.position, d.offset, d.length, d.code) for d in basic.damage] == \
        [(d.file, d.position, d.offset, d.length, d.code) for d in full.damage]
    assert [x.damaged for x in basic.timeline.buckets] == [x.damaged for x in full.timeline.buckets]
    assert any("basic view" in n for n in basic.notes)


def test_histogram_coarsening_never_splits_a_key():
    """1 ms → 2 ms → 5 ms would put ms 5 (inside the 2-ms key [4, 6)) into the 5-ms bucket [0, 5)."""
    import mqtool.info as mi

    old = mi._HIST_MAX_KEYS
    mi._HIST_MAX_KEYS = 64
    try:
        b = mi.InfoBuilder("test", "/x")
        base = 1_795_000_000_000
        for t in range(100):
            b.add_message("T", 0, base + t, 1)
        tl = b.finish(InfoOptions(max_buckets=20)).timeline
    finally:
        mi._HIST_MAX_KEYS = old
    assert [x.count for x in tl.buckets] == [100 // len(tl.buckets)] * len(tl.buckets)


# ---- info and verify count the same damage ----------------------------------------------------------------

def _damaged_fixture(tmp_path, family: str, how: str) -> tuple:
    """A copy of a fixture store with one kind of damage; returns (store, hand-computed (ranges, bytes) or None).
    Sizes are read from the bytes here: RocketMQ TOTALSIZE (first 4 bytes of a unit), Kafka batchLength (bytes
    8..12 of a batch, + 12 for offset and length)."""
    import struct

    src = {"rocketmq": FIXTURES / "rocketmq" / "store", "litemq": FIXTURES / "litemq" / "store",
           "kafka": FIXTURES / "kafka" / "logdir"}[family]
    store = tmp_path / f"{family}-{how}"
    shutil.copytree(src, store)

    def patch(rel, at, data):
        p = store / rel
        b = bytearray(p.read_bytes())
        b[at:at + len(data)] = data
        p.write_bytes(bytes(b))

    rseg = "commitlog/00000000000000000000"
    kseg = "fixture-0/00000000000000000000.log"
    if how == "body-crc":                 # a body byte of the first message: its CRC fails, framing intact
        head = (store / rseg).read_bytes()[:96]
        assert struct.unpack(">i", head[88:92])[0] > 1      # v1, IPv4 hosts: BODYLENGTH at 88, the body at 92
        patch(rseg, 93, bytes([head[93] ^ 0xFF]))
        return store, (1, struct.unpack(">i", head[:4])[0])
    if how == "magic":
        patch(rseg, 4, b"\xde\xad\xbe\xef")
        return store, (1, struct.unpack(">i", (store / rseg).read_bytes()[:4])[0])
    if how == "missing-segment":          # the second of four 4096-byte segments
        (store / "commitlog" / "00000000000000004096").unlink()
        return store, (1, 4096)
    if how == "truncated-segment":
        with open(store / "commitlog" / "00000000000000004096", "r+b") as f:
            f.truncate(2000)
        return store, None
    if how == "bad-length":               # LiteMQ: the first record's length prefix larger than the file
        patch(rseg, 0, b"\x7f\xff\xff\xff")
        return store, None
    if how == "record-field":             # LiteMQ: the first record's CommitLogOffset (never set) set wrong
        n = struct.unpack(">I", (store / rseg).read_bytes()[:4])[0]
        # the record ends with the 52-byte fixed tail (QueueID u32, QueueOffset i64, CommitLogOffset i64, ...)
        # and 6 zero bytes: CommitLogOffset starts 6 + 52 - 12 bytes before the end
        patch(rseg, 4 + n - 46, struct.pack(">q", 12345))
        return store, (1, 4 + n)
    if how == "zeroed-length":            # LiteMQ: the second record's length prefix zeroed, records follow
        head = (store / rseg).read_bytes()
        n = struct.unpack(">I", head[:4])[0]
        n2 = struct.unpack(">I", head[4 + n:8 + n])[0]
        patch(rseg, 4 + n, bytes(4))
        return store, (1, 4 + n2)         # the damaged record, up to the valid one after it
    if how == "junk-after-end":           # LiteMQ: bytes that are no record after the end of data (file 1)
        seg1 = "commitlog/00000000000000000001"
        end = len((store / seg1).read_bytes().rstrip(b"\0"))
        patch(seg1, end + 100, b"\x11" * 30)
        return store, (0, 0)
    if how == "missing-file":             # LiteMQ: file 1 renamed to 2: file 1 is missing between 0 and 2
        (store / "commitlog" / "00000000000000000001").rename(store / "commitlog" / "00000000000000000002")
        return store, None
    if how == "crc":                      # Kafka: the last byte of the first batch (its CRC covers it)
        blen = struct.unpack(">i", (store / kseg).read_bytes()[8:12])[0]
        patch(kseg, blen + 11, b"\xee")
        return store, (1, blen + 12)
    if how == "partial-tail":
        data = (store / kseg).read_bytes()
        (store / kseg).write_bytes(data[:100])
        return store, None
    if how == "zero-tail":                # the tail of a segment that is not the active one zeroed
        data = (store / kseg).read_bytes()
        blen = struct.unpack(">i", data[8:12])[0]
        (store / kseg).write_bytes(data[:blen + 12] + bytes(len(data) - blen - 12))
        return store, None
    raise AssertionError(how)


@pytest.mark.parametrize("family,how", [
    ("rocketmq", "body-crc"), ("rocketmq", "magic"), ("rocketmq", "missing-segment"),
    ("rocketmq", "truncated-segment"), ("litemq", "bad-length"), ("litemq", "missing-file"),
    ("litemq", "record-field"), ("litemq", "zeroed-length"), ("litemq", "junk-after-end"),
    ("kafka", "crc"), ("kafka", "partial-tail"), ("kafka", "zero-tail")])
def test_info_and_verify_count_the_same_damage(tmp_path, family, how):
    """``info``'s damaged ranges and bytes are verify's (the log's bytes its root findings name, merged where
    they touch): one definition of what is damaged, whatever the family and the damage."""
    from mqtool.causes import linked
    from mqtool.detect import detect
    from mqtool.families import family_module
    from mqtool.options import VerifyOptions

    store, want = _damaged_fixture(tmp_path, family, how)
    assert detect(store, None) == family
    findings, summary_fn = family_module(family, "ops").verify("store", str(store), VerifyOptions(progress=False))
    gen, summary = linked(findings, summary_fn)
    list(gen)
    s = summary()
    info = build_info(store, None, InfoOptions(progress=False))
    assert s.errors + s.warnings > 0
    assert (info.damage_total, info.damaged_bytes) == (s.damaged_ranges, s.damaged_bytes)
    assert info.damage_total >= (how != "junk-after-end")     # (leftovers after the end: a warning, no damage)
    assert len(info.damage) == info.damage_total
    if want is not None:
        assert (info.damage_total, info.damaged_bytes) == want
