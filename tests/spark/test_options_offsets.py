"""Option validation (Spark-Kafka names and messages), offsets JSON, resolution."""
import json

import pytest

from spark_source.offsets import OffsetsFormatError, from_json_dict, parse_assign_option, to_json_dict, to_json_text
from spark_source.options import (
    Earliest, GlobalTimestamp, InvalidOptionError, Latest, SpecificOffsets, SpecificTimestamps,
    parse_duration_ms, parse_sink_options, parse_source_options,
)
from spark_source.resolve import NoOffsetForTimestampError, discover, resolve
from tests.spark.fake_log import FakeLog

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "t"}


def opts(**extra):
    # Spark hands keys over lower-cased (G15)
    return {k.lower(): v for k, v in {**BASE, **extra}.items()}


def test_defaults_batch_and_stream():
    b = parse_source_options(opts(), streaming=False)
    s = parse_source_options(opts(sourceId="q1"), streaming=True)
    assert isinstance(b.starting, Earliest) and isinstance(b.ending, Latest)
    assert isinstance(s.starting, Latest) and s.source_id == "q1" and b.source_id is None
    assert b.fail_on_data_loss and not b.include_headers and b.subscription.topics == ("t",)


def test_bootstrap_alias_and_missing():
    o = parse_source_options({"bootstrap.servers": "h:1", "subscribe": "t"}, streaming=False)
    assert o.bootstrap_servers == "h:1"
    with pytest.raises(InvalidOptionError, match="kafka.bootstrap.servers"):
        parse_source_options({"subscribe": "t"}, streaming=False)
    with pytest.raises(InvalidOptionError, match="disagree"):
        parse_source_options({"bootstrap.servers": "h:1", "kafka.bootstrap.servers": "h:2", "subscribe": "t"},
                             streaming=False)


def test_min_records_per_partition_defaults_to_packing_and_zero_turns_it_off():
    assert parse_source_options(opts(), streaming=False).min_records_per_partition == 50_000
    assert parse_source_options(opts(minrecordsperpartition="7"), streaming=False).min_records_per_partition == 7
    assert parse_source_options(opts(minrecordsperpartition="0"), streaming=False).min_records_per_partition is None


@pytest.mark.parametrize("extra, needle", [
    ({"subscribepattern": "t.*"}, "subscribe, subscribePattern, assign"),
    ({"bogus": "1"}, "unknown option 'bogus'"),
    ({"kafka.auto.offset.reset": "earliest"}, "auto.offset.reset"),
    ({"minpartitions": "0"}, "minPartitions"),
    ({"minrecordsperpartition": "-1"}, "minRecordsPerPartition"),
    ({"failondataloss": "maybe"}, "failOnDataLoss"),
    ({"startingoffsets": "latest"}, "can't be latest"),
    ({"endingoffsets": "earliest"}, "can't be earliest"),
    ({"endingoffsets": '{"t":{"0":-2}}'}, "can't be earliest"),
    ({"startingoffsets": '{"t":{"0":"x"}}'}, "must be an integer"),
    ({"startingoffsets": "{nope"}, "not valid JSON"),
    ({"maxoffsetspertrigger": "10"}, "streaming queries only"),
    ({"startingoffsets": '{"t":{"0":5}}', "endingoffsets": '{"t":{"0":3}}'}, "starts at 5 after it ends at 3"),
])
def test_bad_batch_options_name_the_option(extra, needle):
    with pytest.raises(InvalidOptionError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        parse_source_options(opts(**extra), streaming=False)


@pytest.mark.parametrize("extra, needle", [
    ({"endingoffsets": "latest"}, "Ending offset not valid in streaming queries"),
    ({"minoffsetspertrigger": "10", "maxoffsetspertrigger": "5"}, "greater than"),
    ({"maxtriggerdelay": "5m"}, "needs 'minOffsetsPerTrigger'"),
    ({"minoffsetspertrigger": "1", "maxtriggerdelay": "soon"}, "maxTriggerDelay"),
    ({"subscribe": " , "}, "No topics to subscribe"),
    ({"startingoffsetsbytimestampstrategy": "oops"}, "startingOffsetsByTimestampStrategy"),
])
def test_bad_stream_options(extra, needle):
    with pytest.raises(InvalidOptionError, match=needle):
        parse_source_options(opts(sourceid="q", **extra), streaming=True)


@pytest.mark.parametrize("start", [{}, {"startingoffsets": "latest"}, {"startingtimestamp": "5"},
                                   {"startingoffsets": '{"t":{"0":-1}}'},
                                   {"startingoffsetsbytimestamp": '{"t":{"0":7}}'}])
def test_a_start_that_can_resolve_differently_later_warns_without_a_source_id(start, caplog):
    # Accepted (a Kafka-source job must run after changing only the format name), with a warning
    # that names the option which makes the start restart-stable.
    with caplog.at_level("WARNING", logger="raftkafka.spark"):
        assert parse_source_options(opts(**start), streaming=True).source_id is None
    assert "sourceId" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="raftkafka.spark"):
        assert parse_source_options(opts(sourceid="q-1.a", **start), streaming=True).source_id == "q-1.a"
    assert caplog.text == ""


