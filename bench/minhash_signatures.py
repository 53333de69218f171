"""MinHash signature throughput per core, and Jaccard estimation quality: corpus-lab vs datasketch vs datatrove.

On the first --n documents of bench/out/docs_en.jsonl (make_docs.py: real English text, mean ~10 KB),
in one single-threaded process pinned to one CPU (single_core.one_core(pin=True)):

1. Throughput from raw text to a 112-value signature (normalize, word 5-gram shingles, hash,
   permutations, minimum), each candidate in turn on the same documents; wall time best of --repeat
   passes, CPU time median; docs per CPU-second is the per-core figure. Candidates:
   - ``corpus-lab``: ``lab.dedup.signature.signature(text, Config())`` (14 bands x 8 rows, seed 1);
   - ``datasketch``: ``MinHash(num_perm=112, seed=1)`` (default sha1_hash32, affine32) on
     ``sg.shingles(sg.normalize(text), 5)``: one ``update`` per shingle, one ``update_batch``, ``MinHash.bulk``;
   - ``datatrove`` 0.10.1: ``MinhashDedupSignature.get_signature(get_shingles(text))``, 5-gram, 14 buckets
     x 8 hashes, seed 1 (its own normalization, spaCy tokenizer), by bench/datatrove_minhash.py run
     in bench/.venv-datatrove as a subprocess on the same CPU.
   Checked: the datasketch variants give equal signatures; corpus-lab's equal datasketch's with
   ``hashfunc=sg.shingle_hash`` (on --check documents).
2. Jaccard estimation quality, corpus-lab vs datasketch ``update_batch``, on --pairs seeded pairs: 90%
   a document and a copy of its normalized words, each word replaced / deleted / followed by an inserted
   corpus word with probability ``rate`` <= 0.6 (drawn so the true Jaccard spreads over 0..1), 10% two
   different documents. True Jaccard: exact, on the sets of shingle bytes. Estimates: fraction of equal
   signature values (corpus-lab), ``MinHash.jaccard``. MAE, RMSE and bias of estimate - true, overall
   and by true-Jaccard bin, with the binomial RMSE sqrt(J(1-J)/112) for reference.

Output: bench/out/minhash_signatures.json (figures + environment) and a summary on stdout.

    .venv/bin/python bench/minhash_signatures.py [--n 1000] [--repeat 3] [--pairs 2000] [--no-datatrove]
"""

from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "RAYON_NUM_THREADS"):
    os.environ[_v] = "1"

import argparse
import itertools
import json
import platform
import random
import statistics
import subprocess
import time
from importlib.metadata import version
from pathlib import Path

import numpy as np
from datasketch import MinHash
from single_core import one_core

from lab.dedup import signature as sg
from lab.stages import near_dedup as nd

BENCH = Path(__file__).resolve().parent
BINS = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
CFG = nd.Config()
P, SEED, NG = CFG.num_perm, CFG.seed, CFG.ngram
RATE_KEYS = ("wall_seconds", "cpu_seconds", "docs_per_s", "docs_per_cpu_s", "mb_per_cpu_s", "passes")


def shingles(text: str) -> list[bytes]:
    return sg.shingles(sg.normalize(text), NG)


def corpus_lab(texts):
    return [sg.signature(t, CFG)[0] for t in texts]


def datasketch(texts, batch: bool):
    out = []
    for t in texts:
        m = MinHash(num_perm=P, seed=SEED)
        if batch:
            m.update_batch(shingles(t))
        else:
            for s in shingles(t):
                m.update(s)
        out.append(m.hashvalues)
    return out


def ds_bulk(texts):
    return [m.hashvalues for m in MinHash.bulk((shingles(t) for t in texts), num_perm=P, seed=SEED)]


CANDIDATES = {"corpus-lab": corpus_lab, "datasketch update": lambda ts: datasketch(ts, False),
              "datasketch update_batch": lambda ts: datasketch(ts, True), "datasketch bulk": ds_bulk}


def timed(fn, texts, repeat):
    """(result of the first pass, [(wall, cpu) seconds per pass])."""
    fn(texts[:2])  # warm-up: permutation caches, imports
    result, seconds = None, []
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        out = fn(texts)
        seconds.append((time.perf_counter() - wall, time.process_time() - cpu))
        result = out if result is None else result
    return result, seconds


def rates(seconds, n, n_bytes) -> dict:
    wall, cpu = min(w for w, _ in seconds), statistics.median(c for _, c in seconds)
    return {"wall_seconds": wall, "cpu_seconds": cpu, "docs_per_s": n / wall,
            "docs_per_cpu_s": n / cpu, "mb_per_cpu_s": n_bytes / 1e6 / cpu, "passes": seconds}


