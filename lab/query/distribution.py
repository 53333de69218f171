"""distribution: where a threshold cuts a signal's distribution, and what a change of thresholds costs.

``histogram(run, config, signal)`` bins one numeric signal over the documents that *reach* the stage
whose rule thresholds it (alive after every earlier stage under ``config``), split into those the
stage passes and those it drops, in documents, bytes and tokens; one SQL query (the bin found by a
binary search of nested ``CASE``s, one ``GROUP BY``). A stage with several rules: a document the stage drops by another of its
rules counts as ``dropped`` (it does not reach the next stage whatever this cutoff is), so the
stacked bars add up to the funnel's ``docs_in`` and the dropped ones to its ``docs_dropped``;
``dropped_other_docs`` says how many of the dropped ones pass every rule on this signal (those this
cutoff cannot bring back). Documents whose signal is missing (they fail its rules) are the last row,
with null edges.

Bin edges (``bin_edges``) belong to the signal in the run, not to any threshold, so a cutoff moves
over a fixed axis:

- **log** (default for a non-negative signal whose 99.5th percentile is at least ``LOG_SPAN`` times
  its 0.5th, counting from 1: word and byte counts): edges equally spaced in ``log(1 + x)`` from the
  minimum to the maximum;
- **linear** otherwise: equal bins between the 0.5th and 99.5th percentiles, with one outer bin on
  each side that catches the tail beyond them when that tail is longer than ``TAIL_SHARE`` of the
  range between them (else the range extends to the minimum / maximum);
- ``lo`` / ``hi`` replace the percentiles (a zoom); values beyond them fall in the outer bins;
- integer signals get integer edges: a bin ``[a, b)`` holds the integers ``a .. b-1`` (so fewer
  bins than asked when the values are few), the last edge is the maximum + 1.

Bins are ``[edge_i, edge_i+1)``; the first bin also takes anything below its edge, the last anything
at or above its lower edge (the maximum of a float signal lies on the last edge). Min, max and the
percentiles are exact (``quantile_disc``): one more query, once per run and signal (remembered).

``change(run, before, after)`` counts what moving from ``before`` to ``after`` newly drops and newly
keeps, exactly, evaluating only the documents whose outcome can differ (``lab.query.changes``).

Cost at n documents: a histogram is one scan of a few columns of the n rows (plus, for a stage after
a dedup stage, the rule evaluation with its window and the remembered near-dedup drops); a change is
narrow scans for the documents that can change, then both configs' rules over those documents only.
"""

from __future__ import annotations

import math
import threading
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from lab.config import Config
from lab.errors import ConfigError
from lab.io.schema import numeric_signals, signals_schema
from lab.query.changes import changes
from lab.query.codes import of as codes_of
from lab.query.compile import codes_sql, failure_in, literal, moved_between, rules_of
from lab.query.funnels import INCREMENTAL_SHARE, shift_counts
from lab.query.memo import Memo
from lab.query.neardup import with_near
from lab.query.run import Run, open_run
from lab.query.sql import ident, to_arrow
from lab.select.rules import LANG, Rule
from lab.stages import STAGE_NAMES

__all__ = ["bin_edges", "change", "histogram", "histograms"]

TAIL_Q = 0.005  # the percentiles the linear axis spans: 0.5th and 99.5th
TAIL_SHARE = 0.25  # a tail beyond them longer than this share of their range gets an outer bin
LOG_SPAN = 100.0  # (p99.5 + 1) / (p0.5 + 1) from which a non-negative signal gets a log axis
HIST_BINS_MAX = 1000
_THRESHOLD_OPS = (">=", "<=", "==", "!=")  # rules that threshold a numeric signal

_stats = Memo(512)  # (id(run), signal) -> (run, (min, max, p_lo, p_hi))


def _numeric(r: Run) -> list[str]:
    return [c for c in numeric_signals() if c in r.columns]


def _check_signal(r: Run, signal: str) -> None:
    if signal not in _numeric(r):
        raise ConfigError(f"signal {signal!r} is not a numeric signal of this run; histograms take one of "
                          f"{', '.join(_numeric(r))}")


