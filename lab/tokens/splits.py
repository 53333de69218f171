"""splits: the global order of the kept documents and their train / validation / test split.

Both come from seeded mixes of each ``doc_id`` (``lab.hashing.keyed``), so they depend on the documents and
the seed only, never on partitions or workers. Materialize packs the splits in this order; the tokenizer's
sample leaves the validation and test documents out; a mixture draws its fractional epoch apart from them.
"""

from __future__ import annotations

import numpy as np

from lab.hashing import keyed

SPLITS = ("train", "val", "test")


def order_and_split(doc_ids: np.ndarray, seed: int, val_fraction: float) -> tuple[np.ndarray, np.ndarray]:
    """(positions of ``doc_ids`` in shuffled order, whether each of those is a validation document)."""
    order = np.lexsort((doc_ids, keyed(doc_ids, seed, 1)))
    n = doc_ids.size
    n_val = int(round(val_fraction * n))
    if val_fraction > 0 and n >= 2:
        n_val = min(max(n_val, 1), n - 1)
    val = np.zeros(n, dtype=bool)
    val[np.lexsort((doc_ids, keyed(doc_ids, seed, 2)))[:n_val]] = True
    return order, val[order]


def order_and_splits(doc_ids: np.ndarray, seed: int, val_fraction: float,
                     test_fraction: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """(positions of ``doc_ids`` in shuffled order, the split of each of those: 0 train, 1 val, 2 test).

    val is ``order_and_split``'s; test is the ``round(test_fraction x documents)`` other documents (at
    least one when ``test_fraction > 0``, never the last training one) with the lowest value of a third
    seeded mix of their ``doc_id``. ``test_fraction=0`` leaves train and val as they were.

    >>> ids = np.arange(10)
    >>> o, w = order_and_splits(ids, 0, 0.2, 0.3)
    >>> np.bincount(w).tolist(), sorted(ids[o].tolist()) == ids.tolist()
    ([5, 2, 3], True)
    """
    order, is_val = order_and_split(doc_ids, seed, val_fraction)
    which = is_val.astype(np.int8)
    n = doc_ids.size
    rest = n - int(is_val.sum())
    n_test = int(round(test_fraction * n))
    if test_fraction > 0 and rest >= 2:
        n_test = min(max(n_test, 1), rest - 1)
    else:
        n_test = 0
    if n_test:
        ids = doc_ids[order]
        cand = np.flatnonzero(which == 0)
        pick = cand[np.lexsort((ids[cand], keyed(ids[cand], seed, 3)))[:n_test]]
        which[pick] = 2
    return order, which
