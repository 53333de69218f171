"""neardup.graph's components and spanning forest against scipy's csgraph and a plain Kruskal."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from lab.dedup import Forest, graph, grid_clusters, spanning_forest


def random_graph(rng: np.random.Generator, n: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    a, b = rng.integers(0, n, m), rng.integers(0, n, m)
    if m > 3:  # long chains too: the worst case for label propagation
        chain = rng.permutation(n)
        k = min(m // 3, n - 1)
        a[:k], b[:k] = chain[:k], chain[1:k + 1]
    return a, b


def kruskal(n: int, a: np.ndarray, b: np.ndarray, rank: np.ndarray) -> list[int]:
    parent = list(range(n))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    out = []
    for i in np.argsort(rank, kind="stable"):
        ra, rb = find(int(a[i])), find(int(b[i]))
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
            out.append(int(i))
    return sorted(out)


@pytest.mark.parametrize("seed", range(40))
def test_components_are_scipys_labelled_by_their_smallest_node(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 400))
    a, b = random_graph(rng, n, int(rng.integers(0, 2 * n)))
    label = graph.components(n, a, b)
    _, theirs = connected_components(coo_matrix((np.ones(a.size), (a, b)), shape=(n, n)), directed=False)
    # the same partition: one label per scipy component and one scipy component per label
    assert len(set(zip(label.tolist(), theirs.tolist()))) == len(set(label.tolist())) == len(set(theirs.tolist()))
    smallest = {}
    for node, lab in enumerate(label.tolist()):
        smallest.setdefault(lab, node)
    assert all(lab == node for lab, node in smallest.items())
    # the edge order does not matter
    p = rng.permutation(a.size)
    assert np.array_equal(graph.components(n, b[p], a[p]), label)


@pytest.mark.parametrize("seed", range(40))
def test_spanning_forest_is_kruskals(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 300))
    a, b = random_graph(rng, n, int(rng.integers(1, 3 * n)))
    rank = rng.permutation(a.size)
    got = graph.spanning_forest(n, a, b, rank)
    assert got.tolist() == kruskal(n, a, b, rank)
    # a forest that spans: the components of its edges are the graph's
    assert np.array_equal(graph.components(n, a[got], b[got]), graph.components(n, a, b))


def test_spanning_forest_needs_a_strict_order():
    with pytest.raises(ValueError, match="ranks must be distinct"):
        graph.spanning_forest(3, np.array([0, 1]), np.array([1, 2]), np.array([0, 0]))
    assert graph.spanning_forest(3, np.zeros(0, int), np.zeros(0, int), np.zeros(0, int)).size == 0


def test_the_grid_clusters_are_those_of_every_edge():
    """The forest keeps, at every grid threshold, the components of all the edges above it."""
    rng = np.random.default_rng(7)
    n, m = 500, 1500
    u, v = rng.integers(0, n, m) * 10, rng.integers(0, n, m) * 10
    jac = np.round(rng.uniform(0.45, 1.0, m) * 64) / 64  # estimates are k / num_perm: many ties
    f = Forest(u, v, u + 1, v + 1, jac)
    forest = spanning_forest(f)
    assert len(forest) < m
    clusters, every = grid_clusters(forest), grid_clusters(f)
    assert set(clusters.column("node").to_pylist()) <= set(every.column("node").to_pylist())
    for name in every.column_names:  # a node with no forest edge has no edge to another node at all
        got = dict(zip(clusters.column("node").to_pylist(), clusters.column(name).to_pylist()))
        want = dict(zip(every.column("node").to_pylist(), every.column(name).to_pylist()))
        assert all(want[k] == x for k, x in got.items()), name
        if name != "doc_id":
            assert all(x is None for k, x in want.items() if k not in got), name
    assert clusters.column("c50").null_count < clusters.num_rows  # clusters exist at the lowest threshold


def test_dedup_does_not_import_scipy():
    code = ("import sys, numpy as np; from lab.dedup import Forest, spanning_forest, grid_clusters, cluster_keepers; "
            "f = spanning_forest(Forest(np.array([1, 2]), np.array([2, 3]), np.array([1, 2]), np.array([2, 3]), "
            "np.array([0.9, 0.8]))); grid_clusters(f); "
            "cluster_keepers(np.array([1, 2]), np.array([1, 2]), np.zeros(2), f.u, f.v, f.jaccard, 0.8); "
            "print('scipy' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "False", r.stderr
