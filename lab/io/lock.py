"""One writer per run directory: ``corpus-lab run`` holds ``RUN/.lock`` while it writes.

The lock is an ``flock`` on that file, so the kernel lets go of it when its process ends, however
it ends (no stale lock after a crash or a kill). The file names its holder (process id, host,
start time, command) for the error a second writer gets at once, instead of both runs writing
the same partitions. ``clear_run`` leaves the file in place: a rerun with ``--overwrite`` keeps
holding the lock it took before clearing. A finished run leaves the file empty.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import time
from pathlib import Path

from lab.errors import RunStateError

NAME = ".lock"


class RunLock:
    """``with RunLock(root):`` — hold the run directory ``root`` (created if missing) or raise
    ``RunStateError`` naming the process that holds it."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.path = self.root / NAME
        self.fd: int | None = None

    def __enter__(self) -> RunLock:
        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read(fd)
            os.close(fd)
            raise RunStateError(f"{self.root} is being written by another run ({describe(holder)}); wait for it to "
                                "finish, stop it, or write this run to another --output-dir") from None
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "started": time.time(),
                                 "command": " ".join(sys.argv)[:500]}).encode())
        os.fsync(fd)
        self.fd = fd
        return self

    def __exit__(self, *exc) -> None:
        if self.fd is None:
            return
        if [p.name for p in self.root.iterdir()] == [NAME]:  # nothing written (the run could not start):
            self.path.unlink(missing_ok=True)  # leave no directory behind
            try:
                self.root.rmdir()
            except OSError:
                pass
        else:  # the file stays (removing it would let a waiting process lock a file no one else sees), empty:
            os.ftruncate(self.fd, 0)  # a finished run's files do not depend on who wrote them
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)
        self.fd = None


def _read(fd: int) -> dict:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        return json.loads(os.read(fd, 4096).decode() or "{}")
    except (OSError, ValueError):
        return {}


def describe(holder: dict) -> str:
    """The holder as one phrase.

    >>> describe({"pid": 42, "host": "box", "started": 0, "command": "corpus-lab run"})
    "process 42 on box since 1970-01-01 00:00:00 UTC: 'corpus-lab run'"
    >>> describe({})
    'a process that has not yet written its name'
    """
    if not holder.get("pid"):
        return "a process that has not yet written its name"
    since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(holder.get("started", 0)))
    return f"process {holder['pid']} on {holder.get('host', '?')} since {since}: {holder.get('command', '')!r}"
