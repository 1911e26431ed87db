"""mqtool on Apache Spark (PySpark 4.x): the ``mqtool`` data source, export and fleet-wide verify/query.

``import mqtool.spark`` registers the data source on the active SparkSession, if there is one; otherwise
call :func:`register` once the session exists::

    import mqtool.spark
    mqtool.spark.register(spark)          # not needed when a session was active at import time
    df = spark.read.format("mqtool").option("format", "rocketmq").load("/data/broker-*/store")

Executors must be able to ``import mqtool`` (install it where Spark runs its Python workers).
"""
from __future__ import annotations


def register(spark=None):
    """Register the ``mqtool`` data source on ``spark`` (default: the active session). Returns the session."""
    from pyspark.sql import SparkSession

    from mqtool.spark.stream import StreamingDataSource

    spark = spark or SparkSession.getActiveSession()
    if spark is None:
        raise RuntimeError("no active SparkSession: create one, then call mqtool.spark.register(spark)")
    spark.dataSource.register(StreamingDataSource)
    return spark


def _register_on_import() -> None:
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        return
    if SparkSession.getActiveSession() is not None:
        register()


_register_on_import()