def _is_integer(signal: str) -> bool:
    return pa.types.is_integer(signals_schema().field(signal).type)


def _signal_stats(r: Run, signal: str) -> tuple[float | None, float | None, float | None, float | None]:
    """(min, max, 0.5th, 99.5th percentile) of a signal over the run (exact; remembered per run)."""
    key = (id(r), signal)
    hit = _stats.get(key)
    if hit is not None and hit[0] is r:
        return hit[1]
    col = ident(signal)
    row = r.cursor().execute(f"SELECT min({col})::DOUBLE, max({col})::DOUBLE, quantile_disc({col}, {TAIL_Q})::DOUBLE, "
                             f"quantile_disc({col}, {1 - TAIL_Q})::DOUBLE FROM signals").fetchall()[0]
    _stats.put(key, (r, tuple(row)))
    return tuple(row)


def _spaced(a: float, b: float, n: int, log_x: bool) -> list[float]:
    if log_x:
        la, lb = math.log1p(a), math.log1p(b)
        out = [math.expm1(la + (lb - la) * i / n) for i in range(n + 1)]
    else:
        out = [a + (b - a) * i / n for i in range(n + 1)]
    out[0], out[-1] = a, b
    return out


def edges_for(mn: float | None, mx: float | None, p_lo: float | None, p_hi: float | None, *, integer: bool,
              bins: int = 40, log_x: bool | None = None, lo: float | None = None, hi: float | None = None) -> list[float]:
    """Bin edges from a signal's min, max and 0.5th / 99.5th percentiles (see the module docstring).

    >>> edges_for(0, 1, 0, 1, integer=True, bins=40)
    [0, 1, 2]
    >>> edges_for(0.0, 1.0, 0.0, 1.0, integer=False, bins=4)
    [0.0, 0.25, 0.5, 0.75, 1.0]
    >>> edges_for(0.0, 100.0, 3.0, 9.0, integer=False, bins=6)
    [0.0, 3.0, 4.5, 6.0, 7.5, 9.0, 100.0]
    >>> edges_for(0, 10_000, 10, 5000, integer=True, bins=4)
    [0, 10, 100, 1000, 10001]
    """
    if not isinstance(bins, int) or isinstance(bins, bool) or not 1 <= bins <= HIST_BINS_MAX:
        raise ConfigError(f"bins={bins!r} is not allowed: must be an integer in 1..{HIST_BINS_MAX}")
    if lo is not None and hi is not None and not lo < hi:
        raise ConfigError(f"lo={lo!r}, hi={hi!r}: lo must be below hi")
    if mn is None:
        return []
    if log_x is None:
        log_x = lo is None and hi is None and mn >= 0 and p_hi + 1 >= LOG_SPAN * (p_lo + 1)
    if lo is not None or hi is not None:
        a, b = (mn if lo is None else lo), (mx if hi is None else hi)
        if not a < b:  # one bound given beyond the data
            a, b = min(a, b), max(a, b) + (1 if integer else 0)
    elif log_x:
        a, b = mn, mx
    else:
        a, b = p_lo, p_hi
        if a - mn <= TAIL_SHARE * (b - a) or b <= a:
            a = mn
        if mx - b <= TAIL_SHARE * (b - a) or b <= a:
            b = mx
    if log_x and a < 0:
        raise ConfigError(f"log_x=True needs a non-negative range; this one starts at {a!r}: use log_x=False or lo >= 0")
    outer = (mn < a) + (mx > b)
    n = max(1, bins - outer)
    if integer:
        a, top = math.floor(a), math.floor(b) + 1  # the inner bins hold the integers a .. floor(b)
        if log_x:
            inner = sorted({a, top, *(min(max(math.ceil(e), a), top) for e in _spaced(a, top, n, True))})
        else:
            w = max(1, math.ceil((top - a) / n))
            inner = list(range(a, top, w)) + [a + w * math.ceil((top - a) / w)]
        edges = inner
        if mn < edges[0]:
            edges = [math.floor(mn), *edges]
        if edges[-1] <= mx:
            edges.append(math.floor(mx) + 1)
        return [int(e) for e in edges]
    if a == b:  # a constant signal: one bin of width 1
        return [float(a), float(a) + 1.0]
    edges = _spaced(float(a), float(b), n, log_x)
    if mn < edges[0]:
        edges = [float(mn), *edges]
    if edges[-1] < mx:
        edges.append(float(mx))
    return edges


