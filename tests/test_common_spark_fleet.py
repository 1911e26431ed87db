"""Spark at fleet scale (issue #19), on local[2]: nothing lost silently (Spark's mode / ignoreCorruptFiles /
ignoreMissingFiles conventions, damage reachable from the driver, the export's exit code and note as
embedded), paths made absolute on the driver, and Spark's own configuration obeyed by ``get_session``.

Expected values come from the embedded engine (a second implementation: the range readers in one process)
and from the damage we plant. Skips without pyspark/Java unless CI=true."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import local_spark, require_realdata


from conftest import require_spark  # noqa: E402

require_spark()

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def spark():
    s = local_spark("mqtool-tests-fleet")
    yield s
    s.stop()


def _copy(name, tmp_path) -> Path:
    dst = tmp_path / name / "store"
    shutil.copytree(require_realdata("rocketmq", name, "store"), dst)
    for p in dst.rglob("*"):
        if p.is_file():
            p.chmod(0o644)
    return dst


def _damaged(tmp_path) -> Path:
    """A RocketMQ store with two damaged ranges planted in its second segment: the size fields of its
    20th and 80th messages overwritten."""
    from mqtool.options import DumpOptions
    from mqtool.ranges import family_ranges

    dst = _copy("gen-5.1.4-clean", tmp_path)
    seg = sorted((dst / "commitlog").iterdir())[1]
    mod = family_ranges("rocketmq")
    rng = [r for r in mod.plan(str(dst), None) if r.file == str(seg)][0]
    at = [row["offset"] - rng.base for row in mod.iter_range_rows(rng, DumpOptions())]
    data = bytearray(seg.read_bytes())
    for i in (20, 80):
        data[at[i]:at[i] + 4] = b"\xff\xff\xff\x7f"
    seg.write_bytes(bytes(data))
    return dst


def _embedded_damage(store) -> list:
    """(file, position, code) of every damaged range the embedded range readers report."""
    from mqtool.options import DumpOptions
    from mqtool.ranges import family_ranges

    mod = family_ranges("rocketmq")
    out = []
    for rng in mod.plan(str(store), 4096):
        list(mod.iter_range_rows(rng, DumpOptions(), on_damage=lambda d: out.append((d.file, d.position, d.code))))
    return out


def test_damage_is_reachable_and_modes_follow_spark(spark, tmp_path):
    store = _damaged(tmp_path)
    want = _embedded_damage(store)
    assert len(want) >= 2
    def rd():       # a DataFrameReader keeps its options: a fresh one per read
        return spark.read.format("mqtool").option("splitSize", "4K").option("maxPartitions", "3")

    dmg = rd().option("rows", "damage").load(str(store)).collect()
    assert [(d.file, d.position, d.code) for d in dmg] == want
    assert {d.kind for d in dmg} == {"damage"} and {d.store for d in dmg} == {str(store)}
    plain = rd().load(str(store)).count()
    # PERMISSIVE with a corrupt-record column: one row per damaged range, other columns null
    df = rd().option("columnNameOfCorruptRecord", "_bad").load(str(store))
    bad = df.where("_bad IS NOT NULL").collect()
    assert len(bad) == len(want) and all(b.offset is None and b.store == str(store) for b in bad)
    assert all(f"@{pos} " in b._bad and code in b._bad for b, (_, pos, code) in zip(bad, want))
    assert df.count() == plain + len(want)
    # DROPMALFORMED: the readable rows only, even with the column asked for
    assert rd().option("mode", "DROPMALFORMED").option("columnNameOfCorruptRecord", "_bad") \
        .load(str(store)).count() == plain
    # FAILFAST: the job fails, naming the damaged file
    with pytest.raises(Exception, match="MQTOOL-READ-FAILED.*" + want[0][2]):
        rd().option("mode", "FAILFAST").load(str(store)).count()
    with pytest.raises(Exception, match="unknown mode"):
        rd().option("mode", "LENIENT").load(str(store)).count()


def test_vanished_and_unreadable_files_fail_the_job_by_default(spark, tmp_path):
    store = _copy("gen-4.9.7-clean", tmp_path)
    segs = sorted((store / "commitlog").iterdir())
    total = spark.read.format("mqtool").load(str(store)).count()
    per_seg = {s.name: spark.read.format("mqtool").load(str(s)).count() for s in segs}
    assert per_seg[segs[1].name] > 0
    def rd():
        return spark.read.format("mqtool").option("splitSize", "64K")

    df = rd().load(str(store)).rdd                # planned while every segment is there
    df_ignore = rd().option("ignoreMissingFiles", "true").load(str(store)).rdd
    assert df.getNumPartitions() == df_ignore.getNumPartitions() == len(segs)
    segs[1].rename(tmp_path / "moved-away")       # renamed during the job
    with pytest.raises(Exception, match=f"MQTOOL-READ-FAILED.*{segs[1]}.*vanished"):
        df.collect()
    assert len(df_ignore.collect()) == total - per_seg[segs[1].name]
    # unreadable (for root too): a dangling link in the segment's place
    segs[1].symlink_to(tmp_path / "nowhere")
    with pytest.raises(Exception, match=f"MQTOOL-READ-FAILED.*{segs[1]}"):
        rd().load(str(store)).count()
    assert rd().option("ignoreCorruptFiles", "true").load(str(store)).count() == total - per_seg[segs[1].name]


def test_relative_paths_are_made_absolute_on_the_driver(spark, tmp_path):
    store = _copy("gen-4.9.7-clean", tmp_path)
    # relative to the driver JVM's working directory (the data source plans in a Python the JVM starts)
    rel = os.path.relpath(store, spark._jvm.System.getProperty("user.dir"))
    rows = spark.read.format("mqtool").load(rel).select("store").distinct().collect()
    assert [r.store for r in rows] == [str(store)]


def test_cli_export_spark_exit_code_and_note_as_embedded(spark, run_cli, tmp_path):
    store = _damaged(tmp_path)
    n = len(_embedded_damage(store))
    a = run_cli("export", store, "--to", tmp_path / "a", "--split-size", "4K")
    b = run_cli("export", store, "--to", tmp_path / "b", "--split-size", "4K", "--engine", "spark")
    assert a[0] == 1 and f"{n} damaged range(s) skipped" in a[2]
    assert b[0] == a[0] and b[2].replace(str(tmp_path / "b"), "OUT") == a[2].replace(str(tmp_path / "a"), "OUT")


def test_cli_export_spark_names_an_unreadable_file(spark, run_cli, tmp_path):
    store = _copy("gen-4.9.7-clean", tmp_path)
    seg = sorted((store / "commitlog").iterdir())[1]
    seg.unlink()
    seg.symlink_to(tmp_path / "nowhere")
    code, out, err = run_cli("export", store, "--to", tmp_path / "o", "--engine", "spark")
    assert code == 2 and err.count("\n") == 1 and str(seg) in err, err
    assert "Traceback" not in err and "Py4J" not in err and "MQTOOL-READ" not in err
    # nothing half-written is left: the output directory this run created is removed (as --engine local does)
    assert not (tmp_path / "o").exists()


def test_cli_verify_spark_relative_path(spark, run_cli, tmp_path, monkeypatch):
    store = _copy("gen-4.9.7-clean", tmp_path)
    monkeypatch.chdir(store.parent)
    a = run_cli("verify", "store", "store", "--json", "--jobs", "1")
    b = run_cli("verify", "store", "store", "--json", "--engine", "spark", "--split-size", "40K")
    assert a == b and a[0] == 0


def _session_master(env: dict, tmp_path, how: str = "get_session") -> str:
    """``MASTER <master> <shuffle partitions> <console progress>`` of the session (or, ``how="get_context"``,
    the bare context the CLI's export and verify use) a fresh process gets under ``env``; its stderr must not
    hold Spark's start-up chatter, nor a progress bar when it is off."""
    code = (f"from mqtool.spark.session import {how}; s = {how}(); c = getattr(s, 'sparkContext', s); "
            "s.sparkContext.parallelize(range(4), 2).count() if hasattr(s, 'sparkContext') else c.parallelize("
            "range(4), 2).count(); "
            "print('MASTER', c.master, c.getConf().get('spark.sql.shuffle.partitions'), "
            "c.getConf().get('spark.ui.showConsoleProgress')); s.stop()")
    e = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_SUBMIT", "SPARK_CONF", "SPARK_SUBMIT"))}
    e.update(env, PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e, timeout=300,
                       cwd=tmp_path)
    line = [x for x in p.stdout.splitlines() if x.startswith("MASTER")]
    assert line, p.stderr[-2000:]
    assert "Setting default log level" not in p.stderr, p.stderr[-2000:]
    if line[0].endswith(" false"):
        assert "[Stage" not in p.stderr, p.stderr[-2000:]
    return line[0]


def test_get_session_obeys_spark_defaults_and_submit_args(tmp_path):
    """Spark's configuration wins, our defaults fill what nobody set. pyspark starts Spark for a plain program
    as a "shell", for which spark-submit itself turns the console progress bar on (drawn over the CLI's
    output): that is no one's configuration, so the CLI's default (off) applies unless spark-defaults.conf,
    PYSPARK_SUBMIT_ARGS (or -D options, spark-submit) set it."""
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "spark-defaults.conf").write_text("spark.master local[1]\nspark.sql.shuffle.partitions 7\n"
                                              "spark.ui.enabled false\nspark.ui.showConsoleProgress true\n")
    assert _session_master({"SPARK_CONF_DIR": str(conf)}, tmp_path) == "MASTER local[1] 7 true"
    assert _session_master({"PYSPARK_SUBMIT_ARGS": "--master local[2] --conf spark.ui.enabled=false "
                            "pyspark-shell"}, tmp_path, "get_context") == "MASTER local[2] 4 false"
    assert _session_master({"PYSPARK_SUBMIT_ARGS": "--master local[2] --conf spark.ui.enabled=false "
                            "--conf spark.ui.showConsoleProgress=true pyspark-shell"},
                           tmp_path) == "MASTER local[2] 4 true"


