"""One Parquet row group of 100,000 tiny texts (about 12 bytes each) through ``corpus-lab run`` in this process:
peak RSS and wall time of the whole command (GNU time). Two kinds of text: ``distinct`` (two words of a
20,000-word list: few near-duplicates) and ``alike`` (two words of ten and a number: after normalization a few
hundred distinct texts, so near dedup meets groups of hundreds of near-duplicates).

    .venv/bin/python bench/tiny_rows.py [--rows 100000] [--dir bench/out/tiny_rows] [--out bench/out/tiny_rows.json]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import string
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gnu_time import gnu_time  # noqa: E402


def texts(kind: str, rows: int) -> list[str]:
    rng = random.Random(1)
    if kind == "distinct":
        words = ["".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(3, 8))) for _ in range(20_000)]
        return [f"{rng.choice(words)} {rng.choice(words)}" for _ in range(rows)]
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa".split()
    return [f"{rng.choice(words)} {rng.choice(words)} {i}" for i in range(rows)]


def main() -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--dir", default="bench/out/tiny_rows")
    ap.add_argument("--out", default="bench/out/tiny_rows.json")
    args = ap.parse_args()
    root = Path(args.dir).resolve()
    out = {"rows": args.rows}
    for kind in ("distinct", "alike"):
        src = root / kind
        shutil.rmtree(root / "runs", ignore_errors=True)
        src.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table({"text": texts(kind, args.rows)}), src / "tiny.parquet", row_group_size=args.rows)
        cfg = root / f"{kind}.yaml"
        cfg.write_text(f"name: {kind}\noutput_dir: {root / 'runs'}\ninputs: [{{path: {src}}}]\n")
        r, wall, rss = gnu_time([sys.executable, "-m", "lab.cli", "run", "--config", str(cfg), "--no-progress",
                                 "--in-process"])
        if r.returncode:
            raise SystemExit(r.stderr[-2000:])
        out[kind] = {"parquet_bytes": (src / "tiny.parquet").stat().st_size, "wall_s": wall, "max_rss_mb": rss,
                     "summary": next(x for x in r.stdout.splitlines() if x.startswith("run "))}
        print(kind, out[kind], flush=True)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
