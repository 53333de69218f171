"""recall: which pairs LSH compares at all, and the bands x rows that compare enough of them.

Two documents become a candidate pair when at least one of ``bands`` bands of ``rows`` MinHash values is
equal in both: a pair of Jaccard s does so with probability 1 - (1 - s^rows)^bands (the LSH S-curve). A
pair that never becomes a candidate gets no edge: LSH decides the recall of near dedup, the threshold
only its precision. *Recall at a threshold* ``t`` is the S-curve at ``t``, a lower bound on the pair
recall over all pairs at or above ``t``. ``bands_rows`` picks the layout for the lowest threshold one
means to use: within a permutation budget, the most rows per band whose bands still reach
``TARGET_RECALL`` there, and of those the fewest bands.
"""

from __future__ import annotations

import numpy as np

WARN_BELOW = 0.7  # recall at the threshold under which the CLI and the dashboard warn
TARGET_RECALL = 0.95  # what ``bands_rows`` reaches at the lowest threshold asked for
MAX_BANDS = 255  # the LSH shuffle stores a band's index in one byte
MAX_ROWS = 64  # values per band


def s_curve(s: np.ndarray | float, bands: int, rows: int) -> np.ndarray | float:
    """P(two documents of Jaccard s become a candidate pair) = 1 - (1 - s^rows)^bands.

    >>> round(s_curve(0.8, 14, 8), 3), s_curve(1.0, 14, 8), s_curve(0.0, 14, 8)
    (0.924, 1.0, 0.0)
    """
    return 1.0 - (1.0 - s ** rows) ** bands  # a float for a float (config checks), an array for an array


def s_curve_points(bands: int, rows: int, points: int = 101) -> tuple[np.ndarray, np.ndarray]:
    """(s, P(candidate | s)) for Jaccard s in [0, 1]: the LSH S-curve of ``bands`` x ``rows``."""
    s = np.linspace(0.0, 1.0, points)
    return s, s_curve(s, bands, rows)


def recall_at(threshold: float, bands: int, rows: int) -> float:
    """The expected pair recall at ``threshold``: the candidate probability of a pair exactly at it.

    >>> round(recall_at(0.5, 14, 8), 3), round(recall_at(0.6, 14, 8), 3), round(recall_at(0.8, 14, 8), 3)
    (0.053, 0.211, 0.924)
    """
    return float(s_curve(threshold, bands, rows))


def lowest_threshold(grid: tuple[float, ...], bands: int, rows: int, *, recall: float = WARN_BELOW) -> float | None:
    """The lowest threshold of ``grid`` at which ``bands`` x ``rows`` reach ``recall`` (None: none does).

    >>> lowest_threshold((0.5, 0.6, 0.7, 0.75, 0.8), 14, 8)
    0.75
    """
    return next((t for t in sorted(grid) if recall_at(t, bands, rows) >= recall), None)


def bands_rows(min_threshold: float, num_perm: int, *, recall: float = TARGET_RECALL) -> tuple[int, int] | None:
    """``(bands, rows)`` with ``bands * rows <= num_perm`` whose recall at ``min_threshold`` is at least
    ``recall``: the most rows for which enough bands fit, then the fewest bands (fewer false candidates,
    fewer permutations to compute). None when no layout within ``num_perm`` reaches it.

    >>> bands_rows(0.5, 112), bands_rows(0.7, 112), bands_rows(0.8, 112)
    ((23, 3), (17, 5), (13, 7))
    >>> bands_rows(0.5, 4) is None  # 1 - 0.5^4 < 0.95 even with 4 bands of 1 row
    True
    """
    for rows in range(min(MAX_ROWS, num_perm), 0, -1):
        for bands in range(1, min(MAX_BANDS, num_perm // rows) + 1):
            if recall_at(min_threshold, bands, rows) >= recall:
                return bands, rows
    return None
