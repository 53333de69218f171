"""The driver-side steps at scale: wall, CPU and peak RSS of each over a generated run of ``--docs`` documents.

The selection queries (the funnel of the run's config, the funnel after one slider move, the
histograms behind the sliders), the exact- and near-duplicate keep decisions, the cluster listing at
one grid threshold and mixture planning run in the driver, one process. This benchmark GENERATES a
run directory with the real schemas (no annotate): ``signals/part-KEY.parquet`` (``signals_schema()``,
partitions of ``--part-docs`` rows), ``boilerplate/signal/`` and ``tokenized/`` (joined onto the
signals view, as in a run with boilerplate and a tokenizer), ``dedup/edges/``, ``dedup/exact/``,
``dedup/clusters.parquet`` (from the edges' spanning forest, ``lab.dedup.write_clusters``),
``rejects/``, an empty ``docs/`` (no step measured reads a text) and ``config.yaml`` (a real config:
five languages kept, a mixture by language with rehydration). Values are drawn seeded and
vectorised: log-normal lengths, ratios of small counts, a few % exact copies, near-duplicate clusters
of Zipf sizes, several languages and sources; the same seed writes the same bytes.

Each step runs in a fresh process (``--step``), so its peak RSS (``VmHWM``) is its own: the run is
opened first (in the step's mode), then the step's calls are timed (wall and CPU). A watchdog stops a
step whose RSS passes ``--rss-cap-gb`` (it counts as failed, with the RSS it reached).

    .venv/bin/python bench/driver_scale.py --docs 10000000 --dir /tmp/driver_scale/run10m
    .venv/bin/python bench/driver_scale.py --docs 100000000 --dir /tmp/driver_scale/run100m --skip-memory
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from lab import dedup  # noqa: E402
from lab.config import Config, build, dumps  # noqa: E402
from lab.io.run import RunLayout  # noqa: E402
from lab.io.schema import DOCS_SCHEMA, REJECTS_SCHEMA, signals_schema  # noqa: E402
from lab.io.writers import write_parquet  # noqa: E402

LANGS = ("en", "de", "fr", "es", "zh", "ru", "ja")
LANG_P = (0.66, 0.08, 0.07, 0.06, 0.05, 0.05, 0.03)
KEEP_LANGS = ("en", "de", "fr", "es", "zh")
SOURCES = ("cc/2024-10/warc.gz", "cc/2024-18/warc.gz", "cc/2024-26/warc.gz", "wiki/dump.jsonl.zst",
           "books/shard.parquet", "code/github.jsonl.zst", "papers/arxiv.jsonl", "forums/reddit.jsonl.gz")
SOURCE_P = (0.25, 0.22, 0.2, 0.05, 0.04, 0.1, 0.04, 0.1)
COPY_SHARE = 0.03  # documents that are an exact copy of another one
NEAR_SHARE = 0.10  # contents that belong to a near-duplicate cluster
EXTRA_EDGES = 0.25  # candidate pairs beyond a spanning tree, per cluster member
SITES = np.array([f"site{i}.{('com', 'org', 'de', 'net', 'fr')[i % 5]}" for i in range(50_000)])  # registered domains
HOSTS = np.char.add("www.", SITES)
TLDS = np.array([x.rsplit(".", 1)[1] for x in SITES])
BUCKETS = 16  # dedup shuffle buckets (edges/exact files)
MOVE = ("gopher_quality", "min_words", 50, 60)  # the slider moved: stage, knob, the config's value, the new one
CARD = ("gq_words", "gq_mean_word_length", "gq_alpha_words_ratio", "gq_stop_words")  # an open card's sliders


# --- generation ----------------------------------------------------------------------------------


def mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer as int64: distinct inputs give distinct, random-looking ids.

    >>> mix64(np.arange(3, dtype=np.uint64)).tolist()
    [0, 6238072747940578789, -2606959012126976886]
    """
    z = np.asarray(x, dtype=np.uint64).copy()
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return z.view(np.int64)


def doc_id(i: np.ndarray, seed: int) -> np.ndarray:
    return mix64(np.asarray(i, dtype=np.uint64) + np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15))


def content_hash(c: np.ndarray, seed: int) -> np.ndarray:
    return mix64(np.asarray(c, dtype=np.uint64) ^ np.uint64(0xC0FFEE0000 + seed))


