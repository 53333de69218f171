"""graph: connected components and the maximum spanning forest of an edge list, in numpy.

Both run as a few whole-array rounds (no Python loop over edges), so near dedup needs no graph library.

- ``components``: min-label propagation. Each round hooks the root of the larger label under the
  smaller across every edge whose ends still differ, then jumps pointers until every node points at its
  root. A component's label is its smallest node, whatever order the edges come in.
- ``spanning_forest``: Boruvka. Each round every component takes its best outgoing edge (by a strict
  order: ``rank``, lower is better), and the components they join merge. With a strict order the forest
  is unique: the one Kruskal finds over the edges sorted by rank.
"""

from __future__ import annotations

import numpy as np

_NONE = np.iinfo(np.int64).max


def components(n: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Each of nodes ``0..n-1``'s component label: the smallest node of its component.

    >>> components(6, np.array([4, 1, 5]), np.array([1, 2, 4])).tolist()
    [0, 1, 1, 3, 1, 1]
    """
    label = np.arange(n, dtype=np.int64)
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    while a.size:
        la, lb = label[a], label[b]
        apart = la != lb
        if not apart.any():
            break
        a, b, la, lb = a[apart], b[apart], la[apart], lb[apart]
        np.minimum.at(label, np.maximum(la, lb), np.minimum(la, lb))  # roots hook under a smaller root
        while True:  # pointer jumping: every node to its root
            up = label[label]
            if np.array_equal(up, label):
                break
            label = up
    return label


def spanning_forest(n: int, a: np.ndarray, b: np.ndarray, rank: np.ndarray) -> np.ndarray:
    """The positions of the edges (``a[i]``, ``b[i]``) in the spanning forest of nodes ``0..n-1`` that
    takes the best edges first, ``rank`` (distinct integers, lower is better) ordering them; sorted.

    >>> spanning_forest(4, np.array([0, 1, 0, 2]), np.array([1, 2, 2, 3]), np.array([0, 1, 2, 3])).tolist()
    [0, 1, 3]
    """
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    rank = np.asarray(rank, dtype=np.int64)
    if np.unique(rank).size != rank.size:
        raise ValueError("spanning_forest: the ranks must be distinct (a strict order makes the forest unique)")
    at = np.full(int(rank.max()) + 1 if rank.size else 0, -1, dtype=np.int64)
    at[rank] = np.arange(rank.size)
    comp = np.arange(n, dtype=np.int64)
    live = np.flatnonzero(a != b)
    chosen: list[np.ndarray] = []
    while live.size:
        ca, cb = comp[a[live]], comp[b[live]]
        cross = ca != cb
        live, ca, cb = live[cross], ca[cross], cb[cross]
        if not live.size:
            break
        best = np.full(n, _NONE, dtype=np.int64)
        r = rank[live]
        np.minimum.at(best, ca, r)
        np.minimum.at(best, cb, r)
        picked = at[np.unique(best[best != _NONE])]  # each component's best edge, an edge picked by both once
        chosen.append(picked)
        comp = components(n, comp[a[picked]], comp[b[picked]])[comp]
    return np.sort(np.concatenate(chosen)) if chosen else np.zeros(0, dtype=np.int64)
