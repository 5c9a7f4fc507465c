"""A datadriven harness for the Raft core (in the style of etcd-io/raft's testdata).

A transcript is a sequence of blocks:

    command args...
    ----
    expected output (possibly empty)
    <blank line>

Lines starting with `#` between blocks are comments. Commands:

    add-nodes N [observers=K]    voters 1..N (+ observers N+1..N+K), fresh disks, started
    tick [NODE] DURATION         advance time (one node's clock or everybody's): 1.5s, 300ms
    deliver [NODE]               deliver the queued messages (only those to NODE)
    stabilize                    deliver until no message is left
    drop                         discard the queued messages
    partition A B | C ...        cut every link between the groups; `heal` restores them
    crash NODE / restart NODE    lose everything not on the modelled disk / start from it
    propose NODE "payload"       leader append
    resign NODE                  graceful resignation
    snapshot NODE                the state machine snapshots what it has applied
    status [NODE]                role, epoch, leader, vote, HW, log bounds
    log NODE                     the in-memory log

Output of deliver/stabilize/tick lists each delivered message and what the driver
did (persist, truncate, install snapshot, commit), then role changes.
"""
from __future__ import annotations

import shlex

from raft.config import RaftConfig
from raft.entry import decode_leader_change
from raft.errors import NotLeaderError
from raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DescribeQuorumResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    VoteRequest,
    VoteResponse,
)

from tests.raft.cluster import Network, SimNode
from wire.error_codes import ErrorCode

CONFIG = RaftConfig()


def parse_blocks(text: str) -> list[tuple[str, str, str]]:
    """[(comment lines before it, command line, expected output)] in file order."""
    blocks: list[tuple[str, str, str]] = []
    lines = text.splitlines()
    comments: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip() or line.startswith("#"):
            if line.startswith("#"):
                comments.append(line)
            i += 1
            continue
        command = line
        i += 1
        if i >= len(lines) or lines[i] != "----":
            raise ValueError(f"missing ---- after {command!r}")
        i += 1
        out: list[str] = []
        while i < len(lines) and lines[i] != "":
            out.append(lines[i])
            i += 1
        blocks.append(("\n".join(comments), command, "\n".join(out)))
        comments = []
    return blocks


def render(blocks: list[tuple[str, str, str]]) -> str:
    parts = []
    for comment, cmd, out in blocks:
        head = f"{comment}\n" if comment else ""
        parts.append(f"{head}{cmd}\n----\n{out}\n\n" if out else f"{head}{cmd}\n----\n\n")
    return "".join(parts)


def _err(code: int) -> str:
    return f" err={ErrorCode.of(code).name}" if code else ""


def describe(msg: object) -> str:
    """One short line per message."""
    m = msg
    if isinstance(m, VoteRequest):
        kind = "PreVote" if m.pre_vote else "Vote"
        return f"{kind} epoch={m.epoch} last={m.last_offset}@{m.last_epoch}"
    if isinstance(m, VoteResponse):
        kind = "PreVoteResp" if m.pre_vote else "VoteResp"
        verdict = "granted" if m.granted else "rejected"
        return f"{kind} epoch={m.epoch} leader={m.leader_id} {verdict}{_err(m.error)}"
    if isinstance(m, BeginQuorumEpochRequest):
        return f"BeginQuorumEpoch epoch={m.epoch} leader={m.leader_id}"
    if isinstance(m, BeginQuorumEpochResponse):
        return f"BeginQuorumEpochResp epoch={m.epoch} leader={m.leader_id}{_err(m.error)}"
    if isinstance(m, EndQuorumEpochRequest):
        return f"EndQuorumEpoch epoch={m.epoch} leader={m.leader_id} successors={m.preferred_successors}"
    if isinstance(m, EndQuorumEpochResponse):
        return f"EndQuorumEpochResp epoch={m.epoch} leader={m.leader_id}{_err(m.error)}"
    if isinstance(m, FetchRequest):
        return f"Fetch epoch={m.epoch} offset={m.fetch_offset} last_epoch={m.last_fetched_epoch}"
    if isinstance(m, FetchResponse):
        parts = [f"FetchResp epoch={m.epoch} leader={m.leader_id} hw={m.high_watermark}"]
        if m.entries:
            parts.append("entries=[" + " ".join(entry_text(e) for e in m.entries) + "]")
        if m.diverging_epoch is not None:
            parts.append(f"diverging={m.diverging_epoch[1]}@{m.diverging_epoch[0]}")
        if m.snapshot_id is not None:
            parts.append(f"snapshot={m.snapshot_id[0]}@{m.snapshot_id[1]}")
        return " ".join(parts) + _err(m.error)
    if isinstance(m, FetchSnapshotRequest):
        return f"FetchSnapshot epoch={m.epoch} id={m.snapshot_id[0]}@{m.snapshot_id[1]} position={m.position}"
    if isinstance(m, FetchSnapshotResponse):
        return f"FetchSnapshotResp epoch={m.epoch} position={m.position} size={m.size} chunk={m.chunk!r}{_err(m.error)}"
    if isinstance(m, DescribeQuorumResponse):
        return f"DescribeQuorumResp epoch={m.epoch} leader={m.leader_id}{_err(m.error)}"
    return repr(m)


