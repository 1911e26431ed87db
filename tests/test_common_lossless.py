"""Bytes are never lossy: text that is not UTF-8 comes out as base64 of the exact bytes with a
``<field>_encoding: "base64"`` marker in JSON (tables decode it again, with escapes for the bad bytes).
The compiled dump lanes leave such units to the Python path; output is the same with them on and off."""
from __future__ import annotations

import base64
import json
import shutil

import pytest

from conftest import FIXTURES
from builders import kafka_builder, rocketmq_unit as unit

TOPIC = b"Or\xffders"
PROPS = b"KEYS\x01k\xfe1\x02TAGS\x01tag\xc3"
BODY = b"\x80\x81 not text"


def _b64(b: bytes) -> str:
    return base64.b64encode(b).decode("ascii")


def _rmq_store(tmp_path):
    store = tmp_path / "store"
    (store / "commitlog").mkdir(parents=True)
    first = unit(topic=b"Fine", body=b"plain", phys=0)
    data = first + unit(topic=TOPIC, body=BODY, props=PROPS, phys=len(first), queue_offset=1)
    (store / "commitlog" / "00000000000000000000").write_bytes(data + bytes(4096 - len(data)))
    return store


def _dump(run_cli, *args):
    code, out, err = run_cli("dump", "commitlog", *args, "--json")
    assert code == 0, err
    return [json.loads(x) for x in out.splitlines()]


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_rocketmq_text_that_is_not_utf8_keeps_every_byte(run_cli, tmp_path, jobs):
    store = _rmq_store(tmp_path)
    fine, odd = _dump(run_cli, store, "--body", "text", "--jobs", jobs, "--split-size", "64")
    assert fine["topic"] == "Fine" and "topic_encoding" not in fine and fine["body"] == "plain"
    assert "properties_raw" not in fine and "body_encoding" not in fine
    assert odd["topic"] == _b64(TOPIC) and odd["topic_encoding"] == "base64"
    assert odd["properties_raw"] == _b64(PROPS) and odd["properties_raw_encoding"] == "base64"
    assert odd["body"] == _b64(BODY) and odd["body_encoding"] == "base64"


def test_the_compiled_lane_leaves_such_units_to_python(run_cli, tmp_path, monkeypatch):
    store = _rmq_store(tmp_path)
    monkeypatch.setenv("MQTOOL_NATIVE", "0")
    from mqtool.rocketmq import nativedump

    off = _dump(run_cli, store, "--body", "text", "--jobs", "1")
    monkeypatch.delenv("MQTOOL_NATIVE")
    if nativedump.helper() is None:
        pytest.skip("compiled helper rmqdump not built")
    on = _dump(run_cli, store, "--body", "text", "--jobs", "1")
    assert on == off


def test_tables_show_the_decoded_text(run_cli, tmp_path):
    store = _rmq_store(tmp_path)
    code, out, _ = run_cli("dump", "commitlog", store, "--as", "vertical", "--body", "text")
    assert code == 0
    assert "Or\\xffders" in out and _b64(TOPIC) not in out
    assert "\\x80\\x81 not text" in out


def test_litemq_text_that_is_not_utf8_keeps_every_byte(run_cli, tmp_path):
    store = tmp_path / "store"
    shutil.copytree(FIXTURES / "litemq" / "store", store)
    seg = store / "commitlog" / "00000000000000000000"
    data = bytearray(seg.read_bytes())
    first = data.index(b"orders")                  # the first record's topic, patched in place: same length
    data[first + 2] = 0xFF
    tag = data.index(b"TagA")
    data[tag + 3] = 0xC3
    seg.write_bytes(bytes(data))
    code, out, err = run_cli("dump", "commitlog", store, "--json", "--limit", "1")
    row = json.loads(out.splitlines()[0])
    assert row["topic"] == _b64(b"or\xffers") and row["topic_encoding"] == "base64"
    assert row["tags"] == [_b64(b"Tag\xc3")] and row["tags_encoding"] == "base64"
    assert set(row["bad_utf8"]) == {"Topic", "Tags"}
    assert "msg_id_encoding" not in row and row["msg_id"] == "1795000000000000000-0"
    code, out, _ = run_cli("dump", "commitlog", store, "--as", "vertical", "--limit", "1")
    assert "or\\xffers" in out


@pytest.mark.parametrize("native", ["1", "0"])
def test_kafka_keys_values_and_headers_keep_every_byte(run_cli, tmp_path, monkeypatch, native):
    monkeypatch.setenv("MQTOOL_NATIVE", native)
    bk = kafka_builder()
    recs = [bk.record(0, 0, b"plain", b"text"), bk.record(1, 1, b"k\xff", b"\x00\x9f\x92\x96", [(b"h\xc3", b"v")])]
    part = tmp_path / "logs" / "bin-0"
    part.mkdir(parents=True)
    (part / "00000000000000000000.log").write_bytes(bk.batch_v2(0, recs, base_ts=bk.T0, max_ts=bk.T0 + 1))
    code, out, err = run_cli("dump", "kafka", part, "--print-data", "--json")
    assert code == 0, err
    plain, odd = [r for r in map(json.loads, out.splitlines()) if r["kind"] == "record"]
    assert plain["key"] == "plain" and plain["value"] == "text" and "key_encoding" not in plain
    assert odd["key"] == _b64(b"k\xff") and odd["key_encoding"] == "base64"
    assert odd["value"] == _b64(b"\x00\x9f\x92\x96") and odd["value_encoding"] == "base64"
    assert odd["headers"] == [[_b64(b"h\xc3"), _b64(b"v")]] and odd["headers_encoding"] == "base64"
    code, out, _ = run_cli("dump", "kafka", part, "--print-data", "--as", "vertical")
    assert "k\\xff" in out
