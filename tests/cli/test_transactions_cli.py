"""`transactions` (kafka-transactions) against real brokers: list, describe and
describe-producers show a confluent-kafka transaction left open; find-hanging does not
report it (its coordinator knows it); abort --start-offset closes it on the partition."""
from __future__ import annotations


def _rows(run) -> list[list[str]]:
    return [line.split("\t") for line in run.out.splitlines()[1:]]


def test_an_open_transaction_is_listed_described_and_aborted(cli, brokers, topic_name):
    from confluent_kafka import Producer
    assert cli("topics", "--bootstrap-server", brokers, "--create", "--topic", topic_name, "--partitions", 1,
               "--replication-factor", 1).code == 0
    producer = Producer({"bootstrap.servers": brokers, "transactional.id": f"{topic_name}-tx"})
    producer.init_transactions(60)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic_name, value=b"%d" % i, partition=0)
    assert producer.flush(30) == 0
    try:
        listed = cli("transactions", "--bootstrap-server", brokers, "list", "--state", "Ongoing")
        assert listed.code == 0, listed
        assert [r[0] for r in _rows(listed)] == [f"{topic_name}-tx"] and _rows(listed)[0][3] == "Ongoing"
        described = cli("transactions", "--bootstrap-server", brokers, "describe", "--transactional-id",
                        f"{topic_name}-tx")
        [row] = _rows(described)
        assert row[4] == "Ongoing" and row[8] == f"{topic_name}-0"
        producers = cli("transactions", "--bootstrap-server", brokers, "describe-producers", "--topic", topic_name,
                        "--partition", 0)
        [row] = _rows(producers)
        assert row[5] == "0"  # the open transaction starts at offset 0
        hanging = cli("transactions", "--bootstrap-server", brokers, "find-hanging", "--topic", topic_name,
                      "--max-transaction-timeout", 0)
        assert hanging.code == 0 and _rows(hanging) == []
        aborted = cli("transactions", "--bootstrap-server", brokers, "abort", "--topic", topic_name, "--partition", 0,
                      "--start-offset", 0)
        assert aborted.code == 0 and "aborted the transaction" in aborted.out, aborted
        after = cli("transactions", "--bootstrap-server", brokers, "describe-producers", "--topic", topic_name,
                    "--partition", 0)
        assert _rows(after)[0][5] == "None"
        again = cli("transactions", "--bootstrap-server", brokers, "abort", "--topic", topic_name, "--partition", 0,
                    "--start-offset", 0)
        assert again.code == 1 and "no open transaction starts at offset 0" in again.err
        unknown = cli("transactions", "--bootstrap-server", brokers, "describe", "--transactional-id", "never-used")
        assert unknown.code == 1 and "TRANSACTIONAL_ID_NOT_FOUND" in unknown.err
    finally:
        producer.abort_transaction(30)