def test_user_sets_reads_spark_s_own_places(tmp_path, monkeypatch):
    """Where a user sets a Spark property before the JVM starts: --conf / -c / --conf= in PYSPARK_SUBMIT_ARGS,
    the properties file (--properties-file, else spark-defaults.conf of SPARK_CONF_DIR) in its key/value
    spellings, -D in SPARK_SUBMIT_OPTS; comments and other keys do not count."""
    from mqtool.spark.session import user_sets

    key = "spark.ui.showConsoleProgress"
    for v in ("PYSPARK_SUBMIT_ARGS", "SPARK_SUBMIT_OPTS", "JAVA_TOOL_OPTIONS", "SPARK_HOME"):
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path / "none"))
    assert not user_sets(key)
    for args in (f"--conf {key}=true pyspark-shell", f"-c {key}=false pyspark-shell",
                 f"--conf={key}=true pyspark-shell", f'--conf "{key}=true" pyspark-shell'):
        monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", args)
        assert user_sets(key), args
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", f"--conf {key}x=true --name {key} pyspark-shell")
    assert not user_sets(key)
    props = tmp_path / "p.conf"
    for text, want in ((f"# {key} true\n! {key}\nspark.other 1\n", False), (f"  {key}   true\n", True),
                       (f"{key}=true\n", True), (f"{key}:true\n", True), (f"{key}\ttrue\n", True)):
        props.write_text(text)
        monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", f"--properties-file {props} pyspark-shell")
        assert user_sets(key) is want, text
    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS")
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "spark-defaults.conf").write_text(f"{key} true\n")
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path / "conf"))
    assert user_sets(key)
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path / "none"))
    monkeypatch.setenv("SPARK_SUBMIT_OPTS", f"-Xmx1g -D{key}=true")
    assert user_sets(key)


