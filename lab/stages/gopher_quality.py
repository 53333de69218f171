"""gopher_quality: the Gopher quality heuristics (Rae et al. 2021, "Scaling Language Models", App. A).

Signals only; thresholds live in ``rules``. Defaults are the paper's (as in datatrove's
``GopherQualityFilter``): 50..100,000 non-symbol words; mean word length 3..10 characters; ``#`` and
ellipsis per word <= 0.1 each; <= 90% of lines starting with a bullet; <= 30% of lines ending with an
ellipsis; >= 80% of words containing an alphabetic character; >= 2 distinct stop words. Words and stop
words are those of the document's language (``lang``, from the language stage): datatrove's English
words for every language written with spaces, ICU's words for Chinese, Japanese, Thai, Lao, Khmer and
Burmese (``lab.text.segment``), and the language's eight most frequent stop words
(``lab.text.stopwords``; Gopher's eight for English). Definitions follow datatrove's filter; a text
with no words has every value 0, so it fails ``too_short`` first, as datatrove drops it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import pyarrow as pa

from lab.fields import check, knob
from lab.select.rules import Rule
from lab.text import langid, segment, stopwords
from lab.text.words import SYMBOLS

NAME = "gopher_quality"
VERSION = 3  # bump when signals() (or what it reads: word lists, models) gives other values
# 2: stop words and word segmentation of the document's language (1: English for every language)
# 3: Korean particles as eojeol endings, Serbian (Croatian list, both scripts), Thai ranked by TNC frequencies
SOURCE = "Gopher (Rae et al. 2021)"
STOP_WORDS = stopwords.GOPHER_STOP_WORDS  # English; other languages: stopwords.stop_words(lang)


@dataclass(frozen=True)
class Config:
    enabled: bool = knob(True, unit="on/off",
                         help="On: a kept document passes every Gopher quality rule; off: this stage drops nothing.")
    min_words: int = knob(50, unit="words",
                          help="A kept document has at least this many words, words made only of symbols not counted.")
    max_words: int = knob(100_000, unit="words",
                          help="A kept document has at most this many words, words made only of symbols not counted.")
    min_mean_word_length: float = knob(3.0, unit="characters",
                                       help="A kept document's mean word length (words made only of symbols left out)"
                                            " is at least this.")
    max_mean_word_length: float = knob(10.0, unit="characters",
                                       help="A kept document's mean word length (words made only of symbols left out)"
                                            " is at most this.")
    max_symbol_word_ratio: float = knob(0.1, unit="symbols per word",
                                        help="A kept document has at most this many '#' per word, and at most this "
                                             "many ellipses per word.")
    max_bullet_lines_ratio: float = knob(0.9, unit="fraction of lines",
                                         help="At most this fraction of a kept document's lines start with a bullet.")
    max_ellipsis_lines_ratio: float = knob(0.3, unit="fraction of lines",
                                           help="At most this fraction of a kept document's lines end with an "
                                                "ellipsis.")
    min_alpha_words_ratio: float = knob(0.8, unit="fraction of words",
                                        help="At least this fraction of a kept document's words contain a letter.")
    min_stop_words: int = knob(2, unit="distinct stop words",
                               help="A kept document contains at least this many distinct stop words of its language "
                                    "(English: the, be, to, of, and, that, have, with; another language: its 8 most "
                                    "frequent stop words).")

    def __post_init__(self) -> None:
        check("min_words", self.min_words, self.min_words >= 0, ">= 0")
        check("max_words", self.max_words, self.max_words >= self.min_words, f">= min_words ({self.min_words})")
        check("min_mean_word_length", self.min_mean_word_length, self.min_mean_word_length >= 0, ">= 0")
        check("max_mean_word_length", self.max_mean_word_length,
              self.max_mean_word_length >= self.min_mean_word_length, f">= min_mean_word_length ({self.min_mean_word_length})")
        for key in ("max_symbol_word_ratio", "max_bullet_lines_ratio", "max_ellipsis_lines_ratio", "min_alpha_words_ratio"):
            v = getattr(self, key)
            check(key, v, 0.0 <= v <= 1.0 if key != "max_symbol_word_ratio" else v >= 0.0,
                  "a fraction between 0 and 1" if key != "max_symbol_word_ratio" else ">= 0")
        check("min_stop_words", self.min_stop_words, self.min_stop_words >= 0, ">= 0")


SIGNALS = {
    "gq_words": pa.int64(),  # non-symbol words
    "gq_mean_word_length": pa.float64(),
    "gq_hash_word_ratio": pa.float64(),
    "gq_ellipsis_word_ratio": pa.float64(),
    "gq_bullet_lines_ratio": pa.float64(),
    "gq_ellipsis_lines_ratio": pa.float64(),
    "gq_alpha_words_ratio": pa.float64(),
    "gq_stop_words": pa.int64(),
}


def signal_params(cfg: Config) -> dict:
    """What the signals depend on besides ``VERSION``: the language model, the stop lists, the segmenter."""
    return {**segment.signal_params(), **stopwords.versions()}


def signals(text: str) -> dict:
    """
    >>> s = signals("The cat sat on the mat... #cats\\n- and then it slept.")
    >>> s["gq_words"], s["gq_stop_words"], s["gq_bullet_lines_ratio"]
    (11, 2, 0.5)
    """
    lang = langid.detect(text)[0]
    ws = segment.words(text, lang)  # = segment.document_words(text), the split the other stages share
    counts = Counter(ws)
    n_words = len(ws)
    n_kept = kept_chars = n_alpha = 0
    for w, c in counts.items():
        if w.strip(SYMBOLS):  # some character is not a symbol
            n_kept += c
            kept_chars += c * len(w)
        if w.isalpha() or any(ch.isalpha() for ch in w):
            n_alpha += c
    lines = text.splitlines()
    n_lines = len(lines)
    bullets = sum(1 for line in lines if line.lstrip().startswith(("•", "-")))
    ellipsis_lines = sum(1 for line in lines if line.rstrip().endswith(("...", "…")))
    return {
        "gq_words": n_kept,
        "gq_mean_word_length": kept_chars / n_kept if n_kept else 0.0,
        "gq_hash_word_ratio": text.count("#") / n_words if n_words else 0.0,
        "gq_ellipsis_word_ratio": (text.count("...") + text.count("…")) / n_words if n_words else 0.0,
        "gq_bullet_lines_ratio": bullets / n_lines if n_lines else 0.0,
        "gq_ellipsis_lines_ratio": ellipsis_lines / n_lines if n_lines else 0.0,
        "gq_alpha_words_ratio": n_alpha / n_words if n_words else 0.0,
        "gq_stop_words": stopwords.count(lang, counts.keys()),
    }


def rules(cfg: Config) -> list[Rule]:
    return [
        Rule(NAME, "gq_words", ">=", cfg.min_words, "too_short"),
        Rule(NAME, "gq_words", "<=", cfg.max_words, "too_long"),
        Rule(NAME, "gq_mean_word_length", ">=", cfg.min_mean_word_length, "short_words"),
        Rule(NAME, "gq_mean_word_length", "<=", cfg.max_mean_word_length, "long_words"),
        Rule(NAME, "gq_hash_word_ratio", "<=", cfg.max_symbol_word_ratio, "too_many_hashes"),
        Rule(NAME, "gq_ellipsis_word_ratio", "<=", cfg.max_symbol_word_ratio, "too_many_ellipsis"),
        Rule(NAME, "gq_bullet_lines_ratio", "<=", cfg.max_bullet_lines_ratio, "too_many_bullets"),
        Rule(NAME, "gq_ellipsis_lines_ratio", "<=", cfg.max_ellipsis_lines_ratio, "too_many_end_ellipsis"),
        Rule(NAME, "gq_alpha_words_ratio", ">=", cfg.min_alpha_words_ratio, "too_few_alpha_words"),
        Rule(NAME, "gq_stop_words", ">=", cfg.min_stop_words, "too_few_stop_words"),
    ]
