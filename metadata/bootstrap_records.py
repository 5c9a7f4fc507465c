"""Metadata records chosen at format time (`format --add-scram`, as `kafka-storage format`
writes them into its bootstrap checkpoint): the first active controller of a new cluster writes
them into the metadata log together with the initial feature levels, so they replicate and
snapshot like any other record.

The file `bootstrap.records` in the metadata log dir is one msgpack array of encoded records.
"""
from __future__ import annotations

import posixpath

import msgpack

from metadata.records import Record, UserScramCredential, decode_record, encode_record
from storage.env import FileSystem
from storage.meta_properties import BOOTSTRAP_RECORDS, DataDirError
from wire.errors import DecodeError

__all__ = ["encode_bootstrap_records", "read_bootstrap_records", "ALLOWED"]

ALLOWED = (UserScramCredential,)  # what format may seed


def encode_bootstrap_records(records: list[Record]) -> bytes:
    return msgpack.packb([encode_record(r) for r in records], use_bin_type=True)


def read_bootstrap_records(fs: FileSystem, data_dir: str) -> list[Record]:
    """The records format wrote ([] when none); DataDirError if the file is damaged."""
    path = posixpath.join(data_dir, BOOTSTRAP_RECORDS)
    if not fs.exists(path):
        return []
    f = fs.open(path)
    try:
        data = f.read(0, f.size())
    finally:
        f.close()
    try:
        items = msgpack.unpackb(data, raw=False)
        if type(items) is not list or any(type(i) is not bytes for i in items):
            raise DecodeError("not an array of records")
        records = [decode_record(i) for i in items]
    except (DecodeError, ValueError, msgpack.ExtraData) as e:
        raise DataDirError(f"{path} is damaged: {e}") from None
    if any(not isinstance(r, ALLOWED) for r in records):
        raise DataDirError(f"{path} holds a record format does not write")
    return records
