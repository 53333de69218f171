"""funnel: what a config does to a run: the funnel, drop reasons, samples of drops, signal tables.

The funnel counts each document at the first rule it fails (the ``code`` of ``codes_sql``), with the
near-dedup rule's drops moved to it (``lab.query.neardup``). In memory (``open_run(...,
in_memory=True)``) the counts come from each document's code kept as an array (``lab.query.codes``),
or from ``code_counts``, which remembers recent funnels and answers a threshold move incrementally:
only the documents whose outcome can change are evaluated again, under the old and the new rules.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import polars as pl

from lab.config import Config
from lab.errors import ConfigError
from lab.io.schema import numeric_signals
from lab.query.codes import of as codes_of
from lab.query.codes import shift_counts
from lab.query.compile import check_columns, codes_sql, failure_in, moved_between, reason_of, rules_of
from lab.query.neardup import apply_near, with_near, without_near
from lab.query.run import (
    FUNNEL_STAGES,
    GROUP_BY,
    INGEST,
    SAMPLE_RANK,
    SAMPLE_SEED,
    SAMPLE_WINDOWS,
    Run,
    open_run,
    sample_order,
)
from lab.query.sql import ident, quote, to_arrow
from lab.select.rules import Rule
from lab.stages import STAGE_NAMES, STAGES

INCREMENTAL_SHARE = 0.25  # recompute from scratch when more of the documents than this may change


def funnel(run: str | Path | Run, config: Config, *, by: str | None = None, refresh: bool = False,
           raw: bool = False) -> pl.DataFrame:
    """Documents, bytes and tokens in, dropped and out at each stage, in funnel order.

    Each document is counted at the first stage that rejects it; ``ingest`` counts records that
    could not be read (``rejects/``). With ``by`` ("lang" or "source") there is one funnel per value.
    ``bytes`` are the UTF-8 bytes of the documents' text (extracted from HTML; an unreadable record has
    none); with ``raw``, ``raw_bytes_in``/``_dropped``/``_out`` count the records' bytes as read (JSON keys,
    markup, WARC headers; unreadable records included). Conservation: ``docs_in`` of ingest = kept +
    every ``docs_dropped``; bytes, raw bytes and tokens likewise. Token columns (``tokens_in`` ...)
    appear once the run has token counts (``tokenized/``).
    """
    if by is not None and by not in GROUP_BY:
        raise ConfigError(f"funnel by={by!r} is not allowed: must be one of {', '.join(GROUP_BY)} or None")
    r = open_run(run, refresh=refresh)
    rules = rules_of(r, config)
    cur = r.cursor()
    stage_of = [x.stage for x in rules]
    counts = counts_in_memory(r, rules, by)
    if counts is None:
        counts = apply_near(r, rules, by, code_counts(r, without_near(rules), by))
    rej_key = "source" if by == "source" else "NULL::VARCHAR"
    rejected = cur.execute(f"SELECT {rej_key} AS grp, count(*), coalesce(sum(raw_bytes), 0) FROM rejects GROUP BY ALL").fetchall()

    table: dict[Any, dict[str, list[int]]] = {}
    for (grp, code), v in counts.items():
        acc = table.setdefault(grp, {}).setdefault("" if code is None else stage_of[code], [0, 0, 0])
        for i in range(3):
            acc[i] += v[i]
    for grp, docs, nbytes in rejected:  # unreadable records have no text and no tokens
        acc = table.setdefault(grp, {}).setdefault(INGEST, [0, 0, 0])
        acc[0] += docs

    rows = []
    for grp in sorted(table, key=lambda g: (g is None, str(g))):
        counts = table[grp]
        n_in = [sum(v[i] for v in counts.values()) for i in range(3)]
        for stage in FUNNEL_STAGES:
            drop = counts.get(stage, (0, 0, 0))
            row = {"group": grp, "stage": stage}
            for i, unit in enumerate(("docs", "bytes", "tokens")):
                row.update({f"{unit}_in": n_in[i], f"{unit}_dropped": drop[i], f"{unit}_out": n_in[i] - drop[i]})
            for unit in ("docs", "bytes", "tokens"):
                row[f"{unit}_retention"] = row[f"{unit}_out"] / row[f"{unit}_in"] if row[f"{unit}_in"] else 1.0
            rows.append(row)
            n_in = [n_in[i] - drop[i] for i in range(3)]
    schema = {"group": pl.Utf8, "stage": pl.Utf8}
    for unit in ("docs", "bytes", "tokens"):
        schema.update({f"{unit}_in": pl.Int64, f"{unit}_dropped": pl.Int64, f"{unit}_out": pl.Int64})
    schema.update({f"{unit}_retention": pl.Float64 for unit in ("docs", "bytes", "tokens")})
    df = pl.DataFrame(rows, schema=schema)
    if raw:
        df = _with_raw_bytes(r, rules, by, df, {grp: int(n) for grp, _, n in rejected})
    if "n_tokens" not in r.columns:  # no token counts yet: no token columns
        df = df.drop("tokens_in", "tokens_dropped", "tokens_out", "tokens_retention")
    elif r.config is not None and r.config.mode == "batch":
        df = _untokenized(r, df)
    return df.rename({"group": by}) if by else df.drop("group")


def _with_raw_bytes(r: Run, rules: list[Rule], by: str | None, df: pl.DataFrame, rejected: dict) -> pl.DataFrame:
    """The funnel with the records' raw bytes in, dropped and out at each stage (one more scan)."""
    if "raw_bytes" not in r.columns:  # a run made before raw bytes had their own column
        return df
    cur = r.cursor()
    key = ident(by) if by else "NULL::VARCHAR"
    sql = with_near(r, cur, rules, codes_sql(rules, extra=["raw_bytes", *([by] if by else [])], run=r))
    dropped: dict[tuple, int] = {}
    stage_of = [x.stage for x in rules]
    for grp, code, n in cur.execute(f"SELECT {key}, code, coalesce(sum(raw_bytes), 0) FROM ({sql}) GROUP BY ALL").fetchall():
        k = (grp, "" if code is None else stage_of[code])
        dropped[k] = dropped.get(k, 0) + int(n)
    for grp, n in rejected.items():
        dropped[(grp, INGEST)] = dropped.get((grp, INGEST), 0) + n
    groups = df["group"].to_list()
    total = {g: sum(n for (h, _), n in dropped.items() if h == g) for g in set(groups)}
    ins, drops, outs, seen = [], [], [], {}
    for g, stage in zip(groups, df["stage"].to_list()):
        n_in = seen.get(g, total.get(g, 0))
        d = dropped.get((g, stage), 0)
        ins.append(n_in)
        drops.append(d)
        outs.append(n_in - d)
        seen[g] = n_in - d
    at = df.columns.index("bytes_retention") if "bytes_retention" in df.columns else len(df.columns)
    raw = pl.DataFrame({"raw_bytes_in": ins, "raw_bytes_dropped": drops, "raw_bytes_out": outs},
                       schema={c: pl.Int64 for c in ("raw_bytes_in", "raw_bytes_dropped", "raw_bytes_out")})
    return pl.concat([df.select(df.columns[:at]), raw, df.select(df.columns[at:])], how="horizontal")


