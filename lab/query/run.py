"""run: an opened run (``Run``): one DuckDB connection per process and run, and the views queries read.

``open_run`` makes the views every query of the package reads: ``signals`` (one row per document,
with ``n_tokens`` once the run has token counts, and the corpus-level ``bp_line_frac`` once the
boilerplate-line merge wrote it), ``docs`` (the texts), ``rejects`` (records that
could not be read), the near-dedup candidate ``edges``, ``exact_groups``, the ``clusters``
precomputed on the grid, and ``nd_docs``/``nd_docs_all`` (the documents near dedup can touch).

Connections: one DuckDB connection per process and run (``open_run``, cached), a ``cursor()`` per
call, so threads (dashboard sessions) never share a cursor. Its database is a file in a temporary
directory of its own (removed with the ``Run``): ``signals`` is a table made once at open from the
signals, the boilerplate signal and the token counts joined, with the group sizes of the group
rules' signals, so a query scans the columns it reads instead of joining three Parquet globs again;
DuckDB keeps in memory only the blocks it reads. ``open_run(..., in_memory=True)`` adds what
interactive use needs: each row's place in ``dropped_samples``' default order (rows stored in it),
which columns hold NULLs and the exact range of every numeric column (the compiler then leaves out
guards no row needs). Also here: the run's constants and the order in which samples of drops are taken.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import numpy as np

from lab import dedup
from lab.config import Config, load
from lab.dedup.forest import GRID
from lab.errors import ConfigError, NotReadyError
from lab.io import mirror, storage
from lab.io.run import RunLayout
from lab.io.schema import numeric_signals
from lab.io.writers import read_json
from lab.query.memo import Memo
from lab.query.sql import empty_table, ident, quote
from lab.stages import STAGE_NAMES, STAGES
from lab.stats import Summary

# signals of group rules (one survivor per value): the in-memory table precomputes their group sizes
GROUP_SIGNALS = tuple(dict.fromkeys(r.signal for m in STAGES for r in m.rules(m.Config()) if r.op == "first_in_group"))
SAMPLE_SEED = 0  # dropped_samples' default seed
SAMPLE_RANK = "_sample_rank"  # in-memory runs: each row's place in the order of that seed's samples
SAMPLE_WINDOWS = (2**14, 2**18)  # first rows (in sample order) looked at for a sample, before all of them
MEMO_FUNNELS = 256  # per in-memory run: recent funnels that later ones are computed from
HIST_MEMO = 16  # per in-memory run: recent histograms' raw counts
INGEST = "ingest"  # the pseudo-stage of records that could not be read (rejects/)
FUNNEL_STAGES = (INGEST, *STAGE_NAMES)
GROUP_BY = ("lang", "source")


def _memory_limit() -> str:
    """A quarter of the machine's memory (at least 1 GB), or ``CORPUS_LAB_DUCKDB_MEMORY`` (DuckDB's syntax,
    e.g. ``8GB``): several runs and sessions share one dashboard process, and DuckDB's own default (80%
    of the memory, per connection) lets one large run take the machine."""
    value = os.environ.get("CORPUS_LAB_DUCKDB_MEMORY", "")
    if value:
        return value
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return "4GB"
    return f"{max(1, total // 4 // 2**30)}GB"


# SET on every connection open_run makes, e.g. {"memory_limit": "8GB", "temp_directory": "/scratch/duckdb"}:
# DuckDB spills past its memory_limit to temp_directory (default: beside the run's database file, in its
# temporary directory)
DUCKDB_SETTINGS: dict[str, str] = {"memory_limit": _memory_limit()}


@dataclass
class Run:
    """An opened run: its layout, a DuckDB connection with ``signals``/``docs``/``rejects`` views."""

    layout: RunLayout
    con: duckdb.DuckDBPyConnection
    columns: tuple[str, ...]  # column names of the signals table
    nullable: frozenset[str] | None = None  # columns that hold NULLs; None = not known (guard every rule)
    config: Config | None = None  # the config the run was made with (config.yaml)
    ranges: dict[str, tuple[float, float]] | None = None  # in-memory runs: exact min and max of numeric columns
    # in-memory runs: (by, rules) -> {(group, code): [docs, bytes]} of recent funnels, newest last
    memo: Memo | None = None
    # the same for a run queried from its DuckDB file: a threshold move is answered incrementally there too
    sql_memo: Memo = field(default_factory=lambda: Memo(MEMO_FUNNELS))
    lock: threading.Lock = field(default_factory=threading.Lock)
    edges: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  # (u, v, jaccard) of the candidate pairs
    near_memo: Memo = field(default_factory=lambda: Memo(MEMO_FUNNELS))  # rules -> near-dedup drops
    binned: dict = field(default_factory=dict)  # in memory: (signal, bin edges) -> column of each row's bin
    constant: dict = field(default_factory=dict)  # answers that depend on the run only (fertility), by question
    hist_memo: Memo = field(default_factory=lambda: Memo(HIST_MEMO))  # recent histograms' raw counts (in memory)
    codes: Any = None  # in memory: lab.query.codes.Codes, each document's first failing rule as an array
    stats_read: tuple | None = None  # ((mtime, size) of the stats file, its summaries)

    def cursor(self) -> duckdb.DuckDBPyConnection:
        return self.con.cursor()

    def stats(self) -> dict[str, Summary]:
        """The run's merged signal statistics (read again only when the file changes)."""
        p = self.layout.merged_stats
        try:
            st = p.stat()
        except FileNotFoundError:
            return {}
        key = (st.st_mtime_ns, st.st_size)
        known = self.stats_read
        if known is not None and known[0] == key:
            return known[1]
        out = {k: Summary.from_json(v) for k, v in read_json(p)["signals"].items()}
        self.stats_read = (key, out)
        return out


