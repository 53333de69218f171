"""Boilerplate lines: CPU seconds per MB of the per-site line count, its merge and the signal (one core).

What it measures, on real multi-KB documents (``bench/out/docs_en.jsonl``, made by ``make_docs.py``; any
JSONL with a ``text`` field): each document gets a URL on one of ``--sites`` sites and, with ``--nav``,
that site's navigation rows (a title and a "Prev | Up | Home | Next" row on top, a footer below), then
the three phases of ``lab.stages.boilerplate`` / ``lab.linecount`` run in this process, timed with
``time.process_time`` (CPU seconds, this process only):

- ``count`` (annotate time, per partition): ``Collector.signals`` for every document (normalize and hash
  every line) and ``Collector.write`` (the partition's count table split into ``--buckets`` buckets,
  and its line records, written as Parquet);
- ``merge``: ``reduce_bucket`` for every bucket (read every partition's row group, sum, write);
- ``signal``: ``signal_partition`` for every partition (the lines seen in >= ``--min-docs`` documents of
  their site joined onto the partition's line records).

MB is the UTF-8 size of the documents' text (navigation rows included). Prints one JSON line (with the
bytes written under ``boilerplate/``).

    .venv/bin/python bench/boilerplate_lines.py --docs bench/out/docs_en.jsonl --partitions 8 --buckets 8
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pyarrow as pa  # noqa: E402

from lab import linecount  # noqa: E402
from lab.doc import Doc  # noqa: E402
from lab.io.run import RunLayout  # noqa: E402
from lab.io.writers import write_parquet  # noqa: E402
from lab.stages import boilerplate as bp  # noqa: E402


def documents(path: Path, sites: int, nav: bool, limit: int) -> list[Doc]:
    docs = []
    for i, line in enumerate(open(path)):
        if limit and i >= limit:
            break
        text = json.loads(line)["text"]
        s = i % sites
        if nav:
            text = (f"Site {s} documentation\nPrev | Up | Home | Next\n{text}\n"
                    f"© Site {s} contributors. Last updated 2024-0{1 + i % 9}.\n")
        docs.append(Doc(source=path.name, locator=i, text=text, raw_bytes=len(line),
                        url=f"https://site{s}.example/doc/{i}"))
    return docs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--docs", type=Path, default=ROOT / "bench" / "out" / "docs_en.jsonl")
    ap.add_argument("--sites", type=int, default=20)
    ap.add_argument("--no-nav", dest="nav", action="store_false")
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--buckets", type=int, default=8)
    ap.add_argument("--min-docs", type=int, default=3)
    ap.add_argument("--limit", type=int, default=0, help="first N documents only (0: all)")
    args = ap.parse_args()

    docs = documents(args.docs, args.sites, args.nav, args.limit)
    mb = sum(len(d.text.encode("utf-8", "surrogatepass")) for d in docs) / 1e6
    cfg = bp.Config(min_docs=args.min_docs)
    with tempfile.TemporaryDirectory() as tmp:
        layout = RunLayout(Path(tmp))
        layout.make()
        keys = [f"{p:05d}" for p in range(args.partitions)]
        chunks = [docs[p::args.partitions] for p in range(args.partitions)]
        t = {"count": 0.0, "merge": 0.0, "signal": 0.0}
        for key, chunk in zip(keys, chunks):
            signals = pa.table({"doc_id": pa.array([d.doc_id for d in chunk], pa.int64())})
            write_parquet(signals, layout.part("signals", key))  # what signal_partition reads the row order from
            c0 = time.process_time()
            col = bp.Collector(cfg, args.buckets)
            for i, d in enumerate(chunk):
                col.signals(i, d.text, d)
            col.write(layout, key, signals)
            t["count"] += time.process_time() - c0
        c0 = time.process_time()
        lines = sum(linecount.reduce_bucket(tmp, b, keys) for b in range(args.buckets))
        t["merge"] = time.process_time() - c0
        c0 = time.process_time()
        for key in keys:
            linecount.signal_partition(tmp, key, args.min_docs)
        t["signal"] = time.process_time() - c0
        boiler = linecount.boilerplate_lines(layout, args.min_docs).num_rows
        disk = {d: sum(f.stat().st_size for f in (layout.boilerplate / d).glob("*.parquet"))
                for d in ("counts", "lines", "merged", "signal")}
    total = sum(t.values())
    print(json.dumps({"docs": len(docs), "mb": round(mb, 3), "sites": args.sites, "nav": args.nav,
                      "partitions": args.partitions, "buckets": args.buckets, "min_docs": args.min_docs,
                      "distinct_site_lines": lines, "boilerplate_lines": boiler, "disk_bytes": disk,
                      "cpu_s": {k: round(v, 3) for k, v in t.items()}, "cpu_s_total": round(total, 3),
                      "cpu_s_per_mb": {**{k: round(v / mb, 4) for k, v in t.items()}, "total": round(total / mb, 4)},
                      "mb_per_cpu_s": round(mb / total, 2) if total else None}))


if __name__ == "__main__":
    main()
