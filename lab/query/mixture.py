"""The kept documents by mixture bucket: what ``lab.tokens.mixture`` realizes a budget from.

``mixture_rows`` gives every document a config keeps with its bucket (``mixture.by`` over lang,
source and the quality score), its token count and, for rehydration, the size of its duplicate
group: the documents of its near-duplicate cluster at the config's threshold (exact copies share a
cluster's node), else of its exact-duplicate group, else 1. ``mixture_plan`` realizes the config's
mixture over them (``lab.tokens.mixture.plan``): the copies of each document and the per-bucket report
(tokens before and after, epochs) that ``corpus-lab mixture``, the Mixture tab and materialize use.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from lab.config import Config
from lab.errors import NotReadyError
from lab.query.compile import codes_sql, rules_of
from lab.query.neardup import grid_col, with_near
from lab.query.run import Run, open_run
from lab.query.sql import ident
from lab.tokens import mixture as mx


def _duplicates(r: Run, config: Config) -> pl.DataFrame:
    """doc_id -> the size of its duplicate group (near cluster at the threshold, else exact group, else 1)."""
    col = ident(grid_col(config.stages.near_dedup.threshold))
    cur = r.cursor()
    has_clusters = "clusters" in {t for (t,) in cur.execute("SHOW TABLES").fetchall()}
    near = (f"LEFT JOIN clusters c ON s.content_hash = c.node LEFT JOIN (SELECT c2.{col} AS cid, count(*) AS n "
            f"FROM clusters c2 JOIN signals s2 ON s2.content_hash = c2.node WHERE c2.{col} IS NOT NULL GROUP BY 1) cs "
            f"ON cs.cid = c.{col}") if has_clusters else ""
    n_near = "cs.n" if has_clusters else "NULL"
    return cur.sql(f"SELECT s.doc_id, coalesce({n_near}, ex.n, 1)::BIGINT AS duplicates FROM signals s {near} "
                   "LEFT JOIN (SELECT content_hash, count(*) AS n FROM signals WHERE content_hash IS NOT NULL "
                   "GROUP BY 1) ex ON ex.content_hash = s.content_hash").pl()


def mixture_rows(run: str | Path | Run, config: Config) -> pl.DataFrame:
    """Every kept document of ``config``: doc_id, bucket (``config.mixture.by``; "all" without dimensions),
    n_tokens and duplicates, by doc_id. Needs token counts (a run with ``tokenizer.enabled``)."""
    r = open_run(run)
    if "n_tokens" not in r.columns:
        raise NotReadyError(f"{r.root} has no token counts: a mixture budgets tokens; run `corpus-lab run` with "
                            "tokenizer.enabled: true first")
    m = config.mixture
    rules = rules_of(r, config)
    cur = r.cursor()
    cols = ["doc_id", "n_tokens", *(c for c in ("lang", "source") if c in m.by), *(["qm_score"] if "quality" in m.by else [])]
    # the kept documents (code NULL: drop_reasons' NULL reason) with the columns read here, in one query
    coded = with_near(r, cur, rules, codes_sql(rules, extra=cols[1:], run=r))
    df = cur.sql(f"SELECT {', '.join(map(ident, cols))} FROM ({coded}) WHERE code IS NULL").pl()
    if m.rehydrate:
        df = df.join(_duplicates(r, config), on="doc_id", how="left")
    else:
        df = df.with_columns(duplicates=pl.lit(1, dtype=pl.Int64))
    # bucket_name of each row's dimension values, as column expressions (None reads "none")
    parts = []
    for d in m.by:
        if d == "quality":
            parts.append(pl.lit(pl.Series([mx.quality_bucket(s, m.quality_edges) for s in df["qm_score"].to_list()],
                                          dtype=pl.Utf8)))
        else:
            parts.append(pl.col(d).cast(pl.Utf8).fill_null(mx.NO_SCORE))
    bucket = pl.concat_str(parts, separator="/") if parts else pl.lit("all", dtype=pl.Utf8)
    return (df.with_columns(bucket=bucket, n_tokens=pl.col("n_tokens").fill_null(0))
            .select("doc_id", "bucket", "n_tokens", "duplicates").sort("doc_id"))


def mixture_plan(run: str | Path | Run, config: Config) -> mx.Plan:
    """``config``'s mixture realized over the run's kept documents (``lab.tokens.mixture.plan``); its ``repeats``
    follow ``mixture_rows``' order (doc_id)."""
    rows = mixture_rows(run, config)
    # each row's bucket as one of a few shared strings (not a string object per row): the sorted names
    # indexed by each row's dense rank among them
    names = np.array(rows["bucket"].unique().sort().to_list(), dtype=object)
    buckets = names[rows["bucket"].rank("dense").to_numpy().astype(np.int64) - 1] if rows.height else names[:0]
    return mx.plan(config.mixture, rows["doc_id"].to_numpy(), buckets, rows["n_tokens"].to_numpy(),
                   rows["duplicates"].to_numpy())


def mixture_report(run: str | Path | Run, config: Config) -> pl.DataFrame:
    """Per bucket: documents, tokens before, target, tokens after, documents written, epochs, most copies
    of one document (what ``corpus-lab mixture`` prints and the Mixture tab shows)."""
    p = mixture_plan(run, config)
    schema = {"bucket": pl.Utf8, "documents": pl.Int64, "tokens_before": pl.Int64, "target": pl.Int64,
              "tokens_after": pl.Int64, "documents_after": pl.Int64, "epochs": pl.Float64, "max_repeats": pl.Int64}
    return pl.DataFrame(p.report, schema=schema)