def _untokenized(r: Run, df: pl.DataFrame) -> pl.DataFrame:
    """A batch run tokenizes only the documents no per-document rule dropped while annotating: the token
    counts of the stages that dropped some (and of every stage up to the last of them) are unknown: null."""
    stages = {s for (s,) in r.cursor().execute(
        "SELECT DISTINCT split_part(drop_reason, '.', 1) FROM signals WHERE drop_reason IS NOT NULL").fetchall()}
    if not stages:
        return df
    last = max(FUNNEL_STAGES.index(s) for s in stages if s in FUNNEL_STAGES)
    before = pl.col("stage").is_in(list(FUNNEL_STAGES[:last + 1]))
    null = pl.lit(None, dtype=pl.Int64)
    return df.with_columns(
        tokens_in=pl.when(before).then(null).otherwise(pl.col("tokens_in")),
        tokens_dropped=pl.when(pl.col("stage").is_in(sorted(stages))).then(null).otherwise(pl.col("tokens_dropped")),
        tokens_out=pl.when(pl.col("stage").is_in(list(FUNNEL_STAGES[:last]))).then(null).otherwise(pl.col("tokens_out")),
        tokens_retention=pl.when(before).then(pl.lit(None, dtype=pl.Float64)).otherwise(pl.col("tokens_retention")))


def counts_in_memory(r: Run, rules: list[Rule], by: str | None) -> dict | None:
    """In memory: the funnel's counts from each document's code (``lab.query.codes``); None: ask SQL."""
    c = codes_of(r)
    return None if c is None else c.funnel_counts(rules, by)


