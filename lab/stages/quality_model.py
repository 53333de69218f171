"""quality_model: a text classifier's probability that a document is good, as a signal.

The model (``model``) is a local file or directory (``lab.quality.model``: fastText, a classifier
trained with ``corpus-lab train-quality``, or a HuggingFace classifier with ``corpus-lab[hf]``); nothing is
downloaded. Its sha256 is part of the signals hash and of the manifest. A HuggingFace model is given
``WINDOW`` x ``batch_size`` documents at a time, sorted by length, ``batch_size`` per forward pass.
Signals: ``qm_score`` (the probability of ``positive_label``) and ``qm_label`` (the most likely class);
both empty without a model or for an empty text. A document is classified by its first ``max_chars``
characters. Rule: a kept document's score is at least ``min_score``; without a model there is no rule.
"Keep the top p%" is a percentile rule: ``percentiles: [{stage: quality_model, signal: qm_score,
drop_lowest: 100 - p}]``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from lab.fields import check, knob
from lab.quality import model as quality
from lab.select.rules import Rule

NAME = "quality_model"
VERSION = 1  # bump when the signals give other values (the text given to the model, the score's definition)
SOURCE = "model-based quality filtering (GPT-3 classifier; DCLM fastText OH-2.5+ELI5 vs random web text)"
EMPTY = {"qm_score": None, "qm_label": None}


@dataclass(frozen=True)
class Config:
    enabled: bool = knob(True, unit="on/off",
                         help="On: a kept document's quality score is at least quality_model.min_score (when a model "
                              "is set); off: every document passes.")
    min_score: float = knob(0.5, unit="probability 0..1",
                            help="A kept document's probability of the positive (good) class is at least this.",
                            signal="qm_score")  # the rule exists only with a model: the knob names its signal
    # a fastText .bin/.ftz, an .npz from `corpus-lab train-quality`, or a local HuggingFace model directory;
    # "" = no model: no score and no rule
    model: str = ""
    positive_label: str = "hq"  # the class whose probability is the score (hq and __label__hq are the same)
    max_chars: int = quality.MAX_CHARS  # characters of each document classified (its beginning)
    # documents per forward pass of a HuggingFace model; 0 = the device's default (8 on the CPU, 32 on a GPU)
    batch_size: int = 0

    def __post_init__(self) -> None:
        check("min_score", self.min_score, 0.0 <= self.min_score <= 1.0, "a probability in [0, 1]")
        check("positive_label", self.positive_label, bool(quality.label_name(self.positive_label).strip()),
              "a class name of the model such as hq or __label__hq")
        check("max_chars", self.max_chars, self.max_chars >= 100, ">= 100 characters")
        check("batch_size", self.batch_size, 0 <= self.batch_size <= 4096,
              "0..4096 documents per forward pass (0 = the device's default)")
        if self.model:
            quality.inspect(self.model, self.positive_label)  # a clear error now, before any work


SIGNALS = {"qm_score": pa.float64(), "qm_label": pa.string()}
WINDOW = 8  # forward passes' worth of documents sorted by length together (less padding)


def prepare(cfg: Config, run_dir: Any) -> None:
    """In the driver before any partition: a HuggingFace model needs transformers and torch installed (checked
    here rather than in the config, so that a run scored by one can be browsed without them)."""
    if cfg.model and quality.inspect(cfg.model).kind == "hf":
        quality.require_hf(cfg.model, key="stages.quality_model.model")


class Collector:
    """Per partition: the model (loaded once per process), each document's prefix through it.

    ``chunk_size`` > 1 (a HuggingFace model): annotate hands ``signals_batch`` that many documents at once.
    """

    def __init__(self, cfg: Config, n_buckets: int = 1, run_dir: Any = None) -> None:
        self.model = quality.load(cfg.model, cfg.positive_label) if cfg.model else None
        self.max_chars = cfg.max_chars
        self.batch_size = cfg.batch_size  # 0: the scorer's default for its device
        self.chunk_size = 1
        if self.model is not None and self.model.batches:
            self.chunk_size = WINDOW * (cfg.batch_size or self.model.default_batch_size)

    def signals(self, i: int, text: str, doc: Any = None) -> dict:
        return self.signals_batch([(i, text, doc)])[0]

    def signals_batch(self, items: list[tuple[int, str, Any]]) -> list[dict]:
        """Signals of several documents, each ``(i, text, doc)``, in order; one ``score_batch`` call for them all."""
        out = [dict(EMPTY) for _ in items]
        if self.model is None:
            return out
        todo = [k for k, (_, text, _) in enumerate(items) if text.strip()]
        texts = [quality.prefix(items[k][1], self.max_chars) for k in todo]
        if self.model.batches:
            scored = self.model.score_batch(texts, batch_size=self.batch_size)
        else:
            scored = [self.model.score(t) for t in texts]
        for k, (label, score) in zip(todo, scored):
            out[k] = {"qm_score": round(score, 6), "qm_label": label}
        return out

    def write(self, layout: Any, key: str, signals: pa.Table) -> None:
        """No files of its own."""


def signals(text: str) -> dict:
    """Without a model there is no score."""
    return dict(EMPTY)


def signal_params(cfg: Config) -> dict:
    """The model file's sha256 (and what is given to it): a new model recomputes the signals."""
    return {"model": quality.model_sha256(cfg.model) if cfg.model else "",
            "positive_label": quality.label_name(cfg.positive_label), "max_chars": cfg.max_chars}


def rules(cfg: Config) -> list[Rule]:
    if not cfg.model:
        return []
    return [Rule(NAME, "qm_score", ">=", cfg.min_score, "low_score")]
