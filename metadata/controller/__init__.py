"""The active controller (KRaft's QuorumController) and how the cluster talks to it.

- service: the single-task event loop that validates, writes records and answers when they commit;
- state_machine: committed metadata entries → the committed image the controller reverts to;
- rpc, requests, client: the internal RPC messages, their server side, and the broker's side;
- the pure decision functions over the image that the service runs: topics, placement,
  replication, election, elect_leaders, alter_partition, brokers, heartbeats, producer_ids,
  dynamic_configs.
"""