def test_export_partition_values_same_on_spark(spark, run_cli, tmp_path):
    """Issue #16 item 7 on Spark: the same directories and the same _partitions.ndjson as the local engine."""
    from builders import LONG_TOPIC as LONG, long_topic_store

    store = long_topic_store(tmp_path)
    log = tmp_path / "log"
    log.mkdir()
    shutil.copytree(require_realdata("kafka", "kafka-python-3.0.12-patched", "kp-0"), log / "we\nird-0")
    for src, fmt in ((store, "rocketmq"), (log, "kafka")):
        a, b = tmp_path / f"a-{fmt}", tmp_path / f"b-{fmt}"
        assert run_cli("export", src, "--to", a, "--format", fmt)[0] == 0
        code, _, err = run_cli("export", src, "--to", b, "--format", fmt, "--engine", "spark")
        assert code == 0, err

        def dirs(out):
            return sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_dir())

        assert dirs(a) == dirs(b) and len(dirs(a)) >= 2
        assert (a / "_partitions.ndjson").exists() == (b / "_partitions.ndjson").exists() == (fmt == "rocketmq")
        if fmt == "rocketmq":
            assert (a / "_partitions.ndjson").read_text() == (b / "_partitions.ndjson").read_text()
            assert LONG in (b / "_partitions.ndjson").read_text()
            import pyarrow.dataset as ds

            full = [{(r["topic"], r["topic_full"]) for r in ds.dataset(str(o), partitioning="hive").to_table(
                columns=["topic", "topic_full"]).to_pylist()} for o in (a, b)]
            assert full[0] == full[1] and any(t == LONG for _, t in full[0])     # the row keeps the true topic


