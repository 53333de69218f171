"""Decontamination: planted copies of an evaluation set found (exact, re-cased, re-spaced, re-punctuated),
overlaps just under and over the n-gram length told apart, bad eval sets refused before any work."""

from __future__ import annotations

import json
import random

import pytest

from lab import config, engine, query
from lab.errors import ConfigError
from lab.select.rules import first_failure
from lab.stages import decontamination as dc

VOCAB = [a + b + c for a in "bcdfghjk" for b in "aeiou" for c in "lmnprst"]  # 280 words, no digits


def words(seed: int, n: int) -> list[str]:
    return random.Random(seed).choices(VOCAB, k=n)


QUESTION = words(1, 30)  # the eval item a document may contain
OTHER = words(2, 25)  # an item of a second set


@pytest.fixture
def sets(tmp_path):
    a = tmp_path / "qa.jsonl"
    a.write_text(json.dumps({"question": " ".join(QUESTION)}) + "\n"
                 + json.dumps({"question": "too short to index"}) + "\n")
    b = tmp_path / "other"
    b.mkdir()
    (b / "item.txt").write_text(" ".join(OTHER) + "\n")
    return (dc.EvalSet("qa", str(a), text_field="question"), dc.EvalSet("other", str(b), format="text"))


def _index(sets, **kw):
    return dc.build_index(dc.Config(eval_sets=sets, **kw))


def test_planted_copies_are_found_and_near_misses_are_not(sets):
    idx = _index(sets)
    assert idx.report["qa"] == {"documents": 2, "too_short": 1, "unreadable": 0, "ngrams": 18}
    filler = " ".join(words(9, 40))
    exact = f"{filler} {' '.join(QUESTION)} {filler}"
    assert dc.match(exact, idx) == {"decon_matches": 18, "decon_longest": 30, "decon_set": "qa"}
    changed = " ".join(w.upper() if i % 3 else w for i, w in enumerate(QUESTION)).replace(" ", " ,\n  ", 5) + "?!"
    assert dc.match(f"{filler} {changed}", idx)["decon_matches"] == 18  # case, whitespace, punctuation
    for n, matches in ((12, 0), (13, 1), (14, 2)):
        part = " ".join(QUESTION[5:5 + n])
        s = dc.match(f"{filler} {part} {filler}", idx)
        assert s["decon_matches"] == matches, n
        assert s["decon_longest"] == (n if matches else 0)
    assert dc.match(filler, idx) == {"decon_matches": 0, "decon_longest": 0, "decon_set": ""}
    both = f"{' '.join(OTHER)} {filler} {' '.join(QUESTION[:14])}"
    assert dc.match(both, idx)["decon_set"] == "other"  # 13 matches of "other", 2 of "qa"


def test_the_rule_drops_documents_with_at_least_min_matches(sets):
    text = " ".join(QUESTION[:14])  # 2 matching 13-grams
    for k, why in ((1, "decontamination.contaminated"), (2, "decontamination.contaminated"), (3, None)):
        cfg = dc.Config(eval_sets=sets, min_matches=k)
        assert first_failure(dc.rules(cfg), dc.match(text, dc.build_index(cfg))) == why


def test_the_index_is_built_once_per_run_and_mapped(sets, tmp_path):
    cfg = dc.Config(eval_sets=sets)
    report = dc.prepare(cfg, tmp_path / "run")
    path = dc.index_path(tmp_path / "run", dc.index_sha(cfg))
    assert path.is_file() and report["other"]["ngrams"] == 13
    first = path.with_suffix(".hashes.npy").stat().st_mtime_ns
    assert dc.prepare(cfg, tmp_path / "run") == report
    assert path.with_suffix(".hashes.npy").stat().st_mtime_ns == first  # not rebuilt
    c = dc.Collector(cfg, 1, tmp_path / "run")
    assert c.signals(0, " ".join(QUESTION))["decon_matches"] == 18


