"""raftkafka's own Kafka client: trio-based, Env-driven (runs over TCP and in the simulation).

Depends only on `wire` and `storage.env`.
"""
