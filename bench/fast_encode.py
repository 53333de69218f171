"""Tokens per CPU-second: ``lab.tokens.fast_encode`` (tiktoken's encoder on the run's fitted BPE) vs raw
HuggingFace ``tokenizers`` ``encode_batch_fast``, one core, identical ids.

Both run in one process with one thread, as corpus-lab's workers run (``RAYON_NUM_THREADS=1``,
``lab/engine.py``'s worker environment); tiktoken's ``encode`` runs in the calling thread. One
32,000-token byte-level BPE is fitted with ``lab.tokens.tokenize.fit`` on the English documents plus the
multilingual set (saved to --tokenizer, reused if present), then on each set, rounds of A B A B:

- ``hf``: ``Tokenizer.encode_batch_fast(batch, add_special_tokens=False)`` in batches of 256, ids
  as ``np.uint32`` arrays (what ``lab.tokens.tokenize.encode`` keeps) — the reference;
- ``fast``: ``lab.tokens.fast_encode.encoder_for(tok)(texts)``: tiktoken ids, their ``np.uint32`` arrays
  and the unsafe-token check (ranks are the HF ids: no id map to apply).
- ``tiktoken_only``: ``Encoding.encode`` alone (lists of ints), to show what the arrays and the
  check cost.

Sets: ``--input`` (bench/out/docs_en.jsonl, real English documents made by make_docs.py) and the
multilingual set: the troff sources of every installed man page language (/usr/share/man/*/man1,
up to --per-lang pages each; UTF-8). The ids of every document are asserted equal (fast vs hf).

    .venv/bin/python bench/fast_encode.py [--input bench/out/docs_en.jsonl] [--rounds 3]   # -> bench/out/fast_encode.json
    .venv/bin/python bench/fast_encode.py --sweep              # every code point in context: tiktoken alone vs HF
    .venv/bin/python bench/fast_encode.py --only hf|fast|none # one encoder, one pass per set: for /usr/bin/time -v
"""

from __future__ import annotations

import os

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

import argparse  # noqa: E402
import glob  # noqa: E402
import gzip  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from lab.tokens import fast_encode

from lab.tokens import tokenize  # noqa: E402
from lab.config import TokenizerConfig  # noqa: E402


def man_sources(per_lang: int) -> list[str]:
    """The man(1) page sources of every installed translation, ``per_lang`` per language."""
    out = []
    for d in sorted(glob.glob("/usr/share/man/*/man1/")):
        for f in sorted(glob.glob(d + "*.gz"))[:per_lang]:
            out.append(gzip.open(f).read().decode("utf-8", "replace"))
    return out


def sweep(fast) -> None:
    """Every Unicode scalar value (surrogates excepted) between letters, digits, spaces and a
    contraction, 500 code points per document: the pre-tokenizers' Unicode classes in context."""
    cps = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    docs = ["".join(f"a{ch}b {ch}1{ch} {ch}{ch}x  {ch}'s{ch} {ch}" for ch in map(chr, cps[i:i + 500]))
            for i in range(0, len(cps), 500)]
    t = time.perf_counter()
    diff = fast_encode.differences(fast, docs)
    print(json.dumps({"documents": len(docs), "chars": sum(map(len, docs)), "differ": diff,
                      "seconds": round(time.perf_counter() - t, 1)}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--input", default="bench/out/docs_en.jsonl")
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--per-lang", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tokenizer", default="bench/out/fast_encode_tokenizer.json")
    ap.add_argument("--only", choices=["hf", "fast", "none"])  # none: load texts and tokenizer only (the baseline)
    ap.add_argument("--sweep", action="store_true", help="every code point in word/digit/space/contraction contexts: "
                    "documents where tiktoken alone (no fallback) differs from encode_batch_fast")
    ap.add_argument("--out", default="bench/out/fast_encode.json")
    args = ap.parse_args()
    sets = {"en": [json.loads(line)["text"] for line in open(args.input)][: args.n], "multilingual": man_sources(args.per_lang)}
    from tokenizers import Tokenizer

    tp = Path(args.tokenizer)
    if tp.exists():
        tok = Tokenizer.from_str(tp.read_text())
    else:
        tok = tokenize.fit(sets["en"] + sets["multilingual"], TokenizerConfig(vocab_size=32000))
        tp.parent.mkdir(parents=True, exist_ok=True)
        tp.write_text(tok.to_str())
    t = time.process_time()
    fast = fast_encode.encoder_for(tok) if args.only != "hf" else None
    build_s = time.process_time() - t

    def hf(texts):
        return [np.asarray(e.ids, dtype=np.uint32) for i in range(0, len(texts), 256)
                for e in tok.encode_batch_fast(texts[i:i + 256], add_special_tokens=False)]

    def tiktoken_only(texts):
        return [fast.encoding.encode(t, allowed_special="all") for t in texts]

    if args.sweep:
        sweep(fast)
        return
    if args.only:
        fn = {"hf": hf, "fast": fast, "none": lambda texts: None}[args.only]
        for texts in sets.values():
            fn(texts)
        return
    res = {"vocab": tok.get_vocab_size(), "unsafe_tokens": int(fast.unsafe.sum()), "encoder_build_cpu_s": round(build_s, 3),
           "rounds": args.rounds, "sets": {}}
    for name, texts in sets.items():
        cpu: dict[str, list[float]] = {"hf": [], "fast": [], "tiktoken_only": []}
        out = {}
        for _ in range(args.rounds):  # A B A B: the machine is shared
            for label, fn in (("hf", hf), ("fast", fast), ("tiktoken_only", tiktoken_only)):
                t = time.process_time()
                out[label] = fn(texts)
                cpu[label].append(time.process_time() - t)
        assert all(a.tolist() == b.tolist() for a, b in zip(out["fast"], out["hf"])), "ids differ"
        n_tok = int(sum(a.size for a in out["hf"]))
        mb = sum(len(t.encode()) for t in texts) / 1e6
        med = {k: statistics.median(v) for k, v in cpu.items()}
        res["sets"][name] = {"docs": len(texts), "mb": round(mb, 2), "tokens": n_tok, "fallbacks": fast.fallbacks,
                             "cpu_s": {k: [round(x, 3) for x in v] for k, v in cpu.items()},
                             "tokens_per_cpu_s": {k: round(n_tok / v) for k, v in med.items()},
                             "ratio_fast_vs_hf": round(med["hf"] / med["fast"], 2),
                             "ratio_per_round": [round(a / b, 2) for a, b in zip(cpu["hf"], cpu["fast"])],
                             "ids_equal": True}
    Path(args.out).write_text(json.dumps(res, indent=1))
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