def entry_text(e) -> str:
    if e.control:
        lc = decode_leader_change(e.payload)
        body = f"LeaderChange(leader={lc.leader_id})" if lc else "control"
    else:
        body = e.payload.decode(errors="replace")
    return f"{e.offset}@{e.epoch}:{body}"


def parse_duration(text: str) -> float:
    if text.endswith("ms"):
        return float(text[:-2]) / 1000
    if text.endswith("s"):
        return float(text[:-1])
    raise ValueError(f"bad duration {text!r}")


class Transcript:
    def __init__(self) -> None:
        self.nodes: dict[int, SimNode] = {}
        self.clock: dict[int, float] = {}
        self.net = Network()
        self.roles: dict[int, tuple] = {}

    # -------------------------------------------------------------- plumbing

    def node_line(self, nid: int) -> str:
        node = self.nodes[nid]
        if not node.alive:
            return f"{nid}: down"
        s = node.core.status()
        snap = f" snapshot={s.snapshot_id[0]}@{s.snapshot_id[1]}" if s.snapshot_id != (0, 0) else ""
        return (
            f"{nid}: {s.role} epoch={s.epoch} leader={s.leader_id} voted={s.voted_id} "
            f"hw={s.high_watermark} log=[{s.log_start_offset},{s.log_end_offset}){snap}"
        )

    def _role_changes(self) -> list[str]:
        out = []
        for nid in sorted(self.nodes):
            node = self.nodes[nid]
            key = (node.core.role, node.core.epoch, node.core.quorum.leader_id) if node.alive else None
            if self.roles.get(nid) != key and key is not None:
                s = node.core.status()
                out.append(f"{nid} is {s.role} epoch={s.epoch} leader={s.leader_id}")
            self.roles[nid] = key
        return out

    def _events(self) -> list[str]:
        out = []
        for nid in sorted(self.nodes):
            out += self.nodes[nid].take_events()
        return out

    def _deliver_once(self, only: int | None) -> list[str]:
        out = []
        queue, self.net.queue = self.net.queue, []
        for src, dst, msg in queue:
            if only is not None and dst != only:
                self.net.queue.append((src, dst, msg))
                continue
            node = self.nodes.get(dst)
            if node is None or not node.alive or not self.net.connected(src, dst):
                out.append(f"{src}->{dst} {describe(msg)} (dropped)")
                continue
            out.append(f"{src}->{dst} {describe(msg)}")
            node.run(node.core.handle(src, msg, self.clock[dst]), self.clock[dst], self.net)
            out += node.take_events()
        return out

    def _tick(self, nid: int, duration: float) -> list[str]:
        node = self.nodes[nid]
        target = self.clock[nid] + duration
        while node.alive and node.deadline <= target:
            self.clock[nid] = max(self.clock[nid], node.deadline)
            node.run(node.core.tick(self.clock[nid]), self.clock[nid], self.net)
        self.clock[nid] = target
        return node.take_events()

    # -------------------------------------------------------------- commands

    def run(self, line: str) -> str:
        args = shlex.split(line)
        cmd, args = args[0], args[1:]
        handler = getattr(self, "cmd_" + cmd.replace("-", "_"), None)
        if handler is None:
            raise ValueError(f"unknown command {cmd!r}")
        out = handler(args)
        if cmd not in ("status", "log"):
            out = out + self._role_changes()
        return "\n".join(out)

    def cmd_add_nodes(self, args: list[str]) -> list[str]:
        count = int(args[0])
        observers = int(args[1].split("=")[1]) if len(args) > 1 else 0
        voters = list(range(1, count + 1))
        for nid in range(1, count + observers + 1):
            self.nodes[nid] = SimNode(nid, voters, CONFIG, seed=nid, observer=nid > count)
            self.clock[nid] = 0.0
            self.nodes[nid].start(0.0, self.net)
        self._role_changes()
        return self._events()

    def cmd_tick(self, args: list[str]) -> list[str]:
        duration = parse_duration(args[-1])
        targets = [int(args[0])] if len(args) == 2 else sorted(self.nodes)
        out = []
        for nid in targets:
            out += self._tick(nid, duration)
        return out

    def cmd_deliver(self, args: list[str]) -> list[str]:
        return self._deliver_once(int(args[0]) if args else None)

    def cmd_stabilize(self, args: list[str]) -> list[str]:
        out = []
        for _ in range(200):
            if not self.net.queue:
                return out
            out += self._deliver_once(None)
        raise AssertionError("stabilize: messages still flowing after 200 rounds")

    def cmd_drop(self, args: list[str]) -> list[str]:
        dropped = [f"{s}->{d} {describe(m)} (dropped)" for s, d, m in self.net.queue]
        self.net.queue = []
        return dropped

    def cmd_partition(self, args: list[str]) -> list[str]:
        groups = [[int(x) for x in g.split()] for g in " ".join(args).split("|")]
        self.net.partition(groups)
        return []

    def cmd_heal(self, args: list[str]) -> list[str]:
        self.net.heal()
        return []

    def cmd_crash(self, args: list[str]) -> list[str]:
        self.nodes[int(args[0])].crash()
        return []

    def cmd_restart(self, args: list[str]) -> list[str]:
        nid = int(args[0])
        self.nodes[nid].start(self.clock[nid], self.net)
        return self.nodes[nid].take_events()

    def cmd_propose(self, args: list[str]) -> list[str]:
        nid = int(args[0])
        node = self.nodes[nid]
        try:
            offset, actions = node.core.append([a.encode() for a in args[1:]], self.clock[nid])
        except NotLeaderError as exc:
            return [f"error: {exc}"]
        node.run(actions, self.clock[nid], self.net)
        return [f"appended up to offset {offset}"] + node.take_events()

    def cmd_resign(self, args: list[str]) -> list[str]:
        nid = int(args[0])
        node = self.nodes[nid]
        try:
            node.run(node.core.resign(self.clock[nid]), self.clock[nid], self.net)
        except NotLeaderError as exc:
            return [f"error: {exc}"]
        return node.take_events()

    def cmd_snapshot(self, args: list[str]) -> list[str]:
        nid = int(args[0])
        node = self.nodes[nid]
        end = node.sm.applied_end()
        epoch = node.core.log.epoch_at(end - 1)
        data = node.sm.snapshot_bytes()
        node.disk.snapshot_id, node.disk.snapshot = (end, epoch), data
        node.run(node.core.snapshot_written((end, epoch), data, self.clock[nid]), self.clock[nid], self.net)
        return [f"{nid} snapshot {end}@{epoch} {data!r}"] + node.take_events()

    def cmd_status(self, args: list[str]) -> list[str]:
        targets = [int(args[0])] if args else sorted(self.nodes)
        return [self.node_line(n) for n in targets]

    def cmd_log(self, args: list[str]) -> list[str]:
        node = self.nodes[int(args[0])]
        log = node.core.log
        head = f"snapshot {log.snapshot_id[0]}@{log.snapshot_id[1]}" if log.has_snapshot else "no snapshot"
        return [head] + [entry_text(e) for e in log.entries]