def bin_edges(run: str | Path | Run, signal: str, *, bins: int = 40, log_x: bool | None = None,
              lo: float | None = None, hi: float | None = None) -> list[float]:
    """The histogram bin edges of a numeric signal in this run (independent of any threshold)."""
    r = open_run(run)
    _check_signal(r, signal)
    return edges_for(*_signal_stats(r, signal), integer=_is_integer(signal), bins=bins, log_x=log_x, lo=lo, hi=hi)


def _bin_sql(col: str, edges: list[float]) -> str:
    """SQL of the bin index of ``col`` (NULL when missing): a binary search as nested ``CASE``s,
    about log2(bins) comparisons a row (a flat ``CASE`` over 40 edges measured 3x slower).

    >>> _bin_sql("x", [0, 1, 2, 3])
    'CASE WHEN x IS NULL THEN NULL WHEN x < 1 THEN 0 ELSE (CASE WHEN x < 2 THEN 1 ELSE 2 END) END'
    """
    def search(lo: int, hi: int) -> str:  # bins lo..hi; edges[i] is the lower edge of bin i
        if lo == hi:
            return str(lo)
        mid = (lo + hi + 1) // 2
        return f"(CASE WHEN {col} < {edges[mid]!r} THEN {search(lo, mid - 1)} ELSE {search(mid, hi)} END)"

    inner = search(0, max(len(edges) - 2, 0))
    if inner.startswith("(CASE WHEN"):
        inner = inner[len("(CASE "):-len(" END)")]
        return f"CASE WHEN {col} IS NULL THEN NULL {inner} END"
    return f"CASE WHEN {col} IS NULL THEN NULL ELSE {inner} END"


def _thresholding_stage(rules: list[Rule], signal: str, stage: str | None) -> str | None:
    stages = list(dict.fromkeys(x.stage for x in rules if x.signal == signal and x.op in _THRESHOLD_OPS))
    if stage is None:
        return stages[0] if stages else None
    if stage not in STAGE_NAMES:
        raise ConfigError(f"unknown stage {stage!r}; known: {', '.join(STAGE_NAMES)}")
    if stage not in stages:
        raise ConfigError(f"stage={stage!r} has no enabled rule on {signal!r}; stages thresholding it: "
                          f"{', '.join(stages) or 'none (leave stage=None: all documents, all passed)'}")
    return stage


def histogram(run: str | Path | Run, config: Config, signal: str, *, bins: int = 40, lo: float | None = None,
              hi: float | None = None, log_x: bool | None = None, stage: str | None = None) -> pl.DataFrame:
    """A histogram of ``signal`` over the documents reaching the stage that thresholds it, split into
    passed and dropped by that stage, in documents, bytes and tokens.

    Columns: bin_lo, bin_hi (``bin_edges``), passed_docs, dropped_docs, passed_bytes, dropped_bytes,
    passed_tokens, dropped_tokens (null without token counts), dropped_other_docs (of dropped_docs:
    those passing every rule on this signal, dropped by another rule of the stage). One row per bin,
    then one row with null edges: the documents whose signal is missing. ``stage``: which stage, when
    several threshold the signal (default: the first in funnel order). A signal no enabled rule
    thresholds: every document, all passed.
    """
    r = open_run(run)
    _check_signal(r, signal)
    rules = rules_of(r, config)
    stage = _thresholding_stage(rules, signal, stage)
    edges = bin_edges(r, signal, bins=bins, log_x=log_x, lo=lo, hi=hi)
    default = lo is None and hi is None and log_x is None
    return _histograms(r, rules, stage, {signal: edges}, binned=default)[signal]


