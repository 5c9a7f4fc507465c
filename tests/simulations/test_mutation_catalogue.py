"""The mutation catalogue: its shape, and a rotating part of it hunted on every run.

Hunting all of it takes tens of CPU-minutes (`python -m tests.simulations.mutation_catalogue`);
each run here hunts ROTATION mutations chosen by the date among those whose first catching
seed is small, so CI stays within its budget and the whole catalogue comes round every few
weeks. SIM_MUTATIONS=name,name (or "all") hunts those instead.
"""
from __future__ import annotations

import datetime
import importlib
import os

import pytest

from tests.simulations.catalogue import CATALOGUE, CLASSES, EQUIVALENT, FIRST_SEEDS, SURVIVORS, by_name
from tests.simulations.mutation_catalogue import hunt

SEED_LIMIT = 100  # every mutation must be caught within this many seeds
ROTATION = 2
CHEAP = 12  # mutations whose first catching seed is at most this take part in the rotation


def test_catalogue_covers_every_class_with_two_mutations():
    assert len(CATALOGUE) >= 30
    for kind in CLASSES:
        assert sum(m.kind == kind for m in CATALOGUE) >= 2, kind
    assert len({m.name for m in CATALOGUE}) == len(CATALOGUE)
    assert set(FIRST_SEEDS) == {m.name for m in CATALOGUE}
    assert SURVIVORS == {name for name, seed in FIRST_SEEDS.items() if seed is None}
    assert all(seed is None or seed < SEED_LIMIT for seed in FIRST_SEEDS.values())
    assert not {m.name for m in EQUIVALENT} & {m.name for m in CATALOGUE}


def test_each_mutation_names_a_real_function_and_patches_it_reversibly():
    for m in CATALOGUE + EQUIVALENT:
        assert m.bug, m.name
        dotted = m.patches.split()[0]
        module_name, _, attr = dotted.rpartition(".")
        while module_name:
            try:
                module = importlib.import_module(module_name)
                break
            except ImportError:
                module_name, _, outer = module_name.rpartition(".")
                attr = f"{outer}.{attr}"
        target = module
        for part in attr.split("."):
            target = getattr(target, part)
        patch = pytest.MonkeyPatch()
        try:
            m.apply(patch)
        finally:
            patch.undo()


def todays_mutations(today: datetime.date | None = None) -> list[str]:
    chosen = os.environ.get("SIM_MUTATIONS")
    if chosen:
        return [m.name for m in CATALOGUE] if chosen == "all" else [n.strip() for n in chosen.split(",")]
    cheap = sorted(n for n, seed in FIRST_SEEDS.items() if seed is not None and seed <= CHEAP)
    if not cheap:
        return []
    start = ((today or datetime.date.today()).toordinal() * ROTATION) % len(cheap)
    return [cheap[(start + i) % len(cheap)] for i in range(ROTATION)]


def test_rotation_comes_round_to_every_cheap_mutation():
    seen = set()
    for day in range(40):
        seen.update(todays_mutations(datetime.date(2026, 1, 1) + datetime.timedelta(days=day)))
    assert seen == {n for n, s in FIRST_SEEDS.items() if s is not None and s <= CHEAP}


@pytest.mark.parametrize("name", todays_mutations())
def test_todays_mutation_is_caught_by_a_seed_clean_without_it(name):
    result = hunt(by_name(name).name, SEED_LIMIT)
    assert result["seed"] is not None, f"mutation {name} survived {SEED_LIMIT} seeds"
    assert "HarnessError" not in result["invariants"], result
    assert result["clean"], f"seed {result['seed']} fails without the mutation too"


def test_the_docs_table_lists_every_mutation_with_its_first_catching_seed():
    from pathlib import Path

    text = (Path(__file__).parents[2] / "docs" / "simulation-mutations.md").read_text()
    table = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.split("|")[1:-1]]
        if len(cells) == 6 and cells[0].startswith("`"):
            table[cells[0].strip("`")] = cells[4].split()[0]
    assert set(table) == {m.name for m in CATALOGUE}
    for name, seed in FIRST_SEEDS.items():
        assert table[name] == ("survived" if seed is None else str(seed)), name
