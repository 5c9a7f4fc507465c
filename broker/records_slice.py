"""Record bytes that stay in the segment file until the socket takes them.

A Fetch response carries `RecordsSlice` objects where the codec expects the
records bytes. The codec only needs their length; the server sends the rest
of the frame as bytes and each slice with `File.send_to`, i.e. `sendfile` on
the real Env, so record data never enters Python.
"""
from __future__ import annotations

from storage.log import FetchData

__all__ = ["RecordsSlice"]


class RecordsSlice:
    __slots__ = ("data",)

    def __init__(self, data: FetchData):
        self.data = data

    def __len__(self) -> int:
        return self.data.size

    def __bytes__(self) -> bytes:
        """The bytes themselves: only for transports that cannot take a file."""
        return self.data.read()

    async def send_to(self, stream) -> int:
        return await self.data.send_to(stream)

    def __repr__(self) -> str:
        return f"RecordsSlice({self.data.size} bytes at {self.data.position})"