def frac(rng: np.random.Generator, n: np.ndarray, p: np.ndarray | float, zero: float) -> np.ndarray:
    """A ratio of small counts k / n (k binomial), 0 for a ``zero`` share of the rows."""
    n = np.maximum(n, 1)
    k = rng.binomial(n, np.clip(p, 0, 1))
    return np.where(rng.random(n.size) < zero, 0.0, k / n)


def copies(docs: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(document, the document whose content it copies) for the ``COPY_SHARE`` of the documents that are copies."""
    rng = np.random.default_rng([seed, 1])
    who = np.flatnonzero(rng.random(docs) < COPY_SHARE)
    # most copied contents have one copy, a few have thousands: Zipf weights over a pool of originals
    pool = rng.integers(0, docs, max(who.size // 2, 1))
    w = np.minimum(rng.zipf(2.0, pool.size), 10_000).astype(np.float64)
    src = pool[np.minimum(np.searchsorted(np.cumsum(w), rng.random(who.size) * w.sum()), pool.size - 1)]
    src = np.where(src == who, (src + 1) % docs, src)
    return who, src


def contents(docs: int, seed: int) -> np.ndarray:
    """Each document's content id (its own index, or the index of the document it copies)."""
    c = np.arange(docs, dtype=np.int64)
    who, src = copies(docs, seed)
    c[who] = src
    while True:  # a copy of a copy has the original's content
        up = c[c]
        if np.array_equal(up, c):
            return c
        c = up


def signals_part(lo: int, hi: int, content: np.ndarray, seed: int, key: int) -> pa.Table:
    """The signals of documents ``lo..hi-1`` (``signals_schema()``)."""
    rng = np.random.default_rng([seed, 2, key])
    n = hi - lo
    idx = np.arange(lo, hi, dtype=np.int64)
    lang_i = rng.choice(len(LANGS), n, p=LANG_P)
    nbytes = np.maximum(rng.lognormal(7.6, 1.15, n), 1).astype(np.int64)
    nbytes[rng.random(n) < 0.002] = 0
    cjk = np.isin(lang_i, (4, 6))
    chars = np.where(cjk, nbytes // 3, (nbytes * rng.uniform(0.96, 1.0, n)).astype(np.int64))
    words = np.where(cjk, chars // 2, chars // np.maximum(rng.normal(6.0, 0.6, n), 3)).astype(np.int64)
    lines = np.maximum(words // np.maximum(rng.lognormal(2.4, 0.7, n), 1), 1).astype(np.int64)
    paras = np.maximum(lines // 3, 1)
    low = rng.random(n) < 0.12  # a low-quality share: list-like pages, boilerplate, spam
    q = lambda x, d=1000: np.round(x * d) / d  # noqa: E731  (signals are ratios of small counts)
    cols: dict[str, object] = {
        "doc_id": doc_id(idx, seed),
        "source": np.array(SOURCES)[rng.choice(len(SOURCES), n, p=SOURCE_P)],
        "bytes": nbytes,
        "raw_bytes": (nbytes * rng.uniform(1.02, 1.6, n)).astype(np.int64) + 60,
        "decode_errors": np.where(rng.random(n) < 0.002, rng.integers(1, 50, n), 0),
        "encoding": np.where(rng.random(n) < 0.97, "utf-8", "cp1252"),
        "encoding_source": np.where(rng.random(n) < 0.9, "header", "detected"),
        "url_present": (rng.random(n) < 0.8).astype(np.int8),
        "url_word_hits": np.where(rng.random(n) < 0.004, 1, 0).astype(np.int32),
        "chars": chars,
        "lang": np.array(LANGS)[lang_i],
        "lang_score": q(rng.beta(9, 1.3, n), 10_000),
        "gq_words": words,
        "gq_mean_word_length": q(rng.normal(4.9, 0.6, n)) + np.where(low, rng.exponential(2, n).round(3), 0),
        "gq_hash_word_ratio": frac(rng, words, 0.004, 0.85),
        "gq_ellipsis_word_ratio": frac(rng, words, 0.003, 0.9),
        "gq_bullet_lines_ratio": frac(rng, lines, np.where(low, 0.6, 0.05), 0.75),
        "gq_ellipsis_lines_ratio": frac(rng, lines, 0.05, 0.95),
        "gq_alpha_words_ratio": q(np.clip(rng.normal(0.88, 0.06, n) - low * 0.15, 0, 1)),
        "gq_stop_words": np.minimum(rng.poisson(np.maximum(words, 1) ** 0.5), 8),
    }
    for i, name in enumerate(("para_frac", "para_char_frac", "line_frac", "line_char_frac")):
        cols[f"gr_dup_{name}"] = frac(rng, paras if "para" in name else lines, np.where(low, 0.4, 0.05), 0.85 - 0.05 * i)
    for k in (2, 3, 4):
        cols[f"gr_top_{k}gram_char_frac"] = q(np.clip(rng.lognormal(-3.5 + 0.1 * k, 0.6, n) + low * 0.1, 0, 1))
    for k in range(5, 11):
        cols[f"gr_dup_{k}gram_char_frac"] = np.where(rng.random(n) < 0.25 + 0.06 * k, 0.0,
                                                     q(np.clip(rng.lognormal(-3.2 - 0.1 * k, 0.9, n) + low * 0.2, 0, 1)))
    cols.update({
        "c4_lines": lines,
        "c4_lines_long_word": rng.binomial(lines, 0.001),
        "c4_lines_no_terminal_punct": rng.binomial(lines, np.where(low, 0.8, 0.5)),
        "c4_lines_few_words": rng.binomial(lines, 0.05),
        "c4_lines_javascript": rng.binomial(lines, 0.002),
        "c4_lines_policy": rng.binomial(lines, 0.002),
        "c4_lorem_ipsum": (rng.random(n) < 0.002).astype(np.int64),
        "c4_curly_brace": (rng.random(n) < 0.03).astype(np.int64),
        "c4_sentences": rng.poisson(np.maximum(words, 1) / 18.0),
        "fw_line_punct_ratio": frac(rng, lines, np.where(low, 0.1, 0.6), 0.01),
        "fw_short_line_ratio": frac(rng, lines, np.where(low, 0.7, 0.15), 0.3),
        "fw_dup_line_char_ratio": np.where(rng.random(n) < 0.8, 0.0, q(rng.exponential(0.02, n), 10_000)),
        "fw_newline_word_ratio": q(np.clip(lines / np.maximum(words, 1), 0, 5), 10_000),
        "bp_lines": lines.astype(np.int32),
        "decon_matches": np.where(rng.random(n) < 0.0005, 1, 0).astype(np.int32),
        "decon_longest": np.zeros(n, dtype=np.int32),
        "qm_score": q(rng.beta(2, 3, n) + low * -0.1, 10_000).clip(0, 1),
        "content_hash": content_hash(content[lo:hi], seed),
        "nd_shingles": np.maximum(words - 4, 0).astype(np.int32),
        "pii_emails": rng.poisson(0.1, n).astype(np.int32),
        "pii_ipv4": (rng.random(n) < 0.002).astype(np.int32),
        "pii_ipv6": np.zeros(n, dtype=np.int32),
        "pii_phones": (rng.random(n) < 0.02).astype(np.int32),
    })
    cols["decon_longest"] = np.where(cols["decon_matches"] > 0, 13, 0).astype(np.int32)
    cols["pii_total"] = cols["pii_emails"] + cols["pii_ipv4"] + cols["pii_phones"]
    cols["qm_label"] = np.where(cols["qm_score"] >= 0.5, "hq", "lq")
    site = (mix64(rng.zipf(1.3, n).astype(np.uint64)).view(np.uint64) % np.uint64(SITES.size)).astype(np.int64)
    present = cols["url_present"].astype(bool)
    cols["url_domain"] = np.where(present, HOSTS[site], "")
    cols["url_registered_domain"] = np.where(present, SITES[site], "")
    cols["url_tld"] = np.where(present, TLDS[site], "")
    cols["url_blocked"] = np.full(n, "")
    cols["decon_set"] = np.where(cols["decon_matches"] > 0, "mmlu", "")
    schema = signals_schema()
    arrays = []
    for f in schema:
        if f.name in ("bp_line_frac", "drop_reason"):  # corpus-level (boilerplate/signal/) / batch mode only
            arrays.append(pa.nulls(n, f.type))
        elif f.name == "lang":
            arrays.append(pa.array(cols["lang"], f.type, mask=rng.random(n) < 0.003))
        else:
            arrays.append(pa.array(np.asarray(cols[f.name]), f.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def near_clusters(content: np.ndarray, docs: int, seed: int) -> dedup.Forest:
    """The candidate pairs of near-duplicate clusters over contents: each cluster a random tree plus
    some extra pairs, Jaccard around a per-cluster level (as ``dedup/edges/``: u, v content hashes)."""
    rng = np.random.default_rng([seed, 3])
    originals = np.flatnonzero(content == np.arange(docs))
    members = originals[(mix64(originals.astype(np.uint64) + np.uint64(seed)) & 0xFFFF) < int(NEAR_SHARE * 0x10000)]
    members = rng.permutation(members)
    sizes = []
    left = members.size
    while left > 1:  # Zipf cluster sizes, 2..5000 contents
        s = np.minimum(rng.zipf(1.9, 65536) + 1, 5000)
        sizes.append(s)
        left -= int(s.sum())
    sizes = np.concatenate(sizes) if sizes else np.zeros(0, dtype=np.int64)
    ends = np.cumsum(sizes)
    sizes = sizes[: np.searchsorted(ends, members.size, side="right")]
    m = int(sizes.sum())
    members = members[:m]
    cid = np.repeat(np.arange(sizes.size), sizes)
    start = np.repeat(np.cumsum(sizes) - sizes, sizes)
    off = np.arange(m) - start
    child = np.flatnonzero(off > 0)
    parent = start[child] + (rng.random(child.size) * off[child]).astype(np.int64)
    extra = np.flatnonzero((sizes[cid] > 2) & (rng.random(m) < EXTRA_EDGES))
    other = start[extra] + (rng.random(extra.size) * sizes[cid[extra]]).astype(np.int64)
    ok = other != extra
    a = np.concatenate([child, extra[ok]])
    b = np.concatenate([parent, other[ok]])
    level = rng.uniform(0.55, 1.0, sizes.size)
    jac = np.round(np.clip(level[cid[a]] + rng.normal(0, 0.06, a.size), 0.45, 1.0) * 112) / 112  # k / num_perm
    u, v = members[a], members[b]
    return dedup.Forest(content_hash(u, seed), content_hash(v, seed), doc_id(u, seed), doc_id(v, seed), jac)


def config(name: str) -> Config:
    """The run's config: five languages kept, near dedup at 0.8, a mixture by language with rehydration."""
    return build(Config, {
        "name": name, "output_dir": "/tmp/driver_scale",
        "stages": {"language": {"keep": list(KEEP_LANGS)}},
        "tokenizer": {"enabled": True},
        "mixture": {"by": ["lang"], "rehydrate": True, "rehydrate_cap": 5,
                    "buckets": [{"bucket": "en", "tokens": 40 * 10**9}, {"bucket": "de", "tokens": 8 * 10**9},
                                {"bucket": "zh", "tokens": 4 * 10**9}], "rest": "keep"},
    })


def generate(root: Path, docs: int, part_docs: int, seed: int) -> dict:
    """Write the run directory; the figures of what it holds."""
    t0 = time.time()
    layout = RunLayout(root)
    layout.make()
    for d in (layout.boilerplate / "signal", layout.tokenized_dir, layout.dedup / "edges", layout.dedup / "exact"):
        d.mkdir(parents=True, exist_ok=True)
    content = contents(docs, seed)
    parts = 0
    for key, lo in enumerate(range(0, docs, part_docs)):
        hi = min(lo + part_docs, docs)
        k = f"{key:05d}"
        t = signals_part(lo, hi, content, seed, key)
        write_parquet(t, layout.part("signals", k))
        rng = np.random.default_rng([seed, 4, key])
        ids, words = t.column("doc_id"), t.column("gq_words").to_numpy()
        write_parquet(pa.table({"doc_id": ids, "bp_line_frac": pa.array(np.round(rng.beta(1, 12, len(ids)), 3))}),
                      layout.line_signal(k))
        ntok = (words * np.where(np.isin(t.column("lang").to_numpy(zero_copy_only=False), ["zh", "ja"]), 1.1, 1.35)).astype(np.int32)
        write_parquet(pa.table({"doc_id": ids, "n_tokens": pa.array(ntok, pa.int32()),
                                "words": pa.array(words.astype(np.int32)),
                                "continued_words": pa.array((words * 0.2).astype(np.int32)),
                                "ids": pa.ListArray.from_arrays(np.zeros(len(ids) + 1, dtype=np.int32), pa.array([], pa.uint32()))}),  # token ids: not read by the driver
                      layout.tokenized(k))
        nrej = int(rng.poisson((hi - lo) * 0.0005))
        write_parquet(pa.table({"source": pa.array(rng.choice(SOURCES, nrej)), "locator": pa.array(rng.integers(0, 10**6, nrej)),
                                "reason": pa.array(np.where(rng.random(nrej) < 0.5, "invalid JSON", "undecodable gzip member")),
                                "raw_bytes": pa.array(rng.integers(100, 10**5, nrej)),
                                "partition": pa.array([k] * nrej, pa.string())}, schema=REJECTS_SCHEMA), layout.part("rejects", k))
        write_parquet(DOCS_SCHEMA.empty_table(), layout.part("docs", k))  # texts: read by no step measured
        parts += 1
    (layout.boilerplate_done).write_text(json.dumps({"generated": True}))
    # exact-duplicate groups (dedup/exact/): contents held by more than one document
    vals, first, counts = np.unique(content, return_index=True, return_counts=True)
    multi = counts > 1
    ids_all = doc_id(np.arange(docs), seed)
    order = np.argsort(content, kind="stable")
    group_min = np.minimum.reduceat(ids_all[order], np.r_[0, np.cumsum(counts)[:-1]]) if vals.size else vals
    ex = pa.table({"content_hash": pa.array(content_hash(vals[multi], seed)), "docs": pa.array(counts[multi].astype(np.int64)),
                   "first_doc_id": pa.array(group_min[multi])})
    del ids_all, order, group_min
    bucket = (ex.column("content_hash").to_numpy().view(np.uint64) % BUCKETS).astype(np.int64)
    for b in range(BUCKETS):
        write_parquet(ex.filter(pa.array(bucket == b)), layout.exact(b))
    # near duplicates: candidate pairs (dedup/edges/) and the clusters on the grid (their spanning forest)
    f = near_clusters(content, docs, seed)
    rng = np.random.default_rng([seed, 5])
    est = np.round(np.clip(f.jaccard + rng.normal(0, 0.03, len(f)), 0, 1) * 112) / 112
    edges = pa.table({"u": f.u, "v": f.v, "u_doc": f.u_doc, "v_doc": f.v_doc,
                      "matches": pa.array(np.ceil(est * 14).astype(np.int16)), "jaccard_est": est,
                      "jaccard_exact": f.jaccard, "jaccard": f.jaccard})
    bucket = (f.u.view(np.uint64) % BUCKETS).astype(np.int64)
    for b in range(BUCKETS):
        write_parquet(edges.filter(pa.array(bucket == b)), layout.edges(b))
    t_forest = time.time()
    nodes = dedup.write_clusters(root, dedup.spanning_forest(f))
    forest_s = time.time() - t_forest
    layout.dedup_done.write_text(json.dumps({"generated": True, "nodes": nodes}))
    layout.config.write_text(dumps(config(root.name)))
    size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    sig = sum(p.stat().st_size for p in layout.signals.glob("*.parquet"))
    return {"docs": docs, "partitions": parts, "exact_groups": ex.num_rows, "copies": int(counts[multi].sum() - multi.sum()),
            "edges": len(f), "cluster_nodes": nodes, "bytes": size, "signals_bytes": sig,
            "seconds": round(time.time() - t0, 1), "forest_and_grid_s": round(forest_s, 1)}


# --- one step, in a process of its own --------------------------------------------------------------


def moved(cfg: Config, stage: str, key: str, value) -> Config:
    """``cfg`` with one knob changed (what a slider release builds)."""
    from lab.config import to_dict

    d = to_dict(cfg)
    d["stages"][stage][key] = value
    return build(Config, d)


def only(cfg: Config, *stages: str) -> Config:
    """``cfg`` with every stage but ``stages`` disabled."""
    from lab.config import to_dict
    from lab.stages import STAGE_NAMES

    d = to_dict(cfg)
    for s in STAGE_NAMES:
        if s in d["stages"]:
            d["stages"][s]["enabled"] = s in stages
    return build(Config, d)


def hwm_mb() -> float:
    st = Path("/proc/self/status").read_text()
    return int(re.search(r"VmHWM:\s+(\d+)", st).group(1)) / 1024


def timed(calls: dict, name: str, fn):
    c0, t0 = time.process_time(), time.perf_counter()
    out = fn()
    calls[name] = {"wall_s": round(time.perf_counter() - t0, 3), "cpu_s": round(time.process_time() - c0, 3)}
    return out


def step(name: str, run_dir: str, memory_limit: str | None) -> dict:
    """Open the run, time the step's calls; what it measured, with this process's peak RSS."""
    from lab import query

    from lab.query import run as query_run

    base_mb = hwm_mb()
    in_memory = name.endswith("_mem")
    if memory_limit:  # before the connection loads anything: DuckDB spills past it
        spill = Path(run_dir).parent / "duckdb_tmp"
        query_run.DUCKDB_SETTINGS.update(memory_limit=memory_limit, temp_directory=str(spill))
    calls: dict = {}
    run = timed(calls, "open_run", lambda: query.open_run(run_dir, in_memory=in_memory))
    cfg = run.config
    stage, knob, _, to = MOVE
    info: dict = {}
    if name in ("funnel_sql", "funnel_mem"):
        f = timed(calls, "funnel", lambda: query.funnel(run, cfg))
        timed(calls, "funnel_raw", lambda: query.funnel(run, cfg, raw=True))
        info = {"kept": int(f["docs_out"][-1]), "docs": int(f["docs_in"][0])}
    elif name in ("slider_sql", "slider_mem"):
        timed(calls, "funnel_config", lambda: query.funnel(run, cfg))
        f = timed(calls, "funnel_moved", lambda: query.funnel(run, moved(cfg, stage, knob, to)))
        timed(calls, "funnel_moved_again", lambda: query.funnel(run, moved(cfg, stage, knob, to + 5)))
        info = {"kept_moved": int(f["docs_out"][-1])}
    elif name in ("histograms_sql", "histograms_mem"):
        h = timed(calls, "histograms_card", lambda: query.histograms(run, cfg, list(CARD)))
        timed(calls, "histograms_card_moved", lambda: query.histograms(run, moved(cfg, stage, knob, to), list(CARD)))
        timed(calls, "signal_histogram", lambda: query.signal_histogram(run, "gq_words"))
        info = {"bins": {k: v.height for k, v in h.items()}}
    elif name == "exact_sql":
        f = timed(calls, "exact_keep", lambda: query.funnel(run, only(cfg, "exact_dedup")))
        info = {"exact_dropped": int(f.filter(f["stage"] == "exact_dedup")["docs_dropped"][0])}
    elif name == "near_sql":
        from lab.query.compile import rules_of

        rules = rules_of(run, cfg)
        d = timed(calls, "near_keep", lambda: query.near_drops(run, rules))
        timed(calls, "near_keep_0.7", lambda: query.near_drops(run, rules_of(run, moved(cfg, "near_dedup", "threshold", 0.7))))
        info = {"near_dropped": d.num_rows}
    elif name == "near_mem":  # the codes of a config whose near-dedup threshold moved (over the warm memo)
        f = timed(calls, "funnel_near_0.7", lambda: query.funnel(run, moved(cfg, "near_dedup", "threshold", 0.7)))
        info = {"near_dropped": int(f.filter(f["stage"] == "near_dedup")["docs_dropped"][0])}
    elif name == "clusters_sql":
        c = timed(calls, "cluster_count", lambda: query.cluster_count(run, 0.8))
        timed(calls, "clusters_page", lambda: query.clusters(run, 0.8))
        timed(calls, "clusters_page_config", lambda: query.clusters(run, 0.8, config=cfg))
        info = c
    elif name == "mixture_sql":
        p = timed(calls, "mixture_plan", lambda: query.mixture_plan(run, cfg))
        info = {"buckets": len(p.report)}
    elif name != "open_sql" and name != "open_mem":
        raise SystemExit(f"unknown step {name!r}; known: {', '.join(STEPS)}")
    # VmHWM, not ru_maxrss: ru_maxrss survives exec, so it would count the parent's generation arrays
    return {"step": name, "calls": calls, "peak_rss_mb": round(hwm_mb(), 1), "base_rss_mb": round(base_mb, 1), "info": info}


STEPS = ("open_sql", "funnel_sql", "slider_sql", "histograms_sql", "exact_sql", "near_sql", "clusters_sql", "mixture_sql",
         "open_mem", "funnel_mem", "slider_mem", "histograms_mem", "near_mem")


def rss_mb(pid: int) -> float:
    try:
        st = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return 0.0
    m = re.search(r"VmRSS:\s+(\d+)", st)
    return int(m.group(1)) / 1024 if m else 0.0


def available_mb() -> float:
    m = re.search(r"MemAvailable:\s+(\d+)", Path("/proc/meminfo").read_text())
    return int(m.group(1)) / 1024 if m else float("inf")


def measure(name: str, run_dir: Path, cap_gb: float, timeout: float, memory_limit: str | None,
            min_free_gb: float = 2.0) -> dict:
    """Run one step in a fresh process under the watchdog (its RSS, the machine's available memory, time)."""
    cmd = [sys.executable, __file__, "--step", name, "--dir", str(run_dir)]
    if memory_limit:
        cmd += ["--duckdb-memory-limit", memory_limit]
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    top, why = 0.0, None
    while p.poll() is None:
        top = max(top, rss_mb(p.pid))
        if top > cap_gb * 1024:
            why = f"RSS passed {cap_gb} GB"
        elif available_mb() < min_free_gb * 1024:  # a shared machine: stop before the kernel's OOM killer does
            why = f"the machine had under {min_free_gb} GB available (RSS {top / 1024:.1f} GB)"
        elif time.perf_counter() - t0 > timeout:
            why = f"ran past {timeout:.0f} s"
        if why:
            p.kill()
            break
        time.sleep(0.1)
    out, err = p.communicate()
    wall = round(time.perf_counter() - t0, 1)
    if why or p.returncode != 0:
        return {"step": name, "failed": why or f"exit {p.returncode}: {err.strip().splitlines()[-1] if err.strip() else ''}",
                "rss_mb_seen": round(top, 1), "process_wall_s": wall}
    res = json.loads(out.strip().splitlines()[-1])
    res["process_wall_s"] = wall
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=10_000_000, help="documents of the generated run")
    ap.add_argument("--part-docs", type=int, default=1_000_000, help="documents per signals partition")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dir", default="/tmp/driver_scale/run", help="the run directory (outside the repository)")
    ap.add_argument("--steps", default=",".join(STEPS), help="comma-separated steps to measure")
    ap.add_argument("--skip-memory", action="store_true", help="leave out the in-memory steps (*_mem)")
    ap.add_argument("--rss-cap-gb", type=float, default=18.0, help="stop a step whose RSS passes this")
    ap.add_argument("--min-free-gb", type=float, default=2.0, help="stop a step when the machine has less available")
    ap.add_argument("--timeout", type=float, default=1800.0, help="stop a step running longer (seconds)")
    ap.add_argument("--duckdb-memory-limit", default=None, help="DuckDB memory_limit of every step's connection (e.g. 6GB), spilling to DIR/../duckdb_tmp")
    ap.add_argument("--regenerate", action="store_true", help="write the run again even if --dir holds one of --docs")
    ap.add_argument("--out", default=None, help="default bench/out/driver_scale_DOCS.json")
    ap.add_argument("--step", default=None, help=argparse.SUPPRESS)  # internal: one step, in this process
    args = ap.parse_args()
    if args.step:
        print(json.dumps(step(args.step, args.dir, args.duckdb_memory_limit)))
        return
    root = Path(args.dir)
    made = root / "generated.json"
    if args.regenerate or not made.exists() or json.loads(made.read_text()).get("docs") != args.docs:
        shutil.rmtree(root, ignore_errors=True)
        gen = generate(root, args.docs, args.part_docs, args.seed)
        made.write_text(json.dumps(gen))
        print(json.dumps(gen), flush=True)
    gen = json.loads(made.read_text())
    steps = [s for s in args.steps.split(",") if s and not (args.skip_memory and s.endswith("_mem"))]
    out = Path(args.out or ROOT / f"bench/out/driver_scale_{args.docs}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    # figures of earlier invocations over the same run stay; a step measured again replaces its own
    old = json.loads(out.read_text()) if out.exists() else {}
    results = [r for r in old.get("steps", []) if old.get("run") == gen]
    for s in steps:
        r = measure(s, root, args.rss_cap_gb, args.timeout, args.duckdb_memory_limit, args.min_free_gb)
        r["duckdb_memory_limit"] = args.duckdb_memory_limit
        print(json.dumps(r), flush=True)
        results = [x for x in results if (x["step"], x.get("duckdb_memory_limit")) != (s, args.duckdb_memory_limit)] + [r]
        kept = {k: old[k] for k in ("before",) if k in old}  # earlier figures written by hand: kept
        out.write_text(json.dumps({"docs": args.docs, "run": gen, "cpus": os.cpu_count(), "steps": results, **kept},
                                  indent=1))


if __name__ == "__main__":
    main()
