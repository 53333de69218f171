"""Annotate throughput per core, and agreement of keep/drop decisions with datatrove.

On the same JSONL documents that ``bench/datatrove_filters.py`` ran (default
bench/out/docs_en.jsonl from make_docs.py), in one single-threaded process:

- CPU seconds per document of each corpus-lab stage's ``signals`` (docs/s and MB/s per core),
  of Gopher quality + repetition together (the datatrove comparison), and of every stage.
  Standalone: each stage alone over all documents (its collector's ``signals`` when it has one, as
  the engine calls it), with the shared per-text caches (``text.words``' chunk cache and last text,
  ``segment``'s last words, ``langid.detect``'s answers) emptied before each stage, so every stage
  pays for its own word split and language ID;
- every stage the way the engine runs them: ``lab.annotate.annotate_docs`` over all documents, one
  at a time, in explore mode (``batch_rules=None``) with ``new_collectors(cfg, 4)`` and the default
  config; the ``clock`` it fills gives CPU seconds per stage. Stages that share one word split
  (gopher_quality, gopher_repetition, fineweb, near_dedup) or language ID (language,
  gopher_quality): the first that asks pays for it, the later ones get it free; c4's sentence count
  splits its kept lines through the same chunk cache, so it finds most chunks already split. near_dedup's clock
  holds its MinHash signatures (word shingles + signature); pii's holds its signals and the scrub;
- tokenize: ``lab.tokens.tokenize.encode`` (what a tokenize task runs: ids + continued words; for a
  fitted byte-level BPE and a call of >= 1M characters, tiktoken over its ranks, ``lab.tokens.fast_encode``)
  of all texts in one call, with the tokenizer of --run (default runs/sample) loaded as the engine
  does (``lab.tokens.tokenize.load``); the fast encoder's one-off build per process is timed apart;
- a table per stage: corpus-lab MB per CPU-second (engine clock, and standalone) next to its
  datatrove counterpart's (bench/out/datatrove_filters.json, "filters" and "steps" sections, from
  ``bench/datatrove_filters.py``) and the ratio;
- the ratio to datatrove's Gopher quality + repetition docs per CPU-second
  (bench/out/datatrove_filters.json);
- language ID: ``lab.stages.language.signals`` against the bare fastText model
  (``predict`` on the same 10,000-character input) on the same texts;
- agreement: for each of gopher_quality, gopher_repetition, c4 and fineweb, the fraction of
  documents on which corpus-lab's default rules and datatrove's filter make the same keep/drop
  decision (bench/out/datatrove_filters.parquet), with the disagreeing ids listed.

    .venv/bin/python bench/annotate.py [--input bench/out/docs_en.jsonl] [--limit N]
"""

from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "RAYON_NUM_THREADS"):
    os.environ[_v] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import pyarrow.parquet as pq  # noqa: E402

from lab.tokens import tokenize  # noqa: E402
from lab.annotate import CHUNK_DOCS, annotate_docs, new_collectors  # noqa: E402
from lab.config import Config  # noqa: E402
from lab.doc import Doc  # noqa: E402
from lab.io.run import RunLayout  # noqa: E402
from lab.select.rules import first_failure  # noqa: E402
from lab.stages import STAGES, c4, fineweb, gopher_quality, gopher_repetition  # noqa: E402
from lab.text import langid, segment  # noqa: E402
from lab.text import words as text_words  # noqa: E402

# corpus-lab stage -> (datatrove counterpart, where its rate is in datatrove_filters.json); None: none
COUNTERPARTS = {
    "url": None, "extract": None,
    "language": ("LanguageFilter", "steps", "language"),
    "gopher_quality": ("GopherQualityFilter", "filters", "gopher_quality"),
    "gopher_repetition": ("GopherRepetitionFilter", "filters", "gopher_repetition"),
    "c4": ("C4QualityFilter", "filters", "c4"),
    "fineweb": ("FineWebQualityFilter", "filters", "fineweb"),
    "boilerplate": None, "decontamination": None, "quality_model": None, "exact_dedup": None,
    "near_dedup": ("MinhashDedupSignature (shingles + signature)", "steps", "minhash_signature"),
    "pii": ("PIIFormatter", "steps", "pii"),
    "tokenize": ("tokenizers encode_batch (1000/batch)", "steps", "tokenize"),
}


def forget_shared() -> None:
    """Empty the per-text caches the stages share, so the next stage pays for its own words."""
    text_words._CACHE.clear()
    text_words._RECENT = text_words.Recent()
    segment._RECENT = text_words.Recent()
    langid._DETECTED.clear()
    langid.model().forget()  # the words the language model has seen, as in a new process


