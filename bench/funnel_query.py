"""Funnel query latency over N documents of signals (DuckDB, in-memory signals table).

Builds N rows of signals by resampling (with replacement, seeded) the rows of a real run
(default ``runs/sample``, made by ``corpus-lab run``), so every signal keeps its real joint
distribution and the funnel its real retention; ``doc_id`` is made unique and 15% of the rows
become exact copies of 5% of the others. Writes them as one run's Parquet, opens the run in memory as the dashboard
does, and times ``lab.query.funnel`` (one GROUP BY over the computed first failing rule) against
the alternative shape (one FILTER aggregate per stage over cumulative predicates), both
evaluating every rule on every row ("cold"); then a slider workload: every query moves one
threshold of one stage to a value not used before, which ``lab.query`` answers incrementally
from the previous funnel (only the documents between the old and the new threshold, and their
dedup groups, are evaluated again).

    .venv/bin/python bench/funnel_query.py --rows 1000000 --repeat 30
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lab import query
from lab.config import Config, build
from lab.io.run import RunLayout
from lab.io.schema import DOCS_SCHEMA, REJECTS_SCHEMA, signals_schema
from lab.io.writers import write_parquet
from lab.select.ruleset import ruleset
from lab.select.rules import Rule
from lab.query.sql import ident

CHUNK = 1_000_000



def funnel_filter_shape_sql(rules: list[Rule]) -> str:
    """The funnel as one ``FILTER`` aggregate per stage over cumulative predicates.

    The measured alternative to ``funnel``'s single GROUP BY over the computed first failing rule
    (this benchmark times both; the GROUP BY shape is the one corpus-lab uses).
    A group rule becomes a window partitioned by its signal and by "alive before this stage"; the
    near-dedup rule (components over edges, not SQL) is left out.

    >>> rules = [Rule("gopher_quality", "gq_words", ">=", 50, "too_short"),
    ...          Rule("exact_dedup", "content_hash", "first_in_group", None, "duplicate")]
    >>> print(funnel_filter_shape_sql(rules))  # doctest: +NORMALIZE_WHITESPACE
    SELECT count(*) FILTER (WHERE TRUE AND NOT (coalesce("gq_words" >= 50, FALSE))) AS "gopher_quality",
      count(*) FILTER (WHERE TRUE AND coalesce("gq_words" >= 50, FALSE)
        AND NOT (("content_hash" IS NOT NULL AND _rn0 = 1))) AS "exact_dedup"
    FROM (SELECT "doc_id", "gq_words", "content_hash", row_number() OVER (PARTITION BY "content_hash",
      (TRUE AND coalesce("gq_words" >= 50, FALSE)) ORDER BY doc_id) AS _rn0 FROM signals)
    """
    stages = list(dict.fromkeys(r.stage for r in rules))
    cols = list(dict.fromkeys(["doc_id", *(c for r in rules for c in r.columns)]))
    alive = "TRUE"
    aggs, windows = [], []
    for stage in stages:
        conds = []
        for r in (x for x in rules if x.stage == stage and x.op != "first_in_cluster"):  # near dedup: not SQL
            if r.op == "first_in_group":
                w = f"_rn{len(windows)}"
                windows.append(f"row_number() OVER (PARTITION BY {ident(r.signal)}, ({alive}) ORDER BY doc_id) AS {w}")
                conds.append(f"({ident(r.signal)} IS NOT NULL AND {w} = 1)")
            else:
                conds.append(query.predicate(r))
        passes = " AND ".join(conds) if conds else "TRUE"
        aggs.append(f"count(*) FILTER (WHERE {alive} AND NOT ({passes})) AS {ident(stage)}")
        alive = f"{alive} AND {passes}"
    inner = f"SELECT {', '.join(map(ident, cols))}{''.join(', ' + w for w in windows)} FROM signals"
    return f"SELECT {', '.join(aggs)} FROM ({inner})"


def resample(source: pa.Table, n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    t = source.take(rng.integers(0, source.num_rows, n))
    ids = np.arange(n, dtype=np.int64) * 2654435761 % (2**62) + seed * n
    uniq = rng.integers(0, 2**62, n)
    copy = rng.random(n) < 0.15
    hashes = np.where(copy, uniq[rng.integers(0, max(n // 20, 1), n)], uniq)
    t = t.set_column(t.schema.get_field_index("doc_id"), "doc_id", pa.array(ids))
    return t.set_column(t.schema.get_field_index("content_hash"), "content_hash", pa.array(hashes))


def synth(n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    cols = {}
    for f in signals_schema():
        name = f.name
        if name == "doc_id":
            cols[name] = np.arange(n, dtype=np.int64) * 2654435761 % (2**62) + seed * n
        elif name == "source":
            cols[name] = rng.choice(["web/a.jsonl", "web/b.jsonl", "books/c.parquet", "code/d.jsonl"], n)
        elif name == "lang":
            cols[name] = rng.choice(["en", "en", "en", "en", "de", "fr", "zh"], n)
        elif name == "drop_reason":
            cols[name] = pa.nulls(n, pa.string())
        elif name == "content_hash":
            # 85% unique contents; 15% copies of one of 5% of the documents
            uniq = rng.integers(0, 2**62, n)
            copy = rng.random(n) < 0.15
            cols[name] = np.where(copy, uniq[rng.integers(0, max(n // 20, 1), n)], uniq)
        elif pa.types.is_integer(f.type):
            cols[name] = rng.poisson(60 if name in ("gq_words", "chars", "bytes") else 3, n).astype(np.int64)
        else:
            cols[name] = rng.beta(2, 8, n) if "frac" in name or "ratio" in name else rng.gamma(4, 1.2, n)
    cols["lang_score"] = rng.beta(8, 1.5, n)
    cols["gq_words"] = rng.lognormal(5.5, 1.0, n).astype(np.int64)
    cols["c4_lorem_ipsum"] = (rng.random(n) < 0.01).astype(np.int64)
    cols["c4_curly_brace"] = (rng.random(n) < 0.05).astype(np.int64)
    cols["c4_sentences"] = rng.poisson(12, n).astype(np.int64)
    cols["pii_total"] = rng.poisson(0.2, n).astype(np.int32)
    return pa.table(cols, schema=signals_schema())


def write_run(root: Path, rows: int, from_run: str) -> RunLayout:
    """A run directory of ``rows`` signal rows resampled from ``from_run`` ('' = random signals)."""
    layout = RunLayout(root)
    layout.make()
    source = pa.concat_tables(pq.read_table(p) for p in sorted(Path(from_run, "signals").glob("part-*.parquet"))) \
        if from_run else None
    for i, start in enumerate(range(0, rows, CHUNK)):
        m = min(CHUNK, rows - start)
        write_parquet(resample(source, m, i) if source is not None else synth(m, seed=i), layout.part("signals", f"{i:05d}"))
    for kind, schema in (("docs", DOCS_SCHEMA), ("rejects", REJECTS_SCHEMA)):
        write_parquet(schema.empty_table(), layout.part(kind, "00000"))
    return layout


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--from-run", default="runs/sample", help="resample this run's signals ('' = random signals)")
    ap.add_argument("--out", default="bench/out/funnel_query.json")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        layout = write_run(Path(tmp) / "run", args.rows, args.from_run)
        t0 = time.perf_counter()
        run = query.open_run(layout.root, in_memory=True)
        load_s = time.perf_counter() - t0
        cfg = Config()
        rules = ruleset(cfg)
        filter_sql = funnel_filter_shape_sql(rules)
        cur = run.cursor()
        # same answer from both shapes
        f = query.funnel(run, cfg)
        by_stage = dict(zip(f["stage"], f["docs_dropped"]))
        alt = dict(zip([d[0] for d in cur.execute(filter_sql).description], cur.execute(filter_sql).fetchone()))
        assert all(by_stage[k] == v for k, v in alt.items()), (by_stage, alt)
        timings = {"group_by_first_failure": [], "filter_aggregate_per_stage": [], "slider_move": []}
        for _ in range(args.repeat):
            run.memo.clear()  # cold: every rule on every row
            t = time.perf_counter(); query.funnel(run, cfg); timings["group_by_first_failure"].append(time.perf_counter() - t)
            t = time.perf_counter(); cur.execute(filter_sql).fetchall(); timings["filter_aggregate_per_stage"].append(time.perf_counter() - t)
        # a slider: every query moves one threshold of one stage to a value not used before (as a user
        # dragging it does), after a first funnel of the default config
        run.memo.clear()
        query.funnel(run, cfg)
        sliders = [("gopher_quality", "min_words", 50, 1), ("gopher_repetition", "max_dup_line_frac", 0.3, -0.002),
                   ("fineweb", "max_short_line_ratio", 0.67, -0.002), ("language", "min_score", 0.65, 0.002)]
        stages: dict = {}
        for i in range(args.repeat):
            stage, key, start, step = sliders[i % len(sliders)]
            stages.setdefault(stage, {})[key] = start + step * (i // len(sliders) + 1)
            moved = build(Config, {"stages": stages})
            t = time.perf_counter(); query.funnel(run, moved); timings["slider_move"].append(time.perf_counter() - t)
    res = {"rows": args.rows, "source": args.from_run or "random", "load_seconds": round(load_s, 3), "kept": int(f["docs_out"][-1]),
           **{k: {"median_ms": round(1000 * statistics.median(v), 1),
                  "p95_ms": round(1000 * sorted(v)[int(0.95 * (len(v) - 1))], 1)} for k, v in timings.items()}}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=1))
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
