"""fineweb: the FineWeb quality heuristics (Penedo et al. 2024), as in datatrove's FineWebQualityFilter.

Over non-empty lines: the fraction ending in terminal punctuation >= 0.12; the fraction of lines
of <= 30 characters <= 0.67; characters in duplicated lines / characters (newlines excluded)
<= 0.01; newlines per word <= 0.3.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from lab.rules import Rule

NAME = "fineweb"


@dataclass(frozen=True)
class Config:
    enabled: bool = True
    min_line_punct_ratio: float = 0.12  # lines ending in terminal punctuation / lines
    max_short_line_ratio: float = 0.67  # lines of <= 30 characters / lines
    max_dup_line_char_ratio: float = 0.01  # characters in duplicated lines / characters
    max_newline_word_ratio: float = 0.3  # newlines / words

    def __post_init__(self) -> None:
        from lab.config import check

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


def signals(text: str) -> dict:
    raise NotImplementedError


def rules(cfg: Config) -> list[Rule]:
    return [
        Rule(NAME, "fw_line_punct_ratio", ">=", cfg.min_line_punct_ratio, "line_punct_ratio"),
        Rule(NAME, "fw_short_line_ratio", "<=", cfg.max_short_line_ratio, "short_line_ratio"),
        Rule(NAME, "fw_dup_line_char_ratio", "<=", cfg.max_dup_line_char_ratio, "char_dup_ratio"),
        Rule(NAME, "fw_newline_word_ratio", "<=", cfg.max_newline_word_ratio, "list_ratio"),
    ]
