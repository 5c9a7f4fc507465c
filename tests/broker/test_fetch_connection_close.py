"""A follower's fetch connection closing shrinks its leaders' ISRs, but only the latest one."""
from types import SimpleNamespace

from broker.server import KafkaServer, _Connection
from wire.connection_limits import ConnectionLimits


class _Replicas:
    def __init__(self):
        self.closed: list[int] = []

    def follower_connection_closed(self, replica_id: int) -> int:
        self.closed.append(replica_id)
        return 1


def test_only_the_connection_of_the_latest_follower_fetch_counts():
    replicas = _Replicas()
    config = SimpleNamespace(connection_limits=ConnectionLimits(), listener_name="PLAINTEXT",
                             served_listeners=lambda: ["PLAINTEXT"])
    server = KafkaServer(SimpleNamespace(replicas=replicas, config=config, env=None))
    old, new, client = _Connection(), _Connection(), _Connection()
    old.replica = new.replica = 2
    server._fetch_connections[2] = new  # a newer fetch from replica 2 came on `new`
    server._closed(old)
    server._closed(client)  # a client's connection: no follower fetched on it
    assert replicas.closed == []
    server._closed(new)
    assert replicas.closed == [2]
    server._closed(new)  # once only
    assert replicas.closed == [2]
