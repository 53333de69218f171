"""Mergeable global statistics: per-partition partials, merged once, equal to one pass over all rows.

For each numeric signal a partition emits ``Summary``: count, sum, sum of squares, min, max, a count of
missing values, and a ``QuantileSketch``. Merging is addition (and min/max), so the merged summary does
not depend on partitioning or merge order. The sketch is a log-bucketed histogram (the DDSketch idea,
Masson et al. 2019): ``x > 0`` falls in bucket ``ceil(log_gamma(x))`` with ``gamma = (1 + a) / (1 - a)``;
negative values mirror it; ``|x| < MIN_ABS`` counts as zero. A quantile estimate is within ``a * |x_q|``
of the exact order statistic ``x_q`` (relative accuracy ``a``, default 1%). Buckets are integers, so
merged sketches are exact sums.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

RELATIVE_ACCURACY = 0.01
MIN_ABS = 1e-9


@dataclass
class QuantileSketch:
    accuracy: float = RELATIVE_ACCURACY
    pos: Counter = field(default_factory=Counter)  # bucket -> count, for x >= MIN_ABS
    neg: Counter = field(default_factory=Counter)  # bucket -> count, for -x >= MIN_ABS
    zeros: int = 0

    @property
    def gamma(self) -> float:
        return (1 + self.accuracy) / (1 - self.accuracy)

    @property
    def count(self) -> int:
        return self.zeros + sum(self.pos.values()) + sum(self.neg.values())

    def add(self, values: np.ndarray) -> None:
        v = np.asarray(values, dtype=np.float64)
        v = v[~np.isnan(v)]
        small = np.abs(v) < MIN_ABS
        self.zeros += int(small.sum())
        lg = math.log(self.gamma)
        for sign, counter in ((1.0, self.pos), (-1.0, self.neg)):
            x = v[(~small) & (sign * v > 0)] * sign
            if x.size:
                keys, counts = np.unique(np.ceil(np.log(x) / lg).astype(np.int64), return_counts=True)
                for k, c in zip(keys.tolist(), counts.tolist()):
                    counter[k] += c

    def merge(self, other: QuantileSketch) -> QuantileSketch:
        if other.accuracy != self.accuracy:
            raise ValueError(f"cannot merge sketches of accuracy {self.accuracy} and {other.accuracy}")
        return QuantileSketch(self.accuracy, self.pos + other.pos, self.neg + other.neg, self.zeros + other.zeros)

    def _value(self, bucket: int) -> float:
        # the point of bucket (gamma^(k-1), gamma^k] whose relative error to either end is <= accuracy
        return 2 * self.gamma**bucket / (self.gamma + 1)

    def quantile(self, q: float) -> float | None:
        """Estimate of the value at rank ``floor(q * (n - 1))`` in sorted order; None when empty.

        >>> s = QuantileSketch(); s.add(np.arange(1, 101)); abs(s.quantile(0.5) - 50) <= 0.01 * 50
        True
        """
        n = self.count
        if n == 0:
            return None
        if not 0.0 <= q <= 1.0:
            raise ValueError(f"quantile q={q} must be between 0 and 1")
        rank = math.floor(q * (n - 1))
        seen = 0
        for k in sorted(self.neg, reverse=True):  # most negative first
            seen += self.neg[k]
            if seen > rank:
                return -self._value(k)
        seen += self.zeros
        if seen > rank:
            return 0.0
        for k in sorted(self.pos):
            seen += self.pos[k]
            if seen > rank:
                return self._value(k)
        raise AssertionError("rank beyond count")  # unreachable: rank < n

    def to_json(self) -> dict:
        return {"accuracy": self.accuracy, "zeros": self.zeros,
                "pos": {str(k): v for k, v in sorted(self.pos.items())},
                "neg": {str(k): v for k, v in sorted(self.neg.items())}}

    @classmethod
    def from_json(cls, d: dict) -> QuantileSketch:
        return cls(d["accuracy"], Counter({int(k): v for k, v in d["pos"].items()}),
                   Counter({int(k): v for k, v in d["neg"].items()}), d["zeros"])


@dataclass
class Summary:
    """count, sum, squared deviations (m2), min, max, missing and a quantile sketch of one numeric signal.

    The variance is kept as ``m2`` = the sum of squared deviations from the mean, merged with the
    parallel formula of Chan, Golub and LeVeque (1979): exact to rounding however far the values lie
    from 0 (E[x²] − μ² loses every digit when the spread is tiny beside the mean).

    >>> a, b = Summary.of(np.array([1e9 + 1, 1e9 + 2])), Summary.of(np.array([1e9 + 3]))
    >>> round(a.merge(b).std, 6)
    0.816497
    """

    count: int = 0
    missing: int = 0
    total: float = 0.0
    m2: float = 0.0
    min: float = math.inf
    max: float = -math.inf
    sketch: QuantileSketch = field(default_factory=QuantileSketch)

    @classmethod
    def of(cls, values: np.ndarray) -> Summary:
        v = np.asarray(values, dtype=np.float64)
        nan = np.isnan(v)
        x = v[~nan]
        s = cls(count=int(x.size), missing=int(nan.sum()))
        if x.size:
            s.total = float(x.sum())
            s.m2 = float(((x - x.mean()) ** 2).sum())  # two passes: the deviations from the mean
            s.min, s.max = float(x.min()), float(x.max())
            s.sketch.add(x)
        return s

    def merge(self, o: Summary) -> Summary:
        n = self.count + o.count
        m2 = self.m2 + o.m2
        if self.count and o.count:
            delta = o.total / o.count - self.total / self.count
            m2 += delta * delta * self.count * o.count / n
        return Summary(n, self.missing + o.missing, self.total + o.total, m2, min(self.min, o.min),
                       max(self.max, o.max), self.sketch.merge(o.sketch))

    @property
    def mean(self) -> float | None:
        return self.total / self.count if self.count else None

    @property
    def std(self) -> float | None:
        """Population standard deviation."""
        if not self.count:
            return None
        return math.sqrt(max(self.m2 / self.count, 0.0))

    def quantile(self, q: float) -> float | None:
        v = self.sketch.quantile(q)
        return None if v is None else min(max(v, self.min), self.max)

    def to_json(self) -> dict:
        return {"count": self.count, "missing": self.missing, "sum": self.total, "m2": self.m2,
                "min": self.min if self.count else None, "max": self.max if self.count else None,
                "sketch": self.sketch.to_json()}

    @classmethod
    def from_json(cls, d: dict) -> Summary:
        if "m2" in d:
            m2 = d["m2"]
        else:  # written before m2 (sum of squares): the old, imprecise moment
            m2 = max(d["sum_sq"] - d["sum"] ** 2 / d["count"], 0.0) if d["count"] else 0.0
        return cls(d["count"], d["missing"], d["sum"], m2,
                   math.inf if d["min"] is None else d["min"], -math.inf if d["max"] is None else d["max"],
                   QuantileSketch.from_json(d["sketch"]))


def summarize(columns: dict[str, np.ndarray]) -> dict[str, Summary]:
    """One partition's partials: signal -> Summary."""
    return {name: Summary.of(values) for name, values in columns.items()}


