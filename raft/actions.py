"""What the core asks its driver to do, in the order it must be done.

One `Actions` comes back from every core call. The driver carries out the
fields top to bottom:

1. `persist_state`: write quorum-state durably (fsync + rename) before anything else;
2. `truncate_to`: truncate the on-disk log so its end offset is this;
3. `install_snapshot`: ((end_offset, epoch), bytes): write the snapshot file, drop the
   whole log, and reset the state machine from these bytes;
4. `append`: append these entries and fsync, then call `core.on_flushed(end, now)`;
5. `send`: messages to peers by node id (responses to a client go to the id it came from);
6. `committed`: newly committed entries, in order, for the state machine; `high_watermark`
   is the commit point after this step;
7. `delete_before`: log cleaning: on-disk entries below this offset may go (a snapshot covers them);
8. `deadline`: call `core.tick(now)` no later than this (monotonic seconds).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from raft.entry import Entry
from raft.state import ElectionState

__all__ = ["Actions"]


@dataclass(slots=True)
class Actions:
    persist_state: ElectionState | None = None
    truncate_to: int | None = None
    install_snapshot: tuple[tuple[int, int], bytes] | None = None
    append: list[Entry] = field(default_factory=list)
    send: list[tuple[int, object]] = field(default_factory=list)
    committed: list[Entry] = field(default_factory=list)
    high_watermark: int = 0
    delete_before: int | None = None
    deadline: float = float("inf")

    def is_empty(self) -> bool:
        """True when nothing but the deadline/HW needs the driver's attention."""
        return (
            self.persist_state is None
            and self.truncate_to is None
            and self.install_snapshot is None
            and not self.append
            and not self.send
            and not self.committed
            and self.delete_before is None
        )
