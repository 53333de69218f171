"""``corpus-lab``: the command line.

    corpus-lab run [--config FILE] [--scheduler ADDRESS] [--workers N] [--in-process] [--dry-run] ...
    corpus-lab funnel RUN_DIR [--config FILE] [--by lang|source]
    corpus-lab check RUN_DIR

``run`` with no ``--config`` builds the embedded sample (once, under ``data/sample/``), runs it into
``runs/sample/`` and prints the funnel; ``corpus-lab --help`` lists every command (docs/cli.md).
An error is one line on stderr, ``corpus-lab: error: ...``, saying what to do, and the exit status says
which kind (``EXIT_CODES``, ``lab.errors``): 2 bad input, 3 run state, 4 integrity, 5 disk full; 1 means
the command ran and its result is a failure, 130 an interruption.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from lab.config import Config, EngineConfig, InputConfig, build, load
from lab.errors import (ConfigError, DiskFullError, IntegrityError, LabError, RunStateError, StoreUnreachableError,
                        store_error)
from lab.stages import near_dedup

# exit statuses, by what the user does next (README "Exit codes"); argparse's usage errors are 2 too
SPLITS = ("train", "val", "test")
EXIT_FAILED = 1  # the command ran, its result is a failure: no document read, verify-tokens found a gap
EXIT_BAD_INPUT = 2  # fix the config, the flag or the path (ConfigError, a path the OS refuses)
EXIT_RUN_STATE = 3  # run the missing step first, or wait for the process writing the run (RunStateError)
EXIT_INTEGRITY = 4  # a file differs from what the run recorded: rerun the step or restore it (IntegrityError)
EXIT_DISK_FULL = 5  # free space and rerun: it resumes (DiskFullError)
EXIT_STORE = 6  # the object store does not answer: check the endpoint, rerun: it resumes (StoreUnreachableError)
EXIT_INTERRUPTED = 130  # Ctrl-C: rerun the same command to resume
EXIT_CODES = ((ConfigError, EXIT_BAD_INPUT), (RunStateError, EXIT_RUN_STATE), (IntegrityError, EXIT_INTEGRITY),
              (DiskFullError, EXIT_DISK_FULL), (StoreUnreachableError, EXIT_STORE))
from lab.io.run import RunLayout


def sample_config(*, build_it: bool = True) -> Config:
    """The embedded sample's config (``build_it``: build ``data/sample/`` first if it is missing)."""
    from lab.sample import build as build_sample
    from lab.sample import data_dir

    root = build_sample() if build_it else data_dir() / "sample"
    inputs = [InputConfig(path=str(root / "synthetic"), format="auto"),
              InputConfig(path=str(root / "real"), format="jsonl")]
    return Config(name="sample", inputs=tuple(inputs))


def _resolve(args: argparse.Namespace) -> Config:
    cfg = load(args.config) if args.config else sample_config(build_it=not args.dry_run)
    changes = {}
    if args.name:
        changes["name"] = args.name
    if args.output_dir:
        changes["output_dir"] = args.output_dir
    if args.mode:
        changes["mode"] = args.mode
    eng = {}
    if args.scheduler:
        eng["scheduler"] = args.scheduler
    if args.workers is not None:
        eng["n_workers"] = args.workers
    if eng:
        changes["engine"] = build(EngineConfig, {**dataclasses.asdict(cfg.engine), **eng}, "engine")
    return dataclasses.replace(cfg, **changes) if changes else cfg


def _print_funnel(df) -> None:
    import polars as pl

    cols = ["stage", "docs_in", "docs_dropped", "docs_out", "bytes_dropped", "bytes_out"]
    cols += ["raw_bytes_dropped"] if "raw_bytes_dropped" in df.columns else []
    cols += ["tokens_dropped", "tokens_out"] if "tokens_out" in df.columns else []
    with pl.Config(tbl_rows=50, tbl_cols=20, tbl_width_chars=180, float_precision=3, tbl_hide_dataframe_shape=True):
        print(df.select(*cols, "docs_retention"))


