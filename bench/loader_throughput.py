"""TokenLoader read throughput: tokens/s of one process iterating one stream of a token split.

Writes a split of ~200M uint16 tokens (seq_len 2048, 8 shards of unequal size, random ids,
two documents per sequence) with ``lab.tokens.shards.write_shard`` to a temporary directory (or
``--dir``, reused when it already holds a split of that size), then iterates ``lab.tokens.loader
.TokenLoader`` over one epoch of one stream in one single-threaded process:

- ``world1``: world_size 1, num_workers 1 (the stream is the whole epoch);
- ``world4_rank0``: world_size 4, rank 0 (one stream, a quarter of the epoch).

Every delivered sequence is touched, in one of two ways (both reported):

- ``copy``: ``np.copyto`` into a preallocated [64, seq_len] batch buffer, as a collate step does;
- ``sum``: ``tokens.sum()`` per sequence (a cheap reduction that reads every token).

Pages are warm (the split was just written or read; 400 MB fits in the page cache): warm runs
are the best of --repeat passes by wall time, with the median CPU time (the machine is shared).
One ``cold`` pass first evicts the split from the page cache with ``posix_fadvise(DONTNEED)``
(no root needed; the files are clean after ``write_shard``'s fsync), so it reads the disk.
Loader construction (memory-mapping the shards) is timed apart; the epoch's order is computed
block by block during the iteration (``lab.tokens.loader.FeistelOrder``), so it is inside the figures.
``world1_copy_prefetch4`` is the copy pass with ``prefetch=4`` (a reading thread and a copy of
every row): the cost of the prefetch machinery when the pages are warm.
``reference_fancy_index`` copies the same rows in the same order by numpy fancy indexing in
blocks of 64, which is the cost of the bytes without the loader's per-sequence Python work.

    .venv/bin/python bench/loader_throughput.py [--dir DIR] [--tokens 200e6] [--repeat 3]

Writes bench/out/loader_throughput.json. Target: >= 50M tokens/s per process.
"""

from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "RAYON_NUM_THREADS"):
    os.environ[_v] = "1"

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from lab.tokens.shards import SplitManifest, read_manifest, write_manifest, write_shard
from lab.tokens.loader import TokenLoader, stream_order

SEQ_LEN = 2048
SHARDS = 8
BATCH = 64  # rows of the copy buffer
VOCAB = 50304


def write_split(directory: Path, tokens: float, *, seed: int = 0) -> SplitManifest:
    """A split of ~``tokens`` random uint16 ids in ``SHARDS`` shards of unequal size."""
    rng = np.random.default_rng(seed)
    sequences = int(tokens) // SEQ_LEN
    weights = rng.uniform(0.5, 1.5, SHARDS)
    counts = np.diff(np.round(np.concatenate([[0], np.cumsum(weights)]) / weights.sum() * sequences).astype(int))
    shards = []
    for k, c in enumerate(counts):
        ids = rng.integers(0, VOCAB, size=(c, SEQ_LEN), dtype=np.uint16)
        cuts = rng.integers(1, SEQ_LEN, size=c)
        cu = [np.array([0, a, SEQ_LEN], dtype=np.int32) for a in cuts]
        shards.append(write_shard(directory, k, ids, cu, np.dtype(np.uint16)))
    m = SplitManifest(split="train", dtype="uint16", seq_len=SEQ_LEN, eod_id=0, pad_id=0, vocab_size=VOCAB,
                      tokenizer_sha256="0" * 64, config_hash="bench", shuffle_seed=seed, packing="bench",
                      shards=shards)
    write_manifest(directory, m)
    return m


