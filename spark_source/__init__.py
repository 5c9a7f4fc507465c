"""PySpark data source `raftkafka`: batch and streaming reads and writes of raftkafka topics.

Public surface:
- `RaftKafkaDataSource` (in `spark_source.datasource`; needs pyspark + pyarrow, the
  `raftkafka[spark]` extra): `spark.dataSource.register(RaftKafkaDataSource)`, or
  nothing at all, since the top-level `pyspark_raftkafka` module makes Spark find it.
- Pure parts usable without Spark: `options.parse_source_options` /
  `parse_sink_options`, `offsets` (canonical offsets JSON), `planning` (ranges,
  splits, rate limit, data loss), `sink_protocol` (the exactly-once sink),
  `initial_offsets` (a streaming query's first offsets, kept in the cluster
  under its `sourceId`), all over the `cluster_io.LogClient` interface, which
  `cluster_io.RemoteLogClient` implements with raftkafka's own client.
"""

__all__ = ["InvalidOptionError", "DataLossError"]


def __getattr__(name: str):
    # Imported on first use: `import spark_source.datasource` (what Spark's planning processes
    # do) must not pay for the client and its protocol tables.
    if name == "InvalidOptionError":
        from spark_source.options import InvalidOptionError
        return InvalidOptionError
    if name == "DataLossError":
        from spark_source.planning import DataLossError
        return DataLossError
    raise AttributeError(f"module 'spark_source' has no attribute {name!r}")