def sql_counts(cur, rules: list[Rule], by: str | None, run: Run, source: str = "signals") -> dict:
    """(group, code) -> [docs, bytes, tokens] (tokens 0 when the run has no token counts)."""
    key = ident(by) if by else "NULL::VARCHAR"
    tokens = "n_tokens" in run.columns
    extra = ([by] if by else []) + (["n_tokens"] if tokens else [])
    sql = codes_sql(rules, extra=extra, run=run, source=source)
    tok = "coalesce(sum(n_tokens), 0)" if tokens else "0"
    return {(grp, code): [docs, int(nbytes), int(ntok)] for grp, code, docs, nbytes, ntok in cur.execute(
        f"SELECT {key} AS grp, code, count(*), coalesce(sum(bytes), 0), {tok} FROM ({sql}) GROUP BY ALL").fetchall()}


def warm(r: Run) -> None:
    """In memory, an explore run's funnel under its own config computed once and remembered: the first
    slider move is then answered incrementally."""
    if r.memo is None or r.config is None or r.config.mode != "explore":
        return
    rules = rules_of(r, r.config)
    if counts_in_memory(r, rules, None) is None:
        code_counts(r, without_near(rules), None)


def code_counts(r: Run, rules: list[Rule], by: str | None) -> dict:
    """(group, code) -> [docs, bytes] of the documents' first failing rules (code None: kept).

    Recent answers are remembered (per opened run). A config that differs from a remembered one only in
    thresholds is answered incrementally and exactly: the documents whose signal lies between an
    old and a new threshold, together with every member of their groups (exact dedup), form a set
    R outside of which no document's code can change; the answer is the remembered counts minus
    R's counts under the old rules plus R's counts under the new ones.
    """
    cur = r.cursor()
    memo = r.sql_memo if r.memo is None else r.memo
    key = (by, tuple(rules))
    known = memo.get(key)
    if known is not None:
        return known
    candidates = [(k, v) for k, v in memo.recent() if k[0] == by and len(k[1]) == len(rules)]
    result = None
    for (_, old_rules), old_counts in candidates[:4]:
        moved = moved_between(old_rules, rules)
        if moved is None:
            continue
        total = sum(v[0] for v in old_counts.values())
        if cur.execute(f"SELECT count(*) FROM signals WHERE {moved}").fetchall()[0][0] > INCREMENTAL_SHARE * total:
            continue
        where = f"({moved})"
        for g in (x for x in rules if x.op == "first_in_group"):
            col = ident(g.signal)
            where += f" OR {col} IN (SELECT {col} FROM signals WHERE ({moved}) AND {col} IS NOT NULL)"
        # R is small: read it once, only the columns the two evaluations need, and register it with
        # this cursor (a temp table of it measured ~50 ms more at 1M rows than reading it to Arrow)
        need = [c for c in dict.fromkeys(["doc_id", "bytes", *([by] if by else []), "n_tokens",
                                          *(c for x in (*old_rules, *rules) for c in x.columns),
                                          *(f"_n_{x.signal}" for x in rules if x.op == "first_in_group")])
                if c in r.columns]
        cur.register("_moved", to_arrow(cur.sql(f"SELECT {', '.join(map(ident, need))} FROM signals WHERE {where}")))
        result = shift_counts(old_counts, sql_counts(cur, list(old_rules), by, r, "_moved"), sql_counts(cur, rules, by, r, "_moved"))
        cur.unregister("_moved")
        break
    if result is None:
        result = sql_counts(cur, rules, by, r)
    memo.put(key, result)
    return result


def prepare(run: str | Path | Run, signals: Sequence[str]) -> None:
    """Make ahead what the first threshold move of each of ``signals`` needs in an in-memory run (its
    sorted order), so that first move answers as fast as the next ones; nothing for a run read from
    Parquet. The dashboard calls it for a card's signals when the card opens."""
    codes = codes_of(open_run(run))
    if codes is not None:
        codes.prepare(list(signals))


def drop_reasons(run: str | Path | Run, config: Config) -> pl.DataFrame:
    """doc_id -> reason (NULL = kept) for every document of the run under ``config``."""
    r = open_run(run)
    rules = rules_of(r, config)
    cur = r.cursor()
    return cur.sql(f"SELECT doc_id, {reason_of(rules)} AS reason FROM ({with_near(r, cur, rules, codes_sql(rules, run=r))}) "
                   "ORDER BY doc_id").pl()


def reason_counts(run: str | Path | Run, config: Config) -> pl.DataFrame:
    """Documents and bytes dropped per ``stage.reason``, in funnel order of stages."""
    r = open_run(run)
    rules = rules_of(r, config)
    cur = r.cursor()
    rows = cur.execute(f"SELECT code, count(*), sum(bytes) FROM ({with_near(r, cur, rules, codes_sql(rules, run=r))}) "
                       "WHERE code IS NOT NULL GROUP BY code ORDER BY code").fetchall()
    return pl.DataFrame({"reason": [rules[c].drop_reason for c, _, _ in rows], "docs": [d for _, d, _ in rows],
                         "bytes": [int(b) for _, _, b in rows]}, schema={"reason": pl.Utf8, "docs": pl.Int64, "bytes": pl.Int64})


