"""Words and stop words per language: do gopher_quality's counts on a translation track the original's?

Parallel text: the translated man pages installed on this machine (Debian's manpages-de, -fr,
-ja, -zh, ...). A page ``/usr/share/man/LANG/man1/NAME.1.gz`` is a translation of
``/usr/share/man/man1/NAME.1.gz``; both are rendered to plain text by groff as in bench/langid.py,
and a pair is kept when both have >= 500 characters and the translation is not mostly English
(``english_share`` <= 0.10: a partial translation).

For each pair, gopher_quality's ``gq_words`` (non-symbol words) and ``gq_stop_words`` (distinct stop
words) of the translation divided by the English page's; per language (the man directory's, pt_BR
with pt, zh_CN and zh_TW as zh) the median of those ratios, over the pairs (stop words: over the pairs
whose English page has at least one). Three ways of counting, side by side:

- ``v1``: what gopher_quality VERSION 1 counted for every language: English words (spaCy's rules,
  ``lab.text.words.words``) and Gopher's eight English stop words;
- ``now``: gopher_quality as it is (VERSION 3: the document's language: its words, its eight most frequent
  stop words);
- ``char`` (Chinese and Japanese only): now's stop words, words cut one per Han or kana character
  instead of at ICU's word boundaries (``segment.words(..., breaker="char")``).

The other stages that count words, same pairs, translation over English page, median ratio, ``v1``
(English words / the normalized text split at spaces, for every language: the stages' VERSION 1)
against ``now`` (the document's word split, ``segment.document_words``, shared by all of them):

- ``shingles``: near_dedup's distinct word 5-gram shingles (``nd_shingles``);
- ``nl/word``: fineweb's newlines per word (``fw_newline_word_ratio``);
- ``5-gram dup``: gopher_repetition's ``gr_dup_5gram_char_frac`` (medians of each side, not of ratios:
  most pages have 0).

And near-duplicates: each page (English and translated) against a copy with every 10th non-blank line
dropped, the share of pages whose shingle Jaccard (``text_jaccard``) is >= 0.8, near_dedup's default
threshold: ``v1`` shingles against ``now``.

Also: how often the language stage labels the translation with its directory's language, and the
CPU time of ICU segmentation and of the character rule on the Chinese and Japanese pages.

Run (main venv, from the repository root; needs groff and the manpages-* packages):
  .venv/bin/python bench/words_by_language.py                 # up to 60 pairs per language
  unshare -n .venv/bin/python bench/words_by_language.py      # the same, provably offline
Writes bench/out/words_by_language.json.
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import statistics
import sys
import time
from pathlib import Path

from langid import DIR_LANG, MAN_ROOT, english_share, render_man

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from lab.stages import gopher_quality as gq  # noqa: E402
from lab.dedup.signature import normalize, shingle_hashes, shingle_text  # noqa: E402
from lab.stages import fineweb as fw  # noqa: E402
from lab.stages import gopher_repetition as gr  # noqa: E402
from lab.text import langid, segment, stopwords  # noqa: E402
from lab.text.words import SYMBOLS, words  # noqa: E402

OUT = Path(__file__).resolve().parent / "out" / "words_by_language.json"


def pairs(per_lang: int, seed: int = 0) -> dict[str, list[tuple[str, str, str]]]:
    """lang -> [(name, english text, translated text)], up to ``per_lang`` per man directory language."""
    out: dict[str, list] = collections.defaultdict(list)
    for d, lang in sorted(DIR_LANG.items()):
        tdir = MAN_ROOT / d / "man1"
        if not tdir.is_dir():
            continue
        names = sorted(p.name for p in tdir.iterdir() if p.is_file() and not p.is_symlink()
                       and (MAN_ROOT / "man1" / p.name).is_file())
        random.Random(f"{seed}:{d}").shuffle(names)
        kept = 0
        for name in names:
            if kept == per_lang:
                break
            tr, en = render_man(tdir / name), render_man(MAN_ROOT / "man1" / name)
            if not tr or not en or len(tr) < 500 or len(en) < 500 or english_share(tr) > 0.10:
                continue
            out[lang].append((f"{d}/{name}", en, tr))
            kept += 1
    return dict(out)


def v1_counts(text: str) -> tuple[int, int]:
    """(non-symbol words, distinct Gopher stop words) as gopher_quality VERSION 1 counted them."""
    ws = words(text)
    return sum(1 for w in ws if w.strip(SYMBOLS)), len(stopwords.GOPHER_STOP_WORDS & set(ws))


def v1_other(text: str) -> tuple[int, float, float]:
    """(shingles, newlines per word, duplicated 5-gram character share) as the stages' VERSION 1 made them."""
    real = segment.document_words
    segment.document_words = words
    try:
        return (shingle_hashes(normalize(text), 5).size, fw.signals(text)["fw_newline_word_ratio"],
                gr.signals(text)["gr_dup_5gram_char_frac"])
    finally:
        segment.document_words = real


def now_other(text: str) -> tuple[int, float, float]:
    return (shingle_hashes(shingle_text(text), 5).size, fw.signals(text)["fw_newline_word_ratio"],
            gr.signals(text)["gr_dup_5gram_char_frac"])


def jaccard(a: str, b: str, prepare) -> float:
    x, y = shingle_hashes(prepare(a), 5), shingle_hashes(prepare(b), 5)
    inter = len(set(x.tolist()) & set(y.tolist()))
    return inter / (x.size + y.size - inter) if x.size and y.size else 0.0


