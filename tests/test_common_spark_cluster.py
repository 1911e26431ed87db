"""A real standalone Spark cluster on loopback (issue #19): a master and two one-core workers started with
Spark's own classes, the CLI run against it in a subprocess: a relative store path gives the embedded
verify output (executors run from other directories), and a segment no executor can open fails the export
with one line naming it (exit 2). Marked ``spark_cluster`` (about a minute); every JVM is killed in
teardown."""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import require_realdata

_CI = os.environ.get("CI", "").lower() == "true"
try:
    import pyspark
except ImportError:  # pragma: no cover
    if _CI:
        raise
    pytest.skip("pyspark not installed", allow_module_level=True)

from mqtool.spark.session import java_binary  # noqa: E402

if java_binary() is None:  # pragma: no cover
    if _CI:
        raise RuntimeError("Java 17+ is needed for the Spark tests")
    pytest.skip("no Java for Spark", allow_module_level=True)

pytestmark = [pytest.mark.spark, pytest.mark.spark_cluster]
ROOT = Path(__file__).resolve().parent.parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, procs, timeout: float = 120) -> None:
    end = time.time() + timeout
    while time.time() < end:
        for p in procs:
            if p.poll() is not None:
                raise RuntimeError(f"a Spark daemon exited early ({p.returncode})")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.5)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port}")


def _processes_in(dirs) -> list[tuple[int, str]]:
    """(pid, command line) of every process but this one whose working directory lies in one of ``dirs``: the
    daemons (started in the cluster's directory), the executors and their Python workers (in the workers'
    work dirs), the CLI runs' driver JVMs (in the tests' directories)."""
    roots = [os.path.realpath(d) + os.sep for d in dirs]
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            cwd = os.readlink(f"/proc/{d}/cwd") + os.sep
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
            with open(f"/proc/{d}/stat", "rb") as f:
                zombie = f.read().rsplit(b")", 1)[1].split()[0] == b"Z"
        except OSError:
            continue
        if not zombie and any(cwd.startswith(r) for r in roots):
            found.append((int(d), cmd[:200]))
    return found


