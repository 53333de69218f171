"""materialize: the kept documents' tokens -> shuffled, split, packed token shards (DESIGN §8).

1. **Select**: the documents the run's config keeps (``lab.query.drop_reasons``), with their token
   ids from ``tokenized/`` (counted by the frozen tokenizer; a tokenizer whose sha256 differs from
   the one the counts were made with is refused).
2. **Shuffle**: a global order by a seeded 64-bit mix of ``doc_id`` (``pack.shuffle_seed``), so the
   order does not depend on partitions or workers.
3. **Split** by document: the ``round(val_fraction x documents)`` documents (at least one when
   ``val_fraction > 0`` and there are two or more) with the lowest value of a second, independent
   seeded mix of their ``doc_id`` form ``val``; no document is in both splits.
4. **Pack** (``lab.pack``) each split with ``pack.strategy`` at ``pack.seq_len``; every document
   ends with EOD; unused slots hold PAD.
5. **Write** ``tokens/{train,val}/`` in the ``lab.io.shards`` format (uint16 when the vocabulary
   fits) with a manifest per split, and ``stats/packing.json``: utilization, truncation and
   splits of every strategy at 512, 2048 and 8192 tokens on the train split (what the Packing tab
   compares).

Runs in the calling process: memory is the kept tokens of one split (4 bytes per token while
packing). Same config and input, same bytes, whatever the workers.
"""

from __future__ import annotations

import shutil

import numpy as np
import pyarrow.parquet as pq

from lab import pack, tokenize
from lab.config import Config
from lab.errors import LabError
from lab.io.run import RunLayout
from lab.io.shards import SplitManifest, token_dtype, write_manifest, write_shard
from lab.io.writers import read_json, write_json

COMPARE_SEQ_LENS = (512, 2048, 8192)


def _mix(x: np.ndarray, seed: int, salt: int) -> np.ndarray:
    """splitmix64 of ``x`` xor a seed-derived constant: a deterministic, well-spread 64-bit key."""
    with np.errstate(over="ignore"):
        z = x.astype(np.int64).view(np.uint64) ^ np.uint64((seed * 0x9E3779B97F4A7C15 + salt) % 2**64)
        z = z + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def order_and_split(doc_ids: np.ndarray, seed: int, val_fraction: float) -> tuple[np.ndarray, np.ndarray]:
    """(positions of ``doc_ids`` in shuffled order, whether each of those is a validation document)."""
    order = np.lexsort((doc_ids, _mix(doc_ids, seed, 1)))
    n = doc_ids.size
    n_val = int(round(val_fraction * n))
    if val_fraction > 0 and n >= 2:
        n_val = min(max(n_val, 1), n - 1)
    val = np.zeros(n, dtype=bool)
    val[np.lexsort((doc_ids, _mix(doc_ids, seed, 2)))[:n_val]] = True
    return order, val[order]


def kept_tokens(cfg: Config, layout: RunLayout, sha256: str) -> tuple[np.ndarray, list[np.ndarray]]:
    """doc_ids and token ids (without EOD) of every document ``cfg`` keeps, in doc_id order."""
    from lab import query

    reasons = query.drop_reasons(query.open_run(layout.root, refresh=True), cfg)
    kept = np.sort(reasons.filter(reasons["reason"].is_null())["doc_id"].to_numpy())
    ids: dict[int, np.ndarray] = {}
    for f in sorted(layout.tokenized_dir.glob("part-*.parquet")):
        done = read_json(f.with_suffix(".json"))
        if done.get("sha256") != sha256:
            raise LabError(f"{f} was counted with tokenizer {str(done.get('sha256'))[:16]}…, the run's is "
                           f"{sha256[:16]}…; rerun `corpus-lab run` to recount")
        t = pq.read_table(f, columns=["doc_id", "ids"])
        d = t.column("doc_id").to_numpy()
        want = np.flatnonzero(np.isin(d, kept))
        col = t.column("ids")
        for i in want.tolist():
            ids[int(d[i])] = col[i].values.to_numpy()
    missing = [int(x) for x in kept if int(x) not in ids]
    if missing:
        raise LabError(f"{len(missing)} kept documents have no token counts (e.g. doc_id {missing[0]}); "
                       "rerun `corpus-lab run` to finish tokenizing")
    return kept, [ids[int(x)] for x in kept]


def run(cfg: Config, layout: RunLayout) -> dict:
    """Write ``tokens/`` and ``stats/packing.json`` for the run's config; returns a summary."""
    if not layout.tokenizer_fit.exists():
        raise LabError(f"{layout.root} has no tokenizer (tokenizer/fit.json); run `corpus-lab run` with "
                       "tokenizer.enabled: true")
    fit = read_json(layout.tokenizer_fit)
    sha = fit["sha256"]
    tok = tokenize.load(layout, sha)  # refuses a tokenizer.json that changed
    eod, pad_id = tok.token_to_id(tokenize.EOD), tok.token_to_id(tokenize.PAD)
    dtype = token_dtype(tok.get_vocab_size())
    doc_ids, ids = kept_tokens(cfg, layout, sha)
    order, is_val = order_and_split(doc_ids, cfg.pack.shuffle_seed, cfg.pack.val_fraction)
    tmp = layout.tokens.with_name(".tmp-tokens")
    shutil.rmtree(tmp, ignore_errors=True)
    summary: dict = {"tokenizer_sha256": sha, "config_hash": cfg.config_hash(), "splits": {}}
    compare: dict = {}
    for split, members in (("train", order[~is_val]), ("val", order[is_val])):
        lengths = np.array([ids[i].size + 1 for i in members], dtype=np.int64)
        p = pack.plan(lengths, cfg.pack.seq_len, cfg.pack.strategy)
        tokens, cu = pack.materialize(p, lambda k, members=members: np.append(ids[members[k]], eod), pad_id, dtype)
        m = SplitManifest(split=split, dtype=dtype.name, seq_len=cfg.pack.seq_len, eod_id=eod, pad_id=pad_id,
                          vocab_size=tok.get_vocab_size(), tokenizer_sha256=sha, config_hash=cfg.config_hash(),
                          shuffle_seed=cfg.pack.shuffle_seed, packing=cfg.pack.strategy)
        k = cfg.pack.shard_sequences
        for s, a in enumerate(range(0, len(tokens), k)):
            m.shards.append(write_shard(tmp / split, s, tokens[a:a + k], cu[a:a + k], dtype))
        (tmp / split).mkdir(parents=True, exist_ok=True)
        write_manifest(tmp / split, m)
        summary["splits"][split] = {"documents": int(members.size), **p.stats(lengths)}
        if split == "train":
            compare = {f"{strategy}@{n}": pack.plan(lengths, n, strategy).stats(lengths)
                       for strategy in pack.STRATEGIES for n in COMPARE_SEQ_LENS}
    shutil.rmtree(layout.tokens, ignore_errors=True)
    tmp.rename(layout.tokens)
    write_json({"chosen": {"strategy": cfg.pack.strategy, "seq_len": cfg.pack.seq_len}, "train": compare,
                "splits": summary["splits"]}, layout.packing_stats)
    return summary

