"""The cluster browser follows the selection: clusters, counts and pages, members' fates under a config,
pair Jaccard (stored or computed), and the whitespace-blind word diff of two members."""

from __future__ import annotations

import itertools
import json
import random
import re
import textwrap
import time

import polars as pl
import pytest

from lab import engine, query, sample

from lab import dedup
from lab.config import Config, EngineConfig, InputConfig, build, to_dict
from lab.errors import ConfigError
from lab.stages import STAGE_NAMES
from lab.dedup import signature as nd

MARK = "\n\nLorem ipsum dolor sit amet, this line marks the document for the c4 stage."  # c4.lorem_ipsum


def _edit(text: str, rng: random.Random, n: int, tag: str) -> str:
    """``text`` with ``n`` of its alphabetic words replaced by new ones (each kills 5 shingles)."""
    words = text.split(" ")
    spots = [i for i, w in enumerate(words) if w.isalpha()]
    for k, i in enumerate(rng.sample(spots, n)):
        words[i] = f"{tag}{k}word"
    return " ".join(words)


def cluster_corpus() -> tuple[list[str], dict[str, list[int]]]:
    """Documents with known near-duplicate families (indices into the list per family)."""
    rng = random.Random(7)
    texts: list[str] = []
    fam: dict[str, list[int]] = {}

    def add(name: str, text: str) -> None:
        fam.setdefault(name, []).append(len(texts))
        texts.append(text)

    a = sample.english_doc(rng, 8)
    a1 = _edit(a, rng, 2, "aa")
    # a: the base dropped by c4, three near copies, an exact copy of one (dropped by exact dedup)
    for t in (a + MARK, a1, _edit(a, rng, 2, "ab"), _edit(a, rng, 2, "ac"), a1):
        add("a", t)
    # b: a chain, each link ~0.87, the ends far apart (not candidate pairs); its middle dropped by c4,
    # so the survivors form two groups: the config keeps two members of this one cluster
    chain = [sample.english_doc(rng, 12)]
    for k in range(4):
        chain.append(_edit(chain[-1], rng, 8, f"b{k}"))
    for k, t in enumerate(chain):
        add("b", t + MARK if k == 2 else t)
    c = sample.english_doc(rng, 8)  # c: one member alive; d: none alive
    add("c", c)
    add("c", _edit(c, rng, 2, "c") + MARK)
    d = sample.english_doc(rng, 8)
    add("d", d + MARK)
    add("d", _edit(d, rng, 2, "d") + MARK)
    for _ in range(6):
        add("single", sample.english_doc(rng))
    return texts, fam


def _variant(cfg: Config, stage: str, **kw) -> Config:
    plain = to_dict(cfg)
    return build(Config, {**plain, "stages": {**plain["stages"], stage: {**plain["stages"][stage], **kw}}})


@pytest.fixture(scope="module")
def cluster_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("clusters")
    texts, fam = cluster_corpus()
    src = tmp / "docs.jsonl"
    src.write_text("".join(json.dumps({"id": f"doc-{i}", "text": t}) + "\n" for i, t in enumerate(texts)))
    cfg = Config(name="clusters", output_dir=str(tmp / "runs"), inputs=(InputConfig(path=str(src)),),
                 engine=EngineConfig(n_workers=1))
    engine.run(cfg, progress=False, client=engine.INPROCESS)
    rows = dict(query.open_run(cfg.run_dir).cursor().execute("SELECT record_id, doc_id FROM docs").fetchall())
    ids = [rows[f"doc-{i}"] for i in range(len(texts))]
    return cfg, texts, {k: [ids[i] for i in v] for k, v in fam.items()}


def configs(cfg: Config) -> dict[str, Config]:
    """The run's config and selections that move what the earlier stages and near dedup decide."""
    return {"run": cfg, "c4 off": _variant(cfg, "c4", enabled=False), "0.6": _variant(cfg, "near_dedup", threshold=0.6),
            "0.95": _variant(cfg, "near_dedup", threshold=0.95), "near off": _variant(cfg, "near_dedup", enabled=False),
            "longest": _variant(cfg, "near_dedup", keep="longest"), "exact off": _variant(cfg, "exact_dedup", enabled=False)}


