"""shuffle: candidate pairs by an LSH shuffle over all partitions. No Dask here.

1. **map** (inside each partition's annotate task): ``band_groups`` turns the partition's MinHash
   signatures into one record per (node, band), split into ``n_buckets`` shuffle buckets by a hash of
   ``(band, band_hash)``. A *node* is a normalized content hash (exact copies share one); every document
   also sends one ``EXACT`` record, so the same shuffle finds the exact duplicates (``dedup/exact/``).
2. **reduce** (one task per bucket): ``reduce_bucket`` groups its bucket of every partition by
   ``(band, band_hash)`` and links the nodes of each group (a star around the lowest ``doc_id`` past
   ``max_group_pairs`` members). A pair is kept only by its first equal band, so it is found once. Its
   Jaccard is the share of equal signature values, or with ``exact_jaccard`` that of the shingle sets.
   Edges go to ``dedup/edges/``; the task returns their maximum spanning forest (``lab.dedup.forest``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import numpy as np
import pyarrow as pa

from lab.dedup.forest import Forest, spanning_forest
from lab.dedup.signature import band_hashes
from lab.errors import IntegrityError
from lab.io.run import RunLayout
from lab.io.writers import read_parquet_group, write_parquet, write_parquet_groups

if TYPE_CHECKING:
    from lab.stages.near_dedup import Config

PAIRS_AT_ONCE = 1 << 14  # candidate pairs whose signatures are compared together (~15 MB at 112 permutations)
EXACT = 255  # the shuffle's pseudo-band of exact duplicates: band_hash = content hash
BAND_SCHEMA = pa.schema([("band", pa.uint8()), ("band_hash", pa.uint64()), ("node", pa.int64()),
                         ("doc_id", pa.int64()), ("row", pa.int32())])
EXACT_SCHEMA = pa.schema([("content_hash", pa.int64()), ("docs", pa.int64()), ("first_doc_id", pa.int64())])
EDGE_SCHEMA = pa.schema([("u", pa.int64()), ("v", pa.int64()), ("u_doc", pa.int64()), ("v_doc", pa.int64()),
                         ("matches", pa.int16()), ("jaccard_est", pa.float64()), ("jaccard_exact", pa.float64()),
                         ("jaccard", pa.float64())])


# --- map -----------------------------------------------------------------------------------------


def bucket_of(keys: np.ndarray, salt: np.ndarray | int, n_buckets: int) -> np.ndarray:
    """The shuffle bucket (0..n_buckets-1, int64) of each uint64 key, mixed with a salt (the band);
    every shuffle of a run (LSH bands, exact hashes, boilerplate lines) uses this one layout.

    >>> bucket_of(np.array([1, 2, 3], dtype=np.uint64), 0, 4).tolist()
    [2, 1, 3]
    """
    salt = np.asarray(salt, dtype=np.uint64)
    with np.errstate(over="ignore"):
        mixed = (keys.astype(np.uint64) ^ (salt * np.uint64(0x9E3779B97F4A7C15))) * np.uint64(0xBF58476D1CE4E5B9)
    return ((mixed >> np.uint64(33)) % np.uint64(n_buckets)).astype(np.int64)



def band_groups(signatures: np.ndarray, has_signature: np.ndarray, nodes: np.ndarray, has_node: np.ndarray,
                doc_ids: np.ndarray, cfg: Config, n_buckets: int) -> dict[int, pa.Table]:
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
    bh = np.empty((rows.size, cfg.bands), dtype=np.uint64)  # [n, bands], a block of rows at a time (flat memory)
    for a in range(0, rows.size, 8192):
        bh[a:a + 8192] = band_hashes(signatures[rows[a:a + 8192]], cfg.bands, cfg.rows)
    exact = np.flatnonzero(has_node)
    band = np.concatenate([np.tile(np.arange(cfg.bands, dtype=np.uint8), rows.size),
                           np.full(exact.size, EXACT, dtype=np.uint8)])
    flat = np.concatenate([bh.reshape(-1), nodes[exact].view(np.uint64)])
    bucket = bucket_of(flat, band.astype(np.uint64), n_buckets)
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
            raise IntegrityError(f"{path}: a Fortran-order array, corpus-lab writes C order: the file was replaced; "
                                 "rerun `corpus-lab run --overwrite` to annotate the run again")
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


def _take(columns: list[np.ndarray], index: np.ndarray) -> None:
    """``columns[k] = columns[k][index]`` for each column, one after the other: at most one extra column in memory."""
    for k in range(len(columns)):
        columns[k] = columns[k][index]


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


def reduce_bucket(run_dir: str | Path, bucket: int, keys: Sequence[str], cfg: Config) -> Forest:
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
    _write_exact(layout, bucket, node[band == EXACT], doc[band == EXACT])
    cols = [band, bh, node, doc, row, part]
    del band, bh, node, doc, row, part
    _take(cols, np.flatnonzero(cols[0] != EXACT))
    # one record per (band, band_hash, node): a node's lowest doc_id over all partitions
    _take(cols, np.lexsort((cols[3], cols[2], cols[1], cols[0])))
    band, bh, node = cols[:3]
    keep = np.ones(band.size, dtype=bool)
    keep[1:] = (band[1:] != band[:-1]) | (bh[1:] != bh[:-1]) | (node[1:] != node[:-1])
    del band, bh, node
    _take(cols, np.flatnonzero(keep))
    _take(cols, np.lexsort((cols[3], cols[1], cols[0])))  # groups of equal (band, band_hash), members by doc_id
    band, bh, node, doc, row, part = cols
    new = np.ones(band.size, dtype=bool)
    new[1:] = (band[1:] != band[:-1]) | (bh[1:] != bh[:-1])
    del bh
    starts = np.flatnonzero(new)
    sizes = np.diff(np.append(starts, band.size))
    multi = sizes > 1
    i, j = _group_pairs(starts[multi], sizes[multi], cfg.max_group_pairs)

    src = _Rows(layout, keys)
    kept, matches = [], []
    for at in range(0, i.size, PAIRS_AT_ONCE):  # the signatures of a chunk of pairs at a time: memory stays flat
        ci, cj = i[at:at + PAIRS_AT_ONCE], j[at:at + PAIRS_AT_ONCE]
        equal = src.signatures(part[ci], row[ci], cfg.num_perm) == src.signatures(part[cj], row[cj], cfg.num_perm)
        band_equal = equal.reshape(-1, cfg.bands, cfg.rows).all(axis=2)
        b = band[ci]
        # found by this band (not a 64-bit band-hash collision), and this is the first equal band
        first = band_equal[np.arange(b.size), b] & (band_equal.argmax(axis=1) == b)
        kept.append(at + np.flatnonzero(first))
        matches.append(equal[first].sum(axis=1).astype(np.int16))
    take = np.concatenate(kept) if kept else np.zeros(0, dtype=np.int64)
    i, j = i[take], j[take]
    matches = np.concatenate(matches) if matches else np.zeros(0, dtype=np.int16)
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
