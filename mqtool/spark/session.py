"""Starting Spark for ``--engine spark``: clear one-line errors when pyspark or Java is missing, executors
that run this very Python (so they can import mqtool), Spark's own configuration first and our defaults only
where nobody set one, and either a session with the ``mqtool`` data source registered (:func:`get_session`)
or, for jobs of Python tasks only, a bare SparkContext (:func:`get_context`: a cheaper cold start)."""
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
    text = _release_version(java)
    if text is None:
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


def _release_version(java: str) -> str | None:
    """``JAVA_VERSION="17.0.15"`` of the ``release`` file of the JDK/JRE ``java`` belongs to (every JDK since 9
    writes one at its root), spelt as ``java -version`` spells it, without starting a JVM (one less JVM start
    per cold run); None when there is no such file."""
    from mqtool.io import read_input

    root = os.path.dirname(os.path.dirname(os.path.realpath(java)))
    try:
        text = read_input(os.path.join(root, "release")).decode("utf-8", errors="replace")
    except (MqToolError, OSError):
        return None
    m = re.search(r'^JAVA_VERSION="([^"]+)"', text, re.M)
    return f'version "{m.group(1)}"' if m else None


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
    from pyspark.sql import SparkSession

    conf, ours = _configured(master, app_name)
    b = SparkSession.builder
    for k, v in ours.items():
        b = b.config(k, v)
    try:
        spark = b.getOrCreate()
    except Exception as e:  # noqa: BLE001
        raise UsageError(f"cannot start Spark on {master or conf.get('spark.master', 'local[*]')}: "
                         f"{_first_line(e)}") from None
    from mqtool.spark import register

    register(spark)
    return spark


def get_context(master: str | None = None, app_name: str = "mqtool"):
    """The SparkContext for jobs of Python tasks (``export`` and ``verify --engine spark``): that of the
    active session or context, else one started with the configuration :func:`get_session` would use, but
    without a SparkSession or the data source: their start-up (Spark SQL's session state, the data source's
    registration) costs about 2 s of a cold run's ~6 s and these jobs use neither. A session created later
    in the process is built on this context (same configuration)."""
    require_pyspark()
    from pyspark import SparkContext

    active = _active_session()
    if active is not None and master is None:
        return active.sparkContext
    running = _running_context()
    if running is not None and master is None:
        return running
    conf, ours = _configured(master, app_name, quick_jit=True)
    for k, v in ours.items():
        conf.set(k, v)
    try:
        return SparkContext.getOrCreate(conf)
    except Exception as e:  # noqa: BLE001
        raise UsageError(f"cannot start Spark on {master or conf.get('spark.master', 'local[*]')}: "
                         f"{_first_line(e)}") from None


def context_of(spark):
    """The SparkContext of a SparkSession (or the context itself)."""
    return getattr(spark, "sparkContext", spark)


def _configured(master, app_name, quick_jit: bool = False):
    """Start (or join) Spark's JVM; returns Spark's configuration as spark-submit resolved it and what we
    add to it: ``master`` when given (else ``local[*]`` when nothing names one), the app name when Spark
    has none of its own, and :data:`DEFAULTS` where nobody configured them."""
    require_java()
    _quiet_driver_log()
    from pyspark import SparkConf, SparkContext

    saved = os.environ.get("SPARK_SUBMIT_OPTS")
    if quick_jit and SparkContext._gateway is None:
        _quick_jit()
    try:
        SparkContext._ensure_initialized()      # starts (or joins, under spark-submit) the JVM: Spark's conf
        conf = SparkConf()                      # spark.* as spark-submit resolved them
    except Exception as e:  # noqa: BLE001 - Spark's own start-up failures (JVM, ports): one line
        raise UsageError(f"cannot start Spark: {_first_line(e)}") from None
    finally:                                    # a JVM started later in this process decides again
        if saved is not None:
            os.environ["SPARK_SUBMIT_OPTS"] = saved
        else:
            os.environ.pop("SPARK_SUBMIT_OPTS", None)
    if not (conf.contains("spark.pyspark.python") or conf.contains("spark.archives")
            or conf.contains("spark.yarn.dist.archives")):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    ours: dict = {}
    if master:
        ours["spark.master"] = master
    elif not conf.contains("spark.master"):
        ours["spark.master"] = "local[*]"
    if not conf.contains("spark.app.name") or conf.get("spark.app.name") == "pyspark-shell":
        ours["spark.app.name"] = app_name
    # pyspark starts the JVM of a program it was not started by (no gateway port handed down by spark-submit)
    # as the application "pyspark-shell": a shell to spark-submit
    shell = "PYSPARK_GATEWAY_PORT" not in os.environ
    for k, v in DEFAULTS.items():
        if not conf.contains(k) or (shell and k in SHELL_IMPLIED and not user_sets(k)):
            ours[k] = v
    return conf, ours


