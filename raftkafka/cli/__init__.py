"""The command line (`python -m raftkafka`): `main` parses and dispatches, `common` holds what
the client commands share, and every other module is one command (`add_parser`, `run`).

The top layer with raftkafka.bench: the only packages that may import simulations and
spark_source (lazily, inside the commands that need them).
"""
