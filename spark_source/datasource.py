"""`RaftKafkaDataSource`: the PySpark data source named "raftkafka".

    spark.read.format("raftkafka").option("kafka.bootstrap.servers", "localhost:9092")
         .option("subscribe", "events").load()

Found without registration wherever the `raftkafka` distribution is installed
(the top-level `pyspark_raftkafka` module exposes it as `DefaultSource`), or
registered explicitly with `spark.dataSource.register(RaftKafkaDataSource)`.
Options are validated when Spark plans the query; a bad one fails with a
message naming it.

Spark imports this module in a fresh Python process for each planning step
(lookup, schema, read planning, write): it imports pyspark's types and nothing
else until a method needs the options parser or the client.
"""
from __future__ import annotations

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from spark_source.arrow_rows import spark_schema

__all__ = ["RaftKafkaDataSource"]


class RaftKafkaDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "raftkafka"

    def _include_headers(self) -> bool:
        return str(self.options.get("includeHeaders", "false")).strip().lower() == "true"

    def schema(self) -> StructType:
        return spark_schema(self._include_headers())

    def _check_schema(self, schema: StructType) -> None:
        expected = spark_schema(self._include_headers())
        if schema is not None and schema != expected:
            from spark_source.options import InvalidOptionError
            raise InvalidOptionError("the raftkafka source has a fixed schema; do not pass .schema(...) "
                                     f"(expected {expected.simpleString()}, got {schema.simpleString()})")

    def reader(self, schema: StructType):
        from spark_source.options import parse_source_options
        from spark_source.readers import RaftKafkaBatchReader
        self._check_schema(schema)
        return RaftKafkaBatchReader(parse_source_options(self.options, streaming=False))

    def streamReader(self, schema: StructType):
        from spark_source.options import parse_source_options
        from spark_source.readers import RaftKafkaStreamReader
        self._check_schema(schema)
        return RaftKafkaStreamReader(parse_source_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool):
        from spark_source.options import parse_sink_options
        from spark_source.writers import RaftKafkaBatchWriter
        return RaftKafkaBatchWriter(parse_sink_options(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool):
        from spark_source.options import parse_sink_options
        from spark_source.writers import RaftKafkaStreamWriter
        return RaftKafkaStreamWriter(parse_sink_options(self.options), schema)
