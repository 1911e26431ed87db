"""Starting Spark for ``--engine spark``: clear one-line errors when pyspark or Java is missing, executors
that run this very Python (so they can import mqtool), and the ``mqtool`` data source registered."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

from mqtool.errors import CorruptRecordError, InputError, MqToolError, UsageError

MIN_JAVA = 17


def require_pyspark():
    try:
        import pyspark  # noqa: F401
        import pyarrow  # noqa: F401
    except ImportError as e:
        raise UsageError(f"--engine spark needs pyspark and pyarrow ({e.name} is not installed): "
                         "pip install 'mqtool[spark]'") from None


def java_binary() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home:
        p = os.path.join(home, "bin", "java")
        if os.access(p, os.X_OK):
            return p
    return shutil.which("java")


def require_java() -> str:
    """Path of a Java >= 17 binary, else a one-line UsageError (instead of Spark's stack trace)."""
    java = java_binary()
    if java is None:
        raise UsageError(f"--engine spark needs Java {MIN_JAVA}+ and none was found "
                         "(install a JDK, e.g. openjdk-17-jre-headless, or set JAVA_HOME)")
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
        text = out.stderr + out.stdout
    except (OSError, subprocess.TimeoutExpired) as e:
        raise UsageError(f"--engine spark: cannot run {java}: {e}") from None
    m = re.search(r'version "(\d+)(?:\.(\d+))?', text)
    if m:
        major = int(m.group(1))
        if major == 1 and m.group(2):
            major = int(m.group(2))
        if major < MIN_JAVA:
            raise UsageError(f"--engine spark needs Java {MIN_JAVA}+, {java} is Java {major} "
                             "(set JAVA_HOME to a newer JDK)")
    return java


# Our defaults, used only where Spark's configuration (spark-submit, spark-defaults.conf,
# PYSPARK_SUBMIT_ARGS, the builder of an embedding program) says nothing.
DEFAULTS = {
    "spark.ui.showConsoleProgress": "false",        # the CLI's stdout/stderr are its own
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.python.filterPushdown.enabled": "true",   # the mqtool data source's filter pushdown
}


def get_session(master: str | None = None, app_name: str = "mqtool"):
    """The active SparkSession, or ``getOrCreate`` with whatever Spark's own configuration says (the
    master of ``spark-submit``, ``spark-defaults.conf`` or ``PYSPARK_SUBMIT_ARGS``; ``local[*]`` only when
    nothing names one), ``master`` only when given. The mqtool data source is registered. Executors run
    ``sys.executable`` unless PYSPARK_PYTHON (or ``spark.pyspark.python``) says otherwise."""
    require_pyspark()
    active = _active_session()
    if active is not None and master is None:
        from mqtool.spark import register

        register(active)
        return active
    require_java()
    _quiet_driver_log()
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    try:
        SparkContext._ensure_initialized()      # starts (or joins, under spark-submit) the JVM: Spark's conf
        conf = SparkConf()                      # spark.* as spark-submit resolved them
    except Exception as e:  # noqa: BLE001 - Spark's own start-up failures (JVM, ports): one line
        raise UsageError(f"cannot start Spark: {_first_line(e)}") from None
    if not (conf.contains("spark.pyspark.python") or conf.contains("spark.archives")
            or conf.contains("spark.yarn.dist.archives")):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    b = SparkSession.builder
    if master:
        b = b.master(master)
    elif not conf.contains("spark.master"):
        b = b.master("local[*]")
    if not conf.contains("spark.app.name") or conf.get("spark.app.name") == "pyspark-shell":
        b = b.appName(app_name)
    for k, v in DEFAULTS.items():
        if not conf.contains(k):
            b = b.config(k, v)
    try:
        spark = b.getOrCreate()
    except Exception as e:  # noqa: BLE001
        raise UsageError(f"cannot start Spark on {master or conf.get('spark.master', 'local[*]')}: "
                         f"{_first_line(e)}") from None
    from mqtool.spark import register

    register(spark)
    return spark


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def _quiet_driver_log() -> None:
    """Keep Spark's start-up chatter off the terminal when nobody configured Spark's logging: a log4j2
    file for the driver JVM through SPARK_SUBMIT_OPTS (the launcher adds it to the JVM's options), unless
    SPARK_CONF_DIR holds a log4j2.properties or the options name one already. Under spark-submit the JVM
    runs already and this changes nothing."""
    opts = os.environ.get("SPARK_SUBMIT_OPTS", "")
    conf_dir = os.environ.get("SPARK_CONF_DIR") or (os.path.join(os.environ["SPARK_HOME"], "conf")
                                                    if os.environ.get("SPARK_HOME") else None)
    if "log4j2.configurationFile" in opts or (conf_dir and os.path.exists(os.path.join(conf_dir,
                                                                                        "log4j2.properties"))):
        return
    os.environ["SPARK_SUBMIT_OPTS"] = (opts + " " if opts else "") + f"-Dlog4j2.configurationFile={_quiet_log4j()}"


class spark_errors:
    """Context manager on the driver: a failed Spark job becomes one :class:`InputError` naming the file
    when an executor could not read it (or met damage under FAILFAST), else one line of Spark's message
    instead of a Py4J trace."""

    def __init__(self, what: str = "Spark job"):
        self.what = what

    def __enter__(self):
        return self

    def __exit__(self, et, e, tb):
        if e is None or isinstance(e, (KeyboardInterrupt, SystemExit, MqToolError)) or not _is_spark_error(e):
            return False
        import json

        from mqtool.spark.source import FAIL_MARK

        text = str(e)
        parts = text.split(FAIL_MARK)
        if len(parts) >= 3:
            try:
                d = json.loads(parts[1])
            except ValueError:
                d = None
            if d:
                if d.get("kind") == "damage":
                    raise CorruptRecordError(f"damaged input (mode FAILFAST): {d.get('message')}") from None
                raise InputError(f"cannot read on an executor: {d.get('message')}", d.get("file")) from None
        raise InputError(f"{self.what} failed: {_first_line(e)}") from None


def _is_spark_error(e: BaseException) -> bool:
    mod = type(e).__module__ or ""
    return mod.startswith(("pyspark", "py4j"))


def describe(spark, group: str, description: str) -> None:
    """Name the following Spark jobs (Spark UI / history server): job group and description."""
    sc = spark.sparkContext
    sc.setJobGroup(group, description[:500], interruptOnCancel=False)
    sc.setJobDescription(description[:500])


_LOG4J = """# written by mqtool: Spark's own messages only from errors up (our findings go to stdout/stderr)
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = spark: %p %c{1}: %m%n
"""


def _quiet_log4j() -> str:
    """A log4j2 configuration that keeps Spark's start-up chatter off the terminal (a temp file)."""
    import tempfile

    uid = os.getuid() if hasattr(os, "getuid") else 0
    path = os.path.join(tempfile.gettempdir(), f"mqtool-log4j2-{uid}.properties")
    from mqtool.errors import MqToolError
    from mqtool.io import read_input, write_atomic

    try:
        if read_input(path).decode("utf-8", errors="replace") == _LOG4J:
            return path
    except MqToolError:
        pass

    write_atomic(path, _LOG4J.encode("utf-8"), overwrite=True)
    return path


def _active_session():
    from pyspark.sql import SparkSession

    return SparkSession.getActiveSession()


class InDir:
    """``fn`` run on an executor from the driver's working directory, so that relative paths mean what
    they mean on the driver (a directory missing there is one clear error naming it)."""

    def __init__(self, fn, cwd: str):
        self.fn = fn
        self.cwd = cwd

    def __call__(self, item):
        before = os.getcwd()
        try:
            os.chdir(self.cwd)
        except OSError as e:
            from mqtool.spark.source import ReadFailed

            raise ReadFailed("missing", self.cwd, f"the driver's working directory: {e.strerror}") from None
        try:
            return self.fn(item)
        finally:
            os.chdir(before)
