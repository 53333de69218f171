"""Provenance: every token of a materialized split maps back to its document's own tokenization; trace."""

from pathlib import Path

import importlib
import numpy as np
import pyarrow.parquet as pq
import pytest

from lab.tokens import provenance
from lab.errors import ConfigError
from lab.tokens.shards import open_shard, read_manifest


def _doc_tokens(run_dir: Path, eod: int) -> dict[int, np.ndarray]:
    out = {}
    for f in sorted((run_dir / "tokenized").glob("part-*.parquet")):
        t = pq.read_table(f, columns=["doc_id", "ids"])
        for d, ids in zip(t.column("doc_id").to_pylist(), t.column("ids").to_pylist()):
            out[d] = np.array(ids + [eod], dtype=np.int64)
    return out


@pytest.mark.parametrize("split", ["train", "val"])
def test_every_token_maps_to_its_document(tokens_run, split):
    split_dir = Path(tokens_run.run_dir) / "tokens" / split
    m = read_manifest(split_dir)
    assert m.provenance == "pieces"
    docs = _doc_tokens(Path(tokens_run.run_dir), m.eod_id)
    checked = 0
    for k, info in enumerate(m.shards):
        shard = open_shard(split_dir, info, m)
        rows = np.load(split_dir / f"{info.name}.pieces.npy")
        offsets = np.load(split_dir / f"{info.name}.piece_offsets.npy")
        for s in range(info.sequences):
            expect = np.concatenate([docs[d][a:a + n] for d, a, n in rows[offsets[s]:offsets[s + 1]].tolist()])
            seq = np.asarray(shard.tokens[s], dtype=np.int64)
            assert np.array_equal(seq[:expect.size], expect), (k, s)
            assert (seq[expect.size:] == m.pad_id).all()
            checked += expect.size
    assert checked == sum(i.real_tokens for i in m.shards) > 0
    # locate agrees on sampled positions (the vectorised check above covers every token)
    info = m.shards[0]
    shard = open_shard(split_dir, info, m)
    for s, pos in [(0, 0), (0, m.seq_len - 1), (info.sequences - 1, 7)]:
        where = provenance.locate(split_dir, 0, s, pos)
        if where.get("padding"):
            assert shard.tokens[s, pos] == m.pad_id and pos >= where["real_tokens"]
        else:
            assert docs[where["doc_id"]][where["offset"]] == shard.tokens[s, pos]


def test_locate_refuses_out_of_range(tokens_run):
    split_dir = Path(tokens_run.run_dir) / "tokens" / "train"
    n = len(read_manifest(split_dir).shards)
    with pytest.raises(ConfigError, match=rf"shard={n} .*0\.\.{n - 1}"):
        provenance.locate(split_dir, n, 0, 0)
    with pytest.raises(ConfigError, match=r"seq=100000 .*sequences 0\.\."):
        provenance.locate(split_dir, 0, 100000, 0)
    with pytest.raises(ConfigError, match=r"pos=512 .*positions 0\.\.511"):
        provenance.locate(split_dir, 0, 0, 512)


def test_trace_cli(tokens_run, corpus_lab):
    run_dir = Path(tokens_run.run_dir)
    split_dir = run_dir / "tokens" / "train"
    where = provenance.locate(split_dir, 0, 0, 5)
    r = corpus_lab("trace", run_dir, "--split", "train", "--shard", 0, "--seq", 0, "--pos", 5)
    assert r.returncode == 0, r.stderr
    assert f"train shard 0 sequence 0 position 5: doc {where['doc_id']}, token {where['offset']} of" in r.stdout
    assert "  source  " in r.stdout and "@" in r.stdout and "  text    " in r.stdout
    t = provenance.trace(run_dir, "train", 0, 0, 5)
    assert t["source"] and t["locator"] and t["token"] in r.stdout.split("[", 1)[1]
    bad = corpus_lab("trace", run_dir, "--shard", 0, "--seq", 0, "--pos", -1)
    assert bad.returncode != 0 and "pos=-1" in bad.stderr + bad.stdout


