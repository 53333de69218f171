"""linecount: the boilerplate-line count table merged over all partitions, and the signal it gives. No Dask here.

The stage (config, normalization, per-partition counts) is ``lab.stages.boilerplate``. After annotate:

1. **reduce** (one task per bucket of the near-dedup shuffle, ``lab.dedup.shuffle.bucket_of``):
   ``reduce_bucket`` sums ``docs`` per (site, line_hash) over every partition's ``boilerplate/counts/``
   into ``boilerplate/merged/``. A (site, line) pair lives in one bucket, so the sum equals one pass.
2. **signal** (one task per partition): ``signal_partition`` writes ``bp_line_frac`` per document
   (``boilerplate/signal/``) from the lines seen in >= ``min_docs`` documents of their site.

``strip_texts`` removes those lines before tokenizing; ``count_texts`` and ``strip_counted`` work in memory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lab.io.run import RunLayout
from lab.io.writers import read_parquet_group, write_parquet
from lab.stages.boilerplate import COUNT_SCHEMA, LINE_SCHEMA

SIGNAL_SCHEMA = pa.schema([("doc_id", pa.int64()), ("bp_line_frac", pa.float64())])


def merge_counts(tables: Sequence[pa.Table]) -> pa.Table:
    """Count tables (site, line_hash, docs) of disjoint document sets summed into one, sorted.

    >>> a = pa.table({"site": ["s"], "line_hash": [5], "docs": [2]}, schema=COUNT_SCHEMA)
    >>> merge_counts([a, a]).to_pylist()
    [{'site': 's', 'line_hash': 5, 'docs': 4}]
    """
    tables = [t for t in tables if t is not None and t.num_rows]
    if not tables:
        return COUNT_SCHEMA.empty_table()
    t = pa.concat_tables([t.cast(COUNT_SCHEMA) for t in tables])
    g = t.group_by(["site", "line_hash"]).aggregate([("docs", "sum")])
    out = pa.table({"site": g["site"], "line_hash": g["line_hash"], "docs": g["docs_sum"]})
    return out.cast(COUNT_SCHEMA).sort_by([("site", "ascending"), ("line_hash", "ascending")])


def reduce_bucket(run_dir: str | Path, bucket: int, keys: Sequence[str]) -> int:
    """Merge bucket ``bucket`` of every partition's count table into ``boilerplate/merged/``; returns its rows."""
    layout = RunLayout(Path(run_dir))
    merged = merge_counts([read_parquet_group(layout.line_counts(k), bucket) for k in keys])
    write_parquet(merged, layout.merged_counts(bucket))
    return merged.num_rows


def merged_table(layout: RunLayout, *, min_docs: int = 1) -> pa.Table:
    """The corpus's count table (every bucket), rows with ``docs >= min_docs``, sorted."""
    files = sorted(layout.boilerplate.glob("merged/bucket-*.parquet"))
    if not files:
        return COUNT_SCHEMA.empty_table()
    t = pq.read_table([str(f) for f in files], schema=COUNT_SCHEMA, filters=[("docs", ">=", int(min_docs))])
    return t.sort_by([("site", "ascending"), ("line_hash", "ascending")])


def boilerplate_lines(layout: RunLayout, min_docs: int) -> pa.Table:
    """(site, line_hash) of the lines seen in at least ``min_docs`` documents of their site."""
    return merged_table(layout, min_docs=min_docs).select(["site", "line_hash"])


