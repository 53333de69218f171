"""Atomic writers: a partition's files appear complete or not at all.

Each file is written to a temporary name in the same directory, flushed to disk, then renamed
over the final name (``os.replace`` is atomic on POSIX). A killed task leaves at most a
``.tmp-*`` file, which is never read and is overwritten by the rerun.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

ROW_GROUP_ROWS = 8192  # rows per Parquet row group: small enough to page, large enough to scan fast


def _tmp(path: Path) -> Path:
    return path.with_name(f".tmp-{uuid.uuid4().hex}-{path.name}")


def _commit(tmp: Path, path: Path) -> None:
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, path)


def write_parquet(table: pa.Table, path: Path) -> None:
    """Write ``table`` to ``path`` atomically (zstd, fixed row groups: same table, same bytes)."""
    tmp = _tmp(path)
    try:
        pq.write_table(table, tmp, compression="zstd", row_group_size=ROW_GROUP_ROWS,
                       write_statistics=True, store_schema=True)
        _commit(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_json(obj: Any, path: Path) -> None:
    """Write ``obj`` as sorted, indented JSON to ``path`` atomically."""
    tmp = _tmp(path)
    try:
        tmp.write_text(json.dumps(obj, indent=1, sort_keys=True, default=_default) + "\n")
        _commit(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text(text: str, path: Path) -> None:
    tmp = _tmp(path)
    try:
        tmp.write_text(text)
        _commit(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def read_json(path: Path) -> Any:
    return json.loads(Path(path).read_text())


def _default(o: Any) -> Any:
    if hasattr(o, "item"):  # numpy scalars
        return o.item()
    raise TypeError(f"cannot write {type(o).__name__} as JSON")
