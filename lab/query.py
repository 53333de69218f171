"""query: every SQL statement of corpus-lab, run by DuckDB over a run's Parquet files.

Rules (``lab.rules.Rule``) compile to one ``CASE`` expression that names each document's first
failing rule, in funnel order; the funnel is then a single ``GROUP BY`` over that computed
reason (measured faster than one ``FILTER`` aggregate per stage: see ``bench/RESULTS.md``).
Group rules (exact dedup) become a window over the documents still alive at that point, so one
member of each group always survives the earlier stages' filtering.

Connections: one DuckDB connection per process and run (``open_run``), a ``cursor()`` per call,
so threads (dashboard sessions) never share a cursor. ``open_run(..., in_memory=True)`` loads the
signals table into memory for interactive use.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import duckdb
import polars as pl

from lab.config import Config
from lab.errors import ConfigError
from lab.io.run import RunLayout
from lab.io.writers import read_json
from lab.rules import Rule
from lab.select import ruleset
from lab.stages import STAGE_NAMES, STAGES
from lab.stats import Summary

INGEST = "ingest"  # the pseudo-stage of records that could not be read (rejects/)
FUNNEL_STAGES = (INGEST, *STAGE_NAMES)
GROUP_BY = ("lang", "source")


@dataclass
class Run:
    """An opened run: its layout, a DuckDB connection with ``signals``/``docs``/``rejects`` views."""

    layout: RunLayout
    con: duckdb.DuckDBPyConnection
    columns: tuple[str, ...]  # signal column names

    def cursor(self) -> duckdb.DuckDBPyConnection:
        return self.con.cursor()

    def stats(self) -> dict[str, Summary]:
        p = self.layout.merged_stats
        if not p.exists():
            return {}
        return {k: Summary.from_json(v) for k, v in read_json(p)["signals"].items()}


_runs: dict[tuple[str, bool], Run] = {}
_lock = threading.Lock()


def _q(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def open_run(run: str | Path | Run, *, in_memory: bool = False, refresh: bool = False) -> Run:
    """The process-wide ``Run`` for a run directory (cached; ``refresh`` re-reads the files)."""
    if isinstance(run, Run):
        return run
    root = Path(run).resolve()
    layout = RunLayout(root)
    if not any(layout.signals.glob("part-*.parquet")):
        raise ConfigError(f"{str(run)!r} is not a corpus-lab run (no signals/part-*.parquet); run `corpus-lab run` first")
    key = (str(root), in_memory)
    with _lock:
        if key in _runs and not refresh:
            return _runs[key]
        con = duckdb.connect()
        sig = f"read_parquet({_q(layout.glob('signals'))})"
        if in_memory:
            con.execute(f"CREATE TABLE signals AS SELECT * FROM {sig}")
        else:
            con.execute(f"CREATE VIEW signals AS SELECT * FROM {sig}")
        con.execute(f"CREATE VIEW docs AS SELECT * FROM read_parquet({_q(layout.glob('docs'))})")
        con.execute(f"CREATE VIEW rejects AS SELECT * FROM read_parquet({_q(layout.glob('rejects'))})")
        columns = tuple(r[0] for r in con.execute("DESCRIBE signals").fetchall())
        _runs[key] = Run(layout, con, columns)
        return _runs[key]


# --- rules -> SQL ---------------------------------------------------------------------------------


def _literal(v: Any) -> str:
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return _q(v)
    raise ConfigError(f"rule threshold {v!r} ({type(v).__name__}) cannot be used in SQL; use a number or a string")


def predicate(rule: Rule) -> str:
    """The SQL condition a kept document satisfies; NULL (a missing signal) never passes.

    >>> predicate(Rule("language", "lang", "in", ("en", "de"), "other_language"))
    "coalesce(\\"lang\\" IN ('en', 'de'), FALSE)"
    """
    col = _ident(rule.signal)
    if rule.op == "in":
        cond = f"{col} IN ({', '.join(_literal(v) for v in rule.value)})"
    elif rule.op in (">=", "<=", "=="):
        cond = f"{col} {'=' if rule.op == '==' else rule.op} {_literal(rule.value)}"
    elif rule.op == "!=":
        cond = f"{col} <> {_literal(rule.value)}"
    else:
        raise ValueError(f"{rule.drop_reason}: {rule.op} is a group rule, not a predicate")
    return f"coalesce({cond}, FALSE)"


def _check_columns(run: Run, names: Sequence[str]) -> None:
    for n in names:
        if n not in run.columns:
            raise ConfigError(f"signal {n!r} is not in this run; known: {', '.join(run.columns)}")


def reasons_sql(rules: list[Rule], *, extra: Sequence[str] = ()) -> str:
    """A query of ``doc_id, reason`` (+ ``extra`` columns) with each document's first failing rule."""
    cols = ["doc_id", "bytes", *extra, *(r.signal for r in rules)]
    cols = list(dict.fromkeys(cols))
    sql = f"SELECT {', '.join(map(_ident, cols))}, NULL::VARCHAR AS reason FROM signals"
    pending: list[Rule] = []

    def flush(sql: str) -> str:
        if not pending:
            return sql
        whens = " ".join(f"WHEN NOT {predicate(r)} THEN {_q(r.drop_reason)}" for r in pending)
        pending.clear()
        return f"SELECT * REPLACE (coalesce(reason, CASE {whens} END) AS reason) FROM ({sql})"

    for rule in rules:
        if rule.op != "first_in_group":
            pending.append(rule)
            continue
        sql = flush(sql)
        col = _ident(rule.signal)
        sql = (f"SELECT * REPLACE (CASE WHEN reason IS NOT NULL THEN reason "
               f"WHEN {col} IS NULL OR row_number() OVER (PARTITION BY {col}, reason IS NULL ORDER BY doc_id) > 1 "
               f"THEN {_q(rule.drop_reason)} END AS reason) FROM ({sql})")
    return flush(sql)


