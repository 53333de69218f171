"""The first split of every distinct chunk with punctuation (``lab.text.words._chunk``), best of 5.

Run it from two checkouts to compare them (each imports the ``lab`` of its working directory):

    taskset -c 1 .venv/bin/python bench/first_split.py --input bench/out/docs_en.jsonl

Prints the chunks timed and the best CPU seconds of 5 passes (RESULTS §31).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path.cwd()))

from lab.text import words as text  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--input", type=Path, required=True, help="a .jsonl file of {'text': ...} records")
    ap.add_argument("--passes", type=int, default=5)
    args = ap.parse_args()
    chunks: set[str] = set()
    with args.input.open(encoding="utf-8") as fh:
        for line in fh:
            chunks.update(json.loads(line)["text"].split())
    rest = sorted(c for c in chunks if not c.isalpha())  # alphabetic chunks take a shortcut before the split
    best = float("inf")
    for _ in range(args.passes):
        t = time.process_time()
        list(map(text._chunk, rest))
        best = min(best, time.process_time() - t)
    print(f"{len(rest)} distinct chunks with punctuation: best of {args.passes} {best:.3f} CPU-s")


if __name__ == "__main__":
    main()
