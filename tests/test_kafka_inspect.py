"""`mqtool inspect` on Kafka: batches field by field from a real partition (expected.json), batches built by the
fixture writer with records and headers (positions by hand from DefaultRecordBatch/DefaultRecord), damage."""
from __future__ import annotations

import json
import struct

import pytest
from crc32c import crc32c

from conftest import load_json, require_realdata
from formats import kafka as K
from mqtool.kafka.inspect import inspect, inspect_entry
from tests.builders import kafka_builder

PART = ("kafka", "generated-4.0.0-SNAPSHOT", "broker-append")


def _by(ins):
    return {f.path: f for f in ins.fields}


@pytest.fixture(scope="module")
def real():
    exp = load_json(require_realdata(*PART, "expected.json"))
    return require_realdata(*PART, "forensics-0"), exp["batches"]


def _batch_of(batches, offset):
    return next(b for b in batches if b["baseOffset"] <= offset <= b["lastOffset"])


@pytest.mark.parametrize("offset", [2, 21, 38, 44, 63, 83, 95, 120])
def test_real_batch_matches_expected(real, offset):
    part, batches = real
    b = _batch_of(batches, offset)
    ins = inspect(part, offset=offset)
    by = _by(ins)
    assert ins.file.endswith(f"{b['segment']:020d}.log")
    assert ins.position == b["position"] and ins.size == b["size"]
    assert ins.ok, [f.to_row(0) for f in ins.failed]
    crc = by["crc"] if b["magic"] < 2 else by["header.crc"]
    assert crc.value == b["crc"] and crc.ok
    if b["magic"] == 2:
        assert ins.kind == "batch"
        assert by["header.baseOffset"].value == b["baseOffset"]
        assert by["header.baseOffset"].value + by["header.lastOffsetDelta"].value == b["lastOffset"]
        assert ins.summary["codec"] == b["codec"] and by["header.producerId"].value == b["producerId"]
        marked = [f for f in ins.fields if f.target]
        assert len(marked) == 1 and marked[0].value == f"offset {offset}" and marked[0].depth == 1
        space = "file" if b["codec"] == "none" else "records"
        assert all(f.space == space for f in ins.fields if f.path.startswith("records["))
    else:
        assert ins.kind == "legacy-message" and by["offset"].value == b["lastOffset"]


@pytest.mark.parametrize("offset", [5, 13, 22, 33])    # v0 gzip, v0 lz4, v1 gzip, v1 LogAppendTime gzip
def test_real_legacy_wrapper_inner_messages(real, offset):
    part, batches = real
    b = _batch_of(batches, offset)
    ins = inspect(part, offset=offset)
    assert ins.kind == "legacy-message" and ins.position == b["position"] and ins.ok
    assert ins.summary["base_offset"] == b["baseOffset"] and ins.summary["last_offset"] == b["lastOffset"]
    inner = [f for f in ins.fields if f.depth == 1 and f.path.startswith("messages[")]
    assert [f.value for f in inner] == [f"offset {o}" for o in range(b["baseOffset"], b["lastOffset"] + 1)]
    assert all(f.space == "messages" for f in inner) and [f.value for f in inner if f.target] == [f"offset {offset}"]
    crcs = [f for f in ins.fields if f.path.endswith("].crc")]
    assert len(crcs) == len(inner) and all(f.ok and f.code == "kafka.inner-crc-mismatch" for f in crcs)


def test_real_headers_nested(real):
    part, _ = real
    ins = inspect(part, offset=37)
    heads = [f for f in ins.fields if ".headers[" in f.path and f.name == "headerKey"]
    assert heads and all(f.depth == 4 for f in heads)
    rec = next(f for f in ins.fields if f.path == "records[0]")
    assert rec.depth == 1 and next(f for f in ins.fields if f.path == "records[0].key").depth == 2


