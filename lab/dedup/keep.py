"""neardup.keep: the selection-aware rule: one member kept per group of surviving near-duplicates.

``lab.query`` and ``lab.select.ruleset`` apply it: documents are linked when they share a node (exact copies)
or their nodes have a candidate edge with Jaccard >= the threshold, among the documents that passed
every earlier stage; in each connected group one member is kept, chosen by ``KEEP`` policy.
"""

from __future__ import annotations

import numpy as np

from lab.dedup import graph
from lab.dedup.forest import EPS

KEEP = ("lowest_id", "longest", "best_signal")  # which member of a group is kept


def keep_one_per_cluster(doc_ids: np.ndarray, nodes: np.ndarray, rank: np.ndarray, u: np.ndarray, v: np.ndarray,
                         jaccard: np.ndarray, threshold: float) -> np.ndarray:
    """doc_ids dropped as near-duplicates among the given (surviving) documents.

    Documents are linked when they share a node (exact copies) or their nodes have an edge with
    Jaccard >= ``threshold``; in each connected group the document with the highest ``rank``, then
    the lowest doc_id, is kept and every other one is dropped.
    """
    keepers = cluster_keepers(doc_ids, nodes, rank, u, v, jaccard, threshold)
    return np.sort(doc_ids[keepers != doc_ids])


def cluster_keepers(doc_ids: np.ndarray, nodes: np.ndarray, rank: np.ndarray, u: np.ndarray, v: np.ndarray,
                    jaccard: np.ndarray, threshold: float) -> np.ndarray:
    """For each given (surviving) document, the doc_id ``keep_one_per_cluster`` keeps in its group
    (itself when it is the one kept): the same components and the same choice.

    >>> cluster_keepers(np.array([5, 3, 9]), np.array([1, 2, 7]), np.zeros(3), np.array([1]), np.array([2]),
    ...                 np.array([0.9]), 0.8).tolist()
    [3, 3, 9]
    """
    if doc_ids.size == 0:
        return np.zeros(0, dtype=np.int64)
    ids, node_of = np.unique(nodes, return_inverse=True)
    m = (jaccard >= threshold - EPS) & np.isin(u, ids) & np.isin(v, ids)
    a, b = np.searchsorted(ids, u[m]), np.searchsorted(ids, v[m])
    label = graph.components(ids.size, a, b)
    comp = label[node_of]
    order = np.lexsort((doc_ids, -rank.astype(np.float64), comp))
    first = np.ones(order.size, dtype=bool)
    first[1:] = comp[order][1:] != comp[order][:-1]
    keeper = np.empty(label.max() + 1, dtype=np.int64)
    keeper[comp[order][first]] = doc_ids[order][first]
    return keeper[comp]


def rank_of(keep: str, nbytes: np.ndarray, signal: np.ndarray) -> np.ndarray:
    """The value ``keep_one_per_cluster`` keeps the highest of (ties: lowest doc_id): bytes for
    ``longest``, the signal for ``best_signal``, nothing for ``lowest_id``; missing values lose."""
    values = {"longest": nbytes, "best_signal": signal}.get(keep)
    if values is None:
        return np.zeros(len(nbytes))
    s = np.asarray(values, dtype=np.float64)
    return np.where(np.isnan(s), -np.inf, s)
