"""Which documents corpus-lab and datatrove keep from the same input, and why they differ.

Input: a corpus-lab run directory and the work directory of ``bench/datatrove_pipeline.py
--keep-work`` over the same documents of the scale corpus (``bench/out/scale/``: every document
carries its generator label and, for copies, the id of its original).

For every document: corpus-lab's outcome (kept, or the reason of the first rule that drops it,
``lab.query.drop_reasons`` under the run's own config) and datatrove's (kept; dropped by its
filters, i.e. absent from the survivors it wrote before MinHash; or removed by the MinHash
filter). The table counts documents per pair of outcomes. For the documents only one side
dropped as a duplicate while the other keeps it, it tells apart the documents of a generated
group (an original and its copies) where both sides keep one member but not the same one, and
gives, for the others, the word-5-gram Jaccard (corpus-lab's normalization and shingles, exact
sets) between the document and the original it was generated from.

    .venv/bin/python bench/scale_pipeline.py one --files 1 --workers 2
    bench/.venv-datatrove/bin/python bench/datatrove_pipeline.py --docs 15625 --keep-work \\
        --work bench/out/datatrove_work_1f --json bench/out/datatrove_pipeline_1f.json \\
        --tokenizer bench/out/scale_runs/scale-1f-2w/tokenizer/tokenizer.json
    .venv/bin/python bench/compare_kept.py bench/out/scale_runs/scale-1f-2w bench/out/datatrove_work_1f

Writes ``bench/out/compare_kept.json`` and prints the table.
"""

from __future__ import annotations

import argparse
import io
import json
from collections import Counter
from pathlib import Path

import numpy as np
import polars as pl
import zstandard

from lab import query
from lab.dedup.signature import normalize, shingle_hashes

BENCH = Path(__file__).resolve().parent
CORPUS = BENCH / "out" / "scale"


def jsonl_zst(path: Path):
    with open(path, "rb") as f:
        text = io.TextIOWrapper(zstandard.ZstdDecompressor().stream_reader(f, read_across_frames=True),
                                encoding="utf-8")
        for line in text:
            if line.strip():
                yield json.loads(line)


def datatrove_ids(work: Path, folder: str) -> set[str]:
    files = sorted((work / folder).glob("*.jsonl.zst"))
    if not files:
        raise SystemExit(f"error: no {folder}/*.jsonl.zst in {work}; run bench/datatrove_pipeline.py with --keep-work")
    return {d["id"] for f in files for d in jsonl_zst(f)}


def jaccard(a: str, b: str, ngram: int) -> float:
    x, y = shingle_hashes(normalize(a), ngram), shingle_hashes(normalize(b), ngram)
    union = np.union1d(x, y).size
    return np.intersect1d(x, y).size / union if union else 1.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path, help="corpus-lab run directory")
    ap.add_argument("work", type=Path, help="datatrove_pipeline.py --keep-work directory")
    ap.add_argument("--json", type=Path, default=BENCH / "out" / "compare_kept.json")
    args = ap.parse_args()

    run = query.open_run(args.run)
    if run.config is None:
        raise SystemExit(f"error: {args.run} has no config.yaml; is it a corpus-lab run directory?")
    reasons = query.drop_reasons(run, run.config)
    docs = pl.read_parquet(args.run / "docs", columns=["doc_id", "source", "record_id", "text"])
    cl = docs.join(reasons, on="doc_id", how="left")
    cl_outcome = {rid: (reason or "kept") for rid, reason in zip(cl["record_id"], cl["reason"])}
    texts = dict(zip(cl["record_id"], cl["text"]))

    survivors, final = datatrove_ids(args.work, "filtered"), datatrove_ids(args.work, "output")
    dt_chars = {d["id"]: len(d["text"]) for f in sorted((args.work / "output").glob("*.jsonl.zst"))
                for d in jsonl_zst(f)}
    dt_outcome = {rid: "kept" if rid in final else "minhash" if rid in survivors else "filters" for rid in cl_outcome}

    sources = sorted(set(docs["source"]))
    labels = {}
    for name in sources:
        for d in jsonl_zst(CORPUS / Path(name).name):
            labels[d["id"]] = (d["label"], d.get("dup_of"))

    # the generator's groups: an original and the copies made of it
    group = {rid: orig or rid for rid, (_, orig) in labels.items()}
    members: dict[str, set] = {}
    for rid, g in group.items():
        members.setdefault(g, set()).add(rid)

    ngram = run.config.stages.near_dedup.ngram
    pairs = Counter((cl_outcome[r], dt_outcome[r]) for r in cl_outcome)
    one_side = {}  # documents only one side drops as a duplicate, while the other keeps them
    for rid in cl_outcome:
        c, d = cl_outcome[rid], dt_outcome[rid]
        if (c == "kept" and d == "minhash") or (d == "kept" and c.startswith(("exact_dedup", "near_dedup"))):
            one_side[rid] = f"corpus-lab {c} / datatrove {d}"
    detail: dict[str, list] = {}
    for rid, key in one_side.items():
        label, orig = labels.get(rid, (None, None))
        j = jaccard(texts[rid], texts[orig], ngram) if orig in texts else None
        # a swap: another member of its generated group is on the opposite side (both sides keep
        # one of the group, not the same one)
        swap = any(one_side.get(m, key) != key for m in members.get(group.get(rid), ()))
        detail.setdefault(key, []).append((label, j, swap))

    both = [r for r in cl_outcome if cl_outcome[r] == "kept" and dt_outcome[r] == "kept"]
    chars = {"corpus-lab": sum(len(texts[r]) for r in both), "datatrove": sum(dt_chars[r] for r in both)}
    print(f"documents both keep: {len(both):,}; their characters: corpus-lab {chars['corpus-lab']:,}, "
          f"datatrove {chars['datatrove']:,} ({chars['datatrove'] / chars['corpus-lab']:.1%})")
    print(f"{'corpus-lab':<42} {'datatrove':<10} {'documents':>9}")
    for (c, d), n in sorted(pairs.items(), key=lambda kv: -kv[1]):
        print(f"{c:<42} {d:<10} {n:>9,}")
    summary = {}
    for key, rows in sorted(detail.items()):
        js = np.array([j for _, j, swap in rows if j is not None and not swap])
        by_label = Counter(label for label, _, _ in rows)
        swaps = sum(swap for _, _, swap in rows)
        summary[key] = {"documents": len(rows), "labels": dict(by_label), "other_member_kept_instead": swaps,
                        "jaccard_to_original": {"n": int(js.size),
                                                "min": float(js.min()) if js.size else None,
                                                "median": float(np.median(js)) if js.size else None,
                                                "max": float(js.max()) if js.size else None,
                                                "below_threshold": int((js < run.config.stages.near_dedup.threshold).sum())}}
        print(f"\n{key}: {len(rows):,} documents, labels {dict(by_label)}; {swaps:,} where the other side "
              f"keeps another member of the generated group instead; the rest's Jaccard to their original "
              f"{summary[key]['jaccard_to_original']}")
    out = {"run": str(args.run), "datatrove_work": str(args.work), "documents": len(cl_outcome),
           "kept": {"corpus-lab": sum(v == "kept" for v in cl_outcome.values()),
                    "datatrove": sum(v == "kept" for v in dt_outcome.values()), "both": pairs[("kept", "kept")]},
           "characters_of_both_kept": chars,
           "outcomes": [{"corpus-lab": c, "datatrove": d, "documents": n} for (c, d), n in sorted(pairs.items())],
           "one_side_duplicates": summary}
    args.json.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
