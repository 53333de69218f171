"""lab.query.browse / distribution: the document viewer's pages, the histograms and the change counts,
held equal to what ``drop_reasons`` and ``funnel`` say over the synthetic run (and a random run with
many duplicate groups and near-duplicate edges)."""

import itertools
import json
import random

import numpy as np
import polars as pl
import pyarrow as pa
import pytest

from lab import query

from lab import dedup
from lab.config import Config, build
from lab.errors import ConfigError
from lab.io.run import RunLayout
from lab.io.schema import DOCS_SCHEMA, REJECTS_SCHEMA, signals_schema
from lab.io.writers import write_parquet
from lab.select.knobs import apply, knobs
from lab.query import browse, distribution
from lab.query import changes as changes_module
from lab.query.memo import Memo
from lab.stages import STAGE_NAMES

ALL = browse.PAGE_MAX  # the synthetic run has fewer documents than one page


@pytest.fixture(scope="module", params=[False, True], ids=["parquet", "in_memory"])
def run(request, synthetic_run_dir):
    return query.open_run(synthetic_run_dir, in_memory=request.param)


# the cases of many queries each run in memory only: their Parquet variant would repeat the reads for
# nothing (the other cases hold both backends' answers equal)
in_memory_only = pytest.mark.parametrize("run", [True], ids=["in_memory"], indirect=True)


@pytest.fixture(scope="module")
def cfg(synthetic_run_dir):
    return query.open_run(synthetic_run_dir).config


def _reasons(r, config) -> dict:
    return dict(query.drop_reasons(r, config).iter_rows())


def _page(r, config, **kw) -> pl.DataFrame:
    return query.documents(r, config, limit=ALL, **kw)


# --- the views -----------------------------------------------------------------------------------------


def test_dropped_view_of_each_stage_equals_drop_reasons(run, cfg):
    reasons = _reasons(run, cfg)
    seen = set()
    for stage in STAGE_NAMES:
        want = {d: w for d, w in reasons.items() if w is not None and w.startswith(stage + ".")}
        page = _page(run, cfg, stage=stage)
        assert dict(zip(page["doc_id"], page["reason"])) == want, stage
        assert page["stage"].to_list() == [stage] * page.height
        assert query.document_count(run, cfg, stage=stage) == len(want)
        seen |= set(want)
    assert len(seen) >= 150  # the synthetic sample: 165 drops over 8 stages
    everything = _page(run, cfg)
    assert dict(zip(everything["doc_id"], everything["reason"])) == {d: w for d, w in reasons.items() if w}
    kept = _page(run, cfg, view="kept")
    assert set(kept["doc_id"]) == {d for d, w in reasons.items() if w is None}
    assert kept["reason"].null_count() == kept.height and kept["signal"].null_count() == kept.height
    assert query.document_count(run, cfg, view="kept") == kept.height == 296


@in_memory_only
def test_paging_covers_every_document_once_in_a_stable_seeded_order(run, cfg):
    for view in ("kept", "dropped"):
        whole = _page(run, cfg, view=view)["doc_id"].to_list()
        pages = [query.documents(run, cfg, view=view, offset=o, limit=7)["doc_id"].to_list()
                 for o in range(0, len(whole) + 7, 7)]
        assert [d for p in pages for d in p] == whole  # each exactly once, in the same order
        assert pages[-1] == []
        again = query.documents(run, cfg, view=view, offset=14, limit=7)
        assert again["doc_id"].to_list() == pages[2]
        other = _page(run, cfg, view=view, seed=3)["doc_id"].to_list()
        assert sorted(other) == sorted(whole) and other != whole
    # seed 0 is dropped_samples' order
    s = query.dropped_samples(run, cfg, "gopher_quality", n=6)
    assert query.documents(run, cfg, stage="gopher_quality", limit=6)["doc_id"].to_list() == s["doc_id"].to_list()


def test_small_sample_windows_give_the_same_pages(synthetic_run_dir, cfg, monkeypatch):
    from lab.query import codes
    monkeypatch.setattr(codes, "ENABLED", False)  # the windows are SQL's way to a page
    r = query.open_run(synthetic_run_dir, in_memory=True, refresh=True)
    want = {(v, s, o): query.documents(r, cfg, view=v, stage=s, offset=o, limit=9)["doc_id"].to_list()
            for v, s in (("dropped", None), ("kept", None), ("dropped", "language"), ("dropped", "exact_dedup"))
            for o in (0, 30, 200)}
    monkeypatch.setattr(browse, "SAMPLE_WINDOWS", (8, 64))  # most pages must fall back to a wider window
    for (v, s, o), ids in want.items():
        assert query.documents(r, cfg, view=v, stage=s, offset=o, limit=9)["doc_id"].to_list() == ids, (v, s, o)


