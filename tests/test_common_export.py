"""`mqtool export --engine local`: one Parquet schema for every family (a mixed export reads back with
pyarrow.dataset, DuckDB and Spark), works without pyspark, leaves nothing behind on failure, files get the
umask's permissions, the same rows for any --jobs.

Expected rows come from the embedded `dump` of each store (the NDJSON rows), not from the export itself."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, require_realdata

_CI = os.environ.get("CI", "").lower() == "true"

try:
    import pyarrow as pa
    import pyarrow.dataset as ds
except ImportError as e:  # pragma: no cover - depends on the environment
    if _CI:
        raise
    pytest.skip(f"pyarrow not installed ({e.name})", allow_module_level=True)

from mqtool.dataset import combine_types, export_fields, family_fields, to_family_types, union_fields  # noqa: E402
from mqtool.options import DumpOptions, ScanStats  # noqa: E402


def rmq(name="gen-5.1.4-clean") -> str:
    return str(require_realdata("rocketmq", name, "store"))


def lite(name="clean") -> str:
    return str(require_realdata("litemq", name, "data", "broker"))


def kafka(name="kafka-python-3.0.12-patched") -> str:
    return str(require_realdata("kafka", name))



def embedded(family, path, **kw) -> list[dict]:
    from mqtool.detect import family_module

    part = "kafka" if family == "kafka" else "commitlog"
    return list(family_module(family, "ops").dump(part, path, DumpOptions(jobs=1, **kw), ScanStats())[1])


def sort_key(family):
    return (lambda d: (d["file"], d["position"])) if family == "kafka" else (lambda d: d["offset"])


def same_rows(family, got: list[dict], want: list[dict]) -> None:
    """Every key of an embedded row holds its value in the read-back row; the other columns (but the
    partition columns and ``family``) are null."""
    assert len(got) == len(want)
    key = sort_key(family)
    for g, w in zip(sorted(got, key=key), sorted(want, key=key)):
        g = dict(g)
        for k in ("properties", "headers"):
            if isinstance(g.get(k), list):
                g[k] = dict(g[k])
        if g.get("property_pairs") is not None:
            g["property_pairs"] = [list(p) for p in g["property_pairs"]]
        assert {k: g.get(k) for k in w} == w
        rest = {k: v for k, v in g.items() if k not in w and k not in ("store", "topic", "family", "partition")}
        assert all(v is None for v in rest.values()), rest


def export(run_cli, out, *paths, args=()):
    code, _, err = run_cli("export", *paths, "--to", out, *args)
    assert code == 0, err
    return err


def read_store(out, store: str, family: str) -> list[dict]:
    """The rows of one store of a (mixed) export, in that family's own column types."""
    import pyarrow.compute as pc

    from mqtool.detect import family_module

    t = ds.dataset(str(out), format="parquet", partitioning=ds.partitioning(
        pa.schema([("store", pa.string()), ("topic", pa.string())]), flavor="hive")).to_table()
    t = t.filter(pc.equal(t["store"], store))
    fields = family_module(family, "ranges").ROW_FIELDS
    t = to_family_types(t, fields)
    rows = t.select([n for n, _ in fields]).to_pylist()
    for d in rows:
        if d.get("topic") == "__HIVE_DEFAULT_PARTITION__":
            d["topic"] = None
    return rows


# ---- the union schema ------------------------------------------------------------------------------

def test_combine_rules():
    assert combine_types("x", "int", "int") == "int"
    assert combine_types("x", "int", "long") == combine_types("x", "long", "int") == "long"
    assert combine_types("magic", "string", "int") == "string"
    assert combine_types("x", "bool", "string") == "string"
    assert combine_types("tags", "string", "array<string>") == "array<string>"
    for a, b in (("map<string,string>", "string"), ("array<string>", "long"), ("bool", "int"),
                 ("array<array<string>>", "array<string>")):
        with pytest.raises(TypeError, match="no rule"):
            combine_types("x", a, b)
    assert union_fields({"a": [("store", "string"), ("m", "string")], "b": [("store", "string"), ("m", "int"),
                                                                           ("z", "bool")]}) == \
        [("store", "string"), ("family", "string"), ("m", "string"), ("z", "bool")]


def test_one_type_per_name_and_every_family_column_present():
    fields = export_fields()
    names = [n for n, _ in fields]
    assert len(names) == len(set(names)) and names[:2] == ["store", "family"]
    types = dict(fields)
    for fam, rf in family_fields().items():
        for n, t in rf:
            assert types[n] == combine_types(n, types[n], t), (fam, n)
    # the conflicts of the issue, decided as documented in docs/spark.md
    assert types["magic"] == "string" and types["tags"] == "array<string>" and types["size"] == "long"


