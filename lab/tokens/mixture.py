"""mixture: how many times each kept document goes into the training tokens, from a budget per bucket.

A *bucket* groups kept documents by ``mixture.by`` (``lang``, ``source``, ``quality``: ``qm_score`` cut at
``quality_edges``), named by its values joined with ``/`` (``en/q>=0.7``). A mixture gives buckets token
budgets (``tokens``; unlisted buckets kept once or left out, by ``rest``) or weights (shares of
``total_tokens`` summing to 1; unlisted buckets left out). ``realize`` reads a bucket of ``A`` tokens with
a target of ``T`` ``e = T / A`` times: every document ``floor(e)`` times, plus a seeded choice of its
documents for the fraction. Repeats are counted per document, so the realized tokens are exact sums and
every copy lands in its document's split. Past 4 epochs a bucket gets a warning. ``rehydrate`` first
repeats each kept document by its duplicate group's size, at most ``rehydrate_cap`` times. ``plan``
computes it from plain arrays, which ``lab.query.mixture_rows`` gives.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from lab.errors import ConfigError
from lab.fields import check
from lab.hashing import keyed

DIMENSIONS = ("lang", "source", "quality")
NO_SCORE = "none"  # the quality bucket of a document without a score
EPOCH_WARNING = 4.0  # Muennighoff et al. 2023: repeats past ~4 epochs are worth much less than new data
_SALT = 0x6D69787475726521  # "mixture!": the seeded choice is independent of the shuffle's mixes


@dataclass(frozen=True)
class BucketTarget:
    """One bucket's budget: ``tokens`` (absolute) or ``weight`` (a share of the mixture's total)."""

    bucket: str  # the bucket's name: its values joined by "/" in ``by`` order (e.g. en/web.jsonl)
    tokens: int | None = None  # the tokens it contributes (repeats or a seeded subset realize it)
    weight: float | None = None  # its share of ``total_tokens`` (weights sum to 1)

    def __post_init__(self) -> None:
        check("bucket", self.bucket, bool(self.bucket), "a bucket name such as en or en/web.jsonl")
        check("tokens", self.tokens, (self.tokens is None) != (self.weight is None),
              f"given alone: a bucket ({self.bucket}) has either tokens or weight")
        check("tokens", self.tokens, self.tokens is None or self.tokens >= 0, ">= 0 tokens")
        check("weight", self.weight, self.weight is None or 0 <= self.weight <= 1, "a share in [0, 1]")


@dataclass(frozen=True)
class MixtureConfig:
    """Token budgets per bucket of kept documents, applied at materialize (empty ``by``: every kept
    document once, as without a mixture)."""

    by: tuple[str, ...] = ()  # bucket dimensions: any of lang, source, quality (qm_score at quality_edges)
    quality_edges: tuple[float, ...] = (0.5,)  # qm_score cut points of the quality dimension, ascending
    buckets: tuple[BucketTarget, ...] = ()  # the budgets: a token count or a weight per bucket
    total_tokens: int | None = None  # with weights: the mixture's size (default: the kept tokens)
    rest: Literal["keep", "drop"] = "keep"  # with token budgets: what becomes of the buckets not listed
    seed: int = 0  # which documents a fractional epoch takes
    rehydrate: bool = False  # repeat each kept document by its duplicate group's size first (FineWeb-2)
    rehydrate_cap: int = 5  # at most this many copies of a document by rehydration

    def __post_init__(self) -> None:
        for d in self.by:
            check("by", d, d in DIMENSIONS, "a list of " + ", ".join(DIMENSIONS))
        check("by", self.by, len(set(self.by)) == len(self.by), "each dimension once")
        check("quality_edges", self.quality_edges, list(self.quality_edges) == sorted(set(self.quality_edges)),
              "ascending, distinct scores")
        check("buckets", [b.bucket for b in self.buckets], not self.buckets or bool(self.by),
              "empty without `by` (name the dimensions the buckets are made of, e.g. by: [lang])")
        names = [b.bucket for b in self.buckets]
        dup = sorted({n for n in names if names.count(n) > 1})
        check("buckets", dup, not dup, "each bucket listed once")
        kinds = {b.weight is not None for b in self.buckets}
        check("buckets", [b.bucket for b in self.buckets], len(kinds) <= 1, "all token budgets or all weights, not both")
        if self.weighted:
            total = math.fsum(b.weight for b in self.buckets)
            check("buckets", f"weights summing to {total:g}", abs(total - 1) <= 1e-6, "weights that sum to 1")
        check("total_tokens", self.total_tokens, self.total_tokens is None or (self.weighted and self.total_tokens > 0),
              "a positive token count, with weights only (token budgets are absolute)")
        check("rest", self.rest, self.rest in ("keep", "drop"), "keep or drop")
        check("rehydrate_cap", self.rehydrate_cap, self.rehydrate_cap >= 1, ">= 1 copy")

    @property
    def weighted(self) -> bool:
        return any(b.weight is not None for b in self.buckets)

    @property
    def active(self) -> bool:
        """Whether it changes anything (else materialize writes every kept document once)."""
        return bool(self.buckets) or self.rehydrate


def quality_bucket(score: float | None, edges: tuple[float, ...]) -> str:
    """The quality dimension's value of a score: ``q<e0``, ``e0-e1``, …, ``q>=ek``; ``none`` without one.

    >>> [quality_bucket(s, (0.3, 0.7)) for s in (0.1, 0.3, 0.69, 0.7, None)]
    ['q<0.3', '0.3-0.7', '0.3-0.7', 'q>=0.7', 'none']
    """
    if score is None or (isinstance(score, float) and math.isnan(score)):
        return NO_SCORE
    if not edges or score < edges[0]:
        return f"q<{edges[0]:g}" if edges else "q"
    for a, b in zip(edges, edges[1:]):
        if a <= score < b:
            return f"{a:g}-{b:g}"
    return f"q>={edges[-1]:g}"


def bucket_name(values: tuple) -> str:
    """A bucket's name from its dimension values (``None`` reads ``none``).

    >>> bucket_name(("en", "web.jsonl")), bucket_name((None,))
    ('en/web.jsonl', 'none')
    """
    return "/".join(NO_SCORE if v is None else str(v) for v in values)


def realize(doc_ids: np.ndarray, tokens: np.ndarray, target: float, seed: int) -> np.ndarray:
    """Copies of each document of one bucket so that their tokens come to ``target``: ``floor(e)`` each
    (``e = target / tokens.sum()``), plus one for the documents a seeded order takes for the fraction.

    >>> realize(np.arange(4), np.array([10, 10, 10, 10]), 100, seed=0).tolist()  # 2.5 epochs
    [2, 3, 3, 2]
    >>> int((realize(np.arange(4), np.array([10, 10, 10, 10]), 20, seed=0) * 10).sum())  # half
    20
    """
    available = int(tokens.sum())
    reps = np.zeros(doc_ids.size, dtype=np.int64)
    if available == 0 or target <= 0:
        return reps
    epochs = target / available
    full = math.floor(epochs)
    reps[:] = full
    want = target - full * available  # tokens still to take, < available
    if want > 0:
        order = np.lexsort((doc_ids, keyed(doc_ids, seed, _SALT)))  # the shuffle's mix, salted apart from it
        cum = np.cumsum(tokens[order])
        # the documents whose running total stays within half a document of the remainder
        take = cum - tokens[order] / 2 <= want
        reps[order[take]] += 1
    return reps


@dataclass
class Plan:
    """The realized mixture: copies per kept document, and per bucket what it had and what it gives."""

    repeats: np.ndarray  # per kept document (in the order given): how many times it is written
    report: list[dict] = field(default_factory=list)  # per bucket: documents, tokens before/after, epochs
    warnings: list[str] = field(default_factory=list)

    @property
    def tokens(self) -> int:
        return sum(r["tokens_after"] for r in self.report)

    def to_json(self) -> dict:
        """What the manifest records of the realized mixture."""
        return {"buckets": self.report, "tokens_before": sum(r["tokens_before"] for r in self.report),
                "tokens_after": self.tokens, "documents_written": int(self.repeats.sum()), "warnings": self.warnings}


def plan(cfg: MixtureConfig, doc_ids: np.ndarray, buckets: np.ndarray, tokens: np.ndarray,
         duplicates: np.ndarray | None = None) -> Plan:
    """The copies of every kept document under ``cfg``: ``buckets`` names each document's bucket,
    ``tokens`` its token count, ``duplicates`` (rehydration) its duplicate group's size (1: unique).
    A listed bucket no document is in raises a ConfigError naming the buckets there are.

    >>> cfg = MixtureConfig(by=("lang",), buckets=(BucketTarget("en", weight=0.5), BucketTarget("de", weight=0.5)))
    >>> p = plan(cfg, np.arange(4), np.array(["en", "en", "en", "de"]), np.array([10, 10, 10, 10]))
    >>> p.repeats.tolist(), [(r["bucket"], r["tokens_after"], r["epochs"]) for r in p.report]
    ([0, 1, 1, 2], [('de', 20, 2.0), ('en', 20, 0.667)])
    """
    doc_ids, tokens = np.asarray(doc_ids, dtype=np.int64), np.asarray(tokens, dtype=np.int64)
    buckets = np.asarray(buckets, dtype=object)
    base = np.ones(doc_ids.size, dtype=np.int64)
    if cfg.rehydrate and duplicates is not None:
        base = np.minimum(np.maximum(np.asarray(duplicates, dtype=np.int64), 1), cfg.rehydrate_cap)
    names = sorted(set(buckets.tolist()))
    listed = {b.bucket: b for b in cfg.buckets}
    unknown = sorted(set(listed) - set(names))
    if unknown:
        raise ConfigError(f"mixture.buckets names {', '.join(map(repr, unknown))}, which no kept document is in; "
                          f"the buckets of mixture.by={list(cfg.by)} are: {', '.join(names) or '(none)'}; fix the name "
                          "or remove it")
    kept_total = int((tokens * base).sum())
    total = cfg.total_tokens if cfg.total_tokens is not None else kept_total
    repeats = np.zeros(doc_ids.size, dtype=np.int64)
    report, warnings = [], []
    for name in names:
        at = np.flatnonzero(buckets == name)
        have = int((tokens[at] * base[at]).sum())
        if name in listed:
            b = listed[name]
            target = float(b.tokens) if b.tokens is not None else b.weight * total
        elif cfg.weighted or cfg.rest == "drop":
            target = 0.0
        else:
            target = float(have)
        if cfg.rehydrate and target == have:  # rehydrated, not resampled: every document its own copies
            reps = base[at].copy()
        else:
            # the rehydrated copies are the bucket's documents: a copy is realized like a document
            copies = np.repeat(at, base[at])
            with np.errstate(over="ignore"):  # a copy's key: its document's id, told apart by its copy number
                keys = doc_ids[copies] ^ (_copy_index(base[at]) * np.int64(0x9E3779B1))
            per_copy = realize(keys, tokens[copies], target, cfg.seed)
            reps = np.bincount(np.searchsorted(at, copies), weights=per_copy, minlength=at.size).astype(np.int64)
        repeats[at] = reps
        after = int((tokens[at] * reps).sum())
        epochs = after / int(tokens[at].sum()) if tokens[at].sum() else 0.0
        row = {"bucket": name, "documents": int(at.size), "tokens_before": int(tokens[at].sum()),
               "target": None if name not in listed and not cfg.weighted and cfg.rest == "keep" else round(target),
               "tokens_after": after, "documents_after": int((reps > 0).sum()), "epochs": round(epochs, 3),
               "max_repeats": int(reps.max()) if reps.size else 0}
        report.append(row)
        if epochs > EPOCH_WARNING:
            warnings.append(f"mixture bucket {name!r}: {epochs:.1f} epochs of its {row['tokens_before']:,} tokens "
                            f"(past {EPOCH_WARNING:g}, repeated tokens are worth much less than new ones: "
                            "Muennighoff et al. 2023); lower its budget or add data to it")
        elif epochs > 1 + 1e-9 and name in listed:
            warnings.append(f"mixture bucket {name!r}: its budget is more than its {row['tokens_before']:,} tokens "
                            f"give once: {epochs:.2f} epochs (its documents repeat)")
    return Plan(repeats, report, warnings)


def _copy_index(base: np.ndarray) -> np.ndarray:
    """0, 1, … within each document's run of copies (``np.repeat`` of documents by ``base``).

    >>> _copy_index(np.array([2, 1, 3])).tolist()
    [0, 1, 0, 0, 1, 2]
    """
    starts = np.cumsum(base) - base
    return np.arange(int(base.sum())) - np.repeat(starts, base)