def cmd_run(args: argparse.Namespace) -> int:
    cfg = _resolve(args)
    if args.dry_run:
        from lab import reference

        print(reference.commented(cfg), end="")
        return 0
    from lab import engine, query

    args.run_dir = cfg.run_dir  # for the line an interruption prints
    shown = cfg.run_url or cfg.run_dir  # a run in object storage is named by its URL
    manifest = engine.run(cfg, progress=not args.no_progress, overwrite=args.overwrite,
                          client=engine.INPROCESS if args.in_process else None)
    t = manifest["totals"]
    lr = manifest["last_run"]
    print(f"run {shown}: {t['docs']} documents, {t['rejected']} rejected records "
          f"({lr['partitions_run']} partitions run, {lr['partitions_reused']} reused, {lr['seconds']:.1f} s)")
    if manifest["inputs"]["summary"]:
        print(f"corpus-lab: note: {manifest['inputs']['summary']} (each with why: manifest.json inputs.skipped, "
              f"{shown}/inputs.parquet)", file=sys.stderr)
    st = lr["steps"]
    print(f"  near dedup {st['near_dedup']}; tokenizer {st['tokenizer']}; tokenize "
          f"{st['tokenize']['partitions_run']} partitions; materialize {st['materialize']}")
    if t["docs"] == 0:
        print(f"corpus-lab: error: no documents were read from the inputs ({t['rejected']} rejected records); "
              f"the first reasons (all of them: corpus-lab rejects {shown}):", file=sys.stderr)
        for row in query.reject_reasons(cfg.run_dir).head(5).iter_rows(named=True):
            print(f"  {row['records']} x {row['reason']}, e.g. {', '.join(row['examples'])}", file=sys.stderr)
        return EXIT_FAILED
    quarantined = [p for p in manifest["partitions"] if p["status"] == "quarantined"]
    if quarantined:
        from lab.io.run import RunLayout
        from lab.io.writers import read_json

        print(f"{len(quarantined)} partition(s) quarantined (in {shown}/rejects/, counted as rejected; "
              "the next run tries them again):", file=sys.stderr)
        for p in quarantined[:10]:
            why = read_json(RunLayout(cfg.run_dir).done(p["key"])).get("error", "")
            print(f"  partition {p['key']} ({p['source']}): {why}", file=sys.stderr)
        if len(quarantined) > 10:
            print(f"  ... and {len(quarantined) - 10} more", file=sys.stderr)
    _print_funnel(query.funnel(cfg.run_dir, cfg, raw=True))
    _print_recall(cfg)
    if cfg.stages.decontamination.eval_sets:
        _print_contamination(query.contamination(cfg.run_dir, cfg), cfg)
    return 0


def _print_recall(cfg: Config, threshold: float | None = None) -> None:
    """The expected pair recall at the near-dup threshold (``threshold``, else the config's, when its rule
    is on) and, below 0.7, a warning on stderr saying what to do."""
    nd = cfg.stages.near_dedup
    if threshold is None and not nd.enabled:
        return
    print(near_dedup.recall_line(nd, threshold))
    warning = near_dedup.recall_warning(nd, threshold)
    if warning:
        print(f"corpus-lab: warning: {warning}", file=sys.stderr)


def _run_dir(path: str) -> Path:
    """A run directory given on the command line (a URL: this process's working copy of it, brought up to
    date), or a clear error."""
    from lab.io import mirror, storage

    run_dir = mirror.working_copy(path).path if storage.is_url(path) else Path(path)
    if storage.is_url(path):
        mirror.working_copy(path).pull()
        if not (run_dir / "config.yaml").is_file():
            raise ConfigError(f"{path!r} is not a stored run (no config.yaml under it); give the URL of a run "
                              "directory, OUTPUT_DIR/NAME, made by `corpus-lab run --output-dir OUTPUT_DIR`")
    if not (run_dir / "config.yaml").is_file():
        raise ConfigError(f"{str(run_dir)!r} is not a run directory (no config.yaml); make one with `corpus-lab run` "
                          "(runs/<name>; the embedded sample goes to runs/sample)")
    return run_dir


def cmd_funnel(args: argparse.Namespace) -> int:
    from lab import query

    run_dir = _run_dir(args.run)
    cfg = load(args.config) if args.config else load(run_dir / "config.yaml")
    df = query.funnel(run_dir, cfg, by=args.by, raw=True)
    if not args.by:
        _print_funnel(df)
        _print_recall(cfg)
        if cfg.stages.decontamination.eval_sets:
            _print_contamination(query.contamination(run_dir, cfg), cfg)
        return 0
    # one funnel per group, largest first, each with every column of the whole funnel
    first = df.filter(df["stage"] == df["stage"][0]).sort("docs_in", descending=True)
    for value in first[args.by].to_list():
        part = df.filter(df[args.by].is_null() if value is None else df[args.by] == value)
        print(f"{args.by} = {value if value is not None else '(none)'}: {part['docs_in'][0]:,} documents")
        _print_funnel(part)
    _print_recall(cfg)
    return 0