def histograms(run: str | Path | Run, config: Config, signals: list[str], *, bins: int = 40,
               lang: str | None = None) -> dict[str, pl.DataFrame]:
    """``histogram`` of several signals (each at its first thresholding stage, on its default axis):
    one query per stage, whose rules are evaluated once for all of that stage's signals (the sidebar's
    open card asks for all of its histograms at once). ``lang``: over the documents of that language
    only (the ``lang`` signal; the bins stay the run's, so languages compare on one axis)."""
    r = open_run(run)
    rules = rules_of(r, config)
    by_stage: dict[str | None, dict[str, list[float]]] = {}
    for signal in dict.fromkeys(signals):
        _check_signal(r, signal)
        by_stage.setdefault(_thresholding_stage(rules, signal, None), {})[signal] = bin_edges(r, signal, bins=bins)
    out: dict[str, pl.DataFrame] = {}
    for stage, edges in by_stage.items():
        out.update(_histograms(r, rules, stage, edges, binned=True, lang=lang))
    return {s: out[s] for s in dict.fromkeys(signals)}


_HIST_SCHEMA = {"bin_lo": pl.Float64, "bin_hi": pl.Float64, "passed_docs": pl.Int64, "dropped_docs": pl.Int64,
                "passed_bytes": pl.Int64, "dropped_bytes": pl.Int64, "passed_tokens": pl.Int64,
                "dropped_tokens": pl.Int64, "dropped_other_docs": pl.Int64}


_bins_lock = threading.Lock()


def _bin_column(r: Run, signal: str, edges: list[float]) -> str | None:
    """In memory: a column holding each row's bin of ``signal`` on these edges (the signal's default
    axis), added to the signals table on first use (one pass, ~60 ms at 1M rows); a histogram then
    groups by it instead of searching the edges on every row again (~40 ms at 1M rows a signal).
    None when the run is read from Parquet (a view: nothing to add to)."""
    if r.memo is None:
        return None
    key = (signal, tuple(edges))
    with _bins_lock:
        name = r.binned.get(key)
        if name is None:
            name = f"_bin{len(r.binned)}_{signal}"
            cur = r.cursor()
            cur.execute(f"ALTER TABLE signals ADD COLUMN {ident(name)} USMALLINT")
            cur.execute(f"UPDATE signals SET {ident(name)} = {_bin_sql(ident(signal), edges)}")
            r.binned[key] = name
    return name