def test_group_ranges_packs_small_segments_like_spark():
    from mqtool.ranges import ByteRange
    from mqtool.spark.source import group_ranges

    def rng(i, n):
        return ByteRange("kafka", "s", f"f{i}", f"f{i}", 0, n, 0, n, i, True, i)

    M = 1024 * 1024
    small = [rng(i, 1000) for i in range(170)]
    # 170 tiny segments: each costs 1000 bytes + 4 MiB; 128 MiB tasks take 31 of them
    groups = group_ranges(small)
    assert [len(g) for g in groups] == [31] * 5 + [15]
    assert [r for g in groups for r in g] == small                  # order kept, nothing lost
    big = [rng(0, 128 * M), rng(1, 100), rng(2, 100), rng(3, 128 * M)]
    assert [len(g) for g in group_ranges(big)] == [1, 2, 1]
    assert [len(g) for g in group_ranges(small, max_partitions=4)] == [42, 43, 42, 43]
    assert [len(g) for g in group_ranges(small, target=1)] == [1] * 170
    assert len(group_ranges(small, target=1, max_partitions=4)) == 4


def test_small_kafka_segments_are_coalesced(spark):
    from mqtool.ranges import family_ranges

    paths = [str(require_realdata("kafka", d)) for d in ("kaipasubhash-kafka-logs-2022/4008d90",
                                                          "ldi-poc-kraft-2026/8030792")]
    ranges = sum(len(family_ranges("kafka").plan(p, None)) for p in paths)
    assert ranges > 100
    for p in paths:
        df = spark.read.format("mqtool").option("format", "kafka").load(p)
        assert df.rdd.getNumPartitions() <= 2
    one = spark.read.format("mqtool").option("format", "kafka").option("maxPartitionBytes", "1").load(paths[0])
    assert one.rdd.getNumPartitions() == len(family_ranges("kafka").plan(paths[0], None))
    assert one.count() == spark.read.format("mqtool").option("format", "kafka").load(paths[0]).count()


@pytest.mark.parametrize("where", [
    "topic = 'TopicA'",
    "topic IN ('TopicA', '%RETRY%ConsumerGroupA') AND queue_id >= 1",
    "offset > 70000 AND offset <= 200000",
    "store_timestamp < 1795338690000 AND queue_id = 0 AND tags IS NOT NULL",
    "topic LIKE 'Topic%' AND queue_offset BETWEEN 3 AND 9",
    "topic = 'no-such-topic'",
])
def test_pushed_filters_give_spark_s_own_answer(spark, where):
    """With spark.sql.python.filterPushdown.enabled the reader evaluates the comparisons itself (they are
    not applied again by Spark); the rows equal those Spark's own filter keeps with pushdown off."""
    paths = [str(require_realdata("rocketmq", n, "store")) for n in ("gen-5.1.4-clean", "gen-4.9.7-kill")]

    def run():
        df = spark.read.format("mqtool").option("maxPartitions", "2").load(paths).where(where)
        return sorted(tuple(r) for r in df.select("store", "offset", "topic").collect()), \
            df._jdf.queryExecution().executedPlan().toString()

    spark.conf.set("spark.sql.python.filterPushdown.enabled", "false")
    want, _ = run()
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    try:
        got, plan = run()
    finally:
        spark.conf.unset("spark.sql.python.filterPushdown.enabled")
    assert got == want
    if where.startswith("topic ="):
        assert "Filter" not in plan.split("BatchScan")[0].replace("PushedFilters", ""), plan
    if "no-such" not in where:
        assert want