def near_copy(text: str) -> str:
    """``text`` with every 10th non-blank line dropped: a near-duplicate."""
    out, k = [], 0
    for line in text.split("\n"):
        if line.strip():
            k += 1
            if k % 10 == 0:
                continue
        out.append(line)
    return "\n".join(out)


def char_counts(text: str, lang: str) -> tuple[int, int]:
    ws = segment.words(text, lang, breaker="char")
    return sum(1 for w in ws if w.strip(SYMBOLS)), len(stopwords.stop_words(lang) & set(ws))


def median_ratio(num: list[int], den: list[int]) -> float | None:
    r = [a / b for a, b in zip(num, den) if b > 0]
    return round(statistics.median(r), 2) if r else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--per-lang", type=int, default=60, help="pairs per man directory language")
    args = ap.parse_args()
    t0 = time.time()
    by_lang = pairs(args.per_lang)
    rows, seg_time = [], collections.Counter()
    for lang, ps in sorted(by_lang.items()):
        c: dict[str, list] = collections.defaultdict(list)
        for _, en, tr in ps:
            se, st = gq.signals(en), gq.signals(tr)
            c["en_words"].append(se["gq_words"])
            c["en_stop"].append(se["gq_stop_words"])
            c["now_words"].append(st["gq_words"])
            c["now_stop"].append(st["gq_stop_words"])
            w1, s1 = v1_counts(tr)
            c["v1_words"].append(w1)
            c["v1_stop"].append(s1)
            c["labelled"].append(langid.detect(tr)[0] == lang)
            for side, text in (("en", en), ("tr", tr)):
                for how, f in (("v1", v1_other), ("now", now_other)):
                    sh, nl, dup = f(text)
                    c[f"{side}_{how}_sh"].append(sh)
                    c[f"{side}_{how}_nl"].append(nl)
                    c[f"{side}_{how}_dup"].append(dup)
                copy = near_copy(text)
                c[f"{side}_v1_found"].append(jaccard(text, copy, normalize) >= 0.8)
                c[f"{side}_now_found"].append(jaccard(text, copy, shingle_text) >= 0.8)
            if lang in segment.UNSPACED:
                w, s = char_counts(tr, lang)
                c["char_words"].append(w)
                c["char_stop"].append(s)
                for breaker in ("icu", "char"):
                    segment._LAST = ("", None, "", ())
                    t = time.process_time()
                    segment.words(tr, lang, breaker=breaker)
                    seg_time[breaker] += time.process_time() - t
                seg_time["bytes"] += len(tr.encode())
        rows.append({
            "lang": lang, "pairs": len(ps), "labelled_right": sum(c["labelled"]),
            "stop_list": list(stopwords.ranked(lang)) or "English (fallback)",
            "median_en_words": statistics.median(c["en_words"]), "median_en_stop": statistics.median(c["en_stop"]),
            "words_v1": median_ratio(c["v1_words"], c["en_words"]), "words_now": median_ratio(c["now_words"], c["en_words"]),
            "words_char": median_ratio(c["char_words"], c["en_words"]) if c["char_words"] else None,
            "stop_v1": median_ratio(c["v1_stop"], c["en_stop"]), "stop_now": median_ratio(c["now_stop"], c["en_stop"]),
            "stop_char": median_ratio(c["char_stop"], c["en_stop"]) if c["char_stop"] else None,
            **{f"{what}_{how}": median_ratio(c[f"tr_{how}_{what}"], c[f"en_{how}_{what}"])
               for what in ("sh", "nl") for how in ("v1", "now")},
            **{f"dup_{side}_{how}": round(statistics.median(c[f"{side}_{how}_dup"]), 3)
               for side in ("en", "tr") for how in ("v1", "now")},
            **{f"found_{side}_{how}": round(sum(c[f"{side}_{how}_found"]) / len(ps), 2)
               for side in ("en", "tr") for how in ("v1", "now")},
        })
    mb = seg_time["bytes"] / 1e6
    timing = {k: round(seg_time[k] / mb, 3) for k in ("icu", "char")} if mb else {}
    print("| lang | pairs | labelled right | words v1 | words now | words char | stop v1 | stop now | stop char |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        f = [r["lang"], r["pairs"], r["labelled_right"], r["words_v1"], r["words_now"], r["words_char"],
             r["stop_v1"], r["stop_now"], r["stop_char"]]
        print("| " + " | ".join("–" if v is None else str(v) for v in f) + " |")
    print("\n| lang | shingles v1 | **shingles now** | nl/word v1 | **nl/word now** | 5-gram dup en | "
          "tr v1 | **tr now** | near-dup found: en v1 | en now | tr v1 | **tr now** |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        f = [r["lang"], r["sh_v1"], r["sh_now"], r["nl_v1"], r["nl_now"], r["dup_en_now"], r["dup_tr_v1"],
             r["dup_tr_now"], r["found_en_v1"], r["found_en_now"], r["found_tr_v1"], r["found_tr_now"]]
        print("| " + " | ".join("–" if v is None else str(v) for v in f) + " |")
    print(f"\nsegmentation CPU seconds per MB of zh/ja text: {timing}; {time.time() - t0:.0f} s in all")
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps({"rows": rows, "cpu_s_per_mb": timing}, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
