"""Atomic writers: a partition's files appear complete or not at all.

Each file is written to a temporary name in the same directory, flushed to disk, then renamed
over the final name (``os.replace`` is atomic on POSIX). A failed write removes its temporary
file (a full disk raises ``lab.errors.DiskFullError``); a killed task leaves at most a ``.tmp-*``
file, which is never read and is removed by the rerun.
"""

from __future__ import annotations

import json
import os
import re
import sys
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lab.errors import DiskFullError, IntegrityError

ROW_GROUP_ROWS = 8192  # rows per Parquet row group: small enough to page, large enough to scan fast


@contextmanager
def atomic(path: Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success it is flushed and renamed over ``path``.

    On any failure the temporary file is removed; a full disk (or quota) raises ``DiskFullError``
    naming ``path``, so the run stops with one clear message instead of quarantining partitions.
    """
    tmp = path.with_name(f".tmp-{uuid.uuid4().hex}-{path.name}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)  # a working copy of a stored run has only what it fetched
        yield tmp
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        if _disk_full(e, tmp):
            raise DiskFullError.writing(path) from e
        raise
    finally:
        tmp.unlink(missing_ok=True)


def _disk_full(error: OSError, tmp: Path) -> bool:
    """ENOSPC/EDQUOT; or an OSError without errno: a short write (numpy's ``tofile``: "N requested
    and M written") or any on a filesystem with no block left."""
    if DiskFullError.is_disk_full(error):
        return True
    if error.errno is not None:
        return False
    if re.fullmatch(r"\d+ requested and \d+ written", str(error)):
        return True
    try:
        st = os.statvfs(tmp.parent)
    except OSError:
        return False
    return st.f_bavail == 0 or st.f_bfree == 0


def write_parquet(table: pa.Table, path: Path) -> None:
    """Write ``table`` to ``path`` atomically (zstd, fixed row groups: same table, same bytes)."""
    with atomic(path) as tmp:
        pq.write_table(table, tmp, compression="zstd", row_group_size=ROW_GROUP_ROWS,
                       write_statistics=True, store_schema=True)


class ParquetStream:
    """Rows appended to a Parquet file in row groups of ``ROW_GROUP_ROWS``, written atomically on a clean exit:
    the writer holds one row group at a time, and the file has the bytes ``write_parquet`` gives the same
    (one or more) rows.

    >>> import tempfile; d = Path(tempfile.mkdtemp())
    >>> with ParquetStream(d / "t.parquet", pa.schema([("x", pa.int64())])) as out:
    ...     for i in range(3): out.add({"x": i})
    >>> pq.read_table(d / "t.parquet")["x"].to_pylist()
    [0, 1, 2]
    """

    def __init__(self, path: Path, schema: pa.Schema, rows: int = ROW_GROUP_ROWS):
        self.path, self.schema, self.rows = Path(path), schema, rows
        self._columns: dict[str, list] = {n: [] for n in schema.names}
        self._n = 0

    def __enter__(self) -> "ParquetStream":
        self._atomic = atomic(self.path)
        tmp = self._atomic.__enter__()
        try:
            self._writer = pq.ParquetWriter(tmp, self.schema, compression="zstd", write_statistics=True,
                                            store_schema=True)
        except BaseException:
            self._atomic.__exit__(*sys.exc_info())
            raise
        return self

    def add(self, row: dict) -> None:
        for name, column in self._columns.items():
            column.append(row[name])
        self._n += 1
        if self._n >= self.rows:
            self._flush()

    def add_columns(self, columns: dict[str, list]) -> None:
        """Append the rows of equal-length ``columns`` (name -> values)."""
        n = len(next(iter(columns.values()))) if columns else 0
        at = 0
        while at < n:
            take = min(self.rows - self._n, n - at)
            for name, column in self._columns.items():
                column.extend(columns[name][at:at + take])
            self._n += take
            at += take
            if self._n >= self.rows:
                self._flush()

    def _flush(self) -> None:
        if self._n:
            self._writer.write_table(pa.table(self._columns, schema=self.schema), row_group_size=self.rows)
            for column in self._columns.values():
                column.clear()
            self._n = 0

    def __exit__(self, *exc) -> bool:
        try:
            if exc[0] is None:
                self._flush()
            self._writer.close()
        except BaseException:
            self._atomic.__exit__(*sys.exc_info())
            raise
        return bool(self._atomic.__exit__(*exc))


def write_parquet_groups(groups: dict[int, pa.Table], path: Path, schema: pa.Schema) -> None:
    """Write each non-empty table of ``groups`` (key -> table) to ``path`` atomically as one row group,
    in key order; the file's metadata ``groups`` lists the keys, so a reader takes one key's rows
    alone (``read_parquet_group``). The LSH shuffle's map output: one row group per bucket."""
    keys = [k for k in sorted(groups) if groups[k].num_rows]
    schema = schema.with_metadata({"groups": json.dumps(keys)})
    with atomic(path) as tmp:
        with pq.ParquetWriter(tmp, schema, compression="zstd", write_statistics=True) as w:
            for k in keys:
                w.write_table(groups[k].cast(schema), row_group_size=groups[k].num_rows)


def read_parquet_group(path: Path, key: int) -> pa.Table | None:
    """The rows ``write_parquet_groups`` wrote under ``key`` (None if it had none)."""
    f = pq.ParquetFile(path)
    keys = json.loads(f.schema_arrow.metadata[b"groups"])
    return f.read_row_group(keys.index(key)) if key in keys else None


class _Sink:
    """A file that numpy writes through ``write``: its ``tofile`` path reports a short write without
    errno ("N requested and M written"), ``write`` raises ENOSPC as ENOSPC."""

    def __init__(self, f):
        self.write = f.write


def write_npy(array: np.ndarray, path: Path) -> None:
    """Write ``array`` to ``path`` atomically as .npy (``numpy.load(mmap_mode="r")`` reads rows in place)."""
    with atomic(path) as tmp:
        with open(tmp, "wb") as f:
            np.save(_Sink(f), array, allow_pickle=False)


def write_json(obj: Any, path: Path) -> None:
    """Write ``obj`` as sorted, indented JSON to ``path`` atomically."""
    with atomic(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=1, sort_keys=True, default=_default) + "\n")


def write_text(text: str, path: Path) -> None:
    with atomic(path) as tmp:
        tmp.write_text(text)


def read_json(path: Path) -> Any:
    """A JSON file corpus-lab wrote; ``IntegrityError`` naming the file if it does not parse (every
    writer here is atomic, so that is a file damaged or edited since)."""
    try:
        return json.loads(Path(path).read_bytes())
    except (ValueError, UnicodeDecodeError) as e:  # JSONDecodeError is a ValueError
        raise IntegrityError(f"{path} is not valid JSON ({e}): the file is damaged or was edited; rerun the step "
                             "that writes it (`corpus-lab run` with the same config, or --overwrite) or restore "
                             "the file") from None


def read_marker(path: Path) -> dict:
    """A step's done marker: its JSON, or {} when it is missing or damaged (the step then runs again,
    which rewrites it)."""
    try:
        return read_json(path)
    except (FileNotFoundError, IntegrityError):
        return {}


def _default(o: Any) -> Any:
    if hasattr(o, "item"):  # numpy scalars
        return o.item()
    raise TypeError(f"cannot write {type(o).__name__} as JSON")
