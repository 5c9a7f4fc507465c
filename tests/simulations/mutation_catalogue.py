"""Hunt the first catching seed of every mutation in the catalogue.

    python -m tests.simulations.mutation_catalogue [--limit 100] [--jobs 2] [--only NAME,...] [--markdown]

For each mutation (tests/simulations/catalogue.py) a worker process patches it in and runs
seeds 0, 1, 2, ... with the mutation's options until a run reports a violation, at most
`--limit` seeds; it then runs that seed once more without the mutation, which must be clean
(else the seed shows a bug of the node code, not the mutation). A run that ends in a
HarnessError counts as not caught: the mutation broke the harness, not a checked rule.
Exit status 0 when every mutation was caught by a seed that is clean without it.
"""
from __future__ import annotations

import argparse
import multiprocessing
import sys
import time

__all__ = ["hunt", "main"]


def first_violation(apply, run, limit: int, start: int = 0) -> tuple[int, list[dict]] | None:
    """(seed, violations) of the first seed in [start, limit) whose `run(seed)` result shows a
    violation while the mutation `apply` (taking a monkeypatch) is patched in; None if none does."""
    import pytest

    patch = pytest.MonkeyPatch()
    try:
        apply(patch)
        for seed in range(start, limit):
            violations = run(seed)["violations"]
            if violations:
                return seed, violations
    finally:
        patch.undo()
    return None


def hunt(name: str, limit: int, start: int = 0, check_clean: bool = True) -> dict:
    """The first seed in [start, limit) on which mutation `name` shows a violation."""
    from simulations.runner import SimOptions, run_simulation
    from tests.simulations.catalogue import by_name

    mutation = by_name(name)
    wall0 = time.perf_counter()
    found = first_violation(mutation.apply, lambda seed: run_simulation(SimOptions(**mutation.sim_options(seed))),
                            limit, start)
    out = {"name": name, "kind": mutation.kind, "seed": None, "invariants": [], "clean": None,
           "wall_seconds": 0.0}
    if found is not None:
        seed, violations = found
        out["seed"] = seed
        out["invariants"] = sorted({v["invariant"] for v in violations})
        out["first"] = violations[0]["message"][:200]
        if check_clean:
            out["clean"] = not run_simulation(SimOptions(**mutation.sim_options(seed)))["violations"]
    out["wall_seconds"] = round(time.perf_counter() - wall0, 1)
    return out


def _hunt_star(args) -> dict:
    return hunt(*args)


def command(name: str) -> str:
    return f"python -m tests.simulations.mutation_catalogue --only {name}"


def main(argv: list[str] | None = None) -> int:
    from tests.simulations.catalogue import CATALOGUE

    p = argparse.ArgumentParser(prog="python -m tests.simulations.mutation_catalogue", description=__doc__.split("\n")[0])
    p.add_argument("--limit", type=int, default=100, help="seeds to try per mutation (default 100)")
    p.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    p.add_argument("--only", help="comma-separated mutation names")
    p.add_argument("--markdown", action="store_true", help="print the docs table rows")
    args = p.parse_args(argv)
    names = [m.name for m in CATALOGUE]
    if args.only:
        wanted = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = [n for n in wanted if n not in names]
        if unknown:
            print(f"error: unknown mutation(s) {', '.join(unknown)}", file=sys.stderr)
            return 2
        names = wanted
    work = [(n, args.limit) for n in names]
    results = []
    with multiprocessing.get_context("spawn").Pool(max(1, args.jobs)) as pool:
        for r in pool.imap_unordered(_hunt_star, work):
            results.append(r)
            status = "SURVIVED" if r["seed"] is None else f"seed {r['seed']}"
            if r["clean"] is False:
                status += " (NOT clean without the mutation)"
            if "HarnessError" in r["invariants"]:
                status += " (harness error: the mutation is broken)"
            print(f"{r['name']:45s} {status:12s} {','.join(r['invariants'])}  [{r['wall_seconds']}s]", flush=True)
    order = {n: i for i, n in enumerate(names)}
    results.sort(key=lambda r: order[r["name"]])
    if args.markdown:
        from tests.simulations.catalogue import by_name
        for r in results:
            m = by_name(r["name"])
            seed = "survived" if r["seed"] is None else str(r["seed"])
            print(f"| `{m.name}` | {m.kind} | {m.bug} | `{m.patches}` | {seed} | {', '.join(r['invariants'])} |")
    bad = [r for r in results if r["seed"] is None or r["clean"] is False or "HarnessError" in r["invariants"]]
    caught = [r["seed"] for r in results if r not in bad]
    print(f"{len(results) - len(bad)}/{len(results)} caught; longest first seed "
          f"{max(caught) if caught else '-'}", flush=True)
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