def test_bad_eval_sets_are_clear_errors(tmp_path):
    with pytest.raises(ConfigError, match=r"eval_sets\[gone\].*does not exist"):
        config.build(config.Config, {"stages": {"decontamination": {"eval_sets": [{"name": "gone", "path": "/nope"}]}}})
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(ConfigError, match=r"eval_sets\[empty\].*no text of 13 words"):
        dc.build_index(dc.Config(eval_sets=(dc.EvalSet("empty", str(empty)),)))
    nofield = tmp_path / "q.jsonl"
    nofield.write_text(json.dumps({"question": " ".join(QUESTION)}) + "\n")
    with pytest.raises(ConfigError, match=r"eval_sets\[q\].*unreadable.*text_field='text'"):
        dc.build_index(dc.Config(eval_sets=(dc.EvalSet("q", str(nofield)),)))
    with pytest.raises(ConfigError, match="distinct names"):
        dc.Config(eval_sets=(dc.EvalSet("q", str(nofield)), dc.EvalSet("q", str(empty))))


def test_editing_an_eval_set_changes_the_signals_hash(sets):
    cfg = config.build(config.Config, {"stages": {"decontamination": {"eval_sets": [
        {"name": s.name, "path": s.path, "format": s.format, "text_field": s.text_field} for s in sets]}}})
    before = cfg.signals_hash()
    with open(sets[0].path, "a") as f:
        f.write(json.dumps({"question": " ".join(words(5, 20))}) + "\n")
    assert cfg.signals_hash() != before


def test_a_run_drops_contaminated_documents_in_explore_and_batch(sets, tmp_path, corpus_lab):
    filler = [" ".join(words(100 + i, 80)) for i in range(4)]
    texts = [filler[0], f"{filler[1]} {' '.join(QUESTION)}", f"{filler[2]} {' '.join(QUESTION[:12])}", filler[3]]
    src = tmp_path / "docs.jsonl"
    src.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    off = {s: {"enabled": False} for s in ("language", "gopher_quality", "gopher_repetition", "c4", "fineweb")}
    eval_sets = [{"name": s.name, "path": s.path, "format": s.format, "text_field": s.text_field} for s in sets]
    for mode in ("explore", "batch"):
        cfg = config.build(config.Config, {
            "name": mode, "output_dir": str(tmp_path / "runs"), "mode": mode, "inputs": [{"path": str(src)}],
            "stages": {**off, "decontamination": {"eval_sets": eval_sets}},
            "tokenizer": {"vocab_size": 300}, "pack": {"seq_len": 64}, "engine": {"n_workers": 1}})
        engine.run(cfg, progress=False, client="inprocess")
        assert sorted(r for r in query.drop_reasons(cfg.run_dir, cfg)["reason"].to_list() if r) == \
            ["decontamination.contaminated"]
        assert len(list((cfg.run_dir / "decontam").glob("index-*.json"))) == 1
        report = query.contamination(cfg.run_dir)
        assert report.select("eval_set", "documents", "matched_ngrams", "longest_words").rows() == [("qa", 1, 18, 30)]
        # its tokens: the contaminated document's count in explore mode; a batch run counts only what it keeps
        counts = query.signal_rows(cfg.run_dir, ["decon_matches", "n_tokens"])
        hit = counts.filter(counts["decon_matches"] >= 1)["n_tokens"].to_list()
        assert report["tokens"].to_list() == (hit if mode == "explore" else [None])
        if mode == "explore":
            tokens = hit[0]
            assert tokens > 30 and report.columns == ["eval_set", "documents", "tokens", "matched_ngrams", "longest_words"]
            explore = cfg.run_dir
    # the CLI prints the same report (lab.query.contamination): documents and tokens per set, after the funnel
    # of `corpus-lab run` (here a rerun that reuses every partition) and of `corpus-lab funnel`
    rerun = ["run", "--config", str(explore / "config.yaml"), "--in-process", "--no-progress"]
    for command in (["contamination", str(explore)], rerun, ["funnel", str(explore)]):
        out = corpus_lab(*command)
        assert out.returncode == 0 and f"qa: 1 documents, {tokens:,} tokens, 18 matching n-grams, longest overlap " \
            "30 words" in out.stdout, out.stdout + out.stderr
    assert "decontamination" in out.stdout  # the funnel's row, above the report
    out = corpus_lab("contamination", cfg.run_dir)
    assert out.returncode == 0 and "qa: 1 documents, tokens not counted, 18 matching" in out.stdout  # the batch run
