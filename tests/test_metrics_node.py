"""Scrape real nodes: 3 controllers + 1 broker (Raft over loopback TCP), metrics over HTTP."""
from __future__ import annotations

import trio

from metrics.registry import MetricsRegistry
from raftkafka.node.metrics_http import MetricsServer
from raftkafka.node.metrics_wiring import register_node_gauges
from tests.metadata.metadata_cluster import MetadataCluster
from tests.test_metrics import parse_exposition


async def _scrape(port: int) -> dict[str, float]:
    """Unlabelled samples by name, and labelled ones as name{k=v,...}."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(b"GET /metrics HTTP/1.0\r\n\r\n")
        raw = bytearray()
        with trio.fail_after(10):
            while chunk := await stream.receive_some(65536):
                raw += chunk
    body = bytes(raw).partition(b"\r\n\r\n")[2].decode()
    out = {}
    for fam in parse_exposition(body).values():
        for name, labels, value in fam["samples"]:
            key = name + ("{" + ",".join(f"{k}={v}" for k, v in sorted(labels.items())) + "}" if labels else "")
            out[key] = value
    return out


async def test_controller_and_raft_gauges_of_running_nodes_follow_a_failover():
    async with trio.open_nursery() as nursery:
        cluster = MetadataCluster(nursery, controllers=3, brokers=(4,))
        await cluster.format()
        ports = {}
        for i in (1, 2, 3, 4):
            await cluster.start(i)
            registry = MetricsRegistry()
            register_node_gauges(registry, cluster.nodes[i])
            ports[i] = await nursery.start(MetricsServer(cluster.env, registry).serve, "127.0.0.1", 0)

        active = await cluster.wait_active()
        # The broker registers and is unfenced once caught up.
        await cluster.wait_for(lambda: not cluster.committed_image(active).brokers.get(4, None) is None
                               and not cluster.committed_image(active).brokers[4].fenced)
        scrapes = {i: await _scrape(p) for i, p in ports.items()}
        epoch = scrapes[active]["raftkafka_raft_epoch"]
        for i, m in scrapes.items():
            assert m["raftkafka_raft_leader_id"] == active
            assert m["raftkafka_raft_epoch"] == epoch
            if i == 4:  # an observer: Raft gauges, no controller gauges
                assert "raftkafka_active_controller" not in m
                continue
            assert m["raftkafka_active_controller"] == (1 if i == active else 0)
            assert m[f"raftkafka_raft_role{{role={'Leader' if i == active else 'Follower'}}}"] == 1
        leader = scrapes[active]
        assert leader["raftkafka_active_brokers"] == 1 and leader["raftkafka_fenced_brokers"] == 0
        assert leader["raftkafka_offline_partitions"] == 0
        assert leader["raftkafka_raft_high_watermark"] > 0
        assert leader["raftkafka_raft_high_watermark"] <= leader["raftkafka_raft_log_end_offset"]
        assert sorted(k for k in leader if k.startswith("raftkafka_raft_follower_lag")) == [
            f"raftkafka_raft_follower_lag{{voter={v}}}" for v in (1, 2, 3)]

        # Kill the active controller: another takes over, in a later epoch, and says so.
        await cluster.crash(active)
        new_active = await cluster.wait_for(
            lambda: (a := cluster.active_controller()) not in (None, active) and a)
        survivors = [i for i in (1, 2, 3, 4) if i != active]

        async def agreed():
            ms = {i: await _scrape(ports[i]) for i in survivors}
            return ms if all(m.get("raftkafka_raft_leader_id") == new_active for m in ms.values()) else None

        with trio.fail_after(20):
            while (after := await agreed()) is None:
                await trio.sleep(0.05)
        assert after[new_active]["raftkafka_active_controller"] == 1
        assert sum(after[i]["raftkafka_active_controller"] for i in survivors if i != 4) == 1
        assert after[new_active]["raftkafka_raft_epoch"] > epoch
        nursery.cancel_scope.cancel()
