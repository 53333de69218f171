"""What the driver holds while it lists a large corpus: ``--files`` one-line files in directories of 1,000,
listed, cut into partitions and hashed (``lab.steps.prepare`` and ``lab.steps.fingerprints``: the driver's
work before the first task), in a process of its own whose peak RSS GNU time reports.

    .venv/bin/python bench/listing.py --files 1000000 [--dir bench/out/listing] [--out bench/out/listing.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gnu_time import gnu_time  # noqa: E402

DRIVER = """
import sys, time
from lab import steps
from lab.config import Config, InputConfig
t = time.time()
cfg = Config(name="listing", output_dir=sys.argv[2], inputs=(InputConfig(path=sys.argv[1]),))
layout, parts, listing = steps.prepare(cfg, overwrite=True)
listed = time.time() - t
fps = steps.fingerprints(layout, parts, listing)
print(f"files {sum(len(f) for f in listing.files)} partitions {len(parts)} listed_s {listed:.1f} "
      f"hashed_s {time.time() - t - listed:.1f}")
"""


def make(root: Path, files: int) -> None:
    marker = root / ".made"
    if marker.exists() and marker.read_text() == str(files):
        return
    for d in range(0, files, 1000):
        sub = root / f"d{d // 1000:04d}"
        sub.mkdir(parents=True, exist_ok=True)
        for i in range(d, min(d + 1000, files)):
            with open(sub / f"{i:07d}.jsonl", "w") as f:
                f.write('{"text": "record %d"}\n' % i)
    marker.write_text(str(files))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--files", type=int, default=1_000_000)
    ap.add_argument("--dir", default="bench/out/listing")
    ap.add_argument("--out", default="bench/out/listing.json")
    args = ap.parse_args()
    root = Path(args.dir).resolve()
    started = time.time()
    make(root / "in", args.files)
    made = time.time() - started
    r, wall, rss = gnu_time([sys.executable, "-c", DRIVER, str(root / "in"), str(root / "runs")])
    if r.returncode != 0:
        raise SystemExit(r.stderr[-3000:])
    out = {"files": args.files, "make_s": round(made, 1), "driver": r.stdout.strip(), "wall_s": wall,
           "max_rss_mb": rss}
    print(out)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