def stage_calls(cfg: Config, docs: list[Doc]) -> dict:
    """stage -> fn(i, text): the stage's collector ``signals`` when it has one, else its ``signals``."""
    collectors = new_collectors(cfg, 4)
    return {m.NAME: ((lambda i, t, c=collectors[m.NAME]: c.signals(i, t, docs[i])) if m.NAME in collectors
                     else (lambda i, t, f=m.signals: f(t))) for m in STAGES}


def engine_clock(cfg: Config, docs: list[Doc]) -> tuple[dict, float]:
    """annotate_docs over all documents in the engine's chunks (``lab.annotate.CHUNK_DOCS`` at a time, stage by
    stage), explore mode: (clock, process CPU seconds)."""
    annotate_docs(docs[:1], cfg, None, {}, new_collectors(cfg, 4), 0)  # warm-up: models, regexes
    forget_shared()
    collectors, clock = new_collectors(cfg, 4), {}
    t = time.process_time()
    for i in range(0, len(docs), CHUNK_DOCS):
        annotate_docs(docs[i:i + CHUNK_DOCS], cfg, None, clock, collectors, i)
    return clock, time.process_time() - t


def tokenize_time(run: Path, texts: list[str]) -> dict:
    """lab.tokens.tokenize.encode of all texts in one call, the engine's tokenizer of ``run``."""
    layout = RunLayout(run)
    if not layout.tokenizer_json.exists():
        return {"skipped": f"no {layout.tokenizer_json}"}
    tok = tokenize.load(layout, layout.tokenizer_sha.read_text().strip())
    t = time.process_time()
    fast = tokenize._fast_encoder(tok, texts)  # the one-off build (the first big call makes it)
    build = time.process_time() - t
    ids, _ = tokenize.encode(tok, texts)  # warm-up pass (tiktoken's caches)
    passes = []
    for _ in range(2):
        t = time.process_time()
        ids, _ = tokenize.encode(tok, texts)
        passes.append(time.process_time() - t)
    return {"tokenizer": str(layout.tokenizer_json), "encoder": type(fast).__name__ if fast else "tokenizers",
            "fast_encoder_build_cpu_s": round(build, 3), "cpu_s": round(min(passes), 3),
            "passes_cpu_s": [round(p, 3) for p in passes], "tokens": int(sum(a.size for a in ids))}