def run_datatrove(args) -> dict:
    cmd = [str(args.datatrove_python), str(BENCH / "datatrove_minhash.py"), "--input", str(args.input),
           "--n", str(args.n), "--repeat", str(args.repeat), "--pin"]
    done = subprocess.run(cmd, cwd=BENCH, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def mutate(words, rate, vocab, rng):
    out = []
    for w in words:
        if rng.random() >= rate:
            out.append(w)
            continue
        op = rng.randrange(3)  # 0 replace, 1 delete, 2 keep and insert a word after it
        out += [rng.choice(vocab)] if op == 0 else [] if op == 1 else [w, rng.choice(vocab)]
    return out


def make_pairs(texts, n_pairs, seed):
    rng = random.Random(seed)
    norms = [sg.normalize(t) for t in texts]
    vocab = [w for s in norms for w in s.split()]  # frequency-weighted
    pairs = []
    for i in range(n_pairs):
        a = rng.randrange(len(texts))
        if i % 10 == 9:  # two different documents
            b = rng.randrange(len(texts) - 1)
            pairs.append((texts[a], texts[b + (b >= a)], None))
            continue
        j = rng.random()  # target Jaccard; a word survives with 1-rate, a shingle with ~(1-rate)^5
        rate = min(0.6, 1 - (2 * j / (1 + j)) ** (1 / NG))
        pairs.append((texts[a], " ".join(mutate(norms[a].split(), rate, vocab, rng)), rate))
    return pairs


def errors(est, true) -> dict:
    e = est - true
    return {"n": int(e.size), "mae": float(np.abs(e).mean()), "rmse": float(np.sqrt((e ** 2).mean())),
            "bias": float(e.mean()), "binomial_rmse": float(np.sqrt((true * (1 - true) / P).mean()))}


def quality(texts, n_pairs, seed) -> dict:
    rows = []
    for a, b, rate in make_pairs(texts, n_pairs, seed):
        sa, sb = set(shingles(a)), set(shingles(b))
        true = len(sa & sb) / len(sa | sb)
        cl = float(np.mean(sg.signature(a, CFG)[0] == sg.signature(b, CFG)[0]))
        ma, mb = MinHash(num_perm=P, seed=SEED), MinHash(num_perm=P, seed=SEED)
        ma.update_batch(shingles(a))
        mb.update_batch(shingles(b))
        rows.append((true, cl, ma.jaccard(mb), rate))
    true, cl, ds = (np.array([r[k] for r in rows]) for k in range(3))
    d = np.abs(cl - true) - np.abs(ds - true)
    out = {"pairs": len(rows), "different_doc_pairs": sum(r[3] is None for r in rows),
           "overall": {"corpus-lab": errors(cl, true), "datasketch": errors(ds, true),
                       "mae_diff_cl_minus_ds": float(d.mean()),
                       "mae_diff_stderr": float(d.std(ddof=1) / np.sqrt(d.size)),
                       "corr_of_errors": float(np.corrcoef(cl - true, ds - true)[0, 1])},
           "by_true_jaccard": {}}
    for lo, hi in itertools.pairwise(BINS):
        m = (true >= lo) & ((true < hi) | (hi == BINS[-1]))
        if m.any():
            out["by_true_jaccard"][f"{lo:.1f}-{hi:.1f}"] = {"corpus-lab": errors(cl[m], true[m]),
                                                           "datasketch": errors(ds[m], true[m])}
    return out


def environment(pinned) -> dict:
    models = [ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
              if ln.startswith("model name")]
    cpu = models[0] if models else None
    return {"cpu_model": cpu, "cpus": os.cpu_count(), "pinned_cpu": pinned, "loadavg_at_start": os.getloadavg(),
            "python": platform.python_version(), "versions": {p: version(p) for p in ("datasketch", "numpy")}}


def print_summary(report: dict, out: Path) -> None:
    n, n_bytes, env = report["docs"], report["bytes"], report["environment"]
    print(f"{n} docs, {n_bytes / 1e6:.2f} MB (mean {n_bytes / n / 1e3:.1f} KB), {P} perms, {NG}-gram words, "
          f"pinned CPU {env['pinned_cpu']} ({env['cpu_model']}), python {env['python']}, "
          f"datasketch {env['versions']['datasketch']}")
    print(f"{'candidate':<34}{'docs/s':>9}{'docs/cpu-s':>12}{'MB/cpu-s':>10}{'corpus-lab x':>14}")
    for name, r in report["throughput"].items():
        ratio = report["corpus_lab_speedup_per_core"].get(name)
        print(f"{name:<34}{r['docs_per_s']:>9.1f}{r['docs_per_cpu_s']:>12.1f}{r['mb_per_cpu_s']:>10.2f}"
              f"{'' if ratio is None else f'{ratio:.2f}':>14}")
    if "datatrove" in report:
        print(f"datatrove get_shingles alone: {report['datatrove']['shingles_only']['docs_per_cpu_s']:.1f} docs/cpu-s")
    print("checks:", report["checks"])
    q = report["jaccard_quality"]
    print(f"\nJaccard estimate - true, {q['pairs']} pairs ({q['different_doc_pairs']} of different docs)")
    print(f"{'true J':<10}{'n':>6}{'MAE cl':>9}{'MAE ds':>9}{'RMSE cl':>9}{'RMSE ds':>9}{'bias cl':>9}{'bias ds':>9}"
          f"{'binom RMSE':>11}")
    for label, b in [*q["by_true_jaccard"].items(), ("overall", q["overall"])]:
        c, d = b["corpus-lab"], b["datasketch"]
        print(f"{label:<10}{c['n']:>6}{c['mae']:>9.4f}{d['mae']:>9.4f}{c['rmse']:>9.4f}{d['rmse']:>9.4f}"
              f"{c['bias']:>+9.4f}{d['bias']:>+9.4f}{c['binomial_rmse']:>11.4f}")
    o = q["overall"]
    print(f"MAE corpus-lab - datasketch: {o['mae_diff_cl_minus_ds']:+.4f} +- {o['mae_diff_stderr']:.4f} (paired), "
          f"correlation of errors {o['corr_of_errors']:.2f}")
    print(f"-> {out}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--input", type=Path, default=BENCH / "out" / "docs_en.jsonl")
    ap.add_argument("--n", type=int, default=1000, help="use the first N documents")
    ap.add_argument("--repeat", type=int, default=3, help="timed passes per candidate")
    ap.add_argument("--pairs", type=int, default=2000, help="document pairs for Jaccard quality")
    ap.add_argument("--check", type=int, default=5, help="docs checked against datasketch(hashfunc=shingle_hash)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the pair mutations")
    ap.add_argument("--datatrove-python", type=Path, default=BENCH / ".venv-datatrove" / "bin" / "python")
    ap.add_argument("--no-datatrove", action="store_true", help="skip the datatrove subprocess")
    ap.add_argument("--out", type=Path, default=BENCH / "out" / "minhash_signatures.json")
    args = ap.parse_args()
    pinned = one_core(pin=True)

    with open(args.input) as f:
        texts = [json.loads(line)["text"] for _, line in zip(range(args.n), f)]
    n, n_bytes = len(texts), sum(len(t.encode()) for t in texts)
    report: dict = {"input": str(args.input), "docs": n, "bytes": n_bytes, "repeat": args.repeat,
                    "environment": environment(pinned),
                    "config": {"num_perm": P, "bands": CFG.bands, "rows": CFG.rows, "seed": SEED, "ngram": NG},
                    "throughput": {}}

    sigs = {}
    for name, fn in CANDIDATES.items():
        sigs[name], seconds = timed(fn, texts, args.repeat)
        report["throughput"][name] = rates(seconds, n, n_bytes)
    ds_same = all(np.array_equal(x, y) for k in ("datasketch update_batch", "datasketch bulk")
                  for x, y in zip(sigs["datasketch update"], sigs[k]))
    cl_same = True
    for t, sig in zip(texts[: args.check], sigs["corpus-lab"]):
        m = MinHash(num_perm=P, seed=SEED, hashfunc=sg.shingle_hash)
        m.update_batch(shingles(t))
        cl_same &= bool(np.array_equal(sig, m.hashvalues))
    report["checks"] = {"datasketch_variants_equal": ds_same,
                        f"corpus_lab_equals_datasketch_shingle_hash_on_{args.check}_docs": cl_same}

    if not args.no_datatrove:
        dt = run_datatrove(args)
        report["datatrove"] = dt
        rows = {f"datatrove {k}": r for k, r in dt["signature"].items()} | {"datatrove step run()": dt["step_run"]}
        for name, r in rows.items():
            report["throughput"][name] = {k: v for k, v in r.items() if k in RATE_KEYS}
    ours = report["throughput"]["corpus-lab"]["docs_per_cpu_s"]
    report["corpus_lab_speedup_per_core"] = {k: ours / v["docs_per_cpu_s"]
                                             for k, v in report["throughput"].items() if k != "corpus-lab"}
    report["jaccard_quality"] = quality(texts, args.pairs, args.seed)
    report["environment"]["loadavg_at_end"] = os.getloadavg()

    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")

    print_summary(report, args.out)

if __name__ == "__main__":
    main()
