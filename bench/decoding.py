"""Charset detection on web pages in legacy encodings: is it right, and what it costs per MB.

What it measures (``lab.io.decoding``, the WARC reader's decoding):

- accuracy of detection on pages that declare nothing. A page counts as right when the codec
  chosen decodes its bytes back to exactly the text that was encoded (so windows-1252 for an
  ISO-8859-1 page, or cp932 for a Shift_JIS one, are right; a codec that differs on one
  character is wrong). Two sets:
  * the test pages of tests/io/test_read_warc.py (``PAGES``: Japanese in Shift_JIS, Korean in
    EUC-KR, Chinese in GBK, Russian in windows-1251, French in ISO-8859-1; a paragraph each);
  * translated man pages on this machine (bench/langid.py's set, rendered to text by groff),
    each encoded in a legacy charset of its language (``LEGACY``; characters it lacks left out),
    HTML-escaped and wrapped in a page with no declaration: the whole page, and a page of its
    first 300 characters only (a short page gives the detector less to go on).
- speed, in one process on one core (CPU time, best of --repeat passes), per MB of page bytes
  over the whole man pages: the detector alone (``detect``: resiliparse's uchardet and the label
  mapping); ``decode_web`` with no declaration (prescan for a <meta>, UTF-8 check, detection,
  decoding: an undeclared legacy page); ``decode_web`` with the charset in the header (no
  detection); and ``decode_web`` on the same texts in UTF-8 with no declaration (the common case:
  validated as UTF-8, never detected).

Needs: groff (groff-base) and the manpages-* packages (see bench/RESULTS.md); nothing is downloaded.
Run (main venv):  .venv/bin/python bench/decoding.py [--per-lang N] [--repeat N]
Writes bench/out/decoding.json.
"""

from __future__ import annotations

import argparse
import collections
import html
import importlib.util
import json
import sys
import time
from importlib.metadata import version
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))
from langid import build_dataset  # noqa: E402
from single_core import one_core  # noqa: E402

from lab.io.decoding import decode_web, detect  # noqa: E402

# language -> (codec the page is written in, the label a server would send for it). The codec is the one
# browsers decode that label with: Python's euc_kr writes a syllable outside KS X 1001 as an 8-byte jamo
# sequence that no browser composes back, and latin-1 writes C1 controls that windows-1252 reads as letters.
LEGACY = {
    "ja": ("cp932", "Shift_JIS"), "ko": ("cp949", "EUC-KR"), "zh": ("gbk", "GBK"),
    "ru": ("cp1251", "windows-1251"), "uk": ("cp1251", "windows-1251"), "pl": ("iso8859-2", "ISO-8859-2"),
    "fr": ("cp1252", "ISO-8859-1"), "de": ("cp1252", "ISO-8859-1"), "es": ("cp1252", "ISO-8859-1"),
}
SNIPPET = 300  # characters of a short page


def test_pages() -> list[dict]:
    """The WARC reader tests' pages, as those tests build them (no declaration)."""
    spec = importlib.util.spec_from_file_location("test_read_warc", ROOT / "tests" / "io" / "test_read_warc.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return [{"set": "tests", "lang": lang, "size": "paragraph", "codec": codec, "page": mod.page(lang)}
            for lang, (_, codec, *_rest) in mod.PAGES.items()]


def man_pages(per_lang: int) -> list[dict]:
    """Man pages per language of ``LEGACY``, whole and cut, as undeclared HTML in the legacy charset."""
    out = []
    for doc in build_dataset(per_lang=per_lang, langs=tuple(LEGACY)).docs:
        codec = LEGACY[doc.lang][0]
        text = doc.text.encode(codec, "ignore").decode(codec)  # what the charset can hold
        for size, part in (("page", text), ("300 chars", text[:SNIPPET])):
            page = (f"<!DOCTYPE html>\n<html><head><title>{doc.id}</title></head>\n"
                    f"<body><pre>{html.escape(part, quote=False)}</pre></body></html>\n")
            out.append({"set": "man", "lang": doc.lang, "size": size, "codec": codec, "page": page})
    return out


def accuracy(cases: list[dict]) -> list[dict]:
    """Per set, language and size: pages with non-ASCII bytes, pages decoded right, the codecs chosen."""
    groups: dict[tuple, dict] = {}
    for c in cases:
        body = c["page"].encode(c["codec"])
        if body.isascii():
            continue  # nothing to detect
        d = decode_web(body, "text/html", html=True)
        g = groups.setdefault((c["set"], c["lang"], c["size"], c["codec"]), {"pages": 0, "right": 0, "chosen": collections.Counter()})
        g["pages"] += 1
        g["right"] += d.text == c["page"]
        g["chosen"][f"{d.encoding} ({d.source})"] += 1
    return [{"set": s, "lang": lang, "size": size, "written_in": codec, "pages": g["pages"], "right": g["right"],
             "chosen": dict(g["chosen"].most_common())} for (s, lang, size, codec), g in sorted(groups.items())]


def cpu_best(fn, items, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        for x in items:
            fn(x)
        best = min(best, time.process_time() - t0)
    return best


def speed(cases: list[dict], repeat: int) -> dict:
    """CPU seconds per MB of page bytes, over the whole man pages."""
    pages = [c for c in cases if c["set"] == "man" and c["size"] == "page"]
    legacy = [(c["page"].encode(c["codec"]), LEGACY[c["lang"]][1]) for c in pages]
    utf8 = [c["page"].encode() for c in pages]
    mb_legacy = sum(len(b) for b, _ in legacy) / 1e6
    mb_utf8 = sum(map(len, utf8)) / 1e6
    runs = {
        "detect (detector alone)": (lambda x: detect(x[0]), legacy, mb_legacy),
        "decode_web, legacy, undeclared": (lambda x: decode_web(x[0], "text/html", html=True), legacy, mb_legacy),
        "decode_web, legacy, header charset": (lambda x: decode_web(x[0], f"text/html; charset={x[1]}", html=True),
                                               legacy, mb_legacy),
        "decode_web, UTF-8, undeclared": (lambda b: decode_web(b, "text/html", html=True), utf8, mb_utf8),
    }
    out = {"pages": len(pages), "mb_legacy": round(mb_legacy, 3), "mb_utf8": round(mb_utf8, 3)}
    for name, (fn, items, mb) in runs.items():
        s = cpu_best(fn, items, repeat)
        out[name] = {"cpu_s": round(s, 4), "cpu_ms_per_mb": round(1e3 * s / mb, 2), "mb_per_cpu_s": round(mb / s, 1)}
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--per-lang", type=int, default=40, help="man pages per language")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--pin", action="store_true", help="pin the process to one CPU")
    ap.add_argument("--out", default=str(HERE / "out" / "decoding.json"))
    args = ap.parse_args(argv)
    one_core(args.pin)
    cases = test_pages() + man_pages(args.per_lang)
    result = {"resiliparse": version("resiliparse"), "python": sys.version.split()[0],
              "accuracy": accuracy(cases), "speed": speed(cases, args.repeat)}
    Path(args.out).parent.mkdir(exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    for row in result["accuracy"]:
        print(f"{row['set']:5} {row['lang']:3} {row['size']:10} {row['written_in']:9} "
              f"{row['right']:>3}/{row['pages']:<3} {row['chosen']}")
    print(json.dumps(result["speed"], indent=1))


if __name__ == "__main__":
    main()
