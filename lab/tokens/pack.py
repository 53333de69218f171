"""pack: tokenized documents -> fixed-length training sequences. Pure numpy/Python; no Dask, no files.

``plan`` decides where every token goes from document lengths alone (each counting its trailing EOD) as
sequences of *pieces* ``(doc, start, end)``; ``materialize`` copies tokens into a ``[sequences, seq_len]``
array. Strategies: ``pad`` (one document per sequence, the rest truncated), ``concat`` (one stream cut every
``seq_len`` tokens) and ``best_fit`` (best-fit decreasing, Ding et al. 2024: only documents longer than
``seq_len`` are split; O(n log seq_len)). Empty documents get no piece.

>>> p = plan(np.array([7, 5, 4, 3, 3, 2, 12]), 10, "best_fit")
>>> [p.pieces(s) for s in range(p.sequences)]
[[(6, 0, 10)], [(0, 0, 7), (3, 0, 3)], [(1, 0, 5), (2, 0, 4)], [(4, 0, 3), (5, 0, 2), (6, 10, 12)]]
>>> p.stats(np.array([7, 5, 4, 3, 3, 2, 12]))["utilization"]
0.9
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from lab.errors import ConfigError

STRATEGIES = ("pad", "concat", "best_fit")


@dataclass(frozen=True, eq=False)
class Plan:
    """Where every token goes. Sequence ``s`` is pieces ``seq_offsets[s]:seq_offsets[s + 1]``."""

    strategy: str
    seq_len: int  # tokens per sequence
    documents: int  # len(lengths) that was planned
    piece_doc: np.ndarray  # int64 [pieces]: document index
    piece_start: np.ndarray  # int64 [pieces]: first token of the piece in its document
    piece_end: np.ndarray  # int64 [pieces]: one past its last token
    seq_offsets: np.ndarray  # int64 [sequences + 1]

    @property
    def sequences(self) -> int:
        return len(self.seq_offsets) - 1

    @property
    def piece_len(self) -> np.ndarray:
        return self.piece_end - self.piece_start

    @property
    def piece_seq(self) -> np.ndarray:
        """int64 [pieces]: the sequence of each piece."""
        return np.repeat(np.arange(self.sequences, dtype=np.int64), np.diff(self.seq_offsets))

    def pieces(self, s: int) -> list[tuple[int, int, int]]:
        """Sequence ``s`` as ``(doc, start, end)`` tuples, in order."""
        a, b = self.seq_offsets[s], self.seq_offsets[s + 1]
        return list(zip(self.piece_doc[a:b].tolist(), self.piece_start[a:b].tolist(), self.piece_end[a:b].tolist()))

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Every sequence's ``cu_seqlens``, flat: int32 ``bounds`` and int64 ``offsets [sequences + 1]``;
        sequence ``s``'s are ``bounds[offsets[s]:offsets[s + 1]]`` (the ``lab.tokens.shards`` layout).

        >>> plan(np.array([3, 5, 4]), 8, "best_fit").bounds()
        (array([0, 5, 8, 0, 4], dtype=int32), array([0, 3, 5]))
        """
        n = self.sequences
        offsets = self.seq_offsets + np.arange(n + 1, dtype=np.int64)  # each sequence gets one extra 0
        total = np.concatenate([[0], np.cumsum(self.piece_len)])  # over all pieces
        bounds = np.zeros(len(self.piece_doc) + n, dtype=np.int64)
        at_end = np.arange(len(self.piece_doc)) + self.piece_seq + 1  # slot of each piece's end
        bounds[at_end] = total[1:] - np.repeat(total[self.seq_offsets[:-1]], np.diff(self.seq_offsets))
        return bounds.astype(np.int32), offsets

    def stats(self, lengths: np.ndarray) -> dict:
        """The Packing tab's numbers for this plan of ``lengths`` (the same array that was planned).

        >>> plan(np.array([3, 12]), 8, "pad").stats(np.array([3, 12]))["tokens_truncated"]
        4
        """
        lengths = _check_lengths(lengths)
        if len(lengths) != self.documents:
            raise ConfigError(f"lengths has {len(lengths)} documents, but this plan was made for {self.documents}; "
                              f"pass the lengths given to plan()")
        real = int(self.piece_len.sum())
        slots = self.sequences * self.seq_len
        with_pieces = int(np.count_nonzero(np.bincount(self.piece_doc, minlength=self.documents)))
        return {
            "sequences": self.sequences,
            "slots": slots,
            "real_tokens": real,
            "utilization": real / slots if slots else 0.0,
            "tokens_truncated": int(lengths.sum()) - real,
            "documents": self.documents,
            "documents_split": _documents_split(self.piece_doc, self.piece_seq),
            "fragments_per_document": len(self.piece_doc) / with_pieces if with_pieces else 0.0,
            "padding_tokens": slots - real,
        }


