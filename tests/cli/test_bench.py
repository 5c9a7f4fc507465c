"""`bench`: both load generators against real brokers, the scenario table, and the measuring parts."""
from __future__ import annotations

import io
import json
import re
import subprocess
import sys

import pytest

from raftkafka.bench.perf import Progress, Stats, Throttle, payload, percentile


@pytest.mark.parametrize("client", ["ours", "librdkafka"])
def test_produce_then_consume(cli, brokers, topic_name, client):
    assert cli("topics", "--bootstrap-server", brokers, "--create", "--topic", topic_name, "--partitions", 2).code == 0
    r = cli("bench", "produce", "--bootstrap-server", brokers, "--topic", topic_name, "--num-records", 500,
            "--record-size", 64, "--throughput", -1, "--producer-props", "acks=all", "linger.ms=2",
            "--client", client, "--json")
    assert r.code == 0, r
    result = json.loads(r.out)
    assert (result["records"], result["bytes"], result["errors"]) == (500, 500 * 64, 0)
    assert 0 < result["p50_ms"] <= result["p99_ms"] <= result["p999_ms"] <= result["max_ms"]
    assert result["records_per_s"] > 0

    r = cli("bench", "consume", "--bootstrap-server", brokers, "--topic", topic_name, "--messages", 500,
            "--client", client, "--timeout", 5000)
    assert r.code == 0, r
    assert re.fullmatch(r"500 records read, [\d.]+ records/sec \([\d.]+ MB/sec\)\.\n", r.out)


def test_consume_more_than_exists_reports_the_shortfall(cli, brokers, topic_name):
    assert cli("topics", "--bootstrap-server", brokers, "--create", "--topic", topic_name).code == 0
    cli("bench", "produce", "--bootstrap-server", brokers, "--topic", topic_name, "--num-records", 10,
        "--record-size", 10, "--client", "ours")
    r = cli("bench", "consume", "--bootstrap-server", brokers, "--topic", topic_name, "--messages", 20,
            "--client", "ours", "--timeout", 300)
    assert r.code == 1 and r.out.startswith("10 records read")
    assert "no record for 0.3s after 10 of 20" in r.err


def test_throughput_cap_and_progress(cli, brokers, topic_name):
    assert cli("topics", "--bootstrap-server", brokers, "--create", "--topic", topic_name).code == 0
    r = cli("bench", "produce", "--bootstrap-server", brokers, "--topic", topic_name, "--num-records", 60,
            "--record-size", 10, "--throughput", 200, "--reporting-interval", 100, "--client", "ours", "--json")
    assert r.code == 0, r
    result = json.loads(r.out)
    assert result["seconds"] >= 59 / 200  # paced: the last send cannot come before 59/200 s
    assert re.search(r"^\d+ records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency", r.err, re.M)


def test_scenarios_table(cli, brokers):
    r = cli("bench", "--scenario", "all", "--bootstrap-server", brokers, "--client", "both",
            "--num-records", 200, "--partitions", 6, "--reporting-interval", 0)
    assert r.code == 0, r
    lines = r.out.splitlines()
    assert lines[0].split()[:6] == ["SCENARIO", "CLIENT", "PHASE", "RECORDS", "REC/S", "MB/S"]
    rows = [line.split() for line in lines[1:]]
    assert {(row[0], row[1], row[2]) for row in rows} == {
        (name, client, phase)
        for name in ("single-partition", "rf3-acks-all", "latency-10k", "many-partitions", "consume-10k")
        for client in ("librdkafka", "ours")
        for phase in (("produce", "consume") if name == "consume-10k" else ("produce",))}
    assert all(row[3] == "200" and row[11] == "0" for row in rows)
    r = cli("topics", "--bootstrap-server", brokers, "--list")
    assert not [t for t in r.out.splitlines() if t.startswith("bench-")]  # the scenario topics are gone


def test_scenario_needing_more_brokers_is_skipped(cli, mini):
    r = cli("bench", "--scenario", "rf3-acks-all", "--bootstrap-server", mini.bootstrap, "--client", "ours")
    assert r.code == 0 and "skipped: needs 3 brokers, the cluster has 1" in r.out


def test_errors_are_one_line(cli, brokers, tmp_path):
    cases = [
        (["produce", "--topic", "t", "--record-size", "1"], "--num-records is required"),
        (["produce", "--topic", "t", "--num-records", "1", "--record-size", "0"], "--record-size must be at least 1"),
        (["produce", "--topic", "t", "--num-records", "1", "--record-size", "1", "--throughput", "0"],
         "--throughput must be positive"),
        (["produce", "--num-records", "1", "--record-size", "1"], "needs --topic"),
        (["consume", "--topic", "t"], "--messages is required"),
        (["produce", "--scenario", "latency-10k"], "either a workload"),
        ([], "name a workload"),
        (["--scenario", "all", "--topic", "t"], "picks its own topic"),
        (["produce", "--topic", "t", "--num-records", "1", "--record-size", "1", "--client", "both"],
         "--client both only works with --scenario"),
        (["produce", "--topic", "missing", "--num-records", "1", "--record-size", "1"], "topic 'missing'"),
        (["produce", "--topic", "missing", "--num-records", "1", "--record-size", "1", "--client", "ours"],
         "topic 'missing'"),
        (["produce", "--topic", "t", "--num-records", "1", "--record-size", "1", "--client", "ours",
          "--producer-props", "acks=2"], "acks must be"),
        (["produce", "--topic", "t", "--num-records", "1", "--record-size", "1",
          "--producer-props", "no.such.thing=1"], "librdkafka producer settings"),
    ]
    for flags, text in cases:
        r = cli("bench", "--bootstrap-server", brokers, *flags)
        assert r.code == 1 and r.err.count("\n") == 1 and text in r.err, (flags, r)
    r = cli("bench", "produce", "--bootstrap-server", brokers, "--topic", "t", "--num-records", "x")
    assert r.code == 2


