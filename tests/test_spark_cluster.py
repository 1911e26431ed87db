"""A real standalone Spark cluster on loopback (issue #19): a master and two one-core workers started with
Spark's own classes, the CLI run against it in a subprocess: a relative store path gives the embedded
verify output (executors run from other directories), and a segment no executor can open fails the export
with one line naming it (exit 2). Marked ``spark_cluster`` (about a minute); every JVM is killed in
teardown."""
from __future__ import annotations

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
    port = _free_port()
    master = f"spark://127.0.0.1:{port}"
    procs = []
    logs = []

    def start(args, name):
        log = open(base / f"{name}.log", "wb")
        logs.append(log)
        procs.append(subprocess.Popen([java, "-Xmx256m", "-cp", cp, *args], stdout=log, stderr=subprocess.STDOUT,
                                      env=env, cwd=base, start_new_session=True))

    try:
        start(["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
               "--webui-port", str(_free_port())], "master")
        _wait_port(port, procs)
        for i in (1, 2):
            wd = base / f"worker{i}"
            wd.mkdir()
            start(["org.apache.spark.deploy.worker.Worker", master, "--host", "127.0.0.1", "--cores", "1",
                   "--memory", "640m", "--webui-port", str(_free_port()), "--work-dir", str(wd)], f"worker{i}")
        time.sleep(5)
        yield master, env
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        for log in logs:
            log.close()


def _cli(env, cwd, *args):
    # executors of 512 MiB fit the 640 MiB workers (Spark's default of 1 GiB would wait for ever); given the
    # way a data engineer would, through PYSPARK_SUBMIT_ARGS
    sub = "--conf spark.executor.memory=512m --conf spark.ui.enabled=false pyspark-shell"
    p = subprocess.run([sys.executable, "-m", "mqtool", *map(str, args)], capture_output=True, text=True,
                       env=dict(env, SPARK_SUBMIT_OPTS="", PYSPARK_SUBMIT_ARGS=sub), cwd=cwd, timeout=180)
    return p.returncode, p.stdout, p.stderr


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
