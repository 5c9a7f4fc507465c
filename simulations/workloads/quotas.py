"""Client-quota churn: AlterClientQuotas through the real Admin client, under faults.

The entities come from a fixed pool covering every level of Kafka's precedence (KIP-55) for
the users and client-ids the quota checker (simulations.checkers.quotas) asks about, so a
change at one level must move, or must not move, the quota each (user, client-id) pair gets.
Each alteration sets one key of one entity to a value from a small set, or removes it.
The values are far above what the simulated clients move, so the run's data traffic is never
throttled: what is checked is which quota each broker would enforce, not the throttling.
"""
from __future__ import annotations

from metadata.client_quotas import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE
from raftkafka.client import Admin, KafkaError
from simulations.workloads.clients import AdminChangeProcess

__all__ = ["QuotaChurnProcess", "QUOTA_ENTITIES", "QUOTA_QUESTIONS"]

_USERS = ("alice", "bob")
_CLIENTS = ("app", "tool")
# (type, name or None for <default>), as AlterClientQuotas names an entity
QUOTA_ENTITIES: tuple[tuple[tuple[str, str | None], ...], ...] = (
    (("user", "alice"), ("client-id", "app")), (("user", "alice"), ("client-id", None)), (("user", "alice"),),
    (("user", None), ("client-id", "app")), (("user", None), ("client-id", None)), (("user", None),),
    (("client-id", "app"),), (("client-id", None),), (("user", "bob"),),
)
_KEYS = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE)
# Distinct, so the level a quota comes from shows in its value; high, so the quotas never
# throttle the data clients of the same run (`<default>` entities apply to them too).
_VALUES = (1e9, 2e9, 3e9)

# (user, client-id, key): what every broker is asked; "carol" and "other" are named by no entity
QUOTA_QUESTIONS: tuple[tuple[str, str, str], ...] = tuple(
    (u, c, k) for u in (*_USERS, "carol") for c in (*_CLIENTS, "other") for k in _KEYS)


class QuotaChurnProcess(AdminChangeProcess):
    """Sets or removes one key of one entity of the pool at a time."""

    async def change(self, admin: Admin):
        entity = self.rng.choice(QUOTA_ENTITIES)
        key = self.rng.choice(_KEYS)
        value = None if self.rng.random() < 0.35 else self.rng.choice(_VALUES)
        what = "/".join(f"{t}={'<default>' if n is None else n}" for t, n in entity) + f" {key}={value}"
        op = self.history.invoke(self.name, "alter_quota", what)
        try:
            [error] = await admin.alter_client_quotas([(entity, {key: value})])
        except KafkaError as e:
            error = e
        return op, error
