"""query: every SQL statement of corpus-lab, run by DuckDB over a run's Parquet files.

Rules (``lab.rules.Rule``) compile to one ``CASE`` expression that names each document's first
failing rule, in funnel order (``compile``); the funnel is then a single ``GROUP BY`` over that
computed reason (``funnels``; measured faster than one ``FILTER`` aggregate per stage: see
``bench/RESULTS.md``). Group rules (exact dedup) become a window over the documents still alive at
that point, so one member of each group always survives the earlier stages' filtering. Near dedup is
selection-aware the same way (``neardup``): the candidate edges (``dedup/edges/``) among the
documents alive before it, at the configured Jaccard threshold, are joined into components
(``lab.neardup.keep_one_per_cluster``) and one member of each is kept; only the documents that have an
edge or an exact copy are evaluated (``nd_docs``). ``clusters``/``cluster_members`` browse the
clusters precomputed on the grid.

Connections (``run``): one DuckDB connection per process and run (``open_run``), a ``cursor()`` per
call, so threads (dashboard sessions) never share a cursor. ``open_run(..., in_memory=True)`` loads
the signals table into memory for interactive use; there the funnel, the histograms and the change of
a slider move are counted from each document's first failing rule kept as an array (``codes``: the
same answers, a move re-evaluating only the rows it can change).

The modules, each importing only those above it (``run`` reaches the funnel's memo lazily):

- ``run``: ``Run``, ``open_run`` and its cached connections, the run's constants, the SQL helpers;
- ``compile``: rules -> SQL (``predicate``, ``failure``, ``codes_sql``), pure;
- ``neardup``: near dedup over the survivors' candidate edges; the cluster browser;
- ``codes``: in memory, each document's first failing rule as an array;
- ``funnels``: the funnel and its incremental memo, drop reasons, samples of drops, signal tables and
  summaries;
- ``tokens``: the tokenizer's stratified sample, token counts, fertility, packing;
- ``reports``: what the url and decontamination stages found (per category, per evaluation set);
- ``browse``, ``distribution``, ``labelling``: the judging loop's read side (documents, histograms and
  changes, labels and precision);
- ``calibration``: each language's own distributions, for per-language thresholds (``lab.calibrate``);
- ``mixture``: the kept documents by mixture bucket, and the mixture realized over them (``lab.mixture``).

Every name is re-exported here: callers write ``from lab import query; query.funnel(...)``.
"""

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
    PairJaccard,
    _apply_near,
    _edges,
    _grid_col,
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
from lab.query.funnels import (  # noqa: F401
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
    prepare,
    reason_counts,
    reason_counts_by_partition,
    reject_reasons,
    reject_rows,
    signal_histogram,
    signal_ranges,
    signal_rows,
    signal_summary,
)
from lab.query.tokens import (  # noqa: F401
    fertility,
    fertility_comparison,
    loader_telemetry,
    packing,
    telemetry_steps,
    token_counts,
    tokenizer_sample,
)
from lab.query.reports import contamination, top_domains, urls  # noqa: F401
from lab.stages import STAGE_NAMES  # noqa: F401  (callers read the funnel's stage order as query.STAGE_NAMES)

# the judging loop's read side: submodules over the modules above (each lists its API in __all__)
from lab.query.browse import *  # noqa: F401,F403
from lab.query.calibration import *  # noqa: F401,F403
from lab.query.distribution import *  # noqa: F401,F403
from lab.query.labelling import *  # noqa: F401,F403
from lab.query.mixture import mixture_plan, mixture_report, mixture_rows  # noqa: F401
