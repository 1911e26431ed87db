"""Findings an operator can act on: the code registry and `mqtool explain`, root causes (id / caused_by) on
damage made here, the compact terminal view, one set of summary numbers, option validation."""
from __future__ import annotations

import ast
import json
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT

from mqtool import render
from mqtool.codes import CLASSES, REGISTRY, SEVERITY_NAMES
from mqtool.findings import ERROR, Finding


def _ndjson(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


# ---- the registry --------------------------------------------------------------------------------------

def test_every_registered_code_is_explained():
    assert len(REGISTRY) > 200
    for c in REGISTRY.values():
        assert c.meaning and len(c.meaning) > 10, c.code
        assert c.klass in CLASSES and c.causes and c.action
        assert c.families and set(c.severities) <= set(SEVERITY_NAMES.values())
        assert c.code.startswith("kafka.") == (c.families == ("kafka",)), c.code


def _emitted_literals():
    """(code, file, line) of every string literal passed as the code of Finding(...) or of the families'
    finding helpers (ctx.f, self._f, rebuild's f), with the Kafka helpers' prefixes applied."""
    out = []
    for p in sorted((ROOT / "mqtool").rglob("*.py")):
        tree = ast.parse(p.read_text(encoding="utf-8"))
        for n in ast.walk(tree):
            if not isinstance(n, ast.Call) or len(n.args) < 2:
                continue
            fn = n.func
            name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", None)
            if name == "_note" and "rebuild" in (p.stem, p.parent.name) and isinstance(n.args[0], ast.Constant):
                out.append((n.args[0].value, p.relative_to(ROOT), n.lineno))     # RocketMQ rebuild's notes
                continue
            a = n.args[1]
            if name not in ("Finding", "f", "_f") or not (isinstance(a, ast.Constant) and isinstance(a.value, str)):
                continue
            code = a.value
            if "kafka" in p.parts and name != "Finding":
                code = ("kafka.rebuild-" if p.parent.name == "rebuild" else "kafka.") + code
            out.append((code, p.relative_to(ROOT), n.lineno))
    return out


def test_every_code_literal_in_the_source_is_registered():
    found = _emitted_literals()
    assert len(found) > 150
    missing = [x for x in found if x[0] not in REGISTRY]
    assert missing == []


def test_an_unregistered_code_fails_under_tests():
    # conftest sets MQTOOL_CHECK_CODES: each Finding checks its code and severity at construction
    with pytest.raises(AssertionError, match="not registered"):
        Finding(ERROR, "no-such-code-anywhere", None, None, None, "x")
    with pytest.raises(AssertionError, match="registered as"):
        Finding("info", "crc-mismatch", None, None, None, "x")     # an error, registered only as one


def test_docs_code_tables_are_generated_from_the_registry():
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_code_docs.py"), "--check"], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    text = (ROOT / "docs" / "codes.md").read_text(encoding="utf-8")
    for code in REGISTRY:
        assert f"| `{code}` |" in text


def test_explain(run_cli):
    code, out, _ = run_cli("explain", "index-bad-chain")
    assert code == 0
    assert "index-bad-chain" in out and "litemq" in out and "error" in out and "next" in out
    assert all(len(line) <= 80 for line in out.splitlines())
    code, out, _ = run_cli("explain", "segment-gap", "--json")       # Kafka code without its prefix
    d, = _ndjson(out)
    assert d["code"] == "kafka.segment-gap" and d["families"] == ["kafka"] and d["action"]
    code, _, err = run_cli("explain", "no-such-thing")
    assert code == 2 and "unknown finding code" in err
    code, out, _ = run_cli("explain", "--list", "--json")
    rows = _ndjson(out)
    assert code == 0 and len(rows) == len(REGISTRY) == len({r["code"] for r in rows})
    assert run_cli("explain")[0] == 2
    code, out, _ = run_cli("explain", "--list")
    lines = out.splitlines()
    assert code == 0 and len(lines) == len(REGISTRY) and all(len(line) <= 80 for line in lines)


# ---- root causes on damage made here ------------------------------------------------------------------

CQ_UNIT = struct.Struct(">qiq")


def _rocketmq_truncated(tmp_path) -> tuple[Path, int, int]:
    """The fixture store with its second segment cut from 4096 to 2000 bytes: bytes [base + 2000, base + 4096)
    are gone (known root)."""
    store = tmp_path / "store"
    shutil.copytree(FIXTURES / "rocketmq" / "store", store)
    seg = store / "commitlog" / "00000000000000004096"
    with open(seg, "r+b") as f:
        f.truncate(2000)
    return store, 4096 + 2000, 8192


def test_truncated_segment_is_one_root_with_its_consequences(run_cli, tmp_path):
    store, lost_from, lost_to = _rocketmq_truncated(tmp_path)
    code, out, _ = run_cli("verify", "store", store, "--json")
    rows = _ndjson(out)
    findings = [r for r in rows if r["kind"] == "finding"]
    summary = rows[-1]
    assert code == 1 and summary["kind"] == "summary"
    ids = [f["id"] for f in findings]
    assert len(set(ids)) == len(ids) and all(ids)
    # nothing dropped: the severity counts of the summary cover every line
    assert len(findings) == summary["errors"] + summary["warnings"] + summary["infos"]
    by_id = {f["id"]: f for f in findings}
    roots = [f for f in findings if f["severity"] == "error" and f["caused_by"] is None]
    assert len(roots) == 1, roots
    root = roots[0]
    assert root["file"].endswith("commitlog/00000000000000004096")
    # every consume-queue unit pointing at the lost bytes (read here from the queue files themselves)
    lost_units = set()
    for q in sorted((store / "consumequeue").rglob("*")):
        if q.is_file():
            data = q.read_bytes()
            for pos in range(0, len(data) - 19, 20):
                off, size, _ = CQ_UNIT.unpack_from(data, pos)
                if size > 0 and lost_from <= off < lost_to:
                    lost_units.add((q.name, pos))
    assert lost_units
    cq = {(Path(f["file"]).name, f["position"]): f for f in findings if f["code"].startswith("cq-")}
    for key in lost_units:
        assert cq[key]["caused_by"] == root["id"], key
    for f in findings:
        if f["caused_by"]:
            assert by_id[f["caused_by"]]["caused_by"] is None          # a consequence names a root
    assert summary["consequences"] == sum(1 for f in findings if f["caused_by"])
    # the damaged bytes: the lost tail of the segment (the reader skipped part of it too)
    assert summary["damaged_ranges"] == 1 and summary["damaged_bytes"] >= lost_to - lost_from


def test_litemq_bad_length_is_the_root_of_what_follows(run_cli, tmp_path):
    store = tmp_path / "store"
    shutil.copytree(FIXTURES / "litemq" / "store", store)
    seg = store / "commitlog" / "00000000000000000000"
    with open(seg, "r+b") as f:            # the first record's length prefix: larger than the file
        f.write(b"\x7f\xff\xff\xff")
    code, out, _ = run_cli("verify", "store", store, "--json")
    findings = [r for r in _ndjson(out) if r["kind"] == "finding"]
    errors = [f for f in findings if f["severity"] == "error"]
    roots = [f for f in errors if f["caused_by"] is None]
    assert code == 1 and len(roots) == 1 and len(errors) > 3
    assert roots[0]["code"] == "bad-length" and roots[0]["position"] == 0
    assert roots[0]["file"].endswith("00000000000000000000")
    assert {f["caused_by"] for f in errors if f is not roots[0]} == {roots[0]["id"]}


def test_kafka_index_findings_follow_from_the_damaged_log(run_cli, tmp_path):
    logdir = tmp_path / "logdir"
    shutil.copytree(FIXTURES / "kafka" / "logdir", logdir)
    log = logdir / "fixture-0" / "00000000000000000000.log"
    data = bytearray(log.read_bytes())
    data[40:60] = b"\xee" * 20                 # inside the first entry: its CRC and the walk break there
    log.write_bytes(bytes(data))
    code, out, _ = run_cli("verify", "store", logdir, "--json")
    findings = [r for r in _ndjson(out) if r["kind"] == "finding"]
    roots = [f for f in findings if f["severity"] == "error" and f["caused_by"] is None]
    assert code == 1 and roots and all(f["file"].endswith(".log") for f in roots)
    for f in findings:
        if f["file"] and f["file"].endswith((".index", ".timeindex")) and f["severity"] == "error":
            assert f["caused_by"] == roots[0]["id"]



def test_queue_units_dangle_because_the_rocketmq_commitlog_is_empty(run_cli, tmp_path):
    """No commitlog segment left (``commitlog-empty``, a root with no span): every consume-queue unit (read from
    the queue files here) is a ``cq-dangling`` that names it as the cause; no damaged bytes are counted."""
    store = tmp_path / "store"
    shutil.copytree(FIXTURES / "rocketmq" / "store", store)
    for seg in (store / "commitlog").iterdir():
        seg.unlink()
    units = set()
    for q in sorted((store / "consumequeue").rglob("*")):
        if q.is_file():
            data = q.read_bytes()
            units |= {(str(q), pos) for pos in range(0, len(data) - 19, 20) if CQ_UNIT.unpack_from(data, pos)[1] > 0}
    code, out, _ = run_cli("verify", "store", store, "--json")
    rows = _ndjson(out)
    findings = [r for r in rows if r["kind"] == "finding"]
    roots = [f for f in findings if f["code"] == "commitlog-empty"]
    assert code == 1 and len(roots) == 1 and roots[0]["caused_by"] is None and roots[0]["severity"] == "warning"
    dangling = {(f["file"], f["position"]): f["caused_by"] for f in findings if f["code"] == "cq-dangling"}
    assert units and set(dangling) == units
    assert set(dangling.values()) == {roots[0]["id"]}
    assert rows[-1]["consequences"] == len(units) and rows[-1]["damaged_bytes"] == 0


@pytest.mark.parametrize("gone", ["segments", "directory"])
def test_litemq_queue_entries_follow_from_a_missing_commitlog(run_cli, tmp_path, gone):
    store = tmp_path / "store"
    shutil.copytree(FIXTURES / "litemq" / "store", store)
    if gone == "directory":
        shutil.rmtree(store / "commitlog")
    else:
        for seg in (store / "commitlog").iterdir():
            seg.unlink()
    code, out, _ = run_cli("verify", "store", store, "--json")
    findings = [r for r in _ndjson(out) if r["kind"] == "finding"]
    roots = [f for f in findings if f["code"] == ("no-commitlog" if gone == "directory" else "commitlog-empty")]
    assert code == 1 and len(roots) == 1
    queue = [f for f in findings if f["severity"] == "error" and "consumequeue" in Path(f["file"] or "").parts]
    assert queue and {f["caused_by"] for f in queue} == {roots[0]["id"]}


# ---- the terminal ---------------------------------------------------------------------------------------

@pytest.fixture
def tty(monkeypatch):
    monkeypatch.setattr(render, "stdout_is_tty", lambda: True)


def test_compact_view_shows_roots_with_their_consequences(run_cli, tmp_path, tty):
    store, _, _ = _rocketmq_truncated(tmp_path)
    code, out, _ = run_cli("--no-color", "-q", "verify", "store", store)
    assert code == 1
    first = out.splitlines()[0]
    assert first.startswith("commitlog/00000000000000004096:0: error[segment-size]")
    assert "consequences)" in out and "--all-findings" in out
    assert "cq-dangling" not in out                      # consequences are counted, not listed
    flat = " ".join(out.split())                         # the summary line wraps at the terminal's width
    assert "verdict: damaged" in flat and "rocketmq /" in flat
    code, out_all, _ = run_cli("--no-color", "-q", "verify", "store", store, "--all-findings")
    assert "    consumequeue/" in out_all and "cq-dangling" in out_all
    code, out_table, _ = run_cli("--no-color", "-q", "verify", "store", store, "--table")
    assert "Findings by code" in out_table and "cq-dangling" in out_table


# ---- one set of numbers ---------------------------------------------------------------------------------

COMMON_SUMMARY = {"kind", "store", "family", "verdict", "errors", "warnings", "infos", "consequences", "messages",
                  "damaged_ranges", "damaged_bytes"}



@pytest.mark.parametrize("limit", [None, 7], ids=["in-memory", "spilled"])
def test_compact_lines_print_as_one_print_per_line(limit):
    """The compact view prints its lines in groups (one rich ``print`` for hundreds of lines); what it prints is
    what one ``print`` per line gives, colours and wrapping included. The same when the findings it orders are
    kept on disk (:class:`KeptFindings` past its memory limit)."""
    import io
    from collections import Counter

    from rich.console import Console

    from mqtool.findings import KeptFindings

    found = [Finding(*((ERROR, "crc-mismatch") if i % 3 else ("warning", "missing-blank")),
                     f"/s/commitlog/{i // 700:020d}", i * 10, i * 10,
                     f"body CRC mismatch ({'long words ' * (i % 9)}queue offset {i})", id=f"F{i + 1}",
                     caused_by=None if i % 400 == 0 else f"F{i // 400 * 400 + 1}") for i in range(1300)]
    consequences = Counter(f.caused_by for f in found if f.caused_by)
    for width, color in ((80, None), (132, "truecolor")):
        want, got = io.StringIO(), io.StringIO()
        con = Console(file=got, width=width, color_system=color, force_terminal=color is not None)
        with KeptFindings(lambda sev: sev != "error", limit).extend(found) as kept:
            assert len(kept.mem) <= (limit or len(found))
            render._findings_compact(con, kept, consequences, True, "/s")
        one = Console(file=want, width=width, color_system=color, force_terminal=color is not None)
        for r in sorted((f for f in found if f.caused_by is None), key=lambda f: f.severity != "error"):
            one.print(render.finding_line(r, consequences[r.id], "/s"))
            for c in (f for f in found if f.caused_by == r.id):
                line = render.finding_line(c, store="/s", follows=False)
                line.pad_left(4)
                one.print(line)
        out = got.getvalue()
        assert out == want.getvalue() and out.count("[crc-mismatch]") + out.count("[missing-blank]") == 1300


@pytest.mark.parametrize("family,store", [("rocketmq", "rocketmq/store"), ("litemq", "litemq/store"),
                                          ("kafka", "kafka/logdir")])
def test_summary_names_store_and_family_with_common_fields(run_cli, family, store):
    _, out, _ = run_cli("verify", "store", FIXTURES / store, "--json")
    s = _ndjson(out)[-1]
    assert COMMON_SUMMARY <= set(s) and s["family"] == family and s["store"] == str(FIXTURES / store)


def test_kafka_messages_are_records_in_verify_and_info(run_cli):
    # fixtures/build_kafka.py writes 1 legacy message + v2 batches of 3, 3, 2 and 2 records, and one
    # ABORT marker (a control record: no message)
    expected = 1 + 3 + 3 + 2 + 2
    logdir = FIXTURES / "kafka" / "logdir"
    for args in ((), ("--deep",)):
        s = _ndjson(run_cli("verify", "store", logdir, "--json", *args)[1])[-1]
        assert s["messages"] == expected and s["batches"] == 6
    info = json.loads(run_cli("info", logdir, "--json")[1])
    assert info["messages"] == expected


def test_multi_store_run_ends_with_a_total(run_cli, tmp_path):
    store, _, _ = _rocketmq_truncated(tmp_path)
    code, out, _ = run_cli("verify", "store", store, FIXTURES / "rocketmq" / "store", "--json")
    rows = _ndjson(out)
    sums = [r for r in rows if r["kind"] == "summary"]
    total = rows[-1]
    assert code == 1 and total["kind"] == "total" and total["stores"] == 2 and total["damaged_stores"] == 1
    assert total["errors"] == sum(s["errors"] for s in sums) and total["messages"] == sum(s["messages"] for s in sums)
    ids = [r["id"] for r in rows if r["kind"] == "finding"]
    assert len(ids) == len(set(ids))


# ---- option values ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("args", [
    ("verify", "store", "{store}", "--max-message-size", "-1"),
    ("verify", "store", "{store}", "--max-message-size", "0"),
    ("info", "{store}", "--max-buckets", "0"),
    ("info", "{store}", "--max-buckets", "-5"),
    ("report", "{store}", "-o", "{tmp}/r.html", "--max-message-size", "-1"),
    ("rebuild-index", "{store}", "--compare", "--cq-file-size", "0"),
    ("query", "{store}", "--topic", "Orders", "--queue", "0", "--queue-offset", "0", "--count", "0"),
    ("dump", "commitlog", "{store}", "--limit", "-3"),
])
def test_nonsense_option_values_are_usage_errors(run_cli, tmp_path, args):
    store = FIXTURES / "rocketmq" / "store"
    code, _, err = run_cli(*[a.format(store=store, tmp=tmp_path) for a in args])
    assert code == 2 and "Invalid value" in err


