"""dedup: near-duplicate candidate pairs by an LSH shuffle, and clusters on a Jaccard grid. No Dask here.

The engine runs these functions as tasks (DESIGN §2, §5):

1. **map** (inside each partition's annotate task): ``band_groups`` turns the partition's MinHash
   signatures into one record per (node, band): ``band, band_hash, node, doc_id, row``, split
   into ``n_buckets`` shuffle buckets by a hash of ``(band, band_hash)``. A *node* is a normalized
   content hash: exact copies have equal signatures and share one node. Every document also
   sends one ``EXACT`` record keyed by its content hash: the same shuffle finds the exact-duplicate
   groups across partitions (``dedup/exact/``).
2. **reduce** (one task per bucket): ``reduce_bucket`` reads its bucket from every partition, groups
   by ``(band, band_hash)`` and links the nodes of each group (every pair; a star around the lowest
   ``doc_id`` when a group has more than ``max_group_pairs`` members). A pair is kept only by its
   *first* equal band, so each pair is found exactly once over all buckets. Its Jaccard is the
   fraction of equal signature values (read in place from the partitions' ``.npy`` files), or with
   ``exact_jaccard`` the Jaccard of the two shingle-hash sets. Edges go to ``dedup/edges/``.
3. **clusters**: each reduce task also returns the maximum spanning forest of its edges; forests
   are merged pairwise (``merge_forests``), and ``grid_clusters`` labels every node at each
   threshold of ``GRID`` from the final forest. For every threshold t, the components of
   {edges with Jaccard >= t} equal the components of {forest edges with Jaccard >= t}, so one
   forest answers the whole grid, and no process ever holds more than one bucket's edges or one
   forest (at most one edge per node that has a candidate pair).

``keep_one_per_cluster`` is the selection-aware rule that ``lab.query`` and ``lab.select`` apply:
components of the surviving documents' edges at a threshold, one member kept per component.
"""

from __future__ import annotations

import bisect
import difflib
import math
import os
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import pyarrow as pa
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components, minimum_spanning_tree

from lab.io.run import RunLayout
from lab.io.writers import read_parquet_group, write_parquet, write_parquet_groups
from lab.stages import near_dedup
from lab.stages.near_dedup import GRID

EPS = 1e-9  # Jaccard >= t is tested as jaccard >= t - EPS: estimates are fractions k / num_perm
EXACT = 255  # the shuffle's pseudo-band of exact duplicates: band_hash = content hash
BAND_SCHEMA = pa.schema([("band", pa.uint8()), ("band_hash", pa.uint64()), ("node", pa.int64()),
                         ("doc_id", pa.int64()), ("row", pa.int32())])
EXACT_SCHEMA = pa.schema([("content_hash", pa.int64()), ("docs", pa.int64()), ("first_doc_id", pa.int64())])
EDGE_SCHEMA = pa.schema([("u", pa.int64()), ("v", pa.int64()), ("u_doc", pa.int64()), ("v_doc", pa.int64()),
                         ("matches", pa.int16()), ("jaccard_est", pa.float64()), ("jaccard_exact", pa.float64()),
                         ("jaccard", pa.float64())])


def grid_column(t: float) -> str:
    """The clusters table's column of threshold ``t``: ``c50`` .. ``c95``."""
    return f"c{round(t * 100):02d}"


# --- map -----------------------------------------------------------------------------------------


