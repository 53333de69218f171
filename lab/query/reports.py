"""reports: what the url and decontamination stages found, per list category and per evaluation set."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from lab.config import Config
from lab.query.compile import check_columns
from lab.query.run import Run, open_run


def _config(r: Run, config: Config | None) -> Config:
    return config if config is not None else (r.config or Config())


def contamination(run: str | Path | Run, config: Config | None = None) -> pl.DataFrame:
    """Per evaluation set (``decon_set``: the set most of a document's matches come from): the documents
    of the run that reach ``min_matches`` under ``config`` (default: the run's), whichever stage drops them,
    their tokens, matched n-grams and the longest overlap in words, most documents first. ``tokens`` is
    null unless every one of the set's documents has a token count (none before tokenization; a batch
    run counts only the documents it keeps), never a partial sum."""
    r = open_run(run)
    check_columns(r, ["decon_matches", "decon_set", "decon_longest"])
    k = _config(r, config).stages.decontamination.min_matches
    tokens = ("CASE WHEN count(n_tokens) = count(*) THEN sum(n_tokens) END::BIGINT" if "n_tokens" in r.columns
              else "NULL::BIGINT")
    return r.cursor().sql(
        f"SELECT decon_set AS eval_set, count(*) AS documents, {tokens} AS tokens, "
        f"sum(decon_matches)::BIGINT AS matched_ngrams, max(decon_longest) AS longest_words "
        f"FROM signals WHERE decon_matches >= {int(k)} GROUP BY ALL ORDER BY documents DESC, eval_set").pl()


def urls(run: str | Path | Run) -> pl.DataFrame:
    """What the url stage saw: documents without a URL (they pass), with one, and per blocklist category
    the documents on it (``LIST/CATEGORY``), in that order."""
    r = open_run(run)
    check_columns(r, ["url_present", "url_blocked"])
    rows = r.cursor().execute(
        "SELECT CASE WHEN url_present = 0 THEN 'no URL' WHEN url_blocked <> '' THEN 'blocked: ' || url_blocked "
        "ELSE 'URL, not blocked' END AS what, count(*) AS documents FROM signals GROUP BY ALL").fetchall()
    order = {"no URL": 0, "URL, not blocked": 1}
    rows.sort(key=lambda x: (order.get(x[0], 2), -x[1], x[0]))
    return pl.DataFrame(rows, schema={"what": pl.Utf8, "documents": pl.Int64}, orient="row")


def top_domains(run: str | Path | Run, n: int = 20) -> pl.DataFrame:
    """The ``n`` registered domains with the most documents: documents and bytes."""
    r = open_run(run)
    check_columns(r, ["url_registered_domain"])
    return r.cursor().sql(
        f"SELECT url_registered_domain AS domain, count(*) AS documents, sum(bytes)::BIGINT AS bytes FROM signals "
        f"WHERE url_registered_domain <> '' GROUP BY ALL ORDER BY documents DESC, domain LIMIT {int(n)}").pl()

