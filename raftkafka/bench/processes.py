"""Helpers for tools that run node processes on loopback: is a pid alive, how much CPU it
spent, are ports free."""
from __future__ import annotations

import os
import socket

__all__ = ["pid_alive", "cpu_seconds", "ports_free"]


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited, not yet reaped by its parent) counts as gone.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def cpu_seconds(pid: int) -> float:
    """The CPU (user + system) process `pid` has spent so far, from /proc (Linux); raises
    OSError when it is gone."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def ports_free(ports, host: str = "127.0.0.1") -> bool:
    for port in ports:
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((host, port))
            except OSError:
                return False
    return True