class Cluster:
    """The running cluster: ``master, env = cluster``; :meth:`stop` ends it and returns what outlived it."""

    def __init__(self, master, env, base):
        self.master, self.env, self.base = master, env, base
        self.procs, self.logs = [], []
        self.dirs = {str(base)}           # + every directory a CLI run of the tests started in
        self.stopped = None

    def __iter__(self):
        return iter((self.master, self.env))

    def stop(self, grace: float = 60) -> list:
        """SIGTERM to each daemon's process group (the daemon, the executors it launched), then wait up to
        ``grace`` s for every process of the cluster and of the CLI runs to end; returns those still there
        (then killed)."""
        if self.stopped is not None:
            return self.stopped
        self.dirs.update(_CWDS)
        for p in self.procs:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for p in self.procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        for log in self.logs:
            log.close()
        end = time.time() + grace
        while _processes_in(self.dirs) and time.time() < end:
            time.sleep(0.5)
        self.stopped = _processes_in(self.dirs)
        for pid, _ in self.stopped:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return self.stopped


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    home = Path(pyspark.__file__).parent
    cp = str(home / "jars" / "*")
    java = java_binary()
    base = tmp_path_factory.mktemp("cluster")
    # SPARK_SCALA_VERSION: what bin/load-spark-env.sh would set (the workers launch executors without it),
    # read from the Scala library Spark ships
    scala = next((home / "jars").glob("scala-library-*.jar")).name.split("-")[2].rsplit(".", 2)[0]
    env = dict(os.environ, SPARK_HOME=str(home), SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable,
               SPARK_SCALA_VERSION=scala,
               PYTHONPATH=str(ROOT))
    # the daemons (and so the executors they launch) get neither this checkout on their path nor a Python: as on
    # nodes where mqtool is not installed, an application ships it (_cli: spark.executorEnv.PYTHONPATH; the
    # packed-environment test: an archive)
    daemon_env = {k: v for k, v in env.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON")}
    port = _free_port()
    c = Cluster(f"spark://127.0.0.1:{port}", env, base)

    def start(args, name):
        log = open(base / f"{name}.log", "wb")
        c.logs.append(log)
        c.procs.append(subprocess.Popen([java, "-Xmx256m", "-cp", cp, *args], stdout=log, stderr=subprocess.STDOUT,
                                        env=daemon_env, cwd=base, start_new_session=True))

    try:
        start(["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
               "--webui-port", str(_free_port())], "master")
        _wait_port(port, c.procs)
        for i in (1, 2):
            wd = base / f"worker{i}"
            wd.mkdir()
            start(["org.apache.spark.deploy.worker.Worker", c.master, "--host", "127.0.0.1", "--cores", "1",
                   "--memory", "640m", "--webui-port", str(_free_port()), "--work-dir", str(wd)], f"worker{i}")
        time.sleep(5)
        yield c
    finally:
        left = c.stop()
        assert not left, f"processes outlived the cluster: {left}"


def _cli(env, cwd, *args):
    # executors of 512 MiB fit the 640 MiB workers (Spark's default of 1 GiB would wait for ever); given the
    # way a data engineer would, through PYSPARK_SUBMIT_ARGS
    sub = (f"--conf spark.executor.memory=512m --conf spark.ui.enabled=false "
           f"--conf spark.executorEnv.PYTHONPATH={ROOT} pyspark-shell")
    _CWDS.add(str(cwd))
    p = subprocess.run([sys.executable, "-m", "mqtool", *map(str, args)], capture_output=True, text=True,
                       env=dict(env, SPARK_SUBMIT_OPTS="", PYSPARK_SUBMIT_ARGS=sub), cwd=cwd, timeout=180)
    return p.returncode, p.stdout, p.stderr


_CWDS: set = set()       # where the CLI runs (and their driver JVMs) were started


def test_relative_path_and_unreadable_segment_on_a_cluster(cluster, tmp_path):
    master, env = cluster
    store = tmp_path / "store"
    shutil.copytree(require_realdata("rocketmq", "gen-4.9.7-kill", "store"), store)
    opts = ["--master", master]
    conf = ["--split-size", "40K"]
    want = _cli(env, tmp_path, "verify", "store", "store", "--json", "--jobs", "1")
    got = _cli(env, tmp_path, "verify", "store", "store", "--json", "--engine", "spark", *opts, *conf)
    assert got[:2] == want[:2], got[2][-3000:]
    a = _cli(env, tmp_path, "export", "store", "--to", "a")
    b = _cli(env, tmp_path, "export", "store", "--to", "b", "--engine", "spark", *opts)
    ours = [x for x in b[2].splitlines() if x.startswith("mqtool:")]     # Spark's own log lines are its own
    assert a[0] == b[0] and "\n".join(ours).replace("to b", "to a") + "\n" == a[2], b[2][-3000:]
    seg = sorted((store / "commitlog").iterdir())[1]
    seg.unlink()
    seg.symlink_to(tmp_path / "nowhere")
    code, out, err = _cli(env, tmp_path, "export", "store", "--to", "c", "--engine", "spark", *opts)
    # mqtool's own line names the segment (Spark's log of the failed task may precede it: see docs/spark.md)
    ours = [x for x in err.splitlines() if x.startswith("mqtool:")]
    assert code == 2 and len(ours) == 1 and str(seg) in ours[0] and "cannot read" in ours[0], err[-3000:]
    assert err.rstrip("\n").splitlines()[-1] == ours[0]


# --- a packed environment (venv-pack --archives), issue #19 item 2 --------------------------------------------

_PACKED_JOB = r'''
import json, sys
from pyspark.sql import SparkSession
from pyspark.sql.functions import udf

spark = SparkSession.builder.getOrCreate()
import mqtool.spark  # noqa: E402  (registers the data source on the active session)

store, out = sys.argv[1], sys.argv[2]
cols = ["offset", "msg_id", "topic", "queue_id", "queue_offset", "body_crc", "crc_ok"]
df = spark.read.format("mqtool").option("splitSize", "40K").load(store)
rows = [r.asDict() for r in df.select(*cols).collect()]


@udf("string")
def probe(offset):
    # runs in the Python of the executors' SQL tasks (Spark's spark.sql.execution.pyspark.python, else
    # spark.pyspark.python), the setting the data source's reads follow too
    import json, os, sys
    import mqtool, mqtool.native
    dump = mqtool.native.load("rmqcore")  # the RocketMQ core (its dump part is rmqdump)
    return json.dumps({"python": sys.executable, "prefix": sys.prefix, "cwd": os.getcwd(), "mqtool": mqtool.__file__,
                       "native": mqtool.native.status(), "rmqdump": getattr(dump, "__file__", None)})


seen = df.repartition(2).select(probe("offset").alias("info")).groupBy("info").count().collect()
tasks = [dict(json.loads(r.info), rows=r["count"]) for r in seen]
with open(out, "w") as f:
    json.dump({"rows": rows, "tasks": tasks, "sql_python": spark.conf.get("spark.sql.execution.pyspark.python", None)}, f)
spark.stop()
'''


@pytest.fixture(scope="session")
def packed_env(tmp_path_factory):
    """mqtool as a wheel built from this checkout (compiled helpers included, not editable), installed with
    only what executors need (mqtool's dependencies and pyarrow; pyspark comes from Spark's own
    python/lib zips) into a fresh venv, packed by venv-pack: the archive a data engineer ships."""
    venv_pack = shutil.which("venv-pack", path=str(Path(sys.executable).parent)) or shutil.which("venv-pack")
    if venv_pack is None:
        if _CI:
            raise RuntimeError("venv-pack is needed (the dev extra installs it)")
        pytest.skip("venv-pack not installed")
    base = tmp_path_factory.mktemp("packed")
    src = base / "src"
    src.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(ROOT / name, src / name)
    skip = shutil.ignore_patterns("*.so", "__pycache__", "*.pyc")
    for name in ("mqtool", "formats"):
        shutil.copytree(ROOT / name, src / name, ignore=skip)
    run = dict(capture_output=True, text=True, timeout=600)
    p = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(base / "wheels"),
                        str(src)], **run)
    assert p.returncode == 0, p.stderr[-3000:]
    wheel = next((base / "wheels").glob("mqtool-*.whl"))
    env = base / "env"
    subprocess.run([sys.executable, "-m", "venv", str(env)], check=True, **run)
    p = subprocess.run([str(env / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel), "pyarrow"], **run)
    assert p.returncode == 0, p.stderr[-3000:]
    archive = base / "env.tar.gz"
    p = subprocess.run([venv_pack, "-p", str(env), "-o", str(archive), "-q"], **run)
    assert p.returncode == 0, p.stderr[-3000:]
    return archive