# --- the test split ---------------------------------------------------------------------------------


def test_test_split_partitions_the_kept_documents(tokens_run, tmp_path, corpus_lab):
    import dataclasses
    import shutil

    from lab.tokens import materialize
    from lab import engine
    from lab.config import Config
    from lab.io.run import RunLayout
    from lab.io.writers import read_json

    copy = tmp_path / "t"
    shutil.copytree(tokens_run.run_dir, copy)
    cfg = Config(**{**tokens_run.__dict__, "output_dir": str(tmp_path), "name": "t",
                    "pack": dataclasses.replace(tokens_run.pack, test_fraction=0.2)})
    layout = RunLayout(copy)
    # the run again with a test split: the tokenizer is fitted anew (never on test documents), the tokens follow
    out = {"splits": engine.run(cfg, progress=False, client=engine.INPROCESS)["tokens"]}
    sha = read_json(layout.tokenizer_fit)["sha256"]
    kept, _ = materialize.kept_tokens(cfg, layout, sha)
    seen = {}
    for split in ("train", "val", "test"):
        m = read_manifest(layout.tokens / split)
        docs = set()
        for info in m.shards:
            docs.update(np.load(layout.tokens / split / f"{info.name}.pieces.npy")[:, 0].tolist())
        seen[split] = docs
        assert out["splits"][split]["documents"] == len(docs) > 0
    assert not (seen["train"] & seen["val"] or seen["train"] & seen["test"] or seen["val"] & seen["test"])
    assert seen["train"] | seen["val"] | seen["test"] == set(kept.tolist())
    assert len(seen["test"]) == round(0.2 * kept.size)
    # val is the same documents with or without a test split; test comes out of train
    base_val = set()
    m = read_manifest(Path(tokens_run.run_dir) / "tokens" / "val")
    for info in m.shards:
        base_val.update(np.load(Path(tokens_run.run_dir) / "tokens" / "val" / f"{info.name}.pieces.npy")[:, 0].tolist())
    assert seen["val"] == base_val
    r = corpus_lab("verify-tokens", copy, "--split", "test", "--world", 1, "--workers", 2)
    assert r.returncode == 0 and "exactly once" in r.stdout, r.stdout + r.stderr
    # default test_fraction 0: no test split, and the config hash of the runs made before the key
    assert not (Path(tokens_run.run_dir) / "tokens" / "test").exists()
    assert "test_fraction" not in tokens_run.hashed()["pack"] and tokens_run.pack.test_fraction == 0
    other = dataclasses.replace(tokens_run, pack=dataclasses.replace(tokens_run.pack, test_fraction=0.1))
    assert other.config_hash() != tokens_run.config_hash()
    assert cfg.config_hash() != tokens_run.config_hash()


def test_test_fraction_is_checked():
    from lab.config import PackConfig

    with pytest.raises(ConfigError, match="test_fraction"):
        PackConfig(val_fraction=0.5, test_fraction=0.5)
    o, w = importlib.import_module("lab.tokens.splits").order_and_splits(np.arange(50), 1, 0.1, 0.0)
    assert not (w == 2).any() and (w == 1).sum() == 5


def test_trace_cli_padding(tokens_run, corpus_lab):
    run_dir = Path(tokens_run.run_dir)
    split_dir = run_dir / "tokens" / "train"
    m = read_manifest(split_dir)
    for k, info in enumerate(m.shards):
        shard = open_shard(split_dir, info, m)
        short = [s for s in range(info.sequences) if shard.cu_seqlens(s)[-1] < m.seq_len]
        if short:
            s, real = short[0], int(shard.cu_seqlens(short[0])[-1])
            break
    else:
        pytest.fail("no sequence with padding in the train split")
    r = corpus_lab("trace", run_dir, "--shard", k, "--seq", s, "--pos", real)
    assert r.returncode == 0 and f"padding (the sequence holds {real} real tokens" in r.stdout, r.stdout + r.stderr
    assert not provenance.locate(split_dir, k, s, real - 1).get("padding")
