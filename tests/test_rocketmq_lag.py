"""`mqtool query --unconsumed-by GROUP` and the consumer-lag table of `info` for RocketMQ.

Ground truth: the gen-* stores' expected.json (the broker's put results: topic, queue, queue offset, commitlog
offset of every message) with the committed offsets their MANIFEST says the driver wrote to
config/consumerOffset.json; and small stores built here (units by the construct schema, consumequeue units
packed by hand with struct, the offsets file written by the test).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.builders import rocketmq_builder, rocketmq_unit
from tests.conftest import require_realdata

# config/consumerOffset.json of both gen-*-clean stores (MANIFEST: "an offsetTable like ConsumerOffsetManager")
COMMITTED = {("TopicA", 0): 10, ("TopicA", 1): 12, ("TopicA", 2): 0, ("TopicA", 3): 90, ("%RETRY%ConsumerGroupA", 0): 1}


def _ndjson(out: str) -> tuple[list[dict], list[dict]]:
    rows = [json.loads(x) for x in out.splitlines() if x.strip()]
    return [r for r in rows if r["kind"] != "unconsumed-summary"], [r for r in rows if r["kind"] == "unconsumed-summary"]


def _expected(store: str) -> dict:
    """{(topic, queue): {queue offset: commitlog offset}} of the messages at or after the committed offsets."""
    d = json.loads((require_realdata("rocketmq", store) / "expected.json").read_text())
    out: dict = {k: {} for k in COMMITTED}
    for m in d["messages"]:
        k = (m.get("storedTopic"), m.get("storedQueueId"))
        if k in COMMITTED and m["queueOffset"] >= COMMITTED[k]:
            out[k][m["queueOffset"]] = m["commitLogOffset"]
    return out


def test_real_store_unconsumed_rows_are_exactly_the_messages_after_the_committed_offsets(run_cli):
    store = require_realdata("rocketmq", "gen-5.1.4-clean", "store")
    code, out, err = run_cli("query", store, "--unconsumed-by", "ConsumerGroupA", "--json")
    assert code == 0, err
    rows, summary = _ndjson(out)
    got: dict = {k: {} for k in COMMITTED}
    for r in rows:
        assert r["group"] == "ConsumerGroupA"
        assert r["committed_offset"] == COMMITTED[(r["topic"], r["queue_id"])]
        got[(r["topic"], r["queue_id"])][r["queue_offset"]] = r["offset"]
    assert got == _expected("gen-5.1.4-clean")
    per = {(s["topic"], s["queue"]): s for s in summary}
    assert set(per) == set(COMMITTED)
    for k, exp in _expected("gen-5.1.4-clean").items():
        assert per[k]["committed_offset"] == COMMITTED[k]
        assert per[k]["unconsumed"] == per[k]["listed"] == len(exp)


def test_real_store_497_lists_the_two_redelivered_delay_messages_too(run_cli):
    # MANIFEST: 4.9.7's ScheduleMessageService re-delivered both delayed messages to TopicA queue 1 (not in
    # expected.json): queue 1 has two unconsumed messages more than expected.json lists
    store = require_realdata("rocketmq", "gen-4.9.7-clean", "store")
    code, out, _ = run_cli("query", store, "--unconsumed-by", "ConsumerGroupA", "--json")
    assert code == 0
    rows, summary = _ndjson(out)
    exp = _expected("gen-4.9.7-clean")
    for k, want in exp.items():
        got = {r["queue_offset"]: r["offset"] for r in rows if (r["topic"], r["queue_id"]) == k}
        assert want.items() <= got.items()
        assert len(got) - len(want) == (2 if k == ("TopicA", 1) else 0)


def test_real_store_info_lag_per_group(run_cli):
    store = require_realdata("rocketmq", "gen-5.1.4-clean", "store")
    code, out, _ = run_cli("info", store, "--json")
    groups = {(g["group"], g["topic"]): g for g in json.loads(out)["consumer_groups"]}
    exp = _expected("gen-5.1.4-clean")
    a = groups[("ConsumerGroupA", "TopicA")]
    assert a["queues"] == 4
    assert a["committed"] == 10 + 12 + 0 + 90
    assert a["lag"] == sum(len(v) for k, v in exp.items() if k[0] == "TopicA")
    assert groups[("ConsumerGroupA", "%RETRY%ConsumerGroupA")]["lag"] == 0


def test_unknown_group_exit_1_lists_known_groups_sanitised(run_cli):
    store = require_realdata("rocketmq", "gen-5.1.4-clean", "store")
    code, out, err = run_cli("query", store, "--unconsumed-by", "nope\x1b[31m")
    assert code == 1 and out == ""
    assert "\x1b" not in err and "'ConsumerGroupA'" in err and "known groups (1)" in err
    assert len(err.strip().splitlines()) == 1


def test_store_without_offsets_file_exit_2_one_line(run_cli):
    store = require_realdata("rocketmq", "gen-5.1.4-kill", "store")      # MANIFEST: no config/ files
    code, out, err = run_cli("query", store, "--unconsumed-by", "ConsumerGroupA")
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "consumerOffset.json" in err and "--offsets" in err


def test_metadata_only_store_shows_the_committed_offsets(run_cli):
    # MANIFEST: gxstax-c831b411 holds config/ only (no commitlog, no consumequeue); its consumerOffset.json has
    # TopicTest@please_rename_unique_group_name = {0:793,1:793,2:793,3:793}
    store = require_realdata("rocketmq", "gxstax-c831b411", "store")
    code, out, err = run_cli("query", store, "--unconsumed-by", "please_rename_unique_group_name", "--json")
    assert code == 0, err
    rows, summary = _ndjson(out)
    assert rows == []
    got = {(s["topic"], s["queue"]): (s["committed_offset"], s["unconsumed"]) for s in summary}
    assert {k: v for k, v in got.items() if k[0] == "TopicTest"} == {("TopicTest", q): (793, None) for q in range(4)}
    assert "no commitlog" in err and "unknown" in err


def test_offsets_file_for_a_store_without_one(run_cli, tmp_path):
    store = require_realdata("rocketmq", "gen-5.1.4-kill", "store")
    f = tmp_path / "offsets.json"
    f.write_text(json.dumps({"ConsumerGroupA": {"TopicA": {"3": 100}}}))
    code, out, err = run_cli("query", store, "--unconsumed-by", "ConsumerGroupA", "--offsets", f, "--json")
    assert code == 0, err
    rows, summary = _ndjson(out)
    d = json.loads((require_realdata("rocketmq", "gen-5.1.4-kill") / "expected.json").read_text())
    want = sorted(m["queueOffset"] for m in d["messages"]
                  if (m.get("storedTopic"), m.get("storedQueueId")) == ("TopicA", 3) and m["queueOffset"] >= 100)
    assert [r["queue_offset"] for r in rows] == want
    assert summary[0]["source"].startswith("--offsets")


# ---- generated stores ------------------------------------------------------------------------------------

SEG = 4096


def _store(root: Path, per_queue: dict[int, int], offsets: str | None, with_cq: bool = True) -> dict:
    """Topic T with ``per_queue[q]`` messages in queue q (interleaved), commitlog + consumequeue packed here;
    returns {(q, queue offset): commitlog offset}."""
    log = bytearray()
    where = {}
    cq: dict[int, list] = {q: [] for q in per_queue}
    for i in range(max(per_queue.values())):
        for q, n in per_queue.items():
            if i < n:
                u = rocketmq_unit(b"T", f"m{q}-{i}".encode(), queue_id=q, queue_offset=i, phys=len(log))
                where[(q, i)] = len(log)
                cq[q].append((len(log), len(u), 97))     # tagsCode: Java "a".hashCode() = 97
                log += u
    (root / "commitlog").mkdir(parents=True)
    (root / "commitlog" / f"{0:020d}").write_bytes(bytes(log) + bytes(SEG - len(log)))
    if with_cq:
        for q, units in cq.items():
            (root / "consumequeue" / "T" / str(q)).mkdir(parents=True)
            for name, data in rocketmq_builder().cq_files(units, 400):
                (root / "consumequeue" / "T" / str(q) / name).write_bytes(data)
    if offsets is not None:
        (root / "config").mkdir()
        (root / "config" / "consumerOffset.json").write_text(offsets)
    return where


OFFSETS = '{"offsetTable":{"T@g":{0:3,1:9},"T@neg":{0:-1},"T@junk":{0:"x"},"T@other":{1:0}}}'


@pytest.mark.parametrize("with_cq", [True, False], ids=["consumequeue", "commitlog-scan"])
def test_generated_store_committed_offsets(run_cli, tmp_path, with_cq):
    where = _store(tmp_path, {0: 5, 1: 4}, OFFSETS, with_cq)
    code, out, err = run_cli("query", tmp_path, "--unconsumed-by", "g", "--json")
    assert code == 0, err
    rows, summary = _ndjson(out)
    assert [(r["queue_id"], r["queue_offset"], r["offset"]) for r in rows] == \
        [(0, 3, where[(0, 3)]), (0, 4, where[(0, 4)])]
    assert {r["via"] for r in rows} == {"consumequeue" if with_cq else "scan"}
    per = {s["queue"]: s for s in summary}
    assert (per[0]["committed_offset"], per[0]["max_offset"], per[0]["unconsumed"]) == (3, 5, 2)
    # committed beyond the end: nothing unconsumed, said so
    assert (per[1]["committed_offset"], per[1]["max_offset"], per[1]["unconsumed"]) == (9, 4, 0)
    assert "beyond the queue end" in per[1]["note"]


@pytest.mark.parametrize("group, why", [("neg", "negative"), ("junk", "not an integer")])
def test_generated_store_negative_or_garbage_offset_is_a_note(run_cli, tmp_path, group, why):
    _store(tmp_path, {0: 5, 1: 4}, OFFSETS)
    code, out, err = run_cli("query", tmp_path, "--unconsumed-by", group, "--json")
    assert code == 0
    rows, summary = _ndjson(out)
    assert rows == [] and summary[0]["unconsumed"] is None and why in summary[0]["note"]


def test_generated_store_limit_keeps_the_summary_whole(run_cli, tmp_path):
    _store(tmp_path, {0: 5, 1: 4}, '{"offsetTable":{"T@g":{0:0,1:1}}}')
    code, out, _ = run_cli("query", tmp_path, "--unconsumed-by", "g", "--limit", "2", "--json")
    rows, summary = _ndjson(out)
    assert len(rows) == 2
    assert [(s["unconsumed"], s["listed"]) for s in summary] == [(5, 2), (3, 0)]


def test_damaged_offsets_file_is_a_clear_error_and_the_bak_is_used(run_cli, tmp_path):
    _store(tmp_path, {0: 5}, '{"offsetTable":{"T@g":{0:')
    code, out, err = run_cli("query", tmp_path, "--unconsumed-by", "g")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "consumerOffset.json" in err and "Traceback" not in err
    (tmp_path / "config" / "consumerOffset.json.bak").write_text('{"offsetTable":{"T@g":{0:4}}}')
    code, out, err = run_cli("query", tmp_path, "--unconsumed-by", "g", "--json")
    assert code == 0 and ".bak" in err
    rows, summary = _ndjson(out)
    assert [r["queue_offset"] for r in rows] == [4] and summary[0]["source"] == "config/consumerOffset.json.bak"


def test_hostile_group_names_are_escaped_in_the_table(run_cli, tmp_path):
    _store(tmp_path, {0: 2}, '{"offsetTable":{"T@g\\u001b]0;x\\u0007":{0:0}}}')
    code, out, err = run_cli("query", tmp_path, "--unconsumed-by", "zzz")
    assert code == 1 and "\x1b" not in err and "\\x1b" in err
    code, out, err = run_cli("--color", "never", "query", tmp_path, "--unconsumed-by", "g\x1b]0;x\x07", "--as",
                             "table")
    assert code == 0 and "\x1b" not in out and "\x07" not in out
    assert "Unconsumed by g\\x1b]0;x\\x07" in out


def test_unconsumed_takes_no_other_selector(run_cli, tmp_path):
    _store(tmp_path, {0: 2}, '{"offsetTable":{"T@g":{0:0}}}')
    code, _, err = run_cli("query", tmp_path, "--unconsumed-by", "g", "--key", "k")
    assert code == 2 and "--key" in err
    code, _, err = run_cli("query", tmp_path, "--limit", "3", "--key", "k")
    assert code == 2 and "--unconsumed-by" in err


def test_engine_spark_is_said_to_be_ignored(run_cli, tmp_path):
    """--unconsumed-by runs embedded: with --engine spark it says so (not silently) and answers as embedded."""
    _store(tmp_path, {0: 5, 1: 4}, OFFSETS, True)
    code, out, err = run_cli("query", tmp_path, "--unconsumed-by", "g", "--json")
    code2, out2, err2 = run_cli("query", tmp_path, "--unconsumed-by", "g", "--json", "--engine", "spark")
    assert (code2, out2) == (code, out) == (0, out)
    assert "--engine spark ignored" in err2 and "--engine spark ignored" not in err
