"""Shared test helpers: where the real broker data lives, CLI runner."""
from __future__ import annotations

import hashlib
import json
import os
import signal
import stat
from contextlib import contextmanager
from pathlib import Path

import pytest

# every Finding checks at construction that its code is registered (mqtool/codes.py) at the severity it is
# emitted with; set before mqtool is imported, inherited by CLI subprocesses
os.environ.setdefault("MQTOOL_CHECK_CODES", "1")


def _s3_test_endpoint() -> None:
    """The S3 endpoint of tests/remote_helpers.py's moto server, chosen now: a Spark session started by any test
    inherits its environment once, at start, and its executors must reach that server as the CLI's would."""
    import socket

    if "MQTOOL_TEST_S3_PORT" in os.environ:
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ["MQTOOL_TEST_S3_PORT"] = str(port)
    for k, v in {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_ACCESS_KEY_ID": "testing",
                 "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}.items():
        os.environ[k] = v


_s3_test_endpoint()

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"


def realdata_root() -> Path:
    return Path(os.environ.get("MQTOOL_REALDATA", ROOT.parent / "shared" / "realdata")).resolve()


def require_realdata(*parts: str) -> Path:
    """Path under the realdata folder; skip when absent, but fail under CI=true."""
    p = realdata_root().joinpath(*parts)
    if not p.exists():
        msg = f"real data not found: {p} (set MQTOOL_REALDATA)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    return p


def load_json(p: Path):
    with open(p, "rb") as f:
        return json.load(f)


@pytest.fixture
def run_cli():
    """Run the CLI in-process; returns (exit_code, stdout, stderr)."""
    from click.testing import CliRunner

    from mqtool.cli import cli

    def _run(*args):
        runner = CliRunner()
        r = runner.invoke(cli, [str(a) for a in args], catch_exceptions=False)
        return r.exit_code, r.stdout, r.stderr

    return _run


@pytest.fixture(params=["python", "native"])
def lane_impl(request, monkeypatch):
    """Run a verify-lane test with the Python lane and with the compiled one (mqtool/_native/rmqverify.c)."""
    from mqtool.rocketmq.verify import native_lane as verify

    if request.param == "python":
        monkeypatch.setenv("MQTOOL_NATIVE", "0")
    elif verify._native_lane() is None:
        pytest.skip("compiled helper rmqverify not built (or MQTOOL_NATIVE=0)")
    return request.param


def local_spark(app_name: str):
    """A local[2] SparkSession for tests (no UI, quiet), with the mqtool data source registered; the caller's
    fixture decides its scope and stops it."""
    import sys

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    s = (SparkSession.builder.master("local[2]").appName(app_name)
         .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    s.sparkContext.setLogLevel("ERROR")
    import mqtool.spark   # registers the data source on the active session

    mqtool.spark.register(s)
    return s


@pytest.fixture(scope="module")
def spark():
    """The local[2] SparkSession of a Spark test module: the active one when there is one (one JVM for the
    run; a module that stops it gets a new one for the next), with the data source registered."""
    return local_spark("mqtool-tests")


def require_spark() -> None:
    """Module-level guard of the Spark test modules: skip without pyspark/pyarrow/Java, fail under CI=true."""
    ci = os.environ.get("CI", "").lower() == "true"
    try:
        import pyarrow  # noqa: F401
        import pyspark  # noqa: F401
    except ImportError as e:  # pragma: no cover - depends on the environment
        if ci:
            raise
        pytest.skip(f"pyspark/pyarrow not installed ({e.name})", allow_module_level=True)
    from mqtool.spark.session import java_binary

    if java_binary() is None:  # pragma: no cover
        if ci:
            raise RuntimeError("Java 17+ is needed for the Spark tests")
        pytest.skip("no Java for Spark", allow_module_level=True)


def flush_log(monkeypatch) -> list:
    """Record the flushes and publications of the output writer, in order: ("sync",) for a syncfs, ("fsync",
    is_dir) for an fsync, ("publish", name) for a rename or link into place."""
    import os
    import stat

    from mqtool import io

    events = []
    real_syncfs = getattr(io, "_syncfs", lambda fd: False)
    real_fsync, real_replace, real_link = os.fsync, os.replace, os.link

    def syncfs(fd):
        done = real_syncfs(fd)
        if done:
            events.append(("sync",))
        return done

    def fsync(fd):
        events.append(("fsync", stat.S_ISDIR(os.fstat(fd).st_mode)))
        return real_fsync(fd)

    def replace(src, dst, **kw):
        real_replace(src, dst, **kw)
        events.append(("publish", str(dst)))

    def link(src, dst, **kw):
        real_link(src, dst, **kw)
        events.append(("publish", str(dst)))

    monkeypatch.setattr(io, "_syncfs", syncfs, raising=False)
    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(os, "link", link)
    return events


def writable_copy(src: Path, dst: Path) -> Path:
    """A copy of a (read-only) store that tests may damage, its symlinks kept as links: directories 0755,
    files 0644 (a stray write would succeed, and be caught)."""
    import shutil

    shutil.copytree(src, dst, symlinks=True)
    for p in [dst, *dst.rglob("*")]:
        if not p.is_symlink():
            os.chmod(p, 0o755 if p.is_dir() else 0o644)
    return dst


def snapshot(root: Path) -> dict:
    """path → (type, size, mtime_ns, sha256 | None) for every entry, directories included (lstat)."""
    snap = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames + ["."]:
            p = Path(dirpath) / n
            st = os.lstat(p)
            digest = None
            if stat.S_ISREG(st.st_mode):
                digest = hashlib.sha256(p.read_bytes()).hexdigest()
            snap[str(p)] = (stat.S_IFMT(st.st_mode), st.st_size if not stat.S_ISDIR(st.st_mode) else None,
                            st.st_mtime_ns, digest)
    return snap


def rocketmq_store_copy(tmp_path: Path, name: str = "gen-5.1.4-clean") -> Path:
    """A writable copy of the real RocketMQ store ``name`` at ``tmp_path/name/store``."""
    return writable_copy(require_realdata("rocketmq", name, "store"), tmp_path / name / "store")


class Hang(Exception):
    """A CLI run under :func:`alarm` gave no answer in time (a hang guard, not a timing assertion)."""


@contextmanager
def alarm(seconds: int = 60):
    """Raise :class:`Hang` in this thread when the block takes longer than ``seconds``."""
    def on_alarm(*_):
        raise Hang(f"no answer within {seconds}s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.fixture
def crc_bytes(monkeypatch):
    """Bytes the walker checksums (every CRC of the walker goes through _span_crc or _decode)."""
    from mqtool.kafka import scan as S

    seen = [0]
    real_span, real_decode = S._span_crc, S._decode

    def span(fn, buf, a, b):
        seen[0] += b - a
        return real_span(fn, buf, a, b)

    def decode(buf, path, p, off, size, magic, check_crc):
        seen[0] += size
        return real_decode(buf, path, p, off, size, magic, check_crc)

    monkeypatch.setattr(S, "_span_crc", span)
    monkeypatch.setattr(S, "_decode", decode)
    return seen
