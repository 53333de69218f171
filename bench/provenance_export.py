"""Provenance and Megatron export costs.

1. ``materialize_e2e``: ``lab.tokens.materialize.run`` on a copy of a tokens run (``--run``; default: the
   synthetic sample with ``tests/conftest.tokens_config``, built once under ``--dir``), best of
   ``--repeat``, with provenance (as shipped) and with ``write_pieces`` replaced by a no-op (what
   materialize wrote before provenance).
2. ``write``: a synthetic split of ``--tokens`` uint16 tokens (seq_len 2048, documents of 1..4096
   tokens packed by ``lab.tokens.pack.plan(best_fit)``, shards of 8192 sequences), written shard by shard with
   ``write_shard`` (tokens, bounds, offsets: the "before") and ``write_pieces`` (the extra write); CPU
   seconds of one process per GB of tokens.
3. ``export_megatron``: ``lab.tokens.export.export_megatron`` of that split: tokens/s and MB/s of .bin.

    .venv/bin/python bench/provenance_export.py [--tokens 100e6] [--repeat 3] [--dir DIR]

Writes bench/out/provenance_export.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from lab.tokens import materialize  # noqa: E402

from lab.tokens import pack
from lab.tokens import shards  # noqa: E402


def timed(fn):
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w, time.process_time() - c


def e2e(base: Path, repeat: int) -> dict:
    from conftest import tokens_config

    from lab import engine, sample
    from lab.config import load
    from lab.io.run import RunLayout

    src = base / "data"
    if not (src / "sample").exists():
        sample.build(root=src / "sample", real=False)
    cfg = tokens_config(src / "sample" / "synthetic", base / "runs", "tokens")
    if not (Path(cfg.run_dir) / "tokens" / "train" / "manifest.json").exists():
        engine.run(cfg, progress=False, client=engine.INPROCESS)
    cfg = load(Path(cfg.run_dir) / "config.yaml")
    out = {}
    real = materialize.write_pieces
    for mode in ("without_provenance", "with_provenance"):
        materialize.write_pieces = real if mode == "with_provenance" else (lambda *a, **k: None)
        walls, cpus = [], []
        for _ in range(repeat):
            copy = base / "copy"
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(cfg.run_dir, copy)
            _, w, c = timed(lambda: materialize.run(cfg, RunLayout(copy)))
            walls.append(w)
            cpus.append(c)
        toks = sum(shards.read_manifest(copy / "tokens" / s).sequences for s in ("train", "val")) * cfg.pack.seq_len
        out[mode] = {"wall_s_best": min(walls), "cpu_s_median": float(np.median(cpus)), "tokens": toks,
                     "token_bytes": 2 * toks}
    materialize.write_pieces = real
    return out


def synthetic(base: Path, n_tokens: float, repeat: int) -> dict:
    rng = np.random.default_rng(0)
    seq_len, per_shard = 2048, 8192
    lengths = rng.integers(1, 4097, size=int(n_tokens / 2048 * 1.05))
    p = pack.plan(lengths, seq_len, "best_fit", seed=0)
    doc_ids = rng.permutation(len(lengths)).astype(np.int64) * 7919
    split = base / "synthetic" / "train"
    tok_cpu, pieces_cpu = [], []
    infos = []
    for r in range(repeat):
        shutil.rmtree(split, ignore_errors=True)
        t_tok = t_pc = 0.0
        infos = []
        for k, a in enumerate(range(0, p.sequences, per_shard)):
            b = min(a + per_shard, p.sequences)
            lo, hi = int(p.seq_offsets[a]), int(p.seq_offsets[b])
            sub = pack.Plan(p.strategy, seq_len, p.documents, p.piece_doc[lo:hi], p.piece_start[lo:hi],
                            p.piece_end[lo:hi], p.seq_offsets[a:b + 1] - lo)
            bounds, offsets = sub.bounds()
            cu = np.split(bounds, offsets[1:-1])
            tokens = rng.integers(2, 32000, size=(b - a, seq_len), dtype=np.uint16)
            c = time.process_time()
            infos.append(shards.write_shard(split, k, tokens, cu, np.dtype(np.uint16)))
            t_tok += time.process_time() - c
            c = time.process_time()
            shards.write_pieces(split, k, doc_ids[sub.piece_doc], sub.piece_start, sub.piece_len, sub.seq_offsets)
            t_pc += time.process_time() - c
        tok_cpu.append(t_tok)
        pieces_cpu.append(t_pc)
    shards.write_manifest(split, shards.SplitManifest(
        split="train", dtype="uint16", seq_len=seq_len, eod_id=0, pad_id=1, vocab_size=32000,
        tokenizer_sha256="0" * 64, config_hash="bench", shuffle_seed=0, packing="best_fit", shards=infos,
        provenance="pieces"))
    gb = p.sequences * seq_len * 2 / 1e9
    pieces_bytes = sum(f.stat().st_size for f in split.glob("*.piece*.npy"))
    shard_bytes = sum(f.stat().st_size for f in split.glob("shard-*") if ".piece" not in f.name)
    from lab.tokens.export import export_megatron

    ex = []
    for _ in range(repeat):
        r, w, c = timed(lambda: export_megatron(split, base / "megatron" / "train_text_document"))
        ex.append((w, c))
    w = min(e[0] for e in ex)
    return {"tokens": p.sequences * seq_len, "pieces": int(len(p.piece_doc)), "sequences": p.sequences,
            "token_GB": gb, "shard_files_bytes": shard_bytes, "pieces_files_bytes": pieces_bytes,
            "write_shard_cpu_s_per_GB": float(np.median(tok_cpu)) / gb,
            "write_pieces_cpu_s_per_GB": float(np.median(pieces_cpu)) / gb,
            "export_megatron": {"wall_s_best": w, "cpu_s_median": float(np.median([e[1] for e in ex])),
                                "documents": r["documents"], "tokens": r["tokens"],
                                "tokens_per_s": r["tokens"] / w, "bin_MB_per_s": r["tokens"] * 2 / w / 1e6}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=float, default=100e6)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir")
    a = ap.parse_args()
    base = Path(a.dir) if a.dir else Path(tempfile.mkdtemp(prefix="prov-bench-"))
    base.mkdir(parents=True, exist_ok=True)
    res = {"materialize_e2e": e2e(base, a.repeat), "write": synthetic(base, a.tokens, a.repeat)}
    out = ROOT / "bench" / "out" / "provenance_export.json"
    out.write_text(json.dumps(res, indent=1) + "\n")
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
