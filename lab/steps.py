"""steps: the steps of a run as plain functions over the run directory: no Dask, no tasks in flight.

A run (``lab.engine.run``) is five steps, each recomputed only when what it depends on changed:
**annotate** (one task per partition, complete when ``stats/part-KEY.json`` records this signals hash,
shuffle shape and input fingerprint: ``partition_complete``); **near dedup**, then **boilerplate lines**
(tasks per bucket of one shuffle: ``dedup_state``, ``boilerplate_state``); the **tokenizer fit** (once, in
the driver: ``tokenizer_job``, ``tokenizer_state``); **tokenize** (one task per partition:
``tokenize_start``, ``strip_state``); **materialize** (``tokens_current``). Before them ``prepare`` plans
the partitions, sets up the run directory and runs every stage's ``prepare`` once. This module says what
each step's state is and does the driver's work around its tasks; ``lab.engine`` maps the tasks on an
executor; ``lab.manifest`` writes what the run did.
"""

from __future__ import annotations

import functools
import hashlib
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

from lab.config import Config, TokenizerConfig, dumps, to_dict
from lab.errors import ConfigError
from lab.io.labels import clear_run
from lab.io.listing import Listing, list_inputs
from lab.io.partitions import Partition, fingerprint, plan
from lab.io.run import RunLayout
from lab.io.schema import INPUTS_SCHEMA, REJECTS_SCHEMA
from lab.io.writers import ParquetStream, read_marker, write_json, write_parquet, write_text
from lab.manifest import merge_stats
from lab.stages import STAGES

# --- what a step read ----------------------------------------------------------------------------------


def digest(paths) -> str:
    """One hash over the bytes of ``paths`` (a missing one counts as absent): how a step names the files it
    read. Markers are small JSON files whose bytes are what the step they mark produced.

    >>> digest([]) == digest([])
    True
    """
    h = hashlib.blake2b(digest_size=16)
    for p in paths:
        p = Path(p)
        h.update(p.name.encode() + b"\0")
        h.update(p.read_bytes() if p.exists() else b"-")
        h.update(b"\n")
    return h.hexdigest()


def partitions_digest(layout: RunLayout, parts: list[Partition] | list[str]) -> str:
    """The annotated partitions' done records (each names its input fingerprint, signals hash and statistics),
    hashed in partition order: what every step after annotate read of the documents and signals."""
    return digest(layout.done(k) for k in keys_of(parts))


def keys_of(parts: list[Partition] | list[str]) -> list[str]:
    return [p if isinstance(p, str) else p.key for p in parts]


def annotated_keys(layout: RunLayout) -> list[str]:
    """The keys of the partitions a run directory holds (its done records), in order: the partitions of the
    run's last plan, for a step run on its own (``lab.tokens.materialize.run``, ``corpus-lab fertility``)."""
    return sorted(f.stem.split("-", 1)[1] for f in layout.stats.glob("part-*.json"))


# --- the run directory -------------------------------------------------------------------------------


def sweep_temporary(root: Path) -> None:
    """Remove the ``.tmp-*`` files under a run directory: files a stopped task was writing, never
    read. Directories are left alone (materialize stages its output in ``.tmp-tokens/``)."""
    for f in Path(root).rglob(".tmp-*"):
        if f.is_file():
            f.unlink(missing_ok=True)


def _remove_stale(layout: RunLayout, parts: list[Partition]) -> None:
    """Delete partition files that the current plan does not have (the input shrank or changed shape)."""
    keys = {p.key for p in parts}
    for d in (layout.docs, layout.signals, layout.rejects, layout.stats, layout.dedup / "signatures",
              layout.dedup / "shingles", layout.dedup / "bands", layout.tokenized_dir, layout.boilerplate / "counts",
              layout.boilerplate / "lines", layout.boilerplate / "signal"):
        for f in d.glob("*"):
            name = f.name
            if name.startswith(".tmp-"):
                f.unlink()
            elif name.startswith(("part-", "timing-")) and name.split("-", 1)[1].split(".")[0] not in keys:
                f.unlink()