def test_pages_and_counts_from_the_codes_equal_sql(synthetic_run_dir, cfg, monkeypatch):
    # in memory a view's rows come from each document's code (lab.query.codes); SQL gives the same pages
    from lab.query import codes
    r = query.open_run(synthetic_run_dir, in_memory=True, refresh=True)
    moved = apply(cfg, {"gopher_quality.min_alpha_words_ratio": 0.8, "near_dedup.threshold": 0.6})
    src = query.signal_rows(r, ["source"])["source"][0]
    asks = [dict(view="dropped"), dict(view="kept"), dict(view="dropped", stage="gopher_quality"),
            dict(view="dropped", stage="near_dedup"), dict(view="dropped", reason="language.other_language"),
            dict(view="dropped", lang="de"), dict(view="kept", source=src, lang="en"),
            dict(view="dropped", source="nope"), dict(view="dropped", stage="c4", doc_ids=list(range(0, 400, 3))),
            dict(view="newly_dropped", previous=cfg), dict(view="newly_kept", previous=moved),
            dict(view="newly_dropped", previous=cfg, stage="gopher_quality")]

    def answers():
        out = []
        for config in (cfg, moved):
            for kw in asks:
                for offset in (0, 5, 40):
                    page = query.documents(r, config, offset=offset, limit=7, **kw)
                    out.append((page.drop("text").to_dicts(), query.document_count(r, config, **kw)))
        return out

    got = answers()
    assert r.codes is not None and len(r.codes.memo) >= 2  # answered from the codes
    assert sum(n for _, n in got) > 500 and sum(len(p) for p, _ in got) > 200
    monkeypatch.setattr(codes, "ENABLED", False)
    assert answers() == got


def test_filters(run, cfg):
    reasons = _reasons(run, cfg)
    sig = query.signal_rows(run, ["doc_id", "source", "lang"])
    lang_of = dict(zip(sig["doc_id"], sig["lang"]))
    page = _page(run, cfg, reason="language.other_language")
    assert set(page["doc_id"]) == {d for d, w in reasons.items() if w == "language.other_language"}
    de = _page(run, cfg, lang="de")
    assert set(de["doc_id"]) == {d for d, w in reasons.items() if w and lang_of[d] == "de"} and de.height > 0
    assert _page(run, cfg, source="nope").height == 0
    both = _page(run, cfg, source=sig["source"][0], lang="en")
    assert set(both["doc_id"]) == {d for d, w in reasons.items() if w and lang_of[d] == "en"}
    assert query.document_count(run, cfg, source=sig["source"][0], lang="en") == both.height
    some = [d for d, w in reasons.items() if w and w.startswith("c4.")][:3] + [d for d, w in reasons.items() if w is None][:2]
    picked = _page(run, cfg, stage="c4", doc_ids=some)
    assert set(picked["doc_id"]) == set(some[:3])  # the kept ones are not c4 drops
    assert query.document_count(run, cfg, stage="c4", doc_ids=some) == 3
    f = query.document_filters(run, cfg)
    counts = {}
    for w in reasons.values():
        if w:
            counts[w] = counts.get(w, 0) + 1
    assert dict(f["reason"]) == counts
    assert [n for _, n in f["reason"]] == sorted(counts.values(), reverse=True)
    assert sum(n for _, n in f["source"]) == len([w for w in reasons.values() if w])
    assert dict(f["lang"])["de"] == sum(1 for d, w in reasons.items() if w and lang_of[d] == "de")
    assert dict(query.document_filters(run, cfg, stage="language")["reason"]) == {"language.other_language": 30}
    assert query.document_filters(run, cfg, view="kept")["reason"] == []


def test_a_gopher_quality_drop_shows_its_rule_value_and_signals(run, cfg):
    page = _page(run, cfg, stage="gopher_quality")
    sig = query.signal_rows(run)
    row = page.row(0, named=True)
    mine = sig.filter(pl.col("doc_id") == row["doc_id"]).row(0, named=True)
    assert (row["reason"], row["signal"], row["op"], row["threshold"]) == ("gopher_quality.too_short", "gq_words", ">=", "50")
    assert row["value"] == float(mine["gq_words"]) < 50
    signals = json.loads(row["signals"])
    assert signals["content_hash"] == mine["content_hash"]  # 64-bit ints exact
    assert signals["gq_words"] == mine["gq_words"] and not any(k.startswith("_") for k in signals)
    assert row["bytes"] == mine["bytes"] and row["n_tokens"] > 0 and row["source"] == mine["source"]
    assert row["text"] and row["cluster_id"] is None and row["kept_doc_id"] is None
    lang = _page(run, cfg, reason="language.other_language").row(0, named=True)
    assert (lang["signal"], lang["op"], lang["threshold"], lang["value"]) == ("lang", "in", "['en']", None)
    moved = build(Config, {"stages": {"language": {"min_score": 0.93}}})
    low = _page(run, moved, reason="language.low_score").row(0, named=True)
    assert low["threshold"] == "0.93" and low["value"] < 0.93


def test_dedup_drops_name_the_member_kept_in_their_place(run, cfg):
    reasons = _reasons(run, cfg)
    sig = query.signal_rows(run, ["doc_id", "content_hash"])
    hash_of = dict(zip(sig["doc_id"], sig["content_hash"]))
    exact = _page(run, cfg, stage="exact_dedup")
    assert exact.height == 30 and exact["kept_doc_id"].null_count() == 0
    for d, k in zip(exact["doc_id"], exact["kept_doc_id"]):
        assert hash_of[k] == hash_of[d] and reasons[k] is None and k != d
    near = _page(run, cfg, stage="near_dedup")
    assert near.height == 20 and near["kept_doc_id"].null_count() == 0 and near["cluster_id"].null_count() == 0
    assert set(near["threshold"]) == {"0.8"}
    clusters = query.open_run(run).cursor().sql("SELECT node, c80 FROM clusters").pl()
    cluster_of = dict(zip(clusters["node"], clusters["c80"]))
    for d, k, c in zip(near["doc_id"], near["kept_doc_id"], near["cluster_id"]):
        assert reasons[k] is None and k != d
        assert cluster_of[hash_of[d]] == c == cluster_of[hash_of[k]]
        assert {d, k} <= set(query.cluster_members(run, c, 0.8)["doc_id"])


