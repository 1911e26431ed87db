"""Kafka record headers are an ordered list and a key may repeat (issue 15, "Kafka headers"): every output
keeps all of them, in stored order, as ``[key, value]`` pairs (value null or rendered like a record value).

The store is built here with the fixture builder's construct helpers; the expected pairs are the ones written.
"""
from __future__ import annotations

import base64
import json

import pytest

from builders import kafka_builder

BK = kafka_builder()

HEADERS = [(b"traceparent", b"00-a"), (b"traceparent", b"00-b"), (b"n", None), (b"traceparent", b"00-c"),
           (b"caf\xc3\xa9", b"")]


def _store(tmp_path):
    recs = [BK.record(0, 0, b"k0", b"v0"), BK.record(1, 1, b"k1", b"v1", HEADERS)]
    part = tmp_path / "logs" / "traced-0"
    part.mkdir(parents=True)
    (part / "00000000000000000000.log").write_bytes(BK.batch_v2(0, recs, base_ts=BK.T0, max_ts=BK.T0 + 1))
    return tmp_path / "logs"


def _want(render):
    return [[k.decode("utf-8"), None if v is None else render(v)] for k, v in HEADERS]


def _records(out):
    return [r for r in map(json.loads, out.splitlines()) if r.get("kind") == "record"]


@pytest.mark.parametrize("lane", ["native", "python"])
def test_dump_print_data_keeps_repeated_keys_in_order(tmp_path, run_cli, monkeypatch, lane):
    if lane == "python":
        monkeypatch.setenv("MQTOOL_NATIVE", "0")
    store = _store(tmp_path)
    code, out, _ = run_cli("dump", "kafka", store, "--print-data", "--json")
    recs = _records(out)
    assert code == 0 and recs[0]["headers"] == []
    assert recs[1]["headers"] == _want(lambda v: v.decode("utf-8"))
    assert recs[1]["header_keys"] == [k for k, _ in _want(bytes)]
    code, out, _ = run_cli("dump", "kafka", store, "--print-data", "--body", "hex", "--json")
    assert _records(out)[1]["headers"] == _want(bytes.hex)


def test_query_and_salvage_keep_repeated_keys(tmp_path, run_cli):
    store = _store(tmp_path)
    code, out, _ = run_cli("query", store, "--offset", 1, "--json")
    rows = [json.loads(x) for x in out.splitlines()]
    assert code == 0 and rows[-1]["headers"] == _want(lambda v: v.decode("utf-8"))
    dst = tmp_path / "case" / "salvage.ndjson"
    run_cli("verify", "store", store, "--salvage-out", dst)
    salv = [json.loads(x) for x in dst.read_text().splitlines()]
    assert salv[1]["headers"] == _want(lambda v: base64.b64encode(v).decode("ascii"))


def test_parquet_rows_keep_repeated_keys(tmp_path):
    """The Spark/Parquet row schema and writer (record rows as the Spark source makes them with deep=true)."""
    pytest.importorskip("pyarrow")
    from mqtool.export import _PartitionedWriter, read_dataset
    from mqtool.kafka import ranges as KR
    from mqtool.options import DumpOptions

    store = _store(tmp_path)
    out = tmp_path / "out.parquet"
    out.mkdir()
    opts = DumpOptions(deep=True, print_data=True, body="base64")
    with _PartitionedWriter(out, KR.ROW_FIELDS, ["store", "topic"], False) as w:
        for rng in KR.plan(str(store)):
            for row in KR.iter_range_rows(rng, opts):
                row["store"] = str(store)
                w.add(row)
    rows = read_dataset(out, KR.ROW_FIELDS, ["store", "topic"]).to_pylist()
    by = {r["offset"]: r for r in rows if r.get("kind") == "record"}
    assert by[1]["headers"] == _want(lambda v: base64.b64encode(v).decode("ascii"))
    assert by[0]["headers"] == []
