"""HTML -> text extraction: resiliparse vs trafilatura, speed and quality on real pages.

What it measures, on the Python manual as Debian ships it (package python3-doc: HTML under
/usr/share/doc/python3.X/html, each page's reST source under html/_sources/*.rst.txt):

- pages/s and MB/s (of HTML) in one single-threaded process (thread pools capped at 1;
  --pin also pins it to one CPU), extraction from the decoded HTML string; two clocks:
  wall time (best of --repeat passes) and the process's CPU time (median), which other
  jobs on a shared machine disturb less: pages per CPU-second is the per-core figure;
- quality: bag-of-words precision / recall / F1 of the extracted text against the page's
  reST source with its markup stripped (``rst_text.strip_rst``), on lowercase ``\\w+``
  tokens; reported as the mean over pages and pooled over all tokens. The reference
  holds what the page's author wrote, so navigation, sidebars, "Show Source" and the
  footer count against precision, dropped paragraphs, code and tables against recall.
  It is approximate (roles whose target Sphinx replaces by a section title, generated
  tables of contents), equally for every extractor.

Extractors (all on default settings unless named):
  resiliparse             extract_plain_text(html, main_content=True, preserve_formatting=True)
  resiliparse_all_text    the same with main_content=False (everything visible; a baseline)
  trafilatura             trafilatura.extract(html)
  trafilatura_fast        trafilatura.extract(html, fast=True)  (no fallback extractors)

trafilatura is not a dependency of corpus-lab's main venv: for this benchmark only it is
installed there with  .venv/bin/pip install trafilatura  (datatrove's venv pins an older
one; do not use that).

Run (main venv):  .venv/bin/python bench/html_extract.py [--max-pages N] [--repeat N]
Writes bench/out/html_extract.json (figures) and bench/out/html_extract_pages.jsonl
(per page and extractor: bytes, seconds, precision, recall, F1).
"""

from __future__ import annotations

import argparse
import collections
import glob
import json
import os
import re
import statistics
import sys
import time
from importlib.metadata import version
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rst_text import strip_rst  # noqa: E402
from single_core import one_core  # noqa: E402

OUT_DIR = Path(__file__).resolve().parent / "out"
_WORD = re.compile(r"\w+")


def find_pages(min_reference_chars: int = 500) -> list[tuple[Path, Path]]:
    """(html page, its reST source) pairs of the installed Python manual, sorted."""
    roots = sorted({os.path.realpath(p) for p in glob.glob("/usr/share/doc/python3*/html")
                    if os.path.isdir(os.path.join(p, "_sources"))})
    pairs = []
    for root in roots[-1:]:  # one manual (the newest), not the same pages twice
        for src in sorted(Path(root, "_sources").rglob("*.rst.txt")):
            rel = src.relative_to(Path(root, "_sources"))
            page = Path(root, str(rel)[: -len(".rst.txt")] + ".html")
            if page.is_file() and src.stat().st_size >= min_reference_chars:
                pairs.append((page, src))
    return pairs


def tokens(text: str) -> collections.Counter:
    return collections.Counter(_WORD.findall(text.lower()))


def overlap(extracted: collections.Counter, reference: collections.Counter) -> tuple[int, int, int]:
    """(common, extracted, reference) token counts (multiset intersection)."""
    return (sum((extracted & reference).values()), sum(extracted.values()),
            sum(reference.values()))