def cmd_mixture(args: argparse.Namespace) -> int:
    import polars as pl

    from lab import query

    run_dir = _run_dir(args.run)
    cfg = load(args.config) if args.config else load(run_dir / "config.yaml")
    plan = query.mixture_plan(run_dir, cfg)
    report = pl.DataFrame(plan.report)
    with pl.Config(tbl_rows=500, tbl_width_chars=160, float_precision=3, tbl_hide_dataframe_shape=True,
                   thousands_separator=","):
        print(report)
    j = plan.to_json()
    print(f"tokens: {j['tokens_before']:,} kept -> {j['tokens_after']:,} in the mixture "
          f"({j['documents_written']:,} document copies written at materialize)")
    for w in plan.warnings:
        print(f"corpus-lab: warning: {w}", file=sys.stderr)
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    import polars as pl

    from lab.select import calibrate

    run_dir = _run_dir(args.run)
    cfg = load(args.config) if args.config else load(run_dir / "config.yaml")
    cal = calibrate.calibrate(run_dir, cfg, reference=args.reference, retention=args.retention,
                              stages=tuple(args.stages.split(",")) if args.stages else calibrate.STAGES,
                              min_docs=args.min_docs)
    out = Path(args.out) if args.out else run_dir / "calibrated.yaml"
    out.write_text(calibrate.config_text(cfg, cal))
    moved = cal.report.filter(pl.col("value") != pl.col("reference_value"))
    with pl.Config(tbl_rows=200, tbl_width_chars=160, float_precision=3, tbl_hide_dataframe_shape=True):
        print(moved if moved.height else "no threshold differs from the reference language's")
    for what, why in cal.skipped.items():
        print(f"kept the base thresholds for {what}: {why}")
    n = sum(len(v) for by_lang in cal.overrides.values() for v in by_lang.values())
    print(f"{n} per-language thresholds ({cal.mode}, reference {cal.reference!r}) -> {out}; see them per language "
          f"with `corpus-lab funnel {run_dir} --config {out} --by lang`")
    return 0


def cmd_rejects(args: argparse.Namespace) -> int:
    from lab import query

    df = query.reject_reasons(_run_dir(args.run), examples=args.examples)
    if df.height == 0:
        print("no rejected records")
        return 0
    for row in df.iter_rows(named=True):
        print(f"{row['records']:>10,}  {row['reason']}  ({row['raw_bytes']:,} raw bytes)")
        for where in row["examples"]:
            print(f"{'':>12}{where}")
    return 0


def cmd_contamination(args: argparse.Namespace) -> int:
    from lab import query

    run_dir = _run_dir(args.run)
    cfg = load(args.config) if args.config else load(run_dir / "config.yaml")
    nd = cfg.stages.decontamination
    if not nd.eval_sets:
        print(f"{run_dir}: no evaluation sets configured (stages.decontamination.eval_sets); nothing was matched")
        return 0
    _print_contamination(query.contamination(run_dir, cfg), cfg)
    return 0


def _print_contamination(df, cfg) -> None:
    nd = cfg.stages.decontamination
    print(f"documents with >= {nd.min_matches} matching {nd.ngram}-grams, by the evaluation set most of their "
          f"matches come from ({', '.join(s.name for s in nd.eval_sets)}):")
    if df.height == 0:
        print("  none")
    for row in df.iter_rows(named=True):
        tokens = ", tokens not counted" if row["tokens"] is None else f", {row['tokens']:,} tokens"
        print(f"  {row['eval_set']}: {row['documents']:,} documents{tokens}, {row['matched_ngrams']:,} matching "
              f"n-grams, longest overlap {row['longest_words']:,} words")


def cmd_urls(args: argparse.Namespace) -> int:
    from lab import query

    run_dir = _run_dir(args.run)
    for row in query.urls(run_dir).iter_rows(named=True):
        print(f"{row['documents']:>10,}  {row['what']}")
    top = query.top_domains(run_dir, args.top)
    if top.height:
        print(f"\ntop {top.height} registered domains by documents:")
        for row in top.iter_rows(named=True):
            print(f"{row['documents']:>10,}  {row['domain']}  ({row['bytes']:,} bytes)")
    return 0


def cmd_labels(args: argparse.Namespace) -> int:
    import polars as pl

    from lab import query
    from lab.quality import labels

    run_dir = _run_dir(args.run)
    cfg = load(args.config) if args.config else load(run_dir / "config.yaml")
    if args.export:
        n = labels.export(run_dir, args.export)
        print(f"wrote {n} labels to {args.export}")
    if args.compact:
        c = labels.compact(run_dir)
        print(f"compacted {c['merged']} label files ({c['labels']} labels) into {c['file'] or 'none: nothing to merge'}")
    df = query.stage_precision(run_dir, cfg)
    with pl.Config(tbl_rows=50, tbl_cols=20, tbl_width_chars=180, float_precision=3, tbl_hide_dataframe_shape=True):
        print(df)
    if not df["labelled"].sum():
        print(f"no labels in {run_dir}/labels/ yet: label documents in the dashboard (corpus-lab serve) or with "
              "lab.quality.labels.add")
    for p in query.label_problems(run_dir):
        print(f"corpus-lab: warning: skipped {p}", file=sys.stderr)
    return 0


def cmd_train_quality(args: argparse.Namespace) -> int:
    from lab.quality import train as quality_train

    run_dir = _run_dir(args.run)
    cfg = quality_train.TrainConfig(seed=args.seed, held_out=args.held_out, cut=args.cut, max_docs=args.max_docs,
                                    negative_ratio=args.negative_ratio, max_chars=args.max_chars,
                                    char_ngrams=(3, 5) if args.char_ngrams else ())
    report = quality_train.train(run_dir, positives=args.positives, negatives=args.negatives, out=args.out, cfg=cfg)
    print(quality_train.report_text(report))
    print(f"report: {quality_train.report_path(Path(report['model']))}")
    return 0


