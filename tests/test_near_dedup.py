"""Near dedup: signatures, the LSH shuffle on Dask, clusters on the Jaccard grid, the selection-aware rule."""

from __future__ import annotations

import filecmp
import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from datasketch import LeanMinHash, MinHash

from lab import engine, query, sample

from lab import dedup
from lab.config import (Config, EngineConfig, IngestConfig, InputConfig, StagesConfig, TokenizerConfig, build, dumps,
                        load, loads)
from lab.errors import ConfigError
from lab.io.run import RunLayout
from lab.dedup import recall as rc
from lab.dedup import signature as sg
from lab.stages import near_dedup as nd
from lab.stages.c4 import Config as C4Config


def exact_jaccard(a: str, b: str, ngram: int = 5) -> float:
    sa = set(sg.shingles(sg.normalize(a), ngram))
    sb = set(sg.shingles(sg.normalize(b), ngram))
    return len(sa & sb) / len(sa | sb)


def run_jsonl(tmp: Path, name: str, texts: list[str], *, workers: int = 1, partition_bytes: int = 1 << 26,
              stages: StagesConfig | None = None, client: object = engine.INPROCESS, tokenizer: bool = True,
              **nd_kw) -> Config:
    """Run ``texts`` as one JSONL file; in this process unless ``client`` is a cluster's (None: a LocalCluster of
    ``workers``)."""
    src = tmp / "inputs" / str(hash(tuple(texts)) & 0xFFFFFFFF) / "docs.jsonl"  # same texts, same file, same ids
    src.parent.mkdir(parents=True, exist_ok=True)
    data = "".join(json.dumps({"id": f"doc-{i}", "text": t}) + "\n" for i, t in enumerate(texts))
    if not src.exists() or src.read_text() != data:  # rewriting would change its fingerprint (mtime)
        src.write_text(data)
    stages = stages or StagesConfig()
    if nd_kw:
        stages = build(StagesConfig, {**_plain(stages), "near_dedup": {**_plain(stages.near_dedup), **nd_kw}})
    cfg = Config(name=name, output_dir=str(tmp / "runs"), inputs=(InputConfig(path=str(src)),),
                 ingest=IngestConfig(partition_bytes=partition_bytes), stages=stages, engine=EngineConfig(n_workers=workers),
                 tokenizer=TokenizerConfig(enabled=tokenizer))
    engine.run(cfg, progress=False, client=client)
    return cfg


def ids_of(cfg: Config) -> list[int]:
    """doc_ids of the documents written by ``run_jsonl``, in input order."""
    rows = dict(query.open_run(cfg.run_dir, refresh=True).cursor().execute("SELECT record_id, doc_id FROM docs").fetchall())
    return [rows[f"doc-{i}"] for i in range(len(rows))]


def _plain(obj):
    from lab.config import to_dict

    return to_dict(obj)


