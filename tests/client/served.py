"""Serve a MiniCluster over real TCP on 127.0.0.1 from a background trio thread,
so real clients (librdkafka via confluent-kafka) and our blocking wrappers can reach it."""
from __future__ import annotations

import threading

import trio

from storage.env import RealEnv
from tests.client.mini_broker import MiniCluster


class ServedMiniCluster:
    def __init__(self, node_ids=(1,)):
        self._node_ids = node_ids
        self._ready = threading.Event()
        self._thread = threading.Thread(target=lambda: trio.run(self._main), daemon=True)
        self.mini: MiniCluster | None = None

    async def _main(self):
        self._token = trio.lowlevel.current_trio_token()
        self._stop = trio.Event()
        env = RealEnv(seed=1)
        self.mini = MiniCluster(env, self._node_ids, hosts={n: ("127.0.0.1", 0) for n in self._node_ids})
        async with trio.open_nursery() as nursery:
            await self.mini.serve_all(nursery)
            self._ready.set()
            await self._stop.wait()
            nursery.cancel_scope.cancel()

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{h}:{p}" for h, p in self.mini.addresses.values())

    def call(self, fn, *args):
        return trio.from_thread.run_sync(lambda: fn(*args), trio_token=self._token)

    def __enter__(self):
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError("mini cluster did not start")
        return self

    def __exit__(self, *exc_info):
        trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
        self._thread.join(30)
