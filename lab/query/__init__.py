"""query: every SQL statement of corpus-lab, run by DuckDB over a run's Parquet files.

Rules (``lab.select.rules.Rule``) compile to one ``CASE`` expression that names each document's first
failing rule, in funnel order (``compile``); the funnel is then a single ``GROUP BY`` over that
computed reason (``funnels``; faster than one ``FILTER`` aggregate per stage, as
``bench/funnel_query.py`` measures). Group rules (exact dedup) become a window over the documents still alive at
that point, so one member of each group always survives the earlier stages' filtering. Near dedup is
selection-aware the same way (``neardup``): the candidate edges (``dedup/edges/``) among the
documents alive before it, at the configured Jaccard threshold, are joined into components
(``lab.dedup.keep_one_per_cluster``) and one member of each is kept; only the documents that have an
edge or an exact copy are evaluated (``nd_docs``). ``clusters``/``cluster_members`` browse the
clusters precomputed on the grid.

Connections (``run``): one DuckDB connection per process and run (``open_run``), a ``cursor()`` per
call, so threads (dashboard sessions) never share a cursor. ``open_run(..., in_memory=True)`` loads
the signals table into memory for interactive use; there the funnel, the histograms and the change of
a slider move are counted from each document's first failing rule kept as an array (``codes``: the
same answers, a move re-evaluating only the rows it can change).

The modules, each importing only those above it:

- ``sql``: quoting, an empty table of a schema, a relation as Arrow;
- ``run``: ``Run``, ``open_run`` and its cached connections, the run's constants;
- ``compile``: rules -> SQL (``predicate``, ``failure``, ``codes_sql``), pure;
- ``neardup``: near dedup over the survivors' candidate edges; the cluster browser;
- ``codes``: in memory, each document's first failing rule as an array;
- ``funnels``: the funnel and its incremental memo, drop reasons, samples of drops, signal tables and
  summaries;
- ``tokens``: the tokenizer's stratified sample, token counts, fertility, packing;
- ``reports``: what the url and decontamination stages found (per category, per evaluation set);
- ``changes``: two configs over one run: the documents whose drop reason differs;
- ``browse``, ``distribution``, ``labelling``: the judging loop's read side (documents, histograms and
  changes, labels and precision);
- ``calibration``: each language's own distributions, for per-language thresholds (``lab.select.calibrate``);
- ``mixture``: the kept documents by mixture bucket, and the mixture realized over them (``lab.tokens.mixture``).

The public API is re-exported here: callers write ``from lab import query; query.funnel(...)``.
``open_run(..., in_memory=True)`` here also warms the funnel memo with the run's own config, so the
first slider move is answered incrementally.
"""

from pathlib import Path

from lab.query import run as _run
from lab.query.browse import PAGE_MAX, VIEWS, document_count, document_filters, document_texts, documents, sample_texts
from lab.query.calibration import GRID_POINTS, fail_shares, keep_share, quantiles
from lab.query.compile import codes_sql, failure, predicate, rules_of
from lab.query.distribution import bin_edges, change, histogram, histograms
from lab.query.funnels import (
    code_counts,
    drop_reasons,
    dropped_samples,
    funnel,
    languages,
    prepare,
    reason_counts,
    reason_counts_by_partition,
    reject_reasons,
    reject_rows,
    signal_histogram,
    signal_ranges,
    signal_rows,
    signal_summary,
    warm,
)
from lab.query.labelling import LABELS, label_problems, labelled_drops, labels, stage_precision, unknown_doc_ids
from lab.query.mixture import mixture_plan, mixture_report, mixture_rows
from lab.query.neardup import (
    CLUSTER_SORTS,
    PairJaccard,
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
from lab.query.reports import contamination, top_domains, urls
from lab.query.run import FUNNEL_STAGES, GROUP_BY, INGEST, Run, run_dir
from lab.query.tokens import (
    fertility,
    fertility_comparison,
    loader_telemetry,
    packing,
    telemetry_steps,
    token_counts,
    tokenizer_sample,
)
from lab.stages import STAGE_NAMES  # the funnel's stage order


def open_run(run: str | Path | Run, *, in_memory: bool = False, refresh: bool = False) -> Run:
    """The process-wide ``Run`` of a run directory (cached; ``refresh`` re-reads the files); in memory,
    with the funnel memo warmed by the run's own config."""
    r = _run.open_run(run, in_memory=in_memory, refresh=refresh)
    if in_memory:
        warm(r)
    return r


__all__ = [
    "CLUSTER_SORTS", "FUNNEL_STAGES", "GRID_POINTS", "GROUP_BY", "INGEST", "LABELS", "PAGE_MAX", "STAGE_NAMES", "VIEWS",
    "PairJaccard", "Run", "bin_edges", "change", "cluster_count", "cluster_members", "clusters", "code_counts",
    "codes_sql", "contamination", "document_count", "document_filters", "document_texts", "documents",
    "drop_reasons", "dropped_samples", "edges", "exact_groups", "fail_shares", "failure", "fertility",
    "fertility_comparison", "funnel", "histogram", "histograms", "keep_share", "label_problems",
    "labelled_drops", "labels", "languages", "loader_telemetry", "member_status", "mixture_plan",
    "mixture_report", "mixture_rows", "near_drops", "open_run", "packing", "page_bounds", "page_count",
    "pair_jaccard", "predicate", "prepare", "quantiles", "reason_counts", "reason_counts_by_partition",
    "reject_reasons", "reject_rows", "rules_of", "run_dir", "sample_texts", "signal_histogram", "signal_ranges",
    "signal_rows", "signal_summary", "stage_precision", "telemetry_steps", "token_counts", "tokenizer_sample",
    "top_domains", "unknown_doc_ids", "urls", "warm",
]
