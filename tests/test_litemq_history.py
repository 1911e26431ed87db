"""LiteMQ restart over old data (issue 15, "LiteMQ history"): the older run's consumequeue entries left
after a restart are stale in dump, a warning in verify, never a live answer in query.

Expected values come from the fixture builder's record of what each run wrote (fixtures/build_litemq.py,
``restarted_cq``) and, for real bytes, from the two real stores' expected.json (clean/ as the older run, crash/'s
first records and their entries written over it as the newer run, the way LiteMQ's restart rewrites both).
"""
from __future__ import annotations

import json
import shutil

from conftest import FIXTURES, load_json, require_realdata

FIX = FIXTURES / "litemq"
ENTRY = 24


def _rows(out):
    return [json.loads(x) for x in out.splitlines() if x.strip()]


def _summary(out):
    return _rows(out)[-1]


def test_fixture_dump_consumequeue_marks_the_older_runs_entries(run_cli):
    man = load_json(FIX / "messages.json")
    code, out, err = run_cli("dump", "consumequeue", FIX / "restarted", "--json")
    got = {(r["topic"], r["queue_id"], r["queue_offset"]): r["stale"] for r in _rows(out)}
    want = {(e["topic"], e["queue_id"], e["queue_offset"]): e["stale"] for e in man["restarted_cq"]}
    assert got == want and sum(want.values()) == 8
    assert code == 0 and "stale" in err
    reasons = {r["stale_reason"] for r in _rows(out) if r["stale"]}
    assert reasons == {"past-end", "overwritten", "inside-record"}    # the builder made one of each


def test_fixture_verify_reports_remnants_as_warnings(run_cli):
    man = load_json(FIX / "messages.json")
    code, out, _ = run_cli("verify", "store", FIX / "restarted", "--json")
    rows = _rows(out)
    s = rows[-1]
    assert s["errors"] == 0 and code == 0
    remnants = {}
    for e in man["restarted_cq"]:
        if e["stale"]:
            remnants[f"{e['topic']}/{e['queue_id']}"] = remnants.get(f"{e['topic']}/{e['queue_id']}", 0) + 1
    got = {r["message"].split(":")[0]: r["actual"] for r in rows if r.get("code") == "cq-remnants"}
    assert got == remnants
    assert sum(r.get("code") == "cq-stale-entry" and r["severity"] == "info" for r in rows) == sum(remnants.values())


def test_fixture_query_queue_offset_never_returns_a_stale_record_as_live(run_cli):
    man = load_json(FIX / "messages.json")
    for e in man["restarted_cq"]:
        code, out, err = run_cli("query", FIX / "restarted", "--topic", e["topic"], "--queue", e["queue_id"],
                                 "--queue-offset", e["queue_offset"], "--json")
        rows = _rows(out)
        if not e["stale"]:
            assert [(r["offset"], r["stale"]) for r in rows] == [(e["offset"], False)]
            continue
        assert all(r["stale"] for r in rows), e
        assert "stale" in err
        for r in rows:    # the older record, surviving after the new end, exactly the one the entry meant
            assert (r["offset"], r["size"], r["topic"], r["queue_id"]) == (e["offset"], e["size"], e["topic"],
                                                                           e["queue_id"])


def test_fixture_include_stale_searches_carved_records(run_cli):
    man = load_json(FIX / "messages.json")
    end = man["restarted_new_end"]
    old = next(m for m in man["store"] if m["offset"] >= end and m["keys"])
    code, out, _ = run_cli("query", FIX / "restarted", "--key", old["keys"][0], "--json")
    assert code == 1 and _rows(out) == []
    code, out, _ = run_cli("query", FIX / "restarted", "--key", old["keys"][0], "--include-stale", "--json")
    rows = _rows(out)
    assert code == 0 and [(r["offset"], r["stale"]) for r in rows] == [(old["offset"], True)]
    code, out, _ = run_cli("query", FIX / "restarted", "--msg-id", old["msg_id"], "--include-stale", "--json")
    assert [(r["offset"], r["stale"]) for r in _rows(out)] == [(old["offset"], True)]
    new = man["restarted_new"][1]
    code, out, _ = run_cli("query", FIX / "restarted", "--key", new["keys"][0], "--include-stale", "--json")
    assert code == 0 and [(r["offset"], r["stale"]) for r in _rows(out)] == [(new["offset"], False)]


