"""Document viewer, histograms and change counts at N documents (DuckDB, in-memory signals table).

Builds a run of N documents whose signals are resampled from a real run (default: the synthetic
sample run made by ``corpus-lab run``; 15% of rows exact copies of 5% of the others, as
bench/dashboard_latency.py does), with token counts, the texts of the first 20,000 documents and
synthetic near-duplicate edges (chains of 2-6 nodes over 3% of the contents, Jaccard uniform in
0.5..1) with their grid clusters. Opens it in memory as the dashboard does, computes the run's
funnel (the dashboard always has), then times, each the median of ``--repeat`` calls:

- ``documents`` (a page of 20 with texts) for every view and stage, at offset 0 and 1,000;
  ``document_count`` and ``document_filters`` for the same;
- ``histogram`` of every numeric knob's signal;
- ``change`` after a threshold move (one knob moved to a value not used before; the funnel of the
  new config is computed first, as the dashboard does on slider release), and a near-dedup move.

    .venv/bin/python bench/query_browse.py --src /path/to/run [--rows 1000000] [--dir /tmp/run1m]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

from dashboard_latency import build_run  # the same 1M-document run (bench/ is on the path when run)
from lab import query
from lab.config import Config, build
from lab.select.knobs import knobs

TEXTS = 20_000  # documents with a text: the viewer's pages near the start of the sample order


CPU: list[float] = []  # process CPU ms of every timed call (DuckDB's threads included), beside the wall time


def timed(fn, repeat: int) -> tuple[float, object]:
    """Median wall ms of ``repeat`` calls (their median CPU ms goes to ``CPU``: on a shared machine the
    wall time also holds the waits for a core)."""
    times, cpu, out = [], [], None
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        out = fn()
        times.append((time.perf_counter() - t) * 1000)
        cpu.append((time.process_time() - c) * 1000)
    CPU.append(statistics.median(cpu))
    return statistics.median(times), out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", type=Path, required=True)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--dir", type=Path, default=Path("/tmp/query_browse_run"))
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    if not (a.dir / "config.yaml").exists():
        t = time.perf_counter()
        build_run(a.src, a.dir, a.rows, texts=TEXTS)
        print(f"built {a.rows} rows in {time.perf_counter() - t:.1f}s")
    print(f"load average at start: {os.getloadavg()[0]:.2f} (2 cores)")
    t = time.perf_counter()
    r = query.open_run(a.dir, in_memory=True)
    cfg = r.config or Config()
    query.funnel(r, cfg)
    print(f"open + funnel: {time.perf_counter() - t:.2f}s")
    res: dict[str, dict] = {"rows": a.rows, "documents": {}, "count": {}, "filters": {}, "histogram": {}, "change": {}}
    moved = build(Config, {"stages": {"gopher_quality": {"min_alpha_words_ratio": 0.81}}})  # one slider step
    query.funnel(r, moved)
    views = [("dropped", None), ("kept", None), *[("dropped", s) for s in query.STAGE_NAMES],
             ("newly_dropped", None), ("newly_kept", None)]
    for view, stage in views:
        kw = {"view": view, "stage": stage, "previous": cfg if view.startswith("newly") else None}
        target = moved if view.startswith("newly") else cfg
        name = f"{view}:{stage}" if stage else view
        # page 0 of a newly_* view: the pair evaluated afresh (not remembered); the others: remembered
        ms0, _ = timed(lambda t=target, k=kw: (query.browse._changes_memo.clear(), query.documents(r, t, **k))[1],
                       a.repeat)
        ms1, _ = timed(lambda t=target, k=kw: query.documents(r, t, offset=1000, **k), a.repeat)
        msc, n = timed(lambda t=target, k=kw: query.document_count(r, t, **k), a.repeat)
        msf, _ = timed(lambda t=target, k=kw: query.document_filters(r, t, **k), a.repeat)
        res["documents"][name] = {"page0_ms": round(ms0, 1), "page0_cpu_ms": round(CPU[-4], 1),
                                  "page1000_ms": round(ms1, 1), "docs": n}
        res["count"][name], res["filters"][name] = round(msc, 1), round(msf, 1)
        print(f"{name:28s} n={n:8d} page@0 {ms0:6.1f} ms (cpu {CPU[-4]:6.1f})  page@1000 {ms1:6.1f} ms  "
              f"count {msc:6.1f} ms  filters {msf:6.1f} ms")
    for k in knobs(cfg, query.signal_ranges(r)):
        if k.signal and k.signal not in res["histogram"]:
            query.bin_edges(r, k.signal)  # the edges' percentiles: once per run and signal
            ms, _ = timed(lambda s=k.signal: query.histogram(r, cfg, s), a.repeat)
            res["histogram"][k.signal] = {"ms": round(ms, 1), "cpu_ms": round(CPU[-1], 1)}
            print(f"histogram {k.signal:28s} {ms:6.1f} ms (cpu {CPU[-1]:6.1f})")
    # slider steps (round increments, as the dashboard's sliders step), then switches: c4 off (a rule
    # set present in one config only: its failing documents are the candidates), exact dedup off (a
    # group rule switched: every document evaluated)
    steps = [("gopher_quality", "min_alpha_words_ratio", [0.81, 0.82, 0.83, 0.84, 0.85]),
             ("language", "min_score", [0.66, 0.67, 0.68, 0.69, 0.7]),
             ("gopher_quality", "min_words", [60, 70, 80, 90, 100]),
             ("fineweb", "max_short_line_ratio", [0.66, 0.65, 0.64, 0.63]),
             ("near_dedup", "threshold", [0.85, 0.9, 0.95, 0.7]),
             ("c4", "enabled", [False, True]),
             ("exact_dedup", "enabled", [False, True])]
    for stage, key, values in steps:
        warm, warm_cpu, cold, moved_docs = [], [], [], []
        prev = cfg
        for val in values:
            new = build(Config, {"stages": {stage: {key: val}}})
            t = time.perf_counter()
            query.change(r, prev, new)  # cold: the new config's near-dedup drops not yet remembered
            cold.append((time.perf_counter() - t) * 1000)
            query.funnel(r, new)
            query.browse._changes_memo.clear()  # time the evaluation, not the remembered answer
            ms, out = timed(lambda p=prev, n=new: (query.browse._changes_memo.clear(), query.change(r, p, n))[1],
                            a.repeat)
            warm.append(ms)
            warm_cpu.append(CPU[-1])
            moved_docs.append(out["dropped"]["docs"] + out["kept"]["docs"])
            prev = new
        res["change"][f"{stage}.{key}"] = {"after_funnel_ms": round(statistics.median(warm), 1),
                                           "after_funnel_cpu_ms": round(statistics.median(warm_cpu), 1),
                                           "cold_ms": round(statistics.median(cold), 1),
                                           "docs_changed_median": int(statistics.median(moved_docs))}
        print(f"change {stage}.{key:24s} after funnel {statistics.median(warm):6.1f} ms "
              f"(cpu {statistics.median(warm_cpu):6.1f})  cold {statistics.median(cold):6.1f} ms"
              f"  docs changed (median) {int(statistics.median(moved_docs))}")
    res["load_avg_end"] = os.getloadavg()[0]
    if a.out:
        a.out.write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
