"""Scaling with workers, and the serial seconds that limit it: the same run on a LocalCluster of each
``--workers`` count, one fresh run directory and one process each, then Amdahl's projection.

Each run is ``corpus-lab``'s whole default pipeline (explore) over ``--input``; its wall time counts the
cluster's start and stop. The serial seconds by phase come from the manifest's ``last_run.timeline``: a
phase's wall time less the time its tasks were running (listing and fingerprints, the cluster's start,
the tokenizer fit, the driver's work between task waves, the cluster's stop). The projection to
``--project`` workers takes the one-worker run apart into serial seconds S and the rest P and gives
S + P / N: a projection from measured figures, not a measurement.

    .venv/bin/python bench/scaling.py --input bench/out/docs_en.jsonl --workers 1 2 [--project 16] [--partition-mb 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ONE = """
import json, sys, time
from lab import engine
from lab.config import Config, EngineConfig, InputConfig
from lab.io.inputs import IngestConfig
inp, out, n, mb = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
ingest = IngestConfig(partition_bytes=int(mb * 2**20)) if mb else IngestConfig()
cfg = Config(name=f"w{n}", output_dir=out, inputs=(InputConfig(path=inp),), ingest=ingest, engine=EngineConfig(n_workers=n))
t = time.perf_counter()
m = engine.run(cfg, progress=False, overwrite=True)
print(json.dumps({"wall_s": time.perf_counter() - t, "timeline": m["last_run"]["timeline"],
                  "partitions": len(m["partitions"]),
                  "docs": m["totals"]["docs"], "executor": m["last_run"]["steps"]["executor"]}))
"""


def run(inp: str, workers: int, out: str, partition_mb: float = 0) -> dict:
    r = subprocess.run([sys.executable, "-c", ONE, inp, out, str(workers), str(partition_mb)], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    if r.returncode != 0:
        raise SystemExit(r.stderr[-3000:])
    got = json.loads(r.stdout.strip().splitlines()[-1])
    got["serial_s"] = round(sum(p["serial"] for p in got["timeline"].values()), 2)
    got["workers"] = workers
    return got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--input", required=True, help="a file, directory or glob of documents")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--project", type=int, default=16, help="workers to project the one-worker run to")
    ap.add_argument("--partition-mb", type=float, default=0,
                    help="ingest.partition_bytes in MiB (0: the default, 64); a small input needs smaller partitions "
                         "to have one per worker")
    ap.add_argument("--out", default="bench/out/scaling.json")
    args = ap.parse_args()
    runs = []
    with tempfile.TemporaryDirectory(prefix="scaling-") as tmp:
        for n in args.workers:
            started = time.time()
            r = run(args.input, n, tmp, args.partition_mb)
            print(f"{n} worker(s): {r['wall_s']:.1f} s wall, serial {r['serial_s']:.1f} s "
                  f"({time.time() - started:.0f} s with the process)", flush=True)
            runs.append(r)
    base = next((r for r in runs if r["workers"] == 1), None)
    summary = {"input": args.input, "load_avg": os.getloadavg(), "runs": runs}
    if base is not None:
        s, p = base["serial_s"], base["wall_s"] - base["serial_s"]
        summary["speedup"] = {str(r["workers"]): round(base["wall_s"] / r["wall_s"], 3) for r in runs}
        summary["projection"] = {"workers": args.project, "serial_s": s, "parallel_s": round(p, 2),
                                 "wall_s": round(s + p / args.project, 2),
                                 "speedup": round(base["wall_s"] / (s + p / args.project), 2)}
        print("serial seconds by phase (1 worker):",
              {k: v["serial"] for k, v in base["timeline"].items() if v["serial"] >= 0.05})
        print("speedup:", summary["speedup"], "projected:", summary["projection"])
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(summary, indent=1) + "\n")


if __name__ == "__main__":
    main()