def doc_fractions(records: pa.Table, boiler: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """(doc_ids sorted, their ``bp_line_frac``) from line records and the boilerplate (site, line_hash) pairs."""
    if not records.num_rows:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    flag = boiler.select(["site", "line_hash"]).append_column("_bp", pa.array(np.ones(boiler.num_rows, dtype=np.int8)))
    j = records.join(flag, keys=["site", "line_hash"], join_type="left outer")
    chars = j.column("chars").cast(pa.int64())
    bp_chars = pc.if_else(pc.is_valid(j.column("_bp")), chars, pa.scalar(0, pa.int64()))
    t = pa.table({"doc_id": j.column("doc_id"), "chars": chars, "bp_chars": bp_chars})
    per = t.group_by("doc_id").aggregate([("chars", "sum"), ("bp_chars", "sum")]).sort_by("doc_id")
    total = per.column("chars_sum").to_numpy()
    part = per.column("bp_chars_sum").to_numpy()
    frac = np.where(total > 0, part / np.maximum(total, 1), 0.0)
    return per.column("doc_id").to_numpy(), frac


def signal_partition(run_dir: str | Path, key: str, min_docs: int) -> int:
    """``bp_line_frac`` of every document of partition ``key`` (signals' row order; 0.0 without lines)."""
    layout = RunLayout(Path(run_dir))
    doc_ids = pq.read_table(layout.part("signals", key), columns=["doc_id"]).column("doc_id").to_numpy()
    records = pq.read_table(layout.line_records(key), schema=LINE_SCHEMA)
    ids, frac = doc_fractions(records, boilerplate_lines(layout, min_docs))
    out = np.zeros(doc_ids.size)
    if ids.size:
        at = np.searchsorted(ids, doc_ids)
        hit = (at < ids.size) & (ids[np.minimum(at, ids.size - 1)] == doc_ids)
        out[hit] = frac[at[hit]]
    layout.line_signal(key).parent.mkdir(parents=True, exist_ok=True)
    write_parquet(pa.table({"doc_id": pa.array(doc_ids, pa.int64()), "bp_line_frac": out}, schema=SIGNAL_SCHEMA),
                  layout.line_signal(key))
    return int(doc_ids.size)


def hash_sets(boiler: pa.Table) -> dict[str, frozenset[int]]:
    """site -> the hashes of its boilerplate lines, from (site, line_hash) rows (what ``strip_texts`` takes).

    >>> hash_sets(pa.table({"site": ["a", "a", "b"], "line_hash": [1, 2, 1]}))
    {'a': frozenset({1, 2}), 'b': frozenset({1})}
    """
    out: dict[str, set[int]] = {}
    for site, h in zip(boiler.column("site").to_pylist(), boiler.column("line_hash").to_pylist()):
        out.setdefault(site, set()).add(h)
    return {s: frozenset(v) for s, v in out.items()}


def boiler_hashes(layout: RunLayout, min_docs: int) -> dict[str, frozenset[int]]:
    """site -> the hashes of its boilerplate lines (what ``remove_boilerplate`` takes)."""
    return hash_sets(boilerplate_lines(layout, min_docs))


def strip_texts(doc_ids: Sequence[int], texts: Sequence[str | None], sites: dict[int, str],
                boiler: dict[str, frozenset[int]]) -> list[str | None]:
    """``texts`` with each document's site's boilerplate lines removed (``sites``: doc_id -> site)."""
    from lab.stages.boilerplate import remove_boilerplate

    out = []
    for d, text in zip(doc_ids, texts):
        lines = boiler.get(sites.get(int(d), ""), frozenset())
        out.append(remove_boilerplate(text, lines) if text is not None and lines else text)
    return out


def partition_sites(layout: RunLayout, key: str) -> dict[int, str]:
    """doc_id -> site of the partition's documents that have line records."""
    t = pq.read_table(layout.line_records(key), columns=["doc_id", "site"])
    return dict(zip(t.column("doc_id").to_pylist(), t.column("site").to_pylist()))


def count_texts(texts: Sequence[str], sites: Sequence[str]) -> pa.Table:
    """The count table (site, line_hash, docs) of documents held in memory: ``texts[i]`` is document ``i``
    of site ``sites[i]``. The engine's steps on one partition (``Collector`` line records, ``count_table``,
    ``merge_counts``), whose result equals the merged table of any partitioning.

    >>> count_texts(["Home\\nA.", "HOME\\nB."], ["s", "s"]).filter(pc.field("docs") == 2).num_rows
    1
    """
    from types import SimpleNamespace

    from lab.stages.boilerplate import Collector, Config, count_table

    if len(texts) != len(sites):
        raise ValueError(f"{len(texts)} texts but {len(sites)} sites")
    col = Collector(Config())
    for i, (text, site) in enumerate(zip(texts, sites)):
        col.signals(i, text, SimpleNamespace(url=None, source=site))  # no URL: the site is the "source"
    return merge_counts([count_table(col.records(np.arange(len(texts), dtype=np.int64)))])


def strip_counted(texts: Sequence[str], sites: Sequence[str], counts: pa.Table, min_docs: int) -> list[str]:
    """``texts`` without the lines seen in >= ``min_docs`` documents of their site according to ``counts``
    (``count_texts`` of the same texts): ``boilerplate_lines``'s filter and ``strip_texts``, as the
    stage's ``remove_lines`` applies them before tokenizing.

    >>> texts = ["Home | Next\\nAlpha.", "home  |  next\\nBeta.", "Home | Next\\nGamma.", "Home | Next\\nDelta."]
    >>> sites = ["a", "a", "a", "b"]
    >>> strip_counted(texts, sites, count_texts(texts, sites), min_docs=3)
    ['Alpha.', 'Beta.', 'Gamma.', 'Home | Next\\nDelta.']
    """
    boiler = counts.filter(pc.greater_equal(counts.column("docs"), int(min_docs))).select(["site", "line_hash"])
    return strip_texts(range(len(texts)), texts, dict(enumerate(sites)), hash_sets(boiler))
