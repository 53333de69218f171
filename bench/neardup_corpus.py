"""Build a near-duplicate benchmark: >= 100,000 documents of real text with seeded near-duplicates,
and its exact ground truth (every pair whose shingle sets have Jaccard >= 0.5), for near-dedup
precision/recall and end-to-end time.

Text: the sources of ``make_docs.py`` (licences, Debian copyright/doc files, stdlib docstrings, the
Python manual) plus English man pages (/usr/share/man/man[1-9] rendered by groff, skipped without
it; gcloud's ~16k generated pages left out), de-duplicated by ``make_docs.collect_units``, cut into
pieces of <= 400 characters at line (or word) boundaries; pieces with Jaccard >= 0.5 to an earlier
one are dropped (licence variants, charset tables).

- base documents: the pool is cut into runs of 1-3 consecutive pieces; random runs are joined up to
  a target size drawn uniformly from [--min-bytes, --max-bytes]. A run is <= 40% of the target and
  two base documents share at most one run, so none are near-duplicates by chance (the summary
  counts truth pairs across families; --check measures shingle sharing).
- copies: a seeded 10% (--dup-rate) of base documents get 1-3 copies: 10% exact, 10% only case/
  whitespace/punctuation changed, 80% edited (maybe a paragraph swapped or dropped, boilerplate
  lines appended, then random word replacements/deletions/insertions until the Jaccard to the
  original falls just below a target drawn uniformly from [0.4, 1.0]; below 0.5: hard negatives).
Documents are shuffled and numbered nd-000000.. in output order. Truth comes from the texts alone:
shingle sets ``signature.shingle_hashes(signature.normalize(text), 5)``, pairs from ``exact_pairs``
(prefix-filtering set-similarity join, exact). ``--check`` compares it with brute force (overlaps
as a scipy sparse product) on ~2,000 documents (whole families). Same machine + seed = byte-identical
docs.jsonl and truth.parquet. Writes to --out: docs.jsonl ({"id", "text"}), truth.parquet (id_a <
id_b, jaccard), summary.json.

Run (main venv):  .venv/bin/python bench/neardup_corpus.py --n 100000 --seed 1 --out bench/out/neardup --check
"""

from __future__ import annotations

import argparse
import collections
import glob
import hashlib
import itertools
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from fractions import Fraction
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import make_docs

from lab.dedup import signature as sg

PIECE = 400  # max characters of a pool piece
BOILERPLATE = ["Share this page:", "Click here to subscribe to our newsletter.", "All rights reserved.",
               "Posted by admin in Uncategorized", "Read more...", "Privacy Policy | Terms of Use | Contact",
               "This page was last edited on 3 March 2021.", "Leave a comment", "Back to top",
               "Related articles", "Powered by WordPress", "Cookies help us deliver our services."]
_T0 = time.time()


def log(msg: str) -> None:
    print(f"[{time.time() - _T0:6.0f}s] {msg}", flush=True)


def _man_units():
    """(path, text) of English man pages rendered by groff, header and footer lines dropped."""
    groff = shutil.which("groff")
    paths = sorted({os.path.realpath(p) for p in glob.glob("/usr/share/man/man[1-9]/*.gz")
                    if not os.path.basename(p).startswith("gcloud")}) if groff else []
    cmd = [groff, "-t", "-K", "utf8", "-man", "-Tutf8", "-P-cbou", "-rLL=78n", "-rLT=78n", "-rHY=0"]

    def render(path):
        src = make_docs._read(path)
        if not src or src.lstrip().startswith(".so"):
            return path, None
        out = subprocess.run(cmd, check=False, input=src.encode(), capture_output=True,
                             env={"PATH": os.environ.get("PATH", ""), "LC_ALL": "C.UTF-8"}).stdout
        lines = [" ".join(line.split()) for line in out.decode("utf-8", "replace").splitlines()]
        body = [i for i, line in enumerate(lines) if line]
        return path, "\n".join(lines[body[0] + 1: body[-1]]) if len(body) > 2 else None

    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        yield from pool.map(render, paths)


def pieces(para: str, limit: int = PIECE) -> list[str]:
    """A paragraph cut into pieces of <= limit characters at line boundaries (long lines at spaces)."""
    out, cur = [], ""
    for line in para.split("\n"):
        while len(line) > limit:
            cut = line.rfind(" ", 1, limit)
            cut = cut if cut > 0 else limit
            out += [cur] if cur else []
            out.append(line[:cut])
            cur, line = "", line[cut:].lstrip()
        if cur and len(cur) + 1 + len(line) > limit:
            out.append(cur)
            cur = line
        else:
            cur = cur + "\n" + line if cur else line
    return [p for p in out + [cur] if re.search(r"[A-Za-z]", p)]