_runs: dict[tuple[str, bool], Run] = {}
_lock = threading.Lock()


def sample_order(seed: int) -> str:
    """The order in which ``dropped_samples`` takes documents: a seeded hash of the id."""
    return f"hash(doc_id, {int(seed)}), doc_id"


def run_dir(where: str | Path, base: str | Path = ".") -> Path:
    """The directory to read a run from: a path (relative to ``base``) as it is; a URL (``s3://...``) this
    process's working copy of the stored run, brought up to date (``lab.io.mirror``)."""
    if isinstance(where, str) and storage.is_url(where):
        wc = mirror.working_copy(where)
        wc.pull()
        return wc.path
    return Path(base) / where


def open_run(run: str | Path | Run, *, in_memory: bool = False, refresh: bool = False) -> Run:
    """The process-wide ``Run`` for a run directory (cached; ``refresh`` re-reads the files)."""
    if isinstance(run, Run):
        return run
    if isinstance(run, str) and storage.is_url(run):  # a stored run: read in this process's working copy
        wc = mirror.working_copy(run)
        if refresh or (str(wc.path), in_memory) not in _runs:
            wc.pull()
        run = wc.path
    root = Path(run).resolve()
    layout = RunLayout(root)
    if not any(layout.signals.glob("part-*.parquet")):
        if not layout.config.is_file():
            raise ConfigError(f"{str(run)!r} is not a corpus-lab run (no config.yaml, no signals/); give a run "
                              "directory such as runs/sample, made by `corpus-lab run`")
        raise NotReadyError(f"{str(run)!r} has no signals yet (signals/part-*.parquet): its run did not annotate any "
                            f"partition; run (or resume) `corpus-lab run --config {layout.config}` first")
    if in_memory and (refresh or (str(root), True) not in _runs):
        if refresh or str(root) not in _large:
            _large[str(root)] = _documents(layout) > in_memory_max_docs()
        # a large run is queried from its DuckDB file, which DuckDB pages in and out
        in_memory = not _large[str(root)]
    key = (str(root), in_memory)
    with _lock:
        if key in _runs and not refresh:
            return _runs[key]
        _sweep()
        where = Path(tempfile.mkdtemp(prefix=f"{_TMP_PREFIX}{os.getpid()}-"))
        con = duckdb.connect(str(where / "run.duckdb"))
        try:
            for name, value in DUCKDB_SETTINGS.items():
                try:
                    con.execute(f"SET {name} = {quote(str(value))}")
                except duckdb.Error as e:
                    env = " (CORPUS_LAB_DUCKDB_MEMORY)" if name == "memory_limit" else ""
                    raise ConfigError(f"DuckDB setting {name}={value!r}{env} is not allowed: {e}; give a size "
                                      "such as 8GB, or unset it") from None
            _make_signals(con, layout, "_signals" if in_memory else "signals")
            nullable, ranges = None, None
            if in_memory:
                # each row's place in dropped_samples' default order, rows stored in that order: a sample is
                # then found among the first rows (zone maps skip the others) instead of sorting them all
                rank = f", row_number() OVER (ORDER BY {sample_order(SAMPLE_SEED)}) - 1 AS {SAMPLE_RANK}"
                con.execute(f"CREATE TABLE signals AS SELECT *{rank} FROM _signals ORDER BY {SAMPLE_RANK}")
                con.execute("DROP TABLE _signals")
                # NULL-free columns need no NULL guard
                names = [r[0] for r in con.execute("DESCRIBE signals").fetchall()]
                counts = con.execute(f"SELECT {', '.join(f'count(*) - count({ident(c)})' for c in names)} FROM signals").fetchone()
                nullable = frozenset(c for c, n in zip(names, counts) if n)
                num = [c for c in numeric_signals() if c in names]
                mm = con.execute(f"SELECT {', '.join(f'min({ident(c)})::DOUBLE, max({ident(c)})::DOUBLE' for c in num)} "
                                 "FROM signals").fetchone()
                ranges = {c: (mm[2 * i], mm[2 * i + 1]) for i, c in enumerate(num) if mm[2 * i] is not None}
            if any((layout.dedup / "edges").glob("bucket-*.parquet")):
                con.execute(f"CREATE VIEW edges AS SELECT * FROM read_parquet({quote(str(layout.dedup / 'edges' / 'bucket-*.parquet'))})")
            else:
                con.execute(f"CREATE TABLE edges AS SELECT * FROM {empty_table(dedup.EDGE_SCHEMA)}")
            if any((layout.dedup / "exact").glob("bucket-*.parquet")):
                con.execute("CREATE VIEW exact_groups AS SELECT * FROM "
                            f"read_parquet({quote(str(layout.dedup / 'exact' / 'bucket-*.parquet'))})")
            else:
                con.execute(f"CREATE TABLE exact_groups AS SELECT * FROM {empty_table(dedup.EXACT_SCHEMA)}")
            if layout.clusters.exists():
                con.execute(f"CREATE VIEW clusters AS SELECT * FROM read_parquet({quote(str(layout.clusters))})")
            else:
                con.execute(f"CREATE TABLE clusters AS SELECT 0::BIGINT AS node, 0::BIGINT AS doc_id, "
                            f"{', '.join(f'NULL::BIGINT AS {dedup.grid_column(t)}' for t in GRID)} LIMIT 0")
            # the documents near dedup can touch: those of a node with a candidate edge (nd_docs), and when
            # exact dedup is off, exact copies too (nd_docs_all: several may survive to share a node)
            copies = "_n_content_hash > 1"  # _make_signals' group size
            ends = "content_hash IN (SELECT u FROM edges UNION SELECT v FROM edges)"
            con.execute(f"CREATE {'TABLE' if in_memory else 'VIEW'} nd_docs AS SELECT * FROM signals WHERE {ends}")
            con.execute(f"CREATE VIEW nd_docs_all AS SELECT * FROM signals WHERE {ends} OR {copies}")
            con.execute(f"CREATE VIEW docs AS SELECT * FROM read_parquet({quote(layout.glob('docs'))})")
            con.execute(f"CREATE VIEW rejects AS SELECT * FROM read_parquet({quote(layout.glob('rejects'))})")
            columns = tuple(r[0] for r in con.execute("DESCRIBE signals").fetchall())
            r = Run(layout, con, columns, nullable, load(layout.config) if layout.config.exists() else None, ranges,
                    Memo(MEMO_FUNNELS) if in_memory else None)
            weakref.finalize(r, _remove, con, where)
        except BaseException:
            _remove(con, where)
            raise
        _runs[key] = r
        return r