def cpu_time(fn, texts: list[str]) -> float:
    t = time.process_time()
    for x in texts:
        fn(x)
    return time.process_time() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--input", default="bench/out/docs_en.jsonl")
    ap.add_argument("--datatrove", default="bench/out/datatrove_filters")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--out", default="bench/out/annotate.json")
    ap.add_argument("--run", default="runs/sample", help="run directory whose tokenizer tokenize uses")
    args = ap.parse_args()

    rows = [json.loads(line) for line in open(args.input)]
    if args.limit:
        rows = rows[: args.limit]
    texts = [r["text"] for r in rows]
    n, mb = len(texts), sum(len(t.encode()) for t in texts) / 1e6
    langid.model()  # load once, outside the clock
    cfg = Config()
    docs = [Doc(source=Path(args.input).name, locator=i, text=t, raw_bytes=len(t.encode()))
            for i, t in enumerate(texts)]
    calls = stage_calls(cfg, docs)
    for fn in calls.values():  # warm-up (regex compilation, imports, models)
        fn(0, texts[0])

    per_stage = {}
    for name, fn in stage_calls(cfg, docs).items():  # fresh collectors
        forget_shared()
        t = time.process_time()
        for i, x in enumerate(texts):
            fn(i, x)
        per_stage[name] = time.process_time() - t
    clock, engine_cpu = engine_clock(cfg, docs)
    tok = tokenize_time(Path(args.run), texts)
    gopher = per_stage["gopher_quality"] + per_stage["gopher_repetition"]
    total = sum(per_stage.values())
    bare = langid.fasttext_model()
    bare_s = cpu_time(lambda t: bare.predict(t[: langid.MAX_CHARS].replace("\n", " "), k=1), texts)

    res: dict = {"input": args.input, "docs": n, "mb": round(mb, 3),
                 "stage_docs_per_cpu_s": {k: round(n / v, 1) for k, v in per_stage.items()},
                 "stage_mb_per_cpu_s": {k: round(mb / v, 3) for k, v in per_stage.items()},
                 "engine": {"how": "lab.annotate.annotate_docs, in chunks of CHUNK_DOCS stage by stage (as the engine), explore mode, "
                                   "new_collectors(cfg, 4), default config; clock = CPU s per stage",
                            "shared_work": "one word split (gopher_quality, gopher_repetition, fineweb, "
                                           "near_dedup) and one language ID (language, gopher_quality) per "
                                           "document: the first stage that asks pays for it; c4's sentence "
                                           "count reuses text.words' chunk cache (chunks already split)",
                            "process_cpu_s": round(engine_cpu, 3), "clock_sum_cpu_s": round(sum(clock.values()), 3),
                            "stage_cpu_s": {k: round(v, 4) for k, v in clock.items()},
                            "stage_mb_per_cpu_s": {k: round(mb / v, 3) if v else None for k, v in clock.items()},
                            "mb_per_cpu_s": round(mb / engine_cpu, 3)},
                 "tokenize": {**tok, **({"mb_per_cpu_s": round(mb / tok["cpu_s"], 3)} if "cpu_s" in tok else {})},
                 "gopher_quality_repetition": {"docs_per_cpu_s": round(n / gopher, 1), "mb_per_cpu_s": round(mb / gopher, 3)},
                 "all_stages": {"docs_per_cpu_s": round(n / total, 1), "mb_per_cpu_s": round(mb / total, 3)},
                 "language_vs_bare_model": {"ours_docs_per_cpu_s": round(n / per_stage["language"], 1),
                                            "bare_docs_per_cpu_s": round(n / bare_s, 1),
                                            "ratio": round(bare_s / per_stage["language"], 3)}}

    dt_json = Path(args.datatrove + ".json")
    dt_parquet = Path(args.datatrove + ".parquet")
    if dt_json.exists() and dt_parquet.exists():
        dt = json.loads(dt_json.read_text())
        dt_rate = dt["gopher_quality+repetition"]["both_on_every_doc"]["docs_per_cpu_s"]
        table = pq.read_table(dt_parquet).to_pylist()
        by_id = {r["id"]: r for r in table}
        agree = {}
        for mod in (gopher_quality, gopher_repetition, c4, fineweb):
            rules = mod.rules(mod.Config())
            same, diff = 0, []
            for r in rows:
                d = by_id.get(r["id"])
                if d is None:
                    continue
                ours = first_failure(rules, mod.signals(r["text"])) is None
                if ours == d[f"{mod.NAME}_keep"]:
                    same += 1
                else:
                    diff.append(r["id"])
            compared = same + len(diff)
            agree[mod.NAME] = {"compared": compared, "agreement": round(same / compared, 4) if compared else None,
                               "disagreeing_ids": diff[:20]}
        res["datatrove"] = {"docs_compared": len(by_id), "gopher_quality_repetition_docs_per_cpu_s": dt_rate,
                            "speedup_per_core": round((n / gopher) / dt_rate, 2) if dt_rate else None,
                            "agreement": agree}
    dt = json.loads(dt_json.read_text()) if dt_json.exists() else {}
    table_rows = []
    for name, cp in COUNTERPARTS.items():
        ours = res["tokenize"].get("mb_per_cpu_s") if name == "tokenize" else res["engine"]["stage_mb_per_cpu_s"].get(name)
        alone = res["tokenize"].get("mb_per_cpu_s") if name == "tokenize" else res["stage_mb_per_cpu_s"].get(name)
        theirs = dt.get(cp[1], {}).get(cp[2], {}).get("mb_per_cpu_s") if cp else None
        table_rows.append({"stage": name, "mb_per_cpu_s": ours, "standalone_mb_per_cpu_s": alone,
                           "datatrove": cp[0] if cp else None, "datatrove_mb_per_cpu_s": theirs,
                           "ratio": round(ours / theirs, 2) if ours and theirs else None})
    res["vs_datatrove"] = {"datatrove_json": str(dt_json), "datatrove_docs": dt.get("docs"),
                           "datatrove_repeat": dt.get("repeat"), "rows": table_rows}
    Path(args.out).write_text(json.dumps(res, indent=1))
    print(json.dumps(res, indent=1))

    def cell(v, w, f):
        return f"{v:>{w}{f}}" if isinstance(v, (int, float)) else f"{'—':>{w}}"

    print(f"\n{n} docs, {mb:.2f} MB; MB per CPU-second, one core; engine = annotate_docs clock "
          "(shared word split / language ID paid by the first stage that asks), standalone = stage alone")
    print(f"{'stage':<18}{'engine':>9}{'alone':>9}  {'datatrove counterpart':<46}{'MB/cpu-s':>9}{'ratio':>8}")
    for r in table_rows:
        print(f"{r['stage']:<18}{cell(r['mb_per_cpu_s'], 9, '.2f')}{cell(r['standalone_mb_per_cpu_s'], 9, '.2f')}  "
              f"{r['datatrove'] or '—':<46}{cell(r['datatrove_mb_per_cpu_s'], 9, '.2f')}{cell(r['ratio'], 8, '.2f')}")
    e = res["engine"]
    print(f"all stages in the engine: {e['mb_per_cpu_s']:.3f} MB/cpu-s ({e['process_cpu_s']:.1f} CPU s, "
          f"clock sum {e['clock_sum_cpu_s']:.1f}); tokenize: {res['tokenize']}")


if __name__ == "__main__":
    main()
