"""Why datatrove's GopherQualityFilter drops most of docs_en.jsonl: its alpha-word ratio.

Gopher (Rae et al. 2021) keeps a document when >= 80% of its words contain an alphabetic
character. datatrove 0.10.1 computes that ratio over spaCy tokens *including punctuation
tokens* ("(", ",", "."), so punctuation- and code-rich English fails it. This measures, on
the same documents, how many pass the 0.8 threshold under three definitions of "word":

  datatrove       spaCy blank("en") tokens, punctuation tokens included (what it filters on)
  non_symbol      the same tokens without pure-punctuation ones (datatrove's own
                  `non_symbol_words`, which it uses for the word-count and length rules)
  whitespace      text.split()

Run with the datatrove venv:
  bench/.venv-datatrove/bin/python bench/datatrove_alpha_ratio.py [--input FILE]
Writes bench/out/datatrove_alpha_ratio.json.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from datatrove.utils.text import PUNCTUATION_SET
from datatrove.utils.word_tokenizers import load_word_tokenizer

OUT_DIR = Path(__file__).resolve().parent / "out"
THRESHOLD = 0.8  # datatrove's max_non_alpha_words_ratio default (a minimum, despite its name)


def alpha_ratio(words: list[str]) -> float:
    """Share of words with at least one alphabetic character.

    >>> alpha_ratio(["Hello", ",", "world", "42"])
    0.5
    """
    return sum(any(c.isalpha() for c in w) for w in words) / max(len(words), 1)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", type=Path, default=OUT_DIR / "docs_en.jsonl")
    parser.add_argument("--out", type=Path, default=OUT_DIR / "datatrove_alpha_ratio.json")
    args = parser.parse_args(argv)

    tokenizer = load_word_tokenizer("en")
    passed = {"datatrove": 0, "non_symbol": 0, "whitespace": 0}
    n = 0
    with open(args.input, encoding="utf-8") as f:
        for line in f:
            text = json.loads(line)["text"]
            tokens = tokenizer.word_tokenize(text)
            non_symbol = [w for w in tokens if any(ch not in PUNCTUATION_SET for ch in w)]
            passed["datatrove"] += alpha_ratio(tokens) >= THRESHOLD
            passed["non_symbol"] += alpha_ratio(non_symbol) >= THRESHOLD
            passed["whitespace"] += alpha_ratio(text.split()) >= THRESHOLD
            n += 1

    report = {"input": str(args.input), "docs": n, "threshold": THRESHOLD,
              "passed": passed, "pass_rate": {k: v / n for k, v in passed.items()}}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"{n} docs; alpha-word ratio >= {THRESHOLD} when words are ...")
    for name, count in passed.items():
        print(f"  {name:<12}{count:>6}  ({count / n:.1%})")
    print(f"-> {args.out}")


if __name__ == "__main__":
    main()
