"""A local Spark session configured for ddflow (loopback only, quiet, ddkafka registered)."""
from __future__ import annotations

import os
import sys
from typing import Any


def local_session(app_name: str = "ddflow", master: str = "local[2]") -> Any:
    """``SparkSession`` on this machine with the ``ddkafka`` source registered.

    ``master="local-cluster[N,C,M]"`` starts N executors of C cores and M
    MB each, in JVMs of their own, as a standalone cluster would: what
    ``Dataflow(workers=W, spark=...)`` is tested on.
    """
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    if master.startswith("local-cluster") and "SPARK_HOME" not in os.environ:
        os.environ["SPARK_HOME"] = _spark_home()
    # Python workers must run this interpreter (the one with ddflow installed).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from ddflow.streaming.kafka.source import register

    session = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.executor.memory", "512m")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    return session


def _spark_home() -> str:
    """A Spark home for ``local-cluster`` made of links into the pip-installed PySpark.

    The executors' launcher needs ``SPARK_HOME/bin``, ``jars`` and
    ``python``; a folder of its own (not the package's) also takes the
    executors' work directories, which Spark writes under ``SPARK_HOME/work``.
    """
    import tempfile

    import pyspark

    pkg = os.path.dirname(pyspark.__file__)
    home = tempfile.mkdtemp(prefix="ddflow-spark-home-")
    for name in ("bin", "jars", "python", "sbin", "conf"):
        if os.path.exists(os.path.join(pkg, name)):
            os.symlink(os.path.join(pkg, name), os.path.join(home, name))
    return home
