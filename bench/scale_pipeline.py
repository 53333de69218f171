"""corpus-lab's whole pipeline at scale: throughput with 1 and 2 workers, peak memory per worker at
two corpus sizes, and the time to resume after the driver is killed.

Input: the corpus of ``bench/scale_corpus.py`` (``bench/out/scale/``: 64 zstd JSONL files of
equal document counts, >= 1M documents, >= 2 GB of text). The quarter corpus is its first 16
files. Every run is the default config (explore mode: every signal of every document, exact and
near dedup, a 32k BPE fitted on a 64 MiB stratified sample, every document tokenized, best-fit
packing at 2048, shards) in a fresh run directory, on a LocalCluster of worker processes with one
thread each; cluster start-up is excluded from the wall time.

What it measures, per run (one subprocess each, so peaks do not carry over):

- wall seconds of ``engine.run`` and of each step (annotate, near dedup, tokenizer fit,
  tokenize, materialize, the final merge; read from the progress of the run directory);
- documents and MB (input text) per second, overall and per worker;
- peak RSS of each worker process: the kernel's high-water mark ``VmHWM`` from
  ``/proc/PID/status``, read on the worker just before the cluster closes (exact, not sampled);
  and the driver's own peak (``ru_maxrss``);
- load average before and after (other work on the machine pollutes the figures).

``resume``: the same run as a ``corpus-lab run`` subprocess, SIGKILLed (its whole process group:
driver, nannies, workers) once half of the partitions are complete, then rerun to completion;
the rerun's wall time is the time to resume, and its outputs are compared byte for byte with
the uninterrupted run of the same size.

    .venv/bin/python bench/scale_pipeline.py one --files 16 --workers 2      # one measured run
    .venv/bin/python bench/scale_pipeline.py resume --files 16 --workers 2
    .venv/bin/python bench/scale_pipeline.py all                             # the RESULTS table

Results go to ``bench/out/scale_pipeline.json`` (one entry per measurement, appended).
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "out" / "scale"
OUT = HERE / "out" / "scale_runs"
RESULTS = HERE / "out" / "scale_pipeline.json"


def _config(files: int, workers: int, name: str):
    from lab.config import Config, EngineConfig, InputConfig

    paths = sorted(CORPUS.glob("scale-*.jsonl.zst"))[:files]
    if len(paths) < files:
        sys.exit(f"bench/out/scale has {len(paths)} files, {files} wanted: run bench/scale_corpus.py first")
    return Config(name=name, output_dir=str(OUT), engine=EngineConfig(n_workers=workers),
                  inputs=tuple(InputConfig(path=str(p), format="jsonl", text_field="text", id_field="id") for p in paths))


def _vm_hwm() -> int:
    """This process's peak resident set size, bytes (Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def _load() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def _step_times(root: Path, started: float) -> dict[str, float]:
    """When each step's last output appeared, seconds after the start (from file times)."""
    def last(pattern: str) -> float | None:
        ts = [p.stat().st_mtime for p in root.glob(pattern)]
        return round(max(ts) - started, 1) if ts else None

    return {"annotate_done": last("stats/part-*.json"), "near_dedup_done": last("dedup/done.json"),
            "tokenizer_fitted": last("tokenizer/fit.json"), "tokenize_done": last("tokenized/part-*.json"),
            "materialize_done": last("stats/packing.json"), "manifest": last("manifest.json")}