def reason_counts_by_partition(run: str | Path | Run, config: Config) -> pl.DataFrame:
    """Documents and bytes dropped per partition key and ``stage.reason`` (each document counted once)."""
    r = open_run(run)
    rules = rules_of(r, config)
    src = f"read_parquet({quote(r.layout.glob('signals'))}, filename = true)"
    cur = r.cursor()
    rows = cur.execute(
        f"SELECT regexp_extract(filename, 'part-([^/.]+)\\.parquet$', 1) AS part, code, count(*), sum(bytes) "
        f"FROM ({with_near(r, cur, rules, codes_sql(rules, extra=['filename'], source=src))}) WHERE code IS NOT NULL "
        "GROUP BY ALL ORDER BY part, code").fetchall()
    return pl.DataFrame({"partition": [p for p, _, _, _ in rows], "reason": [rules[c].drop_reason for _, c, _, _ in rows],
                         "docs": [d for _, _, d, _ in rows], "bytes": [int(b) for _, _, _, b in rows]},
                        schema={"partition": pl.Utf8, "reason": pl.Utf8, "docs": pl.Int64, "bytes": pl.Int64})


def reject_reasons(run: str | Path | Run, *, examples: int = 3) -> pl.DataFrame:
    """The run's rejected records by reason, most first: reason (without the location each record's
    reason starts with), records, raw_bytes, and the first ``examples`` locations (``source:locator``,
    in file order) to look at."""
    if not isinstance(examples, int) or isinstance(examples, bool) or examples < 0:
        raise ConfigError(f"examples={examples!r} is not allowed: must be an integer >= 0")
    r = open_run(run)
    why = "CASE WHEN starts_with(reason, source) AND strpos(reason, ': ') > 0 THEN substr(reason, strpos(reason, ': ') + 2) " \
          "ELSE reason END"
    return r.cursor().sql(
        f"SELECT {why} AS reason, count(*) AS records, sum(raw_bytes)::BIGINT AS raw_bytes, "
        f"list(source || ':' || locator ORDER BY source, locator)[1:{examples}] AS examples "
        f"FROM rejects GROUP BY ALL ORDER BY records DESC, reason").pl()


def dropped_samples(run: str | Path | Run, config: Config, stage: str, n: int = 10, *, seed: int = 0) -> pl.DataFrame:
    """A deterministic sample of ``n`` documents that ``stage`` drops: reason, the stage's signals, text."""
    if stage not in STAGE_NAMES:
        raise ConfigError(f"unknown stage {stage!r}; known: {', '.join(STAGE_NAMES)}")
    if n < 0:
        raise ConfigError(f"n={n} is not allowed: must be a count >= 0")
    r = open_run(run)
    rules = rules_of(r, config)
    module = next(m for m in STAGES if m.NAME == stage)
    sig_cols = [c for c in module.SIGNALS if c in r.columns]
    cols = "".join(f"pick.{ident(c)}, " for c in sig_cols)
    codes = [i for i, x in enumerate(rules) if x.stage == stage]
    if not codes or n == 0:
        return pl.DataFrame(schema={"doc_id": pl.Int64, "reason": pl.Utf8, "source": pl.Utf8, "text": pl.Utf8})
    cur = r.cursor()
    ranked = seed == SAMPLE_SEED and SAMPLE_RANK in r.columns
    order = SAMPLE_RANK if ranked else sample_order(seed)
    extra = ["source", *sig_cols, *([SAMPLE_RANK] if ranked else [])]  # carried along: no second pass
    last = max(codes)
    windows: Sequence[int | None] = (None,)
    per_doc = all(x.op not in ("first_in_group", "first_in_cluster") for x in rules[:last + 1])
    if per_doc:
        # only per-document rules up to this stage: a document's first failing rule among them is its
        # first failing rule, so the rules after the stage (and the dedup window) need no evaluation,
        # and only the documents failing one of the stage's rules can be dropped by it; each is
        # decided alone, so the first rows in sample order are looked at first
        fails = " OR ".join(f for f in (failure_in(x, r) for x in rules if x.stage == stage) if f is not None)
        rules, fails = rules[:last + 1], fails or "FALSE"
        windows = (*SAMPLE_WINDOWS, None) if ranked else (None,)
    for window in windows:
        if per_doc:
            within = f"{SAMPLE_RANK} < {window} AND " if window is not None else ""
            coded = codes_sql(rules, extra=extra, run=r, source=f"(SELECT * FROM signals WHERE {within}({fails}))")
        else:
            coded = with_near(r, cur, rules, codes_sql(rules, extra=extra, run=r))
        # pick the sample first, then read only its texts
        sql = (f"WITH pick AS (SELECT * FROM ({coded}) WHERE code IN ({', '.join(map(str, codes))}) "
               f"ORDER BY {order} LIMIT {int(n)}) "
               f"SELECT doc_id, {reason_of(rules)} AS reason, pick.source, {cols}d.text "
               f"FROM pick LEFT JOIN docs d USING (doc_id) ORDER BY {order}")
        out = cur.sql(sql).pl()
        if out.height == n:
            break
    return out


