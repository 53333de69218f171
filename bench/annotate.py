"""Annotate throughput per core, and agreement of keep/drop decisions with datatrove.

On the same JSONL documents that ``bench/datatrove_filters.py`` ran (default
bench/out/docs_en.jsonl from make_docs.py), in one single-threaded process:

- CPU seconds per document of each corpus-lab stage's ``signals`` (docs/s and MB/s per core),
  of Gopher quality + repetition together (the datatrove comparison), and of every stage;
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

from lab.rules import first_failure  # noqa: E402
from lab.stages import STAGES, c4, fineweb, gopher_quality, gopher_repetition, language  # noqa: E402


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
    args = ap.parse_args()

    rows = [json.loads(line) for line in open(args.input)]
    if args.limit:
        rows = rows[: args.limit]
    texts = [r["text"] for r in rows]
    n, mb = len(texts), sum(len(t.encode()) for t in texts) / 1e6
    language.model()  # load once, outside the clock
    for m in STAGES:  # warm-up (regex compilation, imports)
        m.signals(texts[0])

    per_stage = {m.NAME: cpu_time(m.signals, texts) for m in STAGES}
    gopher = per_stage["gopher_quality"] + per_stage["gopher_repetition"]
    total = sum(per_stage.values())
    bare = language.model()
    bare_s = cpu_time(lambda t: bare.predict(t[: language.MAX_CHARS].replace("\n", " "), k=1), texts)

    res: dict = {"input": args.input, "docs": n, "mb": round(mb, 3),
                 "stage_docs_per_cpu_s": {k: round(n / v, 1) for k, v in per_stage.items()},
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
    Path(args.out).write_text(json.dumps(res, indent=1))
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
