"""calibration: what per-language thresholds are computed from — each language's distribution of a signal.

``lab.select.calibrate`` sets a language's threshold where the reference language's sits in its own
distribution (FineWeb-2's idea); the numbers it needs are asked here, in SQL over the run's signals:

- ``fail_shares(run, rules, lang)``: per rule, the share of a language's documents with the signal that
  fail it on its own (those without it fail every threshold alike, so they say nothing about where one
  sits);
- ``quantiles(run, signal, langs)``: per language, the signal's exact quantiles (``quantile_disc``)
  on a grid of probabilities, one query per signal;
- ``keep_share(run, rules, lang)``: the share of a language's documents that pass every rule.

Every document of the language counts, whatever earlier stages do with it: the distributions are
the language's own, not those of what survives a particular config.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from lab.query.compile import failure
from lab.query.run import Run, open_run
from lab.query.sql import ident, quote
from lab.select.rules import Rule

__all__ = ["GRID_POINTS", "fail_shares", "keep_share", "quantiles"]

GRID_POINTS = 1001  # quantiles at 0, 0.001, ..., 1


def fail_shares(run: str | Path | Run, rules: Sequence[Rule], lang: str) -> list[float]:
    """Per rule, the share of ``lang``'s documents with its signal that fail it alone (0.0 when none has it)."""
    if not rules:
        return []
    cols = ", ".join(f"avg(CASE WHEN {failure(x, nullable=False)} THEN 1.0 ELSE 0.0 END) "
                     f"FILTER (WHERE {ident(x.signal)} IS NOT NULL)" for x in rules)
    row = open_run(run).cursor().execute(f"SELECT {cols} FROM signals WHERE lang = {quote(lang)}").fetchone()
    return [float(v) if v is not None else 0.0 for v in row]


def keep_share(run: str | Path | Run, rules: Sequence[Rule], lang: str) -> float:
    """The share of ``lang``'s documents that pass every rule of ``rules`` (1.0 without rules or documents)."""
    if not rules:
        return 1.0
    fails = " OR ".join(failure(x) for x in rules)
    v = open_run(run).cursor().execute(
        f"SELECT avg(CASE WHEN {fails} THEN 0.0 ELSE 1.0 END) FROM signals WHERE lang = {quote(lang)}").fetchone()[0]
    return 1.0 if v is None else float(v)


def quantiles(run: str | Path | Run, signal: str, langs: Sequence[str]) -> dict[str, np.ndarray]:
    """Per language of ``langs`` with values, the signal's quantiles at ``GRID_POINTS`` evenly spaced
    probabilities from 0 to 1 (exact values of the documents: ``quantile_disc``)."""
    if not langs:
        return {}
    probs = ", ".join(repr(i / (GRID_POINTS - 1)) for i in range(GRID_POINTS))
    col = ident(signal)
    rows = open_run(run).cursor().execute(
        f"SELECT lang, quantile_disc({col}, [{probs}]) FROM signals WHERE lang IN ({', '.join(map(quote, langs))}) "
        f"AND {col} IS NOT NULL GROUP BY lang").fetchall()
    return {lang: np.asarray(q, dtype=np.float64) for lang, q in rows}