def drop_reasons(run: str | Path | Run, config: Config) -> pl.DataFrame:
    """doc_id -> reason (NULL = kept) for every document of the run under ``config``."""
    r = open_run(run)
    rules = ruleset(config, r.stats())
    _check_columns(r, [x.signal for x in rules])
    return r.cursor().sql(f"SELECT doc_id, reason FROM ({reasons_sql(rules)}) ORDER BY doc_id").pl()


# --- the funnel -----------------------------------------------------------------------------------


def funnel(run: str | Path | Run, config: Config, *, by: str | None = None) -> pl.DataFrame:
    """Documents and bytes in, dropped and out at each stage, in funnel order.

    Each document is counted at the first stage that rejects it; ``ingest`` counts records that
    could not be read (``rejects/``). With ``by`` ("lang" or "source") there is one funnel per value.
    Conservation: ``docs_in`` of ingest = kept + every ``docs_dropped``; bytes likewise.
    """
    if by is not None and by not in GROUP_BY:
        raise ConfigError(f"funnel by={by!r} is not allowed: must be one of {', '.join(GROUP_BY)} or None")
    r = open_run(run)
    rules = ruleset(config, r.stats())
    _check_columns(r, [x.signal for x in rules])
    key = _ident(by) if by else "NULL::VARCHAR"
    inner = reasons_sql(rules, extra=[by] if by else [])
    cur = r.cursor()
    dropped = cur.execute(
        f"SELECT {key} AS grp, coalesce(split_part(reason, '.', 1), '') AS stage, count(*) AS docs, "
        f"coalesce(sum(bytes), 0) AS bytes FROM ({inner}) GROUP BY ALL").fetchall()
    rej_key = "source" if by == "source" else "NULL::VARCHAR"
    rejected = cur.execute(f"SELECT {rej_key} AS grp, count(*), coalesce(sum(raw_bytes), 0) FROM rejects GROUP BY ALL").fetchall()

    table: dict[Any, dict[str, list[int]]] = {}
    for grp, stage, docs, nbytes in dropped:
        table.setdefault(grp, {}).setdefault(stage, [0, 0])
        table[grp][stage][0] += docs
        table[grp][stage][1] += int(nbytes)
    for grp, docs, nbytes in rejected:
        table.setdefault(grp, {}).setdefault(INGEST, [0, 0])
        table[grp][INGEST][0] += docs
        table[grp][INGEST][1] += int(nbytes)

    rows = []
    for grp in sorted(table, key=lambda g: (g is None, str(g))):
        counts = table[grp]
        docs_in = sum(v[0] for v in counts.values())
        bytes_in = sum(v[1] for v in counts.values())
        for stage in FUNNEL_STAGES:
            d, b = counts.get(stage, (0, 0))
            rows.append({"group": grp, "stage": stage, "docs_in": docs_in, "docs_dropped": d, "docs_out": docs_in - d,
                         "bytes_in": bytes_in, "bytes_dropped": b, "bytes_out": bytes_in - b,
                         "docs_retention": (docs_in - d) / docs_in if docs_in else 1.0,
                         "bytes_retention": (bytes_in - b) / bytes_in if bytes_in else 1.0})
            docs_in, bytes_in = docs_in - d, bytes_in - b
    df = pl.DataFrame(rows, schema={"group": pl.Utf8, "stage": pl.Utf8, "docs_in": pl.Int64, "docs_dropped": pl.Int64,
                                    "docs_out": pl.Int64, "bytes_in": pl.Int64, "bytes_dropped": pl.Int64,
                                    "bytes_out": pl.Int64, "docs_retention": pl.Float64, "bytes_retention": pl.Float64})
    return df.rename({"group": by}) if by else df.drop("group")