def corpus(n: int, seed: int) -> tuple[list[str], list[tuple[int, int]]]:
    """``n`` English documents, a third of them near copies (1% of words replaced) of another."""
    rng = random.Random(seed)
    texts, pairs = [], []
    for i in range(n):
        if i % 3 == 2:
            words = texts[i - 1].split(" ")
            for k in rng.sample(range(len(words)), max(1, len(words) // 100)):
                words[k] = rng.choice(["garden", "river", "window", "lantern"])
            texts.append(" ".join(words))
            pairs.append((i - 1, i))
        else:
            texts.append(sample.english_doc(rng))
    return texts, pairs


# --- signatures ------------------------------------------------------------------------------------


def test_normalization():
    assert sg.normalize("Crème  Brûlée,\tversion 2.1!") == "creme brulee version 0 0"
    assert sg.normalize("snake_case") == "snake case"
    assert sg.normalize("") == ""


def test_hand_computed_jaccard():
    a, b = "a b c d e f", "a b c d e g"
    # shingles {abcde, bcdef} and {abcde, bcdeg}: one shared of three
    assert sg.shingles(sg.normalize(a), 5) == [b"a b c d e", b"b c d e f"]
    assert exact_jaccard(a, b) == pytest.approx(1 / 3)
    ha, hb = (sg.shingle_hashes(sg.normalize(t), 5) for t in (a, b))
    assert np.intersect1d(ha, hb).size == 1 and np.union1d(ha, hb).size == 3
    cfg = nd.Config(bands=64, rows=8)  # 512 permutations: the estimate is within a few hundredths
    sa, sb = sg.signature(a, cfg)[0], sg.signature(b, cfg)[0]
    assert float((sa == sb).mean()) == pytest.approx(1 / 3, abs=0.07)
    # a document shorter than one shingle is one shingle; an empty one has none
    assert sg.shingles("a b", 5) == [b"a b"]
    assert sg.signature("", nd.Config())[1].size == 0


def test_signature_equals_datasketch_update_batch():
    rng = random.Random(5)
    for text in [sample.english_doc(rng) for _ in range(5)] + ["Grüße aus Köln: 12 Äpfel, 3 Birnen.", "one two"]:
        norm = sg.normalize(text)
        sh = sg.shingles(norm, 5)
        ref = np.unique(np.array([sg.shingle_hash(s) for s in sh], dtype=np.uint32))
        assert np.array_equal(sg.shingle_hashes(norm, 5), ref)
        m = MinHash(num_perm=112, seed=1, hashfunc=sg.shingle_hash)
        m.update_batch(sh)
        assert np.array_equal(sg.signature(text, nd.Config())[0], m.hashvalues)
    for num_perm, seed in ((112, 1), (128, 42), (7, 0)):  # our draws of the permutations are datasketch's
        want = MinHash(num_perm=num_perm, seed=seed, scheme="affine32").permutations
        got = sg.permutations(num_perm, seed)
        assert all(g.dtype == np.uint32 and np.array_equal(g, w) for g, w in zip(got, want))
    # stored signatures load into datasketch's LeanMinHash, whose estimate is ours
    a, b = (sg.signature(t, nd.Config())[0] for t in (text, text + " one more sentence here at the end"))
    lean = [LeanMinHash(seed=1, hashvalues=x, scheme="affine32") for x in (a, b)]
    assert lean[0].jaccard(lean[1]) == pytest.approx(float((a == b).mean()))


def test_estimates_track_exact_jaccard():
    rng = random.Random(9)
    errors = []
    for _ in range(40):
        base = sample.english_doc(rng)
        words = base.split(" ")
        for k in rng.sample(range(len(words)), int(len(words) * rng.uniform(0, 0.3))):
            words[k] = "zebra"
        other = " ".join(words)
        est = float((sg.signature(base, nd.Config())[0] == sg.signature(other, nd.Config())[0]).mean())
        errors.append(est - exact_jaccard(base, other))
    # 112 permutations: standard error <= sqrt(0.25 / 112) = 0.047
    assert abs(np.mean(errors)) < 0.03 and np.sqrt(np.mean(np.square(errors))) < 0.06


# --- recall: the S-curve, the recall at a threshold, bands x rows for a lowest threshold -----------------


def test_s_curve():
    assert rc.s_curve(0.8, 14, 8) == pytest.approx(1 - (1 - 0.8 ** 8) ** 14)
    assert rc.s_curve(0.8, 14, 8) == pytest.approx(0.92355, abs=1e-5)  # 0.8^8 = 0.16777; 1 - 0.83223^14
    _, p = dedup.s_curve_points(14, 8)
    assert p[0] == 0 and p[-1] == 1 and np.all(np.diff(p) >= 0)


def test_recall_at_the_default_bands_and_rows():
    """Pair recall at a threshold: the candidate probability of a pair exactly at it. With 14 bands x 8 rows
    it is 0.053 at 0.5 (a band of 8 values all equal: 0.5^8 = 1/256; 1 - (255/256)^14) and 0.211 at 0.6."""
    cfg = nd.Config()
    assert (cfg.bands, cfg.rows) == (14, 8)
    assert rc.recall_at(0.5, 14, 8) == pytest.approx(1 - (255 / 256) ** 14) == pytest.approx(0.0533, abs=1e-4)
    assert rc.recall_at(0.6, 14, 8) == pytest.approx(1 - (1 - 0.6 ** 8) ** 14) == pytest.approx(0.2111, abs=1e-4)
    want = {0.5: 0.053, 0.55: 0.111, 0.6: 0.211, 0.65: 0.365, 0.7: 0.565, 0.75: 0.772, 0.8: 0.924, 0.85: 0.988,
            0.9: 1.0, 0.95: 1.0}
    assert {t: round(nd.recall(cfg, t), 3) for t in nd.GRID} == want
    assert rc.lowest_threshold(nd.GRID, 14, 8) == 0.75  # the lowest grid threshold without a warning


@pytest.mark.parametrize("s", [0.5, 0.6, 0.8])
def test_s_curve_against_minhash_signatures(s):
    """The share of random pairs of Jaccard ``s`` whose signatures (this stage's MinHash, 14 x 8) share a band
    is the S-curve, within 4 standard errors."""
    rng = np.random.default_rng(7)
    shared, own = round(200 * s), round(100 * (1 - s))  # |A & B| / |A | B| = shared / (shared + 2 own) = s
    trials, hits = 1500, 0
    for _ in range(trials):
        h = rng.choice(1 << 32, size=shared + 2 * own, replace=False).astype(np.uint32)
        a, b = (sg.minhash(np.concatenate([h[:shared], h[shared + k * own: shared + (k + 1) * own]]), 112, 1)
                for k in (0, 1))
        hits += bool((a.reshape(14, 8) == b.reshape(14, 8)).all(axis=1).any())
    p = rc.s_curve(s, 14, 8)
    assert abs(hits / trials - p) < 4 * np.sqrt(p * (1 - p) / trials), (hits / trials, p)


def test_bands_rows_for_a_min_threshold():
    for t in (0.5, 0.6, 0.7, 0.8, 0.9):
        bands, rows = rc.bands_rows(t, 112)
        assert bands * rows <= 112 and rc.recall_at(t, bands, rows) >= 0.95
        assert bands == 1 or rc.recall_at(t, bands - 1, rows) < 0.95  # the fewest bands
        # and the most rows: with more rows per band, no number of bands that fits reaches 0.95
        assert all(rc.recall_at(t, 112 // more, more) < 0.95 for more in range(rows + 1, 65))
        assert rc.bands_rows(t, bands * rows) == (bands, rows)  # a derived pair derives itself again
    assert rc.bands_rows(0.5, 112) == (23, 3) and rc.bands_rows(0.8, 112) == (13, 7)
    assert rc.bands_rows(0.5, 4) is None


def test_min_threshold_derives_bands_and_rows_in_the_config():
    cfg = build(Config, {"stages": {"near_dedup": {"min_threshold": 0.5}}})
    n = cfg.stages.near_dedup
    assert (n.bands, n.rows, n.num_perm) == (23, 3, 69) and nd.recall(n, 0.5) >= 0.95
    assert nd.recall_warning(n, 0.5) == "" and "0.95 at Jaccard 0.50 (23 bands x 3 rows" in nd.recall_line(n, 0.5)
    assert loads(dumps(cfg)) == cfg  # the saved config (derived bands x rows) loads unchanged
    budget = build(Config, {"stages": {"near_dedup": {"min_threshold": 0.5, "bands": 20, "rows": 10}}})
    assert (budget.stages.near_dedup.bands, budget.stages.near_dedup.rows) == (47, 4)  # 200 permutations allowed
    # a signature parameter: part of the signals hash only when set (runs made without it keep their signals)
    assert "min_threshold" not in Config().stages.near_dedup.signature_params()
    assert cfg.signals_hash() != Config().signals_hash()
    derived = build(Config, {"stages": {"near_dedup": {"min_threshold": 0.8}}})
    explicit = build(Config, {"stages": {"near_dedup": {"bands": 13, "rows": 7}}})
    d, e = derived.stages.near_dedup, explicit.stages.near_dedup
    assert (d.bands, d.rows) == (e.bands, e.rows) == (13, 7)
    assert derived.signals_hash() != explicit.signals_hash()
    with pytest.raises(ConfigError, match=r"stages\.near_dedup\.min_threshold=0\.3 is not allowed: must be a Jaccard "
                                          r"in 0\.50\.\.0\.95 .*remove the key"):
        build(Config, {"stages": {"near_dedup": {"min_threshold": 0.3}}})
    with pytest.raises(ConfigError, match=r"min_threshold=0\.5 is not allowed: .*recall >= 0\.95 by at most bands x "
                                          r"rows = 4 permutations; raise bands or rows"):
        build(Config, {"stages": {"near_dedup": {"min_threshold": 0.5, "bands": 1, "rows": 4}}})
    with pytest.raises(ConfigError, match=r"min_threshold='low' is not allowed: must be a number"):
        build(Config, {"stages": {"near_dedup": {"min_threshold": "low"}}})


def test_min_threshold_recomputes_the_signatures_and_finds_what_14x8_misses(tmp_path):
    """Pairs of Jaccard about 0.7 (one word in 28 replaced): 14 x 8 makes about 56% of them candidates; with
    min_threshold 0.7 (17 x 5) the rerun annotates every partition again and finds nearly all of them."""
    rng = random.Random(5)
    texts, pairs = [], []
    for _ in range(12):
        words = sample.english_doc(rng, 8).split(" ")
        other = [rng.choice(["garden", "river", "window", "lantern"]) if k % 28 == 27 else w
                 for k, w in enumerate(words)]
        pairs.append((len(texts), len(texts) + 1))
        texts += [" ".join(words), " ".join(other)]
    assert all(0.65 <= exact_jaccard(texts[a], texts[b]) <= 0.78 for a, b in pairs)

    def found(cfg: Config) -> int:
        ids = ids_of(cfg)
        edges = {frozenset(e) for e in query.edges(cfg.run_dir).select("u_doc", "v_doc").iter_rows()}
        return sum(frozenset((ids[a], ids[b])) in edges for a, b in pairs)

    cfg = run_jsonl(tmp_path, "recall", texts, tokenizer=False)
    before = found(cfg)
    derived = build(Config, {**_plain(cfg), "stages": {**_plain(cfg.stages), "near_dedup": {
        **_plain(cfg.stages.near_dedup), "min_threshold": 0.7}}})
    assert (derived.stages.near_dedup.bands, derived.stages.near_dedup.rows) == (17, 5)
    m = engine.run(derived, progress=False, client=engine.INPROCESS)
    assert m["last_run"]["partitions_run"] == len(m["partitions"]) > 0 and m["signals_hash"] == derived.signals_hash()
    assert derived.signals_hash() != cfg.signals_hash()
    after = found(derived)
    print(f"\npairs of Jaccard ~0.7 found: {before} of {len(pairs)} with 14 x 8, {after} with 17 x 5")
    assert before < after and after >= len(pairs) - 1, (before, after)
    assert engine.run(derived, progress=False, client=engine.INPROCESS)["last_run"]["partitions_run"] == 0


def test_config_errors_name_key_value_and_allowed():
    with pytest.raises(ConfigError, match=r"threshold=0\.73.*0\.70, 0\.75"):
        build(Config, {"stages": {"near_dedup": {"threshold": 0.73}}})
    with pytest.raises(ConfigError, match=r"keep='biggest'.*lowest_id, longest, best_signal"):
        build(Config, {"stages": {"near_dedup": {"keep": "biggest"}}})
    with pytest.raises(ConfigError, match=r"keep_signal='nope'"):
        build(Config, {"stages": {"near_dedup": {"keep": "best_signal", "keep_signal": "nope"}}})
    # signature parameters are part of the signals hash: changing them recomputes signatures
    assert build(Config, {"stages": {"near_dedup": {"bands": 16}}}).signals_hash() != Config().signals_hash()
    assert build(Config, {"stages": {"near_dedup": {"threshold": 0.9}}}).signals_hash() == Config().signals_hash()


def test_diff_reconstructs_both_texts():
    a, b = "The cat sat\non the mat.", "The dog sat\non the red mat."
    ops = dedup.diff(a, b)
    assert "".join(t for op, t in ops if op in "=-") == a
    assert "".join(t for op, t in ops if op in "=+") == b
    assert ("-", "cat") in ops and ("+", "dog") in ops


# --- the shuffle, clusters and the rule on real runs -------------------------------------------------


@pytest.fixture(scope="module")
def near_runs(tmp_path_factory, local_cluster):
    """The same corpus in many partitions run in this process (one bucket per partition) and on a
    LocalCluster of 2 workers (the session's) with 3 shuffle buckets."""
    tmp = tmp_path_factory.mktemp("near")
    texts, pairs = corpus(90, seed=1)
    one = run_jsonl(tmp, "one", texts, workers=1, partition_bytes=16384)
    two = run_jsonl(tmp, "two", texts, workers=2, partition_bytes=16384, shuffle_buckets=3, client=local_cluster)
    return texts, pairs, one, two


def _node_clusters(run_dir: Path) -> dict:
    t = pq.read_table(RunLayout(run_dir).clusters)
    return {c: t.column(c).to_pylist() for c in t.column_names}


def test_clusters_do_not_depend_on_workers_or_buckets(near_runs):
    _, _, one, two = near_runs
    assert len(list((one.run_dir / "dedup" / "edges").glob("*.parquet"))) > 3  # one bucket per partition
    assert len(list((two.run_dir / "dedup" / "edges").glob("*.parquet"))) == 3
    assert filecmp.cmp(RunLayout(one.run_dir).clusters, RunLayout(two.run_dir).clusters, shallow=False)
    assert query.edges(one.run_dir).equals(query.edges(two.run_dir))
    # a rerun changes nothing and redoes nothing
    before = RunLayout(one.run_dir).clusters.stat().st_mtime_ns
    m = engine.run(one, progress=False)
    assert m["last_run"]["partitions_run"] == 0 and RunLayout(one.run_dir).clusters.stat().st_mtime_ns == before


def test_shuffle_finds_the_exact_duplicate_groups(synthetic_run):
    _, run_dir = synthetic_run
    groups = query.exact_groups(run_dir)
    sql = query.open_run(run_dir).cursor().sql(
        "SELECT content_hash, count(*) AS docs, min(doc_id) AS first_doc_id FROM signals "
        "GROUP BY content_hash HAVING count(*) > 1 ORDER BY content_hash").pl()
    assert len(groups) >= 30 and groups.equals(sql)


def test_edges_carry_exact_and_estimated_jaccard(near_runs):
    texts, _, one, _ = near_runs
    e = query.edges(one.run_dir)
    assert len(e) >= 20
    assert (e["jaccard_est"] - e["matches"].cast(float) / 112).abs().max() < 1e-12
    assert (e["jaccard"] == e["jaccard_exact"]).all()
    text_of = dict(zip(ids_of(one), texts))
    for u, v, j in e.select("u_doc", "v_doc", "jaccard_exact").iter_rows():
        assert j == pytest.approx(exact_jaccard(text_of[u], text_of[v]), abs=1e-12)
    # without exact_jaccard the edges carry the estimate only
    est = query.edges(run_jsonl(one.run_dir.parent.parent, "est", texts, partition_bytes=16384,
                                exact_jaccard=False).run_dir)
    assert est["jaccard_exact"].is_null().all() and (est["jaccard"] == est["jaccard_est"]).all()
    assert est.select("u_doc", "v_doc", "matches").equals(e.select("u_doc", "v_doc", "matches"))


def test_seeded_near_duplicates_are_found_and_grid_is_monotone(near_runs):
    texts, pairs, one, _ = near_runs
    ids = {d: i for i, d in enumerate(ids_of(one))}
    cl = _node_clusters(one.run_dir)
    by_doc = {}
    sig = query.signal_rows(one.run_dir, ["doc_id", "content_hash"])
    node_of = dict(sig.iter_rows())
    col80 = dict(zip(cl["node"], cl["c80"]))
    for d, i in ids.items():
        by_doc[i] = col80.get(node_of[d])
    for a, b in pairs:
        assert by_doc[a] is not None and by_doc[a] == by_doc[b], (a, b)
    unpaired = {i for i in range(len(texts))} - {x for p in pairs for x in p}
    assert all(by_doc[i] is None for i in unpaired)  # unrelated documents are not near-duplicates
    # lower thresholds merge clusters, never split them
    for lo, hi in zip(nd.GRID, nd.GRID[1:]):
        a, b = cl[dedup.grid_column(lo)], cl[dedup.grid_column(hi)]
        assert sum(x is not None for x in a) >= sum(x is not None for x in b)
        groups = {}
        for x, y in zip(a, b):
            if y is not None:
                groups.setdefault(y, set()).add(x)
        assert all(len(v) == 1 and None not in v for v in groups.values())


def test_precision_recall_against_exact_jaccard_on_the_sample(synthetic_run):
    """Pairs in one cluster at 0.8 against pairs whose exact 5-gram Jaccard is >= 0.8."""
    _, run_dir = synthetic_run
    docs = query.open_run(run_dir).cursor().sql("SELECT d.doc_id, d.text, s.nd_shingles FROM docs d "
                                                "JOIN signals s USING (doc_id) ORDER BY doc_id").fetchall()
    sets = {d: sg.shingle_hashes(sg.normalize(t), 5) for d, t, n in docs if n}
    keys = sorted(sets)
    truth = set()
    for i, a in enumerate(keys):
        for b in keys[i + 1:]:
            x, y = sets[a], sets[b]
            inter = np.intersect1d(x, y, assume_unique=True).size
            if inter / (x.size + y.size - inter) >= 0.8:
                truth.add((a, b))
    node = dict(query.signal_rows(run_dir, ["doc_id", "content_hash"]).iter_rows())
    cl = _node_clusters(run_dir)
    cid = dict(zip(cl["node"], cl["c80"]))
    # a document's group: its node's cluster, or its node alone (exact copies share a node)
    group = {d: cid.get(node[d]) or ("node", node[d]) for d in keys}
    found = {(a, b) for i, a in enumerate(keys) for b in keys[i + 1:] if group[a] == group[b]}
    precision = len(found & truth) / len(found)
    recall = len(found & truth) / len(truth)
    print(f"\nsample: {len(truth)} pairs with exact Jaccard >= 0.8, {len(found)} in one cluster at 0.8: "
          f"precision {precision:.3f}, recall {recall:.3f}")
    assert len(truth) >= 20 and precision >= 0.9 and recall >= 0.95


@pytest.fixture(scope="module")
def synthetic_run(synthetic_run_dir):
    """The session's run of the synthetic sample under the default config (conftest.py)."""
    return load(synthetic_run_dir / "config.yaml"), synthetic_run_dir


def test_selection_aware_keep(tmp_path):
    """The member a cluster would keep is dropped by an earlier rule: another member survives."""
    rng = random.Random(3)
    base = sample.english_doc(rng, 8)
    copies = []
    for k in range(3):
        words = base.split(" ")
        words[10 + 7 * k] = "lantern"
        copies.append(" ".join(words))
    other = sample.english_doc(rng, 8)
    for marked in range(4):  # doc_ids are hashes of the byte offsets: mark each member until it is the lowest
        texts = [base, *copies, other]
        texts[marked] += "\n\nLorem ipsum dolor sit amet, this line marks the document for the c4 stage."
        cfg = run_jsonl(tmp_path / str(marked), "sel", texts)
        ids = ids_of(cfg)
        lowest = int(np.argmin(ids[:4]))
        if lowest == marked:
            break
    assert lowest == marked
    reasons = dict(query.drop_reasons(cfg.run_dir, cfg).iter_rows())
    cluster = [ids[i] for i in range(4)]
    assert reasons[ids[lowest]] == "c4.lorem_ipsum"
    survivors = sorted(d for d in cluster if d != ids[lowest])
    assert reasons[survivors[0]] is None  # the lowest surviving doc_id is kept
    assert all(reasons[d] == "near_dedup.near_duplicate" for d in survivors[1:])
    assert reasons[ids[4]] is None
    # without the c4 rule the cluster's lowest doc_id is the one kept
    off = build(Config, {**_plain(cfg), "stages": {**_plain(cfg.stages), "c4": {**_plain(C4Config()), "enabled": False}}})
    reasons = dict(query.drop_reasons(cfg.run_dir, off).iter_rows())
    assert reasons[ids[lowest]] is None and all(reasons[d] == "near_dedup.near_duplicate" for d in survivors)
    # keep: longest keeps the member with the most bytes
    longest = build(Config, {**_plain(off), "stages": {**_plain(off.stages),
                                                      "near_dedup": {**_plain(off.stages.near_dedup), "keep": "longest"}}})
    reasons = dict(query.drop_reasons(cfg.run_dir, longest).iter_rows())
    assert [d for d in cluster if reasons[d] is None] == [ids[lowest]]  # it carries the extra line
    # the copies differ in one word (Jaccard ~0.97): one cluster at 0.5 too; nothing dropped with the stage off
    for nd_cfg, dropped in (({"threshold": 0.5}, 3), ({"enabled": False}, 0)):
        other = build(Config, {**_plain(off), "stages": {**_plain(off.stages),
                                                        "near_dedup": {**_plain(off.stages.near_dedup), **nd_cfg}}})
        f = query.funnel(cfg.run_dir, other)
        assert dict(zip(f["stage"], f["docs_dropped"]))["near_dedup"] == dropped


@pytest.mark.parametrize("exact, keep", [(True, "lowest_id"), (False, "longest")])
def test_near_drops_after_threshold_moves_equal_a_decision_from_nothing(synthetic_run, exact, keep, monkeypatch):
    # a move of another stage's threshold decides again only the components that hold a moved
    # document's content; over a walk of moves the drops equal those decided over every document
    from lab.query import neardup

    _, run_dir = synthetic_run
    live = query.open_run(run_dir, refresh=True)
    fresh = query.open_run(run_dir, refresh=True)
    real, parts = neardup._decide, []

    def spy(r, rules, k, source, rank, edges=None, cur=None):
        if r is live and edges is not None:
            parts.append(source)
        return real(r, rules, k, source, rank, edges, cur)

    monkeypatch.setattr(neardup, "_decide", spy)
    rng = random.Random(5)
    # thresholds at the near-duplicates' own mean word lengths (the members of a pair differ there, not in
    # their word counts): a move drops some members of a cluster, sometimes the one it kept
    means = sorted({x for (x,) in live.cursor().execute("SELECT gq_mean_word_length FROM nd_docs_all "
                                                        "WHERE gq_mean_word_length >= 3").fetchall()})
    half = len(means) // 2
    knobs = [("gopher_quality", "min_mean_word_length", [3.0, *means[1:half:max(half // 6, 1)]]),
             ("gopher_quality", "max_mean_word_length", [10.0, *means[half::max(half // 6, 1)]]),
             ("language", "min_score", [0.0, 0.9, 0.93, 0.95]), ("fineweb", "max_short_line_ratio", [0.1, 0.3, 0.9])]
    stages: dict = {"exact_dedup": {"enabled": exact}, "near_dedup": {"keep": keep}}
    dropped = set()
    for step in range(24):
        stage, key, values = rng.choice(knobs)
        stages.setdefault(stage, {})[key] = rng.choice(values)
        rules = query.rules_of(live, build(Config, {"stages": stages}))
        got = query.near_drops(live, rules)
        fresh.near_memo.clear()
        assert got.equals(query.near_drops(fresh, rules)), (step, stages)
        dropped.add(tuple(got.column("doc_id").to_pylist()))
    assert len(parts) >= 12 and len(dropped) > 1, (len(parts), dropped)  # most moves answered in part; drops moved


def test_cluster_browser_queries(synthetic_run):
    _, run_dir = synthetic_run
    total = query.cluster_count(run_dir, 0.8)
    page = query.clusters(run_dir, 0.8, limit=1000)
    assert len(page) == total["clusters"] >= 20 and page["size"].sum() == total["documents"]
    assert page["size"].to_list() == sorted(page["size"].to_list(), reverse=True)
    assert (page["min_jaccard"] >= 0.8).all() and (page["mean_jaccard"] >= page["min_jaccard"]).all()
    first, second = query.clusters(run_dir, 0.8, limit=3), query.clusters(run_dir, 0.8, offset=3, limit=3)
    assert first.vstack(second).equals(page.head(6))
    by_j = query.clusters(run_dir, 0.8, sort="min_jaccard", descending=False, limit=1000)
    assert by_j["min_jaccard"].to_list() == sorted(by_j["min_jaccard"].to_list())
    members = query.cluster_members(run_dir, page["cluster_id"][0], 0.8)
    assert len(members) == page["size"][0] and members["doc_id"][0] == page["cluster_id"][0]
    assert page["representative"][0] == page["cluster_id"][0]  # lowest_id
    j = query.pair_jaccard(run_dir, members["doc_id"][0], members["doc_id"][1])
    assert 0.5 <= j.jaccard <= 1.0  # stored, or computed from the texts (pair_jaccard's .stored says which)
    with pytest.raises(ConfigError, match="0.50, 0.55"):
        query.clusters(run_dir, 0.81)
    with pytest.raises(ConfigError, match="sort='bytes'"):
        query.clusters(run_dir, sort="bytes")


# Peak Python/numpy allocation of the largest reduce task of each run given (tracemalloc), in a fresh
# interpreter: tracemalloc counts every thread's allocations, and this process may hold a Dask client
# (the session's LocalCluster) whose threads allocate meanwhile.
PEAK_REDUCE = """
import json, sys, tracemalloc
from pathlib import Path
from lab import dedup
from lab.config import load
from lab.io.run import RunLayout

peaks = []
for run_dir in sys.argv[1:]:
    cfg, layout = load(run_dir + "/config.yaml"), RunLayout(Path(run_dir))
    keys = sorted(p.name[5:-8] for p in layout.signals.glob("part-*.parquet"))
    buckets = json.loads(layout.dedup_done.read_text())["buckets"]
    for b in range(buckets):  # warm-up: first-use imports and caches are not the task's data
        dedup.reduce_bucket(run_dir, b, keys, cfg.stages.near_dedup)
    peak = 0
    for b in range(buckets):
        tracemalloc.start()
        dedup.reduce_bucket(run_dir, b, keys, cfg.stages.near_dedup)
        peak = max(peak, tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    peaks.append(peak)
print(json.dumps(peaks))
"""


def _peak_reduce_bytes(*cfgs: Config) -> list[int]:
    r = subprocess.run([sys.executable, "-c", PEAK_REDUCE, *(str(c.run_dir) for c in cfgs)], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_reduce_memory_does_not_grow_with_corpus_size(tmp_path):
    """One bucket per partition: a reduce task holds about one partition's band records and pairs,
    whatever the corpus size (4x the documents here)."""
    small = run_jsonl(tmp_path, "small", corpus(150, seed=2)[0], partition_bytes=196608, tokenizer=False)
    large = run_jsonl(tmp_path, "large", corpus(600, seed=2)[0], partition_bytes=196608, tokenizer=False)
    n_small = len(list(RunLayout(small.run_dir).signals.glob("*.parquet")))
    n_large = len(list(RunLayout(large.run_dir).signals.glob("*.parquet")))
    assert n_large >= 3 * n_small
    a, b = _peak_reduce_bytes(small, large)
    print(f"\npeak reduce-task allocation: {a / 1e6:.3f} MB at 150 documents, {b / 1e6:.3f} MB at 600")
    assert b < 1.5 * a


def test_normalize_translates_like_the_two_regex_passes_on_any_unicode():
    import random
    import unicodedata

    def reference(text: str) -> str:
        t = sg._MARKS.sub("", unicodedata.normalize("NFKD", text)).lower()
        return " ".join(sg._PUNCT.sub(" ", sg._DIGITS.sub("0", t)).split())

    rng = random.Random(0)
    texts = ["".join(chr(rng.randrange(0, 0x3000)) for _ in range(500)) for _ in range(200)]
    texts += ["".join(chr(rng.randrange(0, 0x110000)) for _ in range(300)) for _ in range(300)]
    texts += ["İstanbul ŞİŞLİ Ǆ ß ẞ ﬁ Ⅻ ① ¼ ٣ ๓ 𝟘 snake_case Crème brûlée"]
    assert all(sg.normalize(t) == reference(t) for t in texts)