def test_cluster_keepers_agree_with_keep_one_per_cluster():
    rng = np.random.default_rng(4)
    for _ in range(20):
        n = int(rng.integers(1, 40))
        docs = rng.permutation(1000)[:n].astype(np.int64)
        nodes = rng.integers(0, 12, n).astype(np.int64)
        rank = rng.integers(0, 3, n).astype(np.float64)
        u, v = rng.integers(0, 12, 15).astype(np.int64), rng.integers(0, 12, 15).astype(np.int64)
        j = rng.choice([0.5, 0.7, 0.8, 0.9], 15)
        keep = dedup.cluster_keepers(docs, nodes, rank, u, v, j, 0.8)
        assert np.array_equal(np.sort(docs[keep != docs]), dedup.keep_one_per_cluster(docs, nodes, rank, u, v, j, 0.8))
        assert set(keep) <= set(docs)


def _newly(r, before, after) -> tuple[dict, dict]:
    a, b = _reasons(r, before), _reasons(r, after)
    return ({d: (a[d], b[d]) for d in a if a[d] is None and b[d] is not None},
            {d: (a[d], b[d]) for d in a if a[d] is not None and b[d] is None})


def _all_changes_found(r, before, after) -> bool:
    """Every document whose drop reason differs between two full evaluations is in ``pairs_sql``'s
    set, with both reasons (also reason-to-reason changes, which no newly_* view shows)."""
    a, b = _reasons(r, before), _reasons(r, after)
    cur = query.open_run(r).cursor()
    pairs = cur.sql(changes_module.pairs_sql(r, cur, query.rules_of(r, before), query.rules_of(r, after))).pl()
    got = {d: (x, y) for d, x, y in pairs.select("doc_id", "before", "after").iter_rows() if x != y}
    return got == {d: (a[d], b[d]) for d in a if a[d] != b[d]}


def _moves(r, cfg) -> list[Config]:
    """Threshold moves of the synthetic run, two of them made to change a dedup keeper."""
    sig = query.signal_rows(r)
    near = _page(r, cfg, stage="near_dedup")
    by_id = {row["doc_id"]: row for row in sig.iter_rows(named=True)}
    # a min_score between a near-dup pair's kept member (lower) and its dropped member: the keeper is
    # dropped by language, the other one becomes kept
    pair = next((by_id[k]["lang_score"], by_id[d]["lang_score"]) for d, k in zip(near["doc_id"], near["kept_doc_id"])
                if by_id[k]["lang_score"] < by_id[d]["lang_score"])
    exact = _page(r, cfg, stage="exact_dedup")
    col = "gr_dup_5gram_char_frac"
    trip = next((by_id[d][col], by_id[k][col]) for d, k in zip(exact["doc_id"], exact["kept_doc_id"])
                if by_id[k][col] > by_id[d][col])
    knob = next(k.name for k in knobs(cfg) if k.signal == col)
    return [apply(cfg, {"language.min_score": round(sum(pair) / 2, 7)}),
            apply(cfg, {knob: sum(trip) / 2}),
            apply(cfg, {"near_dedup.threshold": 0.95}),
            apply(cfg, {"near_dedup.threshold": 0.6, "near_dedup.keep": "longest"}),
            apply(cfg, {"c4.enabled": False}),
            apply(cfg, {"exact_dedup.enabled": False, "gopher_quality.min_words": 300}),
            apply(cfg, {"exact_dedup.enabled": False, "near_dedup.enabled": False}),
            apply(cfg, {"language.keep": ["en", "de"], "fineweb.max_short_line_ratio": 0.9})]


@in_memory_only
def test_newly_dropped_and_kept_are_the_set_differences_of_two_evaluations(run, cfg, monkeypatch):
    moves = _moves(run, cfg)
    for share in (1.0, 0):  # the candidates only (however many), then every document evaluated
        monkeypatch.setattr(changes_module, "INCREMENTAL_SHARE", share)
        changes_module._changes_memo.clear()  # remembered pairs would answer without evaluating
        changed = 0
        for i, new in enumerate(moves):
            dropped, kept = _newly(run, cfg, new)
            nd = _page(run, new, view="newly_dropped", previous=cfg)
            nk = _page(run, new, view="newly_kept", previous=cfg)
            assert {d: (p, w) for d, p, w in zip(nd["doc_id"], nd["previous_reason"], nd["reason"])} == dropped, i
            assert {d: (p, w) for d, p, w in zip(nk["doc_id"], nk["previous_reason"], nk["reason"])} == kept, i
            assert query.document_count(run, new, view="newly_dropped", previous=cfg) == len(dropped)
            assert query.document_count(run, new, view="newly_kept", previous=cfg) == len(kept)
            assert _all_changes_found(run, cfg, new), i
            back = _page(run, cfg, view="newly_kept", previous=new)  # the move undone
            assert set(back["doc_id"]) == set(dropped)
            changed += bool(dropped) + bool(kept)
        assert changed >= 8
    # the dedup-affecting moves do newly keep documents (a tightening alone never would)
    assert _newly(run, cfg, moves[0])[1] and _newly(run, cfg, moves[1])[1]
    stage_of = next(iter(_newly(run, cfg, moves[0])[1].values()))[0].split(".")[0]
    only = _page(run, moves[0], view="newly_kept", previous=cfg, stage=stage_of)
    assert set(only["previous_reason"]) == {f"{stage_of}.near_duplicate"}
    assert query.document_filters(run, moves[0], view="newly_kept", previous=cfg)["reason"]


