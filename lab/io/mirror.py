"""mirror: a run directory in object storage, worked on through a local working copy.

A run whose ``output_dir`` is a URL (``s3://bucket/runs``) lives in the store. Each process that reads or
writes it (the driver, every worker, the dashboard) works in a working copy of its own on local disk:
``pull`` fetches the objects whose ETag changed since this copy last saw them and removes the files the
store no longer has; ``push`` uploads the files this process wrote (completion markers last) and deletes
the objects of files it removed. The code that reads and writes runs stays as it is on a local disk: numpy
maps arrays, DuckDB scans Parquet, the atomic writers rename.

A copy lives under ``CORPUS_LAB_CACHE`` (default ``~/.cache/corpus-lab``), one directory per run URL, kept
between commands; a process that finds it in use by another takes a temporary one of its own.
"""

from __future__ import annotations

import atexit
import fcntl
import hashlib
import json
import os
import shutil
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.errors import StoreUnreachableError
from lab.io import storage

INDEX = ".mirror.json"  # rel path -> [tag, size, mtime_ns] of each file known to equal a stored object
_LOCK = ".mirror.lock"
_SKIP = (INDEX, _LOCK)


def cache_root() -> Path:
    return Path(os.environ.get("CORPUS_LAB_CACHE") or Path.home() / ".cache" / "corpus-lab")


def _marker_rank(rel: str) -> int:
    """Upload order: data first, then completion markers (JSON), the manifest last; so an object store never
    holds a marker whose data is missing."""
    return 2 if rel == "manifest.json" else 1 if rel.endswith(".json") else 0


@dataclass
class WorkingCopy:
    """The local copy of one stored run directory ``url`` at ``path``."""

    url: str
    path: Path
    index: dict[str, list] = field(default_factory=dict)
    _fd: int | None = None

    # --- the store -----------------------------------------------------------------------------------

    def _fs(self) -> tuple[Any, str]:
        return storage.filesystem(self.url)

    def _listing(self, prefixes: tuple[str, ...]) -> dict[str, tuple[str, int]]:
        """rel -> (tag, size) of the stored objects under ``prefixes`` (relative to the run; all when empty)."""
        fs, root = self._fs()
        root = root.rstrip("/")
        fs.invalidate_cache(root)
        found: dict[str, tuple[str, int]] = {}
        for prefix in prefixes or ("",):
            where = f"{root}/{prefix}".rstrip("/")
            try:
                for p, info in storage.objects(fs, where):
                    rel = p[len(root) + 1:] if p.startswith(root + "/") else None
                    if rel:
                        found[rel] = (storage.tag(info) or f"size:{info.get('size')}", int(info.get("size") or 0))
            except FileNotFoundError:
                pass
            except Exception as e:  # noqa: BLE001 - a store's client raises its own connection errors
                raise StoreUnreachableError.wrap(e, self.url) from e
        return found

    # --- pull and push --------------------------------------------------------------------------------

    def _stat(self, rel: str) -> tuple[int, int] | None:
        try:
            st = (self.path / rel).stat()
        except FileNotFoundError:
            return None
        return st.st_size, st.st_mtime_ns

    def _unchanged(self, rel: str) -> bool:
        known = self.index.get(rel)
        return known is not None and self._stat(rel) == (known[1], known[2])

    def pull(self, *prefixes: str) -> int:
        """Bring the files under ``prefixes`` (all when none) up to date with the store; returns how many
        objects were fetched. Files this process wrote and has not pushed are left alone."""
        fs, root = self._fs()
        stored = self._listing(prefixes)
        fetched = 0
        for rel, (tag, size) in sorted(stored.items()):
            if rel in _SKIP:
                continue
            known = self.index.get(rel)
            if known is not None and known[0] == tag and self._unchanged(rel):
                continue
            local = self.path / rel
            local.parent.mkdir(parents=True, exist_ok=True)
            tmp = local.with_name(f".tmp-pull-{os.getpid()}-{local.name}")
            try:
                fs.get_file(f"{root.rstrip('/')}/{rel}", str(tmp))
            except FileNotFoundError:  # removed since the listing: as if not listed
                continue
            except OSError as e:
                raise StoreUnreachableError.wrap(e, self.url) from e
            os.replace(tmp, local)
            st = local.stat()
            self.index[rel] = [tag, st.st_size, st.st_mtime_ns]
            fetched += 1
        for rel in [r for r in self.index if r not in stored and _under(r, prefixes)]:
            if self._unchanged(rel):  # the store no longer has it: neither does the copy
                (self.path / rel).unlink(missing_ok=True)
            self.index.pop(rel, None)
        self._save()
        return fetched

    def push(self) -> int:
        """Upload the files written since the last pull or push, markers last; delete the objects of files
        removed since. Returns how many objects changed."""
        fs, root = self._fs()
        root = root.rstrip("/")
        changed = []
        for p in self.path.rglob("*"):
            rel = p.relative_to(self.path).as_posix()
            if p.is_file() and not p.name.startswith(".") and not self._unchanged(rel):  # dotfiles: locks, temporaries
                changed.append(rel)
        gone = [r for r in self.index if self._stat(r) is None]
        try:
            for rel in sorted(gone, key=lambda r: -_marker_rank(r)):  # markers first: no marker outlives its data
                try:
                    fs.rm_file(f"{root}/{rel}")
                except FileNotFoundError:
                    pass
                self.index.pop(rel)
            for rel in sorted(changed, key=lambda r: (_marker_rank(r), r)):
                st = (self.path / rel).stat()
                fs.put_file(str(self.path / rel), f"{root}/{rel}")
                info = fs.info(f"{root}/{rel}")
                self.index[rel] = [storage.tag(info) or f"size:{info.get('size')}", st.st_size, st.st_mtime_ns]
        except OSError as e:
            raise StoreUnreachableError.wrap(e, self.url) from e
        finally:
            self._save()
        return len(changed) + len(gone)

    # --- the local directory --------------------------------------------------------------------------

    def _save(self) -> None:
        if self._fd is None:  # a temporary copy: its index lives as long as the process
            return
        tmp = self.path / f".tmp-{INDEX}"
        tmp.write_text(json.dumps(self.index, sort_keys=True))
        os.replace(tmp, self.path / INDEX)

    def _load(self) -> None:
        """The index of a kept copy, less every file changed or removed since it was written (the store is
        what counts: such a file is fetched again)."""
        try:
            index = json.loads((self.path / INDEX).read_text())
        except (OSError, ValueError):
            index = {}
        self.index = {r: v for r, v in index.items() if self._stat(r) == (v[1], v[2])}
        for p in self.path.rglob("*"):
            rel = p.relative_to(self.path).as_posix()
            if p.is_file() and rel not in self.index and not p.name.startswith("."):
                p.unlink()  # not known to equal a stored object: not trusted