def test_a_bad_hash_slot_is_named_as_the_root(run_cli, tmp_path):
    store = tmp_path / "store"
    shutil.copytree(FIXTURES / "rocketmq" / "store", store)
    idx, = (store / "index").iterdir()
    data = bytearray(idx.read_bytes())
    header = 40                                   # IndexHeader, then 4-byte slots
    heads = [(i, v) for i in range(500) if (v := struct.unpack_from(">i", data, header + 4 * i)[0])]
    (slot, _), (_, other_head) = heads[0], heads[1]
    struct.pack_into(">i", data, header + 4 * slot, other_head)        # slot now leads into another chain
    idx.write_bytes(bytes(data))
    code, out, _ = run_cli("verify", "index", store, "--json")
    findings = [r for r in _ndjson(out) if r["kind"] == "finding"]
    roots = [f for f in findings if f["severity"] == "error" and f["caused_by"] is None]
    assert code == 1 and len(roots) == 1
    assert roots[0]["code"] == "index-bad-slot" and roots[0]["position"] == header + 4 * slot
    wrong = [f for f in findings if f["code"] == "index-wrong-slot"]
    assert wrong and all(f["caused_by"] == roots[0]["id"] for f in wrong)


# ---- severity review: an impossible born time ---------------------------------------------------------------

