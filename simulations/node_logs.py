"""What the nodes log during a simulation: the seam through which nothing may hide a bug.

Node code catches unexpected exceptions at its last lines of defence (a request handler
answering UNKNOWN_SERVER_ERROR, a controller event failing over, a replica fetcher backing
off, a listener closing one connection) and logs them with `log.exception`. Those catch-alls
keep a real node alive; in a simulation each is a finding. `NodeLogWatch` is a logging handler
installed on the root logger for the run (and only for records of the run's thread):

- an ERROR record carrying an exception is a violation (`UnexpectedError`) with its stack in
  the trace, unless the exception is what an injected fault makes happen (`expected_fault`):
  a connection the network reset or timed out, a disk error the nemesis injected on that
  node, anything a killed incarnation does while it dies. Which node logged it is found by
  walking the trio task tree up to the node's root task (`SimCluster.node_tasks`);
- INFO records of the few loggers whose lines mark a state transition are counted into the
  run's coverage (`simulations.coverage.LOG_EVENTS`).

Everything else is dropped: the root logger's level is ERROR for the run, so a debug or info
call elsewhere costs one level check.
"""
from __future__ import annotations

import contextlib
import errno
import logging
import threading
import traceback
from typing import Iterator

import trio

from storage.log.log_dir_failure import KafkaStorageError

__all__ = ["NodeLogWatch", "watching_node_logs", "expected_fault", "stack_summary"]

# Errnos of a network that resets, refuses, partitions and times out (simulations.network)
# and of a host whose process is gone.
NETWORK_ERRNOS = frozenset({errno.ECONNRESET, errno.ECONNREFUSED, errno.ECONNABORTED, errno.EPIPE,
                            errno.ETIMEDOUT, errno.EHOSTUNREACH, errno.ENETDOWN, errno.ENETUNREACH})
NETWORK_ERRORS = (trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError, ConnectionError,
                  TimeoutError)


def _leaves(e: BaseException) -> list[BaseException]:
    if isinstance(e, BaseExceptionGroup):
        return [leaf for sub in e.exceptions for leaf in _leaves(sub)]
    return [e]


def _chain(e: BaseException) -> Iterator[BaseException]:
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        yield e
        e = e.__cause__ or e.__context__


def expected_fault(e: BaseException, host) -> bool:
    """Whether `e` (one exception, not a group) is what an injected fault makes happen on
    `host` (a NodeHost, or None for the client host): some exception in its cause chain is a
    network error, or a disk error the nemesis injected on that host."""
    for x in _chain(e):
        if isinstance(x, (trio.Cancelled, *NETWORK_ERRORS)):
            return True
        if isinstance(x, OSError):
            if x.errno in NETWORK_ERRNOS:
                return True
            if host is not None and (host.disk_fault or x.errno in host.injected_errnos):
                return True
            # A log dir taken offline by an injected error stays offline for the incarnation.
            if host is not None and isinstance(x, KafkaStorageError) and host.injected_errnos:
                return True
    return False


def stack_summary(e: BaseException, frames: int = 10) -> str:
    """The innermost `frames` frames of `e`, innermost first, on one line."""
    tb = traceback.extract_tb(e.__traceback__)[-frames:]
    where = [f"{'/'.join(f.filename.rsplit('/', 2)[-2:])}:{f.lineno} {f.name}" for f in reversed(tb)]
    return " < ".join(where) or "no stack"


class NodeLogWatch(logging.Handler):
    """See the module docstring. `bind` it to the run's cluster, checker and coverage."""

    def __init__(self, trace):
        super().__init__(logging.INFO)
        self.trace = trace
        self.thread = threading.get_ident()
        self.cluster = None
        self.checker = None
        self.coverage = None
        self.findings = 0
        self.expected = 0

    def bind(self, cluster, checker, coverage=None) -> None:
        self.cluster, self.checker, self.coverage = cluster, checker, coverage

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread != self.thread or self.checker is None:
            return
        if record.levelno < logging.ERROR:
            if self.coverage is not None:
                self.coverage.log_line(record)
            return
        if not record.exc_info or record.exc_info[1] is None:
            return
        self._exception(record, record.exc_info[1])

    def _node(self):
        """(NodeHost, its incarnation's Env) of the node whose task logged, or (None, None)."""
        try:
            task = trio.lowlevel.current_task()
        except RuntimeError:
            return None, None
        tasks = self.cluster.node_tasks
        while task is not None:
            owner = tasks.get(task)
            if owner is not None:
                return owner
            nursery = task.parent_nursery
            task = nursery.parent_task if nursery is not None else None
        return None, None

    def _exception(self, record: logging.LogRecord, exc: BaseException) -> None:
        host, env = self._node()
        name = host.name if host is not None else "client"
        if env is not None and (not env.alive or env is not host.env):
            self.expected += 1
            return  # a killed incarnation's last steps: its process is gone
        unexpected = [leaf for leaf in _leaves(exc) if not expected_fault(leaf, host)]
        if not unexpected:
            self.expected += 1
            return
        self.findings += 1
        leaf = unexpected[0]
        message = record.getMessage()[:160]
        stack = stack_summary(leaf)
        self.trace.record(name, "unexpected_error", logger=record.name, message=message,
                          error=type(leaf).__name__, text=str(leaf)[:200], stack=stack)
        self.checker.now = trio.current_time()
        self.checker.violate("UnexpectedError", f"{name} {record.name}: {message}: {type(leaf).__name__}: "
                             f"{str(leaf)[:160]} at {stack.split(' < ')[0]}")


@contextlib.contextmanager
def watching_node_logs(watch: NodeLogWatch, info_loggers: tuple[str, ...] = ()) -> Iterator[None]:
    """For the block: every record of level ERROR (and INFO of `info_loggers`) goes to `watch`
    alone; the root logger's handlers, level and `logging.disable` are restored after."""
    root = logging.getLogger()
    saved = (root.handlers[:], root.level, logging.root.manager.disable)
    saved_levels = {name: logging.getLogger(name).level for name in info_loggers}
    root.handlers = [watch]
    root.setLevel(logging.ERROR)
    logging.disable(logging.NOTSET)
    for name in info_loggers:
        logging.getLogger(name).setLevel(logging.INFO)
    try:
        yield
    finally:
        root.handlers, _, disable = saved
        root.setLevel(saved[1])
        logging.disable(disable)
        for name, level in saved_levels.items():
            logging.getLogger(name).setLevel(level)
