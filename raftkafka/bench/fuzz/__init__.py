"""A protocol fuzzer for a running node: `python -m raftkafka.bench.fuzz --help`.

Cases are mutations of real client requests (the frames confluent-kafka,
kafka-python and aiokafka sent, kept in tests/golden/) and of internal RPC
frames built from wire.rpc's registry. Each case is fully determined by
(seed, index), so any finding can be regenerated. The node must answer or
close every connection and stay healthy.

- raw.py: byte-level mutations (bit flips, truncation, integer overwrites, splices)
- kafka_cases.py: structure-aware Kafka request mutations (decode, mutate fields, re-encode)
- rpc_cases.py: structure-aware internal RPC mutations (msgpack tree mutations)
- runner.py: sends cases to a node over real sockets and classifies the outcomes
"""
