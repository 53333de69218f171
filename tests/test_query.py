"""lab.query: the SQL funnel equals the Python evaluation of the same rules; conservation; dedup among survivors."""

import importlib
import os
import random

import numpy as np
import pyarrow as pa
import pytest

from lab import query
from lab.config import Config, build
from lab.errors import ConfigError
from lab.io.run import RunLayout
from lab.io.schema import DOCS_SCHEMA, REJECTS_SCHEMA, signals_schema
from lab.io.writers import write_json, write_parquet
from lab.select.ruleset import ruleset
from oracle import python_funnel
from lab.stats import summarize


def _random_rows(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        row = {}
        for f in signals_schema():
            if f.name == "doc_id":
                v = i * 7919 - 50_000
            elif f.name == "source":
                v = rng.choice(["a.jsonl", "b.jsonl", "c/d.txt"])
            elif f.name == "lang":
                v = rng.choice(["en", "en", "en", "de", "fr", None])
            elif f.name == "drop_reason":
                v = None
            elif pa.types.is_string(f.type):  # the url stage's domains: a few values, none blocked
                v = rng.choice(["", "example.com", "example.org", None]) if f.name != "url_blocked" else ""
            elif f.name == "url_present":
                v = rng.choice([0, 1])
            elif f.name in ("url_word_hits", "decon_matches"):
                v = rng.choice([0, 0, 0, 0, 1])
            elif f.name == "content_hash":
                v = rng.choice([None] + list(range(40)))  # many duplicate groups
            elif pa.types.is_integer(f.type):
                v = rng.choice([None, 0, 1, 2, 3, 5, 10, 40, 60, 120, 100_001]) if rng.random() < 0.9 else None
            else:
                v = rng.choice([None, 0.0, 0.05, 0.1, 0.12, 0.2, 0.3, 0.5, 0.65, 0.7, 0.9, 1.0, 3.5, 7.0, 12.0])
            row[f.name] = v
        rows.append(row)
    return rows


def make_run(tmp_path, rows, rejects=()):
    layout = RunLayout(tmp_path / "run")
    layout.make()
    schema = signals_schema()
    write_parquet(pa.table({f.name: [r[f.name] for r in rows] for f in schema}, schema=schema),
                  layout.part("signals", "00000"))
    write_parquet(pa.table({"doc_id": [r["doc_id"] for r in rows], "source": [r["source"] for r in rows],
                            "locator": list(range(len(rows))), "url": [""] * len(rows), "record_id": [""] * len(rows),
                            "text": [f"text {r['doc_id']}" for r in rows]}, schema=DOCS_SCHEMA), layout.part("docs", "00000"))
    rej = {"source": [r[0] for r in rejects], "locator": [0] * len(rejects), "reason": ["bad"] * len(rejects),
           "raw_bytes": [r[1] for r in rejects], "partition": ["00000"] * len(rejects)}
    write_parquet(pa.table(rej, schema=REJECTS_SCHEMA), layout.part("rejects", "00000"))
    num = [f.name for f in schema if (pa.types.is_integer(f.type) or pa.types.is_floating(f.type)) and f.name != "doc_id"]
    stats = summarize({c: np.array([np.nan if r[c] is None else r[c] for r in rows], dtype=float) for c in num})
    write_json({"signals": {k: v.to_json() for k, v in stats.items()}}, layout.merged_stats)
    return layout.root


CONFIGS = [
    Config(),
    build(Config, {"stages": {"language": {"keep": ["en", "de"], "min_score": 0.1}, "c4": {"enabled": False},
                              "gopher_quality": {"min_words": 3, "max_words": 200}}}),
    build(Config, {"stages": {k: {"enabled": False} for k in ("language", "gopher_quality", "gopher_repetition",
                                                              "c4", "fineweb")}}),
    build(Config, {"stages": {"extract": {"min_chars": 0}, "gopher_quality": {"enabled": False}},
                   "percentiles": [{"stage": "fineweb", "signal": "fw_short_line_ratio", "drop_highest": 20},
                                   {"stage": "exact_dedup", "signal": "bytes", "drop_lowest": 10}]}),
    build(Config, {"stages": {"language": {"enabled": False}, "pii": {"max_pii": 2}},
                   "percentiles": [{"stage": "pii", "signal": "gq_mean_word_length", "drop_highest": 30}]}),
    # per-language thresholds: de and en moved different ways, ja absent from the run, NULL lang the default
    build(Config, {"stages": {"language": {"keep": ["en", "de", "fr"], "min_score": 0.1,
                                           "by_lang": {"fr": {"min_score": 0.6}}},
                              "gopher_quality": {"min_words": 3, "by_lang": {"de": {"min_words": 10, "min_stop_words": 0},
                                                                             "en": {"min_words": 1, "max_words": 100},
                                                                             "ja": {"min_words": 0}}},
                              "fineweb": {"by_lang": {"de": {"max_short_line_ratio": 0.95}}},
                              "pii": {"max_pii": 5, "by_lang": {"en": {"max_pii": 1}}}}}),
]


@pytest.mark.parametrize("in_memory", [False, True])
@pytest.mark.parametrize("cfg", CONFIGS)
def test_sql_reasons_equal_python_reasons(tmp_path, cfg, in_memory):
    rows = _random_rows(600, seed=len(str(cfg)))
    r = query.open_run(make_run(tmp_path, rows), in_memory=in_memory)
    sql = dict(query.drop_reasons(r, cfg).iter_rows())
    by_stage = {}
    for why in sql.values():
        if why:
            by_stage[why.split(".")[0]] = by_stage.get(why.split(".")[0], 0) + 1
    f = query.funnel(r, cfg)
    assert {s: d for s, d in zip(f["stage"], f["docs_dropped"]) if d} == by_stage
    assert dict(query.drop_reasons(r, cfg).iter_rows()) == sql  # again: cached stage codes give the same
    py = python_funnel(ruleset(cfg, r.stats()), rows)
    assert sql == py
    assert len(set(py.values())) >= 3  # the comparison covers several different outcomes


def test_funnel_conserves_documents_and_bytes(tmp_path):
    rows = _random_rows(500, seed=3)
    cfg = CONFIGS[2]
    run = make_run(tmp_path, rows, rejects=[("a.jsonl", 11), ("b.jsonl", 5)])
    f = query.funnel(run, cfg, raw=True)
    assert f["stage"].to_list()[0] == "ingest" and f["stage"].to_list()[1:] == list(query.STAGE_NAMES)
    first, last = f.row(0, named=True), f.row(-1, named=True)
    # an unreadable record has raw bytes and no text
    assert first["docs_in"] == 502 and first["docs_dropped"] == 2 and first["bytes_dropped"] == 0
    assert first["raw_bytes_dropped"] == 16
    assert first["bytes_in"] == sum(r["bytes"] for r in rows if r["bytes"] is not None)
    assert first["raw_bytes_in"] == sum(r["raw_bytes"] for r in rows if r["raw_bytes"] is not None) + 16
    assert first["docs_in"] == last["docs_out"] + f["docs_dropped"].sum()
    for unit in ("bytes", "raw_bytes"):
        assert first[f"{unit}_in"] == last[f"{unit}_out"] + f[f"{unit}_dropped"].sum()
        assert f[f"{unit}_out"].to_list()[:-1] == f[f"{unit}_in"].to_list()[1:]
    assert f.drop("raw_bytes_in", "raw_bytes_dropped", "raw_bytes_out").equals(query.funnel(run, cfg))
    kept = sum(v is None for v in python_funnel(ruleset(cfg), rows).values())
    assert last["docs_out"] == kept
    # stage k's output is stage k+1's input
    assert f["docs_out"].to_list()[:-1] == f["docs_in"].to_list()[1:]


@pytest.mark.parametrize("in_memory", [False, True])
def test_funnel_by_language_and_source_sum_to_total(tmp_path, in_memory):
    rows = _random_rows(400, seed=5)
    run = query.open_run(make_run(tmp_path, rows, rejects=[("a.jsonl", 3)]), in_memory=in_memory)
    cfg = CONFIGS[1]
    total = query.funnel(run, cfg)
    for by in ("lang", "source"):
        g = query.funnel(run, cfg, by=by)
        summed = g.group_by("stage", maintain_order=True).agg(
            *[__import__("polars").col(c).sum() for c in ("docs_in", "docs_dropped", "bytes_dropped")])
        assert summed["docs_dropped"].to_list() == total["docs_dropped"].to_list()
        assert summed["bytes_dropped"].to_list() == total["bytes_dropped"].to_list()
    with pytest.raises(ConfigError, match="by='url'"):
        query.funnel(run, cfg, by="url")


@pytest.mark.parametrize("in_memory", [False, True])
def test_exact_dedup_keeps_one_member_among_survivors(tmp_path, in_memory):
    base = {f.name: None for f in signals_schema()}
    cfg = build(Config, {"stages": {k: {"enabled": False} for k in ("url", "language", "gopher_quality",
                                                                    "gopher_repetition", "c4", "fineweb",
                                                                    "decontamination")}})
    rows = []
    for doc_id, chars, h in [(1, 0, 99), (2, 10, 99), (3, 10, 99), (4, 10, 7), (5, 0, 5), (6, 0, 5)]:
        rows.append({**base, "doc_id": doc_id, "source": "s", "bytes": 10, "chars": chars, "content_hash": h})
    run = query.open_run(make_run(tmp_path, rows), in_memory=in_memory)
    reasons = dict(query.drop_reasons(run, cfg).iter_rows())
    # doc 1 (the lowest id of group 99) is empty: doc 2 survives in its place, doc 3 is the duplicate;
    # group 5 loses both members to the earlier stage, so nothing is counted as its duplicate
    assert reasons == {1: "extract.empty", 2: None, 3: "exact_dedup.duplicate", 4: None,
                       5: "extract.empty", 6: "extract.empty"}


def test_dropped_samples_and_histogram(tmp_path):
    rows = _random_rows(300, seed=9)
    run = make_run(tmp_path, rows)
    cfg = Config()
    s = query.dropped_samples(run, cfg, "language", n=5)
    assert 0 < s.height <= 5
    assert all(r.startswith("language.") for r in s["reason"])
    assert {"lang", "lang_score", "text"} <= set(s.columns)
    assert s.equals(query.dropped_samples(run, cfg, "language", n=5))  # deterministic
    h = query.signal_histogram(run, "gq_mean_word_length", bins=8)
    assert h.height == 8 and h["docs"].sum() == sum(r["gq_mean_word_length"] is not None for r in rows)
    with pytest.raises(ConfigError, match="not in this run"):
        query.signal_histogram(run, "nope")
    with pytest.raises(ConfigError, match="unknown stage"):
        query.dropped_samples(run, cfg, "nope")


def test_signal_summary_whole_and_by_source(tmp_path):
    rows = _random_rows(300, seed=10)
    run = make_run(tmp_path, rows)
    by = query.signal_summary(run, "qm_score", by="source")
    assert by["documents"].to_list() == sorted(by["documents"].to_list(), reverse=True)  # largest group first
    for r in by.iter_rows(named=True):
        values = np.array(sorted(x["qm_score"] for x in rows if x["source"] == r["source"] and x["qm_score"] is not None))
        assert r["documents"] == sum(x["source"] == r["source"] for x in rows)
        assert r["missing"] == r["documents"] - values.size
        assert (r["min"], r["max"]) == (values.min(), values.max())
        assert r["mean"] == pytest.approx(values.mean())
        for q in (10, 50, 90):  # interpolated, as numpy's default
            assert r[f"p{q}"] == pytest.approx(np.percentile(values, q))
    whole = query.signal_summary(run, "qm_score").row(0, named=True)
    assert whole["documents"] == len(rows) and whole["missing"] == sum(by["missing"])
    # by hand: 1, 2, 3, 4 (and one missing) -> p10 1.3, median 2.5, p90 3.7
    hand = [{**rows[0], "doc_id": i, "qm_score": v} for i, v in enumerate([1.0, 2.0, 3.0, 4.0, None])]
    s = query.signal_summary(make_run(tmp_path / "hand", hand), "qm_score").row(0, named=True)
    assert (s["documents"], s["missing"], s["min"], s["max"], s["mean"]) == (5, 1, 1.0, 4.0, 2.5)
    assert (s["p10"], s["p50"], s["p90"]) == pytest.approx((1.3, 2.5, 3.7))
    with pytest.raises(ConfigError, match="not numeric"):
        query.signal_summary(run, "url_domain")
    with pytest.raises(ConfigError, match="by='url'"):
        query.signal_summary(run, "qm_score", by="url")


def test_percentile_rule_uses_merged_quantile(tmp_path):
    rows = _random_rows(300, seed=11)
    run = make_run(tmp_path, rows)
    cfg = build(Config, {"percentiles": [{"stage": "gopher_quality", "signal": "gq_stop_words", "drop_lowest": 25}]})
    rules = ruleset(cfg, query.open_run(run).stats())
    pr = [r for r in rules if r.reason.startswith("gq_stop_words_below")]
    assert len(pr) == 1 and pr[0].op == ">="
    vals = sorted(r["gq_stop_words"] for r in rows if r["gq_stop_words"] is not None)
    exact = vals[int(0.25 * (len(vals) - 1))]
    assert abs(pr[0].value - exact) <= 0.01 * abs(exact) + 1e-9
    with pytest.raises(ConfigError, match=r"percentiles\[0\].signal='zzz'.*must be a numeric signal"):
        build(Config, {"percentiles": [{"stage": "c4", "signal": "zzz", "drop_lowest": 5}]})


@pytest.mark.parametrize("engine", ["codes", "sql", "file"])
@pytest.mark.parametrize("by", [None, "lang"])
def test_incremental_funnel_equals_recomputed_over_a_walk_of_threshold_moves(tmp_path, by, engine, monkeypatch):
    # a move is answered from a remembered config: in memory by each document's code (lab.query.codes,
    # only the rows whose code differs counted again) or, where that cannot answer, in SQL; a run queried
    # from its DuckDB file ("file") in SQL the same way
    from lab.query import codes
    monkeypatch.setattr(codes, "ENABLED", engine == "codes")
    rows = _random_rows(800, seed=13)
    path = make_run(tmp_path, rows, rejects=[("a.jsonl", 4)])
    live = query.open_run(path, in_memory=engine != "file")  # remembers funnels and answers moves incrementally
    fresh = query.open_run(path, refresh=True) if engine == "file" else query.open_run(path)
    rng = random.Random(2)
    knobs = [("language", "min_score", [0.0, 0.1, 0.65, 0.7, 0.9]), ("gopher_quality", "min_words", [0, 3, 10, 50, 60]),
             ("gopher_quality", "max_mean_word_length", [3.5, 7.0, 12.0]), ("fineweb", "max_short_line_ratio", [0.1, 0.3, 0.9]),
             ("c4", "min_sentences", [0, 2, 5, 40]), ("gopher_repetition", "max_dup_line_frac", [0.05, 0.3, 1.0])]
    stages = {"c4": {"enabled": True}}
    used = 0
    # code_counts' module (query.funnel is the function): code_counts calls the sql_counts found there
    funnel_module = importlib.import_module("lab.query.funnels")
    real_counts, real_code_counts = funnel_module.sql_counts, codes.Codes._counts
    incremental = []

    def spy(cur, rules, by_, run, source="signals"):
        if source != "signals":
            incremental.append(source)
        return real_counts(cur, rules, by_, run, source)

    def spy_codes(self, arr, by_, n_rules, rows=None):
        if rows is not None:
            assert rows.size < arr.size
            incremental.append(rows.size)
        return real_code_counts(self, arr, by_, n_rules, rows)

    import unittest.mock

    patch = unittest.mock.patch.object(funnel_module, "sql_counts", spy)
    patch.start()
    monkeypatch.setattr(codes.Codes, "_counts", spy_codes)
    for step in range(30):
        stage, key, values = rng.choice(knobs)
        stages.setdefault(stage, {})[key] = rng.choice(values)
        if step == 15:
            stages["c4"] = {"enabled": False}  # a structural change: recomputed from scratch
        cfg = build(Config, {"stages": stages})
        got = query.funnel(live, cfg, by=by)
        fresh.sql_memo.clear()  # the reference evaluates every rule every time
        assert got.equals(query.funnel(fresh, cfg, by=by)), (step, stages)
        used += 1
    patch.stop()
    memo = {"sql": live.memo, "file": live.sql_memo}.get(engine)
    assert used == 30 and (len(memo) >= 10 if memo is not None else len(live.codes.count_memo) >= 10), engine
    assert len(incremental) >= 2 * 8, len(incremental)  # most moves were answered incrementally (old and new counts)


def test_a_run_larger_than_memory_holds_is_opened_from_disk(tmp_path, monkeypatch):
    # above CORPUS_LAB_IN_MEMORY_DOCS documents, in_memory=True opens the run as from disk: no per-document
    # arrays, the same answers, a move still answered from the remembered funnel
    rows = _random_rows(300, seed=4)
    path = make_run(tmp_path, rows)
    monkeypatch.setenv("CORPUS_LAB_IN_MEMORY_DOCS", "299")
    big = query.open_run(path, in_memory=True, refresh=True)
    assert big.memo is None and big.codes is None and "_sample_rank" not in big.columns
    monkeypatch.setenv("CORPUS_LAB_IN_MEMORY_DOCS", "300")
    small = query.open_run(path, in_memory=True, refresh=True)
    assert small.memo is not None and "_sample_rank" in small.columns
    for words in (0, 50, 120):
        cfg = build(Config, {"stages": {"gopher_quality": {"min_words": words}}})
        assert query.funnel(big, cfg).equals(query.funnel(small, cfg))
    assert len(big.sql_memo) == 3
    monkeypatch.setenv("CORPUS_LAB_IN_MEMORY_DOCS", "many")
    with pytest.raises(ConfigError, match="CORPUS_LAB_IN_MEMORY_DOCS='many' is not allowed"):
        query.open_run(path, in_memory=True, refresh=True)


def test_duckdb_memory_is_bounded_and_a_bad_limit_is_named(tmp_path, monkeypatch):
    # each opened run's DuckDB has a memory limit (a quarter of the machine, or CORPUS_LAB_DUCKDB_MEMORY)
    from lab.query import run as query_run

    path = make_run(tmp_path, _random_rows(50, seed=1))
    r = query.open_run(path, refresh=True)
    limit = r.cursor().execute("SELECT current_setting('memory_limit')").fetchone()[0]
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert limit.endswith("GiB") and float(limit[:-4]) <= total / 4 / 2**30 * 1.08, limit  # DuckDB prints GiB
    monkeypatch.setenv("CORPUS_LAB_DUCKDB_MEMORY", "3GB")
    assert query_run._memory_limit() == "3GB"
    monkeypatch.setitem(query_run.DUCKDB_SETTINGS, "memory_limit", "lots")
    with pytest.raises(ConfigError, match=r"memory_limit='lots' \(CORPUS_LAB_DUCKDB_MEMORY\) is not allowed"):
        query.open_run(path, refresh=True)


def test_in_memory_codes_leave_nan_signals_to_sql(tmp_path):
    # DuckDB orders NaN above every number (NaN >= 3 holds), numpy does not: a column holding NaN
    # is answered in SQL, and the in-memory funnel still equals the Parquet one
    from lab.query import codes
    rows = _random_rows(300, seed=3)
    for i in range(0, 300, 7):
        rows[i]["gq_mean_word_length"] = float("nan")
    path = make_run(tmp_path, rows)
    live, fresh = query.open_run(path, in_memory=True), query.open_run(path)
    cfg = build(Config, {"stages": {"gopher_quality": {"min_mean_word_length": 3.0}}})
    assert codes.of(live).codes(query.rules_of(live, cfg)) is None
    assert query.funnel(live, cfg).equals(query.funnel(fresh, cfg))
    no_nan = build(Config, {"stages": {"gopher_quality": {"enabled": False}}})
    assert codes.of(live).codes(query.rules_of(live, no_nan)) is not None
    assert query.funnel(live, no_nan).equals(query.funnel(fresh, no_nan))


def test_the_package_exports_its_api_by_name_and_nothing_private():
    # callers write query.funnel(...), query.open_run(...): each name of __all__ is its module's object
    # (open_run: the package's, which also warms the in-memory funnel memo), and nothing private is exported
    assert query.funnel is importlib.import_module("lab.query.funnels").funnel and callable(query.funnel)
    for name in query.__all__:
        obj = getattr(query, name)
        home = getattr(obj, "__module__", None)
        if callable(obj) and home is not None and home.startswith("lab.query."):
            assert getattr(importlib.import_module(home), name) is obj, (home, name)
    assert len(set(query.__all__)) == len(query.__all__) > 60
    assert not [n for n in query.__all__ if n.startswith("_")]
    assert query.open_run.__module__ == "lab.query"


def test_funnel_bytes_are_the_texts_utf8_bytes_and_raw_bytes_their_own_column(tmp_path):
    """A record's JSON keys and markup are not text: "Hello world." is 12 bytes of text in a 70-odd byte record."""
    import json

    from lab import engine
    from lab.config import build as build_config

    records = [{"id": "a", "url": "https://example.com/a", "text": "Hello world."},
               {"id": "b", "url": "", "text": "Grüße aus Köln, 2024!"}]
    lines = [json.dumps(r) + "\n" for r in records]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(lines) + "{broken\n")
    cfg = build_config(Config, {"name": "bytes", "output_dir": str(tmp_path), "inputs": [{"path": str(src)}],
                                "stages": {s: {"enabled": False} for s in query.STAGE_NAMES},
                                "tokenizer": {"enabled": False}})
    engine.run(cfg, progress=False, client="inprocess")
    f = query.funnel(cfg.run_dir, cfg, raw=True).row(0, named=True)
    assert f["docs_in"] == 3 and f["docs_dropped"] == 1  # the broken record: unreadable
    assert f["bytes_in"] == len("Hello world.") + len("Grüße aus Köln, 2024!".encode()) == 12 + 24
    assert f["bytes_dropped"] == 0  # an unreadable record has no text
    assert f["raw_bytes_in"] == sum(len(x.encode()) for x in lines) + len("{broken\n")
    assert f["raw_bytes_dropped"] == len("{broken\n")


