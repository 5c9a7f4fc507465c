"""A run's faults as data, so a failing seed stays replayable when its trace changes.

A seed draws its fault profile and then each fault from random streams that also read the
cluster's state (kill_leader kills whoever leads, bitrot picks a segment that exists, a node
that is down is not killed). Any change to the node code that moves an event moves those draws,
and the seed then runs different faults: its number alone stops meaning "the case that failed".
A `FaultSchedule` is what the nemesis applied: the profile (fault kinds, link latency and loss)
and every fault with its concrete parameters (which node, which bits, how long) and its time
after the start of the fault phase, restarts included. Replaying it (`simulate --replay FILE`)
runs the same seed's workload, network and node randomness under exactly those faults.

    python -m raftkafka simulate --seed 18 --duration 10s --save-schedule seed-18.json
    python -m raftkafka simulate --replay seed-18.json

The regressions in tests/simulations/regressions/ are such files, each with the bug it found.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

from simulations.nemesis import FaultProfile, draw_profile
from simulations.network import LinkProfile

__all__ = ["FaultSchedule", "profile_to_dict", "profile_from_dict", "profile_for", "schedule_of"]

FORMAT = 1


def profile_to_dict(profile: FaultProfile) -> dict:
    return {"kinds": list(profile.kinds), "mean_gap": profile.mean_gap, "late_mean_gap": profile.late_mean_gap,
            "late_seed": profile.late_seed, "link": dataclasses.asdict(profile.link)}


def profile_from_dict(data: dict) -> FaultProfile:
    return FaultProfile(kinds=list(data["kinds"]), mean_gap=float(data["mean_gap"]),
                        link=LinkProfile(**data["link"]), late_mean_gap=float(data["late_mean_gap"]),
                        late_seed=int(data["late_seed"]))


@dataclass
class FaultSchedule:
    seed: int
    duration: float  # the fault phase, simulated seconds
    faults: str  # the --faults selection the profile was drawn for
    workload: str
    controllers: int
    brokers: int
    profile: FaultProfile
    events: list[dict] = field(default_factory=list)  # in order; "at": seconds into the fault phase
    note: str = ""  # what this schedule found, for a regression
    node_settings: dict = field(default_factory=dict)  # the run's settings over the workload's own

    def to_dict(self) -> dict:
        settings = {"node_settings": self.node_settings} if self.node_settings else {}
        return {"format": FORMAT, "seed": self.seed, "duration": self.duration, "faults": self.faults,
                "workload": self.workload, "controllers": self.controllers, "brokers": self.brokers,
                **settings, "note": self.note, "profile": profile_to_dict(self.profile), "events": self.events}

    @classmethod
    def from_dict(cls, data: dict) -> "FaultSchedule":
        if data.get("format") != FORMAT:
            raise ValueError(f"fault schedule format {data.get('format')!r}, expected {FORMAT}")
        return cls(seed=int(data["seed"]), duration=float(data["duration"]), faults=str(data["faults"]),
                   workload=str(data["workload"]), controllers=int(data["controllers"]),
                   brokers=int(data["brokers"]), profile=profile_from_dict(data["profile"]),
                   events=list(data["events"]), note=str(data.get("note", "")),
                   node_settings={str(k): str(v) for k, v in dict(data.get("node_settings", {})).items()})

    @classmethod
    def load(cls, path: str | Path) -> "FaultSchedule":
        """Raises ValueError (with the path) for a file that is not a fault schedule."""
        try:
            return cls.from_dict(json.loads(Path(path).read_text()))
        except (OSError, KeyError, TypeError, json.JSONDecodeError) as e:
            raise ValueError(f"{path}: not a fault schedule ({e})") from None
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from None

    def save(self, path: str | Path, extra: dict | None = None) -> None:
        """JSON, one fault per line; `extra` keys (a reproduction's violation and trace tail:
        simulations/repro.py) go before the events and are ignored by `load`."""
        data = self.to_dict()
        data.update(extra or {})
        events = data.pop("events")
        head = json.dumps(data, indent=1)[:-2]  # without the closing "\n}"
        lines = ",\n  ".join(json.dumps(e) for e in events)
        Path(path).write_text(f'{head},\n "events": [\n  {lines}\n ]\n}}\n' if events else
                              f'{head},\n "events": []\n}}\n')


def profile_for(options, rng) -> FaultProfile:
    """The run's fault profile: the replayed schedule's, else drawn from the seed (`rng`)."""
    return options.replay.profile if options.replay is not None else draw_profile(rng, options.faults)


def schedule_of(options, profile: FaultProfile, applied: list[dict]) -> FaultSchedule:
    """The schedule a run applied (`Nemesis.schedule`)."""
    note = options.replay.note if options.replay is not None else ""
    return FaultSchedule(options.seed, options.duration, options.faults, options.workload, options.controllers,
                         options.brokers, profile, applied, note, dict(options.node_settings))
