"""Spark (local[2], the session of tests/test_common_spark.py): the `mqtool` data source on LiteMQ and Kafka stores
gives the rows of the embedded `dump` exactly, for several split sizes including 1 KiB; `mqtool export` of
a LiteMQ and a Kafka store reads back equal.

Skips like tests/test_common_spark.py without pyspark/pyarrow/Java (fails under CI=true)."""
from __future__ import annotations


import pytest

from conftest import realdata_root, require_realdata, require_spark

require_spark()     # the session-scoped local[2] fixture `spark` is in conftest

from mqtool.kafka import ranges as KR  # noqa: E402
from mqtool.litemq import ranges as LR  # noqa: E402
from mqtool.options import DumpOptions, ScanStats  # noqa: E402

pytestmark = pytest.mark.spark

LITE = ["clean", "crash"]
KAFKA = sorted(p.name for p in (realdata_root() / "kafka").iterdir() if p.is_dir()) \
    if (realdata_root() / "kafka").exists() else []
EXTRA = {"litemq": set(), "kafka": {"topic", "partition"}}


def lite_path(name) -> str:
    return str(require_realdata("litemq", name, "data", "broker"))


def kafka_path(name) -> str:
    return str(require_realdata("kafka", name))


def embedded(family, path, **kw) -> list[dict]:
    from mqtool.detect import family_module

    part = "commitlog" if family == "litemq" else "kafka"
    return list(family_module(family, "ops").dump(part, path, DumpOptions(**kw), ScanStats())[1])


def by_store(df) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in df.collect():
        d = r.asDict(recursive=True)
        out.setdefault(d["store"], []).append(d)
    return out


def same_rows(family, got: list[dict], want: list[dict]) -> None:
    """Spark rows carry every column: the embedded row's keys must hold its values, every other column
    (except store and the family's extra columns) must be null."""
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert {k: g.get(k) for k in w} == w
        rest = {k: v for k, v in g.items() if k not in w and k != "store" and k not in EXTRA[family]}
        assert all(v is None for v in rest.values()), rest


@pytest.mark.parametrize("split,maxparts", [("1K", 4), ("3000", 6), (None, None)])
def test_litemq_rows_equal_embedded(spark, split, maxparts):  # noqa: F811
    paths = [lite_path(n) for n in LITE]
    r = spark.read.format("mqtool").option("format", "litemq").option("body", "base64")
    if split:
        r = r.option("splitSize", split)
    if maxparts:
        r = r.option("maxPartitions", str(maxparts))
    df = r.load(paths)
    if maxparts:
        assert df.rdd.getNumPartitions() == maxparts
    got = by_store(df)
    for p in paths:
        same_rows("litemq", got[p], embedded("litemq", p, body="base64"))


def test_kafka_rows_equal_embedded_on_every_real_store(spark):  # noqa: F811
    paths = [kafka_path(n) for n in KAFKA]
    assert paths
    df = (spark.read.format("mqtool").option("format", "kafka").option("splitSize", "1K")
          .option("maxPartitions", "6").load(paths))
    got = by_store(df)
    for p in paths:
        same_rows("kafka", got.get(p, []), embedded("kafka", p))


@pytest.mark.parametrize("split", ["1K", "64K"])
def test_kafka_deep_rows_with_bodies(spark, split):  # noqa: F811
    paths = [kafka_path("generated-4.0.0-SNAPSHOT"), kafka_path("kaipasubhash-kafka-logs-2022")]
    df = (spark.read.format("mqtool").option("format", "kafka").option("deep", "true")
          .option("body", "base64").option("splitSize", split).option("maxPartitions", "4").load(paths))
    got = by_store(df)
    for p in paths:
        want = embedded("kafka", p, deep=True, print_data=True, body="base64")
        for w in want:
            w.pop("decoded", None)          # internal-topic decoding: not a Spark column
        assert any(w["kind"] == "record" and w.get("value") for w in want)
        same_rows("kafka", got[p], want)


def test_litemq_plan_matches_the_source_partitions(spark):  # noqa: F811
    p = lite_path("clean")
    df = spark.read.format("mqtool").option("format", "litemq").option("splitSize", "64K").load(p)
    assert df.rdd.getNumPartitions() == len(LR.plan(p, 64 * 1024)) == 8      # 4 files of 128 KiB


def _read_back(out, fields) -> dict[str, list[dict]]:
    from mqtool.export import read_dataset

    t = read_dataset(out, fields, ["store", "topic"])
    rows: dict[str, list[dict]] = {}
    for d in t.select([n for n, _ in fields]).to_pylist():
        rows.setdefault(d["store"], []).append(d)
    return rows


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_export_litemq_and_kafka_read_back_equal(spark, tmp_path, run_cli, engine):  # noqa: F811
    for family, path, fields, key in (
            ("litemq", lite_path("crash"), LR.ROW_FIELDS, lambda d: d["offset"]),
            ("kafka", kafka_path("kafka-python-3.0.12-patched"), KR.ROW_FIELDS,
             lambda d: (d["file"], d["position"]))):
        out = tmp_path / f"{family}.parquet"
        code, _, err = run_cli("export", path, "--to", out, "--engine", engine, "--body", "base64",
                               "--split-size", "48K", "--findings")
        assert code == 0, err
        got = _read_back(out, fields)
        assert list(got) == [path]
        for d in got[path]:
            if d.get("topic") == "__HIVE_DEFAULT_PARTITION__":
                d["topic"] = None
            if isinstance(d.get("properties"), list):
                d["properties"] = dict(d["properties"])
        want = embedded(family, path, body="base64")
        same_rows(family, sorted(got[path], key=key), sorted(want, key=key))
        if family == "litemq":
            topics = {d.name for d in (out / f"store={path.replace('/', '%2F')}").iterdir()}
            assert {"topic=orders.v1", "topic=payments-eu", "topic=audit_log"} <= topics
        else:
            assert {d["topic"] for d in got[path]} == {"kp"} and {d["partition"] for d in got[path]} == {0}
        from mqtool.export import read_dataset
        from mqtool.ranges import FINDING_FIELDS

        f = read_dataset(out / "_findings", FINDING_FIELDS, ["store"]).to_pylist()
        assert any(r["kind"] == "summary" for r in f)


def test_cli_query_engine_spark_litemq_matches_embedded(run_cli, spark):  # noqa: F811
    paths = [lite_path("clean"), lite_path("crash")]
    for key in ("order-0001", "order-0002"):
        c1, out1, _ = run_cli("query", *paths, "--key", key, "--scan", "--json")
        c2, out2, _ = run_cli("query", *paths, "--key", key, "--engine", "spark", "--json")
        assert c1 == c2 == 0 and out1 == out2 and out1.count("\n") >= 1


def test_cli_verify_engine_spark_litemq_and_kafka_equal_embedded(run_cli, spark):  # noqa: F811
    for p in (lite_path("crash"), kafka_path("kafka-python-3.0.12-patched")):
        c1, out1, _ = run_cli("verify", "store", p, "--json")
        c2, out2, _ = run_cli("verify", "store", p, "--json", "--engine", "spark")
        assert c1 == c2 and out1 == out2
