"""Many small files: a directory of one-record JSONL files through ``corpus-lab run``, in this process and on a
LocalCluster of two workers, and how long Ctrl-C takes to end a LocalCluster run.

The files are about 110 bytes each (one short record, 20,000 of them: 2.2 MB), the shape of a corpus
exported one document per file. Every figure is the wall time of the whole command (``/usr/bin/time``).

    .venv/bin/python bench/small_files.py [--files 20000] [--dir bench/out/small_files] [--out bench/out/small_files.json]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gnu_time import gnu_time  # noqa: E402

CLI = [sys.executable, "-m", "lab.cli"]
WORDS = "data corpus record file small token model train word text the of and a to in".split()


def make(root: Path, files: int) -> None:
    """``files`` one-record JSONL files under ``root`` (kept when already there)."""
    if root.is_dir() and len(os.listdir(root)) == files:
        return
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    rng = random.Random(0)
    for i in range(files):
        text = " ".join(rng.choice(WORDS) for _ in range(14))
        (root / f"{i:06d}.jsonl").write_text(json.dumps({"id": i, "text": text}) + "\n")


def timed(cmd: list[str]) -> dict:
    """Wall seconds and maximum RSS of a run, from GNU time, and its summary line."""
    r, wall, rss = gnu_time(cmd)
    if r.returncode != 0:
        raise SystemExit(r.stderr[-2000:])
    line = next(x for x in r.stdout.splitlines() if x.startswith("run "))
    return {"wall_s": wall, "max_rss_mb": rss, "summary": line}


def interrupt(cmd: list[str], stats: Path) -> dict:
    """Start a run, send SIGINT once its first partition is complete; seconds from the signal to the exit."""
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    started = time.monotonic()
    while not glob.glob(str(stats / "part-*.json")) and p.poll() is None:
        time.sleep(0.02)
    first = time.monotonic() - started
    sent = time.monotonic()
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=300)
    return {"first_partition_s": round(first, 2), "exit_after_sigint_s": round(time.monotonic() - sent, 2),
            "exit_status": p.returncode, "last_line": err.strip().splitlines()[-1] if err.strip() else ""}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--files", type=int, default=20_000)
    ap.add_argument("--dir", default="bench/out/small_files")
    ap.add_argument("--out", default="bench/out/small_files.json")
    args = ap.parse_args()
    root = Path(args.dir).resolve()
    src = root / "in"
    make(src, args.files)
    runs = root / "runs"
    config = root / "config.yaml"
    config.write_text(f"name: small\noutput_dir: {runs}\ninputs: [{{path: {src}}}]\n")
    out = {"files": args.files, "bytes": sum(f.stat().st_size for f in src.iterdir())}
    for name, extra in (("in_process", ["--in-process"]), ("local_cluster_2", ["--workers", "2"])):
        shutil.rmtree(runs, ignore_errors=True)
        out[name] = timed([*CLI, "run", "--config", str(config), "--no-progress", *extra])
        print(name, out[name], flush=True)
    shutil.rmtree(runs, ignore_errors=True)
    out["ctrl_c_local_cluster_2"] = interrupt([*CLI, "run", "--config", str(config), "--no-progress", "--workers", "2"],
                                             runs / "small" / "stats")
    print("ctrl_c", out["ctrl_c_local_cluster_2"], flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