BY_LANG = {"language": {"keep": ["en", "de", "fr"], "min_score": 0.1},
           "gopher_quality": {"min_words": 3, "max_mean_word_length": 7.0},
           "c4": {"min_sentences": 2}, "exact_dedup": {"enabled": False}}
OVERRIDES = {"language": {"en": {"min_score": 0.0}},
             "gopher_quality": {"de": {"min_words": 100, "max_mean_word_length": 12.0}, "en": {"min_words": 0}},
             "c4": {"fr": {"min_sentences": 0}, "ja": {"min_sentences": 40}}}


@pytest.mark.parametrize("in_memory", [False, True])
def test_per_language_thresholds_equal_each_language_funneled_alone(tmp_path, in_memory):
    # the funnel split by language under by_lang overrides = each language's rows funneled alone under
    # a config whose sections hold that language's values (exact dedup off: its groups span languages)
    import copy

    rows = _random_rows(700, seed=21)
    run = query.open_run(make_run(tmp_path / "all", rows), in_memory=in_memory)
    stages = copy.deepcopy(BY_LANG)
    for stage, langs in OVERRIDES.items():
        stages[stage]["by_lang"] = langs
    cfg = build(Config, {"stages": stages})
    split = query.funnel(run, cfg, by="lang")
    total = query.funnel(run, cfg)
    for lang in ("en", "de", "fr", None):  # fr: only c4 overridden; None: every default
        own = copy.deepcopy(BY_LANG)
        for stage, langs in OVERRIDES.items():
            own[stage].update(langs.get(lang, {}))
        alone = make_run(tmp_path / str(lang), [r for r in rows if r["lang"] == lang])
        want = query.funnel(alone, build(Config, {"stages": own}))
        got = split.filter(split["lang"].is_null() if lang is None else split["lang"] == lang).drop("lang")
        assert got.equals(want), lang
    assert split.group_by("stage", maintain_order=True).agg(
        __import__("polars").col("docs_dropped").sum())["docs_dropped"].to_list() == total["docs_dropped"].to_list()
    # and the per-language values change the answer (not a vacuous equality)
    flat = build(Config, {"stages": BY_LANG})
    assert not query.funnel(run, flat, by="lang").equals(split)