def evict(directory: Path) -> None:
    """Drop the split's (clean) pages from the page cache."""
    for p in directory.glob("shard-*"):
        fd = os.open(p, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def one_pass(directory: Path, touch: str, **kw) -> dict:
    """Build a loader, iterate it; wall and CPU seconds of the iteration alone (order included)."""
    t0 = time.perf_counter()
    loader = TokenLoader(directory, **kw)
    t1 = time.perf_counter()
    buf = np.empty((BATCH, SEQ_LEN), dtype=np.uint16)
    check, n = 0, 0
    w, c = time.perf_counter(), time.process_time()
    if touch == "copy":
        for s in loader:
            np.copyto(buf[n % BATCH], s.tokens)
            n += 1
        check = int(buf.sum(dtype=np.uint64))
    else:
        for s in loader:
            check += int(s.tokens.sum(dtype=np.uint64))
            n += 1
    wall, cpu = time.perf_counter() - w, time.process_time() - c
    return {"sequences": n, "tokens": n * SEQ_LEN, "wall_s": wall, "cpu_s": cpu, "open_s": t1 - t0,
            "checksum": check}


def reference_fancy_index(directory: Path, **kw) -> dict:
    """The same rows in the same order, copied by fancy indexing 64 at a time (no per-row Python)."""
    loader = TokenLoader(directory, **kw)
    index = stream_order(loader.manifest.sequences, seed=loader.seed, epoch=loader.epoch, stream=loader.stream,
                         streams=loader.streams)
    shard = np.searchsorted(loader._starts, index, side="right") - 1
    row = index - loader._starts[shard]
    tokens = [s.tokens for s in loader._shards]
    w, c = time.perf_counter(), time.process_time()
    n = 0
    for k, t in enumerate(tokens):  # per shard, that shard's rows in stream order, in blocks
        rows = row[shard == k]
        for i in range(0, rows.size, BATCH):
            block = t[rows[i:i + BATCH]]
            n += block.shape[0]
    wall, cpu = time.perf_counter() - w, time.process_time() - c
    return {"sequences": n, "tokens": n * SEQ_LEN, "wall_s": wall, "cpu_s": cpu}


def rates(runs: list[dict]) -> dict:
    best = min(runs, key=lambda r: r["wall_s"])
    cpu = statistics.median(r["cpu_s"] for r in runs)
    out = {k: v for k, v in best.items() if k not in ("wall_s", "cpu_s")}
    out.update(wall_s=round(best["wall_s"], 4), cpu_s=round(cpu, 4),
               tokens_per_s=round(best["tokens"] / best["wall_s"] / 1e6, 1),
               tokens_per_cpu_s=round(best["tokens"] / cpu / 1e6, 1), unit="M tokens")
    if "open_s" in out:
        out["open_s"] = round(out["open_s"], 4)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", type=Path, default=None, help="split directory to write (or reuse)")
    ap.add_argument("--tokens", type=float, default=200e6)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", type=Path, default=Path("bench/out/loader_throughput.json"))
    args = ap.parse_args()

    tmp = tempfile.TemporaryDirectory() if args.dir is None else None
    directory = Path(tmp.name) / "train" if tmp else args.dir
    try:
        want = int(args.tokens) // SEQ_LEN
        if (directory / "manifest.json").exists() and read_manifest(directory).sequences == want:
            m, write_s = read_manifest(directory), None
        else:
            t = time.perf_counter()
            m = write_split(directory, args.tokens)
            write_s = round(time.perf_counter() - t, 2)
        res = {"dir": str(directory), "sequences": m.sequences, "tokens": m.sequences * SEQ_LEN, "seq_len": SEQ_LEN,
               "dtype": m.dtype, "shards": [s.sequences for s in m.shards], "write_s": write_s,
               "touch": {"copy": f"np.copyto into a preallocated [{BATCH}, {SEQ_LEN}] uint16 buffer",
                         "sum": "tokens.sum(dtype=uint64) per sequence"},
               "loadavg_before": os.getloadavg(), "runs": {}}
        layouts = {"world1": {"world_size": 1, "rank": 0}, "world4_rank0": {"world_size": 4, "rank": 0}}
        evict(directory)
        res["runs"]["cold_world1_copy"] = rates([one_pass(directory, "copy", **layouts["world1"])])
        for name, kw in layouts.items():
            for touch in ("copy", "sum"):
                res["runs"][f"{name}_{touch}"] = rates([one_pass(directory, touch, **kw) for _ in range(args.repeat)])
            res["runs"][f"{name}_reference_fancy_index"] = rates(
                [reference_fancy_index(directory, **kw) for _ in range(args.repeat)])
        res["runs"]["world1_copy_prefetch4"] = rates(
            [one_pass(directory, "copy", prefetch=4, **layouts["world1"]) for _ in range(args.repeat)])
        res["loadavg_after"] = os.getloadavg()
        res["target_m_tokens_per_s"] = 50
        res["meets_target"] = all(r["tokens_per_s"] >= 50 for k, r in res["runs"].items() if "reference" not in k)
    finally:
        if tmp:
            tmp.cleanup()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=1))
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
