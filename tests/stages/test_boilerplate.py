"""Boilerplate lines: per-site line counts merged through the shuffle, the bp_line_frac signal, the rule, removal.

The corpus: three sites whose pages share navigation and footer rows (one with a page counter that
differs only in digits), each page with its own main text, a site line seen in only two pages (below
min_docs=3) and two pages without a URL (their site is their source file).
"""

from __future__ import annotations

import dataclasses
import json
import random
from collections import defaultdict
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lab import engine, linecount, query, sample
from lab.config import Config, EngineConfig, IngestConfig, InputConfig, StagesConfig, TokenizerConfig
from lab.errors import ConfigError
from lab.io.run import RunLayout
from lab.stages import boilerplate as bp

NAV = {
    "https://www.alpha.example.com": ["Prev | Up | Home | Next", "Alpha Gardening Notes", "Contents: Soil, Seeds, Tools"],
    "https://beta.example.org": ["Home  >  Articles  >  Reading", "© Beta Reading Club, all rights reserved."],
    "http://news.gamma.net": ["GAMMA NEWS — menu", "Page {n} of 12", "Share this story"],
}


def corpus(seed: int = 7) -> list[dict]:
    """Records (id, url, text): pages of three sites with their shared rows, plus two pages without a URL."""
    rng = random.Random(seed)
    out = []
    for s, (base, nav) in enumerate(NAV.items()):
        for p in range(5):
            top = [line.format(n=p + 1) for line in nav]
            main = sample.english_doc(rng, 3).split("\n\n")
            extra = ["Only on two alpha pages"] if s == 0 and p < 2 else []
            text = "\n".join([*top[:2], *main, *extra, *top[2:]]) + "\n"
            out.append({"id": f"s{s}-p{p}", "url": f"{base}/page/{p}", "text": text})
    for p in range(2):
        out.append({"id": f"nourl-{p}", "url": "", "text": "Untitled\n" + sample.english_doc(rng, 2) + "\n"})
    return out


def run(tmp: Path, name: str, records: list[dict], *, partition_bytes: int = 1 << 26, buckets: int = 0,
        tokenizer: bool = False, **bp_kw) -> Config:
    src = tmp / "inputs" / "pages.jsonl"
    src.parent.mkdir(parents=True, exist_ok=True)
    data = "".join(json.dumps(r) + "\n" for r in records)
    if not src.exists() or src.read_text() != data:
        src.write_text(data)
    st = StagesConfig()
    st = dataclasses.replace(st, boilerplate=bp.Config(**bp_kw),
                             near_dedup=dataclasses.replace(st.near_dedup, shuffle_buckets=buckets))
    cfg = Config(name=name, output_dir=str(tmp / "runs"), inputs=(InputConfig(path=str(src)),),
                 ingest=IngestConfig(partition_bytes=partition_bytes), stages=st, engine=EngineConfig(n_workers=1),
                 tokenizer=TokenizerConfig(enabled=tokenizer))
    engine.run(cfg, progress=False, client=engine.INPROCESS)
    return cfg


def brute_counts(records: list[dict], source: str) -> dict[tuple[str, int], int]:
    """(site, line_hash) -> distinct documents, one document at a time."""
    docs: dict[tuple[str, int], set[str]] = defaultdict(set)
    for r in records:
        site = bp.site_of(r["url"], source)
        for line in r["text"].splitlines():
            n = bp.normalize_line(line)
            if n:
                docs[(site, bp.line_hash(n))].add(r["id"])
    return {k: len(v) for k, v in docs.items()}


def brute_frac(record: dict, counts: dict, source: str, k: int) -> float:
    site = bp.site_of(record["url"], source)
    total = boiler = 0
    for line in record["text"].splitlines():
        n = bp.normalize_line(line)
        if n:
            total += len(line.strip())
            boiler += len(line.strip()) if counts[(site, bp.line_hash(n))] >= k else 0
    return boiler / total if total else 0.0


def source_of(cfg: Config) -> str:
    return query.open_run(cfg.run_dir, refresh=True).cursor().execute("SELECT any_value(source) FROM docs").fetchone()[0]


def signal_by_record(cfg: Config) -> dict[str, float]:
    r = query.open_run(cfg.run_dir, refresh=True)
    rows = r.cursor().execute("SELECT d.record_id, s.bp_line_frac FROM signals s JOIN docs d USING (doc_id)").fetchall()
    return dict(rows)


# --- one document ------------------------------------------------------------------------------------


