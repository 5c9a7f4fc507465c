"""`configs --entity-type users`: SCRAM credentials, exactly as kafka-configs manages them.

    configs --bootstrap-server H:P --alter --entity-type users --entity-name alice \\
            --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'
    configs --bootstrap-server H:P --alter --entity-type users --entity-name alice --delete-config SCRAM-SHA-512
    configs --bootstrap-server H:P --describe --entity-type users [--entity-name alice]

The password is salted and hashed here (raftkafka.cli.scram_args); AlterUserScramCredentials carries
only the salt, the iteration count and the salted password.
"""
from __future__ import annotations

from raftkafka.cli.common import CommandError, open_admin, run_client
from raftkafka.cli.scram_args import parse_scram_args
from wire.security.sasl_scram import MECHANISM_IDS, MECHANISM_NAMES

__all__ = ["run_users"]


def run_users(args) -> int:
    if args.entity_default:
        raise CommandError("--entity-default is not supported for users")
    if args.action == "describe":
        if args.add_config or args.delete_config:
            raise CommandError("--add-config/--delete-config need --alter")
        return run_client(_describe, args)
    if not args.entity_name:
        raise CommandError("--entity-name is required to alter a user")
    upserts = [(args.entity_name, a.mechanism_id, a.iterations, a.salt, a.salted_password)
               for a in parse_scram_args(",".join(args.add_config), name_required=False)] if args.add_config else []
    deletes = []
    for item in args.delete_config or ():
        for name in (n.strip().upper() for n in item.split(",") if n.strip()):
            if name not in MECHANISM_IDS:
                raise CommandError(f"--delete-config {name}: only SCRAM-SHA-256 and SCRAM-SHA-512 are user configs")
            deletes.append((args.entity_name, MECHANISM_IDS[name]))
    if not upserts and not deletes:
        raise CommandError("--alter needs --add-config and/or --delete-config")
    return run_client(_alter, args, upserts, deletes)


async def _alter(args, upserts, deletes) -> int:
    async with open_admin(args) as admin:
        results = await admin.alter_user_scram_credentials(upserts, deletes)
    for error in results.values():
        if error is not None:
            raise CommandError(str(error))
    print(f"Completed updating config for user {args.entity_name}.")
    return 0


async def _describe(args) -> int:
    async with open_admin(args) as admin:
        users = await admin.describe_user_scram_credentials([args.entity_name] if args.entity_name else None)
    for user, infos in sorted(users.items()):
        creds = ", ".join(f"{MECHANISM_NAMES.get(m, m)}=iterations={i}" for m, i in infos)
        print(f"SCRAM credential configs for user-principal '{user}' are {creds}")
    return 0
