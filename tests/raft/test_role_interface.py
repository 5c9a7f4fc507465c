"""One role interface: `Role` is the identity, one class per role holds its state and behaviour."""
from __future__ import annotations

import re

from raft.leader import LeaderState
from raft.quorum_state import Role
from raft.roles import RoleState
from tests.e2e.procs import REPO

PRODUCTION = ("wire", "storage", "raft", "metadata", "broker", "raftkafka", "spark_source", "simulations")
ROLE_NAMES = "|".join(role.value for role in Role)
STRING_COMPARISON = re.compile(rf"""[!=]=\s*["']({ROLE_NAMES})["']|["']({ROLE_NAMES})["']\s*[!=]=""")


def _role_classes() -> dict[Role, type]:
    found, todo = {}, [RoleState]
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if "role" in vars(cls):
            assert cls.role not in found, f"two classes for {cls.role}"
            found[cls.role] = cls
    return found


def test_every_role_has_one_class_with_its_own_timer_behaviour():
    classes = _role_classes()
    assert set(classes) == set(Role) and classes[Role.LEADER] is LeaderState
    for cls in classes.values():
        assert cls.tick is not RoleState.tick and cls.deadline is not RoleState.deadline, cls


def test_no_production_code_compares_a_role_with_its_name():
    offenders = []
    for package in PRODUCTION:
        for path in sorted((REPO / package).rglob("*.py")):
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if STRING_COMPARISON.search(line):
                    offenders.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert not offenders, "compare roles with `is Role.X`:\n" + "\n".join(offenders)
