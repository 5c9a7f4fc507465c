"""The standalone worker: every connector's task in one trio loop, sharing one producer.

A task that fails (a converter or transform that cannot handle a record, a delivery error that
outlived the producer's retries) is logged with its reason and stops, as Kafka's task goes to
FAILED; the worker keeps the others running and exits (code 1) once none is left.
"""
from __future__ import annotations

import sys
import time

import trio

from raftkafka.client import KafkaError, Producer
from raftkafka.connect.converters import ConverterError
from raftkafka.connect.file_sink import FileSink
from raftkafka.connect.file_source import FileSourceTask
from raftkafka.connect.offset_file import OffsetFile
from raftkafka.connect.transforms import TransformError
from raftkafka.connect.worker_config import SOURCE, ConnectorConfig, WorkerConfig
from storage.env import RealEnv

__all__ = ["run_worker", "log"]

_TASK_ERRORS = (KafkaError, ConverterError, TransformError, OSError, ValueError)


def log(message: str) -> None:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime())
    print(f"[{stamp}] INFO {message}", file=sys.stderr, flush=True)


async def run_worker(worker: WorkerConfig, connectors: list[ConnectorConfig], producer_kwargs: dict,
                     consumer_kwargs: dict, wait_reachable) -> int:
    env = RealEnv()
    offsets = OffsetFile.load(worker.offsets_path)
    failed = 0
    settings = {"linger_ms": 5, "batch_size": 262_144, **producer_kwargs}  # larger batches than Kafka's 16 KiB
    async with Producer(env, worker.bootstrap_servers, **settings) as producer:
        await wait_reachable(producer.cluster, worker.bootstrap_servers)

        async def run_task(connector: ConnectorConfig) -> None:
            nonlocal failed
            if connector.kind == SOURCE and connector.tasks_max > 1:
                log(f"{connector.name}: FileStreamSource runs one task (tasks.max={connector.tasks_max}), "
                    "as Kafka's: one file has one reader")
            try:
                if connector.kind == SOURCE:
                    task = FileSourceTask(env, connector, worker, offsets, producer, consumer_kwargs, log)
                else:
                    task = FileSink(env, connector, worker, offsets, consumer_kwargs, log)
                await task.run()
            except _TASK_ERRORS as e:
                failed += 1
                log(f"{connector.name}: task failed and stopped: {type(e).__name__}: {e}")

        async with trio.open_nursery() as nursery:
            for connector in connectors:
                nursery.start_soon(run_task, connector)
            log(f"connect-standalone: started {', '.join(c.name for c in connectors)}")
    return 1 if failed else 0