def cmd_clusters(args: argparse.Namespace) -> int:
    import polars as pl

    from lab import query

    run_dir = _run_dir(args.run)
    with pl.Config(tbl_rows=500, tbl_width_chars=180, float_precision=3, fmt_str_lengths=60):
        if args.show is not None:
            members = query.cluster_members(run_dir, args.show, args.threshold)
            if not members.height:
                raise ConfigError(f"--show {args.show}: no cluster with that id at Jaccard >= {args.threshold:.2f}; "
                                  "list them with `corpus-lab clusters RUN` (the cluster_id column)")
            print(_members_text(members, args.show, args.threshold))
            return 0
        n = query.cluster_count(run_dir, args.threshold)
        print(f"{n['clusters']} clusters of {n['documents']} documents at Jaccard >= {args.threshold:.2f}")
        _print_recall(load(run_dir / "config.yaml"), args.threshold)
        print(query.clusters(run_dir, args.threshold, sort=args.sort, offset=args.offset, limit=args.limit))
    return 0


def _members_text(members, cluster_id: int, threshold: float, chars: int = 160) -> str:
    """A cluster's members, each with where it comes from, what happens to it and the start of its text."""
    kept = sum(s == "kept" for s in members["status"])
    out = [f"cluster {cluster_id} at Jaccard >= {threshold:.2f}: {members.height} members, {kept} kept"]
    for d in members.iter_rows(named=True):
        why = d["status"] + (f" ({d['reason']})" if d["reason"] else "")
        out.append(f"\ndoc {d['doc_id']} · {d['source']} @ {d['locator']} · {d['lang'] or '-'} · {d['bytes']:,} bytes · {why}")
        if d["url"]:
            out.append(f"  url  {d['url']}")
        text = " ".join((d["text"] or "").split())
        out.append(f"  text {text[:chars]}{'…' if len(text) > chars else ''}")
    return "\n".join(out)


def cmd_check(args: argparse.Namespace) -> int:
    from lab import check

    run_dir = _run_dir(args.run)
    found = check.check(run_dir)
    for f in found:
        print(f"stale: {f.line()}")
    if found:
        print(f"corpus-lab: error: {len(found)} outputs of {run_dir} no longer match what they were made from; rerun "
              f"`corpus-lab run --config {run_dir}/config.yaml` to bring them up to date (it redoes only those)",
              file=sys.stderr)
        return EXIT_INTEGRITY
    print(f"{run_dir}: every output matches what it was made from (inputs compared by content)")
    return 0


def cmd_verify_tokens(args: argparse.Namespace) -> int:
    from lab import check
    from lab.tokens import loader

    run_dir = _run_dir(args.run)
    found = check.check(run_dir)  # the tokens are only as current as every step they were made from
    for f in found:
        if f.why.startswith(check.UNLISTABLE):
            print(f"corpus-lab: warning: {f.why}; the tokens are checked against the run directory only",
                  file=sys.stderr)
    stale = [f for f in found if not f.why.startswith(check.UNLISTABLE)]
    if stale:
        for f in stale:
            print(f"stale: {f.line()}", file=sys.stderr)
        print(f"corpus-lab: error: {run_dir}/tokens no longer matches what it would be made of now ({len(stale)} "
              f"stale outputs above); rerun `corpus-lab run --config {run_dir}/config.yaml`", file=sys.stderr)
        return EXIT_INTEGRITY
    split_dir = run_dir / "tokens" / args.split
    res = loader.verify(split_dir, world_size=args.world, num_workers=args.workers, seed=args.seed, epoch=args.epoch,
                        save_at=args.save_at)
    print(f"{split_dir}: {res['sequences']} sequences x {res['seq_len']} tokens, world {args.world} x "
          f"{args.workers} workers = {res['streams']} streams, saved and restored at {args.save_at:.0%} of each")
    print(f"tokens {res['tokens']}, delivered {res['delivered']}, duplicates {res['duplicates']}, "
          f"missing {res['missing']}, mismatched {res['mismatched']}")
    print("OK: every token delivered exactly once" if res["ok"] else "FAILED")
    return 0 if res["ok"] else EXIT_FAILED


