"""provenance: any token of a materialized split -> the document and token offset it came from.

Materialize writes, beside every shard, ``NAME.pieces.npy`` (``doc_id, start, length`` of every piece, in
sequence order) and ``NAME.piece_offsets.npy`` (the ``lab.tokens.shards`` format). Token ``pos`` of a
sequence is in the piece whose running length passes ``pos``; its offset in the document's tokenization
(``tokenized/`` ids with EOD appended) is the piece's start plus the distance into it; past the last
piece is padding.

>>> _find(np.array([[7, 0, 3], [9, 5, 2]]), 4)
(9, 6)
>>> _find(np.array([[7, 0, 3]]), 3) is None
True
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from lab.errors import ConfigError, IntegrityError, NotReadyError
from lab.tokens.shards import read_manifest


def _find(pieces: np.ndarray, pos: int) -> tuple[int, int] | None:
    """``(doc_id, offset in the document)`` of position ``pos`` in a sequence of ``pieces``; None if padding."""
    ends = np.cumsum(pieces[:, 2])
    k = int(np.searchsorted(ends, pos, side="right"))
    if k >= len(pieces):
        return None
    before = int(ends[k - 1]) if k else 0
    return int(pieces[k, 0]), int(pieces[k, 1]) + pos - before


def sequence_pieces(split_dir: str | Path, shard: int, seq: int) -> np.ndarray:
    """int64 ``[pieces, 3]``: ``(doc_id, start, length)`` of each piece of sequence ``seq`` of shard ``shard``."""
    split_dir = Path(split_dir)
    m = read_manifest(split_dir)
    if m.provenance != "pieces":
        raise NotReadyError(f"{split_dir}: its shards were written without provenance (manifest provenance="
                            f"{m.provenance!r}); rematerialize them with this corpus-lab (`corpus-lab run` with the "
                            "same config)")
    if not 0 <= shard < len(m.shards):
        raise ConfigError(f"shard={shard} is not allowed: {split_dir} has shards 0..{len(m.shards) - 1}")
    info = m.shards[shard]
    if not 0 <= seq < info.sequences:
        raise ConfigError(f"seq={seq} is not allowed: shard {shard} of {split_dir} has sequences "
                          f"0..{info.sequences - 1}")
    base = split_dir / info.name
    try:
        rows = np.load(f"{base}.pieces.npy", mmap_mode="r")
        offsets = np.load(f"{base}.piece_offsets.npy")
    except (OSError, ValueError, EOFError) as e:
        raise IntegrityError(f"{base}.pieces.npy / .piece_offsets.npy cannot be read ({e}); rerun `corpus-lab run` "
                             "with the same config to rewrite the split") from None
    if offsets.shape != (info.sequences + 1,) or rows.ndim != 2 or rows.shape[1] != 3 or offsets[-1] != len(rows):
        raise IntegrityError(f"{base}.pieces.npy {rows.shape} and .piece_offsets.npy {offsets.shape} do not "
                             f"describe {info.sequences} sequences; rerun `corpus-lab run` with the same config")
    return np.asarray(rows[offsets[seq]:offsets[seq + 1]])


def locate(split_dir: str | Path, shard: int, seq: int, pos: int) -> dict:
    """Where token ``pos`` of sequence ``seq`` of shard ``shard`` comes from: ``{"doc_id", "offset"}`` (the
    token's index in the document's token ids, EOD appended), or ``{"padding": True}`` for a padding slot."""
    seq_len = read_manifest(Path(split_dir)).seq_len
    pieces = sequence_pieces(split_dir, shard, seq)
    if isinstance(pos, bool) or not 0 <= pos < seq_len:
        raise ConfigError(f"pos={pos} is not allowed: a sequence of {split_dir} has positions 0..{seq_len - 1}")
    hit = _find(pieces, int(pos))
    if hit is None:
        return {"padding": True, "real_tokens": int(pieces[:, 2].sum())}
    return {"doc_id": hit[0], "offset": hit[1]}


def document_ids(run_dir: str | Path, doc_id: int) -> np.ndarray:
    """Document ``doc_id``'s token ids from ``tokenized/`` (without EOD)."""
    import pyarrow.parquet as pq

    from lab.io.run import RunLayout

    layout = RunLayout(Path(run_dir))
    for f in sorted(layout.tokenized_dir.glob("part-*.parquet")):
        t = pq.read_table(f, columns=["doc_id", "ids"], filters=[("doc_id", "=", int(doc_id))])
        if t.num_rows:
            return t.column("ids")[0].values.to_numpy(zero_copy_only=False)
    raise NotReadyError(f"doc_id {doc_id} has no token ids in {layout.tokenized_dir}; rerun `corpus-lab run`")


def trace(run_dir: str | Path, split: str, shard: int, seq: int, pos: int, window: int = 12) -> dict:
    """``locate`` plus the document's source, locator and url, and the decoded text around the token:
    ``before``, ``token``, ``after`` (``window`` tokens either side, within the document)."""
    from lab import query
    from lab.config import load
    from lab.io.run import RunLayout
    from lab.tokens import tokenize

    run_dir = Path(run_dir)
    split_dir = run_dir / "tokens" / split
    where = {"split": split, "shard": shard, "seq": seq, "pos": pos, **locate(split_dir, shard, seq, pos)}
    if where.get("padding"):
        return where
    d, off = where["doc_id"], where["offset"]
    m = read_manifest(split_dir)
    tok = tokenize.load(RunLayout(run_dir), m.tokenizer_sha256)
    ids = np.append(document_ids(run_dir, d), m.eod_id).astype(np.int64).tolist()
    meta = query.documents(run_dir, load(run_dir / "config.yaml"), view="kept", doc_ids=[d], limit=1,
                           with_text=False)
    row = meta.row(0, named=True) if meta.height else {}

    def text(a: int, b: int) -> str:
        return tok.decode(ids[max(a, 0):max(b, 0)], skip_special_tokens=False)

    return {**where, "token_id": ids[off], "doc_tokens": len(ids), "source": row.get("source"),
            "locator": row.get("locator"), "url": row.get("url"), "before": text(off - window, off),
            "token": text(off, off + 1), "after": text(off + 1, off + 1 + window)}