def test_cli_logdir_with_many_partitions_is_usage_error(run_cli):
    logdir = require_realdata("kafka", "generated-4.0.0-SNAPSHOT", "coordinator")
    code, _, err = run_cli("inspect", logdir, "--offset", 0)
    assert code == 2 and "give one partition directory" in err


def test_cli_offset_past_the_log(real, run_cli):
    part, _ = real
    code, _, err = run_cli("inspect", part, "--offset", 10 ** 9)
    assert code == 2 and "in no batch" in err


# ---- built batches: positions by hand ----------------------------------------------------------------------

def _batch(**kw):
    B = kafka_builder()
    recs = [B.record(0, 0, b"k0", b"v0", headers=[(b"h1", b"x"), (b"h2", None)]), B.record(1, 5, None, b"v1")]
    return B.batch_v2(100, recs, base_ts=B.T0, max_ts=B.T0 + 5, **kw)


def test_batch_positions_and_nesting():
    raw = _batch()
    ins = inspect_entry(raw, 0, "00000000000000000100.log", 101)
    pos = {f.path: (f.position, f.size, f.depth) for f in ins.fields}
    # DefaultRecordBatch: 8 baseOffset, 4 length, 4 epoch, 1 magic, 4 crc, 2 attributes, 4 lastOffsetDelta,
    # 8+8 timestamps, 8 pid, 2 epoch, 4 sequence, 4 count = 61
    assert pos["header.crc"] == (17, 4, 0) and pos["header.attributes"] == (21, 2, 0)
    assert pos["header.recordsCount"] == (57, 4, 0) and pos["records"] == (61, len(raw) - 61, 0)
    # record 0: varint length, attributes, ts delta, offset delta, key length 2 (zigzag 4), "k0", value, headers;
    # header 0: key length, "h1", value length, "x" = 5 bytes
    assert pos["records[0]"][::2] == (61, 1) and pos["records[0].length"] == (61, 1, 2)
    assert pos["records[0].attributes"] == (62, 1, 2) and pos["records[0].keyLength"] == (65, 1, 2)
    assert pos["records[0].key"] == (66, 2, 2) and pos["records[0].value"] == (69, 2, 2)
    assert pos["records[0].headerCount"] == (71, 1, 2) and pos["records[0].headers"][2] == 2
    assert pos["records[0].headers[0]"] == (72, 5, 3) and pos["records[0].headers[0].headerKey"] == (73, 2, 4)
    assert pos["records[0].headers[1].headerValue"][1:] == (0, 4)      # null value: absent
    by = _by(ins)
    assert by["records[0].key"].value == "k0" and by["records[0].headers[0].headerKey"].value == "h1"
    assert by["records[1].key"].value is None and by["records[1]"].target
    assert ins.ok and by["header.recordsCount"].ok and by["header.lastOffsetDelta"].ok


def test_gzip_batch_walks_inflated_records():
    ins = inspect_entry(_batch(codec=K.CODEC_GZIP), 0, "x.log", 100)
    by = _by(ins)
    assert by["records"].ok and by["records[0].key"].space == "records" and by["records[0]"].position == 0
    assert by["records[0]"].target and ins.ok


def test_flipped_byte_fails_crc32c():
    raw = bytearray(_batch())
    raw[-1] ^= 0x01
    ins = inspect_entry(bytes(raw), 0, "x.log", None)
    crc = _by(ins)["header.crc"]
    assert crc.ok is False and crc.code == "kafka.crc-mismatch"
    assert crc.expected == crc32c(bytes(raw[21:])) and crc.actual == struct.unpack(">I", raw[17:21])[0]


def test_records_count_and_last_delta_checked():
    raw = bytearray(_batch())
    raw[57:61] = struct.pack(">i", 3)                   # claims 3 records, 2 are there
    raw[23:27] = struct.pack(">i", 0)                   # lastOffsetDelta below the last record's delta (1)
    raw[17:21] = struct.pack(">I", crc32c(bytes(raw[21:])))
    by = _by(inspect_entry(bytes(raw), 0, "x.log", None))
    assert (by["header.recordsCount"].ok, by["header.recordsCount"].expected, by["header.recordsCount"].actual) \
        == (False, 2, 3)
    assert by["header.lastOffsetDelta"].ok is False and by["header.lastOffsetDelta"].code == "kafka.record-offsets"
    assert by["header.crc"].ok