def test_stable_starts_need_no_source_id_and_batch_takes_none():
    for start in ("earliest", '{"t":{"0":4,"1":-2}}'):
        assert parse_source_options(opts(startingoffsets=start), streaming=True).source_id is None
    with pytest.raises(InvalidOptionError, match="sourceId.*1-100"):
        parse_source_options(opts(sourceid="a/b"), streaming=True)
    with pytest.raises(InvalidOptionError, match="'sourceId' applies to streaming queries only"):
        parse_source_options(opts(sourceid="q"), streaming=False)


def test_start_precedence_and_specs():
    o = parse_source_options(opts(startingTimestamp="5", startingOffsetsByTimestamp='{"t":{"0":7}}',
                                  startingOffsets="earliest", sourceId="q"), streaming=True)
    assert o.starting == GlobalTimestamp(5)
    o = parse_source_options(opts(startingOffsetsByTimestamp='{"t":{"0":7}}', sourceId="q"), streaming=True)
    assert o.starting == SpecificTimestamps({("t", 0): 7})
    o = parse_source_options(opts(startingOffsets='{"t":{"1":-2,"0":4}}'), streaming=True)
    assert o.starting == SpecificOffsets({("t", 0): 4, ("t", 1): -2})


def test_stream_rate_options_and_durations():
    o = parse_source_options(opts(maxOffsetsPerTrigger="100", minOffsetsPerTrigger="10", maxTriggerDelay="30s",
                                  startingOffsets="earliest"), streaming=True)
    assert (o.max_offsets_per_trigger, o.min_offsets_per_trigger, o.max_trigger_delay_ms) == (100, 10, 30_000)
    assert parse_duration_ms("15m") == 900_000 and parse_duration_ms("250") == 250
    assert parse_duration_ms("2h") == 7_200_000


def test_assign_and_pattern():
    o = parse_source_options({"kafka.bootstrap.servers": "h:1", "assign": '{"b":[1,0],"a":[2]}'}, streaming=False)
    assert o.subscription.assigned == (("a", 2), ("b", 0), ("b", 1))
    with pytest.raises(InvalidOptionError, match="subscribePattern"):
        parse_source_options({"kafka.bootstrap.servers": "h:1", "subscribepattern": "("}, streaming=False)
    with pytest.raises(OffsetsFormatError):
        parse_assign_option('{"a":[-1]}')


def test_sink_options():
    s = parse_sink_options({"kafka.bootstrap.servers": "h:1", "topic": "out", "sinkid": "q1"})
    assert (s.topic, s.sink_id) == ("out", "q1")
    with pytest.raises(InvalidOptionError, match="sinkId"):
        parse_sink_options({"kafka.bootstrap.servers": "h:1", "sinkid": "a b"})
    with pytest.raises(InvalidOptionError, match="unknown option 'subscribe'"):
        parse_sink_options({"kafka.bootstrap.servers": "h:1", "subscribe": "t"})


def test_offsets_json_is_canonical():
    offsets = {("b", 10): 5, ("a", 2): 1, ("b", 9): 7, ("a", 10): 3}
    text = to_json_text(offsets)
    assert text == '{"a":{"2":1,"10":3},"b":{"9":7,"10":5}}'
    # Spark's round trip: json.dumps of our dict, json.loads back
    assert from_json_dict(json.loads(json.dumps(to_json_dict(offsets)))) == offsets
    assert json.dumps(to_json_dict(dict(reversed(list(offsets.items()))))) == json.dumps(to_json_dict(offsets))


