"""End-to-end annotate throughput through the engine: documents/s and MB/s with 1 and 2 workers.

Runs ``lab.engine.run`` (LocalCluster of worker processes, one thread each) on one JSONL file
(default bench/out/docs_en.jsonl) split into byte-range partitions, from a fresh run directory
each time, and reports wall time, docs/s, MB/s, per-core figures and the 2-vs-1 speedup.
Cluster start-up is excluded (the cluster is started first, then timed runs are submitted).

    .venv/bin/python bench/engine_throughput.py [--input FILE] [--partition-mb 2]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from lab import engine
from lab.config import Config, EngineConfig, IngestConfig, InputConfig


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--input", default="bench/out/docs_en.jsonl")
    ap.add_argument("--partition-mb", type=float, default=2.0)
    ap.add_argument("--out", default="bench/out/engine_throughput.json")
    args = ap.parse_args()
    size = Path(args.input).stat().st_size
    docs = sum(1 for _ in open(args.input, "rb"))
    res = {"input": args.input, "docs": docs, "mb": round(size / 1e6, 3), "runs": {}}
    for workers in (1, 2):
        with tempfile.TemporaryDirectory() as tmp:
            cfg = Config(name=f"w{workers}", output_dir=tmp, inputs=(InputConfig(args.input),),
                         ingest=IngestConfig(partition_bytes=int(args.partition_mb * 2**20)),
                         engine=EngineConfig(n_workers=workers))
            with engine.client_for(cfg) as client:
                client.run(lambda: __import__("lab.text.langid").text.langid.model() and None)  # warm workers
                t = time.perf_counter()
                m = engine.run(cfg, progress=False, client=client)
                wall = time.perf_counter() - t
        res["runs"][workers] = {"partitions": len(m["partitions"]), "wall_s": round(wall, 2),
                                "docs_per_s": round(docs / wall, 1), "mb_per_s": round(size / 1e6 / wall, 3),
                                "docs_per_s_per_core": round(docs / wall / workers, 1)}
    res["speedup_2_vs_1"] = round(res["runs"][1]["wall_s"] / res["runs"][2]["wall_s"], 2)
    Path(args.out).write_text(json.dumps(res, indent=1))
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