def _histograms(r: Run, rules: list[Rule], stage: str | None, edges_of: dict[str, list[float]], *,
                binned: bool = False, lang: str | None = None) -> dict[str, pl.DataFrame]:
    """The histograms of the signals ``edges_of`` names (their bin edges given), all thresholded by
    ``stage`` (None: no enabled rule; all passed), in one query: the documents reaching the stage and
    whether it drops them are computed once, then each signal is binned and counted. ``binned``: the
    edges are the signals' default axes (in memory, each row's bin is then stored once and reused).

    In memory, when every rule up to the stage is per-document, the answer to a config that differs
    from a remembered one only in thresholds is incremental and exact, as the funnel's is: outside
    the rows whose signal lies between an old and a new threshold no row's outcome differs, so the
    new counts are the old ones minus those rows' counts under the old rules plus under the new.
    ``lang``: only that language's documents (counted whole, not incrementally)."""
    tok = "n_tokens" in r.columns
    of_lang = f"{ident(LANG)} = {literal(lang)}" if lang is not None else "TRUE"
    cur = r.cursor()
    signals = list(edges_of)
    bin_cols = {s: _bin_column(r, s, edges_of[s]) if binned else None for s in signals}
    bins = {s: ident(bin_cols[s]) if bin_cols[s] else _bin_sql(ident(s), edges_of[s]) for s in signals}
    sig_cols = ", ".join(map(ident, [*signals, *(c for c in bin_cols.values() if c)]))
    c = codes_of(r) if binned else None
    if c is not None:  # in memory: counted from each document's code (lab.query.codes)
        mine = [[x for x in rules if x.stage == stage and x.signal == s and x.op in _THRESHOLD_OPS] for s in signals]
        raw = c.histogram_counts(rules, stage, signals, [bin_cols[s] for s in signals], mine, lang)
        if raw is not None:
            return _frames(raw, signals, edges_of, tok)
    if stage is None:
        src = f"SELECT {sig_cols}, bytes{', n_tokens' if tok else ''}, FALSE AS _dropped" + "".join(
            f", FALSE AS _mine{i}" for i in range(len(signals))) + f" FROM signals WHERE {of_lang}"
        return _frames(_aggregate(cur, src, signals, bins, tok), signals, edges_of, tok)
    codes = [i for i, x in enumerate(rules) if x.stage == stage]
    first, last = min(codes), max(codes)
    if not all(x.per_document for x in rules[:last + 1]):
        mines = "".join(f", ({_fails_mine(r, rules, first, last, s)}) AS _mine{i}" for i, s in enumerate(signals))
        extra = [*signals, *(c for c in bin_cols.values() if c), *(["n_tokens"] if tok else []),
                 *([LANG] if lang is not None and LANG not in signals else [])]
        coded = with_near(r, cur, rules, codes_sql(rules, extra=extra, run=r))
        src = (f"SELECT {sig_cols}, bytes{', n_tokens' if tok else ''}, code BETWEEN {first} AND {last} AS _dropped"
               f"{mines} FROM ({coded}) WHERE (code IS NULL OR code >= {first}) AND {of_lang}")
        return _frames(_aggregate(cur, src, signals, bins, tok), signals, edges_of, tok)
    # per-document rules up to the stage: reaching it and being dropped are conditions on one row
    cols = ", ".join(map(ident, dict.fromkeys([*signals, *(c for c in bin_cols.values() if c), "bytes",
                                                *(["n_tokens"] if tok else [])])))

    def src_of(prefix: list[Rule], table: str = "signals") -> str:
        before = " OR ".join(f for f in (failure_in(x, r) for x in prefix[:first]) if f is not None) or "FALSE"
        here = " OR ".join(f for f in (failure_in(x, r) for x in prefix[first:]) if f is not None) or "FALSE"
        mines = "".join(f", ({_fails_mine(r, prefix, first, last, s)}) AS _mine{i}" for i, s in enumerate(signals))
        return f"SELECT {cols}, ({here}) AS _dropped{mines} FROM {table} WHERE NOT ({before}) AND {of_lang}"

    prefix = rules[:last + 1]
    key = (stage, tuple(signals), tuple(bins.values()))
    raw = None
    if r.memo is not None and lang is None:
        with r.lock:
            known = [(old, counts) for (k, old), counts in r.hist_memo.recent() if k == key]
        for old, counts in known[:4]:
            if len(old) != len(prefix):
                continue
            moved = moved_between(old, prefix)
            if moved is None:
                continue
            n, m = cur.execute(f"SELECT count(*), count(*) FILTER ({moved}) FROM signals").fetchall()[0]
            if m > INCREMENTAL_SHARE * n:
                continue
            # the moved rows read once (a scattered read costs per column, not per row), counted twice
            need = [c for c in dict.fromkeys([*signals, *(c for c in bin_cols.values() if c), "bytes",
                                              *(["n_tokens"] if tok else []), *(c for x in (*old, *prefix) for c in x.columns)])
                    if c in r.columns or c in bin_cols.values()]
            cur.register("_hist_moved", to_arrow(cur.sql(f"SELECT {', '.join(map(ident, need))} FROM signals WHERE {moved}")))
            raw = shift_counts(counts, _aggregate(cur, src_of(list(old), "_hist_moved"), signals, bins, tok),
                          _aggregate(cur, src_of(prefix, "_hist_moved"), signals, bins, tok))
            cur.unregister("_hist_moved")
            break
    if raw is None:
        raw = _aggregate(cur, src_of(prefix), signals, bins, tok)
    if r.memo is not None and lang is None:
        r.hist_memo.put((key, tuple(prefix)), raw)
    return _frames(raw, signals, edges_of, tok)


def _fails_mine(r: Run, rules: list[Rule], first: int, last: int, signal: str) -> str:
    """SQL: the row fails one of the stage's (``rules[first:last+1]``) thresholds on ``signal``."""
    mine = [x for x in rules[first:last + 1] if x.signal == signal and x.op in _THRESHOLD_OPS]
    return " OR ".join(f for f in (failure_in(x, r) for x in mine) if f is not None) or "FALSE"


