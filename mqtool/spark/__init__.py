"""mqtool on Apache Spark (PySpark 4.x): the ``mqtool`` data source, export and fleet-wide verify/query.

``import mqtool.spark`` registers the data source on the active SparkSession, if there is one; otherwise
call :func:`register` once the session exists::

    import mqtool.spark
    mqtool.spark.register(spark)          # not needed when a session was active at import time
    df = spark.read.format("mqtool").option("format", "rocketmq").load("/data/broker-*/store")

Executors must be able to ``import mqtool`` (install it where Spark runs its Python workers, or ship it as a
packed environment: docs/spark.md).
"""
from __future__ import annotations

import os
import shutil
import sys

# Spark's own setting for the Python of executors' SQL tasks (falls back to spark.pyspark.python)
EXECUTOR_PYTHON_CONF = "spark.sql.execution.pyspark.python"


def _runnable_here(exe: str) -> bool:
    """``exe`` (a path, relative to the working directory, or a name on PATH) can be started here."""
    return shutil.which(exe) is not None


def register(spark=None):
    """Register the ``mqtool`` data source on ``spark`` (default: the active session). Returns the session."""
    from pyspark.sql import SparkSession

    from mqtool.spark.stream import StreamingDataSource

    spark = spark or SparkSession.getActiveSession()
    if spark is None:
        raise RuntimeError("no active SparkSession: create one, then call mqtool.spark.register(spark)")
    sc = spark.sparkContext
    executors = sc.pythonExec
    if _runnable_here(executors) or not os.path.exists(sys.executable):
        spark.dataSource.register(StreamingDataSource)
        return spark
    # The executors' Python is not one this machine can start, e.g. ``./env/bin/python`` of a packed
    # environment shipped with --archives env.tar.gz#env: it exists in each executor's working directory only.
    # Spark plans a Python data source (schema, partitions, pushed filters) in a Python the driver starts, the
    # one registered with the source: register it with this Python (which has just imported mqtool), and
    # leave the executors' SQL tasks (the reads) on the configured one through Spark's own setting for them.
    if not spark.conf.get(EXECUTOR_PYTHON_CONF, None):
        spark.conf.set(EXECUTOR_PYTHON_CONF, executors)
    sc.pythonExec = sys.executable
    try:
        spark.dataSource.register(StreamingDataSource)
    finally:
        sc.pythonExec = executors
    return spark


def _register_on_import() -> None:
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        return
    if SparkSession.getActiveSession() is not None:
        register()


_register_on_import()
