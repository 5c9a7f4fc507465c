"""What the clients of a simulation did and saw, Jepsen style: the input of the data checker.

Every client operation is an `Op`: `invoke` when it starts, then exactly one of `ok`
(it happened, with its result), `fail` (it certainly did not happen) or `info` (unknown:
a timeout or a lost connection — it may or may not have happened). The checker treats
`info` writes as "may be present", never as lost.

Kinds (`f`): "send" (value → topic, partition; ok carries the offset), "poll" (a batch of
records seen by an assign-mode consumer), "commit" (group offsets; ok means durable),
"read_committed" (offsets a reader saw committed for a group), "final_read" (a whole
partition read after the heal), and the admin calls "create_topic", "delete_topic",
"add_partitions". Each op also goes to the trace as one short line, so the trace hash
covers the history.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import trio

from simulations.trace import Trace

__all__ = ["Op", "History"]


@dataclass
class Op:
    index: int
    process: str
    f: str
    value: object  # what was asked (send: bytes; commit: {tp: offset}; admin: name, ...)
    topic: str | None = None
    partition: int | None = None
    type: str = "invoke"  # -> ok | fail | info
    result: object = None  # ok send: offset; poll: [(offset, value)]; commit: {tp: offset}
    error: str | None = None
    invoked_at: float = 0.0
    completed_at: float | None = None


@dataclass
class History:
    trace: Trace
    ops: list[Op] = field(default_factory=list)

    def invoke(self, process: str, f: str, value=None, *, topic: str | None = None,
               partition: int | None = None) -> Op:
        op = Op(len(self.ops), process, f, value, topic, partition, invoked_at=trio.current_time())
        self.ops.append(op)
        return op

    def ok(self, op: Op, result=None) -> None:
        self._complete(op, "ok", result, None)

    def fail(self, op: Op, error: BaseException | str) -> None:
        self._complete(op, "fail", None, _describe(error))

    def info(self, op: Op, error: BaseException | str) -> None:
        self._complete(op, "info", None, _describe(error))

    def _complete(self, op: Op, kind: str, result, error: str | None) -> None:
        assert op.type == "invoke", f"op {op.index} completed twice"
        op.type, op.result, op.error, op.completed_at = kind, result, error, trio.current_time()
        fields = {"f": op.f}
        if op.topic is not None:
            fields["tp"] = f"{op.topic}-{op.partition}" if op.partition is not None else op.topic
        if isinstance(op.value, (bytes, str, int)):
            fields["v"] = op.value.decode() if isinstance(op.value, bytes) else op.value
        if kind == "ok" and isinstance(result, int):
            fields["at"] = result
        if kind == "ok" and isinstance(result, list):
            fields["n"] = len(result)
        if error is not None:
            fields["err"] = error[:60]
        self.trace.record(op.process, kind, **fields)

    def of(self, f: str, *types: str) -> list[Op]:
        return [op for op in self.ops if op.f == f and (not types or op.type in types)]

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for op in self.ops:
            key = f"{op.f}_{op.type}"
            out[key] = out.get(key, 0) + 1
        return dict(sorted(out.items()))


def _describe(error: BaseException | str) -> str:
    if isinstance(error, str):
        return error
    text = str(error).splitlines()[0] if str(error) else ""
    return f"{type(error).__name__}: {text}"[:200]
