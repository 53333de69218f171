"""datatrove 0.10.1 MinHash signature throughput, the datatrove side of minhash_signatures.py.

What it measures, on the first --n documents of a JSONL file of {"text"} documents, in one
single-threaded process (thread pools capped at 1; --pin pins it to one CPU):

- ``signature``: per document ``step.get_signature(step.get_shingles(text))`` of
  ``MinhashDedupSignature`` -- datatrove's own per-document path from raw text to signature
  (simplify_text, spaCy blank-"en" word tokenization, 5-gram join, xxhash, 112 permutations
  mod 2^61-1, split into 14 buckets of 8), for each hash config in HASH_CONFIGS;
- ``step_run``: the whole pipeline step ``run()`` with the default hash config (the same plus
  writing 14 bucket files to a temporary local folder, sorting and verifying them).

MinhashConfig: n_grams=5, num_buckets=14, hashes_per_bucket=8 (112 hashes), seed=1, default
TextNormConfig. The first call (builds the spaCy tokenizer) is a warm-up, not timed. Prints
one JSON object to stdout: docs/s by best wall time and docs per CPU-second (median).

Run with the datatrove venv (bash bench/setup_datatrove.sh creates it); minhash_signatures.py
runs it as a subprocess:
  bench/.venv-datatrove/bin/python bench/datatrove_minhash.py --n 1000 --pin
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path

from single_core import one_core, timed

HASH_CONFIGS = {"xxhash64 (default)": (64, "xxhash"), "xxhash32": (32, "xxhash"), "sha1_32": (32, "sha1")}


def rates(seconds: list[tuple[float, float]], n: int, n_bytes: int) -> dict:
    wall, cpu = min(w for w, _ in seconds), statistics.median(c for _, c in seconds)
    return {"wall_seconds": wall, "cpu_seconds": cpu, "docs_per_s": n / wall,
            "docs_per_cpu_s": n / cpu, "mb_per_cpu_s": n_bytes / 1e6 / cpu, "passes": seconds}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--input", type=Path, default=Path(__file__).resolve().parent / "out" / "docs_en.jsonl")
    ap.add_argument("--n", type=int, default=1000, help="use the first N documents")
    ap.add_argument("--repeat", type=int, default=3, help="timed passes")
    ap.add_argument("--pin", action="store_true", help="pin the process to one CPU")
    args = ap.parse_args()
    pinned = one_core(args.pin)

    from datatrove.data import Document
    from datatrove.pipeline.dedup.minhash import MinhashConfig, MinhashDedupSignature
    from datatrove.utils.hashing import HashConfig

    with open(args.input) as f:
        texts = [json.loads(line)["text"] for _, line in zip(range(args.n), f)]
    n_bytes = sum(len(t.encode()) for t in texts)
    report: dict = {"docs": len(texts), "bytes": n_bytes, "pinned_cpu": pinned, "repeat": args.repeat,
                    "python": sys.version.split()[0],
                    "versions": {p: version(p) for p in ("datatrove", "numpy", "xxhash", "spacy")},
                    "signature": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for name, (precision, fc) in HASH_CONFIGS.items():
            cfg = MinhashConfig(n_grams=5, num_buckets=14, hashes_per_bucket=8, seed=1,
                                hash_config=HashConfig(precision=precision, hash_fc=fc))
            step = MinhashDedupSignature(output_folder=f"{tmp}/{precision}{fc}", config=cfg, language="en")
            step.get_signature(step.get_shingles(texts[0]))  # warm-up: spaCy tokenizer, parameters
            report["signature"][name] = {
                "config": str(cfg), "norm_config": repr(cfg.norm_config),
                "tokenizer": type(step.word_tokenizer).__name__, "num_hashes": step.num_hashes,
                **rates(timed(lambda s=step: [s.get_signature(s.get_shingles(t)) for t in texts], args.repeat),
                        len(texts), n_bytes)}
        step = MinhashDedupSignature(output_folder=f"{tmp}/shingles", config=MinhashConfig(seed=1), language="en")
        step.get_shingles(texts[0])
        report["shingles_only"] = rates(timed(lambda: [step.get_shingles(t) for t in texts], args.repeat),
                                        len(texts), n_bytes)
        docs = [Document(text=t, id=str(i)) for i, t in enumerate(texts)]
        step_seconds = []
        for r in range(args.repeat):  # a fresh output folder per pass
            step = MinhashDedupSignature(output_folder=f"{tmp}/run{r}", config=MinhashConfig(seed=1), language="en")
            step.get_shingles(texts[0])
            step_seconds += timed(lambda s=step: s.run(iter(docs)), 1)
        report["step_run"] = {"config": str(MinhashConfig(seed=1)), **rates(step_seconds, len(texts), n_bytes)}
    print(json.dumps(report))


if __name__ == "__main__":
    main()
