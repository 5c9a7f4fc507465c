"""Kafka's Connect quickstart with our command: a file streamed into `connect-test` and back out
to `test.sink.txt` by `python -m raftkafka connect-standalone` (a real worker process), with the
configuration files Kafka ships (config/connect-standalone.properties, connect-file-source.properties,
connect-file-sink.properties). Then lines keep being appended while the worker is killed with
kill -9 and restarted: the sink file ends identical to the source file (no line lost, none twice).
"""
from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from tests.e2e.procs import REPO, free_base_port, wait_until

pytestmark = pytest.mark.e2e

# Kafka's config/connect-standalone.properties (its comments dropped; bootstrap.servers and the
# offsets file point at this test's node and directory; offsets flushed every second, not 10, so
# the kill lands after some flushes).
WORKER = """\
bootstrap.servers=localhost:{port}
key.converter=org.apache.kafka.connect.json.JsonConverter
value.converter=org.apache.kafka.connect.json.JsonConverter
key.converter.schemas.enable=true
value.converter.schemas.enable=true
offset.storage.file.filename={offsets}
offset.flush.interval.ms=1000
"""
SOURCE = """\
name=local-file-source
connector.class=FileStreamSource
tasks.max=1
file=test.txt
topic=connect-test
"""
SINK = """\
name=local-file-sink
connector.class=FileStreamSink
tasks.max=1
file=test.sink.txt
topics=connect-test
"""


def _lines(path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_connect_quickstart_then_kill_9_mid_file_leaves_identical_files(processes, tmp_path):
    base = free_base_port()
    node = processes.start("--base-port", str(base), "--data-dir", str(tmp_path / "data"))
    node.wait_line(r"serving Kafka clients", 60)
    (tmp_path / "connect-standalone.properties").write_text(
        WORKER.format(port=base, offsets=tmp_path / "connect.offsets"))
    (tmp_path / "connect-file-source.properties").write_text(SOURCE)
    (tmp_path / "connect-file-sink.properties").write_text(SINK)
    source, sink = tmp_path / "test.txt", tmp_path / "test.sink.txt"
    source.write_text("foo\nbar\n")  # echo -e "foo\nbar" > test.txt
    args = ("connect-standalone", "connect-standalone.properties", "connect-file-source.properties",
            "connect-file-sink.properties")
    worker = processes.start(*args, cwd=str(tmp_path))
    wait_until(lambda: _lines(sink) == ["foo", "bar"], 30, "foo and bar in test.sink.txt")
    consumed = subprocess.run(
        [sys.executable, "-m", "raftkafka", "consume", "--bootstrap-server", f"localhost:{base}",
         "--topic", "connect-test", "--from-beginning", "--max-messages", "2"],
        capture_output=True, text=True, timeout=60, cwd=str(REPO))
    assert consumed.stdout.splitlines() == ['{"schema":{"type":"string","optional":false},"payload":"foo"}',
                                            '{"schema":{"type":"string","optional":false},"payload":"bar"}']
    with source.open("a") as f:
        f.write("Another line\n")
    wait_until(lambda: _lines(sink)[-1:] == ["Another line"], 30, "the appended line in test.sink.txt")

    # Lines keep coming (some written in pieces, a line end arriving later) while the worker dies
    # twice; the writer holds back its last lines until both kills are done, so both land mid-file.
    total = 30_000
    kills_done = threading.Event()

    def append() -> None:
        with source.open("a") as f:
            for i in range(0, total, 300):
                if i >= total - 3_000:
                    kills_done.wait(120)
                chunk = "".join(f"line {n} of the appended part, {'x' * (n % 40)}\n" for n in range(i, i + 300))
                f.write(chunk[:-20])
                f.flush()
                time.sleep(0.01)
                f.write(chunk[-20:])
                f.flush()
                time.sleep(0.03)

    writer = threading.Thread(target=append, daemon=True)
    writer.start()
    for _ in range(2):
        target = len(_lines(sink)) + 3_000
        try:
            wait_until(lambda: len(_lines(sink)) >= target, 60, f"{target} lines in the sink")
        except AssertionError:
            raise AssertionError(f"{len(_lines(sink))} lines in the sink; worker:\n{worker.output()[-3000:]}")
        worker.popen.kill()  # kill -9
        worker.wait(30)
        worker = processes.start(*args, cwd=str(tmp_path))
    kills_done.set()
    writer.join(120)
    expected = source.read_text()
    assert expected.count("\n") == 3 + total
    wait_until(lambda: sink.read_text() == expected, 90, "test.sink.txt identical to test.txt")
    assert "were already in connect-test" in worker.output() or "dropping" in "\n".join(
        p.output() for p in processes.procs)


def test_file_sink_with_two_tasks_shares_the_partitions_and_writes_each_record_once(processes, tmp_path):
    """FileStreamSink with tasks.max=2, as Kafka runs it: two members of the connector's group,
    each with its own consumer and half the partitions, appending to one file; killed with
    kill -9 and restarted, the file holds every record once."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    base = free_base_port()
    node = processes.start("--base-port", str(base), "--data-dir", str(tmp_path / "data"))
    node.wait_line(r"serving Kafka clients", 60)
    bootstrap = f"localhost:{base}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic("lines", 4, 1)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})

    def produce(start: int, count: int) -> None:
        for n in range(start, start + count):
            producer.produce("lines", value=b"record %d" % n, key=b"%d" % n)
        assert producer.flush(30) == 0

    (tmp_path / "worker.properties").write_text(
        f"bootstrap.servers={bootstrap}\nkey.converter=org.apache.kafka.connect.storage.StringConverter\n"
        "value.converter=org.apache.kafka.connect.storage.StringConverter\n"
        f"offset.storage.file.filename={tmp_path / 'connect.offsets'}\noffset.flush.interval.ms=500\n")
    (tmp_path / "sink.properties").write_text(
        "name=two-task-sink\nconnector.class=FileStreamSink\ntasks.max=2\nfile=out.txt\ntopics=lines\n")
    out = tmp_path / "out.txt"
    args = ("connect-standalone", "worker.properties", "sink.properties")
    produce(0, 3000)
    worker = processes.start(*args, cwd=str(tmp_path))
    wait_until(lambda: len(_lines(out)) >= 3000, 60, "3000 lines in out.txt")

    def members() -> list[int] | None:
        group = admin.describe_consumer_groups(["connect-two-task-sink"])["connect-two-task-sink"].result(20)
        counts = sorted(len(m.assignment.topic_partitions) for m in group.members)
        return counts if counts == [2, 2] else None

    wait_until(members, 30, "two members with two partitions each", interval=0.5)
    produce(3000, 3000)
    wait_until(lambda: len(_lines(out)) >= 4000, 60, "more lines in out.txt")
    worker.popen.kill()  # kill -9 mid-stream
    worker.wait(30)
    worker = processes.start(*args, cwd=str(tmp_path))
    expected = sorted(f"record {n}" for n in range(6000))
    try:
        wait_until(lambda: sorted(_lines(out)) == expected, 60, "every record once in out.txt", interval=0.5)
    except AssertionError:
        lines = _lines(out)
        raise AssertionError(f"{len(lines)} lines, {len(set(lines))} distinct; worker:\n{worker.output()[-2000:]}")
