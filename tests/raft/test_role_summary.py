"""RaftCore.role_summary() is status() narrowed to what a frequent poller reads.

Checked after every command of every transcript scenario (elections, resignation,
partitions, crashes, snapshots), on every live node, so each role is covered.
"""
from __future__ import annotations

from pathlib import Path

from raft.quorum_state import Role
from tests.raft.transcript import Transcript, parse_blocks

FILES = sorted((Path(__file__).parent / "testdata").glob("*.txt"))


def _summary_fields(status) -> tuple:
    return (status.role, status.epoch, status.leader_id, status.high_watermark, status.log_end_offset)


def test_role_summary_matches_status_in_every_scenario() -> None:
    roles_seen = set()
    for path in FILES:
        transcript = Transcript()
        for _, cmd, _ in parse_blocks(path.read_text()):
            transcript.run(cmd)
            for nid, node in sorted(transcript.nodes.items()):
                if not node.alive:
                    continue
                summary = node.core.role_summary()
                assert tuple(summary) == _summary_fields(node.core.status()), f"{path.name}: {cmd!r}: node {nid}"
                roles_seen.add(summary.role)
    assert {Role.LEADER, Role.FOLLOWER, Role.CANDIDATE, Role.RESIGNED} <= roles_seen