def band_groups(signatures: np.ndarray, has_signature: np.ndarray, nodes: np.ndarray, has_node: np.ndarray,
                doc_ids: np.ndarray, cfg: near_dedup.Config, n_buckets: int) -> dict[int, pa.Table]:
    """bucket -> shuffle records of one partition: per node with a signature, one record per band
    (with the node's lowest doc_id here), and per document with a content hash one ``EXACT`` record
    keyed by the hash (exact duplicates across partitions meet in one bucket)."""
    rows = np.flatnonzero(has_signature)
    if rows.size:
        order = np.lexsort((doc_ids[rows], nodes[rows]))  # per node, its lowest doc_id first
        rows = rows[order]
        first = np.ones(rows.size, dtype=bool)
        first[1:] = nodes[rows][1:] != nodes[rows][:-1]
        rows = rows[first]
    bh = near_dedup.band_hashes(signatures[rows], cfg.bands, cfg.rows)  # [n, bands]
    exact = np.flatnonzero(has_node)
    band = np.concatenate([np.tile(np.arange(cfg.bands, dtype=np.uint8), rows.size),
                           np.full(exact.size, EXACT, dtype=np.uint8)])
    flat = np.concatenate([bh.reshape(-1), nodes[exact].view(np.uint64)])
    with np.errstate(over="ignore"):
        mixed = (flat ^ (band.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15))) * np.uint64(0xBF58476D1CE4E5B9)
    bucket = ((mixed >> np.uint64(33)) % np.uint64(n_buckets)).astype(np.int64)
    table = pa.table({"band": band, "band_hash": flat,
                      "node": np.concatenate([np.repeat(nodes[rows], cfg.bands), nodes[exact]]),
                      "doc_id": np.concatenate([np.repeat(doc_ids[rows], cfg.bands), doc_ids[exact]]),
                      "row": np.concatenate([np.repeat(rows, cfg.bands), exact]).astype(np.int32)}, schema=BAND_SCHEMA)
    order = np.argsort(bucket, kind="stable")
    table, bucket = table.take(order), bucket[order]
    bounds = np.searchsorted(bucket, np.arange(n_buckets + 1))
    return {b: table.slice(bounds[b], bounds[b + 1] - bounds[b]) for b in range(n_buckets) if bounds[b + 1] > bounds[b]}


def write_bands(layout: RunLayout, key: str, groups: dict[int, pa.Table]) -> None:
    write_parquet_groups(groups, layout.bands(key), BAND_SCHEMA)


# --- reduce --------------------------------------------------------------------------------------


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


class _NpyRows:
    """Rows of a C-order .npy file read with ``pread``: only the bytes asked for enter the process
    (a memory map would keep every touched page, and its read-ahead, resident: a bucket touches
    every partition's file, so a mapped read grows with the corpus)."""

    def __init__(self, path: Path) -> None:
        with open(path, "rb") as f:
            fmt = np.lib.format
            version = fmt.read_magic(f)
            read_header = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
            shape, fortran, dtype = read_header(f)
            self.offset = f.tell()
        if fortran:
            raise ValueError(f"{path}: a Fortran-order array; corpus-lab writes C order")
        self.path, self.shape, self.dtype = path, shape, np.dtype(dtype)
        self.row_bytes = int(np.prod(shape[1:], dtype=np.int64)) * self.dtype.itemsize

    def rows(self, rows: np.ndarray) -> np.ndarray:
        """``array[rows]`` (rows of a 2-D array)."""
        out = np.empty((rows.size, *self.shape[1:]), dtype=self.dtype)
        fd = os.open(self.path, os.O_RDONLY)
        try:
            for k, r in enumerate(rows.tolist()):
                out[k] = np.frombuffer(os.pread(fd, self.row_bytes, self.offset + r * self.row_bytes),
                                       dtype=self.dtype).reshape(self.shape[1:])
        finally:
            os.close(fd)
        return out

    def span(self, a: int, b: int) -> np.ndarray:
        """``array[a:b]`` of a 1-D array."""
        size = self.dtype.itemsize
        with open(self.path, "rb") as f:
            return np.frombuffer(os.pread(f.fileno(), (b - a) * size, self.offset + a * size), dtype=self.dtype)