def one(files: int, workers: int) -> dict:
    """One fresh run, measured in this process."""
    from lab import engine

    cfg = _config(files, workers, f"scale-{files}f-{workers}w")
    shutil.rmtree(cfg.run_dir, ignore_errors=True)
    load_before = _load()
    with engine.client_for(cfg) as client:
        client.run(_vm_hwm)  # workers are up
        t0 = time.time()
        manifest = engine.run(cfg, client=client, progress=True)
        wall = time.time() - t0
        peaks = sorted(client.run(_vm_hwm).values())
    t = manifest["totals"]
    text_bytes = sum(p["bytes"] for p in manifest["partitions"])
    kept = manifest["funnel"][-1]
    out = {
        "measure": "one", "files": files, "workers": workers, "docs": t["docs"], "rejected": t["rejected"],
        "input_bytes": text_bytes, "doc_bytes": t["bytes"], "wall_s": round(wall, 1),
        "docs_per_s": round(t["docs"] / wall, 1), "docs_per_s_per_worker": round(t["docs"] / wall / workers, 1),
        "mb_per_s": round(t["bytes"] / wall / 1e6, 3), "mb_per_s_per_worker": round(t["bytes"] / wall / 1e6 / workers, 3),
        "kept_docs": kept["docs_out"], "kept_tokens": kept.get("tokens_out"),
        "worker_peak_rss_mb": [round(p / 2**20, 1) for p in peaks],
        "driver_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "steps": _step_times(Path(cfg.run_dir), t0), "stage_cpu_seconds": manifest["stage_cpu_seconds"],
        "tokens": {k: {"documents": v["documents"], "sequences": v["sequences"], "utilization": round(v["utilization"], 4)}
                   for k, v in manifest["tokens"].items()},
        "load_before": load_before, "load_after": _load(),
    }
    return out


def _outputs(root: Path) -> list[str]:
    # the name differs (config.yaml); times and reuse counts are not outputs
    skip = ("stats/timing-", "manifest.json", "tokenizer/fit.json", "dedup/done.json", "config.yaml")
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if p.is_file() and not str(p.relative_to(root)).startswith(skip))


def resume(files: int, workers: int) -> dict:
    """Kill the driver (and its cluster) half way through annotate, rerun, time the rerun."""
    cfg = _config(files, workers, f"scale-{files}f-{workers}w-resume")
    root = Path(cfg.run_dir)
    shutil.rmtree(root, ignore_errors=True)
    from lab.config import dumps

    yaml_path = OUT / f"{cfg.name}.yaml"
    OUT.mkdir(parents=True, exist_ok=True)
    yaml_path.write_text(dumps(cfg))
    cmd = [sys.executable, "-m", "lab.cli", "run", "--config", str(yaml_path), "--no-progress"]
    t0 = time.time()
    proc = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while len(list(root.glob("stats/part-*.json"))) < files // 2:
        if proc.poll() is not None:
            sys.exit(f"the run ended (exit {proc.returncode}) before half of the partitions were done")
        time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    killed_at = time.time() - t0
    done_at_kill = len(list(root.glob("stats/part-*.json")))
    time.sleep(2)
    t1 = time.time()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    rerun = time.time() - t1
    ref = OUT / f"scale-{files}f-{workers}w"
    same = None
    if (ref / "manifest.json").exists():
        fa, fb = _outputs(ref), _outputs(root)
        _, mismatch, errors = filecmp.cmpfiles(ref, root, fa, shallow=False)
        same = fa == fb and not mismatch and not errors
    return {"measure": "resume", "files": files, "workers": workers, "killed_after_s": round(killed_at, 1),
            "partitions_done_at_kill": done_at_kill, "partitions": files, "resume_wall_s": round(rerun, 1),
            "byte_identical_to_uninterrupted": same, "load_before": _load()}


def _record(entry: dict) -> None:
    rows = json.loads(RESULTS.read_text()) if RESULTS.exists() else []
    rows.append({**entry, "at": time.strftime("%Y-%m-%dT%H:%M:%S")})
    RESULTS.write_text(json.dumps(rows, indent=1) + "\n")
    print(json.dumps(entry, indent=1))


def main() -> None:
    global CORPUS
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["one", "resume", "all"])
    ap.add_argument("--files", type=int, default=64, help="first N files of bench/out/scale (16 = a quarter)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--corpus", type=Path, default=CORPUS, help="directory of scale-*.jsonl.zst (default %(default)s)")
    a = ap.parse_args()
    CORPUS = a.corpus.resolve()
    if a.what == "one":
        _record(one(a.files, a.workers))
    elif a.what == "resume":
        _record(resume(a.files, a.workers))
    else:
        for files, workers in ((16, 2), (64, 2), (64, 1)):
            subprocess.run([sys.executable, __file__, "one", "--files", str(files), "--workers", str(workers),
                            "--corpus", str(CORPUS)], check=True)
        subprocess.run([sys.executable, __file__, "resume", "--files", "16", "--workers", "2", "--corpus", str(CORPUS)],
                       check=True)


if __name__ == "__main__":
    main()