def cmd_read_tokens(args: argparse.Namespace) -> int:
    import time as _time

    from lab.tokens import loader

    run_dir = _run_dir(args.run)
    ld = loader.TokenLoader(run_dir / "tokens" / args.split, rank=args.rank, world_size=args.world,
                            prefetch=args.prefetch, stall_ms=args.stall_ms, seed=args.seed)
    steps = min(args.steps, len(ld)) if args.steps else len(ld)
    for i, _sample in zip(range(steps), ld):
        if args.step_ms:
            _time.sleep(args.step_ms / 1000)  # the trainer's step
    name = args.name or f"read-{args.split}-r{args.rank}of{args.world}-p{args.prefetch}"
    out = ld.write_telemetry(run_dir / "telemetry" / name)
    t = ld.telemetry()
    print(f"{steps} steps of {run_dir / 'tokens' / args.split} (prefetch {args.prefetch}, a step of "
          f"{args.step_ms:g} ms): wait p50 {t['p50_ms']} ms, p99 {t['p99_ms']} ms, max {t['max_ms']} ms, "
          f"{t['stalls']} stalls over {t['stall_ms']:g} ms -> {out['table']}")
    return 0


def cmd_trace(args: argparse.Namespace) -> int:
    from lab.tokens import provenance

    t = provenance.trace(_run_dir(args.run), args.split, args.shard, args.seq, args.pos, window=args.window)
    at = f"{args.split} shard {args.shard} sequence {args.seq} position {args.pos}"
    if t.get("padding"):
        print(f"{at}: padding (the sequence holds {t['real_tokens']} real tokens, positions 0..{t['real_tokens'] - 1})")
        return 0
    eod = " (the document's EOD)" if t["offset"] == t["doc_tokens"] - 1 else ""
    print(f"{at}: doc {t['doc_id']}, token {t['offset']} of {t['doc_tokens']}{eod}, id {t['token_id']}")
    print(f"  source  {t['source']} @ {t['locator']}")
    if t["url"]:
        print(f"  url     {t['url']}")
    print(f"  text    {t['before']!r} [{t['token']!r}] {t['after']!r}")
    return 0


def cmd_export_megatron(args: argparse.Namespace) -> int:
    from lab.tokens import export

    run_dir = _run_dir(args.run)
    out = Path(args.out) / f"{args.split}_text_document"
    r = export.export_megatron(run_dir / "tokens" / args.split, out)
    print(f"{r['documents']} documents, {r['tokens']} tokens ({r['dtype']}) -> {r['bin']}, {r['idx']}")
    print(f"Megatron-LM: --data-path {out}  (IndexedDataset prefix; one sequence per document)")
    return 0


def cmd_fertility(args: argparse.Namespace) -> int:
    import polars as pl

    from lab.plan import fertility

    run_dir = _run_dir(args.run)
    cfg = load(args.config) if args.config else load(run_dir / "config.yaml")
    sizes = tuple(int(v) for v in args.vocab_sizes.split(","))
    uni = tuple(int(v) for v in args.unigram_sizes.split(",") if v.strip())
    params = {"vocab_sizes": list(sizes), "unigram_sizes": list(uni), "d_model": args.d_model,
              "held_out": args.held_out, "tokenizers": list(args.tokenizer)}
    made_from = fertility.reads(run_dir, cfg, params)
    if fertility.recorded_reads(run_dir) == made_from:  # nothing it reads moved: the stored table is current
        table = fertility.read(run_dir)
        print(f"reused: {run_dir}/stats/fertility.parquet (made from the same documents, config and candidates)")
    else:
        table = fertility.compare(run_dir, cfg, vocab_sizes=sizes, d_model=args.d_model, held_out=args.held_out,
                                  unigram_sizes=uni, tokenizers=tuple(args.tokenizer))
        fertility.write(run_dir, table, made_from)
    every = table.filter(pl.col("group_by") == "all")
    with pl.Config(tbl_rows=100, tbl_width_chars=180, float_precision=3, fmt_str_lengths=40,
                   tbl_hide_dataframe_shape=True):
        print(every.select("candidate", "vocab_size", "embedding_params", "tokens", "tokens_per_word",
                           "bytes_per_token", "continued_words"))
    notes = [(c, n) for c, n in zip(every["candidate"], every["note"]) if n]
    if notes:  # why rows are alike (a vocabulary the sample could not fill) or empty (a candidate skipped)
        print("notes:")
        for c, n in notes:
            print(f"  {c}: {n}")
    print(f"written: {run_dir}/stats/fertility.json and .parquet (lab.query.fertility_comparison)")
    return 0


def cmd_reference(args: argparse.Namespace) -> int:
    from lab import reference

    print(reference.markdown(), end="")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    run_dir = _run_dir(args.run)
    from apps import dashboard

    shown = args.run if run_dir != Path(args.run) else run_dir  # a stored run by its URL
    print(f"corpus-lab dashboard for {shown} on http://{args.address}:{args.port}/ (Ctrl-C stops it)", flush=True)
    dashboard.serve(run_dir, address=args.address, port=args.port, basic_auth=args.basic_auth, config=args.config)
    return 0


