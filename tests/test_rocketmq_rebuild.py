"""rebuild-index for RocketMQ: dispatch rules, the consumequeue/index state machines, and the real stores.

Expected values come from the broker's own files under ``shared/realdata/rocketmq`` (byte-identical checks),
their ``expected.json`` / MANIFEST, hand-computed bytes (``struct`` formats written from the reference tables,
not from our schemas), well-known Java ``hashCode`` values, and ``formats.common.java_string_hash`` as a second
implementation of the hash.
"""
from __future__ import annotations

import hashlib
import json
import shutil
import struct
from datetime import datetime, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from builders import rocketmq_unit
from formats.common import java_string_hash
from mqtool.rocketmq import dispatch as D
from mqtool.rocketmq.rebuild import IndexBuilder, QueueBuilder, human_time
from tests.conftest import flush_log, require_realdata

CLEAN = ["gen-4.9.7-clean", "gen-5.1.4-clean"]
KILL = ["gen-4.9.7-kill", "gen-5.1.4-kill"]
# MANIFEST: mappedFileSizeConsumeQueue=800, maxHashSlotNum=100, maxIndexNum=400
SIZES = ["--cq-file-size", "800", "--max-hash-slots", "100", "--max-index-num", "400"]
UNIT = struct.Struct(">qiq")            # reference §4.1: long offset, int size, long tagsCode
ENTRY = struct.Struct(">iqii")          # reference §6.1: int keyHash, long phyOffset, int timeDiff, int prev
HEADER = struct.Struct(">qqqqii")       # reference §6.1 header


def _ndjson(out: str) -> tuple[list[dict], dict]:
    """(findings without the compare-summary info, summary)."""
    rows = [json.loads(line) for line in out.splitlines() if line.strip()]
    return ([r for r in rows if r["kind"] == "finding" and r["code"] != "compare-summary"],
            next(r for r in rows if r["kind"] == "summary"))


def _tree_hashes(root: Path) -> dict[str, str]:
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _copy_store(name: str, tmp_path: Path) -> Path:
    src = require_realdata("rocketmq", name, "store")
    dst = tmp_path / name / "store"
    shutil.copytree(src, dst)
    for p in dst.rglob("*"):
        if p.is_file():
            p.chmod(0o644)
    return dst


@pytest.fixture(params=["in-memory", "spilled"])
def index_spill(request, monkeypatch):
    """Run a compare test twice: index entries kept in memory, and moved to scratch files after every three
    entries with comparisons in chunks of three entries (the bounded-memory paths of IndexFileBuilder)."""
    if request.param == "spilled":
        from mqtool.rocketmq import rebuild as R
        from mqtool.rocketmq.rebuild import index as RI

        monkeypatch.setattr(R.IndexFileBuilder, "SPILL_BYTES", 3 * 20)
        monkeypatch.setattr(RI, "_CMP_ENTRIES", 3)
    return request.param


# ---- dispatch rules -------------------------------------------------------------------------------

@settings(max_examples=300, deadline=None)
@given(st.text(max_size=80))
def test_fast_java_hash_equals_reference_hash(s):
    assert D.java_hash(s) == java_string_hash(s)
    ref = abs(java_string_hash(s))
    ref = 0 if ref >= 2 ** 31 else ref
    assert D.index_key_hash(s) == ref
    assert D.index_key_hashes([s, "T#" + s, s]) == [ref, D.index_key_hash("T#" + s), ref]   # cached heads too


_PROP_TOKENS = st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "INNER_MULTI_DISPATCH", "a", "x y", "", "\x01", "\x02"])


@settings(max_examples=400, deadline=None)
@given(st.lists(_PROP_TOKENS, max_size=12).map("".join))
def test_property_fast_paths_agree_with_the_schema_parser(text):
    from formats.rocketmq import string_to_property_pairs

    ref = dict(string_to_property_pairs(text))
    assert D.props_dict(text) == ref
    q = D.quick_props(text)
    if q is not None:
        assert q == (ref.get("TAGS"), ref.get("KEYS"), ref.get("UNIQ_KEY"))
    else:
        segs = text.split("\x02")
        assert any(seg.startswith("INNER_MULTI_DISPATCH\x01") for seg in segs) \
            or any(seg in ("TAGS\x01", "KEYS\x01", "UNIQ_KEY\x01") for seg in segs)


def test_java_hash_known_values():
    # Well-known Java String.hashCode values
    assert D.java_hash("") == 0
    assert D.java_hash("hello") == 99162322
    assert D.java_hash("Aa") == D.java_hash("BB") == 2112
    assert D.java_hash("polygenelubricants") == -2 ** 31      # Integer.MIN_VALUE
    assert D.index_key_hash("polygenelubricants") == 0         # abs(MIN_VALUE) is negative -> 0
    assert D.index_key_hash("Aa") == 2112
    neg = next(s for s in ("TagA0", "TopicA#orderA-1", "abcdefghij", "zzzzzzzz") if D.java_hash(s) < 0)
    assert D.index_key_hash(neg) == -D.java_hash(neg)


def test_delay_levels_and_deliver_time():
    lv = D.parse_delay_levels(None)
    assert len(lv) == 18 and lv[1] == 1000 and lv[2] == 5000 and lv[5] == 60_000 and lv[18] == 7_200_000
    assert D.parse_delay_levels("1s 2m 3h 1d") == {1: 1000, 2: 120_000, 3: 10_800_000, 4: 86_400_000}
    rules = D.DispatchRules(delay_levels=D.parse_delay_levels("1s 5s 10s"))
    sched = "SCHEDULE_TOPIC_XXXX"
    assert D.cq_tags_code(rules, sched, {"DELAY": "2", "TAGS": "x"}, 1_000_000) == 1_005_000
    assert D.cq_tags_code(rules, sched, {"DELAY": "9"}, 1_000_000) == 1_010_000    # clamped to max level 3
    assert D.cq_tags_code(rules, sched, {"DELAY": "0", "TAGS": "Aa"}, 5) == 2112     # level 0: plain tags hash
    assert D.cq_tags_code(rules, "TopicA", {"DELAY": "2", "TAGS": "Aa"}, 5) == 2112  # other topics: tags
    assert D.cq_tags_code(rules, "TopicA", {}, 5) == 0