def test_stats_and_percentiles():
    values = list(range(1, 1001))
    assert percentile(values, 0.5) == 500
    assert percentile(values, 0.99) == 990
    assert percentile(values, 0.999) == 999
    assert percentile([7.0], 0.999) == 7.0 and percentile([], 0.5) == 0.0
    out = io.StringIO()
    stats = Stats(Progress("sent", interval=0, out=out))
    stats.start()
    for latency in (1.0, 3.0, 2.0):
        stats.record(100, latency)
    stats.error("boom")
    result = stats.finish(end=stats.started + 2)
    assert (result.records, result.bytes, result.errors, result.first_error) == (3, 300, 1, "boom")
    assert (result.avg_ms, result.p50_ms, result.max_ms) == (2.0, 2.0, 3.0)
    assert result.records_per_s == 1.5
    assert "3 records sent, 1.5 records/sec" in result.line("sent") and "1 errors (first: boom)" in result.line("sent")
    assert out.getvalue() == ""  # interval 0: no progress lines


def test_stats_folded_in_bulk_match_one_by_one():
    """A load generator may fold its delivery reports in batches: same figures, same progress line."""
    one, bulk = io.StringIO(), io.StringIO()
    single, many = Stats(Progress("sent", interval=1e-9, out=one)), Stats(Progress("sent", interval=1e-9, out=bulk))
    for latency in (4.0, 1.0, 7.0):
        single.record(10, latency)
    many.record_many(10, [4.0, 1.0])
    many.record_many(10, [7.0])
    a, b = single.finish(end=single.started + 1), many.finish(end=many.started + 1)
    assert (b.records, b.bytes, b.avg_ms, b.p50_ms, b.max_ms) == (a.records, a.bytes, a.avg_ms, a.p50_ms, a.max_ms)
    assert (b.records, b.bytes, b.max_ms) == (3, 30, 7.0)
    assert "ms max latency" in bulk.getvalue() and bulk.getvalue().count("\n") == 2


def test_several_librdkafka_producers_share_the_load(cli, brokers, topic_name):
    assert cli("topics", "--bootstrap-server", brokers, "--create", "--topic", topic_name, "--partitions", 3).code == 0
    r = cli("bench", "produce", "--bootstrap-server", brokers, "--topic", topic_name, "--num-records", 3000,
            "--record-size", 20, "--producers", 4, "--json")
    assert r.code == 0, r
    result = json.loads(r.out)
    assert (result["records"], result["bytes"], result["errors"]) == (3000, 3000 * 20, 0)
    r = cli("bench", "consume", "--bootstrap-server", brokers, "--topic", topic_name, "--messages", 3000,
            "--timeout", 5000)
    assert r.code == 0 and r.out.startswith("3000 records read"), r
    r = cli("bench", "produce", "--bootstrap-server", brokers, "--topic", topic_name, "--num-records", 10,
            "--record-size", 20, "--producers", 2, "--client", "ours")
    assert r.code == 1 and "--producers only works with --client librdkafka" in r.err


def test_throttle_and_payload():
    assert Throttle(-1).delay(10**6, 0.001) == 0
    assert Throttle(100).delay(50, 0.25) == pytest.approx(0.25)
    assert Throttle(100).delay(50, 1.0) == 0
    value = payload(1000)
    assert len(value) == 1000 and set(value) <= set(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ") and len(set(value)) == 26


def test_entry_point_in_a_subprocess(brokers):
    """`python -m raftkafka` itself: output, exit codes and a one-line error, no traceback."""
    listed = subprocess.run([sys.executable, "-m", "raftkafka", "topics", "--bootstrap-server", brokers, "--list"],
                            capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0 and listed.stderr == ""
    missing = subprocess.run([sys.executable, "-m", "raftkafka", "topics", "--bootstrap-server", brokers,
                              "--describe", "--topic", "no-such-topic"], capture_output=True, text=True, timeout=60)
    assert (missing.returncode, missing.stderr) == (1, "error: Topic 'no-such-topic' does not exist as expected\n")


def test_spark_bench_cpu_counts_an_exited_child_under_its_kind():
    """A child that has exited but is not yet reaped reads with an empty command line; the
    Spark benchmark's CPU sampler still counts it under the kind it ran as, and only for the
    CPU it spent between the two samples."""
    import time

    from raftkafka.bench.spark_read import CpuSamples, cpu_spent

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.5); sum(range(3 * 10**7))",
                              "raftkafka node --config"])  # "raftkafka node" in its command: a broker
    try:
        deadline = time.monotonic() + 60
        with CpuSamples(every=0.05) as samples:
            # Until a sample sees it exited (not reaped: nothing waits for it yet).
            while not samples.samples or samples.samples[-1][1].get(child.pid, ("",))[0] != "other":
                assert time.monotonic() < deadline, "the child never showed as exited"
                time.sleep(0.01)
        first, last = ({child.pid: sample[child.pid]} for _, sample in (samples.samples[0], samples.samples[-1]))
        assert first[child.pid][0] == "brokers" and last[child.pid][0] == "other"
        spent = last[child.pid][1] - first[child.pid][1]
        assert spent > 0.1
        assert cpu_spent(first, last, samples.kinds) == {"brokers": spent}
        # Without the kinds seen while it ran, its kind in the earlier sample.
        assert cpu_spent(first, last) == {"brokers": spent}
        # A pid whose CPU went down is a new process under a reused pid: all of it counts.
        assert cpu_spent({7: ("brokers", 5.0)}, {7: ("other", 1.0)}) == {"other": 1.0}
    finally:
        child.wait()