# What spark-submit sets by itself for a "shell" application — as which pyspark launches the JVM of a plain
# Python program (its PYSPARK_SUBMIT_ARGS end in ``pyspark-shell``): the console progress bar, drawn over the
# CLI's own output. Configured by nobody, it is not Spark's configuration but the launcher's guess.
SHELL_IMPLIED = ("spark.ui.showConsoleProgress",)


def user_sets(key: str) -> bool:
    """Whether Spark's configuration as a user writes it sets ``key``: a ``--conf``/``-c`` in
    PYSPARK_SUBMIT_ARGS, the properties file (``--properties-file``, else ``spark-defaults.conf`` in
    SPARK_CONF_DIR or SPARK_HOME/conf) or a ``-D`` Java option (SPARK_SUBMIT_OPTS, JAVA_TOOL_OPTIONS)."""
    import shlex

    try:
        args = shlex.split(os.environ.get("PYSPARK_SUBMIT_ARGS", ""))
    except ValueError:
        args = os.environ.get("PYSPARK_SUBMIT_ARGS", "").split()
    files = []
    for i, a in enumerate(args):
        val = args[i + 1] if i + 1 < len(args) else ""
        if a.startswith("--conf="):
            val, a = a[len("--conf="):], "--conf"
        elif a.startswith("--properties-file="):
            val, a = a[len("--properties-file="):], "--properties-file"
        if a in ("--conf", "-c") and val.split("=", 1)[0].strip() == key:
            return True
        if a == "--properties-file" and val:
            files.append(val)
    conf_dir = os.environ.get("SPARK_CONF_DIR") or os.path.join(_spark_home(), "conf")
    files.append(os.path.join(conf_dir, "spark-defaults.conf"))
    if any(key in _properties(f) for f in files):
        return True
    return any(f"-D{key}=" in os.environ.get(v, "") for v in ("SPARK_SUBMIT_OPTS", "JAVA_TOOL_OPTIONS"))


def _spark_home() -> str:
    if os.environ.get("SPARK_HOME"):
        return os.environ["SPARK_HOME"]
    try:
        from pyspark.find_spark_home import _find_spark_home

        return _find_spark_home()
    except Exception:  # noqa: BLE001 - pyspark's own lookup exits or raises when it finds nothing
        return ""


def _properties(path: str) -> set:
    """The keys of a Java properties file as Spark reads spark-defaults.conf (``key value`` or
    ``key=value`` lines, ``#``/``!`` comments); an unreadable or missing file has none."""
    from mqtool.io import read_input

    try:
        text = read_input(path).decode("utf-8", errors="replace")
    except (MqToolError, OSError):
        return set()
    keys = set()
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        keys.add(re.split(r"[\s=:]", line, maxsplit=1)[0])
    return keys


QUICK_JIT = "-XX:TieredStopAtLevel=1"


def _quick_jit() -> None:
    """For a driver JVM that only schedules Python tasks and gathers their small results (``export``,
    ``verify``): HotSpot's C1 compiler only. The C2 compiler's threads spend CPU while Spark starts (on two
    cores, the start-up's own) on code this JVM does not run long enough to profit from. Put first in
    SPARK_SUBMIT_OPTS, so a JIT option given there, or in ``spark.driver.extraJavaOptions`` (added after it
    by the launcher), wins; nothing when the JVM is not started here (spark-submit starts it)."""
    if "PYSPARK_GATEWAY_PORT" in os.environ:
        return
    opts = os.environ.get("SPARK_SUBMIT_OPTS", "")
    if "Tiered" not in opts:
        os.environ["SPARK_SUBMIT_OPTS"] = QUICK_JIT + (" " + opts if opts else "")


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
    sc = context_of(spark)
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
# a "shell" sets the console's level to its main class's logger level, WARN when that logger has none
# ("Setting default log level to WARN"): pyspark's gateway for a plain Python program, spark-shell
logger.pyshell.name = org.apache.spark.api.python.PythonGatewayServer
logger.pyshell.level = error
logger.repl.name = org.apache.spark.repl.Main
logger.repl.level = error
"""


def _quiet_log4j() -> str:
    """A log4j2 configuration that keeps Spark's start-up chatter off the terminal (a temp file)."""
    import tempfile

    uid = os.getuid() if hasattr(os, "getuid") else 0
    import zlib

    # named by its text too: another mqtool version (another venv, a worktree) keeps its own file instead of
    # rewriting this one while a JVM of ours is about to read it
    tag = f"{zlib.crc32(_LOG4J.encode('utf-8')):08x}"
    path = os.path.join(tempfile.gettempdir(), f"mqtool-log4j2-{uid}-{tag}.properties")
    from mqtool.errors import MqToolError
    from mqtool.io import read_input, write_atomic

    try:
        if read_input(path).decode("utf-8", errors="replace") == _LOG4J:
            return path
    except MqToolError:
        pass

    write_atomic(path, _LOG4J.encode("utf-8"), overwrite=True)
    return path


def _running_context():
    from pyspark import SparkContext

    return SparkContext._active_spark_context


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