def test_spark_submit_runs_the_cli(tmp_path, run_cli):
    """The documented recipe: spark-submit [options] <mqtool/__main__.py> VERB ... --engine spark."""
    import mqtool.__main__ as main_mod
    from pyspark.find_spark_home import _find_spark_home

    submit = Path(_find_spark_home()) / "bin" / "spark-submit"
    store = str(require_realdata("rocketmq", "gen-4.9.7-kill", "store"))
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYSPARK_PYTHON=sys.executable)
    env.pop("PYSPARK_SUBMIT_ARGS", None)
    p = subprocess.run([str(submit), "--master", "local[1]", "--conf", "spark.ui.enabled=false", main_mod.__file__,
                        "verify", "store", store, "--json", "--engine", "spark"],
                       capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    want = run_cli("verify", "store", store, "--json", "--jobs", "1")
    assert (p.returncode, p.stdout) == want[:2], p.stderr[-2000:]


def test_pruned_columns_by_schema_or_option(spark):
    """Column pruning as far as the Python data source API allows: a user's schema (or the ``columns``
    option) is what the reader decodes and converts; the rows equal the embedded scan's, a column that does
    not exist or a wrong type is refused, and bodies are not decoded when no body column is selected."""
    from pyspark.sql.types import StructType

    from mqtool.options import DumpOptions
    from mqtool.ranges import family_ranges
    from mqtool.spark.source import MqtoolDataSource

    store = str(require_realdata("rocketmq", "gen-4.9.7-kill", "store"))
    mod = family_ranges("rocketmq")
    want = sorted((r["topic"], r["queue_offset"]) for rng in mod.plan(store, None)
                  for r in mod.iter_range_rows(rng, DumpOptions()))
    by_schema = spark.read.format("mqtool").schema("topic string, queue_offset long").load(store)
    by_option = spark.read.format("mqtool").option("columns", "topic, queue_offset").load(store)
    for df in (by_schema, by_option):
        assert df.columns == ["topic", "queue_offset"]
        assert sorted(map(tuple, df.collect())) == want
    topic = want[0][0]
    assert sorted(map(tuple, by_schema.where(f"topic = '{topic}'").collect())) == [w for w in want if w[0] == topic]
    for bad, why in (("topic int", "is string, not int"), ("nosuch string", "no column 'nosuch'")):
        with pytest.raises(Exception, match=why):
            spark.read.format("mqtool").schema(bad).load(store).collect()
    with pytest.raises(Exception, match="no column 'nosuch'"):
        spark.read.format("mqtool").option("columns", "topic,nosuch").load(store).collect()
    src = MqtoolDataSource({"path": store, "body": "text"})
    assert src.reader(StructType.fromDDL("topic string")).body == "none"
    assert src.reader(StructType.fromDDL("topic string, body string")).body == "text"


@pytest.mark.parametrize("family,where", [
    ("kafka", "topic = 'forensics'"),
    ("kafka", "offset >= 40 AND codec IN ('gzip', 'none') AND partition = 0"),
    ("litemq", "topic = 'orders.v1'"),
    ("litemq", "queue_id >= 1 AND store_timestamp > 0 AND tags IS NOT NULL"),
])
def test_kafka_and_litemq_column_lanes_push_filters_and_prune(spark, family, where):
    """The Kafka and LiteMQ column lanes under pushed filters and a pruned schema: the rows Spark's own
    filter keeps with pushdown off, and pruned columns equal to the embedded rows' (``iter_range_rows``)."""
    from mqtool.options import DumpOptions
    from mqtool.ranges import family_ranges

    paths = ([str(require_realdata("kafka", "generated-4.0.0-SNAPSHOT"))] if family == "kafka" else
             [str(require_realdata("litemq", n, "data", "broker")) for n in ("clean", "crash")])

    def run():
        df = (spark.read.format("mqtool").option("format", family).option("maxPartitions", "2").load(paths)
              .where(where))
        return sorted(tuple(r) for r in df.select("store", "file", "position", "topic").collect())

    spark.conf.set("spark.sql.python.filterPushdown.enabled", "false")
    want = run()
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    try:
        got = run()
    finally:
        spark.conf.unset("spark.sql.python.filterPushdown.enabled")
    assert got == want and want
    mod = family_ranges(family)
    rows = sorted((p, r["position"], r["size"]) for p in paths for rng in mod.plan(p, None)
                  for r in mod.iter_range_rows(rng, DumpOptions()))
    df = spark.read.format("mqtool").option("format", family).schema("store string, position long, size long")
    assert sorted(map(tuple, df.load(paths).collect())) == rows


def test_quiet_log4j_file_is_named_by_its_text(tmp_path, monkeypatch):
    """The log4j2 file that keeps Spark's chatter off the terminal is shared by every mqtool process of a user:
    one with other text (another mqtool version) lives under another name, so neither rewrites the other's
    file while a JVM is about to read it."""
    import tempfile

    from mqtool.spark import session

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    mine = session._quiet_log4j()
    assert open(mine, encoding="utf-8").read() == session._LOG4J
    monkeypatch.setattr(session, "_LOG4J", session._LOG4J + "# another version\n")
    theirs = session._quiet_log4j()
    assert theirs != mine and open(theirs, encoding="utf-8").read() == session._LOG4J
    monkeypatch.undo()
    assert open(mine, encoding="utf-8").read() == session._LOG4J     # untouched by the other version
