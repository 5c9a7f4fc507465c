"""Blocking wrappers for scripts and Spark executors.

Each wrapper owns one background thread running a trio loop; the async client
lives in a task of that loop for its whole life (its nursery must be entered
and left by the same task), and every call hops over with `trio.from_thread`.

    with BlockingProducer("localhost:9092", linger_ms=5) as producer:
        producer.send("topic", b"value", key=b"k")          # returns a DeliveryFuture
        producer.flush()
    with BlockingConsumer("localhost:9092", group_id="g", auto_offset_reset="earliest") as consumer:
        consumer.subscribe(["topic"])
        records = consumer.poll(1.0)
    with BlockingAdmin("localhost:9092") as admin:
        admin.create_topic("topic", 3)
        admin.run_in_loop(some_async_fn, arg)               # some_async_fn(admin_client, arg), one hop

Async methods of the wrapped client become blocking methods of the same name;
plain methods are called on the loop thread too, so client state is only ever
touched there. Threads are fine here: this module is outside node code.
"""
from __future__ import annotations

import inspect
import threading

import trio

from raftkafka.client.admin import Admin
from raftkafka.client.consumer import Consumer
from raftkafka.client.futures import RecordFuture, RecordMetadata
from raftkafka.client.producer import Producer
from storage.env import RealEnv

__all__ = ["BlockingProducer", "BlockingConsumer", "BlockingAdmin", "DeliveryFuture"]


class _LoopThread:
    """Runs `async with factory() as client` in a thread until stopped."""

    def __init__(self, factory, name: str):
        self._factory = factory
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self.client = None
        self._token = None
        self._stop: trio.Event | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            self._thread.join()
            raise self._error

    def _run(self) -> None:
        try:
            trio.run(self._main)
        except BaseException as exc:  # surfaced to the constructing thread or close()
            self._error = exc
            self._ready.set()

    async def _main(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        self._stop = trio.Event()
        async with self._factory() as client:
            self.client = client
            self._ready.set()
            await self._stop.wait()

    def call(self, fn, *args, **kwargs):
        if inspect.iscoroutinefunction(fn):
            return trio.from_thread.run(lambda: fn(*args, **kwargs), trio_token=self._token)
        return trio.from_thread.run_sync(lambda: fn(*args, **kwargs), trio_token=self._token)

    def stop(self) -> None:
        if self._thread.is_alive():
            try:
                trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
            except trio.RunFinishedError:
                pass
            self._thread.join()
        if self._error is not None:
            error, self._error = self._error, None
            raise error


class _Blocking:
    _client_class: type

    def __init__(self, bootstrap_servers, *, env=None, **config):
        env = env if env is not None else RealEnv()
        self._loop = _LoopThread(lambda: self._client_class(env, bootstrap_servers, **config),
                                 f"raftkafka-{self._client_class.__name__.lower()}")
        self._closed = False

    def __getattr__(self, name):
        attr = getattr(self._loop.client, name)
        if not callable(attr):
            return attr

        def blocking(*args, **kwargs):
            return self._loop.call(attr, *args, **kwargs)

        blocking.__name__ = name
        return blocking

    def run_in_loop(self, fn, *args):
        """`fn(client, *args)` (async or plain) in the loop thread, in one hop: for a sequence of
        calls that must not interleave with another thread's, or that would cost a hop each."""
        return self._loop.call(fn, self._loop.client, *args)

    def close(self) -> None:
        """Leave the async client's context (flush / commit / leave group), stop the thread."""
        if not self._closed:
            self._closed = True
            self._loop.stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


class DeliveryFuture:
    """A `RecordFuture` seen from another thread: `result(timeout)` blocks for the metadata."""

    def __init__(self, loop: _LoopThread, future: RecordFuture):
        self._loop = loop
        self._future = future

    def done(self) -> bool:
        return self._future.done()

    def result(self, timeout: float | None = None) -> RecordMetadata:
        async def wait():
            if timeout is None:
                return await self._future
            with trio.fail_after(timeout):
                return await self._future

        return trio.from_thread.run(wait, trio_token=self._loop._token)


class BlockingProducer(_Blocking):
    _client_class = Producer

    def send(self, topic: str, value: bytes | None = None, key: bytes | None = None, **kwargs) -> DeliveryFuture:
        future = self._loop.call(self._loop.client.send, topic, value, key, **kwargs)
        return DeliveryFuture(self._loop, future)

    def send_and_wait(self, topic: str, value: bytes | None = None, key: bytes | None = None,
                      **kwargs) -> RecordMetadata:
        return self._loop.call(self._loop.client.send_and_wait, topic, value, key, **kwargs)


class BlockingConsumer(_Blocking):
    _client_class = Consumer

    def __iter__(self):
        """Yield records forever (poll with a 1 s timeout)."""
        while True:
            yield from self.poll(1.0)


class BlockingAdmin(_Blocking):
    _client_class = Admin
