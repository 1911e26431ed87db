"""`mqtool inspect` on LiteMQ: records field by field from the real store (expected.json), records built by the
schema (positions by hand: u32 length, u32 magic, u16-prefixed strings, u32-counted lists), damaged copies."""
from __future__ import annotations

import json

import pytest

from conftest import load_json, require_realdata
from mqtool.litemq.inspect import inspect, inspect_record
from tests.builders import litemq_builder


def _by(ins):
    return {f.path: f for f in ins.fields}


@pytest.fixture(scope="module")
def real():
    exp = load_json(require_realdata("litemq", "clean", "expected.json"))["messages"]
    return require_realdata("litemq", "clean", "data", "broker"), {m["seq"]: m for m in exp if m.get("accepted")}


@pytest.mark.parametrize("seq", [1, 2, 5, 20, 134])     # plain, UTF-8 tags/keys/properties, empty body, 100 KiB, last
def test_real_record_matches_expected(real, seq):
    store, exp = real
    m = exp[seq]
    ins = inspect(store, offset=m["commitlog_offset"])
    by = _by(ins)
    assert ins.ok and ins.broken is None
    assert ins.file.endswith(m["commitlog_file"]) and ins.position == m["offset_in_file"]
    assert ins.size == m["store_size_incl_prefix"] and by["length"].value == m["store_size_incl_prefix"] - 4
    assert ins.summary["topic"] == m["topic"] and ins.summary["message_id"] == m["message_id"]
    assert ins.summary["tags"] == m["tags"] and ins.summary["keys"] == m["keys"]
    assert by["Body.length"].value == m["body_len"] and by["Body.data"].size == m["body_len"]
    assert by["QueueID"].value == m["queue_id"] and by["Priority"].value == m["priority"]
    props = {by[f"Properties[{i}].key"].value: by[f"Properties[{i}].value"].value for i in range(len(m["properties"]))}
    assert props == m["properties"]
    assert all(f.depth == 1 for f in ins.fields if f.path.startswith("Tags[") and f.path.endswith("]"))


def test_real_big_body_is_bounded(real):
    store, exp = real
    ins = inspect(store, offset=exp[20]["commitlog_offset"])
    body = _by(ins)["Body.data"]
    assert body.value is None and body.tail and len(body.head) < 200
    assert len(ins.head) + len(ins.tail) < 4096


def test_cli_offset_beyond_store(real, run_cli):
    store, _ = real
    code, out, err = run_cli("inspect", store, "--offset", 10 ** 10)
    assert code == 2 and out == "" and "beyond the end of the commitlog" in err


# ---- built records: positions by hand ----------------------------------------------------------------------

def _record(**kw):
    B = litemq_builder()
    return B.encode_record(B.new_fields(MessageID="id1", Topic="top", Tags=["a"], Keys=[], Body=b"hello",
                                        Properties=[("k", "v")], **kw))


def test_positions():
    raw = _record()
    ins = inspect_record(raw, 0, "00000000000000000000", 0)
    pos = {f.path: (f.position, f.size, f.depth) for f in ins.fields}
    assert pos["length"] == (0, 4, 0) and pos["magic"] == (4, 4, 0)
    assert pos["MessageID"] == (8, 5, 0) and pos["MessageID.length"] == (8, 2, 1)
    assert pos["MessageID.data"] == (10, 3, 1)
    assert pos["Topic"] == (13, 5, 0) and pos["Tags"] == (18, 7, 0) and pos["Tags.count"] == (18, 4, 1)
    assert pos["Tags[0]"] == (22, 3, 1) and pos["Tags[0].data"] == (24, 1, 2)
    assert pos["Keys"] == (25, 4, 0) and pos["Properties"] == (29, 10, 0)
    assert pos["Properties[0]"] == (33, 6, 1) and pos["Properties[0].key.data"] == (35, 1, 3)
    assert pos["Body"] == (39, 9, 0) and pos["Body.data"] == (43, 5, 1)
    assert pos["Padding"] == (len(raw) - 6, 6, 0)
    assert ins.ok and _by(ins)["length"].expected == len(raw) - 4


def test_bad_magic():
    raw = bytearray(_record())
    raw[4] ^= 0xFF
    ins = inspect_record(bytes(raw), 0, "f", None)
    assert ins.broken.path == "magic" and ins.broken.position == 4 and _by(ins)["magic"].ok is False


def test_truncated_record_breaks_where_data_ends():
    raw = _record()[:45]                                 # inside Body.data (43..48)
    ins = inspect_record(raw, 0, "f", None)
    assert _by(ins)["length"].ok is False and _by(ins)["length"].code == "bad-length"
    assert ins.broken.path == "Body.data" and ins.broken.position == 43


def test_length_disagrees_with_fields():
    raw = bytearray(_record() + bytes(4))
    raw[0:4] = (len(raw) - 4).to_bytes(4, "big")         # 4 bytes more than the fields use
    f = _by(inspect_record(bytes(raw), 0, "f", None))["length"]
    assert f.ok is False and (f.expected, f.actual) == (len(raw) - 8, len(raw) - 4)


def test_padding_and_stored_offset_checked():
    raw = bytearray(_record(CommitLogOffset=7))
    raw[-1] = 1
    by = _by(inspect_record(bytes(raw), 0, "f", 0))
    assert by["Padding"].ok is False and by["Padding"].code == "padding-not-zero"
    assert by["CommitLogOffset"].ok is False and by["CommitLogOffset"].code == "commitlog-offset-mismatch"


def test_cli_position_on_segment(real, run_cli):
    store, exp = real
    m = exp[2]
    code, out, _ = run_cli("inspect", store / m["commitlog_file"], "--position", m["offset_in_file"], "--json")
    rows = [json.loads(x) for x in out.splitlines()]
    assert code == 0 and rows[-1]["offset"] == m["commitlog_offset"] and rows[-1]["ok"] is True
    assert next(r for r in rows if r["path"] == "Tags[2]")["value"] == m["tags"][2]


def test_huge_count_breaks_without_allocating():
    raw = bytearray(_record())
    raw[18:22] = (0xFFFFFFFF).to_bytes(4, "big")         # Tags.count
    ins = inspect_record(bytes(raw), 0, "f", None)
    assert ins.broken.path == "Tags" and "exceeds" in ins.broken.reason and len(ins.fields) < 20


@pytest.mark.parametrize("ds", ["clean", "crash"])
def test_every_real_record_passes(ds):
    store = require_realdata("litemq", ds, "data", "broker")
    exp = load_json(require_realdata("litemq", ds, "expected.json"))["messages"]
    for m in (m for m in exp if m.get("accepted")):
        ins = inspect(store, offset=m["commitlog_offset"])
        assert ins.ok and ins.size == m["store_size_incl_prefix"], (m["seq"], ins.failed, ins.broken)