def _under(rel: str, prefixes: tuple[str, ...]) -> bool:
    return not prefixes or any(rel == p or rel.startswith(p.rstrip("/") + "/") for p in prefixes)


_copies: dict[str, WorkingCopy] = {}
_guard = threading.Lock()


def working_copy(url: str) -> WorkingCopy:
    """This process's working copy of the stored run ``url`` (made, not yet pulled, on first use)."""
    url = url.rstrip("/")
    with _guard:
        if url in _copies:
            return _copies[url]
        kept = cache_root() / "runs" / hashlib.blake2b(url.encode(), digest_size=10).hexdigest()
        kept.mkdir(parents=True, exist_ok=True)
        fd = os.open(kept / _LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            wc = WorkingCopy(url, kept, _fd=fd)
            wc._load()
        except BlockingIOError:  # another process works in the kept copy: a temporary one for this process
            os.close(fd)
            tmp = Path(tempfile.mkdtemp(prefix="corpus-lab-run-", dir=kept.parent))
            atexit.register(shutil.rmtree, tmp, True)
            wc = WorkingCopy(url, tmp)
        _copies[url] = wc
        return wc


def local_path(url: str) -> Path:
    """Where this process's working copy of the stored run ``url`` is."""
    return working_copy(url).path


def copy_at(path: str | Path) -> WorkingCopy | None:
    """The working copy whose directory is ``path`` (None for a run directory on local disk)."""
    p = Path(path)
    with _guard:
        return next((wc for wc in _copies.values() if wc.path == p), None)


def push_if_copy(path: str | Path) -> None:
    """Push the working copy at ``path``, if it is one (what a command wrote goes to the store)."""
    wc = copy_at(path)
    if wc is not None:
        wc.push()
