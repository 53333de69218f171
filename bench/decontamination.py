"""Decontamination: documents matched per second per core, and the memory of the eval n-gram index.

What it measures, on real multi-KB documents (``bench/out/docs_en.jsonl``, made by ``make_docs.py``)
against an evaluation set of ``--ngrams`` word 13-grams (random texts of a 5,000-word vocabulary,
built once into ``--cache``; 1 in 20 documents gets a planted 40-word passage of it):

- ``ours``: ``lab.stages.decontamination``: the index built by ``prepare`` (sorted uint64 hashes and
  a set id per n-gram, mapped), each document through ``match``;
- ``pyset``: what a quick script does: a Python ``set`` of the eval 13-grams (tuples of words hashed
  with ``hash``) and a loop over each document's 13-grams, on the same normalized words.

Each implementation runs in its own process (``--impl``), so its peak RSS is its own: the JSON line
gives build seconds, match seconds, documents per second (one core), matched documents (both must
agree) and the peak RSS. Pair the two with a process timer, e.g.

    farm-bench -n 3 --timeout 900 -- .venv/bin/python bench/decontamination.py --impl ours --ngrams 1000000 \\
        --vs '.venv/bin/python bench/decontamination.py --impl pyset --ngrams 1000000'
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lab.dedup.signature import normalize  # noqa: E402
from lab.stages import decontamination as dc  # noqa: E402

N = 13
TEXT_WORDS = 112  # words per eval text: 100 n-grams each


def eval_set(path: Path, ngrams: int, seed: int = 0) -> Path:
    """A JSONL eval set of ``ngrams`` 13-grams (random texts over a 5,000-word vocabulary)."""
    if path.is_file():
        return path
    rng = random.Random(seed)
    vocab = ["".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randint(3, 9))) for _ in range(5000)]
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        for _ in range(ngrams // (TEXT_WORDS - N + 1)):
            f.write(json.dumps({"text": " ".join(rng.choices(vocab, k=TEXT_WORDS))}) + "\n")
    return path


def documents(path: Path, evals: Path) -> list[str]:
    """The benchmark documents, 1 in 20 with a 40-word passage of the eval set planted in the middle."""
    docs = [json.loads(line)["text"] for line in open(path)]
    items = [json.loads(line)["text"].split() for _, line in zip(range(1000), open(evals))]
    rng = random.Random(1)
    out = []
    for i, d in enumerate(docs):
        if i % 20 == 0:
            w = d.split()
            w.insert(len(w) // 2, " ".join(rng.choice(items)[:40]))
            d = " ".join(w)
        out.append(d)
    return out


def ours(cfg: dc.Config, docs: list[str], run: Path) -> tuple[float, float, int]:
    t0 = time.perf_counter()
    dc.prepare(cfg, run)
    index = dc.load_index(str(dc.index_path(run, dc.index_sha(cfg))))
    t1 = time.perf_counter()
    hit = sum(dc.match(d, index)["decon_matches"] > 0 for d in docs)
    return t1 - t0, time.perf_counter() - t1, hit


def pyset(evals: Path, docs: list[str]) -> tuple[float, float, int]:
    t0 = time.perf_counter()
    grams = set()
    for line in open(evals):
        w = normalize(json.loads(line)["text"]).split()
        grams.update(hash(tuple(w[i:i + N])) for i in range(len(w) - N + 1))
    t1 = time.perf_counter()
    hit = 0
    for d in docs:
        w = normalize(d).split()
        hit += any(hash(tuple(w[i:i + N])) in grams for i in range(len(w) - N + 1))
    return t1 - t0, time.perf_counter() - t1, hit


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--impl", choices=("ours", "pyset"), default="ours")
    ap.add_argument("--ngrams", type=int, default=1_000_000)
    ap.add_argument("--docs", type=Path, default=ROOT / "bench" / "out" / "docs_en.jsonl")
    ap.add_argument("--cache", type=Path, default=Path("/tmp/corpus-lab-decon"))
    ap.add_argument("--fresh", action="store_true", help="ours: build the index again (else reuse the cached one)")
    args = ap.parse_args()
    evals = eval_set(args.cache / f"eval-{args.ngrams}.jsonl", args.ngrams)
    docs = documents(args.docs, evals)
    nbytes = sum(len(d.encode()) for d in docs)
    if args.impl == "ours":
        run = args.cache / f"run-{args.ngrams}"
        if args.fresh:
            for p in run.glob("decontam/*"):
                p.unlink()
        build, match, hit = ours(dc.Config(eval_sets=(dc.EvalSet("eval", str(evals)),)), docs, run)
    else:
        build, match, hit = pyset(evals, docs)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"impl": args.impl, "ngrams": args.ngrams, "documents": len(docs), "mb": round(nbytes / 1e6, 1),
                      "build_s": round(build, 2), "match_s": round(match, 2),
                      "docs_per_s": round(len(docs) / match, 1), "mb_per_s": round(nbytes / 1e6 / match, 2),
                      "matched_docs": hit, "peak_rss_mb": round(peak / 1e6, 1)}))


if __name__ == "__main__":
    main()
