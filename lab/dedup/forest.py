"""neardup.forest: near-duplicate clusters on a grid of Jaccard thresholds, from one spanning forest.

Each reduce task returns the maximum spanning forest of its edges; forests are merged pairwise
(``merge_forests``), and ``grid_clusters`` labels every node at each threshold of ``GRID`` from the
final forest. For every threshold t, the components of {edges with Jaccard >= t} equal the
components of {forest edges with Jaccard >= t}, so one forest answers the whole grid, and no process
ever holds more than one bucket's edges or one forest (at most one edge per node that has a
candidate pair).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from lab.dedup import graph
from lab.io.run import RunLayout
from lab.io.writers import write_parquet

GRID = tuple(round(0.50 + 0.05 * i, 2) for i in range(10))  # thresholds with precomputed clusters
EPS = 1e-9  # Jaccard >= t is tested as jaccard >= t - EPS: estimates are fractions k / num_perm


def grid_column(t: float) -> str:
    """The clusters table's column of threshold ``t``: ``c50`` .. ``c95``."""
    return f"c{round(t * 100):02d}"


@dataclass
class Forest:
    """A maximum spanning forest: edges between nodes, each with its nodes' doc_ids and Jaccard."""

    u: np.ndarray
    v: np.ndarray
    u_doc: np.ndarray
    v_doc: np.ndarray
    jaccard: np.ndarray

    @classmethod
    def empty(cls) -> Forest:
        z = np.zeros(0, dtype=np.int64)
        return cls(z, z, z, z, np.zeros(0, dtype=np.float64))

    def __len__(self) -> int:
        return int(self.u.size)


# --- clusters ------------------------------------------------------------------------------------


def spanning_forest(f: Forest) -> Forest:
    """The maximum spanning forest of ``f``'s edges (one edge per pair, its highest Jaccard; ties: the
    lower pair of nodes first, so the forest is unique)."""
    if len(f) == 0:
        return Forest.empty()
    ids, inv = np.unique(np.concatenate([f.u, f.v]), return_inverse=True)
    a, b = inv[: len(f)], inv[len(f):]
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    order = np.lexsort((-f.jaccard, hi, lo))  # per pair, the highest Jaccard first
    first = np.ones(lo.size, dtype=bool)
    first[1:] = (lo[order][1:] != lo[order][:-1]) | (hi[order][1:] != hi[order][:-1])
    pick = order[first]  # one edge per pair, sorted by (lo, hi)
    rank = np.empty(pick.size, dtype=np.int64)
    rank[np.lexsort((hi[pick], lo[pick], -f.jaccard[pick]))] = np.arange(pick.size)
    sel = np.sort(pick[graph.spanning_forest(ids.size, lo[pick], hi[pick], rank)])
    return Forest(f.u[sel], f.v[sel], f.u_doc[sel], f.v_doc[sel], f.jaccard[sel])


def merge_forests(*forests: Forest) -> Forest:
    """The spanning forest of the union of several forests (= of the union of their edge sets)."""
    return spanning_forest(Forest(*(np.concatenate([getattr(f, k) for f in forests])
                                    for k in ("u", "v", "u_doc", "v_doc", "jaccard"))))


def grid_clusters(f: Forest) -> pa.Table:
    """node, doc_id and, per grid threshold, its cluster id (the lowest doc_id of its component; NULL
    when the node has no edge at that threshold), for every node of the forest."""
    nodes = np.concatenate([f.u, f.v])
    docs = np.concatenate([f.u_doc, f.v_doc])
    ids, first = np.unique(nodes, return_index=True)
    node_doc = docs[first]
    a, b = np.searchsorted(ids, f.u), np.searchsorted(ids, f.v)
    cols: dict[str, pa.Array] = {"node": pa.array(ids, pa.int64()), "doc_id": pa.array(node_doc, pa.int64())}
    n = ids.size
    for t in GRID:
        m = f.jaccard >= t - EPS
        label = graph.components(n, a[m], b[m])
        low = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(low, label, node_doc)
        size = np.bincount(label, minlength=n)
        cid = low[label]
        cols[grid_column(t)] = pa.array(cid, pa.int64(), mask=size[label] < 2)
    table = pa.table(cols)
    return table.sort_by([("doc_id", "ascending")])


def write_clusters(run_dir: str | Path, f: Forest) -> int:
    layout = RunLayout(Path(run_dir))
    table = grid_clusters(f)
    write_parquet(table, layout.clusters)
    return table.num_rows