def test_normalization_and_line_records():
    assert bp.normalize_line("  Page 3 of 12\t ") == bp.normalize_line("page 4  of 12") == "page 0 of 00"
    assert bp.normalize_line("Ｈｏｍｅ") == "home"  # NFKC: full-width letters
    assert bp.normalize_line(" \t ") == ""
    recs = bp.lines("Home\n\n  Body text here. \nhome\n")
    assert [c for _, c in recs] == [4, 15, 4] and recs[0][0] == recs[2][0]
    assert bp.signals("Home\n\nBody") == {"bp_lines": 2}
    assert bp.line_frac(recs, 23, {recs[0][0]}) == pytest.approx(8 / 23)
    assert bp.site_of("http://WWW.Example.com:80/x", "f.jsonl") == "example.com"
    assert bp.site_of("", "f.jsonl") == "f.jsonl"


def test_rules_and_config():
    assert bp.rules(bp.Config()) == []  # 1.0: nothing to drop
    (rule,) = bp.rules(bp.Config(max_line_frac=0.4))
    assert (rule.signal, rule.op, rule.value, rule.drop_reason) == ("bp_line_frac", "<=", 0.4,
                                                                    "boilerplate.boilerplate_lines")
    assert rule.passes({"bp_line_frac": 0.4}) and not rule.passes({"bp_line_frac": 0.41})
    from lab.select import knobs
    from lab.config import PercentileRule

    k = {x.name: x for x in knobs.knobs(Config())}["boilerplate.max_line_frac"]
    assert k.signal == "bp_line_frac" and k.value == 1.0  # a slider over the corpus-level signal
    with pytest.raises(ConfigError, match="corpus-level"):  # merged quantiles are annotate-time statistics
        PercentileRule(stage="boilerplate", signal="bp_line_frac", drop_highest=5)
    with pytest.raises(ConfigError, match="min_docs=1"):
        bp.Config(min_docs=1)
    with pytest.raises(ConfigError, match="max_line_frac"):
        bp.Config(max_line_frac=1.5)


def test_count_table_and_merge_by_hand():
    recs = pa.table({"doc_id": [1, 1, 2, 3, 3], "site": ["a", "a", "a", "b", "b"], "line_hash": [7, 7, 7, 7, 8],
                     "chars": [4, 4, 4, 4, 2]}, schema=bp.LINE_SCHEMA)
    assert bp.count_table(recs).to_pylist() == [{"site": "a", "line_hash": 7, "docs": 2},
                                                {"site": "b", "line_hash": 7, "docs": 1},
                                                {"site": "b", "line_hash": 8, "docs": 1}]
    halves = [bp.count_table(recs.slice(0, 2)), bp.count_table(recs.slice(2))]
    assert linecount.merge_counts(halves).equals(bp.count_table(recs))
    ids, frac = linecount.doc_fractions(recs, pa.table({"site": ["a"], "line_hash": pa.array([7], pa.int64())}))
    assert ids.tolist() == [1, 2, 3] and frac.tolist() == [1.0, 1.0, 0.0]


def test_remove_boilerplate_keeps_other_lines_verbatim():
    nav = bp.line_hash(bp.normalize_line("Prev | Next"))
    text = "Prev | Next\nMain text, kept as is.\n\n  prev |  NEXT\r\nLast line"
    assert bp.remove_boilerplate(text, {nav}) == "Main text, kept as is.\n\nLast line"
    assert bp.remove_boilerplate(text, set()) == text


# --- a run -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pages_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("boilerplate")
    records = corpus()
    cfg = run(tmp, "pages", records, partition_bytes=4096, buckets=3)
    return tmp, records, cfg


def test_count_table_equals_brute_force(pages_run):
    tmp, records, cfg = pages_run
    layout = RunLayout(cfg.run_dir)
    assert len(list(layout.boilerplate.glob("counts/part-*.parquet"))) > 2  # several partitions merged
    merged = linecount.merged_table(layout)
    got = {(s, h): d for s, h, d in zip(*(merged.column(c).to_pylist() for c in ("site", "line_hash", "docs")))}
    assert got == brute_counts(records, source_of(cfg))
    assert got[("alpha.example.com", bp.line_hash("prev | up | home | next"))] == 5
    assert got[("news.gamma.net", bp.line_hash("page 0 of 00"))] == 5  # digits normalized: one line
    assert got[("alpha.example.com", bp.line_hash("only on two alpha pages"))] == 2
    assert got[(source_of(cfg), bp.line_hash("untitled"))] == 2  # no URL: the source is the site
    # each (site, line) is in one bucket only
    keys = [tuple(r.values())[:2] for r in merged.to_pylist()]
    assert len(keys) == len(set(keys))