def _stage(reason: str | None) -> str | None:
    return None if reason is None else reason.split(".")[0]


# --- the corpus is what the tests below assume ------------------------------------------------------


def test_corpus_families(cluster_run):
    cfg, _, fam = cluster_run
    reasons = dict(query.drop_reasons(cfg.run_dir, cfg).iter_rows())
    members = query.cluster_members(cfg.run_dir, min(fam["b"]), 0.8)
    assert sorted(members["doc_id"]) == sorted(fam["b"])  # the chain is one cluster at 0.8
    assert [reasons[d] for d in fam["d"]] == ["c4.lorem_ipsum"] * 2
    assert reasons[fam["a"][4]] in ("exact_dedup.duplicate", "near_dedup.near_duplicate")  # a copy of a1
    assert {reasons[fam["a"][1]], reasons[fam["a"][4]]} >= {"exact_dedup.duplicate"}


# --- clusters under a config: fates, survivors, sorting, pages ---------------------------------------


@pytest.mark.parametrize("name", ["run", "c4 off", "0.6", "0.95", "near off", "longest", "exact off"])
def test_fates_agree_with_drop_reasons(cluster_run, name):
    """Per cluster, kept / dropped earlier / by near_dedup as drop_reasons says, at the config's threshold
    and when browsing at another one."""
    cfg, _, _ = cluster_run
    sel = configs(cfg)[name]
    own = sel.stages.near_dedup.threshold
    reasons = dict(query.drop_reasons(cfg.run_dir, sel).iter_rows())
    rows = []
    for t in (own, 0.6 if own == 0.8 else 0.8):
        table = query.clusters(cfg.run_dir, t, config=sel, limit=1000)
        assert table.height == query.cluster_count(cfg.run_dir, t)["clusters"] > 0
        rows += [(t, row) for row in table.iter_rows(named=True)]
    for t, row in rows:
        m = query.cluster_members(cfg.run_dir, row["cluster_id"], t, config=sel)
        assert m.height == row["size"]
        stages = [_stage(reasons[d]) for d in m["doc_id"]]
        assert m["status"].to_list() == [query.member_status(s) for s in stages]
        assert m["reason"].to_list() == [reasons[d] for d in m["doc_id"]]
        kept = [d for d, s in zip(m["doc_id"], stages) if s is None]
        early = [s for s in stages if s is not None and STAGE_NAMES.index(s) < STAGE_NAMES.index("near_dedup")]
        assert row["kept"] == len(kept) and row["kept_doc_id"] == (min(kept) if kept else None)
        assert row["dropped_earlier"] == len(early) and row["alive"] == row["size"] - len(early)
        assert row["near_dropped"] == stages.count("near_dedup") and row["dropped_later"] == 0
        assert row["kept"] + row["dropped_earlier"] + row["near_dropped"] + row["dropped_later"] == row["size"]


def test_fates_of_the_designed_clusters(cluster_run):
    cfg, _, fam = cluster_run
    reasons = dict(query.drop_reasons(cfg.run_dir, cfg).iter_rows())
    rows = {r["cluster_id"]: r for r in query.clusters(cfg.run_dir, 0.8, config=cfg, limit=1000).iter_rows(named=True)}
    a, b, c, d = (rows[min(fam[k])] for k in "abcd")
    assert (a["size"], a["nodes"], a["dropped_earlier"], a["alive"], a["kept"]) == (5, 4, 2, 3, 1)
    assert reasons[a["kept_doc_id"]] is None and a["kept_doc_id"] in fam["a"]
    # the chain's middle is dropped by c4: its survivors are two groups, each keeps one member
    assert (b["size"], b["dropped_earlier"], b["alive"], b["kept"], b["near_dropped"]) == (5, 1, 4, 2, 2)
    assert (c["alive"], c["kept"]) == (1, 1) and c["kept_doc_id"] == fam["c"][0]
    assert (d["alive"], d["kept"], d["kept_doc_id"]) == (0, 0, None)
    m = query.cluster_members(cfg.run_dir, b["cluster_id"], 0.8)  # no config: the run's own
    assert dict(zip(m["doc_id"], m["status"]))[fam["b"][2]] == "dropped earlier by c4"
    assert sorted(m["status"].to_list()) == sorted(["kept"] * 2 + ["dropped by near_dedup"] * 2 + ["dropped earlier by c4"])
    # with c4 off every member is alive: one group per cluster, one member kept
    off = configs(cfg)["c4 off"]
    rows = {r["cluster_id"]: r for r in query.clusters(cfg.run_dir, 0.8, config=off, limit=1000).iter_rows(named=True)}
    assert [(rows[min(fam[k])]["alive"], rows[min(fam[k])]["kept"]) for k in "bcd"] == [(5, 1), (2, 1), (2, 1)]