BATCH_PARTITIONS = 8  # signals partitions joined per statement when a run is opened


def _make_signals(con: duckdb.DuckDBPyConnection, layout: RunLayout, table: str) -> None:
    """Make ``table``: every signals row with its corpus-level signal (``bp_line_frac`` from the
    boilerplate step, NULL in signals/), its token count (``n_tokens``, once tokenized/ exists) and the
    size of its group under each group rule (``_n_<signal>``: the dedup window then skips singletons).

    A document's boilerplate signal and token count are in the files of its own partition, so the
    rows are joined a few partitions at a time: each join holds those partitions' keys, where one join
    of the whole run holds every document's (at 100M documents more than memory, spilled to disk). Group
    sizes are counted once over the run and only groups of two or more are joined (NULL: a singleton)."""
    bp_on = layout.boilerplate_done.exists() and any(layout.boilerplate.glob("signal/part-*.parquet"))
    tok_on = any(layout.tokenized_dir.glob("part-*.parquet"))
    src = f"read_parquet({quote(layout.glob('signals'))})"
    for i, c in enumerate(GROUP_SIGNALS):
        col = ident(c)
        con.execute(f"CREATE TEMP TABLE _g{i} AS SELECT {col} AS v, count(*) AS n FROM {src} GROUP BY ALL "
                    "HAVING count(*) > 1")
    files = sorted(layout.signals.glob("part-*.parquet"))
    for at in range(0, len(files), BATCH_PARTITIONS):
        batch = files[at:at + BATCH_PARTITIONS]
        keys = [f.name for f in batch]
        sig = f"(SELECT * FROM read_parquet([{', '.join(quote(str(f)) for f in batch)}]))"

        def side(folder: Path, cols: str) -> str | None:
            there = [folder / k for k in keys if (folder / k).exists()]
            return f"(SELECT {cols} FROM read_parquet([{', '.join(quote(str(f)) for f in there)}]))" if there else None

        if bp_on:  # NULL for a partition without the file, as a join that finds no row
            bp = side(layout.boilerplate / "signal", "doc_id, bp_line_frac")
            sig = (f"(SELECT s.* REPLACE (b.bp_line_frac AS bp_line_frac) FROM {sig} s LEFT JOIN {bp} b USING (doc_id))"
                   if bp else f"(SELECT * REPLACE (NULL::DOUBLE AS bp_line_frac) FROM {sig})")
        if tok_on:
            tok = side(layout.tokenized_dir, "doc_id, n_tokens")
            sig = (f"(SELECT s.*, t.n_tokens FROM {sig} s LEFT JOIN {tok} t USING (doc_id))" if tok
                   else f"(SELECT *, NULL::BIGINT AS n_tokens FROM {sig})")
        sizes = "".join(f", coalesce(_g{i}.n, 1) AS {ident('_n_' + c)}" for i, c in enumerate(GROUP_SIGNALS))
        joins = "".join(f" LEFT JOIN _g{i} ON s.{ident(c)} IS NOT DISTINCT FROM _g{i}.v" for i, c in enumerate(GROUP_SIGNALS))
        query = f"SELECT s.*{sizes} FROM {sig} s{joins}"
        con.execute(f"CREATE TABLE {table} AS {query}" if at == 0 else f"INSERT INTO {table} BY NAME {query}")
    for i in range(len(GROUP_SIGNALS)):
        con.execute(f"DROP TABLE _g{i}")


