"""`meta.properties` and the bootstrap voter set: what `format` writes into a data dir.

`meta.properties` is a Java properties file, as in Kafka:

    cluster.id=<22-char base64url uuid>
    directory.id=<22-char base64url uuid>
    node.id=<int>
    version=1

The initial voter set chosen at format time goes to `bootstrap.voters` (JSON,
`{"version": 1, "voters": [{"id", "host", "port", "directory_id"}]}`) beside it.
Both are written atomically. A node refuses to start on a data dir that is
unformatted, or formatted for another node or cluster: `check_data_dir` raises
`DataDirError` whose message is the one line to print.
"""
from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass

from storage.env import FileSystem, write_file_atomic
from storage.java_properties import parse_properties
from wire.kafka_uuid import is_valid_uuid, uuid_to_str

__all__ = [
    "META_PROPERTIES",
    "BOOTSTRAP_VOTERS",
    "BOOTSTRAP_RECORDS",
    "MetaProperties",
    "VoterSpec",
    "DataDirError",
    "is_valid_uuid",
    "uuid_to_str",
    "format_data_dir",
    "read_meta_properties",
    "read_bootstrap_voters",
    "check_data_dir",
]

META_PROPERTIES = "meta.properties"
BOOTSTRAP_VOTERS = "bootstrap.voters"
BOOTSTRAP_RECORDS = "bootstrap.records"
VERSION = 1


class DataDirError(Exception):
    """A data directory is missing, unformatted, foreign or damaged. str(e) is one line."""


@dataclass(frozen=True, slots=True)
class MetaProperties:
    cluster_id: str
    node_id: int
    directory_id: str
    version: int = VERSION

    def to_text(self) -> str:
        return (
            f"cluster.id={self.cluster_id}\n"
            f"directory.id={self.directory_id}\n"
            f"node.id={self.node_id}\n"
            f"version={self.version}\n"
        )


@dataclass(frozen=True, slots=True)
class VoterSpec:
    node_id: int
    host: str
    port: int
    directory_id: str | None = None

    def to_dict(self) -> dict:
        return {"id": self.node_id, "host": self.host, "port": self.port, "directory_id": self.directory_id}


def _read_text(fs: FileSystem, path: str) -> str:
    f = fs.open(path)
    try:
        return f.read(0, f.size()).decode("utf-8")
    finally:
        f.close()


def read_meta_properties(fs: FileSystem, data_dir: str) -> MetaProperties:
    path = posixpath.join(data_dir, META_PROPERTIES)
    if not fs.is_dir(data_dir):
        raise DataDirError(f"data directory {data_dir} does not exist; run `python -m raftkafka format` first")
    if not fs.exists(path):
        raise DataDirError(f"data directory {data_dir} is not formatted (no {META_PROPERTIES}); "
                           "run `python -m raftkafka format` first")
    try:
        props = parse_properties(_read_text(fs, path))
        meta = MetaProperties(
            cluster_id=props["cluster.id"],
            node_id=int(props["node.id"]),
            directory_id=props["directory.id"],
            version=int(props["version"]),
        )
    except (KeyError, ValueError, UnicodeDecodeError) as e:
        raise DataDirError(f"{path} is damaged ({type(e).__name__}: {e})") from None
    if meta.version != VERSION:
        raise DataDirError(f"{path} has version {meta.version}; this build reads version {VERSION}")
    return meta


def read_bootstrap_voters(fs: FileSystem, data_dir: str) -> list[VoterSpec]:
    path = posixpath.join(data_dir, BOOTSTRAP_VOTERS)
    if not fs.exists(path):
        raise DataDirError(f"{path} is missing; re-run `python -m raftkafka format` with --initial-voters")
    try:
        doc = json.loads(_read_text(fs, path))
        voters = [
            VoterSpec(int(v["id"]), str(v["host"]), int(v["port"]), v.get("directory_id"))
            for v in doc["voters"]
        ]
    except (KeyError, ValueError, TypeError, UnicodeDecodeError) as e:
        raise DataDirError(f"{path} is damaged ({type(e).__name__}: {e})") from None
    return voters


def check_data_dir(fs: FileSystem, data_dir: str, *, node_id: int) -> tuple[MetaProperties, list[VoterSpec]]:
    """Everything a node needs before starting, or DataDirError with the reason."""
    meta = read_meta_properties(fs, data_dir)
    if meta.node_id != node_id:
        raise DataDirError(
            f"data directory {data_dir} belongs to node {meta.node_id}, but this is node.id={node_id}"
        )
    return meta, read_bootstrap_voters(fs, data_dir)


async def format_data_dir(
    fs: FileSystem,
    data_dir: str,
    meta: MetaProperties,
    voters: list[VoterSpec],
    *,
    ignore_formatted: bool = False,
    bootstrap_records: bytes = b"",
) -> bool:
    """Write meta.properties and bootstrap.voters (and `bootstrap_records`, the metadata records
    the first active controller writes, e.g. SCRAM users: metadata.bootstrap_records).
    Returns False if already formatted identically.

    Refuses (DataDirError) a directory that holds anything else, or that is formatted
    differently; with `ignore_formatted`, an existing format of any kind is left alone.
    """
    if not is_valid_uuid(meta.cluster_id):
        raise DataDirError(f"cluster id {meta.cluster_id!r} is not a 22-character base64url uuid")
    if not is_valid_uuid(meta.directory_id):
        raise DataDirError(f"directory id {meta.directory_id!r} is not a 22-character base64url uuid")
    if fs.exists(data_dir) and not fs.is_dir(data_dir):
        raise DataDirError(f"{data_dir} exists and is not a directory")
    if fs.is_dir(data_dir) and fs.exists(posixpath.join(data_dir, META_PROPERTIES)):
        existing = read_meta_properties(fs, data_dir)
        if ignore_formatted:
            return False
        same = (existing.cluster_id, existing.node_id) == (meta.cluster_id, meta.node_id)
        raise DataDirError(
            f"data directory {data_dir} is already formatted"
            + (" (same cluster and node; use --ignore-formatted)" if same
               else f" for cluster {existing.cluster_id} node {existing.node_id}")
        )
    leftovers = (BOOTSTRAP_VOTERS, BOOTSTRAP_VOTERS + ".tmp", META_PROPERTIES + ".tmp",
                 BOOTSTRAP_RECORDS, BOOTSTRAP_RECORDS + ".tmp")
    if fs.is_dir(data_dir) and [n for n in fs.listdir(data_dir) if not n.startswith(".") and n not in leftovers]:
        raise DataDirError(f"data directory {data_dir} is not empty and not formatted; refusing to format it")
    ids = [v.node_id for v in voters]
    if len(set(ids)) != len(ids) or not voters:
        raise DataDirError("the initial voter set must name each node id once and must not be empty")
    fs.makedirs(data_dir)
    doc = {"version": VERSION, "voters": [v.to_dict() for v in sorted(voters, key=lambda v: v.node_id)]}
    # Voters first: a crash in between leaves no meta.properties, so the dir reads as unformatted.
    await write_file_atomic(fs, posixpath.join(data_dir, BOOTSTRAP_VOTERS), json.dumps(doc).encode())
    if bootstrap_records:
        await write_file_atomic(fs, posixpath.join(data_dir, BOOTSTRAP_RECORDS), bootstrap_records)
    await write_file_atomic(fs, posixpath.join(data_dir, META_PROPERTIES), meta.to_text().encode())
    parent = posixpath.dirname(data_dir.rstrip("/"))
    if parent and fs.is_dir(parent):
        await fs.sync_dir(parent)
    return True
