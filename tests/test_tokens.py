"""Tokenizer fit and token counts, materialized token shards, and the exactly-once loader on a real run."""

from __future__ import annotations

import filecmp
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lab import engine, query

from lab.tokens import materialize

from lab.tokens import splits

from lab.tokens import loader

from lab.tokens import pack

from lab.tokens import tokenize
from lab.config import Config, PackConfig, build
from lab.errors import IntegrityError
from lab.io.run import RunLayout
from lab.tokens.shards import open_shard, read_manifest
from lab.io.writers import read_json


@pytest.fixture(scope="module")
def cluster_run(synthetic_src, tmp_path_factory, local_cluster, make_tokens_config):
    """The synthetic sample in small partitions on a LocalCluster of 2 workers (the session's); after the
    run, what each worker says: how many times it loaded a tokenizer during it, and its thread-pool
    environment."""
    cfg = make_tokens_config(synthetic_src, tmp_path_factory.mktemp("runs"), "b", workers=2, partition_bytes=65536)
    before = local_cluster.run(lambda: __import__("lab.tokens.tokenize").tokens.tokenize.loads)
    engine.run(cfg, progress=False, client=local_cluster)
    after = local_cluster.run(lambda: __import__("lab.tokens.tokenize").tokens.tokenize.loads)
    loads = {w: n - before.get(w, 0) for w, n in after.items()}
    env = local_cluster.run(lambda: {k: os.environ.get(k) for k in ("RAYON_NUM_THREADS", "TOKENIZERS_PARALLELISM")})
    return cfg, loads, env


@pytest.fixture(scope="module")
def runs(tokens_run, cluster_run):
    """The synthetic sample run twice: in this process with one large partition (the session's
    ``tokens_run``), and on 2 workers with small partitions."""
    return tokens_run, cluster_run[0]


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_tokenizer_and_shards_do_not_depend_on_workers_or_partitions(runs):
    a, b = runs
    la, lb = RunLayout(a.run_dir), RunLayout(b.run_dir)
    assert len(list(lb.tokenized_dir.glob("part-*.parquet"))) > 5 > len(list(la.tokenized_dir.glob("part-*.parquet")))
    # the stratified sample comes from global counts, so the fitted tokenizer is the same
    assert filecmp.cmp(la.tokenizer_json, lb.tokenizer_json, shallow=False)
    assert read_json(la.tokenizer_fit)["sample"] == read_json(lb.tokenizer_fit)["sample"]
    fa, fb = _files(la.tokens), _files(lb.tokens)
    assert fa == fb and any(f.endswith(".bin") for f in fa) and "val/manifest.json" in fa
    _, mismatch, errors = filecmp.cmpfiles(la.tokens, lb.tokens, fa, shallow=False)
    # the manifests differ only in the config hash (the ingest partition size is part of the config), done.json
    # in the partitions the shards were made from
    assert not errors and set(mismatch) <= {"train/manifest.json", "val/manifest.json", "done.json"}
    for m in set(mismatch) - {"done.json"}:
        x, y = read_json(la.tokens / m), read_json(lb.tokens / m)
        assert x.pop("config_hash") != y.pop("config_hash") and x == y


def test_workers_load_the_tokenizer_once_and_run_one_thread(cluster_run):
    cfg, loads, env = cluster_run
    tasks = len(list(RunLayout(cfg.run_dir).tokenized_dir.glob("part-*.parquet")))
    assert tasks > 5 and len(loads) == 2 and all(n == 1 for n in loads.values())  # per worker, not per task
    assert all(e == {"RAYON_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"} for e in env.values())


def test_decode_encode_round_trips(runs):
    a, _ = runs
    tok = tokenize.load(RunLayout(a.run_dir), read_json(RunLayout(a.run_dir).tokenizer_fit)["sha256"])
    assert tok.token_to_id(tokenize.EOD) == 0 and tok.token_to_id(tokenize.PAD) == 1
    for text in ["The quick brown fox.", "Grüße aus Köln — 12 Äpfel!", "日本語のテキスト", "emoji 🎉 tabs\tand\nlines",
                 "  leading and trailing spaces  ", "<|endoftext|> is text here", ""]:
        ids, _ = tokenize.encode(tok, [text])
        assert tok.decode(ids[0].tolist(), skip_special_tokens=False) == text