class _Rows:
    """Signature (and shingle-set) rows of many partitions, read from their .npy files by offset."""

    def __init__(self, layout: RunLayout, keys: Sequence[str]) -> None:
        self.layout = layout
        self.keys = list(keys)
        self.sigs: dict[int, _NpyRows] = {}
        self.sets: dict[int, tuple[_NpyRows, np.ndarray]] = {}

    def signatures(self, parts: np.ndarray, rows: np.ndarray, num_perm: int) -> np.ndarray:
        out = np.empty((rows.size, num_perm), dtype=np.uint32)
        for p in np.unique(parts).tolist():
            if p not in self.sigs:
                self.sigs[p] = _NpyRows(self.layout.signatures(self.keys[p]))
            m = parts == p
            out[m] = self.sigs[p].rows(rows[m])
        return out

    def shingle_set(self, part: int, row: int) -> np.ndarray:
        if part not in self.sets:
            values, offsets = self.layout.shingles(self.keys[part])
            self.sets[part] = (_NpyRows(values), np.load(offsets))
        values, offsets = self.sets[part]
        return values.span(int(offsets[row]), int(offsets[row + 1]))


def _group_pairs(starts: np.ndarray, sizes: np.ndarray, cap: int) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs (i < j) inside each group of consecutive records: all pairs up to ``cap`` members,
    else a star around the group's first record."""
    left, right = [], []
    for size in np.unique(sizes):
        s = starts[sizes == size]
        if size <= cap:
            i, j = np.triu_indices(size, 1)
        else:
            i, j = np.zeros(size - 1, dtype=np.int64), np.arange(1, size)
        left.append((s[:, None] + i[None, :]).reshape(-1))
        right.append((s[:, None] + j[None, :]).reshape(-1))
    if not left:
        z = np.zeros(0, dtype=np.int64)
        return z, z
    return np.concatenate(left), np.concatenate(right)


def _write_exact(layout: RunLayout, bucket: int, hashes: np.ndarray, docs: np.ndarray) -> None:
    """Exact-duplicate groups (more than one document per content hash) of one bucket."""
    order = np.lexsort((docs, hashes))
    hashes, docs = hashes[order], docs[order]
    new = np.ones(hashes.size, dtype=bool)
    new[1:] = hashes[1:] != hashes[:-1]
    starts = np.flatnonzero(new)
    sizes = np.diff(np.append(starts, hashes.size))
    multi = sizes > 1
    write_parquet(pa.table({"content_hash": hashes[starts[multi]], "docs": sizes[multi].astype(np.int64),
                            "first_doc_id": docs[starts[multi]]}, schema=EXACT_SCHEMA), layout.exact(bucket))


