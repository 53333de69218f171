"""Tokenizer fertility per language on real multilingual text: fitted BPEs vs offline references.

Input: translated man pages (bench/langid.py's ``build_dataset``: up to --per-lang pages per
language, rendered with groff; Debian's manpages-* packages, see RESULTS.md). They go through a
real ``corpus-lab run`` that keeps every language found (language ID at score >= 0.5; the
English-centric Gopher / C4 / FineWeb filters off; exact and near dedup on), which fits the run's
byte-level BPE on the stratified (language x source) sample; then ``lab.plan.fertility.compare``
fits BPEs at 8k/16k/32k/64k on that same sample and measures them, cl100k_base and o200k_base on
the documents **outside** the fit sample (``held_out``), per language, with V x d (d = 4096).

    .venv/bin/python bench/fertility_languages.py [--per-lang 120] [--sample-mb 4]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent))

from langid import build_dataset  # noqa: E402

from lab import engine  # noqa: E402

from lab.plan import fertility
from lab.config import Config, build  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--per-lang", type=int, default=120)
    ap.add_argument("--sample-mb", type=float, default=4.0)
    ap.add_argument("--runs", default="bench/out/runs")
    ap.add_argument("--out", default="bench/out/fertility_languages.json")
    args = ap.parse_args()
    t0 = time.perf_counter()
    data = build_dataset(per_lang=args.per_lang)
    langs = sorted({d.lang for d in data.docs})
    src = Path(args.runs) / "manpages.jsonl"
    src.parent.mkdir(parents=True, exist_ok=True)
    with open(src, "w") as f:
        for i, d in enumerate(data.docs):
            f.write(json.dumps({"id": f"man-{i:05d}", "text": d.text}, ensure_ascii=False) + "\n")
    off = {"enabled": False}
    cfg = build(Config, {
        "name": "fertility-languages", "output_dir": args.runs, "inputs": [{"path": str(src)}],
        "stages": {"language": {"keep": langs, "min_score": 0.5}, "gopher_quality": off, "gopher_repetition": off,
                   "c4": off, "fineweb": off},
        "tokenizer": {"sample_bytes": int(args.sample_mb * 2**20)},
        "engine": {"n_workers": 2}})
    engine.run(cfg, progress=False, overwrite=True)
    table = fertility.compare(cfg.run_dir, cfg, held_out=True)
    fertility.write(cfg.run_dir, table)
    by_lang = table.filter(pl.col("group_by") == "lang").select(
        "candidate", "vocab_size", "embedding_params", "group", "documents", "tokens_per_word", "bytes_per_token",
        "chars_per_token", "continued_words")
    res = {"languages": langs, "documents": len(data.docs), "sample_mb": args.sample_mb, "held_out": True,
           "seconds": round(time.perf_counter() - t0, 1), "all": table.filter(pl.col("group_by") == "all").to_dicts(),
           "by_lang": by_lang.to_dicts()}
    Path(args.out).write_text(json.dumps(res, indent=1, default=str))
    with pl.Config(tbl_rows=400, tbl_width_chars=200, float_precision=3):
        print(table.filter(pl.col("group_by") == "all").select("candidate", "vocab_size", "embedding_params",
                                                                "documents", "tokens_per_word", "bytes_per_token"))
        print(by_lang.pivot(on="candidate", index="group", values="bytes_per_token"))


if __name__ == "__main__":
    main()
