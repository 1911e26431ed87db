"""verify on the real LiteMQ stores and on damaged / restarted copies of them built in tmp_path."""
from __future__ import annotations

import gzip
import json
import shutil
import struct

import pytest

from conftest import load_json, require_realdata
from mqtool.litemq.store import resolve
from mqtool.litemq.scan import walk
from mqtool.litemq.verify import run_verify
from mqtool.options import VerifyOptions


def _store(ds):
    return require_realdata("litemq", ds, "data", "broker")


def _verify(path, part="store"):
    it, summary_fn = run_verify(part, resolve(path), VerifyOptions())
    found = list(it)
    return found, summary_fn()


def _codes(found, severities=("error", "warning")):
    return {(f.severity, f.code) for f in found if f.severity in severities}


def _copy(tmp_path, ds="clean"):
    dst = tmp_path / ds
    shutil.copytree(_store(ds), dst)
    for p in dst.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    dst.chmod(0o755)
    return dst


def _records(path):
    return [x for x in walk(resolve(path)) if hasattr(x, "m")]


def test_clean_store_has_no_error_or_warning():
    found, s = _verify(_store("clean"))
    assert s.errors == 0 and s.warnings == 0 and s.verdict == "sound"
    infos = {f.code for f in found}
    # LiteMQ's own behaviour is reported, as info
    assert {"field-never-filled", "cron-double-entry", "tx-committed", "tx-no-entry", "no-cq-by-design",
            "checkpoint-count-quirk", "index-not-persisted", "tx-entry-at-commit"} <= infos
    assert s.messages == load_json(require_realdata("litemq", "clean", "expected.json"))["meta"]["messages_accepted"]


def test_crash_store_reports_only_the_crash():
    found, s = _verify(_store("crash"))
    # The crash (os.Exit right after the last write) leaves the abort file and no checkpoint; no damage.
    assert _codes(found) == {("warning", "unclean-shutdown")}
    assert ("info", "checkpoint-missing") in _codes(found, ("info",))
    assert s.errors == 0 and s.extra["unclean_shutdown"] is True
    exp = load_json(require_realdata("litemq", "crash", "expected.json"))
    assert s.extra["end_offset"] == exp["meta"]["commitlog_wrote_offset"]
    # pending + rolled-back transactions are reported as LiteMQ behaviour
    tx = [f for f in found if f.code == "tx-no-entry"]
    want = {m["commitlog_offset"] for m in exp["messages"]
            if m["accepted"] and m["type"] == "TRANSACTION" and not m["consumequeue"]}
    assert {f.offset for f in tx} == want


def test_cli_verdict(run_cli):
    code, out, err = run_cli("verify", "store", _store("crash"), "--json")
    summary = json.loads(out.splitlines()[-1])
    assert code == 0 and summary["verdict"] == "sound-with-warnings"


def _restart_copy(tmp_path, n_new=10):
    """clean/ restarted: newer records (crash/'s first n_new) written over the start of file 0."""
    dst = _copy(tmp_path, "clean")
    newer = _records(_store("crash"))[:n_new]
    end = newer[-1].position + newer[-1].size
    src0 = (_store("crash") / "commitlog" / "00000000000000000000").read_bytes()
    f0 = dst / "commitlog" / "00000000000000000000"
    data = bytearray(f0.read_bytes())
    data[:end] = src0[:end]
    f0.write_bytes(bytes(data))
    shutil.rmtree(dst / "consumequeue")      # the restarted broker rewrote them; out of scope here
    return dst, newer, end