def reduce_bucket(run_dir: str | Path, bucket: int, keys: Sequence[str], cfg: near_dedup.Config) -> Forest:
    """Candidate pairs of one shuffle bucket, written to ``dedup/edges/``; returns their spanning forest."""
    layout = RunLayout(Path(run_dir))
    cols: dict[str, list[np.ndarray]] = {c: [] for c in ("band", "band_hash", "node", "doc_id", "row", "part")}
    for n, k in enumerate(keys):  # one partition's rows at a time: numpy arrays, no per-partition tables kept
        t = read_parquet_group(layout.bands(k), bucket)
        if t is not None:
            for c in ("band", "band_hash", "node", "doc_id", "row"):
                cols[c].append(t.column(c).to_numpy())
            cols["part"].append(np.full(t.num_rows, n, dtype=np.int32))
    band, bh, node, doc, row, part = (np.concatenate(cols[c]) if cols[c] else np.zeros(0, dtype=np.int64)
                                      for c in ("band", "band_hash", "node", "doc_id", "row", "part"))
    band = band.astype(np.int64)
    _write_exact(layout, bucket, node[band == EXACT], doc[band == EXACT])
    near = band != EXACT
    band, bh, node, doc, row, part = (x[near] for x in (band, bh, node, doc, row, part))
    # one record per (band, band_hash, node): a node's lowest doc_id over all partitions
    order = np.lexsort((doc, node, bh, band))
    band, bh, node, doc, row, part = (x[order] for x in (band, bh, node, doc, row, part))
    keep = np.ones(band.size, dtype=bool)
    keep[1:] = (band[1:] != band[:-1]) | (bh[1:] != bh[:-1]) | (node[1:] != node[:-1])
    band, bh, node, doc, row, part = (x[keep] for x in (band, bh, node, doc, row, part))
    order = np.lexsort((doc, bh, band))  # groups of equal (band, band_hash), members by doc_id
    band, bh, node, doc, row, part = (x[order] for x in (band, bh, node, doc, row, part))
    new = np.ones(band.size, dtype=bool)
    new[1:] = (band[1:] != band[:-1]) | (bh[1:] != bh[:-1])
    starts = np.flatnonzero(new)
    sizes = np.diff(np.append(starts, band.size))
    multi = sizes > 1
    i, j = _group_pairs(starts[multi], sizes[multi], cfg.max_group_pairs)

    src = _Rows(layout, keys)
    sig_i = src.signatures(part[i], row[i], cfg.num_perm)
    sig_j = src.signatures(part[j], row[j], cfg.num_perm)
    equal = sig_i == sig_j
    band_equal = equal.reshape(-1, cfg.bands, cfg.rows).all(axis=2)
    b = band[i]
    # found by this band (not a 64-bit band-hash collision), and this is the first equal band
    first = band_equal[np.arange(b.size), b] & (band_equal.argmax(axis=1) == b)
    i, j, equal = i[first], j[first], equal[first]
    matches = equal.sum(axis=1).astype(np.int16)
    est = matches / cfg.num_perm
    exact = np.full(i.size, np.nan)
    if cfg.exact_jaccard:
        for k in range(i.size):
            a = src.shingle_set(int(part[i[k]]), int(row[i[k]]))
            c = src.shingle_set(int(part[j[k]]), int(row[j[k]]))
            inter = np.intersect1d(a, c, assume_unique=True).size
            union = a.size + c.size - inter
            exact[k] = inter / union if union else 1.0
    edges = pa.table({"u": node[i], "v": node[j], "u_doc": doc[i], "v_doc": doc[j], "matches": matches,
                      "jaccard_est": est, "jaccard_exact": pa.array(exact, pa.float64(), from_pandas=True),
                      "jaccard": np.where(np.isnan(exact), est, exact)}, schema=EDGE_SCHEMA)
    edges = edges.sort_by([("u_doc", "ascending"), ("v_doc", "ascending")])
    write_parquet(edges, layout.edges(bucket))
    return spanning_forest(Forest(edges["u"].to_numpy(), edges["v"].to_numpy(), edges["u_doc"].to_numpy(),
                                  edges["v_doc"].to_numpy(), edges["jaccard"].to_numpy()))


# --- clusters ------------------------------------------------------------------------------------


def spanning_forest(f: Forest) -> Forest:
    """The maximum spanning forest of ``f``'s edges (Kruskal in scipy; one edge per pair, its highest Jaccard)."""
    if len(f) == 0:
        return Forest.empty()
    ids, inv = np.unique(np.concatenate([f.u, f.v]), return_inverse=True)
    a, b = inv[: len(f)], inv[len(f):]
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    order = np.lexsort((-f.jaccard, hi, lo))  # per pair, the highest Jaccard first
    lo, hi = lo[order], hi[order]
    first = np.ones(lo.size, dtype=bool)
    first[1:] = (lo[1:] != lo[:-1]) | (hi[1:] != hi[:-1])
    pick = order[first]
    n = ids.size
    weight = 2.0 - f.jaccard[pick]  # > 0: scipy drops zero weights; the minimum tree maximizes Jaccard
    tree = minimum_spanning_tree(coo_matrix((weight, (lo[first], hi[first])), shape=(n, n)).tocsr()).tocoo()
    # map tree entries back to the picked edges (exact Jaccard, not 2 - (2 - j))
    key = lo[first].astype(np.int64) * n + hi[first]
    tkey = np.minimum(tree.row, tree.col).astype(np.int64) * n + np.maximum(tree.row, tree.col)
    sel = np.sort(pick[np.searchsorted(key, tkey)])  # key is sorted: (lo, hi) ascending
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
        _, label = connected_components(coo_matrix((np.ones(int(m.sum())), (a[m], b[m])), shape=(n, n)), directed=False)
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


