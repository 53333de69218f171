"""fineweb: the FineWeb quality heuristics (Penedo et al. 2024), as in datatrove's FineWebQualityFilter.

Over non-empty lines: the fraction ending in terminal punctuation >= 0.12; the fraction of lines of
<= 30 characters <= 0.67; characters in duplicated lines / characters (newlines excluded) <= 0.01;
newlines per word <= 0.3. Definitions follow datatrove's filter (current version, defaults): lines are
``text.split("\\n")`` without the blank ones, terminal punctuation is the Unicode sentence terminals,
and duplicated lines count after their first occurrence. Words are the document's words in its
language (``lab.text.segment.document_words``), so a Chinese clause is not one word. A text with no
non-blank line has every ratio 0.0, so it fails ``line_punct_ratio`` first, as datatrove drops it as
"empty"; a text with no word has its newline count as ratio.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from lab.fields import check, knob
from lab.select.rules import Rule
from lab.text import segment
from lab.text.words import TERMINAL_PUNCTUATION

NAME = "fineweb"
VERSION = 2  # bump when signals() (or what it reads: word lists, models) gives other values
# 2: words of the document's language (ICU words for unspaced scripts; 1: English words for every language)
SOURCE = "FineWeb (Penedo et al. 2024), datatrove FineWebQualityFilter default"
SHORT_LINE_LENGTH = 30  # characters; a line this long or shorter is short


@dataclass(frozen=True)
class Config:
    enabled: bool = knob(True, unit="on/off",
                         help="On: a kept document passes every FineWeb rule; off: this stage drops nothing.")
    min_line_punct_ratio: float = knob(0.12, unit="fraction of lines",
                                       help="At least this fraction of a kept document's non-blank lines end in "
                                            "terminal punctuation.")
    max_short_line_ratio: float = knob(0.67, unit="fraction of lines",
                                       help="At most this fraction of a kept document's non-blank lines are 30 "
                                            "characters or shorter.")
    max_dup_line_char_ratio: float = knob(0.01, unit="fraction of characters",
                                          help="At most this fraction of a kept document's characters (newlines not "
                                               "counted) are in lines that repeat an earlier one.")
    max_newline_word_ratio: float = knob(0.3, unit="newlines per word",
                                         help="A kept document has at most this many newlines per word.")

    def __post_init__(self) -> None:
        for f in ("min_line_punct_ratio", "max_short_line_ratio", "max_dup_line_char_ratio"):
            v = getattr(self, f)
            check(f, v, 0.0 <= v <= 1.0, "a fraction between 0 and 1")
        check("max_newline_word_ratio", self.max_newline_word_ratio, self.max_newline_word_ratio >= 0, ">= 0")


SIGNALS = {
    "fw_line_punct_ratio": pa.float64(),
    "fw_short_line_ratio": pa.float64(),
    "fw_dup_line_char_ratio": pa.float64(),
    "fw_newline_word_ratio": pa.float64(),
}


def signal_params(cfg: Config) -> dict:
    """What the signals depend on besides ``VERSION``: the language model and the segmenter (the words)."""
    return segment.signal_params()


def signals(text: str) -> dict:
    """
    >>> s = signals("Home\\nA line that ends with a full stop.\\nHome\\n")
    >>> s["fw_line_punct_ratio"], s["fw_dup_line_char_ratio"], s["fw_newline_word_ratio"]  # 1/3, 4/42, 3/11
    (0.3333333333333333, 0.09523809523809523, 0.2727272727272727)
    """
    lines = [line for line in text.split("\n") if line.strip()]
    if not lines:
        return {"fw_line_punct_ratio": 0.0, "fw_short_line_ratio": 0.0, "fw_dup_line_char_ratio": 0.0,
                "fw_newline_word_ratio": 0.0}
    n = len(lines)
    unique = set(lines)
    dup_chars = sum(map(len, lines)) - sum(map(len, unique))
    n_words = len(segment.document_words(text))
    return {
        "fw_line_punct_ratio": sum(1 for line in lines if line[-1] in TERMINAL_PUNCTUATION) / n,
        "fw_short_line_ratio": sum(1 for line in lines if len(line) <= SHORT_LINE_LENGTH) / n,
        "fw_dup_line_char_ratio": dup_chars / (len(text) - text.count("\n")),
        "fw_newline_word_ratio": text.count("\n") / max(n_words, 1),
    }


def rules(cfg: Config) -> list[Rule]:
    return [
        Rule(NAME, "fw_line_punct_ratio", ">=", cfg.min_line_punct_ratio, "line_punct_ratio"),
        Rule(NAME, "fw_short_line_ratio", "<=", cfg.max_short_line_ratio, "short_line_ratio"),
        Rule(NAME, "fw_dup_line_char_ratio", "<=", cfg.max_dup_line_char_ratio, "char_dup_ratio"),
        Rule(NAME, "fw_newline_word_ratio", "<=", cfg.max_newline_word_ratio, "list_ratio"),
    ]