def test_restart_overwrite_stale_records_carved_and_labelled(tmp_path, run_cli):
    dst, newer, end = _restart_copy(tmp_path)
    exp = load_json(require_realdata("litemq", "clean", "expected.json"))
    old = [m for m in exp["messages"] if m["accepted"] and m["commitlog_offset"] >= end]
    # the old record the new data ends inside is only partly there
    survivors = [m for m in old if not any(m2["commitlog_offset"] < end < m2["commitlog_offset"]
                                           + m2["store_size_incl_prefix"] for m2 in [m])]
    code, out, _ = run_cli("dump", "commitlog", dst, "--json")
    rows = [json.loads(x) for x in out.splitlines()]
    assert [r["msg_id"] for r in rows] == [r.m["MessageID"] for r in newer]
    code, out, _ = run_cli("dump", "commitlog", dst, "--json", "--include-stale")
    rows = [json.loads(x) for x in out.splitlines()]
    stale = [r for r in rows if r["stale"]]
    assert all(r["state"] == "stale" for r in stale)
    assert {(r["offset"], r["msg_id"]) for r in stale} == {(m["commitlog_offset"], m["message_id"])
                                                          for m in survivors}
    found, s = _verify(dst, "commitlog")
    assert s.errors == 0
    assert ("warning", "stale-records") in _codes(found)
    assert s.extra["stale_records"] == len(survivors) and s.extra["end_offset"] == end


def test_bad_magic_mid_file_is_damage_and_later_records_are_flagged(tmp_path):
    dst = _copy(tmp_path)
    recs = _records(dst)
    victim = [r for r in recs if r.file.endswith("00000000000000000001")][3]
    f = dst / "commitlog" / "00000000000000000001"
    data = bytearray(f.read_bytes())
    data[victim.position + 4:victim.position + 8] = b"XXXX"
    f.write_bytes(bytes(data))
    found, s = _verify(dst)
    assert ("error", "bad-magic") in _codes(found)
    assert ("error", "data-after-gap") in _codes(found)
    assert ("error", "cq-unreachable-record") in _codes(found)
    assert not any(f.severity == "warning" and "stale" in f.code for f in found)
    assert s.verdict == "damaged"


def test_field_checks_non_zero_values(tmp_path):
    dst = _copy(tmp_path)
    recs = _records(dst)
    f = dst / "commitlog" / "00000000000000000000"
    data = bytearray(f.read_bytes())
    good, bad = recs[1], recs[2]
    for rec, value in ((good, good.offset), (bad, bad.offset + 1)):
        tail = rec.position + 4 + rec.consumed - 52
        struct.pack_into(">q", data, tail + 12, value)     # CommitLogOffset
        struct.pack_into(">I", data, tail + 20, rec.size)  # StoreSize (correct)
    f.write_bytes(bytes(data))
    found, s = _verify(dst)
    mism = [x for x in found if x.code == "commitlog-offset-mismatch"]
    assert [(x.offset, x.expected, x.actual) for x in mism] == [(bad.offset, bad.offset, bad.offset + 1)]
    assert not [x for x in found if x.code == "store-size-mismatch"]


def test_cq_tag_hash_and_size_damage(tmp_path):
    dst = _copy(tmp_path)
    q = dst / "consumequeue" / "orders.v1" / "1" / "00000000000000000000"
    data = bytearray(q.read_bytes())
    struct.pack_into(">I", data, 12, 12345)            # entry 0 tag hash
    struct.pack_into(">i", data, 24 + 8, 7)            # entry 1 size
    q.write_bytes(bytes(data))
    found, s = _verify(dst, "consumequeue")
    assert _codes(found) == {("error", "cq-tag-hash-mismatch"), ("error", "cq-size-mismatch")}


@pytest.mark.parametrize("corrupt", [False, True])
def test_index_file_verified_against_records(tmp_path, corrupt):
    dst = _copy(tmp_path)
    gz = require_realdata("litemq", "clean", "extras", "index-20261122091857.gz")
    data = bytearray(gzip.decompress(gz.read_bytes()))
    if corrupt:
        struct.pack_into(">q", data, 40 + 4 * 5_000_000 + 4, 3)   # entry 0 phyOffset
    (dst / "index").mkdir(exist_ok=True)
    (dst / "index" / "20261122091857").write_bytes(bytes(data))
    found, s = _verify(dst, "index")
    if corrupt:
        assert _codes(found) == {("error", "index-dangling")}
    else:
        assert s.errors == 0 and s.warnings == 0


