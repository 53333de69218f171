"""Batch mode's PII scrub and tokenization of the survivors only: what they cost before and after.

What it measures: one batch-mode run of a corpus with the code of a given source tree (``--tree``: this
checkout, or a checkout of an earlier commit), then, on that run, the tokenize step again in this
process (every partition's ``tokenize_partition``, CPU seconds) and the PII stage's CPU seconds as
annotate recorded them (signals and scrub; ``stats/timing-*.json``). It prints and writes a JSON line:
documents stored with text, documents tokenized, tokenize CPU s, pii CPU s, run wall s.

Run it twice, once per tree, on the same input and compare (bench/RESULTS.md §13):

    git worktree add /tmp/before <commit before the change>
    .venv/bin/python bench/batch_survivors.py --tree /tmp/before --input data/sample --out /tmp/bs
    .venv/bin/python bench/batch_survivors.py --tree .            --input data/sample --out /tmp/bs
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

RUNNER = """
import sys, time
from lab import config, engine
cfg = config.load(sys.argv[1])
if __name__ == "__main__":
    engine.run(cfg, progress=False, overwrite=True)
"""

MEASURE = """
import json, sys, time
from pathlib import Path
import pyarrow.parquet as pq
from lab.io.run import RunLayout
from lab.io.writers import read_json
from lab.tokens.tokenize import tokenize_partition
run = Path(sys.argv[1])
layout = RunLayout(run)
sha = read_json(layout.manifest)["tokenizer"]["sha256"]
keys = sorted(p.name[5:-8] for p in layout.docs.glob("part-*.parquet"))
t0 = time.process_time()
tokenized = sum(tokenize_partition(run, k, sha)["documents"] for k in keys)
tok_cpu = time.process_time() - t0
with_text = sum(pq.read_table(layout.part("docs", k), columns=["text"]).column("text").is_valid().to_numpy(
    zero_copy_only=False).sum() for k in keys)
pii = sum(read_json(p)["cpu_seconds"].get("pii", 0.0) for p in (run / "stats").glob("timing-*.json"))
docs = sum(pq.read_metadata(layout.part("docs", k)).num_rows for k in keys)
print(json.dumps({"documents": docs, "stored_with_text": int(with_text), "tokenized": tokenized,
                  "tokenize_cpu_s": round(tok_cpu, 3), "pii_cpu_s": round(pii, 3)}))
"""


def _format(path: Path) -> str:
    """jsonl for a directory of compressed JSONL only (the sample's real/), else by extension."""
    files = [f for f in path.iterdir()] if path.is_dir() else [path]
    return "jsonl" if files and all(f.name.endswith(".jsonl.zst") for f in files) else "auto"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tree", default=".", help="source tree whose lab/ package runs (default: this checkout)")
    ap.add_argument("--input", default="data/sample", help="a file or directory of JSONL documents")
    ap.add_argument("--out", default="/tmp/batch_survivors", help="where the run directory goes")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    tree, out = Path(args.tree).resolve(), Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    name = "run-" + tree.name
    root = Path(args.input).resolve()
    inputs = sorted(d for d in root.iterdir() if d.is_dir()) if root.is_dir() else [root]  # data/sample: real/, synthetic/
    cfg = out / f"{name}.yaml"
    cfg.write_text(f"name: {name}\noutput_dir: {out}\nmode: batch\n"
                   f"inputs: [{', '.join('{path: ' + str(p) + ', format: ' + _format(p) + '}' for p in inputs)}]\n"
                   f"engine: {{n_workers: {args.workers}}}\n")
    env = {**os.environ, "PYTHONPATH": str(tree)}
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", RUNNER, str(cfg)], check=True, env=env, cwd=tree)
    wall = time.perf_counter() - t0
    p = subprocess.run([sys.executable, "-c", MEASURE, str(out / name)], check=True, env=env, cwd=tree,
                       capture_output=True, text=True)
    result = {"tree": str(tree), "input": [str(p) for p in inputs], "run_wall_s": round(wall, 2),
              **json.loads(p.stdout.strip().splitlines()[-1])}
    print(json.dumps(result))
    with open(out / "batch_survivors.jsonl", "a") as f:
        f.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