def prepare(cfg: Config, *, overwrite: bool = False) -> tuple[RunLayout, list[Partition], Listing]:
    """Validate inputs, list their files, plan partitions and set up the run directory.

    Call it once the cluster is reachable: a run that cannot start leaves no directory behind.
    """
    if not cfg.inputs:
        raise ConfigError("inputs is empty: add at least one `- path: ...` under inputs, or run with no --config "
                          "to use the embedded sample")
    if cfg.mode == "batch" and cfg.percentiles:
        raise ConfigError("percentiles need explore mode (a global quantile over every document); export the "
                          "resolved thresholds from an explore run, or set mode: explore")
    if cfg.mode == "batch" and cfg.stages.boilerplate.enabled and cfg.stages.boilerplate.max_line_frac < 1.0:
        raise ConfigError("stages.boilerplate.max_line_frac needs explore mode (its signal counts lines over every "
                          "document of a site, after all partitions are annotated); set mode: explore, or "
                          "max_line_frac: 1.0 in batch")
    listing = list_inputs(cfg.inputs)
    parts = plan(cfg.inputs, cfg.ingest, listing)
    layout = RunLayout(cfg.run_dir)
    if layout.manifest.exists():
        old = read_marker(layout.manifest)  # damaged: compared partition by partition, then rewritten
        # (a run written before inputs_hash existed: its partitions are compared one by one instead)
        if old.get("inputs_hash", cfg.inputs_hash()) != cfg.inputs_hash():
            if not overwrite:
                raise ConfigError(f"{layout.root} holds a run of different inputs, ingest or mode (or batch thresholds) (inputs hash "
                                  f"{old.get('inputs_hash')} != {cfg.inputs_hash()}); choose another name or pass --overwrite")
            clear_run(layout)  # everything but labels/
    elif overwrite and layout.root.exists():
        clear_run(layout)
    layout.make()
    _remove_stale(layout, parts)
    write_text(dumps(cfg), layout.config)
    for m in STAGES:  # what a stage builds once per run before any partition (decontamination's index)
        if hasattr(m, "prepare"):
            m.prepare(cfg.stage(m.NAME), layout.root)
    return layout, parts, listing


def fingerprints(layout: RunLayout, parts: list[Partition], listing: Listing) -> dict[str, dict]:
    """Each partition's input fingerprint (``lab.io.partitions.fingerprint``: its files' SHA-256, read once
    per run), and ``inputs.parquet``: every file found under the inputs, read (size, SHA-256, partition)
    or skipped (why), written as it is hashed so that the driver holds no list of a million files."""
    hashes = {url: known for url, known in listing.stored.items() if known[1]}  # objects: the tag their listing gave
    fps: dict[str, dict] = {}
    seen: set[str] = set()  # files cut into ranges: listed once
    with ParquetStream(layout.inputs, INPUTS_SCHEMA) as out:
        for p in parts:
            def listed(source: str, path: str, size: int, sha: str, p: Partition = p) -> None:
                if not p.files:
                    if path in seen:
                        return
                    seen.add(path)
                out.add({"input": p.input_index, "source": source, "path": path, "bytes": size, "sha256": sha,
                         "partition": p.key, "skipped": None})

            fps[p.key] = fingerprint(p, hashes, listed)
        for s in listing.skipped:
            out.add({"input": s["input"], "source": None, "path": s["path"], "bytes": None, "sha256": None,
                     "partition": None, "skipped": s["reason"]})
    return fps


def n_buckets(cfg: Config, parts: list[Partition]) -> int:
    """Reduce tasks of the near-dedup shuffle: configured, or one per partition (so a bucket holds
    about one partition's band records, whatever the corpus size)."""
    return cfg.stages.near_dedup.shuffle_buckets or max(len(parts), 1)


# --- annotate ----------------------------------------------------------------------------------------


def partition_complete(layout: RunLayout, part: Partition, signals_hash: str, buckets: int, fp: dict) -> bool:
    """Whether ``part`` was annotated under this signals hash, shuffle shape and input fingerprint."""
    d = read_marker(layout.done(part.key))
    return (d.get("signals_hash") == signals_hash and not d.get("quarantined")
            and d.get("fingerprint") == fp and d.get("shuffle_buckets") == buckets)


def quarantine(layout: RunLayout, part: Partition, cfg: Config, error: BaseException, fp: dict) -> dict:
    """Record a partition whose task failed every attempt: a ``rejects/`` record with the error (counted
    in the funnel's ingest stage) and a done record marked quarantined (the next run tries it again)."""
    reason = f"partition failed after {cfg.engine.retries} retries: {type(error).__name__}: {error}"
    import pyarrow as pa

    rec = {"source": [part.source], "locator": [part.start], "reason": [reason], "raw_bytes": [part.size],
           "partition": [part.key]}
    layout.make()
    for kind in ("docs", "signals"):
        layout.part(kind, part.key).unlink(missing_ok=True)
    for f in (layout.line_counts(part.key), layout.line_records(part.key), layout.line_signal(part.key)):
        f.unlink(missing_ok=True)  # an earlier attempt's boilerplate-line outputs: not counted
    write_parquet(pa.table(rec, schema=REJECTS_SCHEMA), layout.part("rejects", part.key))
    out = {"key": part.key, "docs": 0, "bytes": 0, "rejected": 1, "rejected_bytes": part.size, "stats": {},
           "signals_hash": cfg.signals_hash(), "fingerprint": fp, "quarantined": True, "error": reason}
    write_json(out, layout.done(part.key))
    return out