@in_memory_only
def test_change_counts_equal_two_full_evaluations(run, cfg):
    sig = query.signal_rows(run, ["doc_id", "bytes", "n_tokens"])
    size = {d: (b, t) for d, b, t in sig.iter_rows()}
    for new in [*_moves(run, cfg), cfg]:
        dropped, kept = _newly(run, cfg, new)
        got = query.change(run, cfg, new)
        for key, docs in (("dropped", dropped), ("kept", kept)):
            assert got[key] == {"docs": len(docs), "bytes": sum(size[d][0] for d in docs),
                                "tokens": sum(size[d][1] or 0 for d in docs)}, (key, new)
        assert query.change(run, new, cfg) == {"dropped": got["kept"], "kept": got["dropped"]}


# --- markup comes back verbatim ------------------------------------------------------------------------


def _tiny_run(tmp_path, texts: list[str]):
    layout = RunLayout(tmp_path / "tiny")
    layout.make()
    schema = signals_schema()
    rows = []
    for i, _ in enumerate(texts):
        row = {f.name: None for f in schema}
        row.update(doc_id=i + 1, source="s.jsonl", bytes=100 + i, chars=0 if i == 0 else 90, lang="en",
                   lang_score=0.99, content_hash=i, nd_shingles=1)
        rows.append(row)
    write_parquet(pa.table({f.name: [r[f.name] for r in rows] for f in schema}, schema=schema),
                  layout.part("signals", "00000"))
    write_parquet(pa.table({"doc_id": [r["doc_id"] for r in rows], "source": ["s.jsonl"] * len(rows),
                            "locator": list(range(len(rows))), "url": ["http://x/<a>"] * len(rows),
                            "record_id": [""] * len(rows), "text": texts}, schema=DOCS_SCHEMA), layout.part("docs", "00000"))
    write_parquet(REJECTS_SCHEMA.empty_table(), layout.part("rejects", "00000"))
    return layout.root


def test_text_with_markup_comes_back_verbatim(tmp_path):
    evil = ["<script>alert('x')</script>", "<img src=x onerror=\"alert(1)\"> & &amp; </textarea>"]
    root = _tiny_run(tmp_path, evil)
    only = build(Config, {"stages": {k: {"enabled": False} for k in STAGE_NAMES if k != "extract"}})
    d = query.documents(root, only, stage="extract")
    assert d["text"].to_list() == [evil[0]] and d["url"].to_list() == ["http://x/<a>"]
    k = query.documents(root, only, view="kept")
    assert k["text"].to_list() == [evil[1]]


# --- a random run: many duplicate groups, near-duplicate edges, random moves ----------------------------


def _random_run(tmp_path, n: int, seed: int):
    rng = random.Random(seed)
    layout = RunLayout(tmp_path / f"rand{seed}")
    layout.make()
    schema = signals_schema()
    rows = []
    for i in range(n):
        row = {}
        for f in schema:
            if f.name == "doc_id":
                v = i * 7919 - 50_000
            elif f.name == "source":
                v = rng.choice(["a.jsonl", "b.jsonl"])
            elif f.name == "lang":
                v = rng.choice(["en", "en", "en", "de", None])
            elif f.name == "drop_reason":
                v = None
            elif f.name == "content_hash":
                v = rng.choice([None] + list(range(60)))
            elif f.name == "nd_shingles":
                v = rng.choice([0, 5, 5, 5])
            elif pa.types.is_string(f.type):  # the url and decontamination stages' names: none blocked
                v = ""
            elif f.name in ("url_present", "url_word_hits", "decon_matches"):
                v = rng.choice([0, 0, 0, 1])
            elif pa.types.is_integer(f.type):
                v = rng.choice([None, 0, 1, 2, 3, 5, 10, 40, 60, 120]) if rng.random() < 0.95 else None
            else:
                v = rng.choice([None, 0.0, 0.05, 0.1, 0.12, 0.2, 0.3, 0.5, 0.65, 0.7, 0.9, 1.0, 3.5, 7.0])
            row[f.name] = v
        rows.append(row)
    write_parquet(pa.table({f.name: [r[f.name] for r in rows] for f in schema}, schema=schema),
                  layout.part("signals", "00000"))
    write_parquet(pa.table({"doc_id": [r["doc_id"] for r in rows], "source": [r["source"] for r in rows],
                            "locator": list(range(n)), "url": [""] * n, "record_id": [""] * n,
                            "text": [f"text {r['doc_id']}" for r in rows]}, schema=DOCS_SCHEMA), layout.part("docs", "00000"))
    write_parquet(REJECTS_SCHEMA.empty_table(), layout.part("rejects", "00000"))
    doc_of = {}
    for r in rows:
        if r["content_hash"] is not None:
            doc_of[r["content_hash"]] = min(doc_of.get(r["content_hash"], r["doc_id"]), r["doc_id"])
    u = np.array([rng.randrange(60) for _ in range(70)], dtype=np.int64)
    v = np.array([rng.randrange(60) for _ in range(70)], dtype=np.int64)
    keep = (u != v) & np.isin(u, list(doc_of)) & np.isin(v, list(doc_of))
    u, v = u[keep], v[keep]
    jac = np.array([rng.choice([0.55, 0.65, 0.75, 0.85, 0.95]) for _ in range(u.size)])
    ud, vd = np.array([doc_of[x] for x in u]), np.array([doc_of[x] for x in v])
    write_parquet(pa.table({"u": u, "v": v, "u_doc": ud, "v_doc": vd, "matches": pa.array((jac * 112).astype(np.int16)),
                            "jaccard_est": jac, "jaccard_exact": jac, "jaccard": jac}, schema=dedup.EDGE_SCHEMA),
                  layout.edges(0))
    dedup.write_clusters(layout.root, dedup.spanning_forest(dedup.Forest(u, v, ud, vd, jac)))
    return layout.root


