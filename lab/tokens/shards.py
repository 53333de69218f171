"""Token shards on disk: fixed-width packed sequences that ``numpy.memmap`` reads with nothing else.

A split directory (``tokens/train/``, ``tokens/val/``) holds, per shard: ``shard-NNNNN.bin`` (little-endian
tokens, uint16 when the vocabulary fits, else uint32; ``sequences x seq_len`` of them; unused slots hold
``pad_id``); ``.bounds.npy`` and ``.offsets.npy`` (sequence ``i``'s document boundaries as ``cu_seqlens``
are ``bounds[offsets[i]:offsets[i + 1]]``); ``.pieces.npy`` and ``.piece_offsets.npy`` (provenance: each
sequence's ``(doc_id, start, length)`` pieces, ``lab.tokens.provenance``). ``manifest.json``
(``SplitManifest``) gives dtype, seq_len, eod_id, pad_id, the shards with their sequence and token
counts, the tokenizer's sha256, the config hash and the shuffle seed. Sequence ``i`` of a shard is row
``i`` of ``np.memmap(path, dtype=dtype, mode="r").reshape(-1, seq_len)``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from lab.errors import IntegrityError, NotReadyError
from lab.io.writers import atomic, read_json, write_json, write_npy

MANIFEST = "manifest.json"
FORMAT_VERSION = 1


def token_dtype(vocab_size: int) -> np.dtype:
    """uint16 when every id fits, else uint32."""
    return np.dtype(np.uint16) if vocab_size <= 1 << 16 else np.dtype(np.uint32)


@dataclass
class ShardInfo:
    name: str  # shard-NNNNN (files: NAME.bin, NAME.bounds.npy, NAME.offsets.npy)
    sequences: int
    real_tokens: int  # tokens that are not padding
    documents: int  # document segments (a document split across sequences counts once per piece)


@dataclass
class SplitManifest:
    split: str  # train or val
    dtype: str  # uint16 or uint32
    seq_len: int
    eod_id: int
    pad_id: int
    vocab_size: int
    tokenizer_sha256: str
    config_hash: str
    shuffle_seed: int
    packing: str
    shards: list[ShardInfo] = field(default_factory=list)
    provenance: str = ""  # "pieces": every shard has NAME.pieces.npy and NAME.piece_offsets.npy
    format_version: int = FORMAT_VERSION

    @property
    def sequences(self) -> int:
        return sum(s.sequences for s in self.shards)

    def to_json(self) -> dict:
        d = asdict(self)
        d["sequences"] = self.sequences
        d["tokens"] = self.sequences * self.seq_len
        d["real_tokens"] = sum(s.real_tokens for s in self.shards)
        return d

    @classmethod
    def from_json(cls, d: dict) -> SplitManifest:
        d = {k: v for k, v in d.items() if k not in ("sequences", "tokens", "real_tokens")}
        d["shards"] = [ShardInfo(**s) for s in d["shards"]]
        return cls(**d)


def write_shard(directory: Path, index: int, tokens: np.ndarray, cu_seqlens: list[np.ndarray],
                dtype: np.dtype) -> ShardInfo:
    """Write one shard: ``tokens`` [sequences, seq_len] and each sequence's ``cu_seqlens``."""
    name = f"shard-{index:05d}"
    directory.mkdir(parents=True, exist_ok=True)
    if len(cu_seqlens) != len(tokens):
        raise ValueError(f"{len(tokens)} sequences but {len(cu_seqlens)} boundary lists")
    with atomic(directory / f"{name}.bin") as tmp:
        np.ascontiguousarray(tokens, dtype=dtype.newbyteorder("<")).tofile(tmp)
    offsets = np.zeros(len(cu_seqlens) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([c.size for c in cu_seqlens])
    bounds = np.concatenate(cu_seqlens).astype(np.int32) if cu_seqlens else np.zeros(0, dtype=np.int32)
    write_npy(bounds, directory / f"{name}.bounds.npy")
    write_npy(offsets, directory / f"{name}.offsets.npy")
    real = int(sum(int(c[-1]) for c in cu_seqlens)) if cu_seqlens else 0
    docs = int(sum(c.size - 1 for c in cu_seqlens))
    return ShardInfo(name, len(tokens), real, docs)


def write_pieces(directory: Path, index: int, doc_ids: np.ndarray, start: np.ndarray, length: np.ndarray,
                 seq_offsets: np.ndarray) -> None:
    """Write one shard's provenance: ``(doc_id, start, length)`` of every piece and each sequence's piece offsets."""
    name = f"shard-{index:05d}"
    Path(directory).mkdir(parents=True, exist_ok=True)
    rows = np.stack([np.asarray(doc_ids, np.int64), np.asarray(start, np.int64), np.asarray(length, np.int64)], axis=1)
    write_npy(rows.reshape(-1, 3), Path(directory) / f"{name}.pieces.npy")
    write_npy(np.asarray(seq_offsets, dtype=np.int64), Path(directory) / f"{name}.piece_offsets.npy")


def write_manifest(directory: Path, manifest: SplitManifest) -> None:
    write_json(manifest.to_json(), directory / MANIFEST)


def read_manifest(directory: Path) -> SplitManifest:
    """A split's manifest: ``NotReadyError`` if the split has none yet, ``IntegrityError`` if it is damaged
    or of another format version."""
    p = Path(directory) / MANIFEST
    if not p.exists():
        raise NotReadyError(f"{directory} holds no token shards ({MANIFEST} is missing); run `corpus-lab run` with "
                            "tokenizer.enabled: true (and a config that keeps documents) first")
    d = read_json(p)
    if not isinstance(d, dict) or d.get("format_version", FORMAT_VERSION) != FORMAT_VERSION:
        found = d.get("format_version") if isinstance(d, dict) else type(d).__name__
        raise IntegrityError(f"{p}: token shard format {found!r}, this corpus-lab reads format {FORMAT_VERSION}; "
                             "rematerialize the shards with this corpus-lab (`corpus-lab run` with the same config)")
    try:
        return SplitManifest.from_json(d)
    except (KeyError, TypeError) as e:
        raise IntegrityError(f"{p} is not a token split manifest ({type(e).__name__}: {e}); rerun `corpus-lab run` "
                             "with the same config to rewrite the shards") from None


@dataclass
class Shard:
    """One shard opened for reading: tokens as a read-only memmap [sequences, seq_len]."""

    tokens: np.ndarray
    bounds: np.ndarray
    offsets: np.ndarray

    def cu_seqlens(self, i: int) -> np.ndarray:
        return self.bounds[self.offsets[i]:self.offsets[i + 1]]


def open_shard(directory: Path, info: ShardInfo, manifest: SplitManifest) -> Shard:
    """A shard's files, checked against the manifest (``IntegrityError`` naming the file that differs)."""
    directory = Path(directory)
    fix = "rerun `corpus-lab run` with the same config to rewrite the split (or restore the file)"
    base = directory / info.name
    try:
        tokens = np.memmap(f"{base}.bin", dtype=np.dtype(manifest.dtype).newbyteorder("<"), mode="r")
    except (OSError, ValueError) as e:  # missing, or empty (an empty file cannot be mapped)
        raise IntegrityError(f"{base}.bin cannot be read ({e}), the manifest says {info.sequences} x "
                             f"{manifest.seq_len} tokens; {fix}") from None
    if tokens.size != info.sequences * manifest.seq_len:
        raise IntegrityError(f"{base}.bin holds {tokens.size} tokens, the manifest says {info.sequences} x "
                             f"{manifest.seq_len}: the shard is truncated or from another run; {fix}")
    arrays = []
    for kind, dtype in (("bounds", np.int32), ("offsets", np.int64)):
        try:
            a = np.load(f"{base}.{kind}.npy")
        except (OSError, ValueError, EOFError) as e:  # missing, truncated, or not an .npy file
            raise IntegrityError(f"{base}.{kind}.npy cannot be read ({e}); {fix}") from None
        if a.ndim != 1 or a.dtype != dtype:
            raise IntegrityError(f"{base}.{kind}.npy holds {a.dtype} of shape {a.shape}, a shard's {kind} are 1-D "
                                 f"{np.dtype(dtype)}; {fix}")
        arrays.append(a)
    bounds, offsets = arrays
    if offsets.size != info.sequences + 1:
        raise IntegrityError(f"{base}.offsets.npy has {offsets.size} entries, the manifest says {info.sequences} "
                             f"sequences (+1): the shard is damaged or from another run; {fix}")
    return Shard(tokens.reshape(info.sequences, manifest.seq_len), bounds, offsets)
