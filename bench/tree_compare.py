"""This tree's whole corpus-lab run against another commit's, on the same documents: CPU per run, and the outputs compared.

What it measures: a fresh ``corpus-lab run --in-process`` (batch or explore) of the same input by two
checkouts in turn (A B A B ..., --rounds pairs): this working tree (A) and a ``git worktree`` of
--base (B), both with this venv's interpreter and packages, each importing its own ``lab``
(``python -m lab.cli`` from its root). CPU seconds are ``getrusage(RUSAGE_CHILDREN)`` deltas around
each run (user + sys, what ``/usr/bin/time -v`` reports for the command); the ratio A/B is taken pair
by pair and its median printed. After the rounds it compares the two runs' outputs file by file:
every file but the run's own timings and costs (``stats/timing-*``, ``stats/costs/``, done records,
``manifest.json``, ``config.yaml``, ``tokenizer/fit.json``) must be byte-identical.

    .venv/bin/python bench/run.py tree_compare --base 58bd72a --input bench/out/docs_en.jsonl --mode batch --rounds 5
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKIP = ("stats/timing-", "stats/costs/", "done.json", "manifest.json", "config.yaml", "tokenizer/fit.json")


def run_once(tree: Path, cfg: Path, out: Path) -> float:
    shutil.rmtree(out, ignore_errors=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-m", "lab.cli", "run", "--config", str(cfg), "--in-process", "--no-progress"],
                   cwd=tree, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def differing(a: Path, b: Path) -> list[str]:
    out = []
    for f in sorted(p for p in a.rglob("*") if p.is_file()):
        rel = f.relative_to(a).as_posix()
        if any(s in rel for s in SKIP):
            continue
        g = b / rel
        if not g.is_file() or not filecmp.cmp(f, g, shallow=False):
            out.append(rel)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, help="the commit to compare with (a git worktree of it is made)")
    ap.add_argument("--input", required=True, help="a JSONL file of {id, text} records")
    ap.add_argument("--mode", choices=("batch", "explore"), default="batch")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", help="write the figures here")
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tree_compare_"))
    base = work / "base"
    subprocess.run(["git", "worktree", "add", "--detach", str(base), a.base], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)
    try:
        trees = {"this": ROOT, "base": base}
        cfgs = {}
        for name in trees:
            cfgs[name] = work / f"{name}.yaml"
            cfgs[name].write_text(json.dumps({"name": name, "output_dir": str(work / "runs"), "mode": a.mode,
                                              "inputs": [{"path": str(Path(a.input).resolve())}]}))
        cpu: dict[str, list[float]] = {"this": [], "base": []}
        for i in range(a.rounds + 1):  # the first pair warms the page cache, not counted
            for name, tree in trees.items():
                s = run_once(tree, cfgs[name], work / "runs" / name)
                if i:
                    cpu[name].append(s)
            if i:
                print(f"round {i}: this {cpu['this'][-1]:.2f} CPU-s, base {cpu['base'][-1]:.2f} CPU-s", flush=True)
        ratios = [x / y for x, y in zip(cpu["this"], cpu["base"])]
        diff = differing(work / "runs" / "this", work / "runs" / "base")
        out = {"mode": a.mode, "input": a.input, "base": a.base, "rounds": a.rounds, "cpu_s": cpu,
               "median_cpu_s": {k: statistics.median(v) for k, v in cpu.items()},
               "ratio_this_over_base": {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios)},
               "outputs_differing": diff, "load_average": os.getloadavg()}
        print(json.dumps(out, indent=1))
        if a.json:
            Path(a.json).write_text(json.dumps(out, indent=1) + "\n")
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=ROOT, check=False)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
