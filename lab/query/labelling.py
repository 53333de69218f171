"""labelling: the labels' read side — every label of a run, each document's latest one, and how
precise each stage's drops are by them.

Labels (``lab.quality.labels`` writes them; ``lab.io.labels`` knows the files) are read with one DuckDB
query over every label file not read before (``union_by_name``: a file whose columns differ shows
in the combined schema). A query that fails, or a combined schema that is not the label schema,
is split in halves until the bad files are alone; each of those is checked alone
(``lab.io.labels.check_file``) and skipped with the reason, which ``label_problems`` lists: a
corrupt, half-copied or foreign file never hides the good labels. Label files are written once
(temporary name, then rename), so each process reads each file once and a later call lists the
directory and reads only the new files (a file with a problem is read again when its size or mtime
changes: one being copied in by hand). A file that vanishes while being read (a compaction merged
it) makes the read start again from a new listing.

Measured here (2 cores shared with other work, load ~2), one label per file: 1k files read cold
in ~0.6 s, 10k in ~4-5 s (DuckDB opening the files); afterwards ``labels()`` answers in ~5 ms at
1k files and ~25 ms at 10k (listing the directory: ~15 ms). One merged file reads cold in ~0.25 s
(DuckDB's first query) and warm in ~3 ms: so ``lab.quality.labels.add`` compacts once 1,000 files pile up.

Precision: each labelled document's latest label counts once. Its stage (the one that drops it
under ``config``, or kept) is computed exactly without evaluating every document: the labelled
documents and the other members of their exact-duplicate groups go through the rules (a group
rule's window needs all of a group's members), and near_dedup's drops come from ``near_drops``
(remembered per config). The documents each stage drops come from ``funnel`` (remembered and
incremental in memory), so the table costs a funnel plus a query over a few labelled rows: ~70 ms
for 1,000 labels at 1M documents in memory (``labelled_drops`` ~60 ms, ``unknown_doc_ids`` ~7 ms).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from lab.config import Config
from lab.errors import ConfigError, IntegrityError, RunStateError
from lab.io import labels as label_io
from lab.io.run import RunLayout
from lab.query.compile import codes_sql, reason_of, rules_of
from lab.query.funnels import funnel
from lab.query.neardup import with_near
from lab.query.run import Run, open_run
from lab.query.sql import ident, quote, to_arrow
from lab.stages import STAGE_NAMES
from lab.stats import wilson

__all__ = ["KEPT", "LABELS", "label_problems", "labelled_drops", "labels", "stage_precision", "unknown_doc_ids"]

LABELS = ("good", "bad")
KEPT = "kept"  # stage_precision's row (and labelled_drops' stage) of the documents the config keeps
READ_ATTEMPTS = 5  # re-list when a file vanished while being read (a compaction removed it)
_PRECISION_SCHEMA = {"stage": pl.Utf8, "dropped_docs": pl.Int64, "labelled": pl.Int64, "labelled_bad": pl.Int64,
                     "labelled_good": pl.Int64, "precision": pl.Float64, "ci_low": pl.Float64, "ci_high": pl.Float64}
_DROPS_SCHEMA = {"doc_id": pl.Int64, "reason": pl.Utf8, "label": pl.Utf8, "user": pl.Utf8,
                 "time": pl.Datetime("us", "UTC"), "note": pl.Utf8}
_FILE = "file"  # the column naming each row's label file


@dataclass
class _Snapshot:
    """What a process has read of one run's labels/: the files it covers, their valid rows
    (``label_io.SCHEMA`` + ``file``), and why files or rows were skipped. Label files are written
    once (temporary name, then rename), so a name read is never read again; only a file with a
    problem is looked at again when its size or mtime changes (one being copied in by hand)."""

    names: frozenset[str] = frozenset()
    rows: pa.Table = field(default_factory=lambda: label_io.SCHEMA.append(pa.field(_FILE, pa.string())).empty_table())
    problems: dict[str, str] = field(default_factory=dict)
    stamps: dict[str, tuple[int, int] | None] = field(default_factory=dict)  # problem files: (size, mtime_ns)
    sources: dict[str, list[str]] = field(default_factory=dict)  # merged file -> the files it replaces
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def superseded(self) -> set[str]:
        return {s for srcs in self.sources.values() for s in srcs}

    def changed(self, layout: RunLayout, listed: list[str]) -> set[str]:
        """Names of ``listed`` to read again: new ones, and problem files whose stamp changed."""
        return ({n for n in listed if n not in self.names}
                | {n for n in self.stamps if n in self.names and label_io.stamp(layout, n) != self.stamps[n]})


_snapshots: dict[str, _Snapshot] = {}
_snapshots_lock = threading.Lock()


class _Vanished(Exception):
    """A label file disappeared between listing and reading it (a compaction merged it)."""


def _scan(cur: duckdb.DuckDBPyConnection, d: Path, names: list[str]) -> tuple[list[pa.Table], dict[str, str]]:
    """Read label files ``names`` of directory ``d``: (tables of their rows + file, {name: why skipped})."""
    if not names:
        return [], {}
    files = "[" + ", ".join(quote(str(d / n)) for n in names) + "]"
    try:
        t = to_arrow(cur.sql(f"SELECT * FROM read_parquet({files}, union_by_name = true, filename = true)"))
        if label_io.compatible(pa.schema([f for f in t.schema if f.name != "filename"])):
            t = t.select([*label_io.SCHEMA.names, "filename"]).rename_columns([*label_io.SCHEMA.names, _FILE])
            return [t.set_column(t.num_columns - 1, _FILE, pc.replace_substring_regex(t[_FILE], r"^.*/", ""))], {}
    except (duckdb.Error, OSError):  # a bad file, or one a compaction removed (DuckDB 2 raises OSError for it)
        pass
    if len(names) > 1:  # bisect: the good files are read, the bad ones end up alone
        a, pa_ = _scan(cur, d, names[:len(names) // 2])
        b, pb = _scan(cur, d, names[len(names) // 2:])
        return a + b, {**pa_, **pb}
    path = d / names[0]
    if not path.exists():
        raise _Vanished(names[0])
    try:
        t = label_io.check_file(path)  # says what is wrong, in terms of the file
    except IntegrityError as e:
        return [], {names[0]: str(e)}
    except FileNotFoundError:
        raise _Vanished(names[0]) from None
    return [t.append_column(_FILE, pa.array([names[0]] * t.num_rows, pa.string()))], {}


def _validate(cur: duckdb.DuckDBPyConnection, t: pa.Table) -> tuple[pa.Table, dict[str, str]]:
    """The rows of ``t`` that are labels (doc_id, user and time given, label good or bad; a missing
    note is ""), and per file how many were not."""
    cur.register("_new_labels", t)
    ok = (f"doc_id IS NOT NULL AND label IN ({', '.join(map(quote, LABELS))}) AND trim(coalesce(\"user\", '')) <> '' "
          "AND \"time\" IS NOT NULL")
    bad = cur.execute(f"SELECT {_FILE}, count(*) FILTER (WHERE NOT coalesce({ok}, FALSE)), count(*) FROM _new_labels "
                      f"GROUP BY ALL HAVING count(*) FILTER (WHERE NOT coalesce({ok}, FALSE)) > 0").fetchall()
    good = t
    if bad:
        good = to_arrow(cur.sql(f"SELECT * REPLACE (coalesce(note, '') AS note) FROM _new_labels WHERE coalesce({ok}, FALSE)"))
    elif t.column("note").null_count:
        good = to_arrow(cur.sql("SELECT * REPLACE (coalesce(note, '') AS note) FROM _new_labels"))
    cur.unregister("_new_labels")
    problems = {f: f"{n} of {total} rows skipped: a label other than {' or '.join(LABELS)}, or no doc_id, user or time"
                for f, n, total in bad}
    return good.cast(t.schema), problems


def snapshot(run: str | Path | Run) -> _Snapshot:
    """The run's labels as read now: every readable label file's valid rows (cached per process)."""
    r = open_run(run)
    layout = r.layout
    with _snapshots_lock:
        snap = _snapshots.setdefault(str(layout.root), _Snapshot())
    with snap.lock:
        for _ in range(READ_ATTEMPTS):
            listed = label_io.label_files(layout)
            todo = snap.changed(layout, listed)
            if not todo and len(listed) == len(snap.names):
                return snap
            try:
                _refresh(r, snap, listed, todo)
                return snap
            except _Vanished:
                continue
        raise RunStateError(f"{layout.labels}: label files kept disappearing while being read ({READ_ATTEMPTS} tries); "
                            "is a compaction running in a loop? try again")


def _refresh(r: Run, snap: _Snapshot, listed: list[str], todo: set[str]) -> None:
    """Bring ``snap`` up to the directory listing ``listed``: read the files ``todo``, forget the
    files no longer listed. ``snap`` changes only at the end (a vanished file leaves it as it was)."""
    layout, d = r.layout, r.layout.labels
    cur = r.cursor()
    same = [n for n in listed if n not in todo]
    sources = {n: v for n, v in snap.sources.items() if n in same}
    for n in sorted(todo):
        if label_io.is_merged(n):
            try:
                sources[n] = label_io.merged_from(d / n)
            except FileNotFoundError:
                raise _Vanished(n) from None
            except IntegrityError:  # unreadable: scanned below, and reported there
                pass
    superseded = {s for srcs in sources.values() for s in srcs}
    stamps = {n: label_io.stamp(layout, n) for n in todo}  # before reading: a later change is seen next time
    tables, problems = _scan(cur, d, [n for n in listed if n in todo and n not in superseded])
    new = pa.concat_tables([t.cast(snap.rows.schema) for t in tables]) if tables else snap.rows.schema.empty_table()
    new, row_problems = _validate(cur, new)
    keep = [n for n in same if n not in superseded]
    old = snap.rows.filter(pc.is_in(snap.rows[_FILE], pa.array(keep, pa.string())))
    problems = {**{n: p for n, p in snap.problems.items() if n in keep}, **problems, **row_problems}
    snap.rows = pa.concat_tables([old, new]).combine_chunks()  # one chunk: DuckDB scans it fast
    snap.problems = problems
    snap.stamps = {n: stamps.get(n, snap.stamps.get(n)) for n in problems}
    snap.sources = sources
    snap.names = frozenset(listed)


def labels(run: str | Path | Run, *, latest: bool = False) -> pl.DataFrame:
    """Every readable label of the run, ordered by time then doc_id: doc_id, label, user, time, note.

    ``latest``: one row per doc_id, its most recent label; labels at the same time are ordered by
    user, then label, and the last counts. Files that cannot be read are skipped (``label_problems``
    says which and why); no labels yet: an empty frame with the columns.
    """
    snap = snapshot(run)
    cur = open_run(run).cursor()
    cur.register("_labels", snap.rows)
    cols = ", ".join(ident(c) for c in label_io.SCHEMA.names)
    last = ("QUALIFY row_number() OVER (PARTITION BY doc_id ORDER BY \"time\" DESC, \"user\" DESC, label DESC, "
            "note DESC) = 1 " if latest else "")
    t = to_arrow(cur.sql(f"SELECT {cols} FROM _labels {last}ORDER BY \"time\", doc_id, \"user\", label, note"))
    return pl.from_arrow(t.cast(label_io.SCHEMA))


def label_problems(run: str | Path | Run) -> list[str]:
    """Why label files (or rows of them) were skipped: ``"labels/<file>: <why>"``, one per file."""
    snap = snapshot(run)
    return [f"{label_io.DIR}/{n}: {why}" for n, why in sorted(snap.problems.items())]


def unknown_doc_ids(run: str | Path | Run, ids: Iterable[int]) -> list[int]:
    """The ids among ``ids`` that are no document of the run, in the order given (each once)."""
    ids = list(dict.fromkeys(int(i) for i in ids))
    if not ids:
        return []
    r = open_run(run)
    cur = r.cursor()
    cur.register("_ids", pa.table({"doc_id": pa.array(ids, pa.int64())}))
    missing = {x for (x,) in cur.execute("SELECT doc_id FROM _ids ANTI JOIN signals USING (doc_id)").fetchall()}
    return [i for i in ids if i in missing]


def _labelled_codes(r: Run, config: Config, latest: pl.DataFrame) -> pa.Table:
    """doc_id, code (index of the first failing rule of ``config``; NULL: kept), reason, label, user,
    time, note of each labelled document of the run (its latest label)."""
    rules = rules_of(r, config)
    cur = r.cursor()
    cur.register("_latest", latest.to_arrow())
    labelled = "doc_id IN (SELECT doc_id FROM _latest)"
    where = labelled
    for g in dict.fromkeys(x.signal for x in rules if x.op == "first_in_group"):  # a group's other members
        col, n = ident(g), ident(f"_n_{g}")
        shared = f"{n} > 1" if f"_n_{g}" in r.columns else f"{col} IS NOT NULL"  # in memory: group sizes known
        where += f" OR {col} IN (SELECT {col} FROM signals WHERE {labelled} AND {shared})"
    coded = with_near(r, cur, rules, codes_sql(rules, run=r, source=f"(SELECT * FROM signals WHERE {where})"))
    return to_arrow(cur.sql(f"SELECT c.doc_id, c.code, {reason_of(rules)} AS reason, l.label, l.\"user\", l.\"time\", "
                          f"l.note FROM ({coded}) c JOIN _latest l USING (doc_id)"))


def stage_precision(run: str | Path | Run, config: Config) -> pl.DataFrame:
    """How right each stage's drops are, by the run's labels: one row per stage in funnel order, then
    ``kept`` (the documents ``config`` keeps).

    Columns: stage, dropped_docs (documents the stage drops; for ``kept``, documents kept), labelled
    (of those, documents with a label; each document's latest label counts), labelled_bad,
    labelled_good, precision, ci_low, ci_high. A stage's precision is the share of its labelled
    drops labelled bad (bad / (bad + good): how often dropping was right); for ``kept`` it is the
    share of the labelled kept documents labelled good (how clean what is kept is; 1 - precision is
    the rate at which bad documents slip through). [ci_low, ci_high] is its 95% Wilson score interval
    (``lab.stats.wilson``); all three are null when nothing there is labelled. Records that could not
    be read (funnel stage ``ingest``) have no doc_id and no row; labels of doc ids not in the run are
    not counted.
    """
    r = open_run(run)
    f = funnel(r, config)
    dropped = dict(zip(f["stage"], f["docs_dropped"]))
    kept = int(f["docs_out"][-1]) if f.height else 0
    latest = labels(r, latest=True)
    rules = rules_of(r, config)
    counts: dict[str, list[int]] = {}  # stage -> [bad, good]
    if latest.height:
        t = _labelled_codes(r, config, latest)
        for code, label in zip(t.column("code").to_pylist(), t.column("label").to_pylist()):
            acc = counts.setdefault(KEPT if code is None else rules[code].stage, [0, 0])
            acc[0 if label == "bad" else 1] += 1
    rows = []
    for stage in (*STAGE_NAMES, KEPT):
        bad, good = counts.get(stage, (0, 0))
        n, hits = bad + good, (good if stage == KEPT else bad)
        lo, hi = wilson(hits, n) if n else (None, None)
        rows.append({"stage": stage, "dropped_docs": kept if stage == KEPT else int(dropped.get(stage, 0)),
                     "labelled": n, "labelled_bad": bad, "labelled_good": good,
                     "precision": hits / n if n else None, "ci_low": lo, "ci_high": hi})
    return pl.DataFrame(rows, schema=_PRECISION_SCHEMA)


def labelled_drops(run: str | Path | Run, config: Config, stage: str, *, label: str = "good") -> pl.DataFrame:
    """The documents ``stage`` drops under ``config`` whose latest label is ``label`` (for ``stage``
    ``kept``: the kept ones): doc_id, reason, label, user, time, note, ordered by time then doc_id.
    With the default, the labelled-good documents a filter throws away."""
    if stage not in (*STAGE_NAMES, KEPT):
        raise ConfigError(f"unknown stage {stage!r}; known: {', '.join((*STAGE_NAMES, KEPT))}")
    if label not in LABELS:
        raise ConfigError(f"label={label!r} is not allowed: must be one of {', '.join(LABELS)}")
    r = open_run(run)
    rules = rules_of(r, config)
    latest = labels(r, latest=True).filter(pl.col("label") == label)
    if not latest.height:
        return pl.DataFrame(schema=_DROPS_SCHEMA)
    t = pl.from_arrow(_labelled_codes(r, config, latest))
    codes = [i for i, x in enumerate(rules) if x.stage == stage]
    t = t.filter(pl.col("code").is_null() if stage == KEPT else pl.col("code").is_in(codes))
    return t.select(list(_DROPS_SCHEMA)).cast(_DROPS_SCHEMA).sort("time", "doc_id")
