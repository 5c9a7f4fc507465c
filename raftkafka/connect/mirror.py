"""MirrorMaker 2 in one process: every enabled flow of the properties file, side by side."""
from __future__ import annotations

import trio

from raftkafka.connect.mirror_config import FlowConfig
from raftkafka.connect.mirror_flow import MirrorFlow
from storage.env import RealEnv

__all__ = ["run_mirror"]


async def run_mirror(flows: list[FlowConfig], kwargs: dict, wait_reachable, log) -> int:
    env = RealEnv()
    async with trio.open_nursery() as nursery:
        for flow in flows:
            nursery.start_soon(MirrorFlow(env, flow, kwargs, log).run, wait_reachable)
    return 0
