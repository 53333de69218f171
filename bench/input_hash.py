"""What checking input content costs against annotating it.

A rerun reuses a partition only when its files' SHA-256 is unchanged (``lab.io.partitions.fingerprint``),
so every run reads its inputs once more to hash them. This prints, for a finished run, the CPU time of
hashing its input files and the CPU time its annotate step spent on them (the manifest's per-stage
CPU seconds), and the share one is of the other.

    .venv/bin/python bench/input_hash.py runs/sample [--out bench/out/input_hash.json]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from lab.io.partitions import content_hash


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run", help="a finished run directory")
    ap.add_argument("--repeat", type=int, default=5, help="hash the inputs this many times (the best is kept)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    import pyarrow.parquet as pq

    m = json.loads((Path(args.run) / "manifest.json").read_text())
    listing = pq.read_table(Path(args.run) / "inputs.parquet").to_pylist()  # every file read, with its SHA-256
    files = [i["path"] for i in listing if i["skipped"] is None]
    size = sum(os.path.getsize(f) for f in files)
    best = float("inf")
    for _ in range(args.repeat):
        t = time.process_time()
        for f in files:
            content_hash(f)
        best = min(best, time.process_time() - t)
    annotate = sum(m["stage_cpu_seconds"].values())
    out = {"run": args.run, "files": len(files), "bytes": size, "hash_cpu_s": round(best, 4),
           "hash_mb_per_s": round(size / best / 1e6, 1) if best else None, "annotate_cpu_s": round(annotate, 3),
           "hash_share_of_annotate": round(best / annotate, 6) if annotate else None}
    print(json.dumps(out, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
