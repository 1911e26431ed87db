"""Starting Spark for ``--engine spark``: clear one-line errors when pyspark or Java is missing, executors
that run this very Python (so they can import mqtool), and the ``mqtool`` data source registered."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

from mqtool.errors import UsageError

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


def get_session(master: str | None = None, app_name: str = "mqtool"):
    """The active SparkSession, or a new one on ``master`` (default ``local[*]``), with the mqtool data
    source registered. Executors run ``sys.executable`` unless PYSPARK_PYTHON says otherwise."""
    require_pyspark()
    active = _active_session()
    if active is not None and master is None:
        from mqtool.spark import register

        register(active)
        return active
    require_java()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    b = (SparkSession.builder.master(master or "local[*]").appName(app_name)
         .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={_quiet_log4j()}")
         .config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", "4")
         .config("spark.sql.execution.arrow.pyspark.enabled", "true"))
    try:
        spark = b.getOrCreate()
    except Exception as e:  # Spark's own start-up failures (JVM, ports): one line
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UsageError(f"cannot start Spark on {master or 'local[*]'}: {msg}") from None
    spark.sparkContext.setLogLevel("ERROR")
    from mqtool.spark import register

    register(spark)
    return spark


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


class SparkRunner:
    """A :mod:`mqtool.ranges` runner that maps a task over ranges as Spark tasks (one per item), results
    collected to the driver in order. Used by ``verify --engine spark``."""

    def __init__(self, spark):
        self.spark = spark
        self.jobs = max(2, spark.sparkContext.defaultParallelism)

    def imap(self, fn, items):
        items = list(items)
        if not items:
            return iter(())
        rdd = self.spark.sparkContext.parallelize(items, len(items))
        return iter(rdd.map(fn).collect())