def test_restart_ending_on_an_old_record_boundary_is_flagged(tmp_path):
    """crash/'s first 7 records end at 1924, where clean/'s 9th record starts: LiteMQ's reader would run on."""
    dst, newer, end = _restart_copy(tmp_path, n_new=7)
    assert end == 1924
    found, s = _verify(dst, "commitlog")
    reg = [f for f in found if f.code == "store-time-regression"]
    assert len(reg) == 1 and reg[0].offset == 1924 and reg[0].severity == "warning"


def test_other_part_paths_verify_without_cross_checks():
    found, s = _verify(_store("clean") / "commitlog" / "00000000000000000002")
    assert s.errors == 0 and s.warnings == 0


def _gap_store(root):
    """One 8192-byte commitlog file of eight hand-laid records r0..r7 (records.encode_record, the schema's
    writer), three of them damaged: r2's length prefix (larger than the file: the live data ends there), r4's
    magic, r6's MessageID length (its fields run past the record). Returns (store, [(offset, size)] per record)."""
    from mqtool.litemq.records import encode_record, new_fields

    data, at = bytearray(), []
    for i in range(8):
        rec = encode_record(new_fields(MessageID=f"m{i}", Topic="t", Tags=["a"], Keys=[f"k{i}"],
                                       Body=bytes([97 + i]) * (20 + 7 * i), BornTimestamp=T0 + i,
                                       StoreTimestamp=T0 + i))
        at.append((len(data), len(rec)))
        data += rec
    r2, r4, r6 = at[2][0], at[4][0], at[6][0]
    data[r2:r2 + 4] = b"\x7f\xff\xff\xff"
    data[r4 + 4:r4 + 8] = b"\xde\xad\xbe\xef"
    data[r6 + 8:r6 + 10] = b"\xff\xff"            # after [u32 len][u32 magic]: the MessageID's u16 length
    (root / "commitlog").mkdir(parents=True)
    (root / "commitlog" / f"{0:020d}").write_bytes(bytes(data) + bytes(8192 - len(data)))
    return root, at


T0 = 1795000000000


def test_damaged_records_after_a_gap_are_delimited_by_the_valid_records_around_them(tmp_path):
    """After the damage that ends the live data, verify resyncs on each valid record (magic, length and fields
    agreeing) and reports every damaged record between them with its extent (as RocketMQ's verify reports a
    damaged unit up to the next valid one), not as unaccounted bytes; the valid ones are after-gap records."""
    from mqtool import causes

    store, at = _gap_store(tmp_path / "broker")
    found, s = _verify(store, "commitlog")
    found = causes.link(found)
    damaged = {f.offset: f for f in found if f.span is not None}
    assert sorted(damaged) == [at[2][0], at[4][0], at[6][0]]
    for i, code in ((2, "bad-length"), (4, "bad-magic"), (6, "field-overrun")):
        f = damaged[at[i][0]]
        assert (f.code, f.severity, f.span) == (code, "error", (at[i][0], at[i + 1][0])), i
        assert f.caused_by is None
    after = [f for f in found if f.code == "after-gap-record"]
    assert [f.offset for f in after] == [at[3][0], at[5][0], at[7][0]]
    assert {f.caused_by for f in after} == {damaged[at[2][0]].id}
    assert not [f for f in found if f.code == "unaccounted-bytes"]
    linked, summary = causes.linked(iter(found), lambda: s)
    list(linked)
    assert (summary().damaged_ranges, summary().damaged_bytes) == (3, at[2][1] + at[4][1] + at[6][1])


