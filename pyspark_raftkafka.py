"""Spark's auto-discovery hook: Spark imports top-level `pyspark_*` modules and registers
their `DefaultSource`, so `format("raftkafka")` works with no register() call.
Keep this module tiny and free of side effects (reference spark.md G16)."""
from spark_source.datasource import RaftKafkaDataSource as DefaultSource

__all__ = ["DefaultSource"]