# --- the selection-aware rule -----------------------------------------------------------------------


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
    n = ids.size
    _, label = connected_components(coo_matrix((np.ones(a.size), (a, b)), shape=(n, n)), directed=False)
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


DIFF_PAIR_BUDGET = 100_000  # pairs of equal words across the two sides that difflib compares in one go (measured)
IN_PLACE_RUN = 4  # repetitive text: words equal in place anchor the alignment in runs of at least this many


def diff(a: str, b: str) -> list[tuple[str, str]]:
    """A word diff of two texts that ignores whitespace: ``(op, text)`` runs with op ``=`` (words in
    both), ``-`` (only in a), ``+`` (only in b).

    Words are runs of non-whitespace, compared exactly; two texts that differ only in spaces, line
    breaks or re-wrapping give one ``=`` run. Whitespace is shown normalized, the same in both panes
    where the words are shared: a gap between two words is one space, a line break or a blank line —
    a break only where both texts break there (so a re-wrapped copy does not show its wrapping), and
    in a ``-`` or ``+`` run that side's own break. The ``=`` and ``-`` runs concatenate to ``a``'s words
    (``"".join(...).split() == a.split()``), the ``=`` and ``+`` runs to ``b``'s. Fast on long texts:
    common prefix and suffix are cut, words unique to both sides anchor the alignment (patience
    diff), and difflib aligns what lies between anchors, in chunks when that would be quadratic.

    >>> diff("the cat sat", "the dog sat")
    [('=', 'the '), ('-', 'cat'), ('+', 'dog'), ('=', ' sat')]
    >>> diff("one  two\\nthree", "one two three")
    [('=', 'one two three')]
    """
    wa, ga = _words(a)
    wb, gb = _words(b)
    blocks: list[tuple[int, int, int, int]] = []  # (i1, i2, j1, j2) of the changed blocks, in order
    _align(wa, wb, 0, len(wa), 0, len(wb), blocks)
    out: list[tuple[str, str]] = []

    def put(op: str, text: str) -> None:
        if not text:
            return
        if out and out[-1][0] == op:
            out[-1] = (op, out[-1][1] + text)
        else:
            out.append((op, text))

    def equal(i1: int, i2: int, j1: int, j2: int) -> None:  # words a[i1:i2] == b[j1:j2], gaps inside merged
        put("=", "".join((_merge(ga[i], gb[j]) if i > i1 else "") + wa[i] for i, j in zip(range(i1, i2), range(j1, j2))))

    def side(words: list[str], gaps: list[int], k1: int, k2: int) -> str:
        return "".join((_GAP[gaps[k]] if k > k1 else "") + words[k] for k in range(k1, k2))

    i = j = 0
    for i1, i2, j1, j2 in blocks:
        equal(i, i1, j, j1)
        before, after = i1 > 0 or j1 > 0, i2 < len(wa) or j2 < len(wb)  # words on either side of the block
        if i2 > i1 and j2 > j1:  # replaced: the gaps around it are shared, in the = runs
            if before:
                put("=", _merge(ga[i1], gb[j1]))
            put("-", side(wa, ga, i1, i2))
            put("+", side(wb, gb, j1, j2))
            if after:
                put("=", _merge(ga[i2] if i2 < len(wa) else 0, gb[j2] if j2 < len(wb) else 0))
        else:  # only one side has words here: the other side's single gap is shared, the extra one is this side's
            op, words, gaps, k1, k2, other, o = (("-", wa, ga, i1, i2, gb, j1) if i2 > i1 else
                                                 ("+", wb, gb, j1, j2, ga, i1))
            if after:  # "=" gets the gap before, the run its own gap after
                if before:
                    put("=", _merge(gaps[k1], other[o]))
                put(op, side(words, gaps, k1, k2) + _GAP[gaps[k2]])
            elif before:  # at the end: the run carries the gap before it
                put(op, _GAP[gaps[k1]] + side(words, gaps, k1, k2))
            else:
                put(op, side(words, gaps, k1, k2))
        i, j = i2, j2
    equal(i, len(wa), j, len(wb))
    return out


