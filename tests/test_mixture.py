"""Mixtures (``lab.tokens.mixture``, ``lab.query.mixture_plan``, materialize): a budget per bucket of kept documents,
realized by whole-document copies, written as they are planned, and refused when it names what is not there."""

from __future__ import annotations

import dataclasses
import shutil

import numpy as np
import polars as pl
import pytest

from lab import query

from lab.tokens import materialize

from lab.tokens import mixture
from lab.config import Config, PackConfig, build, loads
from lab.errors import ConfigError
from lab.io.run import RunLayout
from lab.tokens.shards import open_shard, read_manifest
from lab.io.writers import read_json
from lab.tokens.mixture import BucketTarget, MixtureConfig


def test_realize_takes_the_budget_in_whole_documents_seeded():
    rng = np.random.default_rng(0)
    ids = rng.integers(-2**62, 2**62, 500)
    tok = rng.integers(50, 3000, 500)
    for target in (0, tok.sum() * 0.3, tok.sum(), tok.sum() * 2.7):
        reps = mixture.realize(ids, tok, target, seed=1)
        got = int((reps * tok).sum())
        assert abs(got - target) <= tok.max() / 2 + 1  # within half a document of the budget
        assert reps.min() >= int(target // tok.sum()) and reps.max() <= int(target // tok.sum()) + 1
    a, b = mixture.realize(ids, tok, tok.sum() * 0.5, seed=1), mixture.realize(ids, tok, tok.sum() * 0.5, seed=2)
    assert (a == mixture.realize(ids, tok, tok.sum() * 0.5, seed=1)).all() and (a != b).any()


def test_bad_mixtures_are_refused_with_the_key():
    with pytest.raises(ConfigError, match=r"mixture.buckets='weights summing to 0.9'.*sum to 1"):
        loads("mixture: {by: [lang], buckets: [{bucket: en, weight: 0.6}, {bucket: de, weight: 0.3}]}")
    with pytest.raises(ConfigError, match=r"mixture.by='topic'.*lang, source, quality"):
        loads("mixture: {by: [topic]}")
    with pytest.raises(ConfigError, match=r"all token budgets or all weights"):
        loads("mixture: {by: [lang], buckets: [{bucket: en, weight: 1.0}, {bucket: de, tokens: 5}]}")
    with pytest.raises(ConfigError, match=r"total_tokens.*with weights only"):
        loads("mixture: {by: [lang], total_tokens: 10, buckets: [{bucket: en, tokens: 5}]}")
    cfg = MixtureConfig(by=("lang",), buckets=(BucketTarget("xx", tokens=5),))
    with pytest.raises(ConfigError, match=r"'xx', which no kept document is in.*are: de, en"):
        mixture.plan(cfg, np.arange(3), np.array(["en", "de", "en"], dtype=object), np.array([1, 2, 3]))


def test_a_budget_past_four_epochs_warns():
    cfg = MixtureConfig(by=("lang",), buckets=(BucketTarget("de", tokens=50), BucketTarget("en", tokens=20)))
    p = mixture.plan(cfg, np.arange(3), np.array(["en", "de", "en"], dtype=object), np.array([4, 10, 6]))
    assert p.repeats.tolist() == [2, 5, 2] and any("'de': 5.0 epochs" in w and "Muennighoff" in w for w in p.warnings)
    assert any("'en'" in w and "2.00 epochs (its documents repeat)" in w for w in p.warnings)


@pytest.mark.parametrize("rehydrate", [False, True])
def test_materialize_writes_the_mixture_it_plans(tokens_run, tmp_path, rehydrate):
    """Every document written as many times as the plan says (its copies in one split, each its own tokens
    + EOD), the buckets' tokens as reported, and the manifest's record of it."""
    copy = tmp_path / "run"
    shutil.copytree(tokens_run.run_dir, copy)
    layout = RunLayout(copy)
    langs = dict(query.languages(copy))
    keep = tuple(sorted(langs))
    base = build(Config, {**{k: v for k, v in dataclasses.asdict(tokens_run).items() if k not in ("stages", "mixture")},
                          "name": "run", "output_dir": str(tmp_path)})
    base = dataclasses.replace(base, stages=dataclasses.replace(tokens_run.stages, language=dataclasses.replace(
        tokens_run.stages.language, keep=keep)), pack=PackConfig(seq_len=4096, val_fraction=0.1, shard_sequences=7))
    rows = query.mixture_rows(copy, dataclasses.replace(base, mixture=MixtureConfig(by=("lang",))))
    have = rows.group_by("bucket").agg(pl.col("n_tokens").sum()).sort("bucket")
    big = have.sort("n_tokens")["bucket"][-1]
    small = [b for b in have["bucket"].to_list() if b != big]
    targets = (BucketTarget(big, tokens=int(have.filter(have["bucket"] == big)["n_tokens"][0] * 0.4)),
               *(BucketTarget(b, tokens=int(have.filter(have["bucket"] == b)["n_tokens"][0] * 2.5)) for b in small[:2]))
    cfg = dataclasses.replace(base, mixture=MixtureConfig(by=("lang",), buckets=targets, rest="drop", seed=3,
                                                          rehydrate=rehydrate))
    plan = query.mixture_plan(copy, cfg)
    out = materialize.run(cfg, layout)
    sha = read_json(layout.tokenizer_fit)["sha256"]
    doc_ids, ids = materialize.kept_tokens(cfg, layout, sha)
    assert (rows["doc_id"].to_numpy() == doc_ids).all()
    want = {tuple(np.append(x, 0).tolist()): int(n) for x, n in zip(ids, plan.repeats) if n}
    seen: dict[tuple, int] = {}
    splits: dict[tuple, set] = {}
    for split in ("train", "val"):
        m = read_manifest(layout.tokens / split)
        for info in m.shards:
            shard = open_shard(layout.tokens / split, info, m)
            for i in range(info.sequences):
                cu, row = shard.cu_seqlens(i), np.asarray(shard.tokens[i])
                for s, e in zip(cu[:-1], cu[1:]):
                    key = tuple(row[s:e].tolist())
                    seen[key] = seen.get(key, 0) + 1
                    splits.setdefault(key, set()).add(split)
    # best_fit: a document longer than a sequence is cut; compare the documents that fit whole
    whole = {k: n for k, n in want.items() if len(k) <= 4096}
    assert len(whole) > 0.9 * len(want) and all(seen.get(k) == n for k, n in whole.items())
    assert max(whole.values()) >= 2 and len(want) < len(ids)  # copies written, documents left out
    assert all(len(splits[k]) == 1 for k in whole)  # a document's copies stay in its split
    assert not any(k not in want for k in seen if len(k) <= 4096)  # nothing written that the plan leaves out
    after = {r["bucket"]: r["tokens_after"] for r in plan.report}
    assert after[big] < have.filter(have["bucket"] == big)["n_tokens"][0]  # downsampled
    assert all(r["tokens_after"] == 0 for r in plan.report if r["bucket"] not in {t.bucket for t in targets})
    written = sum(info.real_tokens for s in ("train", "val") for info in read_manifest(layout.tokens / s).shards)
    assert written == plan.tokens + int(plan.repeats.sum())  # + one EOD per copy
    assert out["mixture"] == plan.to_json() == read_json(layout.packing_stats)["mixture"]
    assert out["mixture"]["documents_written"] == int(plan.repeats.sum())


def test_only_an_active_mixture_changes_the_config_hash():
    """No mixture (or one that changes nothing) writes what a config without the section wrote: same hash,
    nothing materialized again; budgets change it."""
    base = Config()
    assert loads("mixture: {by: [lang]}").config_hash() == base.config_hash()
    assert loads("mixture: {by: [lang], buckets: [{bucket: en, tokens: 5}]}").config_hash() != base.config_hash()
    assert loads("mixture: {rehydrate: true}").config_hash() != base.config_hash()