def test_survivors_only_and_counts(cluster_run):
    cfg, _, fam = cluster_run
    every = query.clusters(cfg.run_dir, 0.8, config=cfg, limit=1000)
    alive = query.clusters(cfg.run_dir, 0.8, config=cfg, limit=1000, survivors_only=True)
    assert set(alive["cluster_id"]) == set(every.filter(pl.col("alive") >= 2)["cluster_id"])
    assert min(fam["c"]) not in alive["cluster_id"] and min(fam["d"]) not in alive["cluster_id"]
    assert min(fam["a"]) in alive["cluster_id"] and min(fam["b"]) in alive["cluster_id"]
    for only, table in ((False, every), (True, alive)):
        n = query.cluster_count(cfg.run_dir, 0.8, config=cfg, survivors_only=only, page_size=2)
        assert n == {"clusters": table.height, "documents": table["size"].sum(), "pages": -(-table.height // 2),
                     "alive": table["alive"].sum(), "kept": table["kept"].sum()}
    # without a config: the same clusters, no fate columns; survivors_only needs one
    plain = query.clusters(cfg.run_dir, 0.8, limit=1000)
    assert plain.columns == ["cluster_id", "size", "nodes", "min_jaccard", "mean_jaccard", "sources", "languages",
                             "representative"]
    assert plain.equals(every.select(plain.columns))
    assert set(query.cluster_count(cfg.run_dir, 0.8)) == {"clusters", "documents", "pages"}
    with pytest.raises(ConfigError, match="survivors_only=True needs a config"):
        query.clusters(cfg.run_dir, 0.8, survivors_only=True)
    with pytest.raises(ConfigError, match="sort='alive' needs a config"):
        query.clusters(cfg.run_dir, 0.8, sort="alive")
    with pytest.raises(ConfigError, match="page_size=0"):
        query.cluster_count(cfg.run_dir, 0.8, page_size=0)


@pytest.mark.parametrize("sort", query.CLUSTER_SORTS)
@pytest.mark.parametrize("descending", [True, False])
def test_every_sort_both_ways_and_pages(cluster_run, synthetic_run_dir, sort, descending):
    for run_dir, cfg in ((cluster_run[0].run_dir, cluster_run[0]), (synthetic_run_dir, None)):
        cfg = cfg or query.open_run(run_dir).config
        full = query.clusters(run_dir, 0.8, config=cfg, sort=sort, descending=descending, limit=1000)
        keys = list(zip(full[sort].to_list(), full["cluster_id"].to_list()))
        # sorted by the key in the asked direction, ties by cluster_id ascending
        assert keys == sorted(keys, key=lambda k: (-k[0] if descending else k[0], k[1]))
        n = query.cluster_count(run_dir, 0.8, config=cfg, page_size=3)
        pages = [query.clusters(run_dir, 0.8, config=cfg, sort=sort, descending=descending, offset=3 * p, limit=3)
                 for p in range(n["pages"])]
        assert pl.concat(pages).equals(full) and all(p.height == 3 for p in pages[:-1]) and 1 <= pages[-1].height <= 3
        past = query.page_bounds(n["pages"] + 5, n["pages"])
        assert past == n["pages"] - 1 and query.page_bounds(-3, n["pages"]) == 0


def test_page_helpers():
    assert [query.page_bounds(p, 4) for p in (-1, 0, 3, 4, 99)] == [0, 0, 3, 3, 3]
    assert query.page_bounds(2, 1) == 0 and query.page_bounds(2, 0) == 0
    assert [query.page_count(n, 20) for n in (0, 1, 20, 21, 40)] == [1, 1, 1, 2, 2]
    with pytest.raises(ConfigError, match="page_size=0"):
        query.page_count(5, 0)
    assert query.member_status("exact_dedup") == "dropped earlier by exact_dedup"
    assert query.member_status("pii") == "dropped later by pii"
    with pytest.raises(ConfigError, match="unknown stage 'nope'"):
        query.member_status("nope")


def test_representative_follows_keep(cluster_run):
    cfg, _, fam = cluster_run
    longest = configs(cfg)["longest"]
    off = _variant(longest, "c4", enabled=False)  # every member alive: the representative is the one kept
    rows = {r["cluster_id"]: r for r in query.clusters(cfg.run_dir, 0.8, config=off, limit=1000).iter_rows(named=True)}
    sizes = dict(query.signal_rows(cfg.run_dir, ["doc_id", "bytes"]).iter_rows())
    for k in "acd":
        r = rows[min(fam[k])]
        biggest = max(sizes[x] for x in fam[k])
        assert sizes[r["representative"]] == biggest == sizes[r["kept_doc_id"]]
    assert query.clusters(cfg.run_dir, 0.8, keep="lowest_id", limit=1000)["representative"].to_list() == \
        query.clusters(cfg.run_dir, 0.8, keep="lowest_id", limit=1000)["cluster_id"].to_list()
    with pytest.raises(ConfigError, match="keep='biggest'"):
        query.clusters(cfg.run_dir, 0.8, keep="biggest")


def test_a_refreshed_run_is_not_answered_from_memory(cluster_run):
    cfg, _, _ = cluster_run
    first = query.clusters(cfg.run_dir, 0.8, config=cfg, limit=1000)
    again = query.clusters(query.open_run(cfg.run_dir, refresh=True), 0.8, config=cfg, limit=1000)
    assert again.equals(first)
    mem = query.open_run(cfg.run_dir, in_memory=True)  # the dashboard's way: the same answers
    assert query.clusters(mem, 0.8, config=cfg, limit=1000).equals(first)
    b = first.filter(pl.col("kept") == 2)["cluster_id"][0]
    assert query.cluster_members(mem, b, 0.8, config=cfg).drop("text").equals(
        query.cluster_members(cfg.run_dir, b, 0.8, config=cfg).drop("text"))


def test_members_of_no_cluster_and_bad_threshold(cluster_run):
    cfg, _, fam = cluster_run
    assert query.cluster_members(cfg.run_dir, min(fam["single"]), 0.8).height == 0
    with pytest.raises(ConfigError, match="threshold=0.81"):
        query.cluster_members(cfg.run_dir, 1, 0.81)


# --- the pair's Jaccard ------------------------------------------------------------------------------


def _shingle_jaccard(a: str, b: str) -> float:
    """The Jaccard of the two texts' word 5-gram sets, by Python sets (independent of numpy hashing)."""
    sa, sb = (set(nd.shingles(nd.normalize(t), 5)) for t in (a, b))
    return len(sa & sb) / len(sa | sb)


def test_pair_jaccard_stored_or_computed(cluster_run):
    cfg, _, fam = cluster_run
    docs = dict(query.open_run(cfg.run_dir).cursor().execute("SELECT doc_id, text FROM docs").fetchall())
    edges = query.edges(cfg.run_dir)
    stored = {frozenset(p): j for *p, j in edges.select("u_doc", "v_doc", "jaccard").iter_rows()}
    chain = fam["b"]
    seen = {True: 0, False: 0}
    for i, x in enumerate(chain):
        for y in chain[i + 1:]:
            pj = query.pair_jaccard(cfg.run_dir, x, y)
            assert isinstance(pj, query.PairJaccard)
            expect = _shingle_jaccard(docs[x], docs[y])
            assert pj.jaccard == pytest.approx(expect, abs=1e-12)  # exact Jaccard is stored: the same number
            assert pj.stored == (frozenset((x, y)) in stored)
            if pj.stored:
                assert pj.jaccard == stored[frozenset((x, y))]
            seen[pj.stored] += 1
    assert seen[True] >= 4 and seen[False] >= 1  # the links are stored; some ends are no candidate pair
    # exact copies: one node, Jaccard 1 without reading the texts
    assert query.pair_jaccard(cfg.run_dir, fam["a"][1], fam["a"][4]) == (1.0, True)
    # two unrelated documents: computed (low)
    pj = query.pair_jaccard(cfg.run_dir, fam["single"][0], fam["single"][1])
    assert not pj.stored and pj.jaccard == pytest.approx(_shingle_jaccard(docs[fam["single"][0]], docs[fam["single"][1]]))
    with pytest.raises(ConfigError, match="doc_id 12345 is not in this run"):
        query.pair_jaccard(cfg.run_dir, fam["a"][0], 12345)


def test_text_jaccard_by_hand():
    # shingles {a b c d e, b c d e f} and {a b c d e, b c d e g}: 1 shared of 3
    assert dedup.text_jaccard("a b c d e f", "A b,  c d e\ng!") == pytest.approx(1 / 3)
    assert dedup.text_jaccard("one two", "one two") == 1.0  # fewer words than 5: one shingle
    assert dedup.text_jaccard("", "a b c") is None and dedup.text_jaccard("...", "a") is None


# --- the word diff that ignores whitespace ------------------------------------------------------------


def _pane(ops, side: str) -> str:
    return "".join(t for op, t in ops if op != ("+" if side == "a" else "-"))


def test_diff_whitespace_only_is_all_equal():
    a = "The cat sat on the mat.\nIt was   warm.\n\nThe end."
    b = "The cat sat\non the mat. It was warm.\n\n\n  The   end.  "
    assert dedup.diff(a, b) == [("=", "The cat sat on the mat. It was warm.\n\nThe end.")]
    wrapped = textwrap.fill(" ".join(a.split()), 12)  # re-wrapped at 12 columns
    assert wrapped == "The cat sat\non the mat.\nIt was warm.\nThe end."
    # only the no-change op; a break shows where both texts break (after "mat." and "warm.")
    assert dedup.diff(a, wrapped) == [("=", "The cat sat on the mat.\nIt was warm.\nThe end.")]
    assert dedup.diff("a\tb\r\nc", "a b c") == [("=", "a b c")]
    assert dedup.diff("", "") == [] and dedup.diff(" \n ", "") == []


def test_diff_one_word_replaced_is_exactly_that_word():
    a = "The quick brown fox\njumps over the lazy dog."
    b = "The quick red fox jumps over\nthe lazy dog."
    assert dedup.diff(a, b) == [("=", "The quick "), ("-", "brown"), ("+", "red"), ("=", " fox jumps over the lazy dog.")]
    assert dedup.diff("the cat sat", "the dog sat") == [("=", "the "), ("-", "cat"), ("+", "dog"), ("=", " sat")]
    # inserted and deleted words at the start, middle and end: only they are marked
    assert dedup.diff("b c d", "a b c d") == [("+", "a "), ("=", "b c d")]
    assert dedup.diff("a b c d", "a b d") == [("=", "a b "), ("-", "c "), ("=", "d")]
    assert dedup.diff("a b c", "a b c d e") == [("=", "a b c"), ("+", " d e")]
    assert dedup.diff("x", "y") == [("-", "x"), ("+", "y")]
    # case and punctuation are words' own: they count
    assert dedup.diff("Hello, world", "hello, world") == [("-", "Hello,"), ("+", "hello,"), ("=", " world")]


def test_diff_shows_breaks_both_texts_have():
    a = "one two\nthree four\n\nfive six"
    b = "one two three four\n\nfive six"
    assert dedup.diff(a, b) == [("=", "one two three four\n\nfive six")]  # the line break only in a: a space
    a2 = "alpha beta\n\ngamma delta"
    b2 = "alpha BETA\n\ngamma delta"
    assert dedup.diff(a2, b2) == [("=", "alpha "), ("-", "beta"), ("+", "BETA"), ("=", "\n\ngamma delta")]


def test_diff_random_edits_rebuild_both_texts_words():
    rng = random.Random(11)
    vocab = ["the", "a", "of", "cat", "dog", "mat", "sat", "ran", "on", "in", "to", "and", "big", "small", "red"]
    seps = [" ", " ", " ", "  ", "\n", "\n\n", "\t", " \n "]
    gap = {" ": 0, "\n": 1, "\n\n": 2}
    for _ in range(300):
        words = [rng.choice(vocab) for _ in range(rng.randint(0, 40))]
        other = list(words)
        for _ in range(rng.randint(0, 6)):
            k = rng.randint(0, len(other))
            op = rng.choice("ird")
            if op == "i":
                other.insert(k, rng.choice(vocab + ["NEW"]))
            elif other and k < len(other):
                if op == "r":
                    other[k] = "NEW"
                else:
                    del other[k]
        a = "".join(w + rng.choice(seps) for w in words)
        b = rng.choice(seps) + "".join(w + rng.choice(seps) for w in other)
        ops = dedup.diff(a, b)
        assert all(op in "=-+" and t for op, t in ops)
        assert all(x[0] != y[0] for x, y in itertools.pairwise(ops))  # runs are merged
        for side, text in (("a", a), ("b", b)):
            pane = _pane(ops, side)
            assert pane.split() == text.split()
            assert pane == "" or re.fullmatch(r"\S+(?:(?: |\n|\n\n)\S+)*", pane)  # normalized, no edges
            # every break shown is one the text itself has there
            own = [min(len((g + "x").splitlines()) - 1, 2) for g in re.findall(r"(?<=\S)\s+(?=\S)", text)]
            shown = [gap[g] for g in re.findall(r"(?<=\S)\s+(?=\S)", pane)]
            assert all(s <= o for s, o in zip(shown, own))
        if a.split() == b.split():
            assert [op for op, _ in ops] in ([], ["="])
        changed = sum(len(t.split()) for op, t in ops if op != "=")
        assert changed <= 2 * 6 + abs(len(words) - len(other))  # at most the edits made (each one word per side)


def test_diff_is_fast_on_50kb_texts():
    rng = random.Random(2)
    a = sample.english_doc(rng, 120)
    while len(a) < 50_000:
        a += "\n\n" + sample.english_doc(rng, 10)
    b = _edit(a, rng, len(a) // 500, "z")  # ~100 scattered replacements
    spam = ("buy cheap pills now best price online " * 1300).split(" ")
    spam2 = [("spam" if i % 100 == 0 else w) for i, w in enumerate(spam)]
    cases = {"near copy": (a, b), "re-wrapped": (a, "\n".join(a.split())), "unrelated": (a, sample.english_doc(rng, 150)),
             "repetitive": (" ".join(spam), " ".join(spam2))}
    for name, (x, y) in cases.items():
        start = time.perf_counter()
        ops = dedup.diff(x, y)
        took = time.perf_counter() - start
        assert took < 2.0, f"{name}: {took:.2f} s"  # ~50 ms measured on 2 cores; quadratic difflib took 15 s
        assert _pane(ops, "a").split() == x.split() and _pane(ops, "b").split() == y.split()
    ops = dedup.diff(a, b)
    assert sum(len(t.split()) for op, t in ops if op == "-") == len(a) // 500  # exactly the replaced words
    rewrapped = dedup.diff(*cases["re-wrapped"])  # a word a line: a's paragraph breaks show as line breaks
    assert [op for op, _ in rewrapped] == ["="] and rewrapped[0][1] == re.sub(r"\n\n", "\n", rewrapped[0][1])
    assert rewrapped[0][1].split() == a.split() and rewrapped[0][1].count("\n") == a.count("\n\n")
    spam_ops = dedup.diff(*cases["repetitive"])
    assert sum(len(t.split()) for op, t in spam_ops if op == "+") == sum(w == "spam" for w in spam2)