def plan(lengths: np.ndarray, seq_len: int, strategy: str, seed: int | None = None) -> Plan:
    """Pack documents of ``lengths`` tokens (EOD included) into sequences of ``seq_len`` tokens.

    ``seed`` (best_fit): the sequences in a seeded random order instead of the order they were
    opened in, which is longest piece first: read in order, that order is a length curriculum (the
    first sequences hold one long document each, the last many short ones). Materialized shards
    use it (``pack.shuffle_seed``); the statistics do not depend on it."""
    if strategy not in STRATEGIES:
        raise ConfigError(f"packing.strategy={strategy!r} is not allowed: must be one of {', '.join(STRATEGIES)}")
    if isinstance(seq_len, bool) or not isinstance(seq_len, (int, np.integer)) or seq_len < 2:
        raise ConfigError(f"packing.seq_len={seq_len!r} is not allowed: must be a whole number >= 2")
    seq_len = int(seq_len)
    lengths = _check_lengths(lengths)
    if strategy == "pad":
        doc = np.flatnonzero(lengths)
        start, end = np.zeros_like(doc), np.minimum(lengths[doc], seq_len)
        seq_of = np.arange(len(doc), dtype=np.int64)
    elif strategy == "concat":
        doc, start, end, seq_of = _concat(lengths, seq_len)
    else:
        doc, start, end = _chunks(lengths, seq_len)
        order = np.argsort(start - end, kind="stable")  # longest first; pieces come in (doc, start) order
        doc, start, end = doc[order], start[order], end[order]
        seq_of = _best_fit(end - start, seq_len)
        if seed is not None and len(seq_of):
            seq_of = np.random.default_rng(int(seed)).permutation(int(seq_of.max()) + 1)[seq_of]
        placed = np.argsort(seq_of, kind="stable")  # by sequence, in placement order within one
        doc, start, end, seq_of = doc[placed], start[placed], end[placed], seq_of[placed]
    n_seq = int(seq_of[-1]) + 1 if len(seq_of) else 0
    offsets = np.zeros(n_seq + 1, dtype=np.int64)
    np.cumsum(np.bincount(seq_of, minlength=n_seq), out=offsets[1:])
    return Plan(strategy, seq_len, len(lengths), doc.astype(np.int64), start.astype(np.int64),
                end.astype(np.int64), offsets)