@pytest.mark.parametrize("in_memory,engine", [(False, "sql"), (True, "sql"), (True, "codes")])
def test_random_walk_of_moves_newly_views_and_change_equal_full_evaluations(tmp_path, in_memory, engine, monkeypatch):
    from lab.query import codes
    monkeypatch.setattr(codes, "ENABLED", engine == "codes")
    r = query.open_run(_random_run(tmp_path, 700, seed=21), in_memory=in_memory)
    hash_of = dict(query.signal_rows(r, ["doc_id", "content_hash"]).iter_rows())
    sources = []
    real = browse.codes_sql

    def spy(rules, **kw):
        sources.append(kw.get("source"))
        return real(rules, **kw)

    monkeypatch.setattr(browse, "codes_sql", spy)
    monkeypatch.setattr(changes_module, "codes_sql", spy)
    monkeypatch.setattr(changes_module, "INCREMENTAL_SHARE", 1.0)  # the candidates only, however many
    rng = random.Random(5)
    choices = [("language", "min_score", [0.0, 0.1, 0.65, 0.7, 0.9]), ("c4", "min_sentences", [0, 2, 5, 40]),
               ("fineweb", "max_short_line_ratio", [0.1, 0.3, 0.9]), ("near_dedup", "threshold", [0.5, 0.6, 0.7, 0.8, 0.9]),
               ("near_dedup", "keep", ["lowest_id", "longest"]), ("language", "keep", [["en"], ["en", "de"]]),
               ("exact_dedup", "enabled", [True, False]), ("c4", "enabled", [True, False]),
               ("fineweb", "enabled", [True, False]), ("near_dedup", "enabled", [True, False])]
    stages: dict = {k: {"enabled": False} for k in ("gopher_quality", "gopher_repetition", "c4", "fineweb")}
    prev = build(Config, {"stages": stages})
    outcomes = set()
    for step in range(24):
        stage, key, values = rng.choice(choices)
        stages = {**stages, stage: {**stages.get(stage, {}), key: rng.choice(values)}}
        new = build(Config, {"stages": stages})
        dropped, kept = _newly(r, prev, new)
        got = query.change(r, prev, new)
        assert (got["dropped"]["docs"], got["kept"]["docs"]) == (len(dropped), len(kept)), (step, stages)
        nd = query.documents(r, new, view="newly_dropped", previous=prev, limit=ALL)
        nk = query.documents(r, new, view="newly_kept", previous=prev, limit=ALL)
        assert set(nd["doc_id"]) == set(dropped) and set(nk["doc_id"]) == set(kept), (step, stages)
        assert _all_changes_found(r, prev, new), (step, stages)
        reasons = _reasons(r, new)
        for stage_name in ("exact_dedup", "near_dedup", "language"):
            page = query.documents(r, new, stage=stage_name, limit=ALL)
            assert set(page["doc_id"]) == {d for d, w in reasons.items() if w and w.startswith(stage_name + ".")}
            for d, k in zip(page["doc_id"], page["kept_doc_id"]):
                if stage_name == "exact_dedup" and hash_of[d] is None:  # no hash: dropped, no copy kept
                    assert k is None
                elif stage_name != "language":  # the member kept in its place passes the stage
                    assert k != d and (reasons[k] is None or not reasons[k].startswith(stage_name)), (d, k)
        outcomes.add((bool(dropped), bool(kept)))
        prev = new
    assert any(d for d, _ in outcomes) and any(k for _, k in outcomes)
    if engine == "sql":
        assert sources.count("_bq_cand") >= 30  # over the candidates only (the rest: answers remembered)
    else:  # each document's code under both configs (SQL only where those cannot answer)
        assert len(r.codes.memo) >= 5 and sources.count("_bq_cand") < 30


# --- histograms --------------------------------------------------------------------------------------


def _stage_truth(r, config, signal, stage):
    """(reaching, dropped, dropped failing a rule on the signal) doc ids of a stage, in Python."""
    from lab.select.ruleset import ruleset

    reasons = _reasons(r, config)
    order = list(STAGE_NAMES)
    rules = [x for x in ruleset(config, r.stats()) if x.stage == stage and x.signal == signal and x.op in (">=", "<=")]
    sig = query.signal_rows(r, ["doc_id", signal])
    value = dict(sig.iter_rows())
    reach = {d for d, w in reasons.items() if w is None or order.index(w.split(".")[0]) >= order.index(stage)}
    dropped = {d for d in reach if reasons[d] and reasons[d].split(".")[0] == stage}
    mine = {d for d in dropped if any(not x.passes({signal: value[d]}) for x in rules)}
    return reach, dropped, mine


