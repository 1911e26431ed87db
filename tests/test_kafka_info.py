"""mqtool info / report for Kafka log dirs: real stores and damaged copies.

Expected values come from ``generated-4.0.0-SNAPSHOT/broker-append/expected.json`` (every batch as Kafka's
own Java code wrote it: offsets, magic, codec, timestamp type, maxTimestamp, control flag, size, position),
the stores' own checkpoint files (replication-offset-checkpoint = high watermark, recovery-point-offset-
checkpoint), meta.properties, and MANIFEST.md (record counts of the KRaft metadata log, which snapshot
was a clean shutdown).
"""
from __future__ import annotations

import json
import shutil
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

from conftest import load_json, require_realdata
from mqtool.info import PLAUSIBLE_FROM_MS, build_info
from mqtool.kafka import indexfiles as KF
from mqtool.options import InfoOptions
from mqtool.render_info import render_info
from pagecheck import assert_self_contained, parse


def _ba():
    return require_realdata("kafka", "generated-4.0.0-SNAPSHOT", "broker-append")


def _batches():
    return load_json(_ba() / "expected.json")["batches"]


def _n(b):
    return b["lastOffset"] - b["baseOffset"] + 1


def _queue(d, topic, part):
    for t in d["topics"]:
        if t["topic"] == topic:
            for q in t["queues"]:
                if q["queue"] == part:
                    return q
    raise KeyError((topic, part))