def materialize(plan: Plan, tokens_of: Callable[[int], np.ndarray], pad_id: int,
                dtype: np.dtype | type) -> tuple[np.ndarray, list[np.ndarray]]:
    """Fill ``[sequences, seq_len]`` of ``dtype`` with each sequence's pieces in order, ``pad_id`` after them;
    also each sequence's ``cu_seqlens`` (int32, ``[0, len_0, len_0 + len_1, ...]``) for per-document attention.

    ``tokens_of(doc)`` returns document ``doc``'s token ids, EOD included; it is called once per
    document that has a piece, in increasing document order.

    >>> docs = [np.array([1, 2, 0]), np.array([3, 4, 5, 6, 0])]
    >>> out, cu = materialize(plan(np.array([3, 5]), 6, "concat"), docs.__getitem__, -1, np.int32)
    >>> out.tolist(), [c.tolist() for c in cu]
    ([[1, 2, 0, 3, 4, 5], [6, 0, -1, -1, -1, -1]], [[0, 3, 6], [0, 2]])
    """
    dtype = np.dtype(dtype)
    if dtype.kind not in "iu":
        raise ConfigError(f"dtype={dtype} is not allowed: must be an integer type (uint16, uint32, int32, ...)")
    info = np.iinfo(dtype)
    if isinstance(pad_id, bool) or not isinstance(pad_id, (int, np.integer)) or not info.min <= pad_id <= info.max:
        raise ConfigError(f"pad_id={pad_id!r} is not allowed: must be a whole number in [{info.min}, {info.max}] "
                          f"to fit {dtype}")
    S = plan.seq_len
    out = np.full(plan.sequences * S, pad_id, dtype=dtype)
    bounds, offsets = plan.bounds()
    # flat destination of each piece: its sequence's first slot + the tokens before it in the sequence
    piece_seq = plan.piece_seq
    within = bounds[np.arange(len(plan.piece_doc)) + piece_seq].astype(np.int64)
    dest = piece_seq * S + within
    by_doc = np.argsort(plan.piece_doc, kind="stable")
    docs = plan.piece_doc[by_doc]
    first = np.flatnonzero(np.r_[True, docs[1:] != docs[:-1]]) if len(docs) else np.zeros(0, dtype=np.int64)
    stops = np.r_[first[1:], len(docs)]
    starts, ends, dests = plan.piece_start.tolist(), plan.piece_end.tolist(), dest.tolist()
    by_doc = by_doc.tolist()
    for a, b in zip(first.tolist(), stops.tolist()):
        doc = int(docs[a])
        toks = _check_tokens(np.asarray(tokens_of(doc)), doc, max(ends[k] for k in by_doc[a:b]), plan, dtype)
        for k in by_doc[a:b]:
            d = dests[k]
            out[d:d + ends[k] - starts[k]] = toks[starts[k]:ends[k]]
    return out.reshape(plan.sequences, S), np.split(bounds, offsets[1:-1]) if plan.sequences else []


# --- strategies ----------------------------------------------------------------------------------


