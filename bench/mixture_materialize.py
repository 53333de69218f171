"""Materialize with a mixture: CPU-seconds per GB of written tokens, per core, against no mixture.

A copy of a run (default ``runs/sample``) is materialized in this process (one core: ``lab.tokens.materialize.run``)
under its own config, then under mixtures that upsample every language bucket to ``--epochs`` (copies of
whole documents) and that downsample it to a half. Each is timed by CPU time (``time.process_time``) of the
materialize call alone, three times; the written tokens are read from the split manifests. Prints JSON.

    .venv/bin/python bench/mixture_materialize.py --run runs/sample --out bench/out/mixture_materialize.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from lab import query

from lab.tokens import materialize
from lab.config import load
from lab.io.run import RunLayout
from lab.tokens.shards import read_manifest
from lab.tokens.mixture import BucketTarget, MixtureConfig


def written(layout: RunLayout) -> tuple[int, int]:
    """(real tokens, bytes on disk of the .bin files) over both splits."""
    toks = size = 0
    for split in ("train", "val"):
        m = read_manifest(layout.tokens / split)
        toks += sum(i.real_tokens for i in m.shards)
        size += sum((layout.tokens / split / f"{i.name}.bin").stat().st_size for i in m.shards)
    return toks, size


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", default="runs/sample")
    ap.add_argument("--epochs", type=float, default=8.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default="bench/out/mixture_materialize.json")
    a = ap.parse_args()
    res = {"run": a.run, "epochs": a.epochs, "cases": {}}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "run"
        shutil.copytree(a.run, root, ignore=shutil.ignore_patterns("tokens", ".tmp-tokens"))
        base = dataclasses.replace(load(root / "config.yaml"), output_dir=tmp, name="run")
        have = query.mixture_rows(root, dataclasses.replace(base, mixture=MixtureConfig(by=("lang",))))
        totals = {b: int(have.filter(have["bucket"] == b)["n_tokens"].sum()) for b in set(have["bucket"])}
        cases = {"no mixture": base,
                 f"x{a.epochs:g} (upsampled)": dataclasses.replace(base, mixture=MixtureConfig(
                     by=("lang",), buckets=tuple(BucketTarget(b, tokens=int(n * a.epochs)) for b, n in sorted(totals.items())))),
                 "x0.5 (downsampled)": dataclasses.replace(base, mixture=MixtureConfig(
                     by=("lang",), buckets=tuple(BucketTarget(b, tokens=int(n * 0.5)) for b, n in sorted(totals.items()))))}
        for name, cfg in cases.items():
            cpu = []
            for _ in range(a.repeat):
                t0 = time.process_time()
                materialize.run(cfg, RunLayout(root))
                cpu.append(time.process_time() - t0)
            toks, size = written(RunLayout(root))
            sec = statistics.median(cpu)
            res["cases"][name] = {"cpu_s": [round(x, 3) for x in cpu], "tokens_written": toks, "bin_bytes": size,
                                  "cpu_s_per_gb_tokens": round(sec / (size / 1e9), 1),
                                  "tokens_per_cpu_s": round(toks / sec)}
            print(name, json.dumps(res["cases"][name]), flush=True)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