# --- near dedup --------------------------------------------------------------------------------------


def dedup_state(cfg: Config, layout: RunLayout, parts: list[Partition], buckets: int) -> dict:
    """What the near-dedup outputs depend on: the partitions' done markers and the shuffle's shape."""
    nd = cfg.stages.near_dedup
    return {"partitions": partitions_digest(layout, parts), "buckets": buckets, "max_group_pairs": nd.max_group_pairs,
            "signature": nd.signature_params()}


def dedup_complete(layout: RunLayout, state: dict) -> bool:
    return read_marker(layout.dedup_done).get("state") == state


def dedup_start(layout: RunLayout, parts: list[Partition], buckets: int) -> list[str]:
    """Clear the outputs of an earlier near dedup; returns the keys of the partitions with band records
    (quarantined partitions have none), which every reduce task reads."""
    layout.dedup_done.unlink(missing_ok=True)
    for f in [*(layout.dedup / "edges").glob("*"), *(layout.dedup / "exact").glob("*")]:  # an earlier shape's
        if f.name.startswith(".tmp-") or int(f.stem.split("-")[1]) >= buckets:
            f.unlink()
    return [p.key for p in parts if layout.bands(p.key).exists()]


def dedup_finish(layout: RunLayout, state: dict, buckets: int, nodes: int, seconds: float) -> None:
    """Mark near dedup complete for ``state`` (``dedup/done.json``; the manifest's ``near_dedup``)."""
    write_json({"state": state, "buckets": buckets, "nodes": nodes, "seconds": round(seconds, 3)}, layout.dedup_done)


# --- boilerplate lines -------------------------------------------------------------------------------


def boilerplate_state(cfg: Config, layout: RunLayout, parts: list[Partition], buckets: int) -> dict:
    """What the merged line counts and the ``bp_line_frac`` signal depend on: the partitions' done
    markers, the shuffle's shape and ``min_docs``."""
    return {"partitions": partitions_digest(layout, parts), "buckets": buckets,
            **cfg.stages.boilerplate.merge_params()}


def boilerplate_complete(layout: RunLayout, state: dict) -> bool:
    return read_marker(layout.boilerplate_done).get("state") == state


def boilerplate_start(layout: RunLayout, parts: list[Partition]) -> list[str]:
    """Clear an earlier merge's outputs; returns the keys of the partitions with a count table
    (quarantined partitions have none), which every reduce task reads."""
    layout.boilerplate_done.unlink(missing_ok=True)
    for d in ("merged", "signal"):
        for f in (layout.boilerplate / d).glob("*"):
            f.unlink()
    (layout.boilerplate / "merged").mkdir(parents=True, exist_ok=True)
    (layout.boilerplate / "signal").mkdir(parents=True, exist_ok=True)
    return [p.key for p in parts if layout.line_counts(p.key).exists() and layout.line_records(p.key).exists()
            and layout.part("signals", p.key).exists() and not read_marker(layout.done(p.key)).get("quarantined")]


def boilerplate_finish(layout: RunLayout, state: dict, lines: int, seconds: float) -> None:
    """Mark the merge complete for ``state`` (``boilerplate/done.json``)."""
    write_json({"state": state, "lines": lines, "seconds": round(seconds, 3)}, layout.boilerplate_done)


# --- tokenizer fit and tokenize ----------------------------------------------------------------------