def test_multi_dispatch_rules():
    r = D.DispatchRules()
    props = {"INNER_MULTI_DISPATCH": "%LMQ%a,%LMQ%b", "INNER_MULTI_QUEUE_OFFSET": "4,7"}
    assert D.multi_dispatch_targets(r, "TopicA", 3, props) == [("%LMQ%a", 0, 4), ("%LMQ%b", 0, 7)]
    assert D.multi_dispatch_targets(r, "TopicA", 3, {"INNER_MULTI_DISPATCH": "plain",
                                                     "INNER_MULTI_QUEUE_OFFSET": "2"}) == [("plain", 3, 2)]
    assert D.multi_dispatch_targets(r, "%RETRY%g", 0, props) == []
    assert D.multi_dispatch_targets(r, "SCHEDULE_TOPIC_XXXX", 0, props) == []
    assert D.multi_dispatch_targets(r, "TopicA", 0, {**props, "INNER_MULTI_QUEUE_OFFSET": "4"}) == []
    assert D.multi_dispatch_targets(r, "TopicA", 0, {"INNER_MULTI_DISPATCH": "%LMQ%a/../x,%LMQ%b",
                                                     "INNER_MULTI_QUEUE_OFFSET": "1,2"}) == [("%LMQ%b", 0, 2)]
    with pytest.raises(D.MultiDispatchError):
        D.multi_dispatch_targets(r, "TopicA", 0, {**props, "INNER_MULTI_QUEUE_OFFSET": "4,x"})
    assert D.multi_dispatch_targets(D.DispatchRules(multi_dispatch=False), "TopicA", 0, props) == []


def test_index_keys_order_and_split():
    props = {"UNIQ_KEY": "U1", "KEYS": "k1  k2 "}
    assert D.index_keys("T", props) == ["T#U1", "T#k1", "T#k2"]
    assert D.index_keys("T", {}) == []
    assert D.gets_cq_unit(0x0) and D.gets_cq_unit(0x8) and not D.gets_cq_unit(0x4) and not D.gets_cq_unit(0xC)
    assert D.gets_index(0x4) and not D.gets_index(0xC)
    assert D.cq_file_size(None) == 6_000_000 and D.cq_file_size(801) == 820 and D.cq_file_size(800) == 800


# ---- consumequeue state machine (hand-computed bytes) ---------------------------------------------

def _qb(file_units=5):
    out = []
    qb = QueueBuilder("T", 0, file_units * 20, lambda q, base, data, last: out.append((base, data, last)))
    return qb, out