def test_a_1970_born_time_is_a_warning_on_both_lanes(run_cli, tmp_path, lane_impl):
    store = tmp_path / "store"
    shutil.copytree(FIXTURES / "rocketmq" / "store", store)
    seg = store / "commitlog" / "00000000000000000000"
    data = bytearray(seg.read_bytes())
    # message v1: TOTALSIZE, MAGICCODE, BODYCRC, QUEUEID, FLAG (4 bytes each), QUEUEOFFSET, PHYSICALOFFSET (8),
    # SYSFLAG (4), then BORNTIMESTAMP (8) at byte 40; the body CRC does not cover it
    assert struct.unpack_from(">q", data, 40)[0] > 1_700_000_000_000
    struct.pack_into(">q", data, 40, 0)
    seg.write_bytes(bytes(data))
    _, out, _ = run_cli("verify", "commitlog", store, "--json")
    rows = _ndjson(out)
    born = [r for r in rows if r["kind"] == "finding" and r["code"] == "born-timestamp-implausible"]
    assert len(born) == 1 and born[0]["severity"] == "warning" and born[0]["position"] == 0 and born[0]["actual"] == 0
    assert rows[-1]["warnings"] >= 1
    # the first message is still counted and read
    assert rows[-1]["messages"] == _ndjson(run_cli("verify", "commitlog", FIXTURES / "rocketmq" / "store",
                                                   "--json")[1])[-1]["messages"]