# ---- a mixed export read back by every reader -----------------------------------------------------

@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    from click.testing import CliRunner

    from mqtool.cli import cli

    out = tmp_path_factory.mktemp("mixed") / "all.parquet"
    stores = {"rocketmq": rmq(), "litemq": lite(), "kafka": kafka()}
    r = CliRunner().invoke(cli, ["export", *stores.values(), "--to", str(out), "--body", "base64",
                                 "--split-size", "48K", "-j", "2"], catch_exceptions=False)
    assert r.exit_code == 0, r.stderr
    return out, stores


def test_mixed_export_reads_back_with_pyarrow(mixed):
    out, stores = mixed
    t = ds.dataset(str(out), partitioning="hive").to_table()       # the call of the issue, as it is
    assert t.schema.field("magic").type == pa.string() and t.schema.field("tags").type == pa.list_(pa.string())
    want = {fam: embedded(fam, p, body="base64") for fam, p in stores.items()}
    assert t.num_rows == sum(len(w) for w in want.values())
    fams = t.group_by("family").aggregate([("family", "count")]).to_pylist()
    assert {d["family"]: d["family_count"] for d in fams} == {f: len(w) for f, w in want.items()}
    for fam, p in stores.items():
        same_rows(fam, read_store(out, p, fam), want[fam])


def test_mixed_export_reads_back_with_duckdb(mixed):
    duckdb = pytest.importorskip("duckdb") if not _CI else __import__("duckdb")
    out, stores = mixed
    glob = str(out / "store=*" / "topic=*" / "*.parquet")
    rows = duckdb.sql(f"select family, magic, tags, count(*) as n from read_parquet('{glob}', "
                      "hive_partitioning = true) group by all").fetchall()
    got: dict = {}
    for fam, magic, tags, n in rows:
        got.setdefault(fam, {}).setdefault((magic, tuple(tags) if tags is not None else None), 0)
        got[fam][(magic, tuple(tags) if tags is not None else None)] += n
    want: dict = {}
    for fam, p in stores.items():
        for d in embedded(fam, p):
            m = d.get("magic")
            tg = d.get("tags")
            key = (None if m is None else str(m), tuple(tg) if isinstance(tg, list) else None if tg is None else (tg,))
            want.setdefault(fam, {}).setdefault(key, 0)
            want[fam][key] += 1
    assert got == want
    # the store partition holds the absolute store path, as given
    stores_seen = {s for (s,) in duckdb.sql(f"select distinct store from read_parquet('{glob}', "
                                            "hive_partitioning = true)").fetchall()}
    assert stores_seen == set(stores.values())