def test_truncated_batch_breaks_inside_the_records():
    raw = _batch()[:70]                                 # cut inside record 0's key ("k0" at 66..68 fits, value not)
    ins = inspect_entry(raw, 0, "x.log", None)
    assert _by(ins)["header.batchLength"].ok is False and _by(ins)["header.batchLength"].code == "kafka.partial-tail"
    assert ins.broken is not None and ins.broken.path == "records[0].value" and ins.broken.position == 69
    assert not ins.ok


def test_cli_json_on_a_built_segment(tmp_path, run_cli):
    part = tmp_path / "t-0"
    part.mkdir()
    B = kafka_builder()
    first = B.batch_v2(0, [B.record(0, 0, b"a", b"b")], base_ts=B.T0, max_ts=B.T0)
    (part / f"{0:020d}.log").write_bytes(first + _batch())
    code, out, _ = run_cli("inspect", part, "--offset", 100, "--json")
    rows = [json.loads(x) for x in out.splitlines()]
    assert code == 0 and rows[-1]["kind"] == "record" and rows[-1]["position"] == len(first)
    assert rows[-1]["base_offset"] == 100 and rows[-1]["target_found"] is True
    target = [r for r in rows if r.get("target")]
    assert len(target) == 1 and target[0]["path"] == "records[0]"


def test_inflate_is_bounded(monkeypatch):
    import mqtool.kafka.inspect as KI
    monkeypatch.setattr(KI, "INFLATE_LIMIT", 16)        # the records inflate to more than 16 bytes
    ins = inspect_entry(_batch(codec=K.CODEC_GZIP), 0, "x.log", None)
    area = _by(ins)["records"]
    assert area.ok is None and "not walked" in area.note and not any(f.path.startswith("records[") for f in ins.fields)
    assert _by(ins)["header.recordsCount"].ok is None    # nothing to count: not a failure


def test_terminal_view_of_a_gzip_batch(tmp_path, run_cli):
    log = tmp_path / f"{100:020d}.log"
    log.write_bytes(_batch(codec=K.CODEC_GZIP))
    code, out, _ = run_cli("inspect", log, "--offset", 101, "--as", "table", "--color", "never")
    lines = out.splitlines()
    assert code == 0 and lines[-1].startswith("all ")
    assert "^13" in out                                   # the compressed area is marked in the hexdump
    assert any("records+" in ln and "records[1]" in ln and "◀" in ln for ln in lines)


def test_every_real_batch_passes(real):
    part, batches = real
    for b in batches:
        ins = inspect(part, offset=b["lastOffset"])
        assert ins.ok and ins.position == b["position"] and ins.size == b["size"], (b, ins.failed, ins.broken)


def test_many_records_are_checked_but_not_all_listed():
    import mqtool.kafka.inspect as KI
    n = KI.RECORD_ROWS + 50
    raw = kafka_builder().batch_v2(0, [kafka_builder().record(i, i, b"k", b"v") for i in range(n)], base_ts=0,
                                    max_ts=n)
    ins = inspect_entry(raw, 0, "x.log", n - 10)             # the asked record lies past the listed ones
    by = _by(ins)
    listed = [f for f in ins.fields if f.depth == 1]
    assert len(listed) == KI.RECORD_ROWS + 1 and listed[-1].target and listed[-1].value == f"offset {n - 10}"
    assert by["header.recordsCount"].ok and by["header.lastOffsetDelta"].ok and ins.ok
    assert f"49 records after the first {KI.RECORD_ROWS} checked but not listed" in by["records"].note
