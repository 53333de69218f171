"""Dashboard latency in a real browser at 1M documents: slider release -> updated funnel, and 8 sessions.

Builds a run directory of 1M documents whose signals are resampled from ``runs/sample`` (as
bench/funnel_query.py does; 15% of rows exact copies of 5% of the others; the texts of the first
20,000 documents, for the dropped-samples panel), serves it with ``corpus-lab serve``, and drives
Debian's headless Chromium with Playwright:

- one session: --moves key presses on the ``gopher_quality.min_alpha_words_ratio`` slider (each press is a release,
  so one query); the latency is press -> the "Kept:" line showing new numbers; presses that
  change no document (no value between the two thresholds) are not counted;
- --sessions browser processes at once, each pressing the same way; errors and the latency p95.

    .venv/bin/python bench/dashboard_latency.py [--rows 1000000] [--moves 30] [--sessions 8]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lab.io.run import RunLayout
from lab.io.schema import DOCS_SCHEMA, REJECTS_SCHEMA
from lab.io.writers import write_parquet

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
CHUNK = 200_000
SLIDER = "gopher_quality.min_alpha_words_ratio"  # dense around its default: most steps move documents


def build_run(src: Path, root: Path, rows: int, seed: int = 0) -> Path:
    """A run directory of ``rows`` documents resampled from the run ``src``."""
    lay, s = RunLayout(root), RunLayout(src)
    lay.make()
    sig = pa.concat_tables(pq.read_table(p) for p in sorted(s.signals.glob("part-*.parquet")))
    docs = pa.concat_tables(pq.read_table(p) for p in sorted(s.docs.glob("part-*.parquet")))
    text_of = dict(zip(docs.column("doc_id").to_pylist(), docs.column("text").to_pylist()))
    rng = np.random.default_rng(seed)
    for i, start in enumerate(range(0, rows, CHUNK)):
        n = min(CHUNK, rows - start)
        idx = rng.integers(0, sig.num_rows, n)
        t = sig.take(idx)
        src_ids = t.column("doc_id").to_pylist()
        ids = (np.arange(start, start + n, dtype=np.int64) * 2654435761) % (2**62)
        uniq = rng.integers(0, 2**62, n)
        hashes = np.where(rng.random(n) < 0.15, uniq[rng.integers(0, max(n // 20, 1), n)], uniq)
        t = t.set_column(t.schema.get_field_index("doc_id"), "doc_id", pa.array(ids))
        t = t.set_column(t.schema.get_field_index("content_hash"), "content_hash", pa.array(hashes))
        write_parquet(t, lay.part("signals", f"{i:05d}"))
        k = max(0, min(n, 20_000 - start))
        d = {"doc_id": ids[:k].tolist(), "source": t.column("source").to_pylist()[:k], "locator": list(range(k)),
             "url": [""] * k, "record_id": [""] * k, "text": [text_of[x] for x in src_ids[:k]]}
        write_parquet(pa.table(d, schema=DOCS_SCHEMA), lay.part("docs", f"{i:05d}"))
    write_parquet(REJECTS_SCHEMA.empty_table(), lay.part("rejects", "00000"))
    for f in ("config.yaml", "manifest.json"):
        shutil.copy(src / f, root / f)
    shutil.copy(s.merged_stats, lay.merged_stats)
    return root


def session(url: str, moves: int, out: mp.Queue) -> None:
    from playwright.sync_api import sync_playwright

    lat, errors = [], 0
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=shutil.which("chromium"), args=ARGS)
        page = b.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(url, timeout=300_000)
        page.wait_for_selector("text=Kept:", timeout=300_000)
        handle = page.locator(".bk-input-group", has=page.locator(".bk-slider-title", has_text=SLIDER)
                              ).locator(".noUi-handle").first
        handle.focus()
        kept = page.locator("p", has_text="Kept:").first  # the whole line, numbers included
        for _ in range(moves):
            before = kept.inner_text()
            t = time.perf_counter()
            handle.press("ArrowRight")
            # the pane re-renders its element: poll through the locator (re-resolved each time)
            while time.perf_counter() - t < 10 and kept.inner_text() == before:
                page.wait_for_timeout(10)
            if kept.inner_text() != before:
                lat.append(time.perf_counter() - t)
            else:  # no document between the two thresholds, or an error shown
                alert = page.locator(".alert-danger").first
                if alert.count() and alert.is_visible():
                    errors += 1
        b.close()
    out.put({"latencies": lat, "errors": errors})


def stats(lat: list[float]) -> dict:
    s = sorted(lat)
    return {"moves_measured": len(s), "median_ms": round(1000 * statistics.median(s), 1) if s else None,
            "p95_ms": round(1000 * s[int(0.95 * (len(s) - 1))], 1) if s else None}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", default="runs/sample")
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--moves", type=int, default=30)
    ap.add_argument("--sessions", type=int, default=8)
    ap.add_argument("--out", default="bench/out/dashboard_latency.json")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = build_run(Path(args.run), Path(tmp) / "big", args.rows)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        server = subprocess.Popen([sys.executable, "-m", "lab.cli", "serve", str(root), "--port", str(port)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}/"
        try:
            for _ in range(600):
                try:
                    urllib.request.urlopen(url, timeout=120).read()
                    break
                except OSError:
                    time.sleep(0.5)
            q: mp.Queue = mp.Queue()
            session(url, args.moves, q)
            one = q.get()
            procs = [mp.Process(target=session, args=(url, args.moves // 2, q)) for _ in range(args.sessions)]
            for p in procs:
                p.start()
            many = [q.get() for _ in procs]
            for p in procs:
                p.join()
        finally:
            server.terminate()
            server.wait(timeout=60)
    res = {"rows": args.rows, "one_session": {**stats(one["latencies"]), "errors": one["errors"]},
           "sessions": args.sessions,
           "concurrent": {**stats([x for m in many for x in m["latencies"]]), "errors": sum(m["errors"] for m in many)}}
    Path(args.out).write_text(json.dumps(res, indent=1))
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