def test_packed_environment_on_a_cluster(cluster, packed_env, tmp_path):
    """spark-submit --archives env.tar.gz#env with spark.pyspark.python=./env/bin/python, nothing else: the
    executors run mqtool and its compiled helpers from the unpacked archive, and the rows equal the
    embedded scan. The driver's Python is the submitting one (spark.pyspark.driver.python), as in Spark's
    own recipe; it is not given the archive."""
    from pyspark.find_spark_home import _find_spark_home

    from mqtool.options import DumpOptions
    from mqtool.ranges import family_ranges

    master, env = cluster
    archive = packed_env
    store = require_realdata("rocketmq", "gen-4.9.7-kill", "store")
    job = tmp_path / "job.py"
    job.write_text(_PACKED_JOB)
    out = tmp_path / "out.json"
    submit = Path(_find_spark_home()) / "bin" / "spark-submit"
    senv = {k: v for k, v in env.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_SUBMIT_ARGS", "SPARK_SUBMIT_OPTS")}
    _CWDS.add(str(tmp_path))
    p = subprocess.run([str(submit), "--master", master, "--archives", f"{archive}#env",
                        "--conf", "spark.pyspark.python=./env/bin/python",
                        "--conf", f"spark.pyspark.driver.python={sys.executable}",
                        "--conf", "spark.executor.memory=512m", "--conf", "spark.ui.enabled=false",
                        str(job), str(store), str(out)],
                       capture_output=True, text=True, env=senv, cwd=tmp_path, timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + "\n".join(x for x in p.stderr.splitlines() if " INFO " not in x)[-4000:]
    got = json.loads(out.read_text())
    mod = family_ranges("rocketmq")
    want = [r for rng in mod.plan(str(store), None) for r in mod.iter_range_rows(rng, DumpOptions())]
    cols = ["offset", "msg_id", "topic", "queue_id", "queue_offset", "body_crc", "crc_ok"]
    assert len(got["rows"]) == len(want) > 500
    assert sorted(got["rows"], key=lambda r: r["offset"]) == [{c: r.get(c) for c in cols} for r in want]
    # the reads ran in the archive's Python: register() left them on it through Spark's own setting
    assert got["sql_python"] == "./env/bin/python"
    assert len(got["tasks"]) >= 1 and sum(t["rows"] for t in got["tasks"]) == len(want)
    for t in got["tasks"]:
        unpacked = os.path.join(t["cwd"], "env")
        # the executors' Python is the archive's, and mqtool with every compiled helper comes from it
        assert t["prefix"].startswith(unpacked) or os.path.realpath(t["prefix"]) == os.path.realpath(unpacked), t
        assert os.path.realpath(t["mqtool"]).startswith(os.path.realpath(unpacked)), t
        assert all(t["native"].values()), t
        assert os.path.realpath(t["rmqdump"]).startswith(os.path.realpath(unpacked)), t
        assert str(ROOT) not in t["mqtool"]


def test_distributed_verify_every_family_on_a_cluster(cluster, tmp_path):
    """``verify --engine spark`` of a RocketMQ, a LiteMQ and a Kafka store (relative paths, one run: one
    job on the two workers) prints the embedded NDJSON byte for byte, with the same exit code."""
    master, env = cluster
    for name, parts in (("rmq", ("rocketmq", "gen-4.9.7-kill", "store")),
                        ("lite", ("litemq", "crash", "data", "broker")),
                        ("kafka", ("kafka", "generated-4.0.0-SNAPSHOT"))):
        shutil.copytree(require_realdata(*parts), tmp_path / name, symlinks=True)
    want = _cli(env, tmp_path, "verify", "store", "rmq", "lite", "kafka", "--json", "--jobs", "1")
    got = _cli(env, tmp_path, "verify", "store", "rmq", "lite", "kafka", "--json", "--engine", "spark",
               "--master", master, "--split-size", "64K")
    assert got[:2] == want[:2], got[2][-3000:]
    assert want[1].count('"kind":"summary"') == 3


def test_every_cluster_process_stops(cluster, tmp_path):
    """Last in the module: stopping the cluster leaves nothing behind — the daemons, the executors, their Python
    workers (pyspark's daemon puts itself in a process group of its own, out of reach of the daemons' group
    kill: it must end with its executor) and the drivers of the CLI runs (each a JVM of its own). A job runs
    first, so executors and Python workers exist (or have existed) when the cluster stops."""
    master, env = cluster
    shutil.copytree(require_realdata("rocketmq", "gen-4.9.7-kill", "store"), tmp_path / "store")
    code, out, err = _cli(env, tmp_path, "verify", "store", "store", "--json", "--engine", "spark",
                          "--master", master, "--split-size", "64K")
    assert code in (0, 1) and '"kind":"summary"' in out, err[-3000:]
    running = _processes_in(cluster.dirs | _CWDS)
    assert sum("org.apache.spark.deploy" in cmd for _, cmd in running) >= 3, running   # the check sees them
    assert cluster.stop() == []