IN_MEMORY_MAX_DOCS = 20_000_000  # above this, open_run(in_memory=True) opens the run as from disk
_large: dict[str, bool] = {}  # run directory -> whether it has more documents than an in-memory run holds


def in_memory_max_docs() -> int:
    """The most documents an in-memory run holds (``CORPUS_LAB_IN_MEMORY_DOCS``, else ``IN_MEMORY_MAX_DOCS``):
    its per-document arrays take ~8 bytes per rule column and document, ~3 GB per 10M documents."""
    value = os.environ.get("CORPUS_LAB_IN_MEMORY_DOCS", "")
    if not value:
        return IN_MEMORY_MAX_DOCS
    if not value.isdigit():
        raise ConfigError(f"CORPUS_LAB_IN_MEMORY_DOCS={value!r} is not allowed: give a whole number of documents "
                          f"(default {IN_MEMORY_MAX_DOCS}), or unset it")
    return int(value)


def _documents(layout: RunLayout) -> int:
    """The run's documents, from its signals files' footers (nothing else is read)."""
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(p).metadata.num_rows for p in layout.signals.glob("part-*.parquet"))


_TMP_PREFIX = "corpus-lab-query-"


def _sweep() -> None:
    """Delete the database directories that processes no longer running left behind (killed before their
    ``Run`` was closed): each directory's name holds the process id that made it."""
    for d in Path(tempfile.gettempdir()).glob(f"{_TMP_PREFIX}*-*"):
        pid = d.name.removeprefix(_TMP_PREFIX).split("-", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(d, ignore_errors=True)
        except PermissionError:  # another user's process, alive
            pass


def _remove(con: duckdb.DuckDBPyConnection, where: Path) -> None:
    """Close a run's connection and delete its database directory (when the ``Run`` goes, or at exit)."""
    try:
        con.close()
    finally:
        shutil.rmtree(where, ignore_errors=True)