def test_continued_words_equal_the_offsets_reference(runs):
    a, _ = runs
    layout = RunLayout(a.run_dir)
    tok = tokenize.load(layout, read_json(layout.tokenizer_fit)["sha256"])
    texts = query.open_run(a.run_dir).cursor().sql("SELECT text FROM docs ORDER BY doc_id LIMIT 150").pl()["text"].to_list()
    texts += ["non\u00a0breaking space, tabs\tand\u2028separators", "  lead", "trail  ", "a,b c.d"]
    _, fast = tokenize.encode(tok, texts)
    slow = [tokenize.continued_words_from_offsets(t, e.offsets) for t, e in
            zip(texts, tok.encode_batch(texts, add_special_tokens=False))]
    assert fast.tolist() == slow and sum(slow) > 1000


def test_funnel_tokens_equal_the_shards(runs):
    a, _ = runs
    f = query.funnel(a.run_dir, a)
    counts = query.token_counts(a.run_dir)
    assert f["tokens_in"][0] == counts["n_tokens"].sum()
    assert f["tokens_in"][0] == f["tokens_out"][-1] + f["tokens_dropped"].sum()
    kept_docs, kept_tokens = f["docs_out"][-1], f["tokens_out"][-1]
    real = docs = 0
    for split in ("train", "val"):
        m = read_manifest(RunLayout(a.run_dir).tokens / split)
        real += sum(s.real_tokens for s in m.shards)
        docs += read_json(RunLayout(a.run_dir).packing_stats)["splits"][split]["documents"]
    # every kept document is packed once, with its EOD token
    assert docs == kept_docs
    assert real == kept_tokens + kept_docs


def test_shards_hold_the_kept_documents_once_each(runs):
    a, _ = runs
    layout = RunLayout(a.run_dir)
    sha = read_json(layout.tokenizer_fit)["sha256"]
    doc_ids, ids = materialize.kept_tokens(a, layout, sha)
    want = np.bincount(np.concatenate([np.append(x, 0) for x in ids]), minlength=3000)  # each with its EOD
    got = np.zeros(3000, dtype=np.int64)
    whole = set()
    for split in ("train", "val"):
        m = read_manifest(layout.tokens / split)
        assert m.dtype == "uint16" and m.seq_len == 512 and m.tokenizer_sha256 == sha
        for info in m.shards:
            shard = open_shard(layout.tokens / split, info, m)
            for i in range(info.sequences):
                cu = shard.cu_seqlens(i)
                row = np.asarray(shard.tokens[i])
                assert (row[cu[-1]:] == m.pad_id).all() and cu[0] == 0 and (np.diff(cu) > 0).all()
                got += np.bincount(row[: cu[-1]], minlength=3000)
                whole.update(tuple(row[s:e].tolist()) for s, e in zip(cu[:-1], cu[1:]))
    assert (got == want).all()  # every kept token once, nothing else but padding
    # documents that fit a sequence are never split: each is one segment of some sequence
    assert all(tuple(x.tolist()) + (0,) in whole for x in ids if x.size + 1 <= 512)
    val = read_json(layout.packing_stats)["splits"]["val"]["documents"]
    assert val == round(0.1 * len(doc_ids)) > 0  # pack.val_fraction of the kept documents, by document


def test_split_sizes():
    ids = np.arange(-500, 500, 7, dtype=np.int64)
    for frac, want in ((0.01, 1), (0.1, 14), (0.0, 0)):
        order, val = splits.order_and_split(ids, 3, frac)
        assert sorted(order.tolist()) == list(range(ids.size)) and int(val.sum()) == want
    assert splits.order_and_split(ids[:1], 3, 0.5)[1].sum() == 0  # a lone document trains
    a, b = splits.order_and_split(ids, 3, 0.1), splits.order_and_split(ids, 4, 0.1)
    assert a[0].tolist() != b[0].tolist()  # the seed decides the order


def test_a_changed_tokenizer_is_refused(runs, tmp_path):
    a, _ = runs
    copy = tmp_path / "copy"
    shutil.copytree(a.run_dir, copy)
    layout = RunLayout(copy)
    text = layout.tokenizer_json.read_text()
    layout.tokenizer_json.write_text(text.replace('"Ġthe"', '"Ġthe_"', 1))
    sha = read_json(layout.tokenizer_fit)["sha256"]
    with pytest.raises(IntegrityError, match="sha256"):
        tokenize.load(layout, sha)
    with pytest.raises(IntegrityError, match="sha256"):
        materialize.run(a, layout)