@pytest.mark.spark
def test_mixed_export_reads_back_with_spark(mixed):
    try:
        import pyspark  # noqa: F401
    except ImportError:
        if _CI:
            raise
        pytest.skip("pyspark not installed")
    from mqtool.spark.session import java_binary

    if java_binary() is None:
        if _CI:
            raise RuntimeError("Java 17+ is needed for the Spark tests")
        pytest.skip("no Java for Spark")
    from pyspark.sql import SparkSession

    out, stores = mixed
    mine = SparkSession.getActiveSession() is None
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    s = (SparkSession.builder.master("local[1]").appName("mqtool-export-test")
         .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false").getOrCreate())
    try:
        df = s.read.parquet(str(out))
        types = dict(df.dtypes)
        assert types["magic"] == "string" and types["tags"] == "array<string>" and types["size"] == "bigint"
        got = {r["family"]: r["count"] for r in df.groupBy("family").count().collect()}
        assert got == {fam: len(embedded(fam, p)) for fam, p in stores.items()}
        kafka_magic = {r["magic"] for r in df.filter("family = 'kafka'").select("magic").distinct().collect()}
        assert kafka_magic == {str(d["magic"]) for d in embedded("kafka", stores["kafka"])}
        # --engine spark writes the same schema and the same rows
        import mqtool.spark
        from mqtool.export import export_spark

        mqtool.spark.register(s)
        out2 = out.parent / "spark.parquet"
        export_spark(list(stores.values()), str(out2), body="base64", split_size=1 << 20, spark=s)

        def table(o):
            t = ds.dataset(str(o), partitioning="hive").to_table()
            return sorted(t.select(sorted(t.column_names)).to_pylist(),
                          key=lambda d: (d["store"], d["file"], d["position"]))

        assert table(out2) == table(out)
    finally:
        if mine:
            s.stop()


# ---- --jobs ------------------------------------------------------------------------------------------

def test_same_rows_for_any_jobs(run_cli, tmp_path):
    p = rmq("gen-4.9.7-kill")
    got = {}
    for j in ("1", "2"):
        out = tmp_path / f"j{j}"
        export(run_cli, out, p, args=("--split-size", "40000", "-j", j, "--body", "base64"))
        got[j] = read_store(out, p, "rocketmq")
        parts = sorted(f.name for f in out.rglob("*.parquet"))
        assert parts and all(n.startswith("part-") for n in parts)
    assert len({f.name for f in (tmp_path / "j2").rglob("*.parquet")}) > 1      # one part per range
    same_rows("rocketmq", got["1"], embedded("rocketmq", p, body="base64"))
    assert sorted(got["1"], key=sort_key("rocketmq")) == sorted(got["2"], key=sort_key("rocketmq"))


def test_force_replaces_an_earlier_export_of_the_store(run_cli, tmp_path):
    p = rmq()
    out = tmp_path / "out"
    export(run_cli, out, p, args=("--split-size", "20000"))
    export(run_cli, out, p, args=("--split-size", "1M", "--force"))
    assert len(read_store(out, p, "rocketmq")) == len(embedded("rocketmq", p))
    assert not [f for f in out.iterdir() if f.name.startswith(".")]


def test_a_store_given_twice_is_exported_once(run_cli, tmp_path):
    p = rmq()
    out = tmp_path / "out"
    export(run_cli, out, p, p + "/", args=("--split-size", "20000", "-j", "2"))
    same_rows("rocketmq", read_store(out, p, "rocketmq"), embedded("rocketmq", p))


def test_help_is_true(run_cli):
    code, out, _ = run_cli("export", "--help")
    assert code == 0 and "--jobs" in out and "worker processes" in out


# ---- failures leave nothing ------------------------------------------------------------------------

def _run_cli_with(prelude: str, *cli_args) -> subprocess.CompletedProcess:
    """Run the CLI in a fresh interpreter (one thread: a pool forks and its workers inherit ``prelude``)."""
    code = prelude + ("\nfrom mqtool.cli import main\n"
                      f"sys.argv = ['mqtool'] + {[str(a) for a in cli_args]!r}\n"
                      "main()\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-c", "import sys\n" + code], capture_output=True, text=True,
                          timeout=300, cwd=ROOT, env=env)


def _blocked(mod: str, *cli_args) -> subprocess.CompletedProcess:
    """Run the CLI where ``import <mod>`` fails (a meta-path blocker)."""
    return _run_cli_with(f"sys.modules[{mod!r}] = None\n"
                         f"try:\n    import {mod}\nexcept ImportError:\n    pass\n"
                         "else:\n    raise SystemExit('not blocked')", *cli_args)


def test_findings_without_pyspark(tmp_path):
    p = rmq("gen-4.9.7-kill")
    out = tmp_path / "out"
    r = _blocked("pyspark", "export", p, "--to", out, "--findings")
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    f = ds.dataset(str(out / "_findings"), partitioning="hive").to_table().to_pylist()
    # the realdata manifest: this store was killed mid-write (no clean shutdown)
    assert "unclean-shutdown" in {d["code"] for d in f} and any(d["kind"] == "summary" for d in f)
    assert ds.dataset(str(out), partitioning="hive").count_rows() == len(embedded("rocketmq", p))


def test_without_pyarrow_names_the_parquet_extra(tmp_path):
    r = _blocked("pyarrow", "export", rmq(), "--to", tmp_path / "out")
    assert r.returncode == 2 and "mqtool[parquet]" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "out").exists()


def assert_fails(run_cli, text, *args):
    """The command fails with ``text`` said (as an exit code and message, or as the exception itself)."""
    try:
        code, _, err = run_cli(*args)
    except Exception as e:      # an unexpected error type goes up as it is
        assert text in str(e)
        return
    assert code != 0 and text in err, (code, err)


@pytest.mark.parametrize("existing", [False, True])
def test_failure_in_findings_leaves_nothing(run_cli, tmp_path, monkeypatch, existing):
    import mqtool.dataset as D

    def boom(*a, **k):
        yield {"store": "x", "kind": "finding"}
        raise OSError("disk on fire")

    monkeypatch.setattr(D, "verify_rows", boom)
    out = tmp_path / "out"
    if existing:
        out.mkdir()
    assert_fails(run_cli, "disk on fire", "export", rmq(), "--to", out, "--findings", "-j", "1")
    if existing:
        assert list(out.iterdir()) == []
    else:
        assert not out.exists()