_WORD = re.compile(r"\S+")
_GAP = (" ", "\n", "\n\n")  # how a gap between two words is shown: a space, a line break, a blank line


def _words(text: str) -> tuple[list[str], list[int]]:
    """The words of a text and, per word, the kind of the gap before it (index into ``_GAP``: 0 for
    the first word)."""
    words: list[str] = []
    gaps: list[int] = []
    end = None
    for m in _WORD.finditer(text):
        if end is None:
            gaps.append(0)
        else:
            gap = text[end:m.start()]
            gaps.append(0 if gap == " " else min(len((gap + "x").splitlines()) - 1, 2))  # line breaks in it
        words.append(m.group())
        end = m.end()
    return words, gaps


def _merge(x: int, y: int) -> str:
    """A gap shared by both panes: a break only where both texts break."""
    return _GAP[min(x, y)]


def _align(wa: list[str], wb: list[str], a0: int, a1: int, b0: int, b1: int, out: list) -> None:
    """Append the changed blocks ``(i1, i2, j1, j2)`` between ``wa[a0:a1]`` and ``wb[b0:b1]`` to ``out``."""
    while a0 < a1 and b0 < b1 and wa[a0] == wb[b0]:  # common prefix and suffix
        a0, b0 = a0 + 1, b0 + 1
    while a1 > a0 and b1 > b0 and wa[a1 - 1] == wb[b1 - 1]:
        a1, b1 = a1 - 1, b1 - 1
    if a0 == a1 or b0 == b1:
        if a0 < a1 or b0 < b1:
            _add(out, a0, a1, b0, b1)
        return
    anchors = _anchors(wa, wb, a0, a1, b0, b1)
    if anchors:
        i, j = a0, b0
        for x, y in anchors:
            _align(wa, wb, i, x, j, y, out)
            i, j = x + 1, y + 1
        _align(wa, wb, i, a1, j, b1, out)
        return
    # no word occurs once on each side: difflib, unless the equal-word pairs it would compare exceed the
    # budget (very repetitive text, where its first longest match is often at the wrong offset): then
    # runs of words equal in place (counted from the start or from the end) anchor, else aligned chunks
    ca = Counter(wa[a0:a1])
    pairs = sum(n * ca[w] for w, n in Counter(wb[b0:b1]).items() if w in ca)
    if pairs > DIFF_PAIR_BUDGET:
        anchors = _in_place(wa, wb, a0, a1, b0, b1)
        if anchors:
            i, j = a0, b0
            for x, y in anchors:
                _align(wa, wb, i, x, j, y, out)
                i, j = x + 1, y + 1
            _align(wa, wb, i, a1, j, b1, out)
            return
    chunks = max(1, math.ceil(math.sqrt(pairs / DIFF_PAIR_BUDGET)))
    for c in range(chunks):
        i1, i2 = a0 + (a1 - a0) * c // chunks, a0 + (a1 - a0) * (c + 1) // chunks
        j1, j2 = b0 + (b1 - b0) * c // chunks, b0 + (b1 - b0) * (c + 1) // chunks
        for tag, x1, x2, y1, y2 in difflib.SequenceMatcher(None, wa[i1:i2], wb[j1:j2], autojunk=False).get_opcodes():
            if tag != "equal":
                _add(out, i1 + x1, i1 + x2, j1 + y1, j1 + y2)


