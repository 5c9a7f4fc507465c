"""docs/connect.md's Spark recipes, run as the page writes them: a directory of text files into a
topic, that topic out to text files, and a mirror of topics under a prefix (in the session's one
cluster: source and target are the same cluster here)."""
from __future__ import annotations

import re

import pytest

from tests.e2e.procs import REPO
from tests.spark.conftest import SPARK_AVAILABLE
from tests.spark.helpers import consume_all, create_topic, produce

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(not SPARK_AVAILABLE, reason="pyspark/pyarrow not installed")]


def recipes() -> dict:
    page = (REPO / "docs" / "connect.md").read_text()
    section = page[page.index("## Spark Structured Streaming"):]
    namespace: dict = {}
    exec(re.search(r"```python\n(.*?)```", section, re.S).group(1), namespace)
    return namespace


def run(writer) -> None:
    query = writer.trigger(availableNow=True).start()
    try:
        assert query.awaitTermination(120)
    finally:
        query.stop()


def test_the_pages_file_topic_and_mirror_recipes(spark, cluster, tmp_path):
    r = recipes()
    bootstrap = cluster.bootstrap_servers
    (tmp_path / "in").mkdir()
    lines = [f"line {i}" for i in range(200)]
    (tmp_path / "in" / "a.txt").write_text("\n".join(lines[:120]) + "\n")
    (tmp_path / "in" / "b.txt").write_text("\n".join(lines[120:]) + "\n")
    create_topic(bootstrap, "sr-import", 2)
    run(r["file_to_topic"](spark, str(tmp_path / "in"), bootstrap, "sr-import", str(tmp_path / "cp1")))
    assert sorted(v.decode() for *_, v, _ in consume_all(bootstrap, "sr-import", 200)) == sorted(lines)

    run(r["topic_to_files"](spark, bootstrap, "sr-import", str(tmp_path / "out"), str(tmp_path / "cp2")))
    written = [line for path in sorted((tmp_path / "out").glob("part-*")) for line in path.read_text().splitlines()]
    assert sorted(written) == sorted(lines)

    create_topic(bootstrap, "sr-orders", 3)
    create_topic(bootstrap, "A.sr-orders", 3)
    produce(bootstrap, "sr-orders", [(i % 3, b"k%d" % i, b"o%d" % i) for i in range(90)])
    run(r["mirror"](spark, bootstrap, bootstrap, "sr-orders", "A", str(tmp_path / "cp3")))
    copied = consume_all(bootstrap, "A.sr-orders", 90)
    assert sorted((p, k, v) for p, _, k, v, _ in copied) == sorted((i % 3, b"k%d" % i, b"o%d" % i) for i in range(90))