def test_failure_in_a_worker_leaves_nothing(tmp_path):
    out = tmp_path / "out"
    r = _run_cli_with("from mqtool.rocketmq import ranges as R\n"
                      "def breaking(real):\n"
                      "    def broken(rng, opts, *args, on_damage=None):\n"
                      "        if rng.index == 3:\n"
                      "            raise OSError('worker failed')\n"
                      "        return real(rng, opts, *args, on_damage=on_damage)\n"
                      "    return broken\n"
                      "R.iter_range_rows = breaking(R.iter_range_rows)\n"
                      "R.iter_range_columns = breaking(R.iter_range_columns)",
                      "export", rmq(), "--to", out, "--split-size", "20000", "-j", "2")
    assert r.returncode != 0 and "worker failed" in r.stderr, (r.returncode, r.stderr)
    assert not out.exists()


# ---- permissions ------------------------------------------------------------------------------------

@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_files_get_the_umask_permissions(run_cli, tmp_path, umask):
    """Also when the pool's workers come from a forkserver started earlier under another umask (a thread is
    running, so the pool does not fork; see mqtool.ranges.PoolRunner)."""
    import threading

    from mqtool.io import write_atomic
    from mqtool.ranges import PoolRunner

    ev = threading.Event()
    t = threading.Thread(target=ev.wait, daemon=True)
    t.start()
    try:
        assert list(PoolRunner(2).imap(abs, range(-3, 0))) == [3, 2, 1]     # starts the forkserver
        old = os.umask(umask)
        try:
            out = tmp_path / "out"
            export(run_cli, out, rmq(), args=("--findings", "-j", "2", "--split-size", "100000"))
            write_atomic(tmp_path / "single.txt", b"x")
        finally:
            os.umask(old)
    finally:
        ev.set()
        t.join()
    paths = [out, *out.rglob("*")]
    assert any(p.is_file() for p in paths) and any(p.name == "_findings" for p in paths)
    for q in paths:
        want = (0o777 if q.is_dir() else 0o666) & ~umask
        assert (q.stat().st_mode & 0o777) == want, (q, oct(q.stat().st_mode))
    assert (Path(tmp_path / "single.txt").stat().st_mode & 0o777) == 0o666 & ~umask


# ---- the column lane (RocketMQ with the compiled helper) ------------------------------------------------------

def _whole_table(out) -> tuple:
    t = ds.dataset(str(out), format="parquet", partitioning="hive").to_table()
    return t.schema, sorted(map(repr, t.select(sorted(t.column_names)).to_pylist()))


@pytest.mark.parametrize("store, body, chunk_bytes", [
    ("fixture", "base64", None), ("gen-5.1.4-clean", "none", None), ("gen-5.1.4-clean", "text", 2000),
    ("gen-4.9.7-kill", "base64", 1)])
def test_column_lane_writes_the_dict_lane_dataset(tmp_path, monkeypatch, store, body, chunk_bytes):
    """The same files' contents with the helper's column lane as without the helper (rows from the Python
    decoder), on the fixture store (IPv6 hosts, compressed bodies, odd properties) and real stores; also with
    chunks cut by their store bytes (a chunk per lane run or unit)."""
    from mqtool import native
    from mqtool.export import export_local
    from mqtool.rocketmq import nativedump

    if native.load("rmqdump") is None:
        pytest.skip("compiled helper rmqdump not built")
    p = str(ROOT / "fixtures" / "rocketmq" / "store") if store == "fixture" else rmq(store)
    if chunk_bytes is not None:
        monkeypatch.setattr(nativedump, "COLUMN_CHUNK_BYTES", chunk_bytes)
        monkeypatch.setattr(nativedump, "ROWS_PER_RUN", 3)
    used = []
    real = nativedump._column_chunks
    monkeypatch.setattr(nativedump, "_column_chunks", lambda *a: used.append(1) or real(*a))
    export_local([p], str(tmp_path / "lane"), body=body, split_size=20000)
    assert used
    monkeypatch.setenv("MQTOOL_NATIVE", "0")
    export_local([p], str(tmp_path / "python"), body=body, split_size=20000)
    assert len(used) > 1 and _whole_table(tmp_path / "lane") == _whole_table(tmp_path / "python")
    files = sorted(f.relative_to(tmp_path / "lane") for f in (tmp_path / "lane").rglob("*.parquet"))
    assert files == sorted(f.relative_to(tmp_path / "python") for f in (tmp_path / "python").rglob("*.parquet"))
