"""mqtool info / report for LiteMQ stores: the real clean and crash stores and a damaged copy.

Expected values come from the stores' expected.json (what the driver sent and LiteMQ's own code returned:
accepted messages, store sizes incl. prefix, StoreTimestamp read back by LiteMQ's decoder, consumequeue
entry counts, acked consumer offsets) and MANIFEST.md (abort file only in crash/, checkpoint only in clean/).
"""
from __future__ import annotations

import json
import shutil
from collections import Counter, defaultdict

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

from conftest import load_json, require_realdata
from mqtool.info import build_info
from mqtool.options import InfoOptions
from mqtool.render_info import render_info
from pagecheck import assert_self_contained, parse


def _store(name):
    return require_realdata("litemq", name, "data", "broker")


def _expected(name):
    return load_json(require_realdata("litemq", name, "expected.json"))


@pytest.mark.parametrize("name", ["clean", "crash"])
def test_counts_times_and_queue_ends(name, run_cli):
    exp = _expected(name)
    acc = [m for m in exp["messages"] if m["accepted"]]
    code, out, err = run_cli("info", _store(name), "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["family"] == "litemq" and d["store_kind"] == "LiteMQ data directory"
    assert d["messages"] == exp["meta"]["messages_accepted"] == len(acc)
    assert d["bytes"] == sum(m["store_size_incl_prefix"] for m in acc) == exp["meta"]["commitlog_wrote_offset"]
    assert d["first_store_time"] == min(m["store_timestamp_in_record"] for m in acc)
    assert d["last_store_time"] == max(m["store_timestamp_in_record"] for m in acc)
    # per topic / queue: the record's QueueID as sent
    want = Counter((m["topic"], m["queue_id"]) for m in acc)
    want_bytes = defaultdict(int)
    for m in acc:
        want_bytes[(m["topic"], m["queue_id"])] += m["store_size_incl_prefix"]
    got = {(t["topic"], q["queue"]): q for t in d["topics"] for q in t["queues"]}
    assert {k: q["messages"] for k, q in got.items() if q["messages"]} == dict(want)
    assert {k: q["bytes"] for k, q in got.items() if q["bytes"]} == dict(want_bytes)
    # queue ends = consumequeue entry counts
    ends = {f"{t}/{q}": v["max_offset"] for (t, q), v in got.items() if v["max_offset"] is not None}
    assert ends == exp["meta"]["consumequeue_entry_counts"]
    # topics largest first
    assert [t["bytes"] for t in d["topics"]] == sorted((t["bytes"] for t in d["topics"]), reverse=True)
    # files: 4 commitlog files preallocated to the configured size; data end = write offset
    cl = next(f for f in d["files"] if f["group"] == "commitlog")
    fs = exp["meta"]["config"]["commitlog_file_size"]
    assert cl["count"] == exp["meta"]["commitlog_files"] and cl["bytes"] == 4 * fs
    assert d["overview"]["commitlog"] == {"file_size": fs, "files": 4,
                                          "data_end": exp["meta"]["commitlog_wrote_offset"]}
    assert any(f"preallocated to {fs} bytes" in h for h in d["version_hints"])
    assert any("%020d" in h for h in d["version_hints"])
    cqs = next(f for f in d["files"] if f["group"] == "consumequeue")
    assert f"{sum(exp['meta']['consumequeue_entry_counts'].values())} entries" in cqs["detail"]
    types = Counter(m["type"] for m in acc)
    assert d["overview"]["message types"] == dict(types)
    assert d["damage"] == [] and d["damage_total"] == 0
    tl = d["timeline"]
    assert sum(b["count"] for b in tl["buckets"]) == len(acc) and tl["implausible"] == 0
    assert not any(b["damaged"] for b in tl["buckets"])


def test_clean_store_consumers_and_crash_marker():
    exp = _expected("clean")
    info = build_info(_store("clean"), None, InfoOptions())
    assert info.crash["unclean"] is False
    acked = exp["meta"]["consumer_offsets_acked"]
    counts = exp["meta"]["consumequeue_entry_counts"]
    want = sorted((g, t, int(q), off, counts[f"{t}/{q}"], counts[f"{t}/{q}"] - off)
                  for g, ts in acked.items() for t, qs in ts.items() for q, off in qs.items())
    got = sorted((c.group, c.topic, c.queue, c.committed, c.max_offset, c.lag) for c in info.consumers)
    assert got == want
    assert all(c.source == "checkpoint/checkpoint" for c in info.consumers)
    assert [c.lag for c in info.consumers] == sorted((c.lag for c in info.consumers), reverse=True)
    assert any(f.group == "checkpoint" for f in info.files)
    assert "checkpoint version 1" in info.version_hints


def test_crash_store_marker_and_missing_checkpoint():
    info = build_info(_store("crash"), None, InfoOptions())
    assert info.crash["unclean"] is True and info.crash["files"] == ["abort/abort"]
    abort = require_realdata("litemq", "crash", "data", "broker", "abort", "abort").read_bytes()
    assert info.overview["abort"]["brokerStartTimestamp"] == int(abort.decode())
    assert info.consumers == []                       # no checkpoint after a crash (MANIFEST)
    assert any("no checkpoint file" in n for n in info.notes)


def _damaged_copy(tmp_path):
    src = _store("crash")
    dst = tmp_path / "broker"
    shutil.copytree(src, dst)
    for p in dst.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    exp = _expected("crash")
    acc = [m for m in exp["messages"] if m["accepted"]]
    acc.sort(key=lambda m: m["commitlog_offset"])
    in_file1 = [i for i, m in enumerate(acc) if m["commitlog_file"].endswith("0001")]
    i = in_file1[len(in_file1) // 2]                  # a record in the middle of file 1
    victim = acc[i]
    seg = dst / victim["commitlog_file"]
    data = bytearray(seg.read_bytes())
    p = victim["offset_in_file"]
    data[p + 4:p + 8] = b"\xDE\xAD\xBE\xEF"           # its message magic
    seg.write_bytes(bytes(data))
    return dst, victim, acc[i - 1], acc[i + 1], acc


def test_damaged_copy_places_the_damage_and_exits_1(run_cli, tmp_path):
    store, victim, before, after, acc = _damaged_copy(tmp_path)
    code, out, err = run_cli("info", store, "--json")
    assert code == 1, err
    d = json.loads(out)
    assert d["damage_total"] == 1
    dmg = d["damage"][0]
    assert dmg["file"] == victim["commitlog_file"] and dmg["position"] == victim["offset_in_file"]
    assert dmg["offset"] == victim["commitlog_offset"] and dmg["code"] == "bad-magic"
    assert dmg["time_before"] == before["store_timestamp_in_record"]
    assert dmg["time_after"] == after["store_timestamp_in_record"]
    # the records after the damage are still counted (LiteMQ could not reach them): all but the victim
    assert d["messages"] == len(acc) - 1
    assert d["bytes"] == sum(m["store_size_incl_prefix"] for m in acc) - victim["store_size_incl_prefix"]
    assert any(b["damaged"] for b in d["timeline"]["buckets"])
    assert any("newer than the live data" in n for n in d["notes"])
    assert "mqtool verify store" in err


def test_missing_commitlog_file_is_damage_between_its_neighbours(run_cli, tmp_path):
    src = _store("crash")
    store = tmp_path / "broker"
    shutil.copytree(src, store)
    for p in store.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    (store / "commitlog" / "00000000000000000001").unlink()
    acc = sorted((m for m in _expected("crash")["messages"] if m["accepted"]), key=lambda m: m["commitlog_offset"])
    fs = _expected("crash")["meta"]["config"]["commitlog_file_size"]
    lost = [m for m in acc if m["commitlog_file"].endswith("0001")]
    before = [m for m in acc if m["commitlog_file"].endswith("0000")][-1]
    after = [m for m in acc if m["commitlog_file"].endswith("0002")][0]
    code, out, err = run_cli("info", store, "--json")
    assert code == 1, err
    d = json.loads(out)
    assert d["messages"] == len(acc) - len(lost)
    assert d["damage_total"] == 1
    dmg = d["damage"][0]
    assert (dmg["code"], dmg["file"], dmg["offset"], dmg["length"]) == ("segment-missing",
                                                                        "commitlog/00000000000000000002", fs, fs)
    assert dmg["time_before"] == before["store_timestamp_in_record"]
    assert dmg["time_after"] == after["store_timestamp_in_record"]


def test_terminal_rendering_fits_one_screen():
    info = build_info(_store("crash"), None, InfoOptions())
    con = Console(record=True, width=100, no_color=True, force_terminal=False)
    render_info(info, con)
    text = con.export_text()
    for want in ("LiteMQ data directory", "UNCLEAN SHUTDOWN", "Timeline", "orders.v1", "payments-eu", "audit_log",
                 "commitlog", "consumequeue"):
        assert want in text, want
    assert len(text.splitlines()) < 60


def test_parts_of_a_store(run_cli):
    # the commitlog directory of the crash store: its messages; the data dir above it is found, so the
    # abort marker is still checked
    code, out, err = run_cli("info", _store("crash") / "commitlog", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["store_kind"] == "LiteMQ commitlog directory"
    assert d["messages"] == _expected("crash")["meta"]["messages_accepted"]
    assert d["crash"]["unclean"] is True
    # one consumequeue queue directory: its end, no messages
    code, out, err = run_cli("info", _store("clean") / "consumequeue" / "orders.v1" / "0", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["messages"] == 0
    assert [(t["topic"], q["queue"], q["max_offset"]) for t in d["topics"] for q in t["queues"]] == \
        [("orders.v1", 0, _expected("clean")["meta"]["consumequeue_entry_counts"]["orders.v1/0"])]


def test_report_of_the_crash_store(run_cli, tmp_path):
    out = tmp_path / "r.html"
    code, stdout, err = run_cli("report", _store("crash"), "-o", out)
    # verify of crash/ is sound-with-warnings (docs/litemq.md): no error, no damage → exit 0
    assert code == 0, err
    assert stdout.strip() == str(out)
    html = out.read_text("utf-8")
    page = parse(html)
    assert_self_contained(html, page)
    for ident in ("overview", "timeline", "topics", "damage", "files", "findings", "timeline-chart",
                  "topic-chart", "verdict"):
        assert ident in page.ids, ident
    text = "".join(page.text)
    assert "unclean-shutdown" in text and "UNCLEAN" in text
    assert page.count("rect", **{"class": "topic-bar"}) == 3
    _, out_v, _ = run_cli("verify", "store", _store("crash"), "--json")
    findings = [json.loads(x) for x in out_v.splitlines()][:-1]
    assert page.count("tr", **{"class": "finding"}) == len(findings)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_damage_never_raises(tmp_path_factory, data):
    store = tmp_path_factory.mktemp("l") / "broker"
    shutil.copytree(_store("crash"), store)
    for p in store.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    segs = sorted((store / "commitlog").iterdir())
    seg = data.draw(st.sampled_from(segs))
    size = seg.stat().st_size
    pos = data.draw(st.integers(0, 100_000))
    junk = data.draw(st.binary(min_size=1, max_size=64))
    b = bytearray(seg.read_bytes())
    b[pos:pos + len(junk)] = junk
    if data.draw(st.booleans()):
        b = b[:data.draw(st.integers(0, size))]
    seg.write_bytes(bytes(b))
    info = build_info(store, None, InfoOptions())
    n = _expected("crash")["meta"]["messages_accepted"]
    assert info.messages <= n + 2
    names = {f"commitlog/{s.name}": s.stat().st_size for s in segs}
    for d in info.damage:
        assert d.file in names and 0 <= d.position <= names[d.file]


def test_restarted_fixture_counts_stale_records_apart():
    """fixtures/litemq/restarted: 3 newer records over the start of file 0 (fixtures/build_litemq.py)."""
    from conftest import FIXTURES

    man = load_json(FIXTURES / "litemq" / "messages.json")
    end = man["restarted_new_end"]
    # old records lying wholly after the new end survive as stale records
    survivors = [m for m in man["store"] if m["offset"] >= end]
    info = build_info(FIXTURES / "litemq" / "restarted", None, InfoOptions())
    assert info.messages == len(man["restarted_new"]) == 3
    assert info.bytes == end
    assert info.overview["carved records"] == {"stale": len(survivors), "after_gap": 0}
    assert info.first_store_time == man["restarted_new"][0]["store_timestamp"]
    assert info.damage_total == 0 and info.crash["unclean"] is True
    assert any("stale record" in n for n in info.notes)
