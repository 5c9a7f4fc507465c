"""Capture golden request frames from the real clients: `python -m tests.tools.capture_golden`.

Runs each client's scripted session against the recording broker and writes
`tests/golden/<client>/requests.json`: the first few frames of every
(api_key, api_version) seen, as hex, in arrival order. Re-run after changing
the sessions; the golden tests then check every frame decodes and re-encodes
byte-identically.
"""
from __future__ import annotations

import json
import pathlib
import struct
import sys

from tests.tools.client_sessions import SESSIONS, expected_values
from tests.tools.recording_broker import RecordingBroker

GOLDEN_DIR = pathlib.Path(__file__).resolve().parent.parent / "golden"
KEEP_PER_VERSION = 3
KEEP_PRODUCE = 16  # every codec's batches


def select_frames(frames: list[bytes]) -> list[dict]:
    kept: dict[tuple[int, int], int] = {}
    out = []
    for frame in frames:
        api_key, api_version = struct.unpack_from(">hh", frame)
        limit = KEEP_PRODUCE if api_key == 0 else KEEP_PER_VERSION
        if kept.get((api_key, api_version), 0) >= limit:
            continue
        kept[(api_key, api_version)] = kept.get((api_key, api_version), 0) + 1
        out.append({"api_key": api_key, "api_version": api_version, "frame": frame.hex()})
    return out


def capture(client: str) -> pathlib.Path:
    session, prefix = SESSIONS[client]
    with RecordingBroker() as broker:
        got = session(f"{broker.host}:{broker.port}", "golden-topic", "golden-group")
    if got != expected_values(prefix):
        raise RuntimeError(f"{client}: session consumed {got!r}")
    if broker.errors:
        raise RuntimeError(f"{client}: broker errors {broker.errors}")
    path = GOLDEN_DIR / client / "requests.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(select_frames(broker.recorded), indent=1) + "\n")
    return path


def main(argv: list[str]) -> None:
    for client in argv or sorted(SESSIONS):
        print(capture(client))


if __name__ == "__main__":
    main(sys.argv[1:])
