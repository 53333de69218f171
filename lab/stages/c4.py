"""c4: the C4 heuristics (Raffel et al. 2020, §2.2), as line counts and document flags.

C4 removes lines (a word over 1,000 characters, no terminal punctuation or an ellipsis at the
end, fewer than 3 words, the word "javascript", cookie/terms/privacy-policy phrases) and drops
documents (a "lorem ipsum" or a curly brace on a kept line, fewer than 5 sentences left).
Here the line checks are stored as counts and the document checks as signals; the rules drop
documents only, and the stored text is not rewritten.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from lab.rules import Rule

NAME = "c4"


@dataclass(frozen=True)
class Config:
    enabled: bool = True
    min_sentences: int = 5  # sentences left after C4's line removal
    filter_lorem_ipsum: bool = True  # drop documents with "lorem ipsum" on a kept line
    filter_curly_brace: bool = True  # drop documents with "{" on a kept line

    def __post_init__(self) -> None:
        from lab.config import check

        check("min_sentences", self.min_sentences, self.min_sentences >= 0, ">= 0")


SIGNALS = {
    "c4_lines": pa.int64(),
    "c4_lines_long_word": pa.int64(),  # a word over 1,000 characters
    "c4_lines_no_terminal_punct": pa.int64(),
    "c4_lines_few_words": pa.int64(),  # fewer than 3 words
    "c4_lines_javascript": pa.int64(),
    "c4_lines_policy": pa.int64(),
    "c4_lorem_ipsum": pa.int64(),  # 1 when a kept line contains "lorem ipsum"
    "c4_curly_brace": pa.int64(),  # 1 when a kept line contains "{"
    "c4_sentences": pa.int64(),  # sentences on the kept lines
}


def signals(text: str) -> dict:
    raise NotImplementedError


def rules(cfg: Config) -> list[Rule]:
    out = []
    if cfg.filter_lorem_ipsum:
        out.append(Rule(NAME, "c4_lorem_ipsum", "==", 0, "lorem_ipsum"))
    if cfg.filter_curly_brace:
        out.append(Rule(NAME, "c4_curly_brace", "==", 0, "curly_brace"))
    out.append(Rule(NAME, "c4_sentences", ">=", cfg.min_sentences, "too_few_sentences"))
    return out