def tokenizer_state(cfg: Config, layout: RunLayout, parts: list[Partition]) -> dict:
    """What the fitted tokenizer depends on: its config and the annotated partitions. Not the
    thresholds: the tokenizer is fitted once, on the documents the config of that run kept, then
    frozen, so moving a threshold reselects and repacks without refitting or recounting."""
    pack = to_dict(cfg)["pack"]
    tok = to_dict(cfg)["tokenizer"]
    if tok["kind"] == "bpe" and not tok["path"]:  # the default: the state runs had before kinds existed
        del tok["kind"], tok["path"]
    elif tok["kind"] == "file":  # a changed source file is a new tokenizer
        from lab.tokens import tokenize

        tok["source_sha256"] = tokenize.source_sha256(tok["path"])
    split = {"shuffle_seed": pack["shuffle_seed"], "val_fraction": pack["val_fraction"]}  # val and test never fit it
    if pack["test_fraction"]:  # absent at 0: the state of the runs made before the key existed
        split["test_fraction"] = pack["test_fraction"]
    return {"tokenizer": tok, "split": split, "partitions": partitions_digest(layout, parts)}


def strip_state(cfg: Config, layout: RunLayout, parts: list[Partition]) -> dict | None:
    """What tokenize's text rewrite depends on: None without ``stages.boilerplate.remove_lines``, else
    ``min_docs`` and the merged line counts (the boilerplate step's state)."""
    bp = cfg.stages.boilerplate
    if not bp.remove_lines:
        return None
    state = boilerplate_state(cfg, layout, parts, n_buckets(cfg, parts))
    h = hashlib.blake2b(json.dumps(state, sort_keys=True).encode(), digest_size=8).hexdigest()
    return {"min_docs": bp.min_docs, "merge": h}


def tokenize_reads(layout: RunLayout, key: str, sha: str, strip: dict | None) -> dict:
    """What partition ``key``'s token counts depend on: the tokenizer, the text rewrite and the partition's
    stored text (its done record, which names its input's content hash)."""
    return {"sha256": sha, "strip": strip, "annotated": digest([layout.done(key)])}


def tokenize_todo(layout: RunLayout, parts: list[Partition], sha: str, strip: dict | None = None) -> list[str]:
    """Keys of the partitions whose token counts are missing or were made from other text, another tokenizer or
    another text rewrite."""
    keys = []
    for p in parts:
        done = read_marker(layout.tokenized_done(p.key))
        if layout.part("docs", p.key).exists() and done.get("reads") != tokenize_reads(layout, p.key, sha, strip):
            keys.append(p.key)
    return keys


def tokenize_complete(cfg: Config, layout: RunLayout, parts: list[Partition]) -> bool:
    if not cfg.tokenizer.enabled:
        return True
    fit = read_marker(layout.tokenizer_fit)
    return fit.get("state") == tokenizer_state(cfg, layout, parts) and not tokenize_todo(
        layout, parts, fit["sha256"], strip_state(cfg, layout, parts))


def tokenizer_current(cfg: Config, layout: RunLayout, parts: list[Partition]) -> bool:
    """Whether the fitted tokenizer is the one ``cfg`` would fit (``fit_tokenizer`` would reuse it)."""
    return read_marker(layout.tokenizer_fit).get("state") == tokenizer_state(cfg, layout, parts)


def fit_tokenizer(cfg: Config, layout: RunLayout, parts: list[Partition]) -> tuple[dict, str | None]:
    """Fit the run's tokenizer on its stratified sample unless the fitted one is current (reused while
    nothing it depends on changes). Returns (what it did, for the manifest's ``last_run.steps``; the
    tokenizer's sha256, None when the config keeps no document to fit it on)."""
    return tokenizer_job(cfg, layout, parts)()


def tokenizer_job(cfg: Config, layout: RunLayout, parts: list[Partition]) -> Callable[[], tuple[dict, str | None]]:
    """``fit_tokenizer`` in two halves: the sample is drawn now (DuckDB, in this process), and the call
    returned fits and saves the tokenizer. When it is a ``functools.partial`` of ``train`` it reads no
    file of the run and can run in another process (the engine's child with every core); otherwise it
    is quick (a tokenizer reused or frozen from a file, or none to fit)."""
    from lab import query
    from lab.tokens import tokenize

    state = tokenizer_state(cfg, layout, parts)
    fit = read_marker(layout.tokenizer_fit)
    if fit.get("state") == state:
        return lambda: ({}, fit["sha256"])
    started = time.time()
    if cfg.tokenizer.kind == "file":  # an existing tokenizer: frozen as it is, nothing fitted
        def freeze() -> tuple[dict, str | None]:
            data, ranks = tokenize.freeze_source(cfg.tokenizer.path)
            sha = tokenize.save(data, layout, {"state": state, "kind": "file", "source": cfg.tokenizer.path,
                                               "vocab_size": tokenize.special_ids(tokenize.from_bytes(
                                                   data, _ranks_tmp(layout, ranks)))[2],
                                               "fitted_under_config_hash": cfg.config_hash(),
                                               "seconds": round(time.time() - started, 3)}, ranks=ranks)
            return {"tokenizer": "frozen from " + cfg.tokenizer.path}, sha
        return freeze
    merge_stats(layout, parts)  # percentile rules need the merged quantiles
    texts, strata = query.tokenizer_sample(query.open_run(layout.root, refresh=True), cfg)
    if not texts:
        def none() -> tuple[dict, str | None]:
            print("corpus-lab: warning: no tokenizer fitted: the config keeps no documents (loosen the thresholds "
                  "to fit one, or set tokenizer.enabled: false)", file=sys.stderr)
            return {"tokenizer": "none (no document kept)"}, None
        return none
    info = {"state": state, "fitted_under_config_hash": cfg.config_hash(),
            "sample": {"docs": len(texts), "bytes": int(strata["bytes"].sum()), "strata": strata.to_dicts()}}
    return functools.partial(train, texts, cfg.tokenizer, layout, info, started)