def test_fixture_query_offset_marks_an_older_runs_record(run_cli):
    man = load_json(FIX / "messages.json")
    end = man["restarted_new_end"]
    old = next(m for m in man["store"] if m["offset"] >= end)
    code, out, _ = run_cli("query", FIX / "restarted", "--offset", old["offset"], "--json")
    assert [(r["msg_id"], r["stale"]) for r in _rows(out)] == [(old["msg_id"], True)]
    new = man["restarted_new"][0]
    code, out, _ = run_cli("query", FIX / "restarted", "--offset", new["offset"], "--json")
    assert [(r["msg_id"], r["stale"]) for r in _rows(out)] == [(new["msg_id"], False)]


def test_mismatch_without_a_restart_is_still_damage(run_cli, tmp_path):
    """The sound fixture store with one entry's size changed: no sign of a restart, so an error."""
    dst = tmp_path / "store"
    shutil.copytree(FIX / "store", dst)
    f = dst / "consumequeue" / "orders" / "1" / "00000000000000000000"
    data = bytearray(f.read_bytes())
    data[8:12] = (int.from_bytes(data[8:12], "big") + 5).to_bytes(4, "big")   # offset i64, then size i32
    f.write_bytes(bytes(data))
    code, out, _ = run_cli("verify", "store", dst, "--json")
    codes = {(r["severity"], r["code"]) for r in _rows(out) if r.get("kind") == "finding"}
    assert ("error", "cq-size-mismatch") in codes and code == 1


def test_entries_into_a_zeroed_tail_are_still_damage(run_cli, tmp_path):
    """The sound fixture store with the end of its last commitlog file zeroed: entries past the new end, but no
    sign of a restart (no older record survives there, time never goes back), so errors, not remnants."""
    man = load_json(FIX / "messages.json")
    dst = tmp_path / "store"
    shutil.copytree(FIX / "store", dst)
    fs = man["commitlog_file_size"]
    last = sorted(man["store"], key=lambda m: m["offset"])
    cut = last[-2]["offset"]
    f = dst / "commitlog" / f"{cut // fs:020d}"
    data = bytearray(f.read_bytes())
    data[cut % fs:] = bytes(len(data) - cut % fs)
    f.write_bytes(bytes(data))
    code, out, _ = run_cli("verify", "store", dst, "--json")
    rows = _rows(out)
    codes = {(r["severity"], r["code"]) for r in rows if r.get("kind") == "finding"}
    assert ("error", "cq-beyond-end") in codes and code == 1
    assert not any(r.get("code") in ("cq-stale-entry", "cq-remnants") for r in rows)


def test_entries_behind_damage_are_not_stale(run_cli, tmp_path):
    """The sound fixture store with its second record's magic broken: every later record is this run's, behind
    damage (after-gap), so no entry is an older run's; query gives such a record with its state and exit 1."""
    man = load_json(FIX / "messages.json")
    dst = tmp_path / "store"
    shutil.copytree(FIX / "store", dst)
    recs = sorted(man["store"], key=lambda m: m["offset"])
    victim = recs[1]
    fs = man["commitlog_file_size"]
    f = dst / "commitlog" / f"{victim['offset'] // fs:020d}"
    data = bytearray(f.read_bytes())
    data[victim["offset"] % fs + 4] ^= 0xFF                     # the magic after the length prefix
    f.write_bytes(bytes(data))
    code, out, _ = run_cli("dump", "consumequeue", dst, "--json")
    rows = _rows(out)
    assert rows and not any(r["stale"] for r in rows)
    later = next(m for m in recs[2:] if m["topic"] == "orders" and m["queue_id"] == 0 and not m["message_type_code"])
    entry = next(r for r in rows if r["offset"] == later["offset"] and r["topic"] == "orders")
    code, out, err = run_cli("query", dst, "--topic", "orders", "--queue", 0, "--queue-offset",
                             entry["queue_offset"], "--json")
    got = _rows(out)
    assert code == 1 and [(r["offset"], r["state"]) for r in got] == [(later["offset"], "after-gap")]


# ---- real bytes: clean/ (older run) with crash/'s first records and entries written over it ----------