def test_broker_append_counts_records_not_batches(run_cli):
    exp = load_json(_ba() / "expected.json")
    bs = exp["batches"]
    code, out, err = run_cli("info", _ba(), "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["family"] == "kafka" and d["store_kind"] == "Kafka log directory"
    data = [b for b in bs if not b["isControl"]]
    assert d["messages"] == sum(_n(b) for b in data) == 124          # 127 offsets, 3 transaction markers
    assert d["overview"]["transactions"]["control_records"] == sum(_n(b) for b in bs if b["isControl"])
    assert d["bytes"] == sum(b["size"] for b in data)
    q = _queue(d, "forensics", 0)
    assert q["messages"] == d["messages"] and q["max_offset"] == exp["logEndOffset"]
    # formats, codecs, timestamp types: as expected.json lists the batches
    by_magic = Counter()
    for b in data:
        by_magic[f"v{b['magic']}"] += _n(b)
    assert d["overview"]["records by message format"] == dict(by_magic)
    assert d["overview"]["batches by codec"] == dict(Counter(b["codec"] for b in bs))
    assert d["overview"]["batches by timestamp type"] == dict(Counter(b["timestampType"] for b in bs))
    for m in (0, 1, 2):
        assert any(h.startswith(f"Kafka message format v{m} (magic {m}") for h in d["version_hints"]), m
    assert any("zstd" in h for h in d["version_hints"])
    assert any("partition.metadata" in h for h in d["version_hints"])
    # timeline: v0 messages have no timestamp; the last time is the largest batch maxTimestamp
    v0 = sum(_n(b) for b in data if b["magic"] == 0)
    assert d["timeline"]["implausible"] == v0 == 16
    assert sum(x["count"] for x in d["timeline"]["buckets"]) == d["messages"] - v0
    assert d["last_store_time"] == max(b["maxTimestamp"] for b in bs)
    assert PLAUSIBLE_FROM_MS <= d["first_store_time"] <= min(b["maxTimestamp"] for b in data if b["maxTimestamp"] >= 0)
    assert any("no timestamp" in n for n in d["notes"])
    # files: 4 segments
    log = next(f for f in d["files"] if f["group"] == "log")
    assert log["count"] == len(exp["segmentBaseOffsets"]) == 4
    assert d["damage_total"] == 0 and d["consumers"] == []
    # recovery point 127 = LEO, but no .kafka_cleanshutdown: cannot tell
    assert d["crash"]["unclean"] is None
    assert "every recovery point equals its log end offset" in d["crash"]["detail"]


def test_consumer_offsets_topic_decoded():
    # coordinator/__consumer_offsets-0: OffsetCommit key v0/v1 with value v0..v4, then tombstones
    p = require_realdata("kafka", "generated-4.0.0-SNAPSHOT", "coordinator")
    info = build_info(p, None, InfoOptions())
    q = next(t for t in info.topics if t.topic == "__consumer_offsets").queues[0]
    want = load_json(p / "__consumer_offsets-0.expected.json")
    assert q.max_offset == want[-1]["lastOffset"] + 1 and q.messages == sum(_n(b) for b in want)
    # every committed offset is an OffsetCommit that no later tombstone deleted; topics are not in this dir
    assert info.consumers and all(c.source == "__consumer_offsets-0" for c in info.consumers)
    assert all(c.max_offset is None and c.lag is None for c in info.consumers)
    assert len({(c.group, c.topic, c.queue) for c in info.consumers}) == len(info.consumers)


def _checkpoint(p, name):
    return {(t, q): o for t, q, o in KF.read_offset_checkpoint(p / name).entries}


def test_kraft_store():
    p = require_realdata("kafka", "ldi-poc-kraft-2026", "8030792")
    info = build_info(p, None, InfoOptions())
    assert any(h.startswith("KRaft mode") and "meta.properties version=1" in h for h in info.version_hints)
    assert not any("ZooKeeper" in h for h in info.version_hints)
    assert any("directory.id" in h for h in info.version_hints)
    props = KF.read_properties(p / "meta.properties")
    assert info.overview["meta.properties"]["cluster.id"] == props["cluster.id"]
    # MANIFEST: __cluster_metadata-0 holds 4929 records incl. 1 control batch
    cm = next(t for t in info.topics if t.topic == "__cluster_metadata")
    assert cm.messages + info.overview["transactions"]["control_records"] == 4929
    assert info.overview["transactions"]["control_records"] == 1
    # queue ends = the broker's high watermarks (replication-offset-checkpoint) for every partition present
    hw = _checkpoint(p, "replication-offset-checkpoint")
    ends = {(t.topic, q.queue): q.max_offset for t in info.topics for q in t.queues}
    for k, v in ends.items():
        if k in hw:
            assert v == hw[k], k
    # consumer lag against those ends
    assert info.consumers
    for c in info.consumers:
        assert c.max_offset == hw[(c.topic, c.queue)] and c.lag == max(0, c.max_offset - c.committed)
    # the recovery points are behind the log end (a running broker): unclean
    rp = _checkpoint(p, "recovery-point-offset-checkpoint")
    behind = [k for k, v in rp.items() if k in ends and v < ends[k]]
    assert info.crash["unclean"] is True
    assert f"behind the log end in {len(behind)} partition(s)" in info.crash["detail"]


def test_zookeeper_snapshots_clean_and_running():
    root = require_realdata("kafka", "volodymyrzee-kafka-zk-2020")
    # c4 is a clean-shutdown state (MANIFEST); its recovery points are at the log ends, but the marker is
    # missing from the copy: cannot tell
    c4 = build_info(root / "c4-f6e2174", None, InfoOptions())
    assert c4.crash["unclean"] is None
    assert any("ZooKeeper mode" in h for h in c4.version_hints)
    hw = _checkpoint(root / "c4-f6e2174", "replication-offset-checkpoint")
    for t in c4.topics:
        for q in t.queues:
            assert q.max_offset == hw[(t.topic, q.queue)]
    # c1 is a running broker: recovery points behind the data
    c1 = build_info(root / "c1-7712094", None, InfoOptions())
    assert c1.crash["unclean"] is True
    # the whole folder: 5 log dirs, topics prefixed by the log dir
    allinfo = build_info(root, None, InfoOptions())
    assert allinfo.store_kind == "5 Kafka log directories"
    assert allinfo.messages == sum(build_info(root / n, None, InfoOptions()).messages for n in
                                   ("c1-7712094", "c2-d3d696a", "c3-c896d6b", "c4-f6e2174", "c9-03fa91f"))
    assert {t.topic.split("/")[0] for t in allinfo.topics} == {"c1-7712094", "c2-d3d696a", "c3-c896d6b",
                                                               "c4-f6e2174", "c9-03fa91f"}
    assert allinfo.crash["unclean"] is True


def test_single_partition_and_segment(run_cli):
    part = _ba() / "forensics-0"
    code, out, err = run_cli("info", part, "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["store_kind"] == "Kafka partition directory" and d["messages"] == 124
    assert d["crash"]["unclean"] is None
    seg = part / "00000000000000000037.log"
    code, out, err = run_cli("info", seg, "--json")
    assert code == 0, err
    d = json.loads(out)
    want = [b for b in _batches() if b["segment"] == 37 and not b["isControl"]]
    assert d["store_kind"] == "Kafka log segment" and d["messages"] == sum(_n(b) for b in want)
    code, out, err = run_cli("info", part / "00000000000000000037.index")
    assert code == 2 and "mqtool dump kafka" in err


def _copy(tmp_path):
    dst = tmp_path / "logdir"
    shutil.copytree(_ba(), dst)
    for p in dst.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    return dst


def _patch(path, pos, data):
    b = bytearray(path.read_bytes())
    b[pos:pos + len(data)] = data
    path.write_bytes(bytes(b))


def test_crc_damage_is_placed_at_its_batch_time(run_cli, tmp_path):
    store = _copy(tmp_path)
    b = next(x for x in _batches() if x["segment"] == 37 and x["codec"] == "none")
    seg = store / "forensics-0" / "00000000000000000037.log"
    _patch(seg, b["position"] + b["size"] - 20, b"\x5A")       # a byte of the records area
    code, out, err = run_cli("info", store, "--json")
    assert code == 1, err
    d = json.loads(out)
    assert d["damage_total"] == 1
    dmg = d["damage"][0]
    assert (dmg["file"], dmg["position"], dmg["length"], dmg["code"]) == (str(seg), b["position"], b["size"],
                                                                          "crc-mismatch")
    assert dmg["time_before"] == dmg["time_after"] == b["maxTimestamp"]
    assert d["messages"] == 124                               # the records still read
    assert sum(x["damaged"] for x in d["timeline"]["buckets"]) == 1
    assert "mqtool verify store" in err


def test_a_huge_record_count_is_not_trusted(tmp_path):
    """A flipped record count (a length field) must not make info allocate or count 2**31 records."""
    store = _copy(tmp_path)
    b = next(x for x in _batches() if x["segment"] == 37 and x["codec"] == "none")
    seg = store / "forensics-0" / "00000000000000000037.log"
    _patch(seg, b["position"] + 57, b"\x7f\xff\xff\xff")       # v2 header: records count at byte 57
    info = build_info(store, None, InfoOptions())
    assert info.messages == 124 - _n(b)
    # the CRC fails and the records do not decode: the same bytes, one damaged range (as verify counts it)
    assert [(d.position, d.code, d.length) for d in info.damage] == [(b["position"], "crc-mismatch", b["size"])]
    assert info.damage_total == 1 and info.damaged_bytes == b["size"]


def test_skipped_and_truncated_ranges(run_cli, tmp_path):
    store = _copy(tmp_path)
    bs = _batches()
    s37 = [x for x in bs if x["segment"] == 37]
    victim = s37[3]                                           # v2 lz4, in the middle of segment 37
    seg37 = store / "forensics-0" / "00000000000000000037.log"
    _patch(seg37, victim["position"] + 8, b"\xFF" * 12)      # its length, epoch and magic
    last = bs[-1]
    seg93 = store / "forensics-0" / f"{last['segment']:020d}.log"
    data = seg93.read_bytes()
    seg93.write_bytes(data[:last["position"] + 100])          # the last batch half written
    code, out, err = run_cli("info", store, "--json")
    assert code == 1, err
    d = json.loads(out)
    got = [(x["file"], x["position"], x["length"], x["code"]) for x in d["damage"]]
    assert got == [(str(seg37), victim["position"], victim["size"], "skipped-bytes"),
                   (str(seg93), last["position"], 100, "partial-tail")]
    assert d["damaged_bytes"] == victim["size"] + 100
    assert d["messages"] == 124 - _n(victim) - _n(last)
    # the skipped range lies between the batches before and after it in time
    skipped = d["damage"][0]
    assert skipped["time_before"] is not None and skipped["time_after"] is not None
    # a torn tail has nothing after it; the log end is now the last whole batch's
    assert d["damage"][1]["time_after"] is None
    assert _queue(d, "forensics", 0)["max_offset"] == last["baseOffset"]


def test_terminal_rendering_fits_one_screen():
    p = require_realdata("kafka", "ldi-poc-kraft-2026", "8030792")
    info = build_info(p, None, InfoOptions())
    con = Console(record=True, width=110, no_color=True, force_terminal=False)
    render_info(info, con)
    text = con.export_text()
    for want in ("Kafka log directory", "UNCLEAN SHUTDOWN", "KRaft mode", "__cluster_metadata", "TestTopicPatient",
                 "Timeline", "__consumer_offsets vs queue ends", "empty)"):
        assert want in text, want
    assert len(text.splitlines()) < 72         # (71 since the transactions line names the control types)


@pytest.mark.parametrize("store", [("ldi-poc-kraft-2026", "8030792")])
def test_report_of_a_kafka_store(run_cli, tmp_path, store):
    p = require_realdata("kafka", *store)
    out = tmp_path / "r.html"
    code, stdout, err = run_cli("report", p, "-o", out)
    assert code == 0, err
    html = out.read_text("utf-8")
    page = parse(html)
    assert_self_contained(html, page)
    for ident in ("overview", "timeline", "topics", "damage", "files", "findings", "timeline-chart",
                  "topic-chart", "verdict", "consumers"):
        assert ident in page.ids, ident
    assert page.count("rect", **{"class": "topic-bar"}) == 3          # 3 topics hold bytes
    _, out_v, _ = run_cli("verify", "store", p, "--json")
    findings = [json.loads(x) for x in out_v.splitlines()][:-1]
    assert page.count("tr", **{"class": "finding"}) == len(findings)
    assert "KRaft mode" in "".join(page.text)


def test_report_of_a_damaged_kafka_copy(run_cli, tmp_path):
    store = _copy(tmp_path)
    bs = _batches()
    victim = [x for x in bs if x["segment"] == 37][3]
    seg37 = store / "forensics-0" / "00000000000000000037.log"
    _patch(seg37, victim["position"] + 8, b"\xFF" * 12)
    out = tmp_path / "out.html"
    code, _, err = run_cli("report", store, "-o", out)
    assert code == 1, err
    html = out.read_text("utf-8")
    page = parse(html)
    assert_self_contained(html, page)
    assert page.count("rect", **{"class": "damage-mark"}) >= 1
    assert page.count("rect", **{"class": "damaged-bucket"}) >= 1
    assert str(seg37) in html and "skipped-bytes" in html


def test_kafka_report_renders_in_chromium(run_cli, tmp_path):
    from pagecheck import console_messages, require_chromium, run_chromium as _run

    browser = require_chromium()
    store = _copy(tmp_path)
    victim = [x for x in _batches() if x["segment"] == 37][3]
    _patch(store / "forensics-0" / "00000000000000000037.log", victim["position"] + 8, b"\xFF" * 12)
    out = tmp_path / "k.html"
    code, _, err = run_cli("report", store, "-o", out)
    assert code == 1, err
    r = _run(browser, tmp_path, "--dump-dom", out.as_uri())
    assert r.returncode == 0, r.stderr[-2000:]
    dom = r.stdout
    assert 'id="timeline-chart"' in dom and 'id="topic-chart"' in dom and "damage-mark" in dom
    assert "skipped-bytes" in dom and "Where the damage lies" in dom
    assert console_messages(r.stderr) == []


# ---- damaged bytes never raise -------------------------------------------------------------------


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_damage_never_raises(tmp_path_factory, data):
    store = tmp_path_factory.mktemp("k") / "logdir"
    shutil.copytree(_ba(), store)
    for p in store.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    segs = sorted((store / "forensics-0").glob("*.log"))
    seg = data.draw(st.sampled_from(segs))
    size = seg.stat().st_size
    pos = data.draw(st.integers(0, size - 1))
    junk = data.draw(st.binary(min_size=1, max_size=64))
    cut = data.draw(st.booleans())
    _patch(seg, pos, junk)
    if cut:
        seg.write_bytes(seg.read_bytes()[:data.draw(st.integers(0, size))])
    info = build_info(store, None, InfoOptions())
    sizes = {str(s): s.stat().st_size for s in segs}
    assert info.messages <= 124 + 64        # junk may at most add a few tiny records, never thousands
    for d in info.damage:
        assert d.file in sizes and 0 <= d.position and d.position + d.length <= sizes[d.file]
    assert info.damaged_bytes <= sum(sizes.values())


# ---- info counts as damage what verify (without --deep) reports damaged ---------------------------------

def _undecodable_partition(tmp_path):
    """One segment of five v2 batches, every CRC right (batch_v2 computes it): good; three records whose length
    varint is 0x7f (zigzag -64: no record has a negative length) and times that differ (info reads its records
    for their times); good; the gzip attribute over bytes that are no gzip stream; good. Returns (partition,
    {name: (position, size)})."""
    from builders import kafka_batch, kafka_builder

    from formats import kafka as K

    B = kafka_builder()
    bad = [b"\x7f" + bytes(6)] * 3
    plan = [("good0", kafka_batch(0, 3)), ("records", B.batch_v2(3, bad, base_ts=B.T0, max_ts=B.T0 + 2)),
            ("good6", kafka_batch(6, 3)),
            ("inflate", B.batch_v2(9, [b"not a gzip stream"], base_ts=B.T0, max_ts=B.T0, attrs=K.CODEC_GZIP)),
            ("good10", kafka_batch(10, 3))]
    data, at = bytearray(), {}
    for name, raw in plan:
        at[name] = (len(data), len(raw))
        data += raw
    part = tmp_path / "logdir" / "orders-0"
    part.mkdir(parents=True)
    (part / f"{0:020d}.log").write_bytes(bytes(data))
    return part, at


def test_records_that_do_not_decode_are_damage_only_where_verify_reads_them(tmp_path):
    """A batch whose CRC holds but whose records do not decode was damage in ``info`` (which reads records for
    their times) and nothing in ``verify`` (which reads records only with --deep); a payload that does not
    inflate was damage in info but carried no span in verify. Now info's damaged ranges are verify's (without
    --deep): the payload; the records are a note in info and, with --deep, damage in verify too."""
    from mqtool.causes import linked
    from mqtool.kafka import ops
    from mqtool.options import VerifyOptions

    part, at = _undecodable_partition(tmp_path)
    store = part.parent

    def run(deep):
        findings, summary_fn = ops.verify("store", str(store), VerifyOptions(progress=False, deep=deep))
        gen, summary = linked(findings, summary_fn)
        spans = {f.code: f.span for f in gen if f.severity == "error"}
        s = summary()
        return spans, (s.damaged_ranges, s.damaged_bytes)

    def span(name):
        return (at[name][0], sum(at[name]))

    spans, damaged = run(False)
    assert spans == {"kafka.payload-inflate-failed": span("inflate")}
    assert damaged == (1, at["inflate"][1])
    info = build_info(store, None, InfoOptions(progress=False))
    assert (info.damage_total, info.damaged_bytes) == damaged
    assert [(d.position, d.length) for d in info.damage] == [at["inflate"]]
    assert any("1 batch with a CRC that holds had records that do not decode" in n for n in info.notes), info.notes
    spans, damaged = run(True)
    assert spans == {"kafka.payload-inflate-failed": span("inflate"), "kafka.records-undecodable": span("records")}
    assert damaged == (2, at["inflate"][1] + at["records"][1])


# ---- control batches: counted apart, by the type in their control record key (as dump --deep reads it) -------------

def test_control_batches_counted_by_type(tmp_path, run_cli):
    """Transaction markers and KRaft control records were one number in ``info`` (control records, from the batch
    header), while ``dump kafka --deep`` names each one's type. Hand-built: COMMIT (pid 5), ABORT (pid 6),
    LEADER_CHANGE, one batch of KRAFT_VERSION + KRAFT_VOTERS, a type Kafka does not define (9), and an ABORT
    whose CRC fails (damage: no type, no count, as for data batches)."""
    from builders import kafka_batch, kafka_control_batch

    from formats import kafka as K

    txn = dict(attrs=K.TRANSACTIONAL_FLAG_MASK, epoch=0, seq=0)
    bad = bytearray(kafka_control_batch(11, [K.CONTROL_ABORT], pid=7, epoch=0))
    bad[K.V2_CRC_OFFSET] ^= 0xFF
    log = b"".join([kafka_batch(0, 2, pid=5, **txn), kafka_control_batch(2, [K.CONTROL_COMMIT], pid=5, epoch=0),
                    kafka_batch(3, 1, pid=6, **txn), kafka_control_batch(4, [K.CONTROL_ABORT], pid=6, epoch=0),
                    kafka_control_batch(5, [2]), kafka_control_batch(6, [5, 6]), kafka_control_batch(8, [9]),
                    kafka_batch(9, 2), bytes(bad), kafka_batch(12, 3)])
    part = tmp_path / "logdir" / "orders-0"
    part.mkdir(parents=True)
    (part / f"{0:020d}.log").write_bytes(log)
    code, out, err = run_cli("info", part.parent, "--json")
    d = json.loads(out)
    assert code == 1, err                           # the bad CRC
    assert d["messages"] == 2 + 1 + 2 + 3
    types = {"ABORT": 1, "COMMIT": 1, "KRAFT_VERSION": 1, "KRAFT_VOTERS": 1, "LEADER_CHANGE": 1, "UNKNOWN(9)": 1}
    assert d["overview"]["transactions"] == {"control_batches": 6, "control_records": 6, "transactional_batches": 5,
                                             "control_types": types}
    assert d["damage_total"] == 1
    # the same types, record by record, as dump kafka --deep names them (batches whose CRC holds)
    code, out, _ = run_cli("dump", "kafka", part, "--deep", "--json")
    rows = [json.loads(x) for x in out.splitlines()]
    named = Counter(r["control_type"] for r in rows if r["kind"] == "record" and r.get("control_type")
                    and r["crc_ok"])
    assert dict(named) == types


def test_control_types_of_the_real_stores():
    """broker-append: expected.json's control batches are 'ABORT marker pid 3000', 'COMMIT marker pid 2000',
    'ABORT marker pid 4000'; the KRaft metadata log holds 1 control batch (MANIFEST), which dump names."""
    exp = [b for b in _batches() if b["isControl"]]
    want = Counter(b["desc"].split()[0] for b in exp)
    assert want == {"ABORT": 2, "COMMIT": 1}
    info = build_info(_ba(), None, InfoOptions(progress=False))
    assert info.overview["transactions"]["control_types"] == dict(want)
    assert info.overview["transactions"]["control_batches"] == len(exp) == 3
    kraft = build_info(require_realdata("kafka", "ldi-poc-kraft-2026", "8030792"), None, InfoOptions(progress=False))
    assert kraft.overview["transactions"]["control_batches"] == 1
    assert sum(kraft.overview["transactions"]["control_types"].values()) == 1


# ---- inner legacy messages whose own CRC fails: the wrapper's span, in verify, info and report alike -----------------

def test_inner_crc_mismatch_is_damage_of_the_wrapper_in_verify_info_and_report(tmp_path):
    """A v1 gzip wrapper (offsets 3..5) whose inner messages 1 and 2 (offsets 4, 5) carry a wrong CRC-32, the
    wrapper's own CRC right, between two good v2 batches. ``inner-crc-mismatch`` came only with --deep, one per
    message and without a span, so info, the damage count and the report counted nothing. Now: one finding per
    wrapper (first bad message's offset, how many) with the wrapper's bytes as its span, with or without --deep,
    and info and report count that same range."""
    from builders import kafka_batch, kafka_legacy_message, kafka_legacy_wrapper

    from mqtool.causes import linked
    from mqtool.kafka import ops
    from mqtool.options import VerifyOptions
    from mqtool.report import build_report

    T = 1_760_000_000_000
    inner = [kafka_legacy_message(i, b"inner-%d" % i, ts=T + i, crc=None if i == 0 else 0x12345678)
             for i in range(3)]
    wrapper = kafka_legacy_wrapper(5, inner, ts=T + 2)
    head = kafka_batch(0, 3)
    log = head + wrapper + kafka_batch(6, 3)
    part = tmp_path / "logdir" / "orders-0"
    part.mkdir(parents=True)
    (part / f"{0:020d}.log").write_bytes(log)
    store = part.parent
    span = (len(head), len(head) + len(wrapper))

    for deep in (False, True):
        findings, summary_fn = ops.verify("store", str(store), VerifyOptions(progress=False, deep=deep))
        gen, summary = linked(findings, summary_fn)
        errs = [f for f in gen if f.severity == "error"]
        assert [(f.code, f.position, f.offset, f.actual, f.span) for f in errs] == \
            [("kafka.inner-crc-mismatch", len(head), 4, 2, span)], deep
        s = summary()
        assert (s.damaged_ranges, s.damaged_bytes) == (1, len(wrapper))
    info = build_info(store, None, InfoOptions(progress=False))
    assert (info.damage_total, info.damaged_bytes) == (1, len(wrapper))
    assert [(d.position, d.length, d.code) for d in info.damage] == [(len(head), len(wrapper), "inner-crc-mismatch")]
    assert info.messages == 3 + 3 + 3
    _, rinfo, rsummary, _ = build_report(store, None, InfoOptions(progress=False), VerifyOptions(progress=False))
    assert (rinfo.damage_total, rinfo.damaged_bytes) == (rsummary.damaged_ranges, rsummary.damaged_bytes) == \
        (1, len(wrapper))
    assert rsummary.errors == 1