def train(texts: list[str], tc: TokenizerConfig, layout: RunLayout, info: dict, started: float) -> tuple[dict, str]:
    """Fit the tokenizer on ``texts`` and save it with ``info`` (its state and sample) in ``fit.json``."""
    from lab.tokens import tokenize

    tok = tokenize.fit(texts, tc)
    kind = {} if tc.kind == "bpe" else {"kind": tc.kind}  # bpe: fit.json as before kinds
    sha = tokenize.save(tok, layout, {"state": info["state"], **kind, "vocab_size": tok.get_vocab_size(),
                                      "fitted_under_config_hash": info["fitted_under_config_hash"],
                                      "sample": info["sample"], "seconds": round(time.time() - started, 3)})
    return {"tokenizer": "fitted"}, sha


def _ranks_tmp(layout: RunLayout, ranks: bytes | None):
    """Where a tiktoken tokenizer's ranks are written before its tokenizer.json (None: not tiktoken)."""
    if ranks is None:
        return None
    from lab.tokens import tokenize

    path = layout.tokenizer_dir / tokenize.RANKS
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(ranks)
    return path


def tokenize_start(layout: RunLayout, parts: list[Partition], sha: str, strip: dict | None = None) -> list[str]:
    """The partitions to count with the tokenizer ``sha`` and the rewrite ``strip`` (``lab.tokens.tokenize.tokenize_partition`` each)."""
    layout.tokenized_dir.mkdir(parents=True, exist_ok=True)
    return tokenize_todo(layout, parts, sha, strip)


# --- materialize -------------------------------------------------------------------------------------


def materialize_reads(cfg: Config, layout: RunLayout, parts: list[Partition] | list[str]) -> dict:
    """What ``tokens/`` and ``stats/packing.json`` depend on: the config (thresholds, packing, mixture), the
    tokenizer, every partition's token counts and the selection's inputs (signals, near-dedup clusters,
    boilerplate signal)."""
    fit = read_marker(layout.tokenizer_fit)
    return {"config_hash": cfg.config_hash(), "tokenizer_sha256": fit.get("sha256"),
            "tokenized": digest(layout.tokenized_done(k) for k in keys_of(parts)),
            "partitions": partitions_digest(layout, parts),
            "near_dedup": state_digest(layout.dedup_done), "boilerplate": state_digest(layout.boilerplate_done)}


def state_digest(marker: Path) -> str:
    """A step's completion marker, by the state it records (what it read), not its timings."""
    state = read_marker(marker).get("state")
    return hashlib.blake2b(json.dumps(state, sort_keys=True).encode(), digest_size=16).hexdigest()


def tokens_current(cfg: Config, layout: RunLayout, parts: list[Partition]) -> bool:
    """Whether tokens/ holds the shards of exactly what they would be made of now: this config, the run's
    tokenizer and the token counts and selection they were made from (with their provenance)."""
    if not cfg.tokenizer.enabled:
        return True
    d = read_marker(layout.tokens / "train" / "manifest.json")
    return (read_marker(layout.tokens_done).get("reads") == materialize_reads(cfg, layout, parts)
            and d.get("provenance") == "pieces")  # shards written before provenance existed are rewritten


def materialize_needed(cfg: Config, layout: RunLayout, parts: list[Partition]) -> bool:
    """Whether materialize has to write ``tokens/`` (a tokenizer exists and the shards are not current)."""
    return cfg.tokenizer.enabled and layout.tokenizer_fit.exists() and not tokens_current(cfg, layout, parts)