def prf(common: int, n_extracted: int, n_reference: int) -> tuple[float, float, float]:
    """Precision, recall and F1 from token counts.

    >>> prf(3, 4, 6)
    (0.75, 0.5, 0.6)
    """
    p = common / n_extracted if n_extracted else 0.0
    r = common / n_reference if n_reference else 0.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def extractors() -> dict:
    import trafilatura
    from resiliparse.extract.html2text import extract_plain_text

    return {
        "resiliparse": lambda html: extract_plain_text(
            html, main_content=True, preserve_formatting=True),
        "resiliparse_all_text": lambda html: extract_plain_text(
            html, main_content=False, preserve_formatting=True),
        "trafilatura": lambda html: trafilatura.extract(html) or "",
        "trafilatura_fast": lambda html: trafilatura.extract(html, fast=True) or "",
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-pages", type=int, default=0, help="0 = all pages found")
    parser.add_argument("--repeat", type=int, default=3, help="timed passes")
    parser.add_argument("--pin", action="store_true", help="pin the process to one CPU")
    parser.add_argument("--out", type=Path, default=OUT_DIR / "html_extract.json")
    args = parser.parse_args(argv)
    pinned = one_core(args.pin)  # before the model/parsers load

    pairs = find_pages()
    if not pairs:
        sys.exit("no Python manual found: apt-get install python3-doc")
    if args.max_pages:
        pairs = pairs[: args.max_pages]
    htmls = [p.read_bytes().decode("utf-8") for p, _ in pairs]
    references = [tokens(strip_rst(s.read_text(encoding="utf-8"))) for _, s in pairs]
    html_bytes = sum(len(h.encode()) for h in htmls)

    report = {
        "pages": len(pairs), "html_bytes": html_bytes, "repeat": args.repeat,
        "manual": str(pairs[0][0].parent) if pairs else None, "pinned_cpu": pinned,
        "versions": {p: version(p) for p in ("resiliparse", "trafilatura", "lxml")},
        "extractors": {},
    }
    per_page = []
    for name, extract in extractors().items():
        extract(htmls[0])  # warm-up (imports, lazy init)
        seconds, page_seconds = [], None
        for _ in range(args.repeat):
            texts, times = [], []
            wall, cpu = time.perf_counter(), time.process_time()
            for html in htmls:
                t0 = time.perf_counter()
                texts.append(extract(html))
                times.append(time.perf_counter() - t0)
            seconds.append((time.perf_counter() - wall, time.process_time() - cpu))
            page_seconds = page_seconds or times
        counts = [overlap(tokens(t), ref) for t, ref in zip(texts, references)]
        scores = [prf(*c) for c in counts]
        pooled = prf(*(sum(c[i] for c in counts) for i in range(3)))
        wall = min(w for w, _ in seconds)
        cpu = statistics.median(c for _, c in seconds)
        report["extractors"][name] = {
            "wall_seconds": wall, "cpu_seconds": cpu, "passes": seconds,
            "pages_per_s": len(htmls) / wall, "pages_per_cpu_s": len(htmls) / cpu,
            "mb_per_cpu_s": html_bytes / 1e6 / cpu,
            "precision_mean": statistics.mean(s[0] for s in scores),
            "recall_mean": statistics.mean(s[1] for s in scores),
            "f1_mean": statistics.mean(s[2] for s in scores),
            "f1_median": statistics.median(s[2] for s in scores),
            "precision_pooled": pooled[0], "recall_pooled": pooled[1], "f1_pooled": pooled[2],
            "empty_pages": sum(not t.strip() for t in texts),
            "slowest_page_s": max(page_seconds),
        }
        for (page, _), text, s, c, t in zip(pairs, texts, scores, counts, page_seconds):
            per_page.append({"page": str(page), "extractor": name, "chars": len(text),
                             "seconds": t, "precision": s[0], "recall": s[1], "f1": s[2],
                             "tokens_extracted": c[1], "tokens_reference": c[2]})

    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    with open(args.out.with_name("html_extract_pages.jsonl"), "w") as f:
        for row in per_page:
            f.write(json.dumps(row) + "\n")

    print(f"{len(pairs)} pages of {report['manual']}, {html_bytes / 1e6:.1f} MB HTML, "
          f"one process (pinned CPU: {pinned}), best wall of {args.repeat} / median CPU")
    print(f"{'extractor':<22}{'pages/s':>8}{'pages/cpu-s':>12}{'MB/cpu-s':>9}{'P mean':>8}"
          f"{'R mean':>8}{'F1 mean':>8}{'F1 pool':>8}{'empty':>6}")
    for name, e in report["extractors"].items():
        print(f"{name:<22}{e['pages_per_s']:>8.1f}{e['pages_per_cpu_s']:>12.1f}"
              f"{e['mb_per_cpu_s']:>9.2f}{e['precision_mean']:>8.3f}"
              f"{e['recall_mean']:>8.3f}{e['f1_mean']:>8.3f}{e['f1_pooled']:>8.3f}"
              f"{e['empty_pages']:>6}")
    print(f"-> {args.out}")


if __name__ == "__main__":
    main()
