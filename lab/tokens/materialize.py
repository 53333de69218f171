"""materialize: the kept documents' tokens -> shuffled, split, packed token shards.

The documents the config keeps (``lab.query.drop_reasons``), with their ids from ``tokenized/`` (a
tokenizer whose sha256 differs is refused), are shuffled by a seeded mix of ``doc_id``
(``pack.shuffle_seed``), split by document into train, val and test by other seeded mixes, repeated as the
``mixture`` asks (``lab.tokens.mixture``), packed with ``pack.strategy`` at ``pack.seq_len``
(``lab.tokens.pack``; every document ends with EOD) and written to ``tokens/SPLIT/`` in the
``lab.tokens.shards`` format with provenance, plus ``stats/packing.json``. No process holds more than one
partition's or one shard's tokens: ``prepare`` (the driver: order, splits, plan), ``scatter_partition``
(per partition), ``write_one_shard`` (per shard), then ``finish`` swaps in ``tokens/`` at once (built
under ``.tmp-tokens/``). Same config and input, same bytes, whatever the workers or the partitioning.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lab.config import Config
from lab.errors import IntegrityError, NotReadyError
from lab.hashing import keyed
from lab.io.run import RunLayout
from lab.io.writers import atomic, read_json, write_json
from lab.tokens import pack, tokenize
from lab.tokens.shards import ShardInfo, SplitManifest, token_dtype, write_manifest, write_pieces, write_shard
from lab.tokens.splits import SPLITS, order_and_splits

COMPARE_SEQ_LENS = (512, 2048, 8192)


def splits_of(cfg: Config) -> tuple[str, ...]:
    """The splits materialize writes: train and val, and test when ``pack.test_fraction > 0``."""
    return SPLITS if cfg.pack.test_fraction > 0 else SPLITS[:2]


def _kept_ids(cfg: Config, layout: RunLayout) -> np.ndarray:
    """doc_ids of every document ``cfg`` keeps, sorted."""
    from lab import query

    reasons = query.drop_reasons(query.open_run(layout.root, refresh=True), cfg)
    return np.sort(reasons.filter(reasons["reason"].is_null())["doc_id"].to_numpy())


def _tokenized(layout: RunLayout, sha256: str) -> list[Path]:
    """The tokenized partitions, in key order; refuses counts made by another tokenizer."""
    files = sorted(layout.tokenized_dir.glob("part-*.parquet"))
    for f in files:
        done = read_json(f.with_suffix(".json"))
        if done.get("sha256") != sha256:
            raise IntegrityError(f"{f} was counted with tokenizer {str(done.get('sha256'))[:16]}…, the run's is "
                                 f"{sha256[:16]}… ({f.with_suffix('.json').name}); rerun `corpus-lab run` with the "
                                 "same config to recount")
    return files


def kept_tokens(cfg: Config, layout: RunLayout, sha256: str) -> tuple[np.ndarray, list[np.ndarray]]:
    """doc_ids and token ids (without EOD) of every document ``cfg`` keeps, in doc_id order."""
    kept = _kept_ids(cfg, layout)
    ids: dict[int, np.ndarray] = {}
    for f in _tokenized(layout, sha256):
        t = pq.read_table(f, columns=["doc_id", "ids"])
        d = t.column("doc_id").to_numpy()
        want = np.flatnonzero(np.isin(d, kept))
        col = t.column("ids")
        for i in want.tolist():
            ids[int(d[i])] = col[i].values.to_numpy()
    missing = [int(x) for x in kept if int(x) not in ids]
    if missing:
        raise NotReadyError(f"{len(missing)} kept documents have no token counts (e.g. doc_id {missing[0]}) in "
                            f"{layout.tokenized_dir}; rerun `corpus-lab run` to finish tokenizing")
    return kept, [ids[int(x)] for x in kept]


@dataclass(frozen=True)
class ShardTask:
    """One output shard: sequences ``plan`` (a slice of its split's plan, documents renumbered
    ``0..len(doc_ids)-1``) whose documents are ``doc_ids``; ``ends[i]`` tokens of document ``i`` are
    placed (EOD included; fewer than all when the document continues in the next shard)."""

    split: str
    index: int  # shard number within the split
    batch: int  # record batch of every scattered partition that holds this shard's documents
    plan: pack.Plan
    doc_ids: np.ndarray
    ends: np.ndarray


@dataclass
class Job:
    """Everything the tasks need, decided by the driver from token counts alone."""

    sha256: str
    dtype: np.dtype
    eod: int
    pad_id: int
    vocab_size: int
    keys: list[str]  # tokenized partitions to scatter
    shards: list[ShardTask]
    dest_doc: np.ndarray  # sorted doc_ids (a document repeats when it goes to several shards) ...
    dest_batch: np.ndarray  # ... and the shard (record batch) each goes to
    summary: dict  # per split: documents + packing stats
    compare: dict  # strategy@seq_len -> stats on the train split
    mixture: dict | None = None  # the realized mixture (lab.tokens.mixture.Plan.to_json), when the config has one

    @property
    def n_batches(self) -> int:
        return len(self.shards)


def _kept_lengths(cfg: Config, layout: RunLayout, sha256: str) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Tokenized partition keys, and the doc_ids (sorted) and token counts of every kept document."""
    kept = _kept_ids(cfg, layout)
    keys, ids, counts = [], [], []
    for f in _tokenized(layout, sha256):
        t = pq.read_table(f, columns=["doc_id", "n_tokens"])
        keys.append(f.stem.split("-", 1)[1])
        ids.append(t.column("doc_id").to_numpy())
        counts.append(t.column("n_tokens").to_numpy())
    all_ids = np.concatenate(ids) if ids else np.zeros(0, dtype=np.int64)
    all_counts = np.concatenate(counts) if counts else np.zeros(0, dtype=np.int32)
    order = np.argsort(all_ids, kind="stable")
    all_ids, all_counts = all_ids[order], all_counts[order]
    at = np.searchsorted(all_ids, kept)
    found = (at < all_ids.size) & (all_ids[np.minimum(at, max(all_ids.size - 1, 0))] == kept) if all_ids.size else \
        np.zeros(kept.size, dtype=bool)
    if not found.all():
        raise NotReadyError(f"{int((~found).sum())} kept documents have no token counts (e.g. doc_id "
                            f"{int(kept[~found][0])}) in {layout.tokenized_dir}; rerun `corpus-lab run` to finish "
                            "tokenizing")
    return keys, kept, all_counts[at].astype(np.int64)