@pytest.mark.parametrize("signal", ["lang_score", "gq_words", "gr_dup_line_frac", "c4_sentences", "fw_short_line_ratio"])
def test_histogram_totals_equal_the_funnel_of_the_stage(run, cfg, signal):
    f = {row["stage"]: row for row in query.funnel(run, cfg).iter_rows(named=True)}
    h = query.histogram(run, cfg, signal, bins=24)
    stage = next(x.stage for x in query.rules_of(run, cfg) if x.signal == signal)
    tot = h.select(pl.exclude("bin_lo", "bin_hi")).sum().row(0, named=True)
    assert tot["passed_docs"] + tot["dropped_docs"] == f[stage]["docs_in"]
    assert tot["dropped_docs"] == f[stage]["docs_dropped"]
    assert tot["passed_bytes"] + tot["dropped_bytes"] == f[stage]["bytes_in"]
    assert tot["dropped_bytes"] == f[stage]["bytes_dropped"]
    assert tot["passed_tokens"] + tot["dropped_tokens"] == f[stage]["tokens_in"]
    assert tot["dropped_tokens"] == f[stage]["tokens_dropped"]
    _, _, mine = _stage_truth(run, cfg, signal, stage)
    assert tot["dropped_docs"] - tot["dropped_other_docs"] == len(mine)
    assert h["bin_lo"][-1] is None and h["bin_hi"][-1] is None  # the missing-signal row
    assert h["bin_lo"].to_list()[:-1] + [h["bin_hi"][-2]] == query.bin_edges(run, signal, bins=24)
    if signal in ("gq_words", "c4_sentences"):  # integer signals: integer edges
        assert all(float(e).is_integer() for e in query.bin_edges(run, signal, bins=24))


@pytest.mark.parametrize("signals", [["gq_words", "gq_stop_words"], ["pii_total"], ["nd_shingles"]])
def test_a_languages_histograms_are_its_funnel_at_the_stage(run, signals):
    """``lang=``: over one language's documents (the dashboard's language selector), in every path: the
    in-memory codes, SQL over per-document rules, SQL after dedup (pii), no rule (nd_shingles); its
    totals are that language's funnel at the stage, with a per-language threshold in force."""
    moved = build(Config, {"stages": {"language": {"keep": ["en", "de", "fr"]},
                                      "gopher_quality": {"by_lang": {"de": {"min_stop_words": 4, "min_words": 30}}},
                                      "pii": {"max_pii": 0}}})
    by_lang = query.funnel(run, moved, by="lang")
    whole = query.histograms(run, moved, signals)
    for lang in ("en", "de", "fr", "zz"):
        hs = query.histograms(run, moved, signals, lang=lang)
        f = {row["stage"]: row for row in by_lang.filter(pl.col("lang") == lang).iter_rows(named=True)}
        for s in signals:
            h = hs[s]
            assert h["bin_lo"].to_list() == whole[s]["bin_lo"].to_list()  # one axis for every language
            stage = next((x.stage for x in query.rules_of(run, moved) if x.signal == s), None)
            if not f:  # a language the run lacks: nothing
                assert h["passed_docs"].sum() + h["dropped_docs"].sum() == 0
                continue
            n_in = f[stage or "extract"]["docs_in"]  # no rule: every document with text
            assert h["passed_docs"].sum() + h["dropped_docs"].sum() == n_in, (lang, s)
            assert h["dropped_docs"].sum() == (f[stage]["docs_dropped"] if stage else 0)


def test_histogram_of_a_stage_with_several_rules_counts_its_other_drops_as_dropped(run, cfg):
    # language drops 30 documents, all for their language: on lang_score they are "dropped", but by
    # another rule of the stage (dropped_other_docs), wherever the min_score cutoff is
    h = query.histogram(run, cfg, "lang_score")
    assert h["dropped_docs"].sum() == 30 and h["dropped_other_docs"].sum() == 30
    moved = build(Config, {"stages": {"language": {"min_score": 0.93}}})
    hm = query.histogram(run, moved, "lang_score")
    _, dropped, mine = _stage_truth(run, moved, "lang_score", "language")
    assert hm["dropped_docs"].sum() == len(dropped) and hm["dropped_docs"].sum() - hm["dropped_other_docs"].sum() == len(mine)
    assert len(mine) > 50
    # the cutoff moves over a fixed axis: the same edges under both configs
    assert hm["bin_lo"].to_list() == h["bin_lo"].to_list() and hm["bin_hi"].to_list() == h["bin_hi"].to_list()
    # every bin wholly below the cutoff is dropped, every bin wholly above it passes, except language drops
    for row in hm.iter_rows(named=True):
        if row["bin_hi"] is not None and row["bin_hi"] <= 0.93:
            assert row["passed_docs"] == 0
        if row["bin_lo"] is not None and row["bin_lo"] >= 0.93:
            assert row["dropped_docs"] == row["dropped_other_docs"]


def test_histogram_unthresholded_or_disabled_is_all_passed_and_after_dedup_uses_the_survivors(run, cfg):
    f = query.funnel(run, cfg)
    total = f.filter(pl.col("stage") == "extract")["docs_in"][0]
    h = query.histogram(run, cfg, "nd_shingles")  # no rule thresholds it
    assert h["passed_docs"].sum() == total and h["dropped_docs"].sum() == 0
    off = build(Config, {"stages": {"gopher_quality": {"enabled": False}}})
    assert query.histogram(run, off, "gq_words")["passed_docs"].sum() == total
    pii = build(Config, {"stages": {"pii": {"max_pii": 0}}})
    fp = {row["stage"]: row for row in query.funnel(run, pii).iter_rows(named=True)}
    hp = query.histogram(run, pii, "pii_total")
    assert hp["passed_docs"].sum() + hp["dropped_docs"].sum() == fp["pii"]["docs_in"]
    assert hp["dropped_docs"].sum() == fp["pii"]["docs_dropped"] > 0


