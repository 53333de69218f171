"""One writer per run directory: ``corpus-lab run`` holds ``RUN/.lock`` while it writes.

The lock is an ``flock`` on that file, so the kernel lets go of it when its process ends, however
it ends (no stale lock after a crash or a kill). The file names its holder (process id, host,
start time, command) for the error a second writer gets at once, instead of both runs writing
the same partitions. ``clear_run`` leaves the file in place: a rerun with ``--overwrite`` keeps
holding the lock it took before clearing. A finished run leaves the file empty.

A run directory in object storage has no ``flock``: ``StoreLease`` holds it with a lease object
(``RUN/.lock``) written by a conditional put (create only if absent), renewed while the run lasts and
deleted at its end; a holder that died lets go when its lease expires (``LEASE_S``).
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import threading
import time
import uuid
from pathlib import Path

from lab.errors import ConfigError, RunStateError, store_error
from lab.io import storage

NAME = ".lock"
LEASE_S = 60.0  # a stored run's lease lasts this long unless renewed (every LEASE_S / 4 while the run lasts)
_let_go: set[str] = set()  # leases this process held and gave up without deleting them (the store was unreachable)


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


class StoreLease:
    """``with StoreLease(url):`` — hold the stored run directory ``url`` or raise ``RunStateError`` naming
    the holder and when its lease runs out."""

    def __init__(self, url: str, lease_s: float = LEASE_S) -> None:
        self.url, self.lease_s = url.rstrip("/"), lease_s
        self.fs, root = storage.filesystem(self.url)
        self.path = f"{root.rstrip('/')}/{NAME}"
        self.etag: str | None = None
        self.token, self.started = uuid.uuid4().hex, time.time()
        self.lost = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _holder(self) -> bytes:
        return json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "started": self.started,
                           "expires": time.time() + self.lease_s, "token": self.token,
                           "command": " ".join(sys.argv)[:500]}).encode()

    def _put(self, data: bytes, **cond) -> str:
        out = self.fs.pipe_file(self.path, data, **cond)
        etag = out.get("ETag") if isinstance(out, dict) else None
        return etag or self.fs.info(self.path).get("ETag", "")

    def __enter__(self) -> StoreLease:
        try:
            try:
                self.etag = self._put(self._holder(), mode="create")
            except FileExistsError:
                self.fs.invalidate_cache(self.path)
                info = self.fs.info(self.path)
                holder = _loads(self.fs.cat_file(self.path))
                if holder.get("expires", 0) > time.time() and holder.get("token") not in _let_go:
                    until = time.strftime("%H:%M:%S UTC", time.gmtime(holder["expires"]))
                    raise RunStateError(f"{self.url} is being written by another run ({describe(holder)}; its lease "
                                        f"runs to {until} and is renewed while it runs); wait for it to finish, stop "
                                        "it, or write this run to another --output-dir") from None
                try:  # the holder stopped renewing: take the lease over, unless another process just did
                    self.etag = self._put(self._holder(), IfMatch=info.get("ETag"))
                except OSError:
                    raise RunStateError(f"{self.url}: another run took over the expired lease just now; wait for "
                                        "it to finish or write this run to another --output-dir") from None
        except RunStateError:
            raise
        except FileNotFoundError as e:
            raise ConfigError(f"output_dir: {self.url} cannot be written: {e}; create the bucket, or point "
                              "--output-dir at one that exists") from None
        except Exception as e:  # noqa: BLE001 - a store's client raises errors of its own
            err = store_error(e, self.url)
            if err is e:
                raise
            raise err from None
        self._thread = threading.Thread(target=self._renew, name="corpus-lab-lease", daemon=True)
        self._thread.start()
        return self

    def _renew(self) -> None:
        while not self._stop.wait(self.lease_s / 4):
            try:
                self.etag = self._put(self._holder(), IfMatch=self.etag)
            except Exception:  # noqa: BLE001 - unreachable for now, or taken over: tried again next time
                if self.fs.exists(self.path) and self.fs.info(self.path).get("ETag") != self.etag:
                    self.lost = True
                    print(f"corpus-lab: warning: the lease on {self.url} was taken over by another run",
                          file=sys.stderr)
                    return

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        try:
            self.fs.invalidate_cache(self.path)
            if not self.lost and self.fs.info(self.path).get("ETag") == self.etag:
                self.fs.rm_file(self.path)
        except Exception:  # noqa: BLE001 - the store is gone: the lease runs out by itself, or this process
            _let_go.add(self.token)  # takes it over at once


def _loads(data: bytes) -> dict:
    try:
        return json.loads(data.decode() or "{}")
    except ValueError:
        return {}


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
