"""One local[2] SparkSession for the whole Spark test set, and a broker cluster for it.

Tuned as reference/spark.md §5.5 measured: UI off, small driver, 2 shuffle
partitions, serial GC. PYSPARK_PYTHON and SPARK_LOCAL_IP must be environment
variables set before the JVM starts (a builder conf does not reach the workers,
G1); PYTHONPATH carries the checkout to the Python workers (G3), which also lets
Spark auto-discover the top-level `pyspark_raftkafka` module.

Spark tests are skipped only when pyspark (or pyarrow) is not importable.
"""
from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

SPARK_AVAILABLE = importlib.util.find_spec("pyspark") is not None and importlib.util.find_spec("pyarrow") is not None
ROOT = str(Path(__file__).resolve().parents[2])


@pytest.fixture(scope="session")
def spark():
    if not SPARK_AVAILABLE:
        pytest.skip("pyspark/pyarrow not installed (pip install raftkafka[spark])")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if ROOT not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([ROOT, *paths])
    from pyspark.sql import SparkSession
    session = (SparkSession.builder.master("local[2]").appName("raftkafka-tests")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2").config("spark.default.parallelism", "2")
               .config("spark.driver.memory", "512m")
               .config("spark.driver.extraJavaOptions", "-XX:+UseSerialGC -XX:TieredStopAtLevel=1")
               .config("spark.sql.adaptive.enabled", "false")
               .config("spark.sql.streaming.minBatchesToRetain", "2")
               .config("spark.sql.session.timeZone", "UTC")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def cluster():
    from tests.broker.harness import ThreadedCluster
    c = ThreadedCluster(2)
    c.bootstrap_servers = c.start()
    yield c
    c.stop()