@in_memory_only
def test_histograms_of_a_card_equal_each_histogram_and_the_parquet_run(run, cfg, synthetic_run_dir):
    # one query per stage for all of its signals; in memory each row's bin is stored once and reused:
    # every histogram equals the one computed alone over the Parquet files (bins searched per row)
    parquet = query.open_run(synthetic_run_dir)
    signals = list(dict.fromkeys(k.signal for k in knobs(cfg, {}) if k.signal))
    assert len(signals) >= 15
    moves = [cfg, build(Config, {"stages": {"gopher_quality": {"enabled": False, "min_words": 80}}}),
             build(Config, {"stages": {"near_dedup": {"threshold": 0.6}, "c4": {"min_sentences": 4}}})]
    for config in moves:
        many = query.histograms(run, config, [*signals, signals[0]])  # a repeat is asked once
        assert list(many) == signals
        for s in signals:
            alone = query.histogram(parquet, config, s)
            assert many[s].equals(alone), s
            assert query.histogram(run, config, s).equals(alone), s
    with pytest.raises(ConfigError, match="not a numeric signal"):
        query.histograms(run, cfg, ["gq_words", "source"])


@pytest.mark.parametrize("engine", ["codes", "sql"])
def test_histograms_after_threshold_moves_are_incremental_and_exact(synthetic_run_dir, cfg, monkeypatch, engine):
    # in memory a threshold move is answered from the last answer plus the rows whose outcome differs
    # (by each document's code, lab.query.codes; or in SQL, the rows between the two thresholds): a
    # random walk of moves over every stage's knobs equals the Parquet answers
    from lab.query import codes
    monkeypatch.setattr(codes, "ENABLED", engine == "codes")
    mem = query.open_run(synthetic_run_dir, in_memory=True, refresh=True)
    parquet = query.open_run(synthetic_run_dir)
    ks = [k for k in knobs(cfg, query.signal_ranges(parquet)) if k.signal and k.kind in ("integer", "number")
          and k.stage in ("language", "gopher_quality", "gopher_repetition", "c4", "fineweb")]
    srcs, subsets = [], []
    aggregate, hist = distribution._aggregate, codes.Codes._hist
    monkeypatch.setattr(distribution, "_aggregate", lambda cur, src, *a: srcs.append(src) or aggregate(cur, src, *a))
    monkeypatch.setattr(codes.Codes, "_hist", lambda self, arr, *a: (subsets.append(a[-1]) if len(a) == 5 else None)
                        or hist(self, arr, *a))
    rng = random.Random(7)
    config = cfg
    for _ in range(14):
        k = rng.choice(ks)
        value = k.lo + rng.random() * (k.hi - k.lo)
        config = apply(config, {k.name: round(value) if k.kind == "integer" else value})
        card = list(dict.fromkeys(x.signal for x in ks if x.stage == k.stage))
        got = query.histograms(mem, config, card)
        for sig in card:
            assert got[sig].equals(query.histogram(parquet, config, sig)), (k.name, sig)
    if engine == "sql":  # the moved rows only, under the old and the new rules: two queries with a condition per answer
        assert sum("FROM _hist_moved" in x for x in srcs) >= 10
    else:  # no SQL; the rows whose outcome differs, counted under the old and the new codes
        assert not any("FROM _hist_moved" in x for x in srcs)
        assert sum(x is not None and x.size < mem.codes.n for x in subsets) >= 10


@pytest.mark.parametrize("engine", ["codes", "sql"])
def test_histograms_and_changes_with_per_language_thresholds_equal_the_parquet_run(synthetic_run_dir, cfg, monkeypatch,
                                                                                 engine):
    # a walk of per-language moves: in memory (incremental from the last answer) = the Parquet answer
    from lab.config import to_dict
    from lab.query import codes
    monkeypatch.setattr(codes, "ENABLED", engine == "codes")
    mem = query.open_run(synthetic_run_dir, in_memory=True, refresh=True)
    parquet = query.open_run(synthetic_run_dir)
    base = to_dict(cfg)
    base["stages"]["language"]["keep"] = ["en", "de", "fr"]
    moves = [("gopher_quality", "de", "min_words", [10, 40, 200]), ("gopher_quality", "en", "min_stop_words", [0, 3, 6]),
             ("fineweb", "de", "min_line_punct_ratio", [0.0, 0.3]), ("language", "fr", "min_score", [0.3, 0.95])]
    card = {"gopher_quality": ["gq_words", "gq_stop_words"], "fineweb": ["fw_line_punct_ratio"], "language": ["lang_score"]}
    rng = random.Random(3)
    before = build(Config, base)
    for _ in range(8):
        stage, lang, key, values = rng.choice(moves)
        base["stages"][stage].setdefault("by_lang", {}).setdefault(lang, {})[key] = rng.choice(values)
        config = build(Config, base)
        got = query.histograms(mem, config, card[stage])
        for sig in card[stage]:
            assert got[sig].equals(query.histogram(parquet, config, sig)), (stage, lang, key, sig)
        assert query.change(mem, before, config) == query.change(parquet, before, config)
        assert _reasons(mem, config) == _reasons(parquet, config)
        before = config


def test_a_page_without_texts_and_the_texts_read_one_by_one(run, cfg):
    full = query.documents(run, cfg, view="dropped", limit=20)
    bare = query.documents(run, cfg, view="dropped", limit=20, with_text=False)
    assert bare["text"].null_count() == bare.height == 20
    assert bare.drop("text").equals(full.drop("text"))  # the same page, the same details
    ids = full["doc_id"].to_list()
    texts = query.document_texts(run, [ids[3], ids[0], ids[3], 12345])  # an unknown id: left out
    assert texts == {ids[0]: full["text"][0], ids[3]: full["text"][3]}
    assert query.document_texts(run, []) == {}
    with pytest.raises(ConfigError, match="doc_ids"):
        query.document_texts(run, "12")