def test_born_time_window():
    from mqtool.findings import born_plausible

    day = 86_400_000
    stored = 1_795_338_600_357            # 2026-11-22
    assert born_plausible(stored - 3 * day, stored)                 # a retry days later
    assert born_plausible(stored + 3_600_000, stored)               # clocks an hour apart
    assert not born_plausible(0, stored)                            # 1970
    assert not born_plausible(stored + 2 * day, stored)             # born far after stored


def test_export_counts_kafka_messages_as_records(run_cli, tmp_path):
    """A Kafka row of the dataset is a batch: the summary said "11 messages (6 rows)" as if messages were
    written; it says batches and the records they hold, and --json gives both (messages keeps its meaning)."""
    pytest.importorskip("pyarrow")
    code, out, err = run_cli("export", FIXTURES / "kafka" / "logdir", "--to", tmp_path / "out", "--json")
    # 11 records (see test_kafka_messages_are_records_in_verify_and_info) in 6 batch rows
    assert code == 0 and "exported 6 Kafka batches of 11 records (6 rows) from 1 store(s)" in err, err
    row = json.loads(out)
    assert (row["kind"], row["rows"], row["batches"], row["records"], row["messages"]) == ("export", 6, 6, 11, 11)
    # with a RocketMQ store (51 messages, one row each: 30 + 3 + 6 + 12 in fixtures/build_rocketmq.py _messages)
    code, out, err = run_cli("export", FIXTURES / "kafka" / "logdir", FIXTURES / "rocketmq" / "store", "--to",
                             tmp_path / "both", "--json")
    assert code == 0 and "exported 51 messages and 6 Kafka batches of 11 records (57 rows)" in err, err
    assert {k: json.loads(out)[k] for k in ("rows", "messages", "batches", "records")} == \
        {"rows": 57, "messages": 62, "batches": 6, "records": 11}