@pytest.mark.parametrize("engine", ["codes", "sql"])
def test_incremental_funnel_after_a_per_language_move_equals_recomputed(tmp_path, engine, monkeypatch):
    from lab.query import codes
    monkeypatch.setattr(codes, "ENABLED", engine == "codes")
    rows = _random_rows(800, seed=17)
    path = make_run(tmp_path, rows)
    live, fresh = query.open_run(path, in_memory=True), query.open_run(path)
    rng = random.Random(5)
    moves = [("gopher_quality", "de", "min_words", [0, 3, 10, 60]), ("gopher_quality", "en", "min_words", [0, 5, 50]),
             ("gopher_quality", None, "min_words", [0, 3, 10]), ("language", "fr", "min_score", [0.0, 0.5, 0.9]),
             ("fineweb", "de", "max_short_line_ratio", [0.1, 0.5, 1.0]), ("gopher_quality", "ja", "min_words", [1, 2])]
    stages: dict = {"language": {"keep": ["en", "de", "fr"]}}
    for step in range(24):
        stage, lang, key, values = rng.choice(moves)
        section = stages.setdefault(stage, {})
        if lang is None:
            section[key] = rng.choice(values)
        elif step % 7 == 6:
            section.get("by_lang", {}).pop(lang, None)  # an override removed
        else:
            section.setdefault("by_lang", {}).setdefault(lang, {})[key] = rng.choice(values)
        cfg = build(Config, {"stages": stages})
        for by in (None, "lang"):
            assert query.funnel(live, cfg, by=by).equals(query.funnel(fresh, cfg, by=by)), (step, stages)
        assert query.drop_reasons(live, cfg).equals(query.drop_reasons(fresh, cfg))
    if engine == "codes":  # the in-memory codes evaluate per-language thresholds themselves
        assert codes.of(live).supports(query.rules_of(live, cfg))
        assert len(live.codes.count_memo) >= 10


def test_a_per_language_move_changes_exactly_the_documents_of_that_language(tmp_path):
    from lab.query.changes import changes

    rows = _random_rows(600, seed=8)
    path = make_run(tmp_path, rows)
    before = build(Config, {"stages": {"language": {"keep": ["en", "de", "fr"]}}})
    after = build(Config, {"stages": {"language": {"keep": ["en", "de", "fr"]},
                                      "gopher_quality": {"by_lang": {"de": {"min_words": 100}}}}})
    for in_memory in (False, True):
        r = query.open_run(path, in_memory=in_memory)
        got = changes(r, query.rules_of(r, before), query.rules_of(r, after))
        py_a, py_b = python_funnel(ruleset(before), rows), python_funnel(ruleset(after), rows)
        want = sorted(d for d in py_a if py_a[d] != py_b[d])
        assert sorted(got.column("doc_id").to_pylist()) == want and want
        assert set(got.column("lang").to_pylist()) == {"de"}
        for lang, shown in (("de", "100"), ("en", "50")):  # each document with its own language's threshold
            page = query.documents(r, after, view="dropped", reason="gopher_quality.too_short", lang=lang, limit=5,
                                   with_text=False)
            assert page.height and set(page["threshold"]) == {shown}
