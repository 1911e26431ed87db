"""Spark (local[2]) on an s3:// store served by moto on 127.0.0.1: the data source and `export --engine
spark` read the remote store (executors fetch the bytes themselves through mqtool, no Hadoop s3a connector)
and give what the local copy gives; an executor that lacks the driver's local shadow rebuilds it."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import require_spark
from remote_helpers import BUCKET, _stores, s3, upload  # noqa: F401  (the moto server fixture)

require_spark()     # the session-scoped local[2] fixture `spark` is in conftest

pytestmark = pytest.mark.spark


def _rows(df):
    return sorted(repr(r.asDict()) for r in df.collect())


def test_data_source_reads_s3(s3, spark):  # noqa: F811
    family = "kafka"
    local = _stores()[family]
    url = upload(s3, local, f"spark/{family}/{local.name}")
    want = spark.read.format("mqtool").option("format", family).load(str(local))
    got = spark.read.format("mqtool").option("format", family).load(url)
    a = [x.replace(str(local), "<S>") for x in _rows(want)]
    raw = _rows(got)
    assert "mqtool-remote-" not in repr(raw)     # rows name the files by their URL, not the local shadow
    assert a and a == [x.replace(url, "<S>") for x in raw]      # the store column too: the URL
    damage = spark.read.format("mqtool").option("format", family).option("rows", "verify").load(url).collect()
    assert damage and "mqtool-remote-" not in repr(damage)
    # an executor on another machine has no shadow: it is rebuilt from what the reader carries
    import json
    import tempfile

    roots = [m.parent for m in Path(tempfile.gettempdir()).glob("mqtool-remote-*/.mqtool-remote.json")
             if json.loads(m.read_text())["url"] == url]
    assert roots
    for r in roots:
        shutil.rmtree(r)
    assert [x.replace(url, "<S>") for x in _rows(got)] == a


def test_export_engine_spark_s3_to_s3(s3, spark, run_cli, tmp_path):  # noqa: F811
    import pyarrow.parquet as pq

    local = _stores()["litemq"]
    url = upload(s3, local, f"spark-export/{local.name}")
    out = f"s3://{BUCKET}/spark-out/all.parquet"
    want = run_cli("export", str(local), "--to", tmp_path / "l.parquet")   # engines agree: tests/test_spark*
    got = run_cli("export", url, "--to", out, "--engine", "spark")
    assert want[0] == got[0] == 0, (want, got)
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix="spark-out/")["Contents"]]
    assert keys and not any(".mqtool-tmp-" in k for k in keys)
    for k in keys:
        d = tmp_path / "dl" / k
        d.parent.mkdir(parents=True, exist_ok=True)
        s3.download_file(BUCKET, k, str(d))
    a = pq.read_table(tmp_path / "l.parquet").drop_columns(["store", "store_full"]).to_pylist()
    b = pq.read_table(tmp_path / "dl" / "spark-out" / "all.parquet").drop_columns(["store", "store_full"]).to_pylist()
    assert a and sorted(map(repr, a)) == sorted(map(repr, b))
