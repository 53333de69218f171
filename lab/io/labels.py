"""The label files of a run: ``labels/*.parquet``, append-only (see ``lab.quality.labels``).

Every write is a new file with a name no other writer can choose (UTC time, host, pid and 64
random bits), written under a ``.tmp-`` name in the same directory, flushed and fsynced, renamed
into place, and the directory fsynced: several sessions and processes labelling at once never
lose a label, and a reader never sees a half-written file (``.tmp-*`` and other hidden names are
not label files). No file is rewritten; one is deleted only by a compaction (``lab.quality.labels.compact``)
once a merged file that names it in its metadata holds its rows, so a reader that sees the merged
file ignores it. A rerun that overwrites the run keeps ``labels/`` (``clear_run``). Reading them
(SQL, one query over many files) is ``lab.query``'s; this module knows where they are, how they are
written, the one-file check that names what is wrong with a bad file, and the export formats.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import re
import secrets
import shutil
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from lab.errors import ConfigError, IntegrityError
from lab.io import mirror
from lab.io.lock import NAME as LOCK_NAME
from lab.io.run import RunLayout
from lab.io.writers import atomic

if TYPE_CHECKING:  # polars only where labels are exported (the engine imports clear_run)
    import polars as pl

SCHEMA = pa.schema([("doc_id", pa.int64()), ("label", pa.string()), ("user", pa.string()),
                    ("time", pa.timestamp("us", tz="UTC")), ("note", pa.string())])
EXPORT_FORMATS = (".parquet", ".csv", ".jsonl")
DIR = "labels"  # under the run directory (RunLayout.labels)
MERGED = "merged-"  # name prefix of a compaction's output
MERGED_FROM = "merged_from"  # its Parquet metadata key: JSON list of the files it replaces


def file_name(now: dt.datetime | None = None) -> str:
    """A label file's name: ``part-<UTC time>-<host>-<pid>-<random>.parquet``, sortable by time.

    >>> file_name(dt.datetime(2025, 1, 2, 3, 4, 5, 6, tzinfo=dt.timezone.utc)).startswith("part-20250102T030405000006Z-")
    True
    """
    now = (now or dt.datetime.now(dt.timezone.utc)).astimezone(dt.timezone.utc)
    host = re.sub(r"[^A-Za-z0-9_.]", "_", socket.gethostname())[:40] or "host"
    return f"part-{now:%Y%m%dT%H%M%S%fZ}-{host}-{os.getpid()}-{secrets.token_hex(8)}.parquet"


def label_files(layout: RunLayout) -> list[str]:
    """The names of the run's label files, sorted. Hidden names (``.tmp-*`` being written, the
    compaction lock) are not label files. Names only: listing 10k files takes ~10 ms, a stat of
    each ~40 ms more (``stamp`` is for the few files that need one)."""
    try:
        with os.scandir(layout.labels) as it:
            return sorted(e.name for e in it if e.name.endswith(".parquet") and not e.name.startswith(".")
                          and e.is_file())
    except FileNotFoundError:
        return []


def stamp(layout: RunLayout, name: str) -> tuple[int, int] | None:
    """(size, mtime_ns) of a label file (None if it is gone): a file being copied in changes it."""
    try:
        st = (layout.labels / name).stat()
    except FileNotFoundError:
        return None
    return st.st_size, st.st_mtime_ns


def write_labels(layout: RunLayout, table: pa.Table) -> Path:
    """Write ``table`` (``SCHEMA``) as a new label file of the run; returns its path."""
    return _write(layout, table, file_name())


def write_merged(layout: RunLayout, table: pa.Table, merged_from: list[str]) -> Path:
    """Write the rows of the label files ``merged_from`` as one new file (``merged-*``) whose metadata
    names them: a reader that sees it ignores them, so they can then be removed (``lab.quality.labels.compact``)."""
    return _write(layout, table, MERGED + file_name().removeprefix("part-"), {MERGED_FROM: json.dumps(merged_from)})


def _write(layout: RunLayout, table: pa.Table, name: str, metadata: dict[str, str] | None = None) -> Path:
    layout.labels.mkdir(parents=True, exist_ok=True)
    path = layout.labels / name
    table = table.select(SCHEMA.names).cast(SCHEMA.with_metadata(metadata) if metadata else SCHEMA)
    with atomic(path) as tmp:  # a temporary name beside it, fsynced, renamed
        pq.write_table(table, tmp, compression="zstd")
    fd = os.open(layout.labels, os.O_RDONLY)
    try:  # the rename itself survives a crash
        os.fsync(fd)
    finally:
        os.close(fd)
    mirror.push_if_copy(layout.root)  # a run in object storage: the label is stored when this returns
    return path


def is_merged(name: str) -> bool:
    return name.startswith(MERGED)


def merged_from(path: Path) -> list[str]:
    """The label files a merged file replaces (``IntegrityError`` if its footer cannot be read)."""
    if not path.exists():
        raise FileNotFoundError(path)
    try:
        meta = pq.read_schema(path).metadata or {}
        return [str(n) for n in json.loads(meta[MERGED_FROM.encode()])]
    except (OSError, pa.ArrowException, KeyError, ValueError) as e:
        raise IntegrityError(f"{path}: no readable list of merged files ({e})") from None


@contextmanager
def compaction_lock(layout: RunLayout) -> Iterator[bool]:
    """Try to take the run's compaction lock: yields whether it was taken (one compaction at a time;
    the lock is released when the process ends, however it ends)."""
    layout.labels.mkdir(parents=True, exist_ok=True)
    fd = os.open(layout.labels / ".compact.lock", os.O_CREAT | os.O_RDWR, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def remove(layout: RunLayout, names: list[str]) -> None:
    """Remove label files ``names`` (only ``lab.quality.labels.compact``, once a merged file holds their rows)."""
    for n in names:
        (layout.labels / n).unlink(missing_ok=True)
    fd = os.open(layout.labels, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    mirror.push_if_copy(layout.root)


def remove_stale_temporaries(layout: RunLayout, *, older_than: float = 3600.0) -> int:
    """Remove ``.tmp-*`` files of writers killed mid-write (older than ``older_than`` seconds)."""
    n = 0
    for p in layout.labels.glob(".tmp-*"):
        try:
            if time.time() - p.stat().st_mtime > older_than:
                p.unlink()
                n += 1
        except FileNotFoundError:
            continue
    return n


def check_file(path: Path) -> pa.Table:
    """One label file read alone: its rows, or an ``IntegrityError`` saying what is wrong with it."""
    try:
        t = pq.read_table(path)
    except FileNotFoundError:
        raise
    except (OSError, pa.ArrowException) as e:
        raise IntegrityError(f"not a readable Parquet file ({e})") from None
    if not compatible(t.schema):
        raise IntegrityError(f"wrong schema: {', '.join(f'{f.name} {f.type}' for f in t.schema)}; "
                         f"expected {', '.join(f'{f.name} {f.type}' for f in SCHEMA)}")
    return t.select(SCHEMA.names).cast(SCHEMA, safe=False)  # not safe: a time in ns is cut to us


def compatible(schema: pa.Schema) -> bool:
    """Whether a table of ``schema`` holds labels: ``SCHEMA``'s columns in any order, strings large
    or not, any time unit of a time-zone-aware timestamp (a naive one names no instant).

    >>> compatible(SCHEMA), compatible(pa.schema([("doc_id", pa.float64())]))
    (True, False)
    """
    def same(want: pa.DataType, got: pa.DataType) -> bool:
        if pa.types.is_timestamp(want):
            return pa.types.is_timestamp(got) and got.tz is not None
        if pa.types.is_string(want):
            return pa.types.is_string(got) or pa.types.is_large_string(got) or pa.types.is_string_view(got)
        return got == want

    got = {f.name: f.type for f in schema}
    return len(got) == len(SCHEMA) and all(f.name in got and same(f.type, got[f.name]) for f in SCHEMA)


def export(df: pl.DataFrame, path: str | Path) -> Path:
    """Write labels to ``path`` as Parquet, CSV or JSON lines, chosen by its suffix (atomically)."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in EXPORT_FORMATS:
        raise ConfigError(f"cannot export labels to {str(path)!r}: suffix {suffix or '(none)'!r} is not one of "
                          f"{', '.join(EXPORT_FORMATS)}; name the file e.g. labels.parquet")
    if not path.parent.is_dir():
        raise ConfigError(f"cannot export labels to {str(path)!r}: directory {str(path.parent)!r} does not exist; "
                          "create it first")
    with atomic(path) as tmp:
        if suffix == ".parquet":
            pq.write_table(df.to_arrow().select(SCHEMA.names).cast(SCHEMA), tmp, compression="zstd")
        elif suffix == ".csv":
            df.write_csv(tmp)
        else:
            df.write_ndjson(tmp)
    return path


def read_export(path: str | Path) -> pl.DataFrame:
    """An exported label file read back with the label schema (the inverse of ``export``)."""
    import polars as pl

    path = Path(path)
    schema = {"doc_id": pl.Int64, "label": pl.Utf8, "user": pl.Utf8, "time": pl.Utf8, "note": pl.Utf8}
    if path.suffix.lower() == ".parquet":
        return pl.read_parquet(path)
    df = (pl.read_csv(path, schema=schema) if path.suffix.lower() == ".csv"
          else pl.read_ndjson(path, schema=schema))
    return df.with_columns(pl.col("note").fill_null(""),
                           pl.col("time").str.to_datetime(time_unit="us", time_zone="UTC"))


def clear_run(layout: RunLayout) -> None:
    """Remove everything a run wrote except its ``labels/`` (judgements of documents, kept across
    reruns that overwrite the run) and ``models/`` (classifiers trained from them, which a config may use)."""
    if not layout.root.is_dir():
        return
    for p in layout.root.iterdir():
        if p.name in (layout.labels.name, layout.models.name, LOCK_NAME):  # judgements and models kept; the lock stays
            continue
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
        else:
            p.unlink()