def test_resolution_against_a_log():
    log = FakeLog({"t": 2, "u": 1, "other": 1})
    for i in range(5):
        log.append(("t", 0), b"x", ts=100 + i * 10)
    log.append(("t", 1), b"y", ts=500)
    log.log_start[("t", 0)] = 1
    tps = discover(log, parse_source_options(opts(), streaming=False).subscription)
    assert tps == [("t", 0), ("t", 1)]
    pattern = parse_source_options({"kafka.bootstrap.servers": "h:1", "subscribepattern": "[tu]"},
                                   streaming=False).subscription
    assert discover(log, pattern) == [("t", 0), ("t", 1), ("u", 0)]
    assert resolve(log, Earliest(), tps, ending=False, option="s") == {("t", 0): 1, ("t", 1): 0}
    assert resolve(log, Latest(), tps, ending=True, option="e") == {("t", 0): 5, ("t", 1): 1}
    # partial JSON: unlisted partitions default to earliest (start) / latest (end)
    assert resolve(log, SpecificOffsets({("t", 0): -1}), tps, ending=False, option="s") == {("t", 0): 5, ("t", 1): 0}
    assert resolve(log, SpecificOffsets({("t", 1): 0}), tps, ending=True, option="e") == {("t", 0): 5, ("t", 1): 0}
    assert resolve(log, GlobalTimestamp(125), tps, ending=False, option="s") == {("t", 0): 3, ("t", 1): 0}
    with pytest.raises(NoOffsetForTimestampError, match="startingOffsetsByTimestampStrategy"):
        resolve(log, GlobalTimestamp(600), tps, ending=False, option="startingTimestamp")
    assert resolve(log, GlobalTimestamp(600, "latest"), tps, ending=False, option="s") == {("t", 0): 5, ("t", 1): 1}
    assert resolve(log, SpecificTimestamps({("t", 0): 130}), tps, ending=True, option="e") == {("t", 0): 3, ("t", 1): 1}
    with pytest.raises(InvalidOptionError, match="not among the subscribed"):
        resolve(log, SpecificOffsets({("zzz", 0): 1}), tps, ending=False, option="startingOffsets")


def test_explicit_end_beyond_the_committed_log_fails_while_planning():
    log = FakeLog({"t": 2})
    for i in range(5):
        log.append(("t", 0), b"x")
    tps = [("t", 0), ("t", 1)]
    assert resolve(log, SpecificOffsets({("t", 0): 5}), tps, ending=True, option="endingOffsets") == \
        {("t", 0): 5, ("t", 1): 0}
    with pytest.raises(InvalidOptionError, match="option 'endingOffsets': t-0 ends at 6, beyond its latest "
                                                 "committed offset 5"):
        resolve(log, SpecificOffsets({("t", 0): 6}), tps, ending=True, option="endingOffsets")


def test_security_options_are_kafka_client_properties(tmp_path):
    from raftkafka.cli.dev_certs import CertificateAuthority

    ca = CertificateAuthority().write_truststore(str(tmp_path / "ca.pem"))
    base = {"kafka.bootstrap.servers": "h:9092", "subscribe": "t"}
    opts = parse_source_options({**base, "kafka.security.protocol": "SSL", "kafka.ssl.ca.location": ca},
                                streaming=False)
    assert opts.security == (("security.protocol", "SSL"), ("ssl.ca.location", ca))
    with pytest.raises(InvalidOptionError, match="ssl.ca.location"):
        parse_source_options({**base, "kafka.security.protocol": "SSL", "kafka.ssl.ca.location": "/nope.pem"},
                             streaming=False)
    with pytest.raises(InvalidOptionError, match="security.protocol"):
        parse_sink_options({"kafka.bootstrap.servers": "h:9092", "kafka.security.protocol": "TLS"})


def test_sasl_options_become_the_clients_login():
    from raftkafka.client.security import ClientSecurity
    from wire.security.sasl_config import SaslCredentials

    sasl = {"kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.mechanism": "SCRAM-SHA-256",
            "kafka.sasl.username": "alice", "kafka.sasl.password": "pw"}
    opts = parse_source_options({"kafka.bootstrap.servers": "h:9092", "subscribe": "t", **sasl}, streaming=False)
    # What the connecting process builds from them (spark_source.cluster_io.RemoteLogClient).
    assert ClientSecurity.from_properties(dict(opts.security)).login == SaslCredentials("SCRAM-SHA-256", "alice", "pw")
    with pytest.raises(InvalidOptionError, match="sasl.password"):
        parse_sink_options({"kafka.bootstrap.servers": "h:9092",
                            **{k: v for k, v in sasl.items() if k != "kafka.sasl.password"}})
