"""Peak resident memory of each kind of worker task, one task per fresh process, on run
directories of two corpus sizes (the memory bound: a task's memory must not grow with the corpus).

For a finished run directory of ``bench/scale_pipeline.py`` (e.g. ``scale-16f-2w``, a quarter, and
``scale-64f-2w``, the full corpus), each task below runs alone in a new Python process that has
imported corpus-lab; its figure is the process's ``VmHWM`` (the kernel's peak resident set, exact)
minus nothing: what a worker process needs for that task, imports included.

- ``annotate``: ``annotate_partition`` of the first input file into a scratch run directory;
- ``reduce``: ``dedup.reduce_bucket`` of bucket 0 (the LSH shuffle's reduce; it reads every
  partition's bucket-0 records and the signatures of its candidate pairs);
- ``tokenize``: ``tokenize.tokenize_partition`` of the first partition (rewrites the same bytes);
- ``scatter`` / ``shard``: materialize's two tasks (the first partition's kept tokens by shard;
  shard 0 of train from every partition), after ``materialize.prepare`` on the driver;
- ``clusters``: the spanning-forest merge tree and ``write_clusters`` (O(clustered documents)).

    .venv/bin/python bench/task_memory.py bench/out/scale_runs/scale-16f-2w bench/out/scale_runs/scale-64f-2w

Prints a table and writes ``bench/out/task_memory.json``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

KINDS = ("annotate", "reduce", "tokenize", "scatter", "shard", "clusters")

TASK = r'''
import re, shutil, sys, tempfile
from pathlib import Path
from lab import config
from lab.tokens import materialize
from lab import dedup
from lab.tokens import tokenize
from lab.annotate import annotate_partition
from lab.io.partitions import plan
from lab.io.run import RunLayout
from lab.io.writers import read_json
run, kind = sys.argv[1], sys.argv[2]
lay = RunLayout(Path(run))
cfg = config.load(lay.config)
keys = sorted(p.name[5:-5] for p in lay.stats.glob("part-*.json"))
if kind == "annotate":
    part = plan(cfg.inputs[:1], cfg.ingest)[0]
    scratch = Path(tempfile.mkdtemp())
    RunLayout(scratch).make()
    annotate_partition(part, cfg, str(scratch), len(keys))
    shutil.rmtree(scratch)
elif kind == "reduce":
    dedup.reduce_bucket(run, 0, keys, cfg.stages.near_dedup)
elif kind == "tokenize":
    tokenize.tokenize_partition(run, keys[0], read_json(lay.tokenizer_fit)["sha256"])
elif kind in ("scatter", "shard"):
    import pickle
    job = pickle.loads(Path(sys.argv[3]).read_bytes())
    if kind == "scatter":
        materialize.scatter_partition(run, job.keys[0], job.sha256, (job.dest_doc, job.dest_batch), job.n_batches)
    else:
        materialize.write_one_shard(run, job.keys, job.shards[0], job.dtype, job.eod, job.pad_id)
elif kind == "clusters":
    forests = [dedup.reduce_bucket(run, b, keys, cfg.stages.near_dedup) for b in range(len(keys))]
    while len(forests) > 1:
        forests = [dedup.merge_forests(*forests[i:i + 2]) if i + 1 < len(forests) else forests[i]
                   for i in range(0, len(forests), 2)]
    dedup.write_clusters(run, forests[0])
st = open("/proc/self/status").read()
print(int(re.search(r"VmHWM:\s+(\d+)", st).group(1)) // 1024)
'''


def measure(run: Path, kind: str, job_file: Path) -> int:
    r = subprocess.run([sys.executable, "-c", TASK, str(run), kind, str(job_file)], capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"{kind} on {run}: {r.stderr[-2000:]}")
    return int(r.stdout.strip().splitlines()[-1])


def prepare_job(run: Path) -> Path:
    """materialize.prepare (the driver's part) and every partition scattered, for the shard task."""
    import pickle

    from lab import config

    from lab.tokens import materialize
    from lab.io.run import RunLayout

    lay = RunLayout(run)
    cfg = config.load(lay.config)
    job = materialize.prepare(cfg, lay)
    materialize.start(lay)
    for k in job.keys:
        materialize.scatter_partition(str(run), k, job.sha256, (job.dest_doc, job.dest_batch), job.n_batches)
    path = run.parent / f".{run.name}.job.pickle"
    path.write_bytes(pickle.dumps(job))
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path, help="finished run directories of bench/scale_pipeline.py")
    runs = [run.resolve() for run in ap.parse_args().runs]
    out: dict[str, dict[str, int]] = {}
    for run in runs:
        job = prepare_job(run)
        docs = json.loads((run / "manifest.json").read_text())["totals"]["docs"]
        out[run.name] = {"docs": docs, **{k: measure(run, k, job) for k in KINDS}}
        from lab.tokens import materialize
        from lab.io.run import RunLayout

        materialize.start(RunLayout(run))  # remove the scattered files
        job.unlink()
        print(run.name, out[run.name], flush=True)
    names = list(out)
    print("| task | " + " | ".join(f"{n} ({out[n]['docs']:,} docs)" for n in names) + " |")
    print("|---|" + "---:|" * len(names))
    for k in KINDS:
        print(f"| {k} | " + " | ".join(f"{out[n][k]} MB" for n in names) + " |")
    Path(__file__).with_name("out").joinpath("task_memory.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