def test_loader_delivers_every_token_once_on_the_run(runs):
    a, _ = runs
    for split in ("train", "val"):
        for world, workers in ((1, 1), (2, 3), (4, 1)):
            res = loader.verify(RunLayout(a.run_dir).tokens / split, world_size=world, num_workers=workers, save_at=0.4)
            assert res["ok"] and res["duplicates"] == res["missing"] == res["mismatched"] == 0
            assert res["delivered"] == res["tokens"] > 0


def test_verify_tokens_command(runs):
    a, _ = runs
    r = subprocess.run([sys.executable, "-m", "lab.cli", "verify-tokens", str(a.run_dir), "--world", "2", "--workers", "3"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "duplicates 0, missing 0" in r.stdout and "exactly once" in r.stdout


def test_fertility_and_packing_tables(runs):
    a, _ = runs
    fert = query.fertility(a.run_dir, "lang")
    en = fert.filter(fert["lang"] == "en").row(0, named=True)
    assert 1.0 < en["tokens_per_word"] < 3.0 and 2.0 < en["bytes_per_token"] < 8.0 and 0 < en["continued_words"] < 1
    assert fert["tokens"].sum() == query.token_counts(a.run_dir)["n_tokens"].sum()
    kept = query.fertility(a.run_dir, "source", config=a)
    assert kept["tokens"].sum() == query.funnel(a.run_dir, a)["tokens_out"][-1]
    p = query.packing(a.run_dir)
    assert len(p) == 9 and set(p["strategy"]) == {"pad", "concat", "best_fit"}
    chosen = p.filter((p["strategy"] == "best_fit") & (p["seq_len"] == 512)).row(0, named=True)
    train = read_json(RunLayout(a.run_dir).packing_stats)["splits"]["train"]
    assert chosen["utilization"] == train["utilization"] and chosen["tokens_truncated"] == 0
    assert (p.filter(p["strategy"] == "pad")["tokens_truncated"] > 0).any()
    with pytest.raises(Exception, match="by='x'"):
        query.fertility(a.run_dir, "x")


@pytest.mark.parametrize("strategy", ["concat", "pad", "best_fit"])
def test_sharded_materialize_equals_one_whole_packing(runs, tmp_path, strategy):
    """Each shard is packed by its own task from the scattered partitions; together they are the
    whole split packed at once, also when a document spans two shards (concat)."""
    _, b = runs
    copy = tmp_path / "b"
    shutil.copytree(b.run_dir, copy)
    layout = RunLayout(copy)
    cfg = Config(**{**b.__dict__, "output_dir": str(tmp_path), "name": "b",
                    "pack": PackConfig(seq_len=128, val_fraction=0.1, shard_sequences=5, strategy=strategy)})
    out = materialize.run(cfg, layout)
    sha = read_json(layout.tokenizer_fit)["sha256"]
    doc_ids, ids = materialize.kept_tokens(cfg, layout, sha)
    order, is_val = splits.order_and_split(doc_ids, cfg.pack.shuffle_seed, cfg.pack.val_fraction)
    spans = 0
    for split, members in (("train", order[~is_val]), ("val", order[is_val])):
        whole = [np.append(ids[i], 0) for i in members]
        p = pack.plan(np.array([x.size for x in whole]), 128, strategy, seed=cfg.pack.shuffle_seed)
        want, want_cu = pack.materialize(p, whole.__getitem__, 1, np.uint16)
        m = read_manifest(layout.tokens / split)
        got, got_cu = [], []
        for info in m.shards:
            shard = open_shard(layout.tokens / split, info, m)
            got.append(np.asarray(shard.tokens))
            got_cu += [shard.cu_seqlens(i).tolist() for i in range(info.sequences)]
        assert len(m.shards) == -(-p.sequences // 5) > 2
        assert (np.concatenate(got) == want).all() and got_cu == [c.tolist() for c in want_cu]
        assert out["splits"][split]["sequences"] == p.sequences
        first = np.r_[0, np.cumsum([i.sequences for i in m.shards])][1:-1]  # the first sequence of shards 1..
        spans += sum(p.pieces(int(s))[0][1] > 0 for s in first)  # starts inside a document
    if strategy == "concat":
        assert spans > 0  # some document was cut at a shard boundary
    assert not (copy / ".tmp-tokens").exists()


def _mtimes(root: Path, *dirs: str) -> dict[str, int]:
    return {str(p): p.stat().st_mtime_ns for d in dirs for p in (root / d).rglob("*") if p.is_file()}


def test_incremental_reruns_recompute_only_what_changed(runs, tmp_path):
    """Thresholds only: select + materialize; tokenizer only: tokenize + pack; packing only: pack.
    The manifest's last_run.steps says what was reused."""
    from lab.config import to_dict

    _, b = runs
    shutil.copytree(b.run_dir, tmp_path / "b")
    base = to_dict(b)
    base["output_dir"] = str(tmp_path)

    def rerun(**changes) -> dict:
        d = {**base, **{k: {**base[k], **v} for k, v in changes.items()}}
        return engine.run(build(Config, d), progress=False, client=engine.INPROCESS)

    root = tmp_path / "b"
    signals = _mtimes(root, "signals", "docs", "dedup")
    sha = read_json(RunLayout(root).tokenizer_fit)["sha256"]
    kept_before = read_json(RunLayout(root).packing_stats)["splits"]["train"]["documents"]

    m = rerun(stages={**base["stages"], "gopher_quality": {**base["stages"]["gopher_quality"], "min_words": 400}})
    assert m["last_run"]["steps"] == {"annotate": {"partitions_run": 0, "partitions_reused": len(m["partitions"])},
                                      "near_dedup": "reused", "boilerplate": "reused", "tokenizer": "reused",
                                      "tokenize": {"partitions_run": 0}, "materialize": "computed",
                                      "executor": "inprocess"}
    assert _mtimes(root, "signals", "docs", "dedup") == signals
    assert read_json(RunLayout(root).tokenizer_fit)["sha256"] == sha
    assert read_json(RunLayout(root).packing_stats)["splits"]["train"]["documents"] < kept_before
    tokenized = _mtimes(root, "tokenized")

    m = rerun(pack={"seq_len": 256})
    steps = m["last_run"]["steps"]
    assert steps["tokenizer"] == "reused" and steps["tokenize"] == {"partitions_run": 0}
    assert steps["materialize"] == "computed" and _mtimes(root, "tokenized") == tokenized
    assert read_manifest(RunLayout(root).tokens / "train").seq_len == 256

    m = rerun(tokenizer={"vocab_size": 2000})
    steps = m["last_run"]["steps"]
    assert steps["annotate"]["partitions_run"] == 0 and steps["near_dedup"] == "reused"
    # refitted; the counts are redone only when the tokenizer it gives is another (by its sha256)
    refit = read_json(RunLayout(root).tokenizer_fit)["sha256"] != sha
    assert steps["tokenizer"] == "fitted" and steps["tokenize"]["partitions_run"] == (len(m["partitions"]) if refit else 0)
    assert steps["materialize"] == "computed" and _mtimes(root, "signals", "docs", "dedup") == signals
    assert read_json(RunLayout(root).tokenizer_fit)["state"]["tokenizer"]["vocab_size"] == 2000

    assert rerun(tokenizer={"vocab_size": 2000})["last_run"]["steps"]["materialize"] == "reused"

    # boilerplate min_docs: the merge and its signal only (no annotate, no recount without remove_lines)
    m = rerun(tokenizer={"vocab_size": 2000}, stages={**base["stages"], "boilerplate": {"min_docs": 2}})
    steps = m["last_run"]["steps"]
    assert steps["boilerplate"] == "computed" and steps["near_dedup"] == "reused"
    assert steps["annotate"]["partitions_run"] == 0 and steps["tokenize"] == {"partitions_run": 0}
    assert m["boilerplate"]["min_docs"] == 2 and m["boilerplate"]["remove_lines"] is False


def test_the_tokenizer_is_never_fitted_on_validation_documents(runs):
    import dataclasses

    a, _ = runs
    run = query.open_run(a.run_dir)
    reasons = query.drop_reasons(run, a)
    kept = np.sort(reasons.filter(reasons["reason"].is_null())["doc_id"].to_numpy())
    order, is_val = splits.order_and_split(kept, a.pack.shuffle_seed, a.pack.val_fraction)
    val_texts = set(query.document_texts(run, kept[order[is_val]].tolist()).values())
    assert len(val_texts) == round(0.1 * kept.size) > 0
    texts, _ = query.tokenizer_sample(run, a)
    assert texts and not val_texts & set(texts)  # split first, fit on train only
    # without a validation split the same sample would have taken some of them
    unsplit, _ = query.tokenizer_sample(run, dataclasses.replace(a, pack=dataclasses.replace(a.pack, val_fraction=0.0)))
    assert val_texts & set(unsplit)