def _real_restart(tmp_path, n_new=12):
    old = load_json(require_realdata("litemq", "clean", "expected.json"))
    new = load_json(require_realdata("litemq", "crash", "expected.json"))
    src_old = require_realdata("litemq", "clean", "data", "broker")
    src_new = require_realdata("litemq", "crash", "data", "broker")
    dst = tmp_path / "restarted"
    shutil.copytree(src_old, dst)
    for p in dst.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    newer = sorted((m for m in new["messages"] if m["accepted"]), key=lambda m: m["commitlog_offset"])[:n_new]
    end = max(m["commitlog_offset"] + m["store_size_incl_prefix"] for m in newer)
    assert all(m["commitlog_file"].endswith("0" * 20) for m in newer)
    f0 = dst / "commitlog" / ("0" * 20)
    data = bytearray(f0.read_bytes())
    data[:end] = (src_new / "commitlog" / ("0" * 20)).read_bytes()[:end]
    f0.write_bytes(bytes(data))
    # the newer run's entries of those records: per queue, the entries 0..k-1 whose records lie below end
    entries = {}
    for m in new["messages"]:
        for e in m.get("consumequeue") or []:
            entries.setdefault((e["topic"], e["queue_id"]), {})[e["index"]] = (e, m["commitlog_offset"])
    rewritten = {}
    for q, by_index in entries.items():
        k = 0
        while k in by_index and by_index[k][1] < end:
            k += 1
        for i in range(k):
            e = by_index[i][0]
            raw = (src_new / e["file"]).read_bytes()[e["byte_offset_in_file"]:e["byte_offset_in_file"] + ENTRY]
            target = dst / e["file"]
            target.parent.mkdir(parents=True, exist_ok=True)
            buf = bytearray(target.read_bytes()) if target.exists() else bytearray(
                new["meta"]["config"]["consumequeue_file_size"])
            buf[e["byte_offset_in_file"]:e["byte_offset_in_file"] + ENTRY] = raw
            target.write_bytes(bytes(buf))
        rewritten[q] = k
    truth = {}
    for m in old["messages"]:
        for e in m.get("consumequeue") or []:
            q = (e["topic"], e["queue_id"])
            truth[q + (e["index"],)] = e["index"] >= rewritten.get(q, 0)      # stale = the older run's
    for q, k in rewritten.items():
        for i in range(k):
            truth[q + (i,)] = False
    return dst, truth


def test_real_restart_over_old_data(tmp_path, run_cli):
    dst, truth = _real_restart(tmp_path)
    code, out, _ = run_cli("dump", "consumequeue", dst, "--json")
    got = {(r["topic"], r["queue_id"], r["queue_offset"]): r["stale"] for r in _rows(out)}
    assert got == truth and any(truth.values()) and not all(truth.values())
    code, out, _ = run_cli("verify", "store", dst, "--json")
    s = _summary(out)
    assert s["errors"] == 0, [r for r in _rows(out) if r.get("severity") == "error"]
    n_stale = sum(r.get("code") == "cq-stale-entry" for r in _rows(out))
    assert n_stale == sum(truth.values())
    for (topic, qid, idx), stale in sorted(truth.items()):
        code, out, _ = run_cli("query", dst, "--topic", topic, "--queue", qid, "--queue-offset", idx, "--json")
        rows = _rows(out)
        if stale:
            assert all(r["stale"] for r in rows)
        else:
            assert len(rows) == 1 and not rows[0]["stale"] and rows[0]["queue_id"] == qid


def test_fixture_info_counts_only_live_entries():
    from mqtool.info import build_info
    from mqtool.options import InfoOptions

    man = load_json(FIX / "messages.json")
    info = build_info(FIX / "restarted", None, InfoOptions())
    live = [e for e in man["restarted_cq"] if not e["stale"]]
    d = info.to_dict()
    ends = {(t["topic"], q["queue"]): q["max_offset"] for t in d["topics"] for q in t["queues"]}
    want = {}
    for e in man["restarted_cq"]:
        want.setdefault((e["topic"], e["queue_id"]), 0)
    for e in live:
        want[(e["topic"], e["queue_id"])] = max(want[(e["topic"], e["queue_id"])], e["queue_offset"] + 1)
    assert ends == want
    assert any(f"{len(man['restarted_cq']) - len(live)} consumequeue entries" in n for n in info.notes)


def test_dump_of_a_restarted_store_is_not_damage(run_cli):
    """The older run's records after the live end are history, not damage: notes on stderr, exit 0."""
    from conftest import FIXTURES

    for jobs in ("1", "0"):
        code, out, err = run_cli("dump", "commitlog", FIXTURES / "litemq" / "restarted", "--json", "--jobs", jobs)
        assert code == 0 and out
        assert "overwritten-record" in err and "damaged" not in err