# ---- one count of damage: spans that touch are one ------------------------------------------------------

#: spans given to DamageSpans, and the merged ranges they are (worked out by hand: [20, 30) bridges the first
#: two, [30, 31) adjoins; [50, 60) and [70, 80) stay apart; [100, 200) swallows the three inside it)
_SPANS = [(0, 10), (25, 40), (10, 25), (40, 41), (50, 60), (70, 80),
          (120, 130), (140, 150), (160, 170), (100, 200)]
_MERGED = [(0, 41), (50, 60), (70, 80), (100, 200)]


@pytest.mark.parametrize("seed", range(40))
def test_damage_spans_merge_whatever_the_order(seed):
    """A span that bridges two or more spans makes them one (it used to join only one neighbour, leaving the
    others overlapping and counted twice)."""
    import itertools
    import random

    from mqtool.causes import DamageSpans

    orders = [_SPANS, _SPANS[::-1]] + [random.Random(seed).sample(_SPANS, len(_SPANS))]
    if seed == 0:
        orders += [list(p) for p in itertools.permutations(_SPANS[:4])]
    for order in orders:
        sp = DamageSpans()
        for n, (a, b) in enumerate(order):
            sp.join(a, b, n)
        want = _MERGED if len(order) == len(_SPANS) else [(0, 41)]
        assert [(s, e) for s, e, _ in sp.roots] == want, order
        assert sp.starts == [s for s, _ in want]
        assert sp.totals() == (len(want), sum(e - s for s, e in want))
        # the one span an offset finds is the merged one
        assert all(sp.find(s)[:2] == [s, e] and sp.find(e - 1)[:2] == [s, e] for s, e in want)


def test_a_bridging_span_is_one_damage_in_verify_and_info():
    """Three roots, the third bridging the first two: verify's summary and ``info`` count one damaged range
    of 30 bytes, and info keeps one damage entry (named by the first range)."""
    from mqtool.causes import Linker
    from mqtool.info import InfoBuilder

    spans = [(1000, 1010), (1020, 1030), (1005, 1025)]
    lk = Linker()
    out = list(lk.link(Finding(ERROR, "crc-mismatch", "seg", a, a, "x", span=(a, b))
                       for a, b in spans))
    assert [f.caused_by for f in out] == [None, None, out[0].id]
    assert lk.damage() == (1, 30)
    b = InfoBuilder("rocketmq", "store")
    for a, e in spans:
        b.add_damage("seg", a, a, e - a, "crc-mismatch", "x")
    info = b.finish()
    assert (info.damage_total, info.damaged_bytes) == (1, 30)
    assert [(d.offset, d.length) for d in info.damage] == [(1000, 30)]
