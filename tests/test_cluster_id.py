"""Cluster ids made by `format --random-uuid`, `dev` and the bare command never look like a flag."""
from raftkafka.cli.format_storage import random_cluster_id
from storage.meta_properties import is_valid_uuid


class _DashFirstEnv:
    """Yields uuids whose base64 text starts with '-' before a normal one."""

    def __init__(self):
        import uuid

        self._ids = [uuid.UUID(bytes=b"\xfb" + bytes(15)), uuid.UUID(bytes=b"\xf8" + bytes(15)), uuid.UUID(int=12345)]

    def uuid(self):
        return self._ids.pop(0)


def test_random_cluster_id_skips_ids_starting_with_a_dash():
    from storage.meta_properties import uuid_to_str

    env = _DashFirstEnv()
    assert uuid_to_str(env._ids[0]).startswith("-")
    cid = random_cluster_id(env)
    assert not cid.startswith("-") and is_valid_uuid(cid)
    assert env._ids == []  # both dash-first ids were drawn and refused
