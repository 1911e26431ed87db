"""Spark (local[2]): the `mqtool` data source gives the embedded rows and findings exactly, for several
split sizes including 1 KiB; Parquet export (local and Spark) reads back equal; fleet verify/query through
the CLI print what the embedded runner prints.

Skips cleanly without pyspark/pyarrow or Java; under CI=true it must run (a missing piece fails).
One session-scoped SparkSession serves the whole module (starting one costs ~15-25 s)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import realdata_root, require_realdata


from conftest import require_spark  # noqa: E402

require_spark()

from mqtool.options import DumpOptions, ScanStats, VerifyOptions  # noqa: E402
from mqtool.rocketmq.store import open_store  # noqa: E402
from mqtool.rocketmq.ops import dump  # noqa: E402
from mqtool.rocketmq.verify import verify_store  # noqa: E402
from mqtool.spark.fleet import spark_row_to_dump_row  # noqa: E402
from mqtool.spark.schema import finding_row  # noqa: E402

pytestmark = pytest.mark.spark

STORES = ["gen-4.9.7-clean", "gen-4.9.7-kill", "gen-5.1.4-clean", "gen-5.1.4-kill",
          "apache-rocketmq-fork-4e25b979", "shaoxubao-c4dcaab0/store/unit_test_store"]


def store_path(name) -> str:
    if "/" in name:
        return str(require_realdata("rocketmq", *name.split("/")))
    return str(require_realdata("rocketmq", name, "store"))


def embedded_rows(path, **kw) -> list[dict]:
    stats = ScanStats()
    _, rows, _ = dump("commitlog", path, DumpOptions(**kw), stats)
    return list(rows)


def spark_rows(df, body="none") -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in df.collect():
        d = r.asDict(recursive=True)
        out.setdefault(d["store"], []).append(spark_row_to_dump_row(d, body))
    return out


def test_rows_equal_embedded_on_every_real_store(spark):
    paths = [store_path(n) for n in STORES]
    df = spark.read.format("mqtool").option("format", "rocketmq").option("maxPartitions", "6").load(paths)
    got = spark_rows(df)
    for p in paths:
        assert got.get(p, []) == embedded_rows(p), p
    # harvested stores without a commitlog give no rows (and no error)
    extra = sorted(str(p) for p in realdata_root().glob("rocketmq/*/store") if str(p) not in paths)
    assert spark.read.format("mqtool").load(extra).count() == sum(
        len(embedded_rows(p)) for p in extra if open_store(p).segments)


@pytest.mark.parametrize("split,maxparts", [("1K", 4), ("3000", 6), ("16K", None)])
def test_tiny_splits_cut_records_and_still_agree(spark, split, maxparts):
    paths = [store_path("gen-5.1.4-kill"), store_path("gen-4.9.7-clean")]
    if maxparts is None:      # one range per Spark partition
        paths = paths[:1]
    r = spark.read.format("mqtool").option("splitSize", split).option("body", "base64")
    if maxparts:
        r = r.option("maxPartitions", str(maxparts))
    df = r.load(paths)
    if maxparts:
        assert df.rdd.getNumPartitions() == maxparts
    got = spark_rows(df, "base64")
    for p in paths:
        assert got[p] == embedded_rows(p, body="base64")


def test_damaged_copy_with_1k_split(spark, tmp_path):
    src = Path(store_path("gen-5.1.4-clean"))
    dst = tmp_path / "store"
    shutil.copytree(src, dst)
    seg = sorted((dst / "commitlog").iterdir())[1]
    seg.chmod(0o644)
    data = bytearray(seg.read_bytes())
    data[3000:3100] = b"\xAB" * 100
    data[9000:13096] = bytes(4096)
    seg.write_bytes(bytes(data[:7000]) + bytes(range(256)) + bytes(data[7000:]))
    df = spark.read.format("mqtool").option("splitSize", "1K").option("maxPartitions", "4").load(str(dst))
    assert spark_rows(df)[str(dst)] == embedded_rows(dst)


def test_verify_mode_rows_are_the_findings(spark):
    paths = [store_path(n) for n in ("gen-4.9.7-kill", "gen-5.1.4-clean")]
    df = spark.read.format("mqtool").option("mode", "verify").load(paths)
    got = [r.asDict() for r in df.collect()]
    want = []
    from mqtool.causes import linked

    for p in paths:      # the findings as `verify store` gives them (ids, caused_by, summary naming the store)
        fs, summary_fn = linked(*verify_store(open_store(p), "store", VerifyOptions()), p, "rocketmq")
        want += [finding_row(p, f.to_dict()) for f in fs] + [finding_row(p, summary_fn().to_dict())]
    cols = [c for c in df.columns]
    assert [{c: w.get(c) for c in cols} for w in want] == got
    assert sum(1 for g in got if g["kind"] == "summary") == 2


def test_glob_and_auto_format(spark):
    pattern = str(realdata_root() / "rocketmq" / "gen-*-clean" / "store")
    df = spark.read.format("mqtool").option("format", "auto").load(pattern)
    assert df.count() == len(embedded_rows(store_path("gen-4.9.7-clean"))) + \
        len(embedded_rows(store_path("gen-5.1.4-clean")))


# ---- Parquet export -------------------------------------------------------------------------------

def _read_back(out) -> dict[str, list[dict]]:
    from mqtool.export import read_dataset
    from mqtool.rocketmq.ranges import ROW_FIELDS

    t = read_dataset(out, ROW_FIELDS, ["store", "topic"])
    order = [n for n, _ in ROW_FIELDS]
    rows = t.select(order).to_pylist()
    out_rows: dict[str, list[dict]] = {}
    for d in rows:
        out_rows.setdefault(d["store"], []).append(spark_row_to_dump_row(d, "base64"))
    for v in out_rows.values():
        v.sort(key=lambda d: d["offset"])
    return out_rows


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_export_reads_back_equal(spark, tmp_path, run_cli, engine):
    paths = [store_path("gen-5.1.4-clean"), store_path("gen-4.9.7-kill")]
    out = tmp_path / "all.parquet"
    code, _, err = run_cli("export", *paths, "--to", out, "--engine", engine, "--findings", "--body", "base64",
                           "--split-size", "40000")
    assert code == 0, err
    got = _read_back(out)
    for p in paths:
        assert got[p] == sorted(embedded_rows(p, body="base64"), key=lambda d: d["offset"])
    topics = {d.name for d in (out / f"store={paths[0].replace('/', '%2F')}").iterdir()}
    assert "topic=TopicA" in topics and "topic=%25RETRY%25ConsumerGroupA" in topics
    from mqtool.export import read_dataset
    from mqtool.ranges import FINDING_FIELDS

    f = read_dataset(out / "_findings", FINDING_FIELDS, ["store"]).to_pylist()
    assert {r["code"] for r in f if r["store"] == paths[1]} >= {"unclean-shutdown", "index-after-checkpoint"}
    # Spark reads the dataset too, partition columns included; _findings is not mixed in
    assert spark.read.parquet(str(out)).count() == sum(len(v) for v in got.values())
    code, _, err = run_cli("export", paths[0], "--to", out, "--engine", engine)
    assert code == 2 and "not empty" in err


# ---- CLI: fleet verify / query ------------------------------------------------------------------

def test_cli_verify_engine_spark_same_output(run_cli, spark, tmp_path):
    damaged = tmp_path / "d" / "store"
    shutil.copytree(store_path("gen-4.9.7-clean"), damaged)
    seg = sorted((damaged / "commitlog").iterdir())[2]
    seg.chmod(0o644)
    data = bytearray(seg.read_bytes())
    data[500:600] = b"\x11" * 100
    seg.write_bytes(data)
    paths = [store_path("gen-4.9.7-kill"), store_path("gen-5.1.4-clean"), str(damaged)]
    a = run_cli("verify", "store", *paths, "--json", "--jobs", "1")
    b = run_cli("verify", "store", *paths, "--json", "--engine", "spark", "--split-size", "40K")
    assert a == b and a[0] == 1
    assert sum(1 for line in a[1].splitlines() if json.loads(line)["kind"] == "summary") == 3


def test_cli_query_engine_spark_matches_scan(run_cli, spark):
    paths = [store_path("gen-4.9.7-clean"), store_path("gen-5.1.4-clean")]
    code, out, err = run_cli("query", *paths, "--key", "orderA-7", "--engine", "spark", "--json")
    assert code == 0, err
    got = [json.loads(x) for x in out.splitlines()]
    want = []
    for p in paths:
        want += json.loads(json.dumps(embedded_rows(p, key="orderA-7")))
    assert got == want and len(got) >= 2
    code, out, err = run_cli("query", paths[0], "--key", "no-such-key-xyz", "--engine", "spark")
    assert code == 1 and "no message found" in err
    code, out, err = run_cli("query", paths[0], "--msg-id", "00", "--engine", "spark")
    assert code == 2 and "--key" in err


def test_import_registers_on_the_active_session(spark, monkeypatch):
    import importlib

    import mqtool.spark as ms

    calls = []
    monkeypatch.setattr(ms, "register", lambda s=None: calls.append(s))
    ms._register_on_import()
    assert calls == [None]          # an active session exists: registered on it at import
    monkeypatch.undo()
    importlib.reload(ms)            # the real thing, on the real session: the format resolves afterwards
    assert spark.read.format("mqtool").load(store_path("apache-rocketmq-fork-4e25b979")).count() == \
        len(embedded_rows(store_path("apache-rocketmq-fork-4e25b979")))