def _in_place(wa: list[str], wb: list[str], a0: int, a1: int, b0: int, b1: int) -> list[tuple[int, int]]:
    """Positions ``(i, j)`` of the words equal at the same distance from the start of ``wa[a0:a1]`` and
    ``wb[b0:b1]`` (or from their ends, whichever matches more), in runs of at least ``IN_PLACE_RUN``."""
    best: list[tuple[int, int]] = []
    n = min(a1 - a0, b1 - b0)
    for i0, j0 in ((a0, b0), (a1 - n, b1 - n)):
        found, run = [], []
        for t in range(n):
            if wa[i0 + t] == wb[j0 + t]:
                run.append((i0 + t, j0 + t))
                continue
            if len(run) >= IN_PLACE_RUN:
                found += run
            run = []
        if len(run) >= IN_PLACE_RUN:
            found += run
        if len(found) > len(best):
            best = found
    return best


def _anchors(wa: list[str], wb: list[str], a0: int, a1: int, b0: int, b1: int) -> list[tuple[int, int]]:
    """Positions ``(i, j)`` of the words that occur exactly once in ``wa[a0:a1]`` and once in
    ``wb[b0:b1]``, the longest run of them in the same order on both sides (patience diff)."""
    ca, cb = Counter(wa[a0:a1]), Counter(wb[b0:b1])
    pos_b = {wb[j]: j for j in range(b0, b1) if cb[wb[j]] == 1 and ca.get(wb[j]) == 1}
    pairs = [(i, pos_b[wa[i]]) for i in range(a0, a1) if wa[i] in pos_b]
    if not pairs:
        return []
    # longest increasing subsequence of the b positions (in a order): patience sorting
    tails: list[int] = []  # tails[n]: the pair ending the increasing run of length n + 1 with the lowest b position
    tail_b: list[int] = []  # their b positions (increasing)
    prev = [-1] * len(pairs)
    for k, (_, y) in enumerate(pairs):
        n = bisect.bisect_left(tail_b, y)
        if n > 0:
            prev[k] = tails[n - 1]
        if n == len(tails):
            tails.append(k)
            tail_b.append(y)
        else:
            tails[n], tail_b[n] = k, y
    run, k = [], tails[-1]
    while k >= 0:
        run.append(pairs[k])
        k = prev[k]
    return run[::-1]


def _add(out: list, i1: int, i2: int, j1: int, j2: int) -> None:
    """Append a changed block, joined to the previous one when they touch."""
    if out and out[-1][1] == i1 and out[-1][3] == j1:
        out[-1] = (out[-1][0], i2, out[-1][2], j2)
    else:
        out.append((i1, i2, j1, j2))


def text_jaccard(a: str, b: str, *, ngram: int = 5) -> float | None:
    """The exact Jaccard of two texts' shingle sets as near_dedup makes them (the hashes of the word
    ``ngram``-grams of the normalized texts); None when a text has no words.

    >>> text_jaccard("a b c d e f", "A b c d e g!")
    0.3333333333333333
    """
    x, y = (near_dedup.shingle_hashes(near_dedup.normalize(t), ngram) for t in (a, b))
    if not x.size or not y.size:
        return None
    inter = np.intersect1d(x, y, assume_unique=True).size
    return inter / (x.size + y.size - inter)


def s_curve(bands: int, rows: int, points: int = 101) -> tuple[np.ndarray, np.ndarray]:
    """(s, P(candidate | s)) for Jaccard s in [0, 1]: the LSH S-curve of ``bands`` x ``rows``."""
    s = np.linspace(0.0, 1.0, points)
    return s, near_dedup.s_curve(s, bands, rows)