def merge_all(partials: list[dict[str, Summary]]) -> dict[str, Summary]:
    """Merge partition partials in a fixed (sorted-name) order: the result is independent of input order
    up to float addition, which the caller makes deterministic by passing partitions in index order."""
    out: dict[str, Summary] = {}
    for p in partials:
        for name in sorted(p):
            out[name] = out[name].merge(p[name]) if name in out else p[name]
    return out


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a proportion: ``k`` successes in ``n`` trials (``z`` = 1.96: 95%).

    Unlike the normal approximation it stays inside [0, 1] and is not empty at k = 0 or k = n
    (Wilson 1927; Brown, Cai & DasGupta 2001 recommend it for small n). By hand for 8 of 10:
    p = 0.8, z^2/n = 0.38416, centre (0.8 + 0.19208) / 1.38416 = 0.71674, half-width
    1.96 * sqrt(0.016 + 0.009604) / 1.38416 = 0.22658.

    >>> [round(x, 4) for x in wilson(8, 10)]
    [0.4902, 0.9433]
    >>> [round(x, 4) for x in wilson(0, 5)]
    [0.0, 0.4345]
    """
    if n <= 0 or not 0 <= k <= n:
        raise ValueError(f"wilson(k={k}, n={n}): need n >= 1 and 0 <= k <= n")
    p, z2 = k / n, z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return (0.0 if k == 0 else max(0.0, centre - half), 1.0 if k == n else min(1.0, centre + half))