def _chunks(lengths: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each document cut into ``size``-token chunks plus a remainder: ``doc, start, end`` in (doc, start) order.

    >>> [a.tolist() for a in _chunks(np.array([3, 0, 7]), 3)]
    [[0, 2, 2, 2], [0, 0, 3, 6], [3, 3, 6, 7]]
    """
    counts = -(-lengths // size)  # ceil; 0 for an empty document
    doc = np.repeat(np.arange(len(lengths), dtype=np.int64), counts)
    k = np.arange(len(doc), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)  # chunk number
    start = k * size
    return doc, start, np.minimum(start + size, lengths[doc])


def _concat(lengths: np.ndarray, seq_len: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The stream of all documents cut every ``seq_len``: ``doc, start, end, seq`` of each piece.

    >>> [a.tolist() for a in _concat(np.array([3, 5, 4]), 4)]
    [[0, 1, 1, 2], [0, 0, 1, 0], [3, 1, 5, 4], [0, 0, 1, 2]]
    """
    at = np.cumsum(lengths) - lengths  # stream offset of each document
    first = at // seq_len  # sequence of its first token
    counts = np.where(lengths > 0, (at + lengths - 1) // seq_len - first + 1, 0)
    doc = np.repeat(np.arange(len(lengths), dtype=np.int64), counts)
    seq = np.repeat(first, counts) + np.arange(len(doc)) - np.repeat(np.cumsum(counts) - counts, counts)
    start = np.maximum(seq * seq_len - at[doc], 0)
    end = np.minimum((seq + 1) * seq_len - at[doc], lengths[doc])
    return doc, start, end, seq


def _best_fit(piece_len: np.ndarray, seq_len: int) -> np.ndarray:
    """Sequence number (in order of opening) of each piece, placed in the given order by best fit.

    >>> _best_fit(np.array([7, 5, 4, 2, 1]), 10).tolist()  # the 1 goes to the first-opened of the two rooms of 1
    [0, 1, 1, 0, 0]
    """
    rooms = _Rooms(seq_len)
    open_at: dict[int, list[int]] = {}  # room -> heap of the open sequences with that much room
    seq_of = []
    n_open = 0
    for length in piece_len.tolist():
        room = rooms.smallest_at_least(length)
        if room < 0:
            s, left = n_open, seq_len - length
            n_open += 1
        else:
            heap = open_at[room]
            s, left = heapq.heappop(heap), room - length
            if not heap:
                rooms.discard(room)
        seq_of.append(s)
        if left:  # a full sequence is closed
            heap = open_at.setdefault(left, [])
            if not heap:
                rooms.add(left)
            heapq.heappush(heap, s)
    return np.array(seq_of, dtype=np.int64)


class _Rooms:
    """A set of integers in ``[0, size]`` with ``smallest_at_least(x)`` in ``log_64 size`` steps: a 64-ary tree
    of bitmasks. ``levels[0]`` bit ``c`` of word ``c >> 6`` says ``c`` is a member; bit ``i`` of level ``d + 1``
    says word ``i`` of level ``d`` is non-zero. The top level is one word.

    >>> r = _Rooms(2048); r.add(5); r.add(700); r.smallest_at_least(6), r.smallest_at_least(701)
    (700, -1)
    """

    def __init__(self, size: int):
        self.levels: list[list[int]] = []
        n = size + 1
        while True:
            words = (n + 63) >> 6
            self.levels.append([0] * words)
            if words == 1:
                break
            n = words

    def add(self, c: int) -> None:
        for words in self.levels:
            i = c >> 6
            w = words[i]
            words[i] = w | (1 << (c & 63))
            if w:  # the word was already non-zero: the levels above know
                break
            c = i

    def discard(self, c: int) -> None:
        for words in self.levels:
            i = c >> 6
            w = words[i] & ~(1 << (c & 63))
            words[i] = w
            if w:
                break
            c = i

    def smallest_at_least(self, c: int) -> int:
        """The smallest member >= ``c``, or -1."""
        levels = self.levels
        depth = 0
        while True:  # climb until a word has a member at or after c
            words = levels[depth]
            i = c >> 6
            if i >= len(words):
                return -1
            w = words[i] >> (c & 63)
            if w:
                c += (w & -w).bit_length() - 1
                break
            depth += 1
            if depth == len(levels):
                return -1
            c = i + 1  # the next word, as a bit of the level above
        while depth:  # descend along the lowest set bits
            depth -= 1
            w = levels[depth][c]
            c = (c << 6) + (w & -w).bit_length() - 1
        return c


# --- checks and counts ---------------------------------------------------------------------------


def _check_lengths(lengths) -> np.ndarray:
    a = np.asarray(lengths)
    if a.ndim != 1 or (a.size and a.dtype.kind not in "iu"):
        raise ConfigError(f"lengths of dtype {a.dtype} and shape {a.shape} is not allowed: "
                          f"must be a 1-D array of whole token counts")
    a = a.astype(np.int64)
    if a.size and a.min() < 0:
        i = int(np.argmin(a))
        raise ConfigError(f"lengths[{i}]={int(a[i])} is not allowed: token counts must be >= 0")
    return a


def _check_tokens(toks: np.ndarray, doc: int, end: int, plan: Plan, dtype: np.dtype) -> np.ndarray:
    """``tokens_of(doc)``'s answer, checked against the plan (``end``: its last placed token + 1) and the
    output dtype (range)."""
    # pad truncates at seq_len: only then may the document be longer than what is placed
    ok = len(toks) >= end if plan.strategy == "pad" and end == plan.seq_len else len(toks) == end
    if toks.ndim != 1 or not ok:
        raise ConfigError(f"tokens_of({doc}) returned shape {toks.shape}, but the plan places {end} tokens of it "
                          f"(strategy {plan.strategy!r}); pass the lengths of exactly these token arrays to plan()")
    if toks.size and not np.can_cast(toks.dtype, dtype):
        if toks.dtype.kind not in "iu":
            raise ConfigError(f"tokens_of({doc}) returned dtype {toks.dtype}: token ids must be integers")
        info = np.iinfo(dtype)
        lo, hi = int(toks.min()), int(toks.max())
        if lo < info.min or hi > info.max:
            raise ConfigError(f"tokens_of({doc}) has token ids in [{lo}, {hi}], which do not fit {dtype}; "
                              f"use a wider dtype (uint32 for vocabularies over 65536)")
    return toks


def _documents_split(piece_doc: np.ndarray, piece_seq: np.ndarray) -> int:
    """Documents whose pieces lie in more than one sequence."""
    if not len(piece_doc):
        return 0
    order = np.lexsort((piece_seq, piece_doc))
    d, s = piece_doc[order], piece_seq[order]
    moved = (d[1:] == d[:-1]) & (s[1:] != s[:-1])  # same document, another sequence
    return len(np.unique(d[1:][moved]))
