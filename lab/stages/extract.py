"""extract: HTML -> plain text, and the one rule every later stage relies on: some text is left.

Which extractor (``stages.extract.method``; changing it recomputes the run's signals):

- ``main_content`` (the default): resiliparse's ``extract_plain_text`` with its main-content heuristics.
- ``full_text``: the same without them: every visible block kept, navigation included. With the
  boilerplate stage's ``remove_lines`` it is "full text minus what the site repeats".
- ``trafilatura``: trafilatura's ``extract`` (tables kept, comments not); imported only when chosen.

No other method beats ``main_content`` at its cost on every kind of corpus. Documents that arrive as
plain text pass through unchanged, whatever the method.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import pyarrow as pa

from lab.fields import check, knob
from lab.select.rules import Rule

NAME = "extract"
VERSION = 1  # bump when signals() (or what it reads: word lists, models) gives other values
SOURCE = "corpus-lab (some text left after HTML extraction)"

# method -> what it does (the config error lists these)
METHODS = {
    "main_content": "resiliparse with its main-content heuristics; the default",
    "full_text": "resiliparse, every visible block (navigation and footers too)",
    "trafilatura": "trafilatura's main-content extraction; about 20x slower",
}
# trafilatura's options: fallback extractors on (fast=False), tables kept, user comments and metadata
# not; no deduplication (its cache would make a page's text depend on the pages before it in a task)
TRAFILATURA_OPTIONS = {"fast": False, "include_comments": False, "include_tables": True,
                       "with_metadata": False, "deduplicate": False}


@dataclass(frozen=True)
class Config:
    enabled: bool = knob(True, unit="on/off",
                         help="On: a kept document has at least extract.min_chars characters of text left after "
                              "extraction.")
    min_chars: int = knob(1, unit="characters",
                          help="A kept document has at least this many characters of text after extraction, leading "
                               "and trailing whitespace not counted.")
    # how HTML becomes text: main_content (resiliparse main-content, the default), full_text (resiliparse,
    # everything visible) or trafilatura; changing it recomputes the signals
    method: str = "main_content"

    def __post_init__(self) -> None:
        check("min_chars", self.min_chars, self.min_chars >= 0, ">= 0")
        check("method", self.method, self.method in METHODS,
              "one of " + "; ".join(f"{k!r} ({v})" for k, v in METHODS.items())
              + ". Set stages.extract.method to one of these names")


def signal_params(cfg: Config) -> dict:
    """What the signals depend on besides ``VERSION``: the extraction method (and trafilatura's version).

    >>> signal_params(Config())
    {'method': 'main_content'}
    """
    if cfg.method == "trafilatura":
        return {"method": cfg.method, "trafilatura": _trafilatura_version()}
    return {"method": cfg.method}  # resiliparse's version is in the readers' signal parameters


@functools.lru_cache(maxsize=1)
def _trafilatura_version() -> str:
    from importlib import metadata

    return metadata.version("trafilatura")


SIGNALS = {"chars": pa.int64()}


def html_to_text(html: str, method: str = "main_content") -> str:
    """Plain text of an HTML page by ``method`` (one of ``METHODS``), block elements on their own lines."""
    if method == "trafilatura":
        import trafilatura

        return trafilatura.extract(html, **TRAFILATURA_OPTIONS) or ""
    from resiliparse.extract.html2text import extract_plain_text

    if method == "main_content":
        return extract_plain_text(html, main_content=True, preserve_formatting=True, list_bullets=True,
                                  alt_texts=False)
    # alt_texts=True: with alt_texts=False resiliparse skips <figure> elements whole, and editors wrap
    # tables in <figure class="table"> (the price: images' alt texts are kept too)
    text = extract_plain_text(html, main_content=False, preserve_formatting=True, list_bullets=True,
                              alt_texts=True)
    return full_text_lines(text)


def full_text_lines(text: str) -> str:
    """The ``full_text`` method's hook for removing boilerplate lines; today it returns ``text`` unchanged.

    Site-repeated lines ("Prev Up Home Next", a site's footer) are only known across a site's pages:
    The boilerplate stage counts normalized lines per site in a mergeable table through the exact-dedup shuffle
    and removes the frequent ones at materialize. When that is built, the per-document part (normalizing
    lines, so they can be counted and looked up) goes here, and the removal stays out of ``signals``.

    >>> full_text_lines("Prev Up Home Next\\nText.")
    'Prev Up Home Next\\nText.'
    """
    return text


def signals(text: str) -> dict:
    """Characters of text, leading and trailing whitespace not counted.

    >>> signals(" héllo\\n"), signals(" \\n\\t")
    ({'chars': 5}, {'chars': 0})
    """
    return {"chars": len(text.strip())}


def rules(cfg: Config) -> list[Rule]:
    return [Rule(NAME, "chars", ">=", cfg.min_chars, "empty")]