def test_cq_rollover_and_naming():
    qb, out = _qb()
    for i in range(7):
        qb.put(100 * i, 50, i, i)
    qb.finish()
    assert [(b, len(d) // 20, last) for b, d, last in out] == [(0, 5, False), (100, 2, True)]
    assert out[0][1] == b"".join(UNIT.pack(100 * i, 50, i) for i in range(5))
    assert out[1][1] == UNIT.pack(500, 50, 5) + UNIT.pack(600, 50, 6)


def test_cq_fill_pre_blank_for_queue_starting_above_zero():
    qb, out = _qb()
    qb.put(1000, 10, 7, 7)          # 7*20 = 140 -> file 100, blank units for positions 0 and 20
    qb.finish()
    (base, data, _), = out
    blank = UNIT.pack(0, 0x7FFFFFFF, 0)
    assert base == 100 and data == blank + blank + UNIT.pack(1000, 10, 7)


def test_cq_skip_rules_and_gap():
    qb, out = _qb(10)
    qb.put(0, 10, 0, 0)
    qb.put(5, 5, 0, 1)              # offset+size <= maxPhysicOffset: skipped
    qb.put(10, 10, 0, 0)            # behind the write position (cqOffset 0 never checks) -> written at 1
    qb.put(20, 10, 0, 1)            # expect 20 < current 40: "repeatedly", skipped
    qb.put(30, 10, 0, 5)            # ahead: appended at the write position 2 anyway
    qb.finish()
    data = out[0][1]
    assert data == UNIT.pack(0, 10, 0) + UNIT.pack(10, 10, 0) + UNIT.pack(30, 10, 0)
    assert sorted(n.code for n in qb.findings()) == ["cq-offset-gap", "cq-put-repeated", "cq-put-skipped"]


def test_cq_end_past_a_java_long_wraps_as_the_broker_computes_it():
    """offset + size is a Java long in ConsumeQueue.putMessagePositionInfo: a hostile PHYSICALOFFSET near
    2^63 wraps negative, so the unit ends "at or below maxPhysicOffset" and is skipped (it used to stop the
    rebuild with an OverflowError in the compiled lane's queue state). A later message is written as usual."""
    qb, out = _qb(10)
    top = (1 << 63) - 5
    qb.put(0, 10, 0, 0)
    qb.put(top, 10, 0, 1)           # top + 10 wraps to -2^63 + 4: <= 10, skipped
    qb.put(10, 10, 0, 1)
    qb.finish()
    assert out[0][1] == UNIT.pack(0, 10, 0) + UNIT.pack(10, 10, 0)
    assert [n.code for n in qb.findings()] == ["cq-put-skipped"] and qb.max_phys == 20


def test_rebuild_with_a_physical_offset_near_a_java_long_limit(run_cli, tmp_path):
    """The CLI over the fixture store with one message's PHYSICALOFFSET set to 2^63 - 5: no traceback, the
    same output with the compiled helpers on and off, and that message's unit not in its queue."""
    import os

    store = _copy_store_fixture(tmp_path)
    seg = sorted((store / "commitlog").iterdir())[0]
    data = bytearray(seg.read_bytes())
    size = int.from_bytes(data[:4], "big")
    second = size                                  # the second message: its queue has a unit before it
    data[second + 28:second + 36] = ((1 << 63) - 5).to_bytes(8, "big")
    seg.write_bytes(bytes(data))
    runs = []
    for native in ("1", "0"):
        os.environ["MQTOOL_NATIVE"] = native
        try:
            out = tmp_path / f"out{native}"
            code, stdout, stderr = run_cli("rebuild-index", store, "--out", out, "--json")
        finally:
            os.environ.pop("MQTOOL_NATIVE", None)
        assert code in (0, 1) and "Traceback" not in stderr, stderr
        runs.append((code, _tree_hashes(out)))
    assert runs[0] == runs[1]
    assert "cq-put-skipped" in stdout


def _copy_store_fixture(tmp_path: Path) -> Path:
    from conftest import FIXTURES

    dst = tmp_path / "store"
    shutil.copytree(FIXTURES / "rocketmq" / "store", dst)
    return dst


# ---- index state machine (hand-computed) ----------------------------------------------------------

def _index_file_bytes(slot_num, index_num, header, slots, entries):
    data = HEADER.pack(*header) + b"".join(struct.pack(">i", s) for s in slots) + bytes(20)
    data += b"".join(ENTRY.pack(*e) for e in entries)
    return data + bytes(40 + 4 * slot_num + 20 * index_num - len(data))


def test_index_rollover_first_timediff_uses_previous_end():
    files = []
    ib = IndexBuilder(2, 3, lambda f, last: files.append(f))   # 2 slots, 2 entries per file
    # "Aa" hashes 2112 (slot 0), "Ab" 2113 (slot 1); keys are topic#key, computed with the second implementation
    k1, k2, k3 = "T#a", "T#b", "T#c"
    h = {k: abs(java_string_hash(k)) for k in (k1, k2, k3)}
    ib.build(1000, 10_000, False, [k1])
    ib.build(2000, 12_500, False, [k2])
    ib.build(3000, 20_999, False, [k3, k2])   # two keys: the second one's timeDiff is against the new begin
    ib.build(2500, 30_000, False, [k1])     # offset below endPhyOffset 3000: skipped
    ib.build(3000, 31_000, True, [k1])      # rollback: skipped
    ib.finish()
    assert len(files) == 3                  # the third file was created by the message that found the second full
    f0, f1, f2 = files
    assert f2.index_count == 1 and f2.header() == (20_999, 20_999, 3000, 3000, 0, 1)
    slots0 = [0, 0]
    e0 = []
    for n, (k, off, ts) in enumerate([(k1, 1000, 10_000), (k2, 2000, 12_500)], start=1):
        s = h[k] % 2
        td = 0 if n == 1 else (ts - 10_000) // 1000
        e0.append((h[k], off, td, slots0[s]))
        slots0[s] = n
    hsc0 = sum(1 for e in e0 if e[3] == 0)
    assert f0.to_bytes() == _index_file_bytes(2, 3, (10_000, 12_500, 1000, 2000, hsc0, 3), slots0, e0)
    # second file: begin* start as the previous end (12_500 / 2000); first timeDiff is taken against it,
    # then begin* become the first entry's values
    slots1 = [0, 0]
    e1 = []
    for n, (k, td) in enumerate([(k3, (20_999 - 12_500) // 1000), (k2, 0)], start=1):
        s = h[k] % 2
        e1.append((h[k], 3000, td, slots1[s]))
        slots1[s] = n
    hsc1 = sum(1 for e in e1 if e[3] == 0)
    assert f1.to_bytes() == _index_file_bytes(2, 3, (20_999, 20_999, 3000, 3000, hsc1, 3), slots1, e1)


def test_index_message_at_end_offset_is_indexed_again():
    files = []
    ib = IndexBuilder(4, 10, lambda f, last: files.append(f))
    ib.build(500, 1000, False, ["T#x"])
    ib.build(500, 1000, False, ["T#x"])     # offset == endPhyOffset: not skipped (rule is offset < end)
    ib.finish()
    assert files[0].index_count == 3


def test_index_prefix_view_matches_shorter_build(index_spill):
    keys = [f"T#k{i}" for i in range(40)]
    full = []
    ib = IndexBuilder(7, 100, lambda f, last: full.append(f))
    for i, k in enumerate(keys):
        ib.build(100 * i, 1_000_000 + 700 * i, False, [k])
    ib.finish()
    for cut in (1, 2, 5, 17, 40):
        part = []
        ib2 = IndexBuilder(7, 100, lambda f, last: part.append(f))
        for i, k in enumerate(keys[:cut - 1]):
            ib2.build(100 * i, 1_000_000 + 700 * i, False, [k])
        ib2.finish()
        if not part:
            continue
        header, slots = full[0].prefix_view(cut)
        assert header == part[0].header()
        assert list(slots) == list(part[0].slots)


def test_human_time_is_utc_broker_format():
    assert human_time(0) == "19700101000000000"
    assert human_time(1795338537061) == datetime.fromtimestamp(1795338537.061, timezone.utc).strftime(
        "%Y%m%d%H%M%S") + "061"


# ---- real stores -----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", CLEAN)
def test_clean_store_rebuild_is_byte_identical(name, tmp_path, run_cli):
    store = require_realdata("rocketmq", name, "store")
    out = tmp_path / "out"
    code, stdout, stderr = run_cli("rebuild-index", store, "--out", out, "--json", *SIZES)
    assert code == 0, stderr
    ours = {p.relative_to(out / "consumequeue"): p.read_bytes() for p in (out / "consumequeue").rglob("*")
            if p.is_file()}
    theirs = {p.relative_to(store / "consumequeue"): p.read_bytes() for p in (store / "consumequeue").rglob("*")
              if p.is_file()}
    assert sorted(ours) == sorted(theirs)
    for rel in theirs:
        assert ours[rel] == theirs[rel], rel
    our_idx = sorted((out / "index").iterdir())
    their_idx = sorted((store / "index").iterdir())
    assert len(our_idx) == len(their_idx) == 3          # MANIFEST: 3 index files of 8440 bytes
    for a, b in zip(our_idx, their_idx):
        assert a.read_bytes() == b.read_bytes(), (a.name, b.name)
        begin = HEADER.unpack_from(a.read_bytes())[0]
        # named from the first entry's store timestamp, yyyyMMddHHmmssSSS in UTC
        assert a.name == datetime.fromtimestamp(begin / 1000, timezone.utc).strftime("%Y%m%d%H%M%S%f")[:17]
    _, summary = _ndjson(stdout)
    assert summary["written"] == len(theirs) + 3
    assert summary["out"] == str(out)                   # the directory given (was the OutputDir's repr)


@pytest.mark.parametrize("use_native", [True, False])
@pytest.mark.parametrize("name", CLEAN)
def test_index_entries_streamed_to_the_output_are_still_byte_identical(name, use_native, tmp_path, run_cli,
                                                                     monkeypatch):
    """--out keeps memory bounded by writing index entries to the output file as they become final (past
    STREAM_BYTES; with --compare they go to a scratch file past SPILL_BYTES instead); with a threshold of three
    entries every file is streamed in many pieces and must still equal the broker's file."""
    from mqtool.rocketmq import rebuild as R

    monkeypatch.setenv("MQTOOL_NATIVE", "1" if use_native else "0")
    monkeypatch.setattr(R.IndexFileBuilder, "STREAM_BYTES", 3 * 20)
    monkeypatch.setattr(R.IndexFileBuilder, "SPILL_BYTES", 3 * 20)
    streamed, spilled = [], []
    real = R.IndexFileBuilder.maybe_spill

    def counting(self):
        real(self)
        if self.stream is not None and self not in streamed:
            streamed.append(self)
        if self.spill is not None and self not in spilled:
            spilled.append(self)

    monkeypatch.setattr(R.IndexFileBuilder, "maybe_spill", counting)
    store = require_realdata("rocketmq", name, "store")
    out = tmp_path / "out"
    code, _, stderr = run_cli("rebuild-index", store, "--out", out, "--json", *SIZES)
    assert code == 0, stderr
    our_idx = sorted((out / "index").iterdir())
    their_idx = sorted((store / "index").iterdir())
    assert len(our_idx) == len(their_idx) == 3
    for a, b in zip(our_idx, their_idx):
        assert a.read_bytes() == b.read_bytes(), (a.name, b.name)
    assert len(streamed) == 3 and not spilled           # every file went to its output as it was built
    assert not [p for p in out.rglob("*") if p.name.startswith(".mqtool-tmp")]


def test_a_run_that_fails_leaves_no_streamed_index_file(tmp_path, monkeypatch):
    """An index file being streamed when the run fails is dropped: neither it nor its temporary file stays."""
    from mqtool.options import RebuildOptions
    from mqtool.rocketmq import rebuild as R
    from mqtool.rocketmq.rebuild import replay as RP
    from mqtool.rocketmq.store import open_store

    monkeypatch.setattr(R.IndexFileBuilder, "STREAM_BYTES", 3 * 20)
    opened = []
    real = R.DirSink.index_stream

    def index_stream(self, name, at):
        opened.append(name)
        return real(self, name, at)

    def fail(self):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(R.DirSink, "index_stream", index_stream)
    monkeypatch.setattr(RP.Replay, "finish", fail)
    store = open_store(require_realdata("rocketmq", "gen-4.9.7-clean", "store"))
    out = tmp_path / "out"
    findings, _ = R.run_rebuild(store, RebuildOptions(out=str(out), cq_file_size=800, max_hash_slots=100,
                                                      max_index_num=400))
    with pytest.raises(OSError):
        list(findings)
    assert len(opened) == 3                     # two files finished at their roll, the last one streaming
    names = sorted(p.name for p in (out / "index").iterdir())
    assert names == sorted(opened)[:2]


@pytest.mark.parametrize("name", CLEAN + KILL)
def test_compare_with_sizes_inferred_from_the_store(name, run_cli, index_spill):
    """No size options: they come from the store's own files. The -kill stores compare identical too: the
    broker was halted ~300 ms after the last put and its dispatcher had already consumed the whole commitlog
    (MANIFEST: every message reached the mapped files), so no difference is expected beyond that range — the
    lag case is exercised in test_compare_reports_a_lagging_dispatch_as_not_on_disk."""
    store = require_realdata("rocketmq", name, "store")
    code, stdout, stderr = run_cli("rebuild-index", store, "--compare", "--json")
    findings, summary = _ndjson(stdout)
    assert code == 0, (findings[:5], stderr)
    assert findings == []
    n_disk = sum(1 for p in (store / "consumequeue").rglob("*") if p.is_file()) + len(list((store / "index").iterdir()))
    assert summary["identical"] == n_disk
    assert summary["differs"] == summary["missing_on_disk"] == summary["extra_on_disk"] == 0
    assert (summary["cq_file_size"], summary["max_hash_slots"], summary["max_index_num"]) == (800, 100, 400)


@pytest.mark.parametrize("name", CLEAN + KILL)
def test_rebuilt_units_match_expected_json(name, tmp_path, run_cli):
    """Ground truth from the generator's put results: every dispatched message's unit sits at its queue
    offset with its commitlog offset, size and tagsCode (tags hash, or store time + delay for level 1/2)."""
    root = require_realdata("rocketmq", name)
    exp = json.loads((root / "expected.json").read_text())
    out = tmp_path / "out"
    code, _, stderr = run_cli("rebuild-index", root / "store", "--out", out, *SIZES)
    assert code == 0, stderr
    delay = {1: 1000, 2: 5000}
    checked = 0
    for m in exp["messages"]:
        if "items" in m or m.get("putStatus") != "PUT_OK" or m["storedSysFlag"] & 0xC in (0x4, 0xC):
            continue
        topic, qid, qoff = m["storedTopic"], m["storedQueueId"], m["queueOffset"]
        pos = qoff * 20
        f = out / "consumequeue" / topic / str(qid) / f"{pos - pos % 800:020d}"
        unit = UNIT.unpack_from(f.read_bytes(), pos % 800)
        if topic == "SCHEDULE_TOPIC_XXXX":
            tags = m["storeTimestamp"] + delay[qid + 1]
        else:
            tags = java_string_hash(m["tags"]) if m.get("tags") else 0
        assert unit == (m["commitLogOffset"], m["wroteBytes"], tags), m["note"]
        checked += 1
    assert checked > 400


@pytest.mark.parametrize("name", ["gen-4.9.7-clean", "gen-5.1.4-clean"])
def test_checkpoint_matches_broker_logics_and_index_times(name, tmp_path, run_cli):
    store = require_realdata("rocketmq", name, "store")
    out = tmp_path / "out"
    code, _, stderr = run_cli("rebuild-index", store, "--out", out, "--write-checkpoint")
    assert code == 0, stderr
    ours = (out / "checkpoint").read_bytes()
    theirs = (store / "checkpoint").read_bytes()
    assert len(ours) == 4096
    # logicsMsgTimestamp (8) and indexMsgTimestamp (16): the broker's clean-shutdown values
    assert ours[8:24] == theirs[8:24]
    assert struct.unpack_from(">q", ours, 0)[0] >= struct.unpack_from(">q", theirs, 0)[0]
    assert not any(ours[24:])


def test_compare_names_a_damaged_consumequeue_unit(tmp_path, run_cli):
    store = _copy_store("gen-4.9.7-clean", tmp_path)
    f = store / "consumequeue" / "TopicA" / "1" / "00000000000000000800"
    data = bytearray(f.read_bytes())
    orig = UNIT.unpack_from(data, 5 * 20)
    UNIT.pack_into(data, 5 * 20, orig[0], orig[1] + 1, orig[2])       # size field off by one
    UNIT.pack_into(data, 9 * 20, 0, 0, 0)                             # a zeroed unit inside the data
    f.write_bytes(bytes(data))
    code, stdout, _ = run_cli("rebuild-index", store, "--compare", "--json")
    findings, summary = _ndjson(stdout)
    assert code == 1
    by_pos = {(x["file"], x["position"]): x for x in findings}
    hit = by_pos[(str(f), 100)]
    assert hit["code"] == "cq-unit-differs" and hit["severity"] == "error"
    assert hit["expected"] == {"offset": orig[0], "size": orig[1], "tags_code": orig[2]}
    assert hit["actual"]["size"] == orig[1] + 1 and hit["offset"] == orig[0]
    assert "TopicA/1/00000000000000000800 unit 5 (queue offset 45)" in hit["message"]
    assert by_pos[(str(f), 180)]["code"] == "cq-unit-zeroed"
    assert len(findings) == 2 and summary["differs"] == 1 and summary["identical"] == 26


def test_compare_names_a_damaged_index_entry(tmp_path, run_cli, index_spill):
    store = _copy_store("gen-5.1.4-clean", tmp_path)
    f = sorted((store / "index").iterdir())[1]
    data = bytearray(f.read_bytes())
    pos = 40 + 100 * 4 + 7 * 20
    kh, off, td, prev = ENTRY.unpack_from(data, pos)
    ENTRY.pack_into(data, pos, kh, off + 8, td, prev)
    f.write_bytes(bytes(data))
    code, stdout, _ = run_cli("rebuild-index", store, "--compare", "--json")
    findings, _ = _ndjson(stdout)
    assert code == 1
    (hit,) = findings
    assert (hit["code"], hit["file"], hit["position"]) == ("index-entry-differs", str(f), pos)
    assert hit["expected"]["offset"] == off and hit["actual"]["offset"] == off + 8


def test_compare_reports_a_lagging_dispatch_as_not_on_disk(tmp_path, run_cli, index_spill):
    """A broker killed before its dispatcher caught up: consumequeue/index hold a prefix of what the commitlog
    gives. Made here by rebuilding from a copy whose commitlog is cut after a message, then grafting that
    rebuild onto a copy of the full store. Expected: warnings only (units/entries/files not on disk), no
    errors, and files identical up to where the dispatch stopped."""
    src = require_realdata("rocketmq", "gen-4.9.7-clean", "store")
    cut = _copy_store("gen-4.9.7-clean", tmp_path / "cut")
    last = sorted((cut / "commitlog").iterdir())[-1]
    data = bytearray(last.read_bytes())
    keep = 65536 - 40000
    # cut at a message boundary: walk the units of the last segment
    pos = 0
    while True:
        size = struct.unpack_from(">i", data, pos)[0]
        if pos + size > keep:
            break
        pos += size
    data[pos:] = bytes(len(data) - pos)
    last.write_bytes(bytes(data))
    lag = tmp_path / "lag"
    code, _, stderr = run_cli("rebuild-index", cut, "--out", lag, *SIZES)
    assert code == 0, stderr
    store = tmp_path / "full" / "store"
    shutil.copytree(src, store, ignore=shutil.ignore_patterns("consumequeue", "index"))
    shutil.copytree(lag / "consumequeue", store / "consumequeue")
    shutil.copytree(lag / "index", store / "index")
    code, stdout, _ = run_cli("rebuild-index", store, "--compare", "--json")
    findings, summary = _ndjson(stdout)
    assert code == 1
    assert findings and all(x["severity"] == "warning" for x in findings), findings
    assert {x["code"] for x in findings} <= {"cq-units-not-on-disk", "index-entries-not-on-disk",
                                             "cq-file-missing-on-disk", "index-file-missing-on-disk"}
    assert summary["behind"] >= 1 and summary["errors"] == 0


def test_output_safety(tmp_path, run_cli):
    store = require_realdata("rocketmq", "gen-5.1.4-kill", "store")
    before = _tree_hashes(store)
    code, _, err = run_cli("rebuild-index", store, "--out", store / "rebuilt")
    assert code == 2 and "inside the input tree" in err
    assert not (store / "rebuilt").exists()
    code, _, err = run_cli("rebuild-index", store, "--out", store.parent)   # contains the store
    assert code == 2
    seg = sorted((store / "commitlog").iterdir())[0]                       # one segment given: still the store
    code, _, err = run_cli("rebuild-index", seg, "--out", store / "x")
    assert code == 2 and not (store / "x").exists()
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("x")
    code, _, err = run_cli("rebuild-index", store, "--out", out)
    assert code == 2 and "not empty" in err
    code, _, err = run_cli("rebuild-index", store, "--out", out, "--force", "--compare", "--write-checkpoint")
    assert code == 0, err
    code, _, err = run_cli("rebuild-index", store, "--out", out, "--force")     # overwrite again
    assert code == 0, err
    assert not list(out.rglob(".mqtool-tmp-*"))
    assert _tree_hashes(store) == before


def test_broker_conf_and_trim(tmp_path, run_cli):
    store = require_realdata("rocketmq", "gen-4.9.7-clean", "store")
    conf = tmp_path / "broker.conf"
    conf.write_text("# test\nmappedFileSizeConsumeQueue=800\nmaxHashSlotNum = 100\nmaxIndexNum=400\n"
                    "messageDelayLevel=1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h\n")
    out = tmp_path / "out"
    code, stdout, err = run_cli("rebuild-index", store, "--broker-conf", conf, "--out", out, "--trim", "--compare",
                                "--json")
    findings, summary = _ndjson(stdout)
    assert code == 0, (findings, err)
    assert summary["settings_from"]["mappedFileSizeConsumeQueue"] == "broker-conf"
    f = out / "consumequeue" / "TopicC" / "0" / "00000000000000000000"
    theirs = (store / "consumequeue" / "TopicC" / "0" / "00000000000000000000").read_bytes()
    ours = f.read_bytes()
    assert len(ours) % 20 == 0 and 0 < len(ours) < 800 and ours[-20:] != bytes(20)
    assert theirs.startswith(ours) and not any(theirs[len(ours):])
    # full (non-last) files are never trimmed
    assert (out / "consumequeue" / "TopicA" / "0" / "00000000000000000000").stat().st_size == 800


def test_needs_out_or_compare_and_a_commitlog(tmp_path, run_cli):
    store = require_realdata("rocketmq", "gen-4.9.7-clean", "store")
    code, _, _ = run_cli("rebuild-index", store)
    assert code == 2
    code, _, err = run_cli("rebuild-index", store / "index", "--compare")
    assert code == 2 and "commitlog" in err


def test_damaged_commitlog_is_reported_and_the_scan_goes_on(tmp_path, run_cli):
    store = _copy_store("gen-4.9.7-clean", tmp_path)
    seg = store / "commitlog" / "00000000000000065536"
    data = bytearray(seg.read_bytes())
    pos = 0
    for _ in range(10):                                   # the 11th unit of the second segment
        pos += struct.unpack_from(">i", data, pos)[0]
    size = struct.unpack_from(">i", data, pos)[0]
    data[pos + 4:pos + 8] = b"\xde\xad\xbe\xef"            # magic code destroyed
    seg.write_bytes(bytes(data))
    code, stdout, _ = run_cli("rebuild-index", store, "--compare", "--json")
    findings, summary = _ndjson(stdout)
    assert code == 1
    dmg = [x for x in findings if x["code"] == "commitlog-damage"]
    assert len(dmg) == 1 and dmg[0]["file"] == str(seg) and dmg[0]["position"] == pos
    assert dmg[0]["offset"] == 65536 + pos
    assert summary["messages"] == 527 - 1                 # the scan resynced: only the damaged unit is lost
    assert summary["damaged_ranges"] == 1
    # the broker's unit for the lost message is where the differences in its queue start
    cq = [x for x in findings if x["code"] == "cq-unit-differs"]
    assert any(x["actual"]["offset"] == 65536 + pos and x["actual"]["size"] == size for x in cq)


# ---- fast commitlog path == construct schema ------------------------------------------------------

@st.composite
def _units(draw):
    version = draw(st.sampled_from(["v1", "v2"]))
    sysflag = draw(st.sampled_from([0, 0x4, 0x8, 0xC, 0x10, 0x20, 0x30, 0x2]))
    body = draw(st.binary(max_size=40))
    topic = draw(st.text("abcXYZ%_-", min_size=1, max_size=127 if version == "v1" else 300)).encode()
    props = draw(st.text("KEYSTAG_\x01\x02ab ", max_size=60)).encode()
    born = "[2001:db8::1]:7" if sysflag & 0x10 else "10.1.2.3:7"
    store_host = "[fd00::5]:10911" if sysflag & 0x20 else "10.0.0.5:10911"
    return dict(topic=topic, body=body, props=props, version=version, sysflag=sysflag,
                body_crc=draw(st.integers(0, 2 ** 31 - 1)), queue_id=draw(st.integers(0, 63)),
                queue_offset=draw(st.integers(0, 2 ** 40)), born=born, store=store_host, born_ts=1,
                store_ts=draw(st.integers(0, 2 ** 45)))


@settings(max_examples=40, deadline=None)
@given(st.lists(_units(), min_size=1, max_size=6))
def test_fast_commitlog_path_equals_construct(tmp_path_factory, units):
    from formats import rocketmq as F
    from mqtool.rocketmq.store import Segment
    from mqtool.rocketmq.rebuild import iter_dispatch_records

    data = b""
    for kw in units:
        data += rocketmq_unit(**kw, phys=len(data))
    d = tmp_path_factory.mktemp("seg")
    p = d / "00000000000000000000"
    p.write_bytes(data + bytes(64))
    got = list(iter_dispatch_records([Segment(str(p), p.name, 0, len(data) + 64)], 1 << 20, pytest.fail))
    want = []
    pos = 0
    for kw in units:
        c = F.MESSAGE_SCHEMAS[kw["version"]].parse(data[pos:])
        want.append((c.PHYSICALOFFSET, c.TOTALSIZE, c.TOPIC, c.QUEUEID, c.QUEUEOFFSET, c.SYSFLAG, c.STORETIMESTAMP,
                     c.PROPERTIES))
        pos += c.TOTALSIZE
    assert [tuple(bytes(x) if isinstance(x, (bytes, memoryview)) else x for x in g) for g in got] == want


def test_units_for_deleted_commitlog_files_are_info(tmp_path, run_cli):
    """The broker deletes old commitlog files first; consumequeue units pointing into them cannot be rebuilt.
    The rebuild has the broker's blank fill there (a queue restarted above offset 0) and says so as info."""
    store = _copy_store("gen-4.9.7-clean", tmp_path)
    (store / "commitlog" / "00000000000000000000").unlink()
    code, stdout, _ = run_cli("rebuild-index", store, "--compare", "--json")
    findings, summary = _ndjson(stdout)
    cq = [x for x in findings if x["code"].startswith("cq-")]
    assert [x["code"] for x in cq] == ["cq-units-before-commitlog"] and cq[0]["severity"] == "info"
    assert cq[0]["offset"] == 65536
    exp = json.loads((require_realdata("rocketmq", "gen-4.9.7-clean") / "expected.json").read_text())
    lost = sum(1 for m in exp["messages"] if "items" not in m and m["commitLogOffset"] < 65536
               and m["storedSysFlag"] & 0xC in (0, 0x8))
    assert cq[0]["actual"] == f"{lost} units"


# ---- a small store built from the schema ---------------------------------------------------------

def _build_store(root: Path, messages: list[dict]) -> list[int]:
    """Write a one-segment commitlog (65536 bytes) from message dicts; returns each message's offset."""
    data = b""
    offsets = []
    for m in messages:
        topic = m["topic"].encode()
        props = "".join(f"{k}\x01{v}\x02" for k, v in m.get("props", {}).items()).rstrip("\x02").encode()
        offsets.append(len(data))
        data += rocketmq_unit(topic, b"body", props, sysflag=m.get("sysflag", 0), phys=len(data),
                              queue_id=m.get("qid", 0), queue_offset=m.get("qoff", 0), born="127.0.0.1:1",
                              store="10.0.0.5:10911", born_ts=0, store_ts=m["ts"], body_crc=0)
    (root / "commitlog").mkdir(parents=True)
    (root / "commitlog" / f"{0:020d}").write_bytes(data + bytes(65536 - len(data)))
    return offsets


def test_dispatch_rules_end_to_end_on_a_built_store(tmp_path, run_cli):
    store = tmp_path / "store"
    t0 = 1_700_000_000_000
    offs = _build_store(store, [
        {"topic": "T", "qid": 1, "qoff": 3, "ts": t0, "props": {"TAGS": "Aa", "KEYS": "k1", "UNIQ_KEY": "U0"}},
        {"topic": "T", "qid": 1, "qoff": 4, "ts": t0 + 10, "sysflag": 0x4, "props": {"KEYS": "prep"}},
        {"topic": "T", "qid": 1, "qoff": 0, "ts": t0 + 20, "sysflag": 0xC, "props": {"KEYS": "rb"}},
        {"topic": "T", "qid": 1, "qoff": 4, "ts": t0 + 30, "sysflag": 0x8,
         "props": {"TAGS": "BB", "INNER_MULTI_DISPATCH": "%LMQ%x,%LMQ%y", "INNER_MULTI_QUEUE_OFFSET": "0,7"}},
        {"topic": "SCHEDULE_TOPIC_XXXX", "qid": 2, "qoff": 0, "ts": t0 + 40,
         "props": {"DELAY": "3", "TAGS": "ignored", "REAL_TOPIC": "T"}},
        {"topic": "a/b", "qid": 0, "qoff": 0, "ts": t0 + 50, "props": {}},
    ])
    conf = tmp_path / "broker.conf"
    conf.write_text('messageDelayLevel = "1s 2s 7m"\nmappedFileSizeConsumeQueue = 100\n'    # toml-style quoting
                    "maxHashSlotNum=8\nmaxIndexNum=16\n")
    out = tmp_path / "out"
    code, stdout, err = run_cli("rebuild-index", store, "--out", out, "--broker-conf", conf, "--json")
    assert code == 0, err
    findings, summary = _ndjson(stdout)
    assert [x["code"] for x in findings] == ["unsafe-topic-name"]
    raw = (store / "commitlog" / f"{0:020d}").read_bytes()
    sizes = {o: struct.unpack_from(">i", raw, o)[0] for o in offs}
    blank = UNIT.pack(0, 0x7FFFFFFF, 0)

    def cq(*parts):
        return (out / "consumequeue").joinpath(*parts).read_bytes()

    # T/1: first unit at queue offset 3 -> 3 blank units, then the message; the prepared one has no unit, the
    # rollback none either; the commit at queue offset 4 follows. File size 100 = 5 units, zero-filled.
    assert cq("T", "1", f"{0:020d}") == (blank * 3 + UNIT.pack(offs[0], sizes[offs[0]], 2112)
                                         + UNIT.pack(offs[3], sizes[offs[3]], 2112))
    # LMQ: queueId 0, at the listed offsets (7 -> file 100, two blank units first), tagsCode of the message
    assert cq("%LMQ%x", "0", f"{0:020d}") == UNIT.pack(offs[3], sizes[offs[3]], 2112) + bytes(80)
    assert cq("%LMQ%y", "0", f"{100:020d}") == blank * 2 + UNIT.pack(offs[3], sizes[offs[3]], 2112) + bytes(40)
    # delay level 3 from the broker.conf table: 7 minutes after the store time
    assert cq("SCHEDULE_TOPIC_XXXX", "2", f"{0:020d}") == UNIT.pack(offs[4], sizes[offs[4]], t0 + 40 + 420_000) \
        + bytes(80)
    assert not (out / "consumequeue" / "a").exists()
    # index: keys of the normal, prepared and commit messages (not the rollback), slot = hash % 8
    (idx,) = list((out / "index").iterdir())
    data = idx.read_bytes()
    assert len(data) == 40 + 8 * 4 + 16 * 20
    header = HEADER.unpack_from(data, 0)
    keys = [("T#U0", offs[0]), ("T#k1", offs[0]), ("T#prep", offs[1])]
    assert header[5] == 1 + 3 and header[2] == offs[0] and header[3] == offs[1]
    assert header[0] == t0 and header[1] == t0 + 10
    for k, (key, off) in enumerate(keys, start=1):
        kh, phy, td, _ = ENTRY.unpack_from(data, 40 + 32 + k * 20)
        assert (kh, phy, td) == (abs(java_string_hash(key)), off, 0)
    assert idx.name == human_time(t0)
    # and the whole file parses with the construct schema to the same values
    from formats import rocketmq as F

    parsed = F.index_file(8, 16).parse(data)
    h = parsed.header
    assert (h.beginTimestamp, h.endTimestamp, h.beginPhyOffset, h.endPhyOffset, h.hashSlotCount,
            h.indexCount) == header
    for k, (key, off) in enumerate(keys, start=1):
        e = parsed.entries[k]
        assert (e.keyHash, e.phyOffset, e.timeDiff) == (abs(java_string_hash(key)), off, 0)
        assert parsed.slots[e.keyHash % 8] >= k


def test_index_compare_reads_in_chunks_with_the_same_findings(tmp_path, run_cli, monkeypatch):
    """The index comparison reads the store's file in chunks (a default-geometry file is 420 MB): with tiny
    chunks (boundaries everywhere) it gives what one big read gives, on an identical file, a damaged entry,
    a damaged slot, non-zero bytes after the last entry, and a file of another size."""
    from mqtool.rocketmq import rebuild as R

    store = _copy_store("gen-5.1.4-clean", tmp_path)
    files = sorted((store / "index").iterdir())
    data = bytearray(files[1].read_bytes())
    kh, off, td, prev = ENTRY.unpack_from(data, 40 + 400 + 7 * 20)
    ENTRY.pack_into(data, 40 + 400 + 7 * 20, kh, off + 8, td, prev)
    data[40 + 4 * 3] ^= 1
    files[1].write_bytes(bytes(data))
    data = bytearray(files[2].read_bytes())
    data[-3] = 9
    files[2].write_bytes(bytes(data))
    outs = []
    for chunk in (1 << 23, 7, 64):
        monkeypatch.setattr(R._DiskReader, "CHUNK", chunk)
        code, stdout, _ = run_cli("rebuild-index", store, "--compare", "--json")
        outs.append((code, _ndjson(stdout)[0]))
    assert outs[0] == outs[1] == outs[2]
    codes = {x["code"] for x in outs[0][1]}
    assert {"index-entry-differs", "index-stale-bytes"} <= codes and ("index-slots-differ" in codes
                                                                      or "index-slot-differs" in codes)
    files[2].write_bytes(files[2].read_bytes() + b"\0")            # (the first file gives the geometry)
    code, stdout, _ = run_cli("rebuild-index", store, "--compare", "--json")
    geo = [x for x in _ndjson(stdout)[0] if x["code"] == "index-geometry-differs"]
    assert len(geo) == 1 and geo[0]["file"] == str(files[2])
    assert geo[0]["actual"] == 8441 and geo[0]["expected"] == 8440


def test_a_store_of_many_queues_is_published_with_a_few_flushes(tmp_path, run_cli, monkeypatch):
    """500 queues (a consumequeue file each): every file as the broker writes it, made durable with a bounded
    number of flushes (each used to be fsynced, and its directory after it), and renamed into place only after
    that flush."""
    n, t0 = 500, 1_700_000_000_000
    store = tmp_path / "store"
    offs = _build_store(store, [{"topic": "T", "qid": q, "qoff": 0, "ts": t0 + q, "props": {"TAGS": "a"}}
                                for q in range(n)])
    conf = tmp_path / "broker.conf"
    conf.write_text("mappedFileSizeConsumeQueue = 100\nmaxHashSlotNum=8\nmaxIndexNum=16\n")
    log = flush_log(monkeypatch)
    out = tmp_path / "out"
    code, _, err = run_cli("rebuild-index", store, "--out", out, "--broker-conf", conf, "--force")
    assert code == 0, err
    events = [e[0] for e in log]
    raw = (store / "commitlog" / f"{0:020d}").read_bytes()
    for q, off in enumerate(offs):           # one unit at queue offset 0: (offset, size, Java "a".hashCode() = 97)
        size = struct.unpack_from(">i", raw, off)[0]
        assert (out / "consumequeue" / "T" / str(q) / f"{0:020d}").read_bytes() == UNIT.pack(off, size, 97) \
            + bytes(80), q
    assert events.count("publish") >= n
    assert events.count("sync") + events.count("fsync") <= 8
    assert "sync" in events[:events.index("publish")]