def load_pool() -> list[str]:
    make_docs.SOURCES.setdefault("man", _man_units)  # collect_units reads every SOURCES entry
    pool = [p for _, _, paras in make_docs.collect_units() for para in paras for p in pieces(para)]
    log(f"pool: {len(pool)} pieces; removing near-duplicate pieces")
    drop = {j for _, j, _ in exact_pairs([shingle_set(p) for p in pool], 0.5)}
    return [p for k, p in enumerate(pool) if k not in drop]


def shingle_set(text: str) -> np.ndarray:
    return sg.shingle_hashes(sg.normalize(text), 5)


def jaccard(a: np.ndarray, b: np.ndarray) -> float:
    inter = np.intersect1d(a, b, assume_unique=True).size
    return inter / max(a.size + b.size - inter, 1)


def base_doc(rng, runs: list[tuple[str, int]], users: list[list[int]], doc: int, lo: int, hi: int) -> str:
    """Random runs filling a target size to within 100 bytes; a run <= 40% of the target; shares at
    most one run with any other base document."""
    target, parts, size, near, taken, misses = rng.randint(lo + 100, hi), [], -2, set(), set(), 0
    while size < target - 100 and misses < 200:
        r = rng.randrange(len(runs))
        text, n_bytes = runs[r]
        if n_bytes > 0.4 * target or size + n_bytes > target or r in taken or near.intersection(users[r]):
            misses += 1
            continue
        parts.append(text)
        size, misses = size + n_bytes, 0
        taken.add(r)
        near.update(users[r])
    for r in taken:
        users[r].append(doc)
    return "\n\n".join(parts)


def format_copy(rng, text: str) -> str:
    """Case, whitespace and/or punctuation changed; normalized text (and shingles) unchanged."""
    out = text
    for op in rng.sample(["case", "space", "punct"], rng.randint(1, 3)):
        if op == "case":
            f = rng.choice([str.lower, str.upper, str.title, str.swapcase])
            out = "\n".join(f(ln) if rng.random() < 0.5 else ln for ln in out.split("\n"))
        elif op == "space":
            out = re.sub(r"\s+", lambda m: rng.choice(["  ", "\n", " \t"]) if rng.random() < 0.2 else m[0], out)
        else:
            out = re.sub(r"[!-/:-@\[-`{-~]", lambda m: rng.choice(",.;:!?-") if rng.random() < 0.3 else m[0], out)
            out = re.sub(r"(?<=\w)(?= )", lambda m: "," if rng.random() < 0.05 else "", out)
    if sg.normalize(out) != sg.normalize(text):  # e.g. 'ß'.upper() == 'SS': whitespace only
        out = re.sub(r"[ \t]+", lambda m: "  " if rng.random() < 0.3 else m[0], text)
    return out