def _slice(p: pack.Plan, a: int, b: int, split_ids: np.ndarray) -> tuple[pack.Plan, np.ndarray, np.ndarray]:
    """Sequences ``a:b`` of ``p`` as a plan of their own; its documents' doc_ids and placed lengths."""
    lo, hi = int(p.seq_offsets[a]), int(p.seq_offsets[b])
    doc = p.piece_doc[lo:hi]
    local_docs, local = np.unique(doc, return_inverse=True)
    end = p.piece_end[lo:hi]
    ends = np.zeros(local_docs.size, dtype=np.int64)
    np.maximum.at(ends, local, end)
    sub = pack.Plan(p.strategy, p.seq_len, int(local_docs.size), local.astype(np.int64), p.piece_start[lo:hi],
                    end, p.seq_offsets[a:b + 1] - lo)
    return sub, split_ids[local_docs], ends


def prepare(cfg: Config, layout: RunLayout) -> Job:
    """Order, split and plan the kept documents from their token counts; cut the plans into shards."""
    if not layout.tokenizer_fit.exists():
        raise NotReadyError(f"{layout.root} has no tokenizer (tokenizer/fit.json); run `corpus-lab run` with "
                            "tokenizer.enabled: true first")
    sha = read_json(layout.tokenizer_fit)["sha256"]
    tok = tokenize.load(layout, sha)  # refuses a tokenizer.json that changed
    keys, doc_ids, counts = _kept_lengths(cfg, layout, sha)
    order, which = order_and_splits(doc_ids, cfg.pack.shuffle_seed, cfg.pack.val_fraction, cfg.pack.test_fraction)
    mixture = _mixture(cfg, layout, doc_ids)
    shards: list[ShardTask] = []
    summary: dict = {}
    compare: dict = {}
    k = cfg.pack.shard_sequences
    for split in splits_of(cfg):
        members = order[which == SPLITS.index(split)]
        if mixture is not None:
            members = with_copies(members, mixture.repeats, doc_ids, cfg.pack.shuffle_seed)
        lengths = counts[members] + 1  # + EOD
        p = pack.plan(lengths, cfg.pack.seq_len, cfg.pack.strategy, seed=cfg.pack.shuffle_seed)
        summary[split] = {"documents": int(members.size), **p.stats(lengths)}
        split_ids = doc_ids[members]
        for s, a in enumerate(range(0, p.sequences, k)):
            sub, ids, ends = _slice(p, a, min(a + k, p.sequences), split_ids)
            shards.append(ShardTask(split, s, len(shards), sub, ids, ends))
        if split == "train":
            compare = {f"{strategy}@{n}": pack.plan(lengths, n, strategy).stats(lengths)
                       for strategy in pack.STRATEGIES for n in COMPARE_SEQ_LENS}
    dest_doc = np.concatenate([t.doc_ids for t in shards]) if shards else np.zeros(0, dtype=np.int64)
    dest_batch = np.concatenate([np.full(t.doc_ids.size, t.batch, dtype=np.int32) for t in shards]) if shards \
        else np.zeros(0, dtype=np.int32)
    by_doc = np.argsort(dest_doc, kind="stable")
    dest_doc, dest_batch = dest_doc[by_doc], dest_batch[by_doc]
    if mixture is not None:  # a document's copies in one shard are read once
        keep = np.ones(dest_doc.size, dtype=bool)
        keep[1:] = (dest_doc[1:] != dest_doc[:-1]) | (dest_batch[1:] != dest_batch[:-1])
        dest_doc, dest_batch = dest_doc[keep], dest_batch[keep]
    eod, pad, n_ids = tokenize.special_ids(tok)  # a fitted one: 0, 1 and its vocabulary
    return Job(sha, token_dtype(n_ids), eod, pad, n_ids, keys, shards, dest_doc, dest_batch, summary, compare,
               mixture.to_json() if mixture is not None else None)


