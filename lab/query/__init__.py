"""query: every SQL statement of corpus-lab, run by DuckDB over a run's Parquet files.

Rules (``lab.rules.Rule``) compile to one ``CASE`` expression that names each document's first
failing rule, in funnel order; the funnel is then a single ``GROUP BY`` over that computed
reason (measured faster than one ``FILTER`` aggregate per stage: see ``bench/RESULTS.md``).
Group rules (exact dedup) become a window over the documents still alive at that point, so one
member of each group always survives the earlier stages' filtering. Near dedup is selection-aware
the same way: the candidate edges (``dedup/edges/``) among the documents alive before it, at the
configured Jaccard threshold, are joined into components (``lab.dedup.keep_one_per_cluster``) and
one member of each is kept; only the documents that have an edge or an exact copy are evaluated
(``nd_docs``). ``clusters``/``cluster_members`` browse the clusters precomputed on the grid.

Connections: one DuckDB connection per process and run (``open_run``), a ``cursor()`` per call,
so threads (dashboard sessions) never share a cursor. ``open_run(..., in_memory=True)`` loads the
signals table into memory for interactive use; there the funnel, the histograms and the change of a
slider move are counted from each document's first failing rule kept as an array
(``lab.query.codes``: the same answers, a move re-evaluating only the rows it can change).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np
import polars as pl
import pyarrow as pa

from lab.config import Config
from lab.errors import ConfigError
from lab.io.schema import numeric_signals
from lab.io.writers import read_json
from lab.query.run import (  # noqa: F401
    FUNNEL_STAGES,
    GROUP_BY,
    GROUP_SIGNALS,
    INGEST,
    MEMO_FUNNELS,
    SAMPLE_RANK,
    SAMPLE_SEED,
    SAMPLE_WINDOWS,
    Run,
    _arrow,
    _empty,
    _ident,
    _q,
    _sample_order,
    open_run,
)
from lab.query.compile import (  # noqa: F401
    _check_columns,
    _compare,
    _failure_in,
    _literal,
    _reason_of,
    _rules,
    codes_sql,
    failure,
    funnel_filter_shape_sql,
    predicate,
)
from lab.query.neardup import (  # noqa: F401
    CLUSTER_CONFIG_SORTS,
    CLUSTER_MEMO,
    CLUSTER_PAGE,
    CLUSTER_SORTS,
    _NEAR_STAGE,
    PairJaccard,
    _apply_near,
    _cluster_base,
    _cluster_fates,
    _cluster_table,
    _edges,
    _grid_col,
    _keep_policy,
    _later_code,
    _member_codes,
    _members_sql,
    _memo,
    _near_index,
    _near_ranks,
    _with_near,
    _without_near,
    cluster_count,
    cluster_members,
    clusters,
    edges,
    exact_groups,
    member_status,
    near_drops,
    page_bounds,
    page_count,
    pair_jaccard,
)
from lab.rules import Rule
from lab.stages import STAGE_NAMES, STAGES

INCREMENTAL_SHARE = 0.25  # recompute from scratch when more of the documents than this may change


def drop_reasons(run: str | Path | Run, config: Config) -> pl.DataFrame:
    """doc_id -> reason (NULL = kept) for every document of the run under ``config``."""
    r = open_run(run)
    rules = _rules(r, config)
    cur = r.cursor()
    return cur.sql(f"SELECT doc_id, {_reason_of(rules)} AS reason FROM ({_with_near(r, cur, rules, codes_sql(rules, run=r))}) "
                   "ORDER BY doc_id").pl()


# --- the funnel -----------------------------------------------------------------------------------


def funnel(run: str | Path | Run, config: Config, *, by: str | None = None, refresh: bool = False) -> pl.DataFrame:
    """Documents and bytes in, dropped and out at each stage, in funnel order.

    Each document is counted at the first stage that rejects it; ``ingest`` counts records that
    could not be read (``rejects/``). With ``by`` ("lang" or "source") there is one funnel per value.
    Conservation: ``docs_in`` of ingest = kept + every ``docs_dropped``; bytes and tokens likewise. Token
    columns (``tokens_in`` ...) appear once the run has token counts (``tokenized/``).
    """
    if by is not None and by not in GROUP_BY:
        raise ConfigError(f"funnel by={by!r} is not allowed: must be one of {', '.join(GROUP_BY)} or None")
    r = open_run(run, refresh=refresh)
    rules = _rules(r, config)
    cur = r.cursor()
    stage_of = [x.stage for x in rules]
    counts = _counts_in_memory(r, rules, by)
    if counts is None:
        counts = _apply_near(r, rules, by, code_counts(r, _without_near(rules), by))
    rej_key = "source" if by == "source" else "NULL::VARCHAR"
    rejected = cur.execute(f"SELECT {rej_key} AS grp, count(*), coalesce(sum(raw_bytes), 0) FROM rejects GROUP BY ALL").fetchall()

    table: dict[Any, dict[str, list[int]]] = {}
    for (grp, code), v in counts.items():
        acc = table.setdefault(grp, {}).setdefault("" if code is None else stage_of[code], [0, 0, 0])
        for i in range(3):
            acc[i] += v[i]
    for grp, docs, nbytes in rejected:  # unreadable records have no tokens
        acc = table.setdefault(grp, {}).setdefault(INGEST, [0, 0, 0])
        acc[0] += docs
        acc[1] += int(nbytes)

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
    if "n_tokens" not in r.columns:  # no token counts yet: no token columns
        df = df.drop("tokens_in", "tokens_dropped", "tokens_out", "tokens_retention")
    return df.rename({"group": by}) if by else df.drop("group")


def _counts_in_memory(r: Run, rules: list[Rule], by: str | None) -> dict | None:
    """In memory: the funnel's counts from each document's code (``lab.query.codes``); None: ask SQL."""
    from lab.query import codes
    c = codes.of(r)
    return None if c is None else c.funnel_counts(rules, by)


def _counts(cur, rules: list[Rule], by: str | None, run: Run, source: str = "signals") -> dict:
    """(group, code) -> [docs, bytes, tokens] (tokens 0 when the run has no token counts)."""
    key = _ident(by) if by else "NULL::VARCHAR"
    tokens = "n_tokens" in run.columns
    extra = ([by] if by else []) + (["n_tokens"] if tokens else [])
    sql = codes_sql(rules, extra=extra, run=run, source=source)
    tok = "coalesce(sum(n_tokens), 0)" if tokens else "0"
    return {(grp, code): [docs, int(nbytes), int(ntok)] for grp, code, docs, nbytes, ntok in cur.execute(
        f"SELECT {key} AS grp, code, count(*), coalesce(sum(bytes), 0), {tok} FROM ({sql}) GROUP BY ALL").fetchall()}


def _changed(old: Rule, new: Rule) -> str | None:
    """SQL condition on the documents whose outcome of this rule differs between ``old`` and ``new``
    (the same rule at another threshold), or None when the change is not a threshold move."""
    if (old.stage, old.signal, old.op, old.reason) != (new.stage, new.signal, new.op, new.reason):
        return None
    if old.value == new.value:
        return "FALSE"
    if old.op not in (">=", "<=", "==", "!=") or not all(isinstance(v, (int, float)) for v in (old.value, new.value)):
        return None
    col, lo, hi = _ident(old.signal), min(old.value, new.value), max(old.value, new.value)
    if old.op == ">=":  # passes iff x >= v: the outcome differs for lo <= x < hi
        return f"({col} >= {_literal(lo)} AND {col} < {_literal(hi)})"
    if old.op == "<=":  # passes iff x <= v: differs for lo < x <= hi
        return f"({col} > {_literal(lo)} AND {col} <= {_literal(hi)})"
    return f"{col} IN ({_literal(lo)}, {_literal(hi)})"


def _shifted(counts: dict, before: dict, after: dict) -> dict:
    """Remembered counts (key -> [docs, bytes, tokens]) with a subset's counts under the old rules
    (``before``) taken out and its counts under the new ones (``after``) put in; empty keys dropped.

    >>> _shifted({"a": [3, 30, 9]}, {"a": [1, 10, 3]}, {"b": [1, 10, 3]})
    {'a': [2, 20, 6], 'b': [1, 10, 3]}
    """
    out = {k: list(v) for k, v in counts.items()}
    for sign, part in ((-1, before), (1, after)):
        for k, v in part.items():
            acc = out.setdefault(k, [0, 0, 0])
            for i in range(3):
                acc[i] += sign * v[i]
    return {k: v for k, v in out.items() if v[0]}


def code_counts(r: Run, rules: list[Rule], by: str | None) -> dict:
    """(group, code) -> [docs, bytes] of the documents' first failing rules (code None: kept).

    In-memory runs remember recent answers. A config that differs from a remembered one only in
    thresholds is answered incrementally and exactly: the documents whose signal lies between an
    old and a new threshold, together with every member of their groups (exact dedup), form a set
    R outside of which no document's code can change; the answer is the remembered counts minus
    R's counts under the old rules plus R's counts under the new ones.
    """
    cur = r.cursor()
    if r.memo is None:
        return _counts(cur, rules, by, r)
    key = (by, tuple(rules))
    with r.lock:
        if key in r.memo:
            r.memo.move_to_end(key)
            return r.memo[key]
        candidates = [(k, v) for k, v in reversed(r.memo.items()) if k[0] == by and len(k[1]) == len(rules)]
    result = None
    for (_, old_rules), old_counts in candidates[:4]:
        conds = [_changed(a, b) for a, b in zip(old_rules, rules)]
        if any(c is None for c in conds):
            continue
        moved = " OR ".join(c for c in conds if c != "FALSE") or "FALSE"
        total = sum(v[0] for v in old_counts.values())
        if cur.execute(f"SELECT count(*) FROM signals WHERE {moved}").fetchall()[0][0] > INCREMENTAL_SHARE * total:
            continue
        where = f"({moved})"
        for g in (x for x in rules if x.op == "first_in_group"):
            col = _ident(g.signal)
            where += f" OR {col} IN (SELECT {col} FROM signals WHERE ({moved}) AND {col} IS NOT NULL)"
        # R is small: read it once, only the columns the two evaluations need, and register it with
        # this cursor (a temp table of it measured ~50 ms more at 1M rows than reading it to Arrow)
        need = [c for c in dict.fromkeys(["doc_id", "bytes", *([by] if by else []), "n_tokens",
                                          *(x.signal for x in (*old_rules, *rules)),
                                          *(f"_n_{x.signal}" for x in rules if x.op == "first_in_group")])
                if c in r.columns]
        cur.register("_moved", _arrow(cur.sql(f"SELECT {', '.join(map(_ident, need))} FROM signals WHERE {where}")))
        result = _shifted(old_counts, _counts(cur, list(old_rules), by, r, "_moved"), _counts(cur, rules, by, r, "_moved"))
        cur.unregister("_moved")
        break
    if result is None:
        result = _counts(cur, rules, by, r)
    with r.lock:
        r.memo[key] = result
        while len(r.memo) > MEMO_FUNNELS:
            r.memo.popitem(last=False)
    return result


def reason_counts(run: str | Path | Run, config: Config) -> pl.DataFrame:
    """Documents and bytes dropped per ``stage.reason``, in funnel order of stages."""
    r = open_run(run)
    rules = _rules(r, config)
    cur = r.cursor()
    rows = cur.execute(f"SELECT code, count(*), sum(bytes) FROM ({_with_near(r, cur, rules, codes_sql(rules, run=r))}) "
                       "WHERE code IS NOT NULL GROUP BY code ORDER BY code").fetchall()
    return pl.DataFrame({"reason": [rules[c].drop_reason for c, _, _ in rows], "docs": [d for _, d, _ in rows],
                         "bytes": [int(b) for _, _, b in rows]}, schema={"reason": pl.Utf8, "docs": pl.Int64, "bytes": pl.Int64})


def reason_counts_by_partition(run: str | Path | Run, config: Config) -> pl.DataFrame:
    """Documents and bytes dropped per partition key and ``stage.reason`` (each document counted once)."""
    r = open_run(run)
    rules = _rules(r, config)
    src = f"read_parquet({_q(r.layout.glob('signals'))}, filename = true)"
    cur = r.cursor()
    rows = cur.execute(
        f"SELECT regexp_extract(filename, 'part-([^/.]+)\\.parquet$', 1) AS part, code, count(*), sum(bytes) "
        f"FROM ({_with_near(r, cur, rules, codes_sql(rules, extra=['filename'], source=src))}) WHERE code IS NOT NULL "
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
    rules = _rules(r, config)
    module = next(m for m in STAGES if m.NAME == stage)
    sig_cols = [c for c in module.SIGNALS if c in r.columns]
    cols = "".join(f"pick.{_ident(c)}, " for c in sig_cols)
    codes = [i for i, x in enumerate(rules) if x.stage == stage]
    if not codes or n == 0:
        return pl.DataFrame(schema={"doc_id": pl.Int64, "reason": pl.Utf8, "source": pl.Utf8, "text": pl.Utf8})
    cur = r.cursor()
    ranked = seed == SAMPLE_SEED and SAMPLE_RANK in r.columns
    order = SAMPLE_RANK if ranked else _sample_order(seed)
    extra = ["source", *sig_cols, *([SAMPLE_RANK] if ranked else [])]  # carried along: no second pass
    last = max(codes)
    windows: Sequence[int | None] = (None,)
    per_doc = all(x.op not in ("first_in_group", "first_in_cluster") for x in rules[:last + 1])
    if per_doc:
        # only per-document rules up to this stage: a document's first failing rule among them is its
        # first failing rule, so the rules after the stage (and the dedup window) need no evaluation,
        # and only the documents failing one of the stage's rules can be dropped by it; each is
        # decided alone, so the first rows in sample order are looked at first
        fails = " OR ".join(f for f in (_failure_in(x, r) for x in rules if x.stage == stage) if f is not None)
        rules, fails = rules[:last + 1], fails or "FALSE"
        windows = (*SAMPLE_WINDOWS, None) if ranked else (None,)
    for window in windows:
        if per_doc:
            within = f"{SAMPLE_RANK} < {window} AND " if window is not None else ""
            coded = codes_sql(rules, extra=extra, run=r, source=f"(SELECT * FROM signals WHERE {within}({fails}))")
        else:
            coded = _with_near(r, cur, rules, codes_sql(rules, extra=extra, run=r))
        # pick the sample first, then read only its texts
        sql = (f"WITH pick AS (SELECT * FROM ({coded}) WHERE code IN ({', '.join(map(str, codes))}) "
               f"ORDER BY {order} LIMIT {int(n)}) "
               f"SELECT doc_id, {_reason_of(rules)} AS reason, pick.source, {cols}d.text "
               f"FROM pick LEFT JOIN docs d USING (doc_id) ORDER BY {order}")
        out = cur.sql(sql).pl()
        if out.height == n:
            break
    return out


def signal_histogram(run: str | Path | Run, signal: str, bins: int = 50, *,
                     lo: float | None = None, hi: float | None = None) -> pl.DataFrame:
    """Equal-width histogram of a numeric signal: bin_lo, bin_hi, docs (missing values left out)."""
    r = open_run(run)
    _check_columns(r, [signal])
    if signal not in numeric_signals():
        raise ConfigError(f"signal {signal!r} is not numeric; histograms take one of {', '.join(numeric_signals())}")
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
    cols = list(columns) if columns else [c for c in r.columns if not c.startswith("_")]  # not _n_*, _sample_rank
    _check_columns(r, cols)
    return r.cursor().sql(f"SELECT {', '.join(map(_ident, cols))} FROM signals ORDER BY doc_id").pl()


def reject_rows(run: str | Path | Run) -> pl.DataFrame:
    return open_run(run).cursor().sql("SELECT * FROM rejects ORDER BY partition, locator").pl()


# --- the tokenizer's stratified sample ----------------------------------------------------------------


def tokenizer_sample(run: str | Path | Run, config: Config) -> tuple[list[str], pl.DataFrame]:
    """The texts a run's tokenizer is fitted on, and the strata they came from.

    Among the documents ``config`` keeps for training (the validation split left out), each (lang, source) stratum's share of the kept bytes over
    the whole run decides its share of ``tokenizer.sample_bytes``; inside a stratum documents are
    taken in the order of a seeded hash of their doc_id (md5: stable across DuckDB versions) until
    the quota is reached (the document that crosses it is included). Partitioning plays no part.
    """
    r = open_run(run)
    rules = _rules(r, config)
    tc = config.tokenizer
    cur = r.cursor()
    codes = _with_near(r, cur, rules, codes_sql(rules, extra=["lang", "source"], run=r))
    # the validation documents never train the tokenizer: the split of the kept documents first
    # (materialize's, from pack.shuffle_seed and pack.val_fraction), then the sample of the rest
    from lab.materialize import order_and_split

    kept = np.sort(_arrow(cur.sql(f"SELECT doc_id FROM ({codes}) WHERE code IS NULL")).column("doc_id").to_numpy())
    order, is_val = order_and_split(kept, config.pack.shuffle_seed, config.pack.val_fraction)
    cur.register("_val", pa.table({"doc_id": pa.array(kept[order[is_val]], pa.int64())}))
    sql = (f"WITH k AS (SELECT doc_id, coalesce(lang, '') AS lang, source, bytes, "
           f"md5(doc_id::VARCHAR || ':' || {int(tc.seed)}) AS h FROM ({codes}) WHERE code IS NULL "
           f"AND doc_id NOT IN (SELECT doc_id FROM _val)), "
           f"tot AS (SELECT lang, source, sum(bytes) AS stratum_bytes FROM k GROUP BY ALL), "
           f"q AS (SELECT lang, source, stratum_bytes, {int(tc.sample_bytes)} * stratum_bytes / "
           f"(SELECT sum(stratum_bytes) FROM tot) AS quota FROM tot), "
           f"ranked AS (SELECT k.*, q.quota, sum(k.bytes) OVER (PARTITION BY k.lang, k.source ORDER BY k.h, k.doc_id "
           f"ROWS UNBOUNDED PRECEDING) - k.bytes AS before FROM k JOIN q USING (lang, source)) "
           f"SELECT doc_id, lang, source, bytes FROM ranked WHERE before < quota ORDER BY lang, source, h, doc_id")
    picked = cur.sql(sql).pl()
    cur.register("_picked", picked.select("doc_id").to_arrow())
    texts = dict(cur.execute("SELECT doc_id, text FROM docs WHERE doc_id IN (SELECT doc_id FROM _picked)").fetchall())
    strata = cur.sql(f"SELECT lang, source, count(*) AS docs, sum(bytes)::BIGINT AS bytes FROM ({sql}) GROUP BY ALL "
                     "ORDER BY lang, source").pl()
    return [texts[d] for d in picked["doc_id"]], strata


def token_counts(run: str | Path | Run) -> pl.DataFrame:
    """doc_id, n_tokens, words, continued_words of every tokenized document."""
    r = open_run(run)
    files = r.layout.tokenized_dir / "part-*.parquet"
    if not any(r.layout.tokenized_dir.glob("part-*.parquet")):
        raise ConfigError(f"{r.layout.root} has no token counts (tokenized/); run `corpus-lab run` with "
                          "tokenizer.enabled: true")
    return r.cursor().sql(f"SELECT doc_id, n_tokens, words, continued_words FROM read_parquet({_q(str(files))}) "
                          "ORDER BY doc_id").pl()


def fertility(run: str | Path | Run, by: str = "lang", config: Config | None = None) -> pl.DataFrame:
    """Tokenizer fertility per language or source: documents, words, tokens, tokens per word, bytes
    and characters per token, and the share of words cut into more than one token (continued words).

    Words are separated by ASCII whitespace, so tokens per word and continued words mean little for
    languages written without spaces (Chinese, Japanese, Thai): read bytes or characters per token
    there. With ``config``, only the documents it keeps are counted.
    """
    if by not in GROUP_BY:
        raise ConfigError(f"fertility by={by!r} is not allowed: must be one of {', '.join(GROUP_BY)}")
    r = open_run(run)
    token_counts(r)  # a clear error when the run has none
    if config is None:  # reads every text: remembered per opened run (sessions of a dashboard share it)
        key = ("fertility", by)
        if key not in r.constant:
            r.constant[key] = _fertility(r, by, None)
        return r.constant[key]
    return _fertility(r, by, config)


def _fertility(r: Run, by: str, config: Config | None) -> pl.DataFrame:
    cur = r.cursor()
    tok = f"read_parquet({_q(str(r.layout.tokenized_dir / 'part-*.parquet'))})"
    keep = ""
    if config is not None:
        rules = _rules(r, config)
        cur.register("_kept", _arrow(cur.sql(f"SELECT doc_id FROM ({_with_near(r, cur, rules, codes_sql(rules, run=r))}) "
                                             "WHERE code IS NULL")))
        keep = "WHERE t.doc_id IN (SELECT doc_id FROM _kept)"
    return cur.sql(
        f"SELECT s.{_ident(by)}, count(*) AS documents, sum(t.words)::BIGINT AS words, sum(t.n_tokens)::BIGINT AS tokens, "
        f"sum(t.n_tokens) / nullif(sum(t.words), 0) AS tokens_per_word, "
        f"sum(strlen(d.text)) / nullif(sum(t.n_tokens), 0) AS bytes_per_token, "
        f"sum(length(d.text)) / nullif(sum(t.n_tokens), 0) AS chars_per_token, "
        f"sum(t.continued_words) / nullif(sum(t.words), 0) AS continued_words "
        f"FROM {tok} t JOIN signals s USING (doc_id) JOIN docs d USING (doc_id) {keep} "
        f"GROUP BY ALL ORDER BY tokens DESC, 1").pl()


def fertility_comparison(run: str | Path | Run) -> pl.DataFrame:
    """The tokenizer comparison ``corpus-lab fertility`` stored (``stats/fertility.parquet``): fitted
    vocabulary sizes and offline reference tokenizers x (all, lang, source), with V x d beside each."""
    r = open_run(run)
    p = r.layout.fertility[1]
    if not p.exists():
        raise ConfigError(f"{p} does not exist: run `corpus-lab fertility {r.layout.root}` first")
    return r.cursor().sql(f"SELECT * FROM read_parquet({_q(str(p))})").pl()


def packing(run: str | Path | Run) -> pl.DataFrame:
    """Every packing strategy x seq_len on the run's train split (``stats/packing.json``): sequences,
    utilization, padding, tokens truncated, documents split, fragments per document."""
    r = open_run(run)
    p = r.layout.packing_stats
    if not p.exists():
        raise ConfigError(f"{r.layout.root} has no packing table ({p}); run `corpus-lab run` with tokenizer.enabled: true")
    rows = [{"strategy": k.split("@")[0], "seq_len": int(k.split("@")[1]), **v} for k, v in read_json(p)["train"].items()]
    return pl.DataFrame(rows).sort("strategy", "seq_len")


def signal_ranges(run: str | Path | Run) -> dict[str, tuple[float, float]]:
    """signal -> (min, max) over the run's documents, for every numeric signal (the sliders' span)."""
    r = open_run(run)
    if r.ranges is not None:
        return dict(r.ranges)
    num = [c for c in numeric_signals() if c in r.columns]
    mm = r.cursor().execute(f"SELECT {', '.join(f'min({_ident(c)})::DOUBLE, max({_ident(c)})::DOUBLE' for c in num)} "
                            "FROM signals").fetchone()
    return {c: (mm[2 * i], mm[2 * i + 1]) for i, c in enumerate(num) if mm[2 * i] is not None}


def languages(run: str | Path | Run) -> list[tuple[str, int]]:
    """(language, documents) of the run, most documents first."""
    return open_run(run).cursor().execute(
        "SELECT lang, count(*) AS n FROM signals WHERE lang IS NOT NULL GROUP BY lang ORDER BY n DESC, lang").fetchall()


# --- the judging loop's read side: submodules over the names above (each lists its API in __all__) ---

from lab.query.browse import *  # noqa: E402,F401,F403
from lab.query.distribution import *  # noqa: E402,F401,F403
from lab.query.labelling import *  # noqa: E402,F401,F403