def reason_counts(run: str | Path | Run, config: Config) -> pl.DataFrame:
    """Documents and bytes dropped per ``stage.reason``, in funnel order of stages."""
    r = open_run(run)
    rules = ruleset(config, r.stats())
    df = r.cursor().execute(
        f"SELECT reason, count(*) AS docs, sum(bytes) AS bytes FROM ({reasons_sql(rules)}) "
        "WHERE reason IS NOT NULL GROUP BY reason").pl()
    order = {x.drop_reason: i for i, x in enumerate(rules)}
    return df.with_columns(pl.col("reason").replace_strict(order, default=len(order)).alias("_o")).sort("_o").drop("_o")


def dropped_samples(run: str | Path | Run, config: Config, stage: str, n: int = 10, *, seed: int = 0) -> pl.DataFrame:
    """A deterministic sample of ``n`` documents that ``stage`` drops: reason, the stage's signals, text."""
    if stage not in STAGE_NAMES:
        raise ConfigError(f"unknown stage {stage!r}; known: {', '.join(STAGE_NAMES)}")
    r = open_run(run)
    rules = ruleset(config, r.stats())
    module = next(m for m in STAGES if m.NAME == stage)
    sig_cols = [c for c in module.SIGNALS if c in r.columns]
    cols = ", ".join(f"s.{_ident(c)}" for c in sig_cols)
    sql = (f"WITH f AS ({reasons_sql(rules)}) "
           f"SELECT f.doc_id, f.reason, s.source, {cols}{', ' if cols else ''}d.text "
           f"FROM f JOIN signals s USING (doc_id) JOIN docs d USING (doc_id) "
           f"WHERE f.reason LIKE {_q(stage + '.%')} ORDER BY hash(f.doc_id + {int(seed)}) LIMIT {int(n)}")
    return r.cursor().sql(sql).pl()


def signal_histogram(run: str | Path | Run, signal: str, bins: int = 50, *,
                     lo: float | None = None, hi: float | None = None) -> pl.DataFrame:
    """Equal-width histogram of a numeric signal: bin_lo, bin_hi, docs (missing values left out)."""
    r = open_run(run)
    _check_columns(r, [signal])
    if bins < 1:
        raise ConfigError(f"bins={bins} is not allowed: must be >= 1")
    cur = r.cursor()
    col = _ident(signal)
    mn, mx = cur.execute(f"SELECT min({col})::DOUBLE, max({col})::DOUBLE FROM signals").fetchone()
    lo = mn if lo is None else lo
    hi = mx if hi is None else hi
    if lo is None:
        return pl.DataFrame(schema={"bin_lo": pl.Float64, "bin_hi": pl.Float64, "docs": pl.Int64})
    width = (hi - lo) / bins if hi > lo else 1.0
    counts = dict(cur.execute(
        f"SELECT least(greatest(floor(({col} - {lo!r}) / {width!r}), 0), {bins - 1})::BIGINT AS b, count(*) "
        f"FROM signals WHERE {col} IS NOT NULL AND {col} BETWEEN {lo!r} AND {hi!r} GROUP BY b").fetchall())
    return pl.DataFrame({"bin_lo": [lo + i * width for i in range(bins)],
                         "bin_hi": [lo + (i + 1) * width for i in range(bins)],
                         "docs": [counts.get(i, 0) for i in range(bins)]})


def signal_rows(run: str | Path | Run, columns: Sequence[str] | None = None) -> pl.DataFrame:
    """The signals table (all or some columns), ordered by doc_id."""
    r = open_run(run)
    cols = list(columns) if columns else list(r.columns)
    _check_columns(r, cols)
    return r.cursor().sql(f"SELECT {', '.join(map(_ident, cols))} FROM signals ORDER BY doc_id").pl()


def reject_rows(run: str | Path | Run) -> pl.DataFrame:
    return open_run(run).cursor().sql("SELECT * FROM rejects ORDER BY partition, locator").pl()
