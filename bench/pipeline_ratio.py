"""corpus-lab's whole pipeline against datatrove's equivalent, per core, side by side on the same input.

What it measures: CPU and wall seconds of three whole-pipeline runs over the same documents, each a
subprocess pinned to one CPU (``taskset -c --cpu``), run in turn --rounds times (A B C A B C ...):

- ``datatrove``: ``bench/datatrove_pipeline.py`` (datatrove 0.10.1: language, Gopher, C4, FineWeb,
  MinHash dedup, PII, tokenizer; see its docstring) with --workers 1, in the datatrove venv;
- ``batch``: ``corpus-lab run`` in batch mode (a document stops at its first failing stage);
- ``explore``: ``corpus-lab run`` in explore mode (every signal of every document).

corpus-lab runs its default config otherwise (exact and near dedup, boilerplate lines, a 32k BPE
fitted on the kept documents, token counts, best-fit packing), in a fresh output directory per run
(``--overwrite``), from the worktree's ``lab`` (``python -m lab.cli``). With --same-tokenizer both
sides use one tokenizer.json (datatrove's --tokenizer, corpus-lab's ``tokenizer: {kind: file}``),
so corpus-lab fits none; without it datatrove still needs a file (--tokenizer, default
runs/sample/tokenizer/tokenizer.json, written by ``.venv/bin/corpus-lab run``).

Input (prepared first, not timed): --input is a .jsonl file of {"id", "text"} records (its first
--docs records are written to 2 zstd JSONL files in the work directory) or a directory of
``*.jsonl.zst`` (read in place, or its first --docs documents copied into files of the same size
as the input's). Both sides read the same files.

CPU seconds: ``resource.getrusage(RUSAGE_CHILDREN)`` deltas around ``subprocess.run``, i.e. the
command and every descendant reaped by its parent (datatrove's pools fork; corpus-lab runs inputs
<= 16 MiB in its process, larger ones on a Dask LocalCluster whose nanny and worker processes are
reaped when the cluster closes). As a check, each corpus-lab run also reports the CPU its own
accounting saw (``stage_cpu_seconds`` + ``step_seconds`` of the manifest, ``accounted_cpu_s``):
it must not exceed the measured figure. Ratios are by CPU seconds (docs per CPU-second of
corpus-lab over datatrove's): > 1 means corpus-lab does more per core. MB are input text bytes
(UTF-8) / 1e6. Kept: documents datatrove tokenized (after MinHash dedup), and the documents of
corpus-lab's packed token splits (train + val + test) and its funnel's last stage.

Also reported: corpus-lab's per-stage CPU (``stats/timing-*.json``, summed over partitions) and
per-step CPU/wall (manifest ``step_seconds``), datatrove's per-step seconds (its JSON's
``stages``), the versions (datatrove's, corpus-lab's git commit), os.cpu_count and the load average
before/after each run (another job on the other core pollutes wall time, less so CPU time).

    .venv/bin/python bench/pipeline_ratio.py --input bench/out/docs_en.jsonl --cpu 1
    .venv/bin/python bench/pipeline_ratio.py --input bench/out/docs_en.jsonl --cpu 1 --same-tokenizer
    .venv/bin/python bench/scale_corpus.py --docs 30000 --files 2 --out /tmp/scale30k
    .venv/bin/python bench/pipeline_ratio.py --input /tmp/scale30k --cpu 1 --rounds 1 --name scale30k

Figures: bench/RESULTS.md (bench/HISTORY.md §30-32; the JSON of each run in bench/out/). A LocalCluster's
workers are counted: on a 300-document run (n_workers 1) RUSAGE_CHILDREN gave 6.9-7.1 s,
/usr/bin/time -v 7.2 s, a /proc poll of the 3 processes 6.8 s.

Output: a table on stdout and ``bench/out/pipeline_ratio_<--name>.json`` (name default: the input's
stem, plus ``_same_tok`` with --same-tokenizer).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import zstandard

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
PY = REPO / ".venv" / "bin" / "python"
DT_PY = BENCH / ".venv-datatrove" / "bin" / "python"
SIDES = ("datatrove", "batch", "explore")


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def iter_lines(path: Path):
    """Non-empty lines of a .jsonl or .jsonl.zst file, as bytes."""
    with open(path, "rb") as f:
        src = zstandard.ZstdDecompressor().stream_reader(f, read_across_frames=True) if path.suffix == ".zst" else f
        buf = b""
        while chunk := src.read(1 << 22):
            buf += chunk
            *lines, buf = buf.split(b"\n")
            yield from (line for line in lines if line.strip())
        if buf.strip():
            yield buf


def write_files(lines: list[bytes], n_files: int, out: Path) -> None:
    out.mkdir(parents=True)
    bounds = [len(lines) * k // n_files for k in range(n_files + 1)]
    for k in range(n_files):
        with open(out / f"part-{k:05d}.jsonl.zst", "wb") as fh, zstandard.ZstdCompressor(level=3).stream_writer(fh) as zw:
            for line in lines[bounds[k]:bounds[k + 1]]:
                rec = json.loads(line)
                zw.write(json.dumps({"id": str(rec["id"]), "text": rec["text"]}, ensure_ascii=False).encode() + b"\n")


def prepare(src: Path, docs: int | None, work: Path) -> dict:
    """The directory both sides read, with its document and text-byte counts (not timed)."""
    t0 = time.perf_counter()
    if src.is_file():
        lines = list(iter_lines(src))
        lines = lines[:docs] if docs else lines
        folder = work / "input"
        write_files(lines, 2, folder)
    else:
        files = sorted(src.glob("*.jsonl.zst"))
        if not files:
            sys.exit(f"error: no *.jsonl.zst files in {src}")
        lines, taken = [], 0
        for f in files:
            if docs and len(lines) >= docs:
                break
            lines.extend(iter_lines(f))
            taken += 1
        if docs and len(lines) < docs:
            sys.exit(f"error: --docs {docs}: {src} holds {len(lines)} documents")
        if docs and len(lines) != docs:  # ends inside a file: copy the first `docs` into files of the same size
            per_file = len(lines) / taken
            lines = lines[:docs]
            folder = work / "input"
            write_files(lines, max(2, round(docs / per_file)), folder)
        else:
            folder = src
    text_bytes = sum(len(json.loads(line)["text"].encode()) for line in lines)
    return {"dir": str(folder), "files": len(list(folder.glob("*.jsonl.zst"))), "docs": len(lines),
            "text_bytes": text_bytes, "file_bytes": sum(p.stat().st_size for p in folder.glob("*.jsonl.zst")),
            "prepare_seconds": round(time.perf_counter() - t0, 2)}


def lab_config(path: Path, name: str, out_dir: Path, mode: str, inp: str, tokenizer: Path | None,
               n_workers: int) -> None:
    lines = [f"name: {name}", f"output_dir: {out_dir}", f"mode: {mode}", "inputs:",
             f"- path: {inp}", "  format: jsonl"]
    if tokenizer:
        lines += ["tokenizer:", "  kind: file", f"  path: {tokenizer}"]
    if n_workers:
        lines += ["engine:", f"  n_workers: {n_workers}"]
    path.write_text("\n".join(lines) + "\n")


def timed(cmd: list[str], log: Path) -> dict:
    """Run ``cmd`` (cwd: the repo), its CPU seconds (itself + reaped descendants) and wall seconds."""
    before = load()
    cpu0, wall0 = children_cpu(), time.perf_counter()
    with open(log, "w") as fh:
        proc = subprocess.run(cmd, cwd=REPO, stdout=fh, stderr=subprocess.STDOUT)
    wall, cpu = time.perf_counter() - wall0, children_cpu() - cpu0
    if proc.returncode:
        sys.exit(f"error: exit {proc.returncode}: {shlex.join(cmd)}\n{log.read_text()[-3000:]}")
    return {"cpu_s": round(cpu, 3), "wall_s": round(wall, 3), "load_before": before, "load_after": load()}


def lab_details(run_dir: Path) -> dict:
    m = json.loads((run_dir / "manifest.json").read_text())
    stage_cpu: dict[str, float] = {}
    for f in sorted((run_dir / "stats").glob("timing-*.json")):
        for stage, s in json.loads(f.read_text()).get("cpu_seconds", {}).items():
            stage_cpu[stage] = stage_cpu.get(stage, 0.0) + s
    steps = {k: {"cpu_s": round(v.get("cpu_s", 0.0), 3), "wall_s": round(v.get("wall_s", 0.0), 3)}
             for k, v in (m.get("step_seconds") or {}).items()}
    funnel = m.get("funnel") or []
    tokens = m.get("tokens") or {}
    return {
        "stage_cpu_s": {k: round(v, 3) for k, v in sorted(stage_cpu.items(), key=lambda kv: -kv[1])},
        "stage_cpu_total_s": round(sum(stage_cpu.values()), 3),
        "steps": steps,
        "accounted_cpu_s": round(sum(stage_cpu.values()) + sum(s["cpu_s"] for s in steps.values()), 3),
        "kept_funnel": funnel[-1]["docs_out"] if funnel else None,
        "kept_packed": sum(v.get("documents", 0) for v in tokens.values() if isinstance(v, dict)),
        "tokens": sum(v.get("real_tokens", 0) for v in tokens.values() if isinstance(v, dict)),
        "partitions": m.get("partitions") if isinstance(m.get("partitions"), int) else len(m.get("partitions") or []),
    }


def dt_details(report: dict) -> dict:
    steps = {}
    for stage, s in report["stages"].items():
        for step in s["steps"]:
            key = f"{stage}: {step['name']}"
            steps[key] = step.get("self_seconds", step["seconds"])
    return {"stage_cpu_s": {k: v["cpu_seconds"] for k, v in report["stages"].items()},
            "step_seconds": steps, "kept": report["docs_tokenized"], "tokens": report["tokens"],
            "internal_cpu_s": report["cpu_seconds"]}


def git_commit() -> str:
    out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "lab"], cwd=REPO, capture_output=True,
                           text=True).stdout.strip()
    return out + ("+dirty" if dirty else "")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--input", type=Path, required=True, help="a .jsonl file or a directory of *.jsonl.zst")
    ap.add_argument("--docs", type=int, default=None, help="the first N documents (default: all)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--cpu", type=int, default=(os.cpu_count() or 1) - 1, help="the CPU every run is pinned to")
    ap.add_argument("--same-tokenizer", action="store_true", help="corpus-lab uses datatrove's tokenizer file")
    ap.add_argument("--tokenizer", type=Path, default=REPO / "runs" / "sample" / "tokenizer" / "tokenizer.json")
    ap.add_argument("--n-workers", type=int, default=0, help="corpus-lab engine.n_workers (0: its default)")
    ap.add_argument("--sides", default=",".join(SIDES), help="comma-separated subset of " + ",".join(SIDES))
    ap.add_argument("--name", default=None, help="output name (default: the input's stem)")
    ap.add_argument("--work", type=Path, default=None, help="work directory (default: a new one in /tmp)")
    ap.add_argument("--keep-work", action="store_true")
    args = ap.parse_args(argv)
    sides = [s for s in args.sides.split(",") if s]
    if not set(sides) <= set(SIDES) or not sides:
        ap.error(f"--sides {args.sides}: a subset of {','.join(SIDES)}")
    tokenizer = args.tokenizer.resolve()
    if not tokenizer.is_file():
        sys.exit(f"error: no tokenizer at {tokenizer}; run `.venv/bin/corpus-lab run` (the sample run writes "
                 "runs/sample/tokenizer/tokenizer.json) or pass --tokenizer FILE")
    if not DT_PY.exists() and "datatrove" in sides:
        sys.exit(f"error: {DT_PY} missing; run bash bench/setup_datatrove.sh")
    if shutil.which("taskset") is None:
        sys.exit("error: taskset not found (util-linux)")
    name = args.name or args.input.name.split(".")[0]
    name += "_same_tok" if args.same_tokenizer and not name.endswith("_same_tok") else ""
    out_json = BENCH / "out" / f"pipeline_ratio_{name}.json"

    work = args.work or Path(tempfile.mkdtemp(prefix="pipeline_ratio_"))
    work.mkdir(parents=True, exist_ok=True)
    pin = ["taskset", "-c", str(args.cpu)]
    runs: list[dict] = []
    try:
        inp = prepare(args.input.resolve(), args.docs, work)
        mb = inp["text_bytes"] / 1e6
        print(f"input: {inp['docs']} docs, {mb:.2f} MB text, {inp['files']} files ({inp['file_bytes'] / 1e6:.2f} MB "
              f"zstd) in {inp['dir']}; pinned to CPU {args.cpu}", flush=True)
        for rnd in range(args.rounds):
            for side in sides:
                tag = f"r{rnd}_{side}"
                if side == "datatrove":
                    dt_json = work / f"{tag}.json"
                    cmd = pin + [str(DT_PY), str(BENCH / "datatrove_pipeline.py"), "--input", inp["dir"],
                                 "--workers", "1", "--tokenizer", str(tokenizer), "--json", str(dt_json)]
                else:
                    out_dir = Path(tempfile.mkdtemp(prefix=f"{tag}_", dir=work))
                    cfg = work / f"{tag}.yaml"
                    lab_config(cfg, "run", out_dir, side, inp["dir"], tokenizer if args.same_tokenizer else None,
                               args.n_workers)
                    cmd = pin + [str(PY), "-m", "lab.cli", "run", "--config", str(cfg), "--overwrite"]
                r = {"round": rnd, "side": side, "command": shlex.join(cmd), **timed(cmd, work / f"{tag}.log")}
                if side == "datatrove":
                    report = json.loads(dt_json.read_text())
                    r.update(dt_details(report))
                    r["datatrove_version"] = report["versions"]["datatrove"]
                else:
                    r["config"] = cfg.read_text()
                    r.update(lab_details(out_dir / "run"))
                    if not args.keep_work:
                        shutil.rmtree(out_dir, ignore_errors=True)
                r["docs_per_cpu_s"] = round(inp["docs"] / r["cpu_s"], 2)
                r["mb_per_cpu_s"] = round(mb / r["cpu_s"], 4)
                kept = r.get("kept", r.get("kept_packed"))
                print(f"round {rnd} {side:9s} cpu {r['cpu_s']:8.2f} s  wall {r['wall_s']:8.2f} s  "
                      f"{r['docs_per_cpu_s']:7.1f} docs/cpu-s  {r['mb_per_cpu_s']:.4f} MB/cpu-s  kept {kept}  "
                      f"load {r['load_before'][0]}->{r['load_after'][0]}", flush=True)
                runs.append(r)
    finally:
        if not args.keep_work:
            shutil.rmtree(work, ignore_errors=True)

    summary = {}
    for side in sides:
        rs = [r for r in runs if r["side"] == side]
        cpu, wall = statistics.median(r["cpu_s"] for r in rs), statistics.median(r["wall_s"] for r in rs)
        summary[side] = {"cpu_s": [r["cpu_s"] for r in rs], "wall_s": [r["wall_s"] for r in rs],
                         "median_cpu_s": round(cpu, 3), "median_wall_s": round(wall, 3),
                         "docs_per_cpu_s": round(inp["docs"] / cpu, 2), "mb_per_cpu_s": round(mb / cpu, 4),
                         "kept": sorted({r.get("kept", r.get("kept_packed")) for r in rs})}
        if side != "datatrove":
            summary[side]["kept_funnel"] = sorted({r["kept_funnel"] for r in rs})
            summary[side]["median_stage_cpu_s"] = {k: round(statistics.median(r["stage_cpu_s"].get(k, 0) for r in rs), 3)
                                                   for k in rs[-1]["stage_cpu_s"]}
            summary[side]["median_step_cpu_s"] = {k: round(statistics.median(r["steps"].get(k, {}).get("cpu_s", 0)
                                                                             for r in rs), 3) for k in rs[-1]["steps"]}
        else:
            summary[side]["median_step_seconds"] = {k: round(statistics.median(r["step_seconds"].get(k, 0) for r in rs), 3)
                                                    for k in rs[-1]["step_seconds"]}
    ratios = {f"{s}/datatrove": round(summary["datatrove"]["median_cpu_s"] / summary[s]["median_cpu_s"], 2)
              for s in ("batch", "explore") if s in summary and "datatrove" in summary}
    result = {
        "what": "whole-pipeline CPU per core, corpus-lab vs datatrove; ratio = datatrove CPU-s / corpus-lab CPU-s "
                "(> 1: corpus-lab does more per core)",
        "input": {"source": str(args.input), **inp, "mb": round(mb, 3)},
        "cpu": args.cpu, "rounds": args.rounds, "same_tokenizer": args.same_tokenizer,
        "tokenizer": str(tokenizer), "n_workers": args.n_workers,
        "summary": summary, "ratios_by_cpu": ratios, "runs": runs,
        "commands": [r["command"] for r in runs],
        "versions": {"corpus_lab_commit": git_commit(),
                     "datatrove": next((r["datatrove_version"] for r in runs if "datatrove_version" in r), None),
                     "python": platform.python_version()},
        "machine": {"cpu_count": os.cpu_count(), "platform": platform.platform(),
                    "load_first": runs[0]["load_before"], "load_last": runs[-1]["load_after"]},
    }
    out_json.parent.mkdir(parents=True, exist_ok=True)
    out_json.write_text(json.dumps(result, indent=2) + "\n")
    print("\nside       median CPU-s  median wall-s  docs/CPU-s  MB/CPU-s  kept")
    for side, s in summary.items():
        print(f"{side:10s} {s['median_cpu_s']:12.2f} {s['median_wall_s']:14.2f} {s['docs_per_cpu_s']:11.1f} "
              f"{s['mb_per_cpu_s']:9.4f}  {s['kept']}")
    print("ratios (per core, by CPU-s):", ratios)
    for side in ("batch", "explore"):
        if side in summary:
            print(f"{side} stage CPU-s:", summary[side]["median_stage_cpu_s"])
            print(f"{side} step CPU-s:", summary[side]["median_step_cpu_s"])
    if "datatrove" in summary:
        print("datatrove step seconds:", summary["datatrove"]["median_step_seconds"])
    print(f"wrote {out_json}")


if __name__ == "__main__":
    main()
