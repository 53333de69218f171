"""Loader at scale: the epoch order's speed and memory at N = 10**6 and 10**9 sequences, and
prefetch hiding slow reads.

``order``: one process computes the global sequence indices of stream 0 of one (every position
of the epoch, in order) for N sequences, nothing else: no split, no tokens.

- ``--impl feistel``: ``lab.tokens.loader.FeistelOrder.stream_blocks`` (the loader's order, blocks of
  ``lab.tokens.loader.BLOCK``); ``--take`` stops after that many positions (at 10**9 a whole epoch is
  ~10**9 indices; the rate is the same from the first block to the last);
- ``--impl numpy``: the loader's previous order, ``numpy.random.default_rng((seed, epoch))
  .permutation(N)`` then the stream's slice (what ``stream_order`` did): 8 bytes per sequence, so
  8 GB at 10**9, which is why it is only run at 10**6.

It prints indices/s and the peak RSS (``ru_maxrss``) after the imports and at the end; quote
``/usr/bin/time -v``'s maximum RSS for the process.

``prefetch``: a split of ``--sequences`` x 2048 uint16 tokens in a temporary directory, read
through ``TokenLoader(read_row=...)`` with every row read delayed by ``--delay-ms`` (storage
latency, a ``time.sleep`` in the hook), by a consumer whose every step takes ``--work-ms``
(``time.sleep``: a trainer waiting on its accelerator). For each ``--prefetch`` value it reports
the loader's telemetry (mean, p50, p99, max wait per step, stalls over ``--stall-ms``) and the
wall time of the epoch.

    .venv/bin/python bench/loader_scale.py order --impl feistel --n 1e9 --take 1e8
    .venv/bin/python bench/loader_scale.py order --impl numpy --n 1e6
    .venv/bin/python bench/loader_scale.py prefetch --delay-ms 2 --work-ms 3 --prefetch 0 4 16

Writes bench/out/loader_scale_{order_IMPL_N,prefetch_DELAYMS_WORKMS}.json.
"""

from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "RAYON_NUM_THREADS"):
    os.environ[_v] = "1"

import argparse
import json
import resource
import tempfile
import time
from pathlib import Path

import numpy as np

from lab.tokens.shards import SplitManifest, write_manifest, write_shard
from lab.tokens.loader import BLOCK, FeistelOrder, TokenLoader

SEQ_LEN = 2048


def rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def order(impl: str, n: int, take: int, seed: int = 0, epoch: int = 0) -> dict:
    """Indices/s of stream 0 of 1 (the whole epoch's order) for ``take`` positions."""
    rss0 = rss_mb()
    t = time.perf_counter()
    taken, checksum, first = 0, 0, None
    if impl == "feistel":
        for block in FeistelOrder(n, seed=seed, epoch=epoch).stream_blocks(0, 1):
            first = block[:8].tolist() if first is None else first
            checksum = (checksum + int(block.sum())) % (1 << 61)
            taken += block.size
            if taken >= take:
                break
    else:
        index = np.random.default_rng((seed, epoch)).permutation(n)[0::1].copy()
        first, taken = index[:8].tolist(), index.size
        checksum = int(index.sum()) % (1 << 61)
    s = time.perf_counter() - t
    return {"impl": impl, "sequences": n, "taken": taken, "seconds": round(s, 3),
            "m_indices_per_s": round(taken / s / 1e6, 2), "first": first, "checksum": checksum,
            "max_rss_mb_after_imports": rss0, "max_rss_mb": rss_mb(), "block": BLOCK if impl == "feistel" else None}


def write_split(directory: Path, sequences: int) -> None:
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 50304, size=(sequences, SEQ_LEN), dtype=np.uint16)
    cu = [np.array([0, SEQ_LEN], dtype=np.int32)] * sequences
    shard = write_shard(directory, 0, ids, cu, np.dtype(np.uint16))
    write_manifest(directory, SplitManifest(split="train", dtype="uint16", seq_len=SEQ_LEN, eod_id=0, pad_id=0,
                                            vocab_size=50304, tokenizer_sha256="0" * 64, config_hash="bench",
                                            shuffle_seed=0, packing="bench", shards=[shard]))


def prefetch(args) -> dict:
    delay, work = args.delay_ms / 1000.0, args.work_ms / 1000.0

    def slow(shard, row, view):
        time.sleep(delay)
        return view

    out = {"sequences": args.sequences, "seq_len": SEQ_LEN, "delay_ms": args.delay_ms, "work_ms": args.work_ms,
           "stall_ms": args.stall_ms, "runs": {}}
    with tempfile.TemporaryDirectory() as tmp:
        split = Path(tmp) / "train"
        write_split(split, args.sequences)
        for k in args.prefetch:
            loader = TokenLoader(split, prefetch=k, stall_ms=args.stall_ms, read_row=slow)
            t, n = time.perf_counter(), 0
            for s in loader:
                time.sleep(work)
                n += int(s.tokens[0] >= 0)
            wall = time.perf_counter() - t
            tel = loader.telemetry()
            out["runs"][f"prefetch{k}"] = {"wall_s": round(wall, 3), "steps": n, **{
                key: tel[key] for key in ("mean_ms", "p50_ms", "p99_ms", "max_ms", "stalls")}}
            if args.telemetry_dir:
                loader.write_telemetry(Path(args.telemetry_dir) / f"prefetch{k}")
    out["loadavg"] = os.getloadavg()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    o = sub.add_parser("order")
    o.add_argument("--impl", choices=["feistel", "numpy"], required=True)
    o.add_argument("--n", type=float, required=True, help="sequences in the epoch")
    o.add_argument("--take", type=float, default=None, help="positions to compute (default: all)")
    p = sub.add_parser("prefetch")
    p.add_argument("--sequences", type=int, default=500)
    p.add_argument("--delay-ms", type=float, default=2.0)
    p.add_argument("--work-ms", type=float, default=3.0)
    p.add_argument("--stall-ms", type=float, default=1.0)
    p.add_argument("--prefetch", type=int, nargs="+", default=[0, 4, 16])
    p.add_argument("--telemetry-dir", default=None, help="also write each run's telemetry table here")
    args = ap.parse_args()
    if args.cmd == "order":
        n = int(args.n)
        res = order(args.impl, n, n if args.take is None else int(args.take))
        name = f"order_{args.impl}_{n}"
    else:
        res = prefetch(args)
        name = f"prefetch_{args.delay_ms:g}_{args.work_ms:g}"
    res["loadavg_end"] = os.getloadavg()
    path = Path("bench/out") / f"loader_scale_{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(res, indent=1))
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