def signal_histogram(run: str | Path | Run, signal: str, bins: int = 50, *,
                     lo: float | None = None, hi: float | None = None) -> pl.DataFrame:
    """Equal-width histogram of a numeric signal: bin_lo, bin_hi, docs (missing values left out)."""
    r = open_run(run)
    check_columns(r, [signal])
    if signal not in numeric_signals():
        raise ConfigError(f"signal {signal!r} is not numeric; histograms take one of {', '.join(numeric_signals())}")
    if bins < 1:
        raise ConfigError(f"bins={bins} is not allowed: must be >= 1")
    cur = r.cursor()
    col = ident(signal)
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


def signal_summary(run: str | Path | Run, signal: str, *, by: str | None = None) -> pl.DataFrame:
    """A numeric signal's distribution over the run's documents, whole or per ``lang`` / ``source``:
    documents, those without a value (``missing``), min, 10th/50th/90th percentile (interpolated), max and
    mean; largest group first. The quality model's score by source: ``signal_summary(run, "qm_score", by="source")``."""
    r = open_run(run)
    check_columns(r, [signal])
    if signal not in numeric_signals():
        raise ConfigError(f"signal {signal!r} is not numeric; summaries take one of {', '.join(numeric_signals())}")
    if by is not None and by not in GROUP_BY:
        raise ConfigError(f"signal_summary by={by!r} is not allowed: must be one of {', '.join(GROUP_BY)} or None")
    col = ident(signal)
    group = f"{ident(by)}, " if by else ""
    return r.cursor().sql(
        f"SELECT {group}count(*) AS documents, (count(*) - count({col}))::BIGINT AS missing, "
        f"min({col})::DOUBLE AS min, quantile_cont({col}, 0.1)::DOUBLE AS p10, "
        f"quantile_cont({col}, 0.5)::DOUBLE AS p50, quantile_cont({col}, 0.9)::DOUBLE AS p90, "
        f"max({col})::DOUBLE AS max, avg({col})::DOUBLE AS mean FROM signals "
        + (f"GROUP BY {ident(by)} ORDER BY documents DESC, {ident(by)}" if by else "")).pl()


def signal_rows(run: str | Path | Run, columns: Sequence[str] | None = None) -> pl.DataFrame:
    """The signals table (all or some columns), ordered by doc_id."""
    r = open_run(run)
    cols = list(columns) if columns else [c for c in r.columns if not c.startswith("_")]  # not _n_*, _sample_rank
    check_columns(r, cols)
    return r.cursor().sql(f"SELECT {', '.join(map(ident, cols))} FROM signals ORDER BY doc_id").pl()


def reject_rows(run: str | Path | Run) -> pl.DataFrame:
    return open_run(run).cursor().sql("SELECT * FROM rejects ORDER BY partition, locator").pl()


def signal_ranges(run: str | Path | Run) -> dict[str, tuple[float, float]]:
    """signal -> (min, max) over the run's documents, for every numeric signal (the sliders' span)."""
    r = open_run(run)
    if r.ranges is not None:
        return dict(r.ranges)
    num = [c for c in numeric_signals() if c in r.columns]
    mm = r.cursor().execute(f"SELECT {', '.join(f'min({ident(c)})::DOUBLE, max({ident(c)})::DOUBLE' for c in num)} "
                            "FROM signals").fetchone()
    return {c: (mm[2 * i], mm[2 * i + 1]) for i, c in enumerate(num) if mm[2 * i] is not None}


def languages(run: str | Path | Run) -> list[tuple[str, int]]:
    """(language, documents) of the run, most documents first."""
    return open_run(run).cursor().execute(
        "SELECT lang, count(*) AS n FROM signals WHERE lang IS NOT NULL GROUP BY lang ORDER BY n DESC, lang").fetchall()
