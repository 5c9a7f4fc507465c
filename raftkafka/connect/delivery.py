"""What a connector's sent records came to: the highest acknowledged offset per partition and the
first delivery error, collected by callbacks (no list of futures kept)."""
from __future__ import annotations

from raftkafka.client import RecordFuture

__all__ = ["Deliveries"]


class Deliveries:
    def __init__(self):
        self.acked: dict[tuple[str, int], int] = {}  # (topic, partition) -> highest acknowledged offset
        self.error: BaseException | None = None
        self.sent = 0

    def track(self, future: RecordFuture, on_acked=None) -> None:
        """Count `future`; `on_acked(metadata)` runs when it succeeds."""
        self.sent += 1

        def done(f: RecordFuture) -> None:
            error = f.exception()
            if error is not None:
                if self.error is None:
                    self.error = error
                return
            metadata = f.result()
            tp = (metadata.topic, metadata.partition)
            if metadata.offset > self.acked.get(tp, -1):
                self.acked[tp] = metadata.offset
            if on_acked is not None:
                on_acked(metadata)

        future.add_callback(done)

    def raise_error(self) -> None:
        if self.error is not None:
            raise self.error