def edited_copy(rng, text: str, vocab: list[str], target: float) -> str:
    """Paragraph and word edits until the Jaccard to `text` is <= target (just below it)."""
    orig, paras = shingle_set(text), text.split("\n\n")
    for op in rng.sample(["swap", "drop", "boiler"], rng.randint(0, 3)):
        new, i = list(paras), rng.randrange(len(paras))
        if op == "swap" and i + 1 < len(paras):
            new[i], new[i + 1] = new[i + 1], new[i]
        elif op == "drop" and len(paras) > 2:
            del new[i]
        elif op == "boiler":
            new[-1] += "\n" + "\n".join(rng.sample(BOILERPLATE, rng.randint(1, 3)))
        if jaccard(orig, shingle_set("\n\n".join(new))) > target:  # keep an op only if it fits
            paras = new
    tokens = re.split(r"(\s+)", "\n\n".join(paras))  # even indices: words, odd: whitespace
    weights = [rng.random() for _ in range(3)]  # this copy's mix of replace / delete / insert
    j = jaccard(orig, shingle_set("".join(tokens)))
    while j > target:
        for _ in range(max(1, int((j - target) * len(tokens) / 24))):  # an edit costs ~10/words
            i = 2 * rng.randrange((len(tokens) + 1) // 2)
            op = rng.choices("rdi", weights)[0]
            if op == "r" or (op == "d" and len(tokens) < 50):
                tokens[i] = rng.choice(vocab)
            elif op == "d":
                del tokens[i:i + 2]
            else:
                tokens[i:i] = [rng.choice(vocab), " "]
        j = jaccard(orig, shingle_set("".join(tokens)))
    return "".join(tokens)


def build_corpus(n: int, seed: int, lo: int, hi: int, dup_rate: float):
    """(texts, family of each text, counts by kind), in generation order: base doc, its copies, ..."""
    pool, rng, cuts = load_pool(), random.Random(seed), [0]
    while cuts[-1] < len(pool):
        cuts.append(cuts[-1] + rng.randint(1, 3))
    runs = [(t, len(t.encode()) + 2) for t in ("\n\n".join(pool[a:b]) for a, b in itertools.pairwise(cuts))]
    vocab = sorted({w for p in pool[::5] for w in p.split() if w.isalpha() and w.isascii()})
    log(f"pool: {len(pool)} pieces in {len(runs)} runs, {sum(r[1] for r in runs) / 1e6:.1f} MB; "
        f"vocabulary {len(vocab)} words")
    users: list[list[int]] = [[] for _ in runs]  # base documents using each run
    texts, family, kinds = [], [], {"base": 0, "exact": 0, "format": 0, "edited": 0}
    while len(texts) < n:
        fam = kinds["base"]
        copies = [("base", base_doc(rng, runs, users, fam, lo, hi))]
        for _ in range(rng.randint(1, 3) if rng.random() < dup_rate else 0):
            u, base = rng.random(), copies[0][1]
            if u < 0.1:
                copies.append(("exact", base))
            elif u < 0.2:
                copies.append(("format", format_copy(rng, base)))
            else:
                text = edited_copy(rng, base, vocab, rng.uniform(0.4, 1.0))
                copies.append(("edited", format_copy(rng, text) if rng.random() < 0.25 else text))
        for kind, text in copies[:n - len(texts)]:
            texts.append(text)
            family.append(fam)
            kinds[kind] += 1
        if kinds["base"] % 20000 == 0:
            log(f"  {len(texts)} docs")
    return texts, family, kinds


def exact_pairs(hash_sets: list[np.ndarray], threshold: float, progress: bool = False):
    """Every (i, j, jaccard), i < j, sorted, with exact Jaccard(hash_sets[i], hash_sets[j]) >= threshold.

    Sets are sorted distinct arrays. Tokens are ranked by global frequency, rarest first; a set of
    size n indexes its first n - ceil(t*n) + 1 tokens; pairs sharing an indexed token are candidates,
    kept if t*max(|a|,|b|) <= min(|a|,|b|) and if their shared indexed tokens plus the unindexed rest
    of the set with the lower last indexed rank can reach the overlap needed; survivors are verified
    with np.intersect1d. Thresholds compare as exact fractions.
    """
    frac = Fraction(threshold).limit_denominator(10**6)
    num, den, n = frac.numerator, frac.denominator, len(hash_sets)
    sizes = np.array([h.size for h in hash_sets], dtype=np.int64)
    if n < 2 or sizes.sum() == 0:
        return []
    starts = np.concatenate(([0], np.cumsum(sizes)))
    uniq, inv, counts = np.unique(np.concatenate(hash_sets), return_inverse=True, return_counts=True)
    rank = np.empty(uniq.size, dtype=np.int64)
    rank[np.argsort(counts, kind="stable")] = np.arange(uniq.size)  # ties: by hash value
    doc = np.repeat(np.arange(n, dtype=np.int64), sizes)
    tok = np.sort((doc << 32) | rank[inv.ravel()]) & 0xFFFFFFFF  # each set's ranks, ascending
    del inv
    plen = np.where(sizes > 0, sizes + 1 - (-(-num * sizes // den)), 0)  # prefix lengths
    last = np.where(sizes > 0, tok[np.minimum(starts[:-1] + plen - 1, tok.size - 1)], -1)
    inpre = (np.arange(tok.size) - starts[doc]) < plen[doc]
    order = np.argsort(tok[inpre], kind="stable")  # by token, then document
    ptok, pdoc = tok[inpre][order], doc[inpre][order]
    del doc, inpre, order
    gstart = np.concatenate(([0], np.flatnonzero(np.diff(ptok)) + 1))
    gsize = np.diff(np.append(gstart, ptok.size))
    gstart, gsize = gstart[gsize > 1], gsize[gsize > 1]
    if progress:
        log(f"  join: {sizes.sum()} tokens, {uniq.size} distinct, {ptok.size} indexed, {gsize.size} "
            f"shared lists (longest {gsize.max(initial=0)}), {int((gsize * (gsize - 1) // 2).sum())} pairs")

    def chunks(budget=20_000_000):  # (a, b) arrays of pair instances, a < b
        for m in np.unique(gsize):
            s = gstart[gsize == m]
            if m * (m - 1) // 2 > budget:  # a huge posting list: row by row
                for d in (pdoc[g:g + m] for g in s):
                    yield from ((np.full(m - 1 - x, d[x]), d[x + 1:]) for x in range(m - 1))
                continue
            ii, jj = np.triu_indices(m, 1)
            step = max(1, budget // ii.size)
            for c in range(0, s.size, step):
                mat = pdoc[s[c:c + step, None] + np.arange(m)]
                yield mat[:, ii].ravel(), mat[:, jj].ravel()

    found, pending, n_pending = [], [], 0  # found: (unique pair codes a*n+b, shared indexed tokens)
    for a, b in itertools.chain(chunks(), [(None, None)]):
        if a is not None:
            keep = np.minimum(sizes[a], sizes[b]) * den >= num * np.maximum(sizes[a], sizes[b])
            pending.append(a[keep] * n + b[keep])
            n_pending += a.size
        if pending and (n_pending >= 50_000_000 or a is None):
            found.append(np.unique(np.concatenate(pending), return_counts=True))
            pending, n_pending = [], 0
    if not found:
        return []
    code, shared = np.concatenate([f[0] for f in found]), np.concatenate([f[1] for f in found])
    order = np.argsort(code, kind="stable")
    code, shared = code[order], shared[order]
    first = np.flatnonzero(np.concatenate(([True], code[1:] != code[:-1])))
    code, shared = code[first], np.add.reduceat(shared, first)
    a, b = code // n, code % n
    x = np.where(last[a] <= last[b], a, b)  # its unindexed tokens are the only overlap not counted
    ub = np.minimum(shared + sizes[x] - plen[x], np.minimum(sizes[a], sizes[b]))
    ok = ub * (num + den) >= num * (sizes[a] + sizes[b])  # J >= t <=> overlap >= t(|a|+|b|)/(1+t)
    if progress:
        log(f"  {code.size} candidates, {int(ok.sum())} left after the overlap bound; verifying")
    out, sz = [], sizes.tolist()
    for i, j in zip(a[ok].tolist(), b[ok].tolist()):
        inter = np.intersect1d(tok[starts[i]:starts[i + 1]], tok[starts[j]:starts[j + 1]], assume_unique=True).size
        if inter * den >= num * (sz[i] + sz[j] - inter):
            out.append((i, j, inter / (sz[i] + sz[j] - inter)))
    return out


def check(sets: list[np.ndarray], family: list[int], seed: int, truth: list, threshold: float,
          n_docs: int = 2000) -> dict:
    """exact_pairs, and the truth restricted to the sample, vs brute force (overlaps as a sparse
    product) on ~n_docs documents: whole families, sampled."""
    from scipy import sparse

    fams, size, chosen, total = sorted(set(family)), collections.Counter(family), set(), 0
    for f in random.Random(seed + 1).sample(fams, len(fams)):
        if total >= n_docs:
            break
        chosen.add(f)
        total += size[f]
    picked = [i for i, f in enumerate(family) if f in chosen]
    sub, fam = [sets[i] for i in picked], np.array([family[i] for i in picked])
    sz = np.array([s.size for s in sub])
    uniq, inv = np.unique(np.concatenate(sub), return_inverse=True)
    rows = np.repeat(np.arange(len(sub)), sz)
    x = sparse.csr_matrix((np.ones(rows.size, dtype=np.int64), (rows, inv.ravel())), shape=(len(sub), uniq.size))
    ov = sparse.triu(x @ x.T, k=1).tocoo()
    union = sz[ov.row] + sz[ov.col] - ov.data
    result = {"docs": len(sub)}
    pos = {d: k for k, d in enumerate(picked)}
    for t in sorted({threshold, 0.5, 0.7, 0.8, 0.95}):
        f = Fraction(t).limit_denominator(10**6)
        hit = ov.data * f.denominator >= f.numerator * union
        brute = sorted(zip(ov.row[hit].tolist(), ov.col[hit].tolist(), (ov.data[hit] / union[hit]).tolist()))
        fast = exact_pairs(sub, t)
        result[f"t={t}"] = {"pairs": len(brute), "exact_pairs_identical": fast == brute}
        log(f"check t={t}: brute force {len(brute)} pairs, exact_pairs {len(fast)}: "
            f"{'identical' if fast == brute else 'DIFFERENT'}")
        if t == threshold:
            mine = [(pos[i], pos[j], v) for i, j, v in truth if i in pos and j in pos]
            result[f"t={t}"]["truth_identical"] = mine == brute
            log(f"check t={t}: truth.parquet restricted to the sample: {len(mine)} pairs, "
                f"{'identical' if mine == brute else 'DIFFERENT'}")
    cross = fam[ov.row] != fam[ov.col]
    result["chance_overlap"] = {  # pairs of documents from different families
        "pairs": int(len(fam) ** 2 - (np.unique(fam, return_counts=True)[1] ** 2).sum()) // 2,
        "sharing_a_shingle": int(cross.sum()), "sharing_10_shingles": int((ov.data[cross] >= 10).sum()),
        "max_jaccard": round(float((ov.data / union)[cross].max(initial=0)), 4)}
    log(f"chance overlap: {result['chance_overlap']}")
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100_000, help="documents to write")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--min-bytes", type=int, default=1000)
    parser.add_argument("--max-bytes", type=int, default=5000)
    parser.add_argument("--dup-rate", type=float, default=0.1, help="share of base docs with copies")
    parser.add_argument("--threshold", type=float, default=0.5, help="Jaccard of truth pairs")
    parser.add_argument("--out", type=Path, default=make_docs.OUT_DIR / "neardup")
    parser.add_argument("--check", action="store_true", help="exact_pairs vs brute force, 2,000 docs")
    args = parser.parse_args(argv)

    texts, family, kinds = build_corpus(args.n, args.seed, args.min_bytes, args.max_bytes, args.dup_rate)
    perm = list(range(len(texts)))
    random.Random(args.seed).shuffle(perm)
    texts, family = [texts[k] for k in perm], [family[k] for k in perm]
    ids = [f"nd-{k:06d}" for k in range(len(texts))]  # output order: id order = index order
    payload = "".join(json.dumps({"id": i, "text": t}, ensure_ascii=False) + "\n" for i, t in zip(ids, texts))
    payload = payload.encode()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "docs.jsonl").write_bytes(payload)
    seconds = {"generate": round(time.time() - _T0, 1)}
    log(f"{len(texts)} docs {kinds} -> {args.out / 'docs.jsonl'} ({len(payload) / 1e6:.1f} MB); shingling")

    sets = [shingle_set(t) for t in texts]
    pairs = exact_pairs(sets, args.threshold, progress=True)
    jac = np.array([p[2] for p in pairs], dtype=np.float64)
    pq.write_table(pa.table({"id_a": [ids[p[0]] for p in pairs], "id_b": [ids[p[1]] for p in pairs],
                             "jaccard": jac}), args.out / "truth.parquet")
    seconds["truth"] = round(time.time() - _T0 - seconds["generate"], 1)
    edges = [round(args.threshold + 0.05 * k, 2) for k in range(round((1 - args.threshold) / 0.05) + 1)]
    bins = {f"{lo:.2f}-{hi:.2f}": int(((jac >= lo) & (jac < hi)).sum()) for lo, hi in itertools.pairwise(edges)}
    bins["1.00"] = int((jac == 1.0).sum())
    sizes = [len(t.encode()) for t in texts]
    summary = {
        "out": str(args.out), "docs": len(texts), "seed": args.seed, "bytes_total": sum(sizes),
        "bytes_mean": round(sum(sizes) / len(sizes)), "bytes_min": min(sizes), "bytes_max": max(sizes),
        "docs_jsonl_bytes": len(payload), "generated": kinds, "truth_threshold": args.threshold,
        "truth_pairs": len(pairs), "truth_pairs_by_jaccard": bins,
        "truth_pairs_across_families": sum(family[i] != family[j] for i, j, _ in pairs),
        "docs_in_truth_pairs": len({i for p in pairs for i in p[:2]}),
        "sha256_docs_jsonl": hashlib.sha256(payload).hexdigest(), "seconds": seconds,
    }
    if args.check:
        summary["check"] = check(sets, family, args.seed, pairs, args.threshold)
        seconds["check"] = round(time.time() - _T0 - seconds["generate"] - seconds["truth"], 1)
    seconds["total"] = round(time.time() - _T0, 1)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    log(f"{len(pairs)} truth pairs ({summary['truth_pairs_across_families']} across families) -> "
        f"{args.out / 'truth.parquet'}")
    for name, count in bins.items():
        print(f"  jaccard {name:<10}{count:>8}")
    print(f"sha256 {summary['sha256_docs_jsonl']}")


if __name__ == "__main__":
    main()
