"""export: a materialized split -> the Megatron-LM / NeMo ``IndexedDataset`` format (``.bin`` + ``.idx``).

One Megatron *sequence* per document, as Megatron-LM's ``tools/preprocess_data.py`` writes them: its
``GPTDataset`` shuffles and packs whole documents itself, so exporting packed sequences would pack twice
and hide document boundaries. The documents are the split's own tokens, in the order they first appear
in its shards, rebuilt from the provenance pieces (``lab.tokens.provenance``): the export needs only
``tokens/SPLIT/``. ``PREFIX.bin`` holds the documents' tokens back to back (uint16 when the split's are,
else int32); ``PREFIX.idx`` is Megatron's index (magic, version, dtype code, counts, sizes, offsets).

>>> _idx_bytes(np.array([3, 2]), np.dtype(np.uint16))[:18]
b'MMIDIDX\\x00\\x00\\x01\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x08'
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from lab.errors import IntegrityError
from lab.io.writers import atomic
from lab.tokens.shards import open_shard, read_manifest

MAGIC = b"MMIDIDX\x00\x00"
DTYPE_CODES = {"uint8": 1, "int8": 2, "int16": 3, "int32": 4, "int64": 5, "float64": 6, "float32": 7, "uint16": 8}


def _idx_bytes(lengths: np.ndarray, dtype: np.dtype) -> bytes:
    """The ``.idx`` of sequences of ``lengths`` tokens of ``dtype``, one document each."""
    lengths = np.asarray(lengths, dtype=np.int64)
    pointers = np.zeros(lengths.size, dtype=np.int64)
    np.cumsum(lengths[:-1] * dtype.itemsize, out=pointers[1:])
    return b"".join([MAGIC, struct.pack("<Q", 1), struct.pack("<B", DTYPE_CODES[dtype.name]),
                     struct.pack("<Q", lengths.size), struct.pack("<Q", lengths.size + 1),
                     lengths.astype("<i4").tobytes(), pointers.astype("<i8").tobytes(),
                     np.arange(lengths.size + 1, dtype="<i8").tobytes()])


def _pieces(split_dir: Path, m) -> tuple[np.ndarray, ...]:
    """Every piece of the split: doc_id, start, length, shard, flat position in its shard's tokens."""
    cols: list[list[np.ndarray]] = [[], [], [], [], []]
    for k, info in enumerate(m.shards):
        base = split_dir / info.name
        rows = np.load(f"{base}.pieces.npy")
        offsets = np.load(f"{base}.piece_offsets.npy")
        if rows.ndim != 2 or rows.shape[1] != 3 or offsets.shape != (info.sequences + 1,) or offsets[-1] != len(rows):
            raise IntegrityError(f"{base}.pieces.npy does not describe {info.sequences} sequences; rerun "
                                 "`corpus-lab run` with the same config to rewrite the split")
        seq = np.repeat(np.arange(info.sequences, dtype=np.int64), np.diff(offsets))
        ends = np.cumsum(rows[:, 2])
        before = ends - rows[:, 2] - np.repeat(np.r_[0, ends][offsets[:-1]], np.diff(offsets))
        for c, a in zip(cols, (rows[:, 0], rows[:, 1], rows[:, 2], np.full(len(rows), k), seq * m.seq_len + before)):
            c.append(a.astype(np.int64))
    return tuple(np.concatenate(c) if c else np.zeros(0, np.int64) for c in cols)


def export_megatron(split_dir: str | Path, prefix: str | Path) -> dict:
    """Write ``PREFIX.bin`` and ``PREFIX.idx`` from the split at ``split_dir``; returns the counts."""
    split_dir, prefix = Path(split_dir), Path(prefix)
    m = read_manifest(split_dir)
    if m.provenance != "pieces":
        raise IntegrityError(f"{split_dir}: its shards were written without provenance; rematerialize them with this "
                             "corpus-lab (`corpus-lab run` with the same config)")
    doc, start, length, shard, pos = _pieces(split_dir, m)
    _, first = np.unique(doc, return_index=True)
    uniq, inverse = np.unique(doc, return_inverse=True)
    rank = np.argsort(np.argsort(first))[inverse]  # order of first appearance
    by = np.lexsort((start, rank))
    doc, start, length, shard, pos, rank = doc[by], start[by], length[by], shard[by], pos[by], rank[by]
    same = rank[1:] == rank[:-1]
    if (same & (start[1:] != start[:-1] + length[:-1])).any() or (len(start) and (start[np.r_[True, ~same]] != 0).any()):
        raise IntegrityError(f"{split_dir}: a document's pieces do not cover it from token 0 without gaps; rerun "
                             "`corpus-lab run` with the same config to rewrite the split")
    out_dtype = np.dtype(np.uint16) if m.dtype == "uint16" else np.dtype(np.int32)
    lengths = np.bincount(rank, weights=length, minlength=uniq.size).astype(np.int64)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    shards = [open_shard(split_dir, info, m).tokens.reshape(-1) for info in m.shards]
    with atomic(Path(f"{prefix}.bin")) as tmp, open(tmp, "wb") as f:
        buf: list[np.ndarray] = []
        size = 0
        for k, p, n in zip(shard.tolist(), pos.tolist(), length.tolist()):
            buf.append(shards[k][p:p + n])
            size += n
            if size >= 1 << 22:
                f.write(np.concatenate(buf).astype(out_dtype.newbyteorder("<")).tobytes())
                buf, size = [], 0
        if buf:
            f.write(np.concatenate(buf).astype(out_dtype.newbyteorder("<")).tobytes())
    with atomic(Path(f"{prefix}.idx")) as tmp:
        tmp.write_bytes(_idx_bytes(lengths, out_dtype))
    return {"documents": int(uniq.size), "tokens": int(lengths.sum()), "dtype": out_dtype.name,
            "bin": f"{prefix}.bin", "idx": f"{prefix}.idx"}
