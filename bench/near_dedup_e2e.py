"""End-to-end near dedup through `corpus-lab run` on >= 100k real-text documents, and its quality.

Input: the corpus of ``bench/neardup_corpus.py`` (bench/out/neardup/docs.jsonl, 100k documents of
real text with seeded near-duplicates; truth.parquet holds every pair with exact 5-gram Jaccard
>= 0.5). The run is the real thing: `lab.engine.run` on a LocalCluster (2 single-threaded worker
processes), every stage annotated, then the LSH shuffle (one reduce task per partition-sized
bucket), the spanning-forest merges and the grid clusters.

Reported:
- wall time of the whole run and of the near-dedup shuffle + clusters; CPU seconds of the
  signatures (the near_dedup stage inside annotate); peak RSS of each worker process;
- precision / recall at Jaccard >= 0.8 of (a) the clusters: document pairs in one cluster at
  0.8 (exact copies share a node) against pairs with exact Jaccard >= 0.8; (b) the candidate
  edges whose estimated Jaccard is >= 0.8, against the same truth.

    .venv/bin/python bench/neardup_corpus.py             # once: bench/out/neardup/
    .venv/bin/python bench/near_dedup_e2e.py [--workers 2] [--partition-mb 16]
    .venv/bin/python bench/near_dedup_e2e.py --exact-jaccard --out bench/out/near_dedup_e2e_exact.json
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import time
from pathlib import Path

import pyarrow.parquet as pq

from lab import engine, query
from lab.config import Config, EngineConfig, IngestConfig, InputConfig, StagesConfig, build


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def pairs_of_groups(group: dict[int, object]) -> set[tuple[int, int]]:
    members: dict[object, list[int]] = {}
    for d, g in group.items():
        members.setdefault(g, []).append(d)
    out = set()
    for docs in members.values():
        docs.sort()
        out.update((a, b) for i, a in enumerate(docs) for b in docs[i + 1:])
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default="bench/out/neardup")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--partition-mb", type=float, default=16.0)
    ap.add_argument("--runs", default="bench/out/runs")
    ap.add_argument("--exact-jaccard", action="store_true", help="edges carry the exact Jaccard of the shingle sets")
    ap.add_argument("--out", default="bench/out/near_dedup_e2e.json")
    args = ap.parse_args()
    src = Path(args.corpus) / "docs.jsonl"
    stages = build(StagesConfig, {"near_dedup": {"exact_jaccard": args.exact_jaccard}})
    cfg = Config(name="neardup-exact" if args.exact_jaccard else "neardup", output_dir=args.runs,
                 inputs=(InputConfig(str(src)),), ingest=IngestConfig(partition_bytes=int(args.partition_mb * 2**20)),
                 stages=stages, engine=EngineConfig(n_workers=args.workers))
    shutil.rmtree(cfg.run_dir, ignore_errors=True)  # a fresh run: nothing reused
    with engine.client_for(cfg) as client:
        t = time.perf_counter()
        m = engine.run(cfg, progress=True, overwrite=True, client=client)
        wall = time.perf_counter() - t
        rss = client.run(_peak_rss_mb)
    r = query.open_run(cfg.run_dir)
    cur = r.cursor()
    ids = dict(cur.execute("SELECT record_id, doc_id FROM docs").fetchall())
    node = dict(cur.execute("SELECT doc_id, content_hash FROM signals WHERE nd_shingles > 0").fetchall())
    c80 = dict(cur.execute("SELECT node, c80 FROM clusters WHERE c80 IS NOT NULL").fetchall())
    group = {d: c80.get(h) or ("node", h) for d, h in node.items()}

    truth = pq.read_table(Path(args.corpus) / "truth.parquet").to_pydict()
    true80 = set()
    for a, b, j in zip(truth["id_a"], truth["id_b"], truth["jaccard"]):
        if j >= 0.8:
            x, y = sorted((ids[a], ids[b]))
            true80.add((x, y))
    found = pairs_of_groups(group)
    edges = {(min(h, g), max(h, g)) for h, g in cur.execute("SELECT u, v FROM edges WHERE jaccard >= 0.8 - 1e-9").fetchall()}
    by_node: dict[int, list[int]] = {}
    for d, h in node.items():
        by_node.setdefault(h, []).append(d)
    edge_pairs = set()
    for h, g in edges:
        edge_pairs.update((min(a, b), max(a, b)) for a in by_node[h] for b in by_node[g])
    edge_pairs |= {p for p in pairs_of_groups({d: ("node", h) for d, h in node.items()})}

    def pr(pred: set) -> dict:
        hit = len(pred & true80)
        return {"predicted_pairs": len(pred), "true_pairs": len(true80), "precision": round(hit / max(len(pred), 1), 4),
                "recall": round(hit / max(len(true80), 1), 4)}

    dd = m["near_dedup"]
    res = {"corpus": str(src), "exact_jaccard": args.exact_jaccard, "docs": m["totals"]["docs"], "mb": round(m["totals"]["bytes"] / 1e6, 1),
           "workers": args.workers, "partitions": len(m["partitions"]), "buckets": dd.get("buckets"),
           "run_wall_s": round(wall, 1), "dedup_shuffle_and_clusters_wall_s": dd.get("seconds"),
           "signature_cpu_s": m["stage_cpu_seconds"].get("near_dedup"),
           "signature_docs_per_cpu_s": round(m["totals"]["docs"] / m["stage_cpu_seconds"]["near_dedup"], 1),
           "clustered_nodes": dd.get("nodes"), "candidate_edges": cur.execute("SELECT count(*) FROM edges").fetchone()[0],
           "worker_peak_rss_mb": sorted(round(v, 1) for v in rss.values()),
           "clusters_at_0.8": pr(found), "edges_at_0.8": pr(edge_pairs),
           "funnel_near_dedup_dropped": next(x["docs_dropped"] for x in m["funnel"] if x["stage"] == "near_dedup")}
    Path(args.out).write_text(json.dumps(res, indent=1))
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
