"""`configs --entity-type users|clients`: client quotas, as kafka-configs manages them.

    configs --bootstrap-server H:P --alter --entity-type users --entity-name alice \\
            --add-config producer_byte_rate=5242880,consumer_byte_rate=10485760
    configs --bootstrap-server H:P --alter --entity-type users --entity-name alice \\
            --entity-type clients --entity-name app --add-config request_percentage=50
    configs --bootstrap-server H:P --alter --entity-type clients --entity-default --delete-config producer_byte_rate
    configs --bootstrap-server H:P --describe --entity-type users [--entity-name alice | --entity-default]

Each `--entity-type` pairs with the `--entity-name` or `--entity-default` at the same position
(a user and a client-id together name one entity). A user's SCRAM credentials are user configs
too (raftkafka.cli.user_configs): `SCRAM-SHA-*` keys go there, every other key is a quota.
"""
from __future__ import annotations

import argparse

from raftkafka.cli.common import CommandError, open_admin, parse_key_values, run_client

__all__ = ["EntityArg", "entities_of", "is_scram_key", "run_quotas", "split_configs"]

_TYPES = {"users": "user", "user": "user", "clients": "client-id", "client": "client-id", "ips": "ip", "ip": "ip"}
DEFAULT = object()  # --entity-default


class EntityArg(argparse.Action):
    """--entity-type / --entity-name / --entity-default in the order given (kafka-configs pairs
    them by position); the flag's own dest keeps its last value, as a plain flag would."""

    def __call__(self, parser, namespace, values, option_string=None):
        order = list(getattr(namespace, "entity_order", None) or [])
        if option_string == "--entity-default":
            setattr(namespace, self.dest, True)
            order.append(("name", DEFAULT))
        else:
            setattr(namespace, self.dest, values)
            order.append(("type" if option_string == "--entity-type" else "name", values))
        namespace.entity_order = order


def is_scram_key(key: str) -> bool:
    return key.upper().startswith("SCRAM-")


def entities_of(args) -> list[tuple[str, str | None | object]]:
    """[(quota entity type, name / None when not named / DEFAULT)] in the order given."""
    order = getattr(args, "entity_order", None) or []
    types = [_TYPES.get(v, v) for kind, v in order if kind == "type"]
    names = [v for kind, v in order if kind == "name"]
    if len(names) > len(types):
        raise CommandError("each --entity-name/--entity-default needs its own --entity-type")
    return [(t, names[i] if i < len(names) else None) for i, t in enumerate(types)]


def run_quotas(args, add: dict[str, str], delete: list[str]) -> int:
    entities = entities_of(args)
    if len({t for t, _ in entities}) != len(entities):
        raise CommandError("name each entity type once")
    if args.action == "describe":
        return run_client(_describe, args, entities)
    if any(name is None for _, name in entities):
        raise CommandError("--alter needs an --entity-name or --entity-default for each --entity-type")
    ops: dict[str, float | None] = {}
    for key, text in add.items():
        try:
            ops[key] = float(text)
        except ValueError:
            raise CommandError(f"--add-config {key}={text}: a quota is a number") from None
    for key in delete:
        if key in ops:
            raise CommandError(f"{key} is both added and deleted")
        ops[key] = None
    if not ops:
        raise CommandError("--alter needs --add-config and/or --delete-config")
    entity = tuple((t, None if n is DEFAULT else n) for t, n in entities)
    return run_client(_alter, args, entity, ops)


async def _alter(args, entity, ops) -> int:
    async with open_admin(args) as admin:
        [error] = await admin.alter_client_quotas([(entity, ops)])
    if error is not None:
        raise CommandError(str(error))
    print(f"Completed updating config for {_label(entity)}.")
    return 0


async def _describe(args, entities) -> int:
    exact, default, named = 0, 1, 2
    components = [(t, named, None) if n is None else (t, default, None) if n is DEFAULT else (t, exact, n)
                  for t, n in entities]
    async with open_admin(args) as admin:
        # strict: `--entity-type users` lists user quotas, not user+client-id ones (kafka-configs)
        found = await admin.describe_client_quotas(components, strict=True)
    for entity, values in found:
        shown = ",".join(f"{k}={v}" for k, v in sorted(values.items()))
        print(f"Quota configs for {_label(entity)} are {shown}")
    return 0


def _label(entity) -> str:
    """kafka-configs' wording: user-principal 'alice', client-id 'app', the default client-id."""
    words = {"user": "user-principal", "client-id": "client-id"}
    parts = [f"the default {words.get(t, t)}" if n is None else f"{words.get(t, t)} '{n}'"
             for t, n in sorted(entity, key=lambda p: p[0] != "user")]
    return ", ".join(parts)


def split_configs(args) -> tuple[dict[str, str], list[str], list[str], list[str]]:
    """(quota keys to set, quota keys to delete, SCRAM --add-config items, SCRAM --delete-config
    names) from the command line."""
    pairs = parse_key_values(args.add_config, "--add-config")
    quota_add = {k: v for k, v in pairs.items() if not is_scram_key(k)}
    scram_add = [f"{k}=[{v}]" for k, v in pairs.items() if is_scram_key(k)]
    deletes = [n.strip() for item in args.delete_config or () for n in item.split(",") if n.strip()]
    return (quota_add, [n for n in deletes if not is_scram_key(n)], scram_add,
            [n for n in deletes if is_scram_key(n)])
