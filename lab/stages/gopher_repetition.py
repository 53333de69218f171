"""gopher_repetition: the Gopher repetition heuristics (Rae et al. 2021, Table A1).

Signals only; thresholds live in ``rules``. Defaults are the paper's (as in datatrove's
``GopherRepetitionFilter``): duplicate paragraphs <= 0.3 of paragraphs and <= 0.2 of characters;
duplicate lines <= 0.3 and <= 0.2; the most frequent 2/3/4-gram covers <= 0.20/0.18/0.16 of the
characters; duplicated 5..10-grams cover <= 0.15/0.14/0.13/0.12/0.11/0.10 of the characters.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from lab.rules import Rule

NAME = "gopher_repetition"
TOP_NS = (2, 3, 4)
DUP_NS = (5, 6, 7, 8, 9, 10)


@dataclass(frozen=True)
class Config:
    enabled: bool = True
    max_dup_para_frac: float = 0.3  # duplicate paragraphs / paragraphs
    max_dup_para_char_frac: float = 0.2  # characters in duplicate paragraphs / characters
    max_dup_line_frac: float = 0.3  # duplicate lines / lines
    max_dup_line_char_frac: float = 0.2  # characters in duplicate lines / characters
    max_top_2gram_char_frac: float = 0.20  # characters covered by the most frequent n-gram / characters
    max_top_3gram_char_frac: float = 0.18
    max_top_4gram_char_frac: float = 0.16
    max_dup_5gram_char_frac: float = 0.15  # characters in duplicated n-grams / characters
    max_dup_6gram_char_frac: float = 0.14
    max_dup_7gram_char_frac: float = 0.13
    max_dup_8gram_char_frac: float = 0.12
    max_dup_9gram_char_frac: float = 0.11
    max_dup_10gram_char_frac: float = 0.10

    def __post_init__(self) -> None:
        from lab.config import check

        for f in self.__dataclass_fields__:
            if f.startswith("max_"):
                v = getattr(self, f)
                check(f, v, 0.0 <= v <= 1.0, "a fraction between 0 and 1")


SIGNALS = {
    "gr_dup_para_frac": pa.float64(),
    "gr_dup_para_char_frac": pa.float64(),
    "gr_dup_line_frac": pa.float64(),
    "gr_dup_line_char_frac": pa.float64(),
    **{f"gr_top_{n}gram_char_frac": pa.float64() for n in TOP_NS},
    **{f"gr_dup_{n}gram_char_frac": pa.float64() for n in DUP_NS},
}


def signals(text: str) -> dict:
    raise NotImplementedError


def rules(cfg: Config) -> list[Rule]:
    out = [
        Rule(NAME, "gr_dup_para_frac", "<=", cfg.max_dup_para_frac, "dup_para_frac"),
        Rule(NAME, "gr_dup_para_char_frac", "<=", cfg.max_dup_para_char_frac, "dup_para_char_frac"),
        Rule(NAME, "gr_dup_line_frac", "<=", cfg.max_dup_line_frac, "dup_line_frac"),
        Rule(NAME, "gr_dup_line_char_frac", "<=", cfg.max_dup_line_char_frac, "dup_line_char_frac"),
    ]
    out += [Rule(NAME, f"gr_top_{n}gram_char_frac", "<=", getattr(cfg, f"max_top_{n}gram_char_frac"), f"top_{n}gram")
            for n in TOP_NS]
    out += [Rule(NAME, f"gr_dup_{n}gram_char_frac", "<=", getattr(cfg, f"max_dup_{n}gram_char_frac"), f"dup_{n}gram")
            for n in DUP_NS]
    return out