def test_texts_read_again_are_remembered_within_a_bound_and_never_across_runs(synthetic_run_dir, cfg, monkeypatch):
    r = query.open_run(synthetic_run_dir, in_memory=True)
    page = query.documents(r, cfg, view="kept", limit=8)
    ids, want = page["doc_id"].to_list(), dict(zip(page["doc_id"].to_list(), page["text"].to_list()))
    room = sum(len(want[d]) for d in ids[:3])  # room for 3 texts
    monkeypatch.setattr(browse, "_texts", Memo(room, weigh=browse._texts.weigh))
    sqls = []
    real = r.cursor

    def counting_cursor():
        cur = real()
        return type("C", (), {"execute": lambda self, sql: (sqls.append(sql), cur.execute(sql))[1]})()

    monkeypatch.setattr(r, "cursor", counting_cursor)
    assert query.document_texts(r, ids[:3]) == {d: want[d] for d in ids[:3]} and len(sqls) == 1
    assert query.document_texts(r, ids[2::-1]) == {d: want[d] for d in ids[2::-1]} and len(sqls) == 1  # remembered
    assert query.document_texts(r, ids[3:5]) == {d: want[d] for d in ids[3:5]} and len(sqls) == 2
    assert sum(len(t) for _, (_, t) in browse._texts.recent()) <= room  # the oldest went
    # the least recently read went first: ids[2] (read, then ids[1] and ids[0] again)
    assert (ids[2], ) not in {k[1:] for k, _ in browse._texts.recent()}
    assert query.document_texts(r, ids[2:3]) == {ids[2]: want[ids[2]]} and len(sqls) == 3  # read again
    other = query.open_run(synthetic_run_dir, in_memory=True, refresh=True)  # a rerun's Run reads its own files
    assert other is not r
    monkeypatch.setattr(other, "cursor", counting_cursor)
    assert query.document_texts(other, ids[3:4]) == {ids[3]: want[ids[3]]} and len(sqls) == 4


def test_bin_edges():
    e = distribution.edges_for(0, 100_000, 5, 4000, integer=True, bins=40)  # word counts: log, integer
    assert e[0] == 0 and e[-1] == 100_001 and e == sorted(set(e)) and len(e) <= 41
    assert all(b > a for a, b in itertools.pairwise(e))
    lin = distribution.edges_for(0.0, 1.0, 0.0, 0.9, integer=False, bins=10)
    assert lin[0] == 0.0 and lin[-1] == 1.0 and len(lin) == 11
    tail = distribution.edges_for(-5.0, 1000.0, 0.0, 10.0, integer=False, bins=12)  # both tails get a bin
    assert tail[0] == -5.0 and tail[1] == 0.0 and tail[-2] == 10.0 and tail[-1] == 1000.0 and len(tail) == 13
    zoom = distribution.edges_for(0.0, 1.0, 0.0, 1.0, integer=False, bins=6, lo=0.2, hi=0.6)
    assert zoom[:2] == [0.0, 0.2] and zoom[-2:] == [0.6, 1.0]
    assert distribution.edges_for(None, None, None, None, integer=False) == []
    assert distribution.edges_for(3, 3, 3, 3, integer=True) == [3, 4]
    with pytest.raises(ConfigError, match="bins=0"):
        distribution.edges_for(0, 1, 0, 1, integer=True, bins=0)
    with pytest.raises(ConfigError, match="log_x=True"):
        distribution.edges_for(-1.0, 1.0, -1.0, 1.0, integer=False, log_x=True)


# --- bad input ---------------------------------------------------------------------------------------


def test_bad_arguments_name_what_is_allowed(run, cfg):
    with pytest.raises(ConfigError, match="view='nope'.*dropped, kept, newly_dropped, newly_kept"):
        query.documents(run, cfg, view="nope")
    with pytest.raises(ConfigError, match="unknown stage 'nope'; known: url, extract"):
        query.documents(run, cfg, stage="nope")
    with pytest.raises(ConfigError, match="reason='language.nope'.*language.other_language, language.low_score"):
        query.documents(run, cfg, stage="language", reason="language.nope")
    with pytest.raises(ConfigError, match="previous="):
        query.documents(run, cfg, view="newly_dropped")
    with pytest.raises(ConfigError, match="view='kept' takes no stage"):
        query.document_count(run, cfg, view="kept", stage="c4")
    with pytest.raises(ConfigError, match="limit"):
        query.documents(run, cfg, limit=browse.PAGE_MAX + 1)
    with pytest.raises(ConfigError, match="offset"):
        query.documents(run, cfg, offset=-1)
    with pytest.raises(ConfigError, match="doc_ids"):
        query.documents(run, cfg, doc_ids="12")
    with pytest.raises(ConfigError, match="not a numeric signal.*lang_score"):
        query.histogram(run, cfg, "lang")
    with pytest.raises(ConfigError, match="not a numeric signal"):
        query.bin_edges(run, "nope")
    with pytest.raises(ConfigError, match="stage='c4' has no enabled rule on 'gq_words'.*gopher_quality"):
        query.histogram(run, cfg, "gq_words", stage="c4")
    with pytest.raises(ConfigError, match="before must be"):
        query.change(run, {"stages": {}}, cfg)
    assert query.documents(run, cfg, limit=0).height == 0
    assert query.documents(run, cfg, stage="pii").height == 0  # a stage with no enabled rule drops nothing