def _mixture(cfg: Config, layout: RunLayout, doc_ids: np.ndarray):
    """The config's mixture realized over the kept documents (``lab.query.mixture_plan``); None without one."""
    if not cfg.mixture.active:
        return None
    from lab import query

    plan = query.mixture_plan(query.open_run(layout.root, refresh=True), cfg)
    rows = query.mixture_rows(layout.root, cfg)["doc_id"].to_numpy()
    if not np.array_equal(rows, doc_ids):
        raise IntegrityError(f"the mixture's kept documents ({rows.size}) are not the tokenized kept documents "
                             f"({doc_ids.size}) in {layout.root}; rerun `corpus-lab run` with the same config")
    return plan


def with_copies(members: np.ndarray, repeats: np.ndarray, doc_ids: np.ndarray, seed: int) -> np.ndarray:
    """``members`` (positions into ``doc_ids``, in shuffled order) with each one ``repeats[m]`` times (0:
    left out), every copy placed by the shuffle's key of its document and copy number: copy 0 keeps its
    document's place, so with one copy each the order is the shuffle's own.

    >>> ids = np.array([10, 11, 12])
    >>> from lab.tokens.splits import order_and_split; order, _ = order_and_split(ids, 0, 0.0)
    >>> with_copies(order, np.array([1, 1, 1]), ids, 0).tolist() == order.tolist()
    True
    >>> sorted(with_copies(order, np.array([2, 0, 1]), ids, 0).tolist())
    [0, 0, 2]
    """
    n = repeats[members]
    pos = np.repeat(members, n)
    copy = np.arange(pos.size) - np.repeat(np.cumsum(n) - n, n)
    with np.errstate(over="ignore"):
        key = doc_ids[pos].astype(np.int64) ^ (copy.astype(np.int64) * np.int64(0x9E3779B1))
    # the shuffle's own order for copy 0 (order_and_split: lexsort of (doc_id, mix)); later copies by their key
    return pos[np.lexsort((copy, doc_ids[pos], keyed(key, seed, 1)))]


def staging(layout: RunLayout) -> Path:
    """Where a materialize builds ``tokens/`` (and its shuffle files) before the swap."""
    return layout.tokens.with_name(".tmp-tokens")


def _scattered(layout: RunLayout, key: str) -> Path:
    return staging(layout) / "shuffle" / f"part-{key}.arrow"


def scatter_partition(run_dir: str, key: str, sha256: str, dest: tuple[np.ndarray, np.ndarray], n_batches: int) -> int:
    """The kept documents of tokenized partition ``key`` regrouped by output shard (one Arrow record
    batch per shard, in ``dest`` order); returns how many (document, shard) rows it wrote."""
    layout = RunLayout(Path(run_dir))
    dest_doc, dest_batch = dest
    t = pq.read_table(layout.tokenized(key), columns=["doc_id", "ids"])
    ids = t.column("doc_id").to_numpy()
    lo, hi = np.searchsorted(dest_doc, ids, "left"), np.searchsorted(dest_doc, ids, "right")
    n = hi - lo
    rows = np.repeat(np.arange(ids.size), n)  # a row per (document, shard) it goes to
    first = np.cumsum(n) - n  # each document's first row
    batch = dest_batch[np.repeat(lo, n) + np.arange(rows.size) - np.repeat(first, n)]
    by = np.lexsort((ids[rows], batch))
    rows, batch = rows[by], batch[by]
    table = pa.table({"doc_id": pa.array(ids[rows], pa.int64()), "ids": t.column("ids").take(pa.array(rows))})
    starts = np.searchsorted(batch, np.arange(n_batches + 1))
    path = _scattered(layout, key)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic(path) as tmp, pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_file(sink, table.schema) as w:
        for b in range(n_batches):
            w.write_batch(table.slice(int(starts[b]), int(starts[b + 1] - starts[b])).combine_chunks().to_batches()[0]
                          if starts[b + 1] > starts[b] else pa.RecordBatch.from_pylist([], schema=table.schema))
    return int(rows.size)