def _aggregate(cur, src: str, signals: list[str], bins: dict[str, str], tok: bool) -> dict:
    """(signal index, bin, dropped, dropped by another rule) -> [docs, bytes, tokens] over ``src``'s rows:
    per signal one plain GROUP BY (measured cheaper than one FILTER aggregate per column), the
    stage's evaluation shared through one materialized scan."""
    binned = ", ".join(f"{bins[s]} AS _b{i}, _dropped AND NOT _mine{i} AS _o{i}" for i, s in enumerate(signals))
    parts = [f"SELECT {i} AS s, _b{i} AS b, _dropped AS d, _o{i} AS o, count(*), sum(bytes), "
             f"{'sum(n_tokens)' if tok else 'NULL'} FROM _h GROUP BY ALL" for i in range(len(signals))]
    sql = (f"WITH _h AS MATERIALIZED (SELECT bytes{', n_tokens' if tok else ''}, _dropped, {binned} FROM ({src})) "
           + " UNION ALL ".join(parts))
    return {(i, b, bool(d), bool(o)): [docs, int(nbytes or 0), int(ntok or 0)]
            for i, b, d, o, docs, nbytes, ntok in cur.execute(sql).fetchall()}


def _frames(raw: dict, signals: list[str], edges_of: dict[str, list[float]], tok: bool) -> dict[str, pl.DataFrame]:
    acc = {i: {b: [0] * 7 for b in [*range(max(len(edges_of[s]) - 1, 0)), None]} for i, s in enumerate(signals)}
    for (i, b, d, o), (docs, nbytes, ntok) in raw.items():
        v, k = acc[i][b], 1 if d else 0  # passed docs, dropped docs, bytes x2, tokens x2, other
        v[k] += docs
        v[2 + k] += nbytes
        v[4 + k] += ntok
        v[6] += docs if o else 0
    out = {}
    for i, s in enumerate(signals):
        edges, rows = edges_of[s], []
        for b, v in acc[i].items():
            lo_e, hi_e = (float(edges[b]), float(edges[b + 1])) if b is not None else (None, None)
            rows.append((lo_e, hi_e, *v[:4], *(v[4:6] if tok else (None, None)), v[6]))
        out[s] = pl.DataFrame(rows, schema=_HIST_SCHEMA, orient="row")
    return out


def change(run: str | Path | Run, before: Config, after: Config) -> dict[str, dict[str, int | None]]:
    """What moving from ``before`` to ``after`` newly drops (kept before, dropped after) and newly keeps:
    ``{"dropped": {"docs", "bytes", "tokens"}, "kept": {...}}`` (tokens None without token counts).

    Exact; only the documents whose outcome can differ are evaluated under both configs (those between
    an old and a new threshold or failing a rule switched on or off, their exact-duplicate groups, those
    whose near-dedup outcome differs), or all of them when that is more than ``INCREMENTAL_SHARE`` of
    the documents. Remembered for the latest pairs (``browse.changes``), which the newly_* views read.
    """
    for name, c in (("before", before), ("after", after)):
        if not isinstance(c, Config):
            raise ConfigError(f"{name} must be a lab.config.Config, not {type(c).__name__}")
    r = open_run(run)
    rb, ra = rules_of(r, before), rules_of(r, after)
    tok = "n_tokens" in r.columns
    if rb == ra:
        z = {"docs": 0, "bytes": 0, "tokens": 0 if tok else None}
        return {"dropped": dict(z), "kept": dict(z)}
    t = changes(r, rb, ra)  # remembered: the newly dropped / kept pages of this pair read it again
    before_kept, after_kept = pc.is_null(t.column("before")), pc.is_null(t.column("after"))
    out = {}
    for key, mask in (("dropped", pc.and_(before_kept, pc.invert(after_kept))),
                      ("kept", pc.and_(pc.invert(before_kept), after_kept))):
        part = t.filter(mask)
        out[key] = {"docs": part.num_rows, "bytes": int(pc.sum(part.column("bytes")).as_py() or 0),
                    "tokens": int(pc.sum(part.column("n_tokens")).as_py() or 0) if tok else None}
    return out
