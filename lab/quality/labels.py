"""Labels: a user's judgement of a document (good or bad, with an optional note), stored in the run.

A label is one row ``doc_id, label, user, time, note``. ``add`` / ``add_many`` validate it (the document
is in the run: ``lab.query.unknown_doc_ids``) and append it to ``runs/<name>/labels/`` as a new Parquet
file (``lab.io.labels``: unique name, temporary file, fsync, rename), so any number of processes can label
at once without losing one. Nothing is updated in place: a change of mind is a newer label, and readers
take each document's latest (``lab.query.labels(run, latest=True)``); ``lab.query.stage_precision`` turns
labels into each filter's precision. Reads are cached per process; once ``COMPACT_AT`` files have piled
up, ``add`` merges them into one (``compact``), safely while others label and read.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lab import query
from lab.errors import ConfigError, RunStateError
from lab.io import labels as label_io
from lab.query.labelling import LABELS, snapshot

FIELDS = ("doc_id", "label", "user", "note", "time")  # keys of a row given to add_many
COMPACT_AT = 1000  # label files that make add() compact them (a cold read of 1,000 files: ~0.6 s)
_INT64 = (-(2**63), 2**63 - 1)


def add(run: str | Path | query.Run, doc_id: int, label: str, *, user: str, note: str = "",
        time: dt.datetime | None = None) -> dict[str, Any]:
    """Label one document of ``run`` good or bad as ``user``; returns the row written."""
    return _write(run, [_row({"doc_id": doc_id, "label": label, "note": note, "time": time}, user, "label")])[0]


def add_many(run: str | Path | query.Run, rows: Iterable[Mapping[str, Any]], *,
             user: str | None = None) -> list[dict[str, Any]]:
    """Label several documents at once (one file): each row has ``doc_id`` and ``label``, optionally
    ``note``, ``time`` and ``user`` (default: the ``user`` argument). Every row is checked before
    anything is written; returns the rows written."""
    return _write(run, [_row(dict(r), user, f"label row {i}") for i, r in enumerate(rows)])


def _write(run: str | Path | query.Run, out: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Check that validated rows name documents of the run, then write them as one new label file."""
    if not out:
        return []
    r = query.open_run(run)
    unknown = query.unknown_doc_ids(r, [x["doc_id"] for x in out])
    if unknown:
        shown = ", ".join(map(str, unknown[:5])) + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else "")
        raise ConfigError(f"doc_id {shown} {'is' if len(unknown) == 1 else 'are'} not in the run {r.layout.root}; "
                          "label documents of this run (their doc_id as lab.query and the dashboard show it)")
    table = pa.Table.from_pylist(out, schema=label_io.SCHEMA)
    label_io.write_labels(r.layout, table)
    if len(label_io.label_files(r.layout)) >= COMPACT_AT:  # keep cold reads fast; skipped if one is running
        _compact(r, at_least=COMPACT_AT // 2)
    return out


def _row(r: dict[str, Any], user: str | None, where: str) -> dict[str, Any]:
    """One validated label row (``SCHEMA`` order); ``where`` names it in errors."""
    extra = sorted(set(r) - set(FIELDS))
    if extra:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(map(repr, extra))}; known: {', '.join(FIELDS)}")
    for k in ("doc_id", "label"):
        if k not in r:
            raise ConfigError(f"{where}: {k!r} is missing; give doc_id and label (good or bad)")
    doc_id = _doc_id(r["doc_id"], where)
    label = r["label"]
    if label not in LABELS:
        raise ConfigError(f"{where}: label {label!r} is not allowed: must be one of {', '.join(LABELS)}")
    who = r.get("user", user)
    if not isinstance(who, str) or not who.strip():
        raise ConfigError(f"{where}: user {who!r} is not allowed: name who judged the document (user='alice'; the "
                          "dashboard takes it from --basic-auth or its name field)")
    note = r.get("note") or ""
    if not isinstance(note, str):
        raise ConfigError(f"{where}: note {note!r} is not allowed: must be text (or left out)")
    when = r.get("time")
    if when is None:
        when = dt.datetime.now(dt.timezone.utc)
    elif not isinstance(when, dt.datetime) or when.tzinfo is None or when.utcoffset() is None:
        raise ConfigError(f"{where}: time {when!r} is not allowed: must be a timezone-aware datetime, "
                          "e.g. datetime.now(timezone.utc) (or left out: now)")
    return {"doc_id": doc_id, "label": label, "user": who.strip(), "time": when.astimezone(dt.timezone.utc),
            "note": note}


def _doc_id(v: Any, where: str) -> int:
    """A document id given as an int (or numpy int), or as its decimal string (ids are shown as text)."""
    if isinstance(v, str) and re.fullmatch(r"\s*-?\d+\s*", v):
        v = int(v)
    if isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) and _INT64[0] <= int(v) <= _INT64[1]:
        return int(v)
    raise ConfigError(f"{where}: doc_id {v!r} is not allowed: must be a 64-bit integer document id "
                      "(as lab.query and the dashboard show it, e.g. 7855438623749090668)")


def export(run: str | Path | query.Run, path: str | Path) -> int:
    """Write every label of ``run`` to ``path`` (.parquet, .csv or .jsonl); returns how many."""
    df = query.labels(run)
    label_io.export(df, path)
    return df.height


def compact(run: str | Path | query.Run) -> dict[str, Any]:
    """Merge the run's readable label files into one new file, then remove the files it merged.

    Safe while others write and read: a label written meanwhile is in a file the compaction did not
    read, so it stays; the merged file names the files it replaces, so a reader that lists both
    counts each label once, and a reader that finds a file gone lists the directory again. Files
    with problems (``lab.query.label_problems``) are left as they are. One compaction at a time
    (a ``RunStateError`` if another is running). ``add`` compacts by itself once ``COMPACT_AT`` files
    have piled up. Returns ``{"merged": files merged, "labels": rows in the new file, "file": its
    name or None, "temporaries_removed": stale .tmp-* files of killed writers removed}``.
    """
    out = _compact(query.open_run(run), at_least=2)
    if out is None:
        raise RunStateError(f"another process is compacting {query.open_run(run).layout.labels}; try again when it "
                            "is done")
    return out


def _compact(r: query.Run, *, at_least: int) -> dict[str, Any] | None:
    """``compact`` if at least ``at_least`` files can be merged; None if another compaction holds the lock."""
    with label_io.compaction_lock(r.layout) as acquired:
        if not acquired:
            return None
        snap = snapshot(r)  # listed and read under the lock: nothing else removes files meanwhile
        with snap.lock:
            names, rows, problems, superseded = snap.names, snap.rows, set(snap.problems), snap.superseded
        clean = sorted(n for n in names if n not in problems and n not in superseded)
        gone = sorted(n for n in names if n in superseded)  # already in a merged file (a compaction died)
        out: dict[str, Any] = {"merged": 0, "labels": 0, "file": None}
        if len(clean) >= max(at_least, 2):
            merged = rows.filter(pc.is_in(rows["file"], pa.array(clean, pa.string())))
            merged = merged.sort_by([("time", "ascending"), ("doc_id", "ascending")])
            path = label_io.write_merged(r.layout, merged, sorted(clean + gone))
            label_io.remove(r.layout, clean + gone)
            out = {"merged": len(clean), "labels": merged.num_rows, "file": path.name}
        elif gone:
            label_io.remove(r.layout, gone)
        out["temporaries_removed"] = label_io.remove_stale_temporaries(r.layout)
    return out