def test_in_memory_count_and_strip_equal_the_engines(pages_run):
    """``count_texts`` / ``strip_counted`` (a benchmark's texts, no run) give the engine's table and removal."""
    tmp, records, cfg = pages_run
    layout = RunLayout(cfg.run_dir)
    texts = [r["text"] for r in records]
    sites = [bp.site_of(r["url"], source_of(cfg)) for r in records]
    counts = linecount.count_texts(texts, sites)
    assert counts.equals(linecount.merged_table(layout))
    boiler = linecount.boiler_hashes(layout, 3)
    want = linecount.strip_texts(range(len(texts)), texts, dict(enumerate(sites)), boiler)
    assert linecount.strip_counted(texts, sites, counts, 3) == want
    assert want[0] != texts[0] and "Prev | Up" not in want[0]


def test_signal_matches_brute_force_and_is_in_the_funnel(pages_run):
    tmp, records, cfg = pages_run
    counts = brute_counts(records, source_of(cfg))
    got = signal_by_record(cfg)
    for r in records:
        assert got[r["id"]] == pytest.approx(brute_frac(r, counts, source_of(cfg), 3)), r["id"]
    assert got["nourl-0"] == 0.0  # "Untitled" is in 2 documents < min_docs
    assert 0.0 < got["s0-p0"] < 0.5 and got["s0-p0"] == pytest.approx(
        (len("Prev | Up | Home | Next") + len("Alpha Gardening Notes") + len("Contents: Soil, Seeds, Tools"))
        / sum(len(line.strip()) for line in records[0]["text"].splitlines()))
    # a threshold moves without recomputing: the funnel's boilerplate stage drops what the brute force says
    strict = dataclasses.replace(cfg, stages=dataclasses.replace(cfg.stages, boilerplate=bp.Config(max_line_frac=0.05)))
    reasons = query.drop_reasons(query.open_run(cfg.run_dir, refresh=True), strict)
    dropped = set(reasons.filter(reasons["reason"] == "boilerplate.boilerplate_lines")["doc_id"].to_list())
    ids = dict(query.open_run(cfg.run_dir).cursor().execute("SELECT record_id, doc_id FROM docs").fetchall())
    earlier = set(reasons.filter(reasons["reason"].is_not_null() & (reasons["reason"] != "boilerplate.boilerplate_lines")
                                 )["doc_id"].to_list())
    want = {ids[r["id"]] for r in records if brute_frac(r, counts, source_of(cfg), 3) > 0.05} - earlier
    assert dropped == want and dropped
    funnel = {row["stage"]: row for row in query.funnel(cfg.run_dir, strict, refresh=True, raw=True).to_dicts()}
    assert funnel["boilerplate"]["docs_dropped"] == len(dropped)
    mem = query.open_run(cfg.run_dir, in_memory=True, refresh=True)  # the dashboard's table holds the join too
    assert dict(mem.cursor().execute("SELECT d.record_id, s.bp_line_frac FROM signals s JOIN docs d USING (doc_id)"
                                     ).fetchall()) == got
    assert query.drop_reasons(mem, strict).equals(reasons)


def test_batch_mode_refuses_a_corpus_level_rule(tmp_path):
    src = tmp_path / "x.jsonl"
    src.write_text(json.dumps({"text": "hello"}) + "\n")
    st = dataclasses.replace(StagesConfig(), boilerplate=bp.Config(max_line_frac=0.5))
    cfg = Config(name="b", output_dir=str(tmp_path / "runs"), inputs=(InputConfig(path=str(src)),), stages=st,
                 mode="batch", tokenizer=TokenizerConfig(enabled=False))
    with pytest.raises(ConfigError, match="explore mode"):
        engine.run(cfg, progress=False, client=engine.INPROCESS)


def test_deterministic_across_partitioning_and_reruns(pages_run):
    tmp, records, cfg = pages_run
    layout = RunLayout(cfg.run_dir)
    other = run(tmp, "pages-one-part", records, buckets=2)  # one partition, two buckets
    one = RunLayout(other.run_dir)
    assert linecount.merged_table(one).equals(linecount.merged_table(layout))
    assert signal_by_record(other) == signal_by_record(cfg)
    before = {f.relative_to(layout.root): f.read_bytes() for f in sorted(layout.boilerplate.rglob("*.parquet"))}
    again = run(tmp, "pages", records, partition_bytes=4096, buckets=3)  # a rerun: reused, same bytes
    assert json.loads(RunLayout(again.run_dir).manifest.read_text())["last_run"]["steps"]["boilerplate"] == "reused"
    RunLayout(again.run_dir).boilerplate_done.unlink()  # force the merge again
    run(tmp, "pages", records, partition_bytes=4096, buckets=3)
    after = {f.relative_to(layout.root): f.read_bytes() for f in sorted(layout.boilerplate.rglob("*.parquet"))}
    assert after == before