def cmd_sample(args: argparse.Namespace) -> int:
    from lab.sample import build as build_sample

    print(build_sample(force=args.force))
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="corpus-lab", description="Curate LLM pretraining corpora: annotate once, "
                                "select many times, materialize once.")
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("run", help="annotate the inputs of a config (default: the embedded sample) and print the funnel")
    r.add_argument("--config", help="YAML config (see `corpus-lab run --dry-run` for every key and its default)")
    r.add_argument("--name", help="run name (directory under output_dir)")
    r.add_argument("--output-dir", help="where run directories go (default: runs)")
    r.add_argument("--mode", choices=("explore", "batch"), help="explore: every signal; batch: stop at the first failing stage")
    r.add_argument("--scheduler", help="address of an existing Dask scheduler, e.g. tcp://127.0.0.1:8786")
    r.add_argument("--workers", type=int, help="LocalCluster worker processes (default: one per core)")
    r.add_argument("--in-process", action="store_true",
                   help="run every task in this process, no Dask cluster (small inputs; the same outputs)")
    r.add_argument("--dry-run", action="store_true", help="print the resolved config, each key with its meaning, and exit")
    r.add_argument("--overwrite", action="store_true", help="replace an existing run of different inputs")
    r.add_argument("--no-progress", action="store_true", help="no progress bar")
    r.set_defaults(func=cmd_run)

    f = sub.add_parser("funnel", help="print the funnel of a run under its own or another config")
    f.add_argument("run", help="run directory, e.g. runs/sample")
    f.add_argument("--config", help="thresholds to apply (default: the run's config.yaml)")
    f.add_argument("--by", choices=("lang", "source"), help="one funnel per language or per source")
    f.set_defaults(func=cmd_funnel)

    ca = sub.add_parser("calibrate", help="per-language thresholds where the reference language's cut its own "
                                          "distribution (or at a target retention), as a config")
    ca.add_argument("run", help="run directory, e.g. runs/sample")
    ca.add_argument("--config", help="the thresholds to calibrate (default: the run's config.yaml)")
    ca.add_argument("--reference", default="en", help="the language whose thresholds are the model (default: en)")
    ca.add_argument("--retention", type=float, help="instead: the share of each language's documents the "
                                                    "calibrated rules keep together, e.g. 0.7")
    ca.add_argument("--stages", help="comma-separated stages to calibrate (default: gopher_quality, "
                                     "gopher_repetition, c4, fineweb)")
    ca.add_argument("--min-docs", type=int, default=50, help="languages with fewer documents keep the base "
                                                              "thresholds (default: 50)")
    ca.add_argument("--out", help="where to write the config (default: RUN/calibrated.yaml)")
    ca.set_defaults(func=cmd_calibrate)

    mx = sub.add_parser("mixture", help="a config's mixture over a run's kept documents: tokens per bucket before "
                                        "and after, epochs, copies (what materialize writes)")
    mx.add_argument("run", help="run directory, e.g. runs/sample")
    mx.add_argument("--config", help="the config whose mixture section to realize (default: the run's config.yaml)")
    mx.set_defaults(func=cmd_mixture)

    rj = sub.add_parser("rejects", help="a run's rejected records by reason, with the first locations of each")
    rj.add_argument("run", help="run directory, e.g. runs/sample")
    rj.add_argument("--examples", type=int, default=3, help="locations shown per reason (default 3)")
    rj.set_defaults(func=cmd_rejects)

    ct = sub.add_parser("contamination", help="documents matching the evaluation sets, per set, with their tokens")
    ct.add_argument("run", help="run directory, e.g. runs/sample")
    ct.add_argument("--config", help="min_matches to apply (default: the run's config.yaml)")
    ct.set_defaults(func=cmd_contamination)

    ur = sub.add_parser("urls", help="documents with and without a URL, blocked ones per list category, top domains")
    ur.add_argument("run", help="run directory, e.g. runs/sample")
    ur.add_argument("--top", type=int, default=10, help="registered domains listed (default 10)")
    ur.set_defaults(func=cmd_urls)

    lb = sub.add_parser("labels", help="each stage's precision by the run's labels (good/bad); export the labels")
    lb.add_argument("run", help="run directory, e.g. runs/sample")
    lb.add_argument("--config", help="thresholds to judge (default: the run's config.yaml)")
    lb.add_argument("--export", metavar="PATH", help="write every label to PATH: .parquet, .csv or .jsonl")
    lb.add_argument("--compact", action="store_true", help="merge the label files into one (faster cold reads)")
    lb.set_defaults(func=cmd_labels)

    tq = sub.add_parser("train-quality", help="fit a quality classifier (good vs bad) for the quality_model stage")
    tq.add_argument("run", help="run directory, e.g. runs/sample")
    tq.add_argument("--positives", metavar="INPUT", help="reference corpus of good text (JSONL, Parquet, text files); "
                                                          "default: the run's documents labelled good")
    tq.add_argument("--negatives", metavar="INPUT", help="text to tell apart from it: a path, or 'sample' for a seeded "
                                                          "random sample of the run; default: the documents labelled "
                                                          "bad, or the sample if there are none")
    tq.add_argument("--out", metavar="PATH", help="where the model goes (.npz; default RUN/models/quality.npz)")
    tq.add_argument("--seed", type=int, default=0, help="the held-out split and the random negatives (default 0)")
    tq.add_argument("--held-out", type=float, default=0.2, help="share of each class kept for the report (default 0.2)")
    tq.add_argument("--cut", type=float, default=0.5, help="score at which precision/recall are reported (default 0.5)")
    tq.add_argument("--max-docs", type=int, default=20_000, help="documents per class at most (default 20000)")
    tq.add_argument("--negative-ratio", type=float, default=1.0, help="sampled negatives per positive (default 1)")
    tq.add_argument("--max-chars", type=int, default=10_000, help="characters of each document used (default 10000)")
    tq.add_argument("--char-ngrams", action="store_true", help="add char 3-5-grams (about 4x slower to score)")
    tq.set_defaults(func=cmd_train_quality)

    c = sub.add_parser("clusters", help="list a run's near-duplicate clusters at a Jaccard threshold, or one cluster")
    c.add_argument("run", help="run directory, e.g. runs/sample")
    c.add_argument("--threshold", type=float, default=0.8, help="one of 0.50, 0.55, ..., 0.95 (default 0.8)")
    c.add_argument("--sort", default="size", choices=("size", "min_jaccard", "mean_jaccard", "cluster_id"))
    c.add_argument("--offset", type=int, default=0)
    c.add_argument("--limit", type=int, default=20)
    c.add_argument("--show", type=int, metavar="CLUSTER_ID", help="list the members of one cluster instead")
    c.set_defaults(func=cmd_clusters)

    rt = sub.add_parser("read-tokens", help="read a split as a trainer would and record the loader's waits "
                                            "(RUN/telemetry/NAME: the dashboard plots them)")
    rt.add_argument("run", help="run directory, e.g. runs/sample")
    rt.add_argument("--split", default="train")
    rt.add_argument("--steps", type=int, default=0, help="sequences to read (default: the whole stream)")
    rt.add_argument("--step-ms", type=float, default=0.0, help="the trainer's time per step, slept after each")
    rt.add_argument("--prefetch", type=int, default=0, help="sequences read ahead on a thread (0: none)")
    rt.add_argument("--stall-ms", type=float, default=1.0, help="a wait longer than this counts as a stall")
    rt.add_argument("--rank", type=int, default=0)
    rt.add_argument("--world", type=int, default=1)
    rt.add_argument("--seed", type=int, default=0)
    rt.add_argument("--name", help="the telemetry's name (default: read-SPLIT-rRANKofWORLD-pPREFETCH)")
    rt.set_defaults(func=cmd_read_tokens)

    v = sub.add_parser("verify-tokens", help="prove a split's tokens are delivered exactly once per epoch by the loader")
    v.add_argument("run", help="run directory, e.g. runs/sample")
    v.add_argument("--split", default="train", choices=SPLITS)
    v.add_argument("--world", type=int, default=2, help="data-parallel ranks (default 2)")
    v.add_argument("--workers", type=int, default=3, help="loader workers per rank (default 3)")
    v.add_argument("--seed", type=int, default=0)
    v.add_argument("--epoch", type=int, default=0)
    v.add_argument("--save-at", type=float, default=0.5, help="save and restore each stream at this fraction")
    v.set_defaults(func=cmd_verify_tokens)
    ck = sub.add_parser("check", help="name every output of a run whose inputs changed since it was made (exit 4), "
                                      "inputs compared by content")
    ck.add_argument("run", help="run directory, e.g. runs/sample")
    ck.set_defaults(func=cmd_check)

    tr = sub.add_parser("trace", help="the document (source, locator, url, text around it) a token of a split came from")
    tr.add_argument("run", help="run directory, e.g. runs/sample")
    tr.add_argument("--split", default="train", choices=SPLITS)
    tr.add_argument("--shard", type=int, required=True, help="shard number within the split (shard-NNNNN)")
    tr.add_argument("--seq", type=int, required=True, help="sequence within the shard")
    tr.add_argument("--pos", type=int, required=True, help="token position within the sequence")
    tr.add_argument("--window", type=int, default=12, help="tokens of context either side (default 12)")
    tr.set_defaults(func=cmd_trace)

    em = sub.add_parser("export-megatron", help="a split as a Megatron-LM / NeMo IndexedDataset (.bin + .idx)")
    em.add_argument("run", help="run directory, e.g. runs/sample")
    em.add_argument("--split", default="train", choices=SPLITS)
    em.add_argument("--out", required=True, help="directory for SPLIT_text_document.bin and .idx")
    em.set_defaults(func=cmd_export_megatron)

    fe = sub.add_parser("fertility", help="compare tokenizers (fitted vocabulary sizes, offline references) on a run")
    fe.add_argument("run", help="run directory, e.g. runs/sample")
    fe.add_argument("--config", help="thresholds: which documents count (default: the run's config.yaml)")
    fe.add_argument("--vocab-sizes", default="8000,16000,32000,64000", help="fitted BPE sizes, comma-separated")
    fe.add_argument("--unigram-sizes", default="32000", help="fitted Unigram sizes, comma-separated ('' for none)")
    fe.add_argument("--tokenizer", action="append", default=[],
                    help="an existing tokenizer to compare (repeatable): a tokenizer.json, a directory holding one, "
                         "or tiktoken:cl100k_base; the run's own is included when tokenizer.kind is file")
    fe.add_argument("--d-model", type=int, default=4096, help="model width for the embedding cost V x d")
    fe.add_argument("--held-out", action="store_true", help="measure only documents outside the fit sample")
    fe.set_defaults(func=cmd_fertility)

    sv = sub.add_parser("serve", help="serve the dashboard for a run (localhost by default)")
    sv.add_argument("run", nargs="?", default="runs/sample", help="run directory or its URL (default runs/sample)")
    sv.add_argument("--address", default="127.0.0.1", help="address to listen on (0.0.0.0 for a team)")
    sv.add_argument("--port", type=int, default=5006)
    sv.add_argument("--config", help="open pages at this config's thresholds (e.g. RUN/calibrated.yaml from "
                                     "corpus-lab calibrate); a page's link holds its own")
    sv.add_argument("--basic-auth", help="a password, or a JSON file of user: password, required to open the page "
                                         "(use it when serving beyond localhost)")
    sv.set_defaults(func=cmd_serve)

    rf = sub.add_parser("reference", help="every config key: type, default and meaning (Markdown)")
    rf.set_defaults(func=cmd_reference)

    s = sub.add_parser("sample", help="build the embedded sample corpus under data/sample/")
    s.add_argument("--force", action="store_true", help="rebuild even if it exists")
    s.set_defaults(func=cmd_sample)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        code = args.func(args)
        _store_back(args)
        return code
    except BrokenPipeError:  # the reader went away (| head): stop quietly, as other command-line tools do
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        run_dir = getattr(args, "run_dir", None)
        done = len(list(RunLayout(run_dir).stats.glob("part-*.json"))) if run_dir else 0
        where = f"; {done} partitions of {run_dir} complete: rerun the same command to resume" if run_dir else ""
        print(f"corpus-lab: interrupted{where}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except LabError as e:
        print(f"corpus-lab: error: {_one_line(str(e))}", file=sys.stderr)
        return exit_code(e)
    except Exception as e:  # noqa: BLE001 - a store's client raises errors of its own
        err = store_error(e, _where(args))
        if err is e:
            if isinstance(e, OSError):
                return _os_error(e)
            raise
        print(f"corpus-lab: error: {_one_line(str(err))}", file=sys.stderr)
        return exit_code(err)


def _where(args: argparse.Namespace) -> str:
    """What a command was working on, for an error of the store: the run's URL or directory, else its inputs."""
    for name in ("run", "output_dir"):
        if isinstance(getattr(args, name, None), str):
            return getattr(args, name)
    return str(getattr(args, "run_dir", None) or "the inputs")


def _os_error(e: OSError) -> int:
    """An unwritable output directory, a full disk, a vanished input: one line naming the path and the fix."""
    import errno

    fix = {errno.EROFS: "; write the run elsewhere (--output-dir) or remount the filesystem read-write",
           errno.EACCES: "; write the run elsewhere (--output-dir) or give this user write permission",
           errno.ENOTDIR: "; a file is in the way of a directory the run needs: move it or choose another "
                          "--output-dir"}.get(e.errno, "")
    print(f"corpus-lab: error: {e.strerror or e}: {e.filename or ''}".rstrip(": ") + fix, file=sys.stderr)
    return EXIT_DISK_FULL if DiskFullError.is_disk_full(e) else EXIT_BAD_INPUT


def _store_back(args: argparse.Namespace) -> None:
    """A command on a run in object storage: what it wrote there (labels, a model, a table) goes to the store."""
    from lab.io import mirror, storage

    run = getattr(args, "run", None)
    if isinstance(run, str) and storage.is_url(run):
        mirror.working_copy(run).push()


def exit_code(error: LabError) -> int:
    """The exit status of an error, by what the user does next (``EXIT_CODES``, first match).

    >>> from lab.errors import NotReadyError
    >>> exit_code(ConfigError("bad key")), exit_code(NotReadyError("no tokens")), exit_code(IntegrityError("sha256"))
    (2, 3, 4)
    """
    return next((code for cls, code in EXIT_CODES if isinstance(error, cls)), EXIT_BAD_INPUT)


def _one_line(message: str) -> str:
    """An error message on one line (a YAML parser's message spans several).

    >>> _one_line("c.yaml is not valid YAML: while parsing\\n  in 'c.yaml', line 1")
    "c.yaml is not valid YAML: while parsing in 'c.yaml', line 1"
    """
    return " ".join(line.strip() for line in message.splitlines() if line.strip())


if __name__ == "__main__":
    sys.exit(main())
