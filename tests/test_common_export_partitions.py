"""Export partition values are bounded and reversible (issue #16 item 7): a 300-character topic and a Kafka
partition directory with a newline in its name export without error; the long value's directory is its
first 32 characters, "~" and 16 hex digits of its SHA-256 (computed here with hashlib), listed in
OUT/_partitions.ndjson with the true value; the newline topic keeps its name (escaped as %0A)."""
from __future__ import annotations

import hashlib
import json
import shutil

import pytest

from conftest import require_realdata
from builders import LONG_TOPIC, OK_TOPIC, PCT_TOPIC, long_topic_store

pytest.importorskip("pyarrow")

LONG, PCT, OK = LONG_TOPIC, PCT_TOPIC, OK_TOPIC


def _dirs(out):
    return sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_dir())


def test_long_topic_is_hashed_and_listed(run_cli, tmp_path):
    store = long_topic_store(tmp_path)
    code, _, err = run_cli("export", store, "--to", tmp_path / "o", "--format", "rocketmq")
    assert code == 0, err
    want = LONG[:32] + "~" + hashlib.sha256(LONG.encode()).hexdigest()[:16]
    pct = "%25" * 32 + "~" + hashlib.sha256(PCT.encode()).hexdigest()[:16]
    tops = {d.rsplit("/", 1)[-1] for d in _dirs(tmp_path / "o") if "/topic=" in d}
    assert tops == {"topic=" + want, "topic=short", "topic=" + pct, "topic=" + OK}
    assert all(len(d.encode()) <= 255 for d in tops)
    idx = [json.loads(x) for x in (tmp_path / "o" / "_partitions.ndjson").read_text().splitlines()]
    assert {"column": "topic", "dir": "topic=" + want, "value": LONG} in idx
    assert {"column": "topic", "dir": "topic=" + pct, "value": PCT} in idx
    assert len([e for e in idx if e["column"] == "topic"]) == 2
    from mqtool.export import partition_value, read_dataset
    from mqtool.rocketmq.ranges import ROW_FIELDS

    rows = read_dataset(tmp_path / "o", ROW_FIELDS, ["store", "topic"]).to_pylist()
    back = {partition_value(e["value"]): e["value"] for e in idx if e["column"] == "topic"}
    assert sorted(back.get(r["topic"], r["topic"]) for r in rows) == sorted([LONG, "short", LONG, PCT, OK])
    # the row keeps the true topic: topic_full where the directory shows a shortened one, else null
    import pyarrow.dataset as ds

    table = ds.dataset(str(tmp_path / "o"), partitioning="hive").to_table()
    got = sorted((r["topic_full"] or r["topic"]) for r in table.to_pylist())
    assert got == sorted([LONG, "short", LONG, PCT, OK])
    assert {r["topic_full"] for r in table.to_pylist() if r["topic"] in ("short", OK)} == {None}


def test_kafka_partition_dir_with_a_newline_keeps_its_topic(run_cli, tmp_path):
    log = tmp_path / "log"
    log.mkdir()
    shutil.copytree(require_realdata("kafka", "kafka-python-3.0.12-patched", "kp-0"), log / "we\nird-0")
    code, _, err = run_cli("export", log, "--to", tmp_path / "o")
    assert code == 0, err
    tops = {d.rsplit("/", 1)[-1] for d in _dirs(tmp_path / "o") if "/topic=" in d}
    assert tops == {"topic=we%0Aird"}
    from mqtool.export import read_dataset
    from mqtool.kafka.ranges import ROW_FIELDS

    rows = read_dataset(tmp_path / "o", ROW_FIELDS, ["store", "topic"]).to_pylist()
    assert rows and {r["topic"] for r in rows} == {"we\nird"} and {r["partition"] for r in rows} == {0}