def test_min_docs_recomputes_the_signal_only(pages_run):
    tmp, records, _ = pages_run
    cfg = run(tmp, "pages-k2", records, partition_bytes=4096, buckets=3, min_docs=2)
    got = signal_by_record(cfg)
    assert got["nourl-0"] > 0.0  # "Untitled" is in 2 documents: boilerplate at k=2
    counts = brute_counts(records, source_of(cfg))
    assert got["s0-p0"] == pytest.approx(brute_frac(records[0], counts, source_of(cfg), 2))


def test_remove_lines_at_tokenize_keeps_main_text(tmp_path):
    from lab.tokens import tokenize

    records = corpus(seed=11)
    cfg = run(tmp_path, "strip", records, partition_bytes=4096, buckets=2, tokenizer=True, remove_lines=True)
    layout = RunLayout(cfg.run_dir)
    counts = brute_counts(records, source_of(cfg))
    fit = json.loads(layout.tokenizer_fit.read_text())
    tok = tokenize.load(layout, fit["sha256"])
    ids = dict(query.open_run(cfg.run_dir, refresh=True).cursor().execute("SELECT doc_id, record_id FROM docs").fetchall())
    tokens = {}
    for f in sorted(layout.tokenized_dir.glob("part-*.parquet")):
        t = pq.read_table(f, columns=["doc_id", "ids"])
        for d, seq in zip(t.column("doc_id").to_pylist(), t.column("ids").to_pylist()):
            tokens[ids[d]] = tok.decode(seq, skip_special_tokens=False)
    by_id = {r["id"]: r for r in records}
    for rid, text in tokens.items():
        r = by_id[rid]
        site = bp.site_of(r["url"], source_of(cfg))
        want = "".join(line for line in r["text"].splitlines(keepends=True)
                       if not bp.normalize_line(line) or counts[(site, bp.line_hash(bp.normalize_line(line)))] < 3)
        assert text == want, rid
    assert "Prev | Up | Home | Next" not in tokens["s0-p0"] and "Only on two alpha pages" in tokens["s0-p0"]
    assert "Untitled" in tokens["nourl-0"]
    m = json.loads(layout.manifest.read_text())
    assert m["boilerplate"]["remove_lines"] is True and m["boilerplate"]["removed"]["documents"] == 15
    assert m["config"]["stages"]["boilerplate"]["remove_lines"] is True
    assert (layout.root / "config.yaml").read_text().count("remove_lines: true") == 1
    # turning it off recounts the tokens from the stored text
    plain = run(tmp_path, "strip", records, partition_bytes=4096, buckets=2, tokenizer=True)
    n_plain = query.open_run(plain.run_dir, refresh=True).cursor().execute("SELECT sum(n_tokens) FROM signals").fetchone()[0]
    assert n_plain > sum(len(tok.encode(t, add_special_tokens=False).ids) for t in tokens.values())
    assert np.isfinite(n_plain)


def test_a_repeated_line_holding_an_address_is_counted_and_removed_as_stored(tmp_path):
    """A site's footer with an e-mail address is stored scrubbed (the PII stage); its lines are counted as
    stored, so the footer is one repeated line, removed at tokenize like any other (it was counted
    unscrubbed and looked up scrubbed: never removed)."""
    from lab.tokens import tokenize

    rng = random.Random(3)
    footer = "Questions? Write to webmaster@delta.example.com"
    records = [{"id": f"d{p}", "url": f"https://delta.example.com/{p}",
                "text": "Delta Notes\n" + sample.english_doc(rng, 3) + f"\n{footer}\n"} for p in range(5)]
    cfg = run(tmp_path, "pii-footer", records, tokenizer=True, remove_lines=True)
    layout = RunLayout(cfg.run_dir)
    r = query.open_run(cfg.run_dir, refresh=True)
    stored = [t for (t,) in r.cursor().execute("SELECT text FROM docs").fetchall()]
    assert all("webmaster@" not in t and "Questions? Write to" in t for t in stored)  # scrubbed, still there
    fit = json.loads(layout.tokenizer_fit.read_text())
    tok = tokenize.load(layout, fit["sha256"])
    texts = [tok.decode(seq, skip_special_tokens=False) for f in sorted(layout.tokenized_dir.glob("part-*.parquet"))
             for seq in pq.read_table(f, columns=["ids"]).column("ids").to_pylist()]
    assert len(texts) == 5 and all("Questions? Write to" not in t and "Delta Notes" not in t for t in texts)
    assert all(t.strip() for t in texts)  # the main text stays
    fracs = [f for (f,) in r.cursor().execute("SELECT bp_line_frac FROM signals").fetchall()]
    assert all(0 < f < 0.5 for f in fracs)  # the title and the footer, scrubbed, are the site's lines
