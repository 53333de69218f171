"""extract: HTML -> plain text, and the one rule every later stage relies on: some text is left.

Extraction uses resiliparse's ``extract_plain_text`` with its main-content heuristics
(navigation, footers and forms removed; block structure kept as line breaks). It was chosen
over trafilatura by measurement on real documentation pages: see ``bench/RESULTS.md``
(resiliparse is more than an order of magnitude faster at comparable text recall).
Documents that arrive as plain text pass through unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from lab.rules import Rule
from lab.stages.fields import check, knob

NAME = "extract"
VERSION = 1  # bump when signals() (or what it reads: word lists, models) gives other values
SOURCE = "corpus-lab (some text left after resiliparse extraction)"


@dataclass(frozen=True)
class Config:
    enabled: bool = knob(True, unit="on/off",
                         help="On: a kept document has at least extract.min_chars characters of text left after "
                              "extraction.")
    min_chars: int = knob(1, unit="characters",
                          help="A kept document has at least this many characters of text after extraction, leading "
                               "and trailing whitespace not counted.")

    def __post_init__(self) -> None:
        check("min_chars", self.min_chars, self.min_chars >= 0, ">= 0")


SIGNALS = {"chars": pa.int64()}


def html_to_text(html: str) -> str:
    """Main-content plain text of an HTML page, block elements on their own lines."""
    from resiliparse.extract.html2text import extract_plain_text

    return extract_plain_text(html, main_content=True, preserve_formatting=True, list_bullets=True, alt_texts=False)


def signals(text: str) -> dict:
    """Characters of text, leading and trailing whitespace not counted.

    >>> signals(" héllo\\n"), signals(" \\n\\t")
    ({'chars': 5}, {'chars': 0})
    """
    return {"chars": len(text.strip())}


def rules(cfg: Config) -> list[Rule]:
    return [Rule(NAME, "chars", ">=", cfg.min_chars, "empty")]