def test_the_carve_after_the_end_has_a_checking_budget(tmp_path, monkeypatch):
    """Crafted bytes after the end with a magic every 11 bytes, each claiming 2048 bytes: the carve checks
    candidates while the budget (mqtool.damage.CheckBudget: 8 x the bytes + a floor) lasts and counts the
    others, so the bytes its decodes may read stay linear in the file, not ~200 x."""
    from mqtool.litemq import records, scan

    size = 1 << 16
    cell = struct.pack(">I", 2048) + bytes.fromhex("4c4d5101") + b"\x00\x01a"
    body = (cell * (size // len(cell)))[:size - 16]
    (tmp_path / "b" / "commitlog").mkdir(parents=True)
    (tmp_path / "b" / "commitlog" / f"{0:020d}").write_bytes(bytes(16) + body)
    calls = []
    real = records.decode_message
    monkeypatch.setattr(scan, "decode_message", lambda buf, a, b: calls.append(b - a) or real(buf, a, b))
    monkeypatch.setattr(scan, "CARVE_BUDGET_FLOOR", 1 << 12)
    found, s = _verify(tmp_path / "b", "commitlog")
    assert len(calls) > 100 and sum(calls) <= 8 * size + (1 << 12) + 2048   # the budget, and one that overdraws it
    assert any("checking budget" in f.message for f in found)


from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_FIRST = None


def _first_file():
    global _FIRST
    if _FIRST is None:
        _FIRST = (_store("clean") / "commitlog" / "00000000000000000000").read_bytes()[:8192]
    return _FIRST


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 8191), st.integers(0, 255)), min_size=1, max_size=12))
def test_damaged_bytes_become_findings_never_exceptions(tmp_path_factory, flips):
    d = tmp_path_factory.mktemp("fuzz") / "broker"
    (d / "commitlog").mkdir(parents=True)
    (d / "checkpoint").mkdir()
    data = bytearray(_first_file())
    for pos, val in flips:
        data[pos] = val
    (d / "commitlog" / "00000000000000000000").write_bytes(bytes(data))
    found, s = _verify(d)
    assert s.messages >= 0
    recs = [x for x in walk(resolve(d)) if hasattr(x, "m")]
    assert all(r.position + r.size <= len(data) for r in recs)


def test_the_walk_yields_records_and_damage_events_only(tmp_path):
    """The walker's one event type for what it cannot read as records is mqtool.damage.Damage (as the RocketMQ
    and Kafka scans); verify, dump, query, rebuild-index and info make findings of them with damage_finding."""
    from mqtool.damage import Damage
    from mqtool.findings import Finding
    from mqtool.litemq.records import LiteRecord

    dst, _, _ = _restart_copy(tmp_path)                  # stale records, remnants, overwritten end
    f1 = dst / "commitlog" / "00000000000000000001"
    data = bytearray(f1.read_bytes())
    data[200:204] = b"\xff\xff\xff\xff"                   # damage inside a later file as well
    f1.write_bytes(bytes(data))
    items = list(walk(resolve(dst)))
    assert all(isinstance(x, (LiteRecord, Damage)) for x in items)
    damage = [x for x in items if isinstance(x, Damage)]
    assert {"stale-records", "overwritten-record"} <= {d.code for d in damage}
    found, _ = _verify(dst, "commitlog")
    assert not any(isinstance(x, Damage) for x in found) and all(isinstance(x, Finding) for x in found)


def test_every_damage_code_of_the_walk_is_a_registered_code_at_a_registered_severity():
    from mqtool.codes import REGISTRY
    from mqtool.damage import Damage
    from mqtool.litemq import scan

    for code in scan._SEVERITY:
        f = scan.damage_finding(Damage("f", 0, 100, 4, code, "m"))
        assert f.code in REGISTRY and f.severity in REGISTRY[f.code].severities, code
    # docs/litemq.md: unaccounted-bytes is a warning, or info when they are remnants of carved older records
    assert scan.damage_finding(Damage("f", 0, 0, 9, "unaccounted-bytes", "m")).severity == "warning"
    remnant = scan.damage_finding(Damage("f", 0, 0, 9, "remnants", "m"))
    assert (remnant.code, remnant.severity, remnant.span) == ("unaccounted-bytes", "info", None)
    # a missing file: the finding points at the file after the gap, its span is the missing bytes
    gap = scan.damage_finding(Damage("f", None, 1000, 3000, "segment-missing", "m", 1, 4))
    assert (gap.offset, gap.span, gap.severity) == (4000, (1000, 4000), "error")
