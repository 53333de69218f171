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

import os
import difflib
import re
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
    return np.sort(doc_ids[order[~first]])


def rank_of(keep: str, nbytes: np.ndarray, signal: np.ndarray) -> np.ndarray:
    """The value ``keep_one_per_cluster`` keeps the highest of (ties: lowest doc_id): bytes for
    ``longest``, the signal for ``best_signal``, nothing for ``lowest_id``; missing values lose."""
    values = {"longest": nbytes, "best_signal": signal}.get(keep)
    if values is None:
        return np.zeros(len(nbytes))
    s = np.asarray(values, dtype=np.float64)
    return np.where(np.isnan(s), -np.inf, s)


def diff(a: str, b: str) -> list[tuple[str, str]]:
    """A word-level diff of two texts: ``(op, text)`` runs with op ``=`` (in both), ``-`` (only in a),
    ``+`` (only in b). Whitespace is kept: the ``=`` and ``-`` runs concatenate to ``a``, the ``=``
    and ``+`` runs to ``b``.

    >>> diff("the cat sat", "the dog sat")
    [('=', 'the '), ('-', 'cat'), ('+', 'dog'), ('=', ' sat')]
    """
    wa, wb = _TOKENS.findall(a), _TOKENS.findall(b)
    out: list[tuple[str, str]] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, wa, wb, autojunk=False).get_opcodes():
        if tag == "equal":
            out.append(("=", "".join(wa[i1:i2])))
            continue
        if i2 > i1:
            out.append(("-", "".join(wa[i1:i2])))
        if j2 > j1:
            out.append(("+", "".join(wb[j1:j2])))
    return out


_TOKENS = re.compile(r"\S+|\s+")


def s_curve(bands: int, rows: int, points: int = 101) -> tuple[np.ndarray, np.ndarray]:
    """(s, P(candidate | s)) for Jaccard s in [0, 1]: the LSH S-curve of ``bands`` x ``rows``."""
    s = np.linspace(0.0, 1.0, points)
    return s, near_dedup.s_curve(s, bands, rows)

