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

import numpy as np
import polars as pl
import pyarrow as pa

from lab.config import Config
from lab.errors import ConfigError
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
from lab.query.funnel import (  # noqa: F401
    INCREMENTAL_SHARE,
    _changed,
    _counts,
    _counts_in_memory,
    _shifted,
    code_counts,
    drop_reasons,
    dropped_samples,
    funnel,
    languages,
    reason_counts,
    reason_counts_by_partition,
    reject_reasons,
    reject_rows,
    signal_histogram,
    signal_ranges,
    signal_rows,
)
from lab.stages import STAGE_NAMES  # noqa: F401  (callers read the funnel's stage order as query.STAGE_NAMES)


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


# --- the judging loop's read side: submodules over the names above (each lists its API in __all__) ---

from lab.query.browse import *  # noqa: E402,F401,F403
from lab.query.distribution import *  # noqa: E402,F401,F403
from lab.query.labelling import *  # noqa: E402,F401,F403