def write_one_shard(run_dir: str, keys: list[str], task: ShardTask, dtype: np.dtype, eod: int, pad_id: int) -> ShardInfo:
    """Pack and write one shard from its record batch of every scattered partition."""
    layout = RunLayout(Path(run_dir))
    found: dict[int, np.ndarray] = {}
    for key in keys:
        with pa.OSFile(str(_scattered(layout, key))) as src:  # reads this batch only; a map keeps pages resident
            b = pa.ipc.open_file(src).get_batch(task.batch)
            if b.num_rows:
                col = b.column(1)
                for i, d in enumerate(b.column(0).to_numpy().tolist()):
                    found[d] = col[i].values.to_numpy(zero_copy_only=False)
    missing = [int(d) for d in task.doc_ids if int(d) not in found]
    if missing:
        raise IntegrityError(f"shard {task.split}/{task.index}: {len(missing)} documents are missing from "
                             f"{staging(layout) / 'shuffle'} (e.g. doc_id {missing[0]}); rerun "
                             "`corpus-lab run` with the same config to scatter them again")
    ids, ends = task.doc_ids.tolist(), task.ends.tolist()
    tokens, cu = pack.materialize(task.plan, lambda i: np.append(found[ids[i]], eod)[:ends[i]], pad_id, dtype)
    p = task.plan
    write_pieces(staging(layout) / task.split, task.index, task.doc_ids[p.piece_doc], p.piece_start, p.piece_len,
                 p.seq_offsets)
    return write_shard(staging(layout) / task.split, task.index, tokens, cu, dtype)


def finish(cfg: Config, layout: RunLayout, job: Job, infos: list[ShardInfo], reads: dict | None = None) -> dict:
    """Write the split manifests and ``stats/packing.json``; swap the staged shards in as ``tokens/``.
    ``reads`` (``lab.steps.materialize_reads``): what they were made of, recorded in ``tokens/done.json``
    and ``stats/packing.json`` (a later run and ``corpus-lab check`` compare it)."""
    tmp = staging(layout)
    shutil.rmtree(tmp / "shuffle", ignore_errors=True)
    for split in splits_of(cfg):
        m = SplitManifest(split=split, dtype=job.dtype.name, seq_len=cfg.pack.seq_len, eod_id=job.eod,
                          pad_id=job.pad_id, vocab_size=job.vocab_size, tokenizer_sha256=job.sha256,
                          config_hash=cfg.config_hash(), shuffle_seed=cfg.pack.shuffle_seed, packing=cfg.pack.strategy,
                          provenance="pieces")
        m.shards = [info for t, info in zip(job.shards, infos) if t.split == split]
        (tmp / split).mkdir(parents=True, exist_ok=True)
        write_manifest(tmp / split, m)
    write_json({"reads": reads}, tmp / layout.tokens_done.name)
    shutil.rmtree(layout.tokens, ignore_errors=True)
    tmp.rename(layout.tokens)
    write_json({"chosen": {"strategy": cfg.pack.strategy, "seq_len": cfg.pack.seq_len}, "train": job.compare,
                "splits": job.summary, **({"mixture": job.mixture} if job.mixture is not None else {}),
                "reads": reads}, layout.packing_stats)
    out = {"tokenizer_sha256": job.sha256, "config_hash": cfg.config_hash(), "splits": job.summary}
    if job.mixture is not None:
        out["mixture"] = job.mixture
    return out


def start(layout: RunLayout) -> None:
    """Clear what an interrupted materialize left."""
    shutil.rmtree(staging(layout), ignore_errors=True)


def run(cfg: Config, layout: RunLayout) -> dict:
    """Write ``tokens/`` and ``stats/packing.json`` for the run's config, every task in this process."""
    job = prepare(cfg, layout)
    start(layout)
    for key in job.keys:
        scatter_partition(str(layout.root), key, job.sha256, (job.dest_doc, job.dest_batch), job.n_batches)
    infos = [write_one_shard(str(layout.root), job.keys, t, job.dtype, job.eod, job.pad_id) for t in job.shards]
    from lab import steps

    return finish(cfg, layout, job, infos, steps.materialize_reads(cfg, layout, steps.annotated_keys(layout)))
