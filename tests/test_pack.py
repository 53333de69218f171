"""Packing: every input token lands exactly once (in a sequence, or truncated by ``pad``), best fit
matches a hand-worked packing and a brute-force best fit, and planning stays O(n log seq_len)."""

import doctest

import numpy as np
import pytest

import lab.tokens.pack
from lab.errors import ConfigError
from lab.tokens.pack import STRATEGIES, materialize, plan

PAD = -1
POS = 1_000_000  # token id = doc * POS + position: every token says where it came from


def encoded(lengths):
    return [d * POS + np.arange(n, dtype=np.int64) for d, n in enumerate(lengths)]


def random_lengths(rng, n, seq_len):
    lengths = rng.integers(1, 2 * seq_len + 3, n)
    lengths[rng.random(n) < 0.1] = 0  # empty documents get no piece
    lengths[rng.random(n) < 0.1] = seq_len  # exact fits
    return lengths


def naive_best_fit(lengths, seq_len):
    """Best-fit decreasing by the definition: scan every open sequence for the least room that fits."""
    pieces = [(d, a, min(a + seq_len, n)) for d, n in enumerate(lengths) for a in range(0, n, seq_len)]
    pieces.sort(key=lambda p: (p[1] - p[2], p[0], p[1]))
    seqs, room = [], []
    for p in pieces:
        n = p[2] - p[1]
        fits = [i for i, r in enumerate(room) if r >= n]
        if fits:
            best = min(fits, key=lambda i: (room[i], i))  # least room, then first opened
            seqs[best].append(p)
            room[best] -= n
        else:
            seqs.append([p])
            room.append(seq_len - n)
    return seqs


def test_best_fit_by_hand():
    # seq_len 10; the 12-token document 6 is cut into 10 + 2. Longest first:
    #   10 (doc 6)  -> opens seq 0, full
    #    7 (doc 0)  -> opens seq 1 (room 3)
    #    5 (doc 1)  -> no room >= 5: opens seq 2 (room 5)
    #    4 (doc 2)  -> rooms 3, 5: seq 2 (room 1)
    #    3 (doc 3)  -> rooms 3, 1: seq 1 (room 0)
    #    3 (doc 4)  -> room 1 only: opens seq 3 (room 7)
    #    2 (doc 5)  -> rooms 1, 7: seq 3 (room 5)
    #    2 (doc 6, tokens 10:12) -> seq 3 (room 3)
    lengths = np.array([7, 5, 4, 3, 3, 2, 12])
    p = plan(lengths, 10, "best_fit")
    assert [p.pieces(s) for s in range(p.sequences)] == [
        [(6, 0, 10)],
        [(0, 0, 7), (3, 0, 3)],
        [(1, 0, 5), (2, 0, 4)],
        [(4, 0, 3), (5, 0, 2), (6, 10, 12)],
    ]
    assert p.stats(lengths) == {
        "sequences": 4, "slots": 40, "real_tokens": 36, "utilization": 0.9, "tokens_truncated": 0,
        "documents": 7, "documents_split": 1, "fragments_per_document": 8 / 7, "padding_tokens": 4,
    }
    out, cu = materialize(p, encoded(lengths).__getitem__, PAD, np.int64)
    assert [c.tolist() for c in cu] == [[0, 10], [0, 7, 10], [0, 5, 9], [0, 3, 5, 7]]
    assert out[3].tolist() == [4 * POS, 4 * POS + 1, 4 * POS + 2, 5 * POS, 5 * POS + 1, 6 * POS + 10, 6 * POS + 11,
                               PAD, PAD, PAD]


def test_best_fit_ties_go_to_the_first_opened_sequence():
    # 7 -> seq 0 (room 3); 5 -> seq 1 (room 5); 4 -> seq 1 (room 1); 2 -> seq 0 (room 1).
    # Two rooms of 1 now: seq 1 reached it first, but seq 0 was opened first and gets the last token
    # (a FIFO per room would pick seq 1).
    p = plan(np.array([7, 5, 4, 2, 1]), 10, "best_fit")
    assert [p.pieces(s) for s in range(p.sequences)] == [[(0, 0, 7), (3, 0, 2), (4, 0, 1)], [(1, 0, 5), (2, 0, 4)]]


@pytest.mark.parametrize("seq_len", [2, 3, 5, 8, 16, 64])
def test_best_fit_equals_brute_force(seq_len):
    rng = np.random.default_rng(seq_len)
    for _ in range(5):
        lengths = random_lengths(rng, 60, seq_len)
        p = plan(lengths, seq_len, "best_fit")
        assert [p.pieces(s) for s in range(p.sequences)] == naive_best_fit(lengths.tolist(), seq_len)


def recount(out, cu, lengths):
    """The plan's statistics counted from the materialized tokens alone."""
    real = out != PAD
    docs_of_row = [set((row[m] // POS).tolist()) for row, m in zip(out, real)]
    rows_of_doc = {}
    for r, docs in enumerate(docs_of_row):
        for d in docs:
            rows_of_doc[d] = rows_of_doc.get(d, 0) + 1
    segments = sum(len(c) - 1 for c in cu)
    n_real, slots = int(real.sum()), out.size
    return {
        "sequences": out.shape[0], "slots": slots, "real_tokens": n_real,
        "utilization": n_real / slots if slots else 0.0, "tokens_truncated": int(np.sum(lengths)) - n_real,
        "documents": len(lengths), "documents_split": sum(n > 1 for n in rows_of_doc.values()),
        "fragments_per_document": segments / len(rows_of_doc) if rows_of_doc else 0.0,
        "padding_tokens": slots - n_real,
    }


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("seq_len", [2, 3, 7, 16, 100])
def test_every_token_lands_once(strategy, seq_len):
    rng = np.random.default_rng(seq_len * 10 + STRATEGIES.index(strategy))
    for _ in range(3):
        lengths = random_lengths(rng, 40, seq_len)
        docs = encoded(lengths)
        p = plan(lengths, seq_len, strategy)
        out, cu = materialize(p, docs.__getitem__, PAD, np.int64)
        assert out.shape == (p.sequences, seq_len) and len(cu) == p.sequences
        # packed + truncated == input, each token exactly once; only pad truncates, and only past seq_len
        packed = out[out != PAD]
        truncated = [t[seq_len:] for t in docs] if strategy == "pad" else []
        everything = np.sort(np.concatenate([packed, *truncated, np.zeros(0, np.int64)]))
        assert np.array_equal(everything, np.sort(np.concatenate([*docs, np.zeros(0, np.int64)])))
        # cu_seqlens: one segment per piece, in order, each a run of one document's consecutive tokens
        for s in range(p.sequences):
            c = cu[s]
            assert c.dtype == np.int32 and c[0] == 0 and np.all(np.diff(c) > 0)
            assert np.all(out[s, c[-1]:] == PAD) and np.all(out[s, :c[-1]] != PAD)
            for k, (d, a, b) in enumerate(p.pieces(s)):
                assert out[s, c[k]:c[k + 1]].tolist() == (d * POS + np.arange(a, b)).tolist()
        assert p.stats(lengths) == pytest.approx(recount(out, cu, lengths))
        bounds, offsets = p.bounds()
        assert all(np.array_equal(bounds[offsets[s]:offsets[s + 1]], cu[s]) for s in range(p.sequences))


def test_concat_is_the_stream_cut_every_seq_len():
    rng = np.random.default_rng(1)
    lengths = random_lengths(rng, 50, 16)
    docs = encoded(lengths)
    out, _ = materialize(plan(lengths, 16, "concat"), docs.__getitem__, PAD, np.int64)
    stream = np.concatenate(docs)
    padded = np.full(-(-len(stream) // 16) * 16, PAD)
    padded[:len(stream)] = stream
    assert np.array_equal(out, padded.reshape(-1, 16))


def test_split_counts_per_strategy():
    rng = np.random.default_rng(2)
    lengths = random_lengths(rng, 500, 32)
    long_docs = int((lengths > 32).sum())
    pad = plan(lengths, 32, "pad").stats(lengths)
    assert pad["documents_split"] == 0 and pad["fragments_per_document"] == 1.0
    assert pad["sequences"] == np.count_nonzero(lengths)
    assert pad["tokens_truncated"] == int(np.maximum(lengths - 32, 0).sum())
    best = plan(lengths, 32, "best_fit").stats(lengths)
    assert best["documents_split"] == long_docs and best["tokens_truncated"] == 0
    concat = plan(lengths, 32, "concat").stats(lengths)
    assert concat["tokens_truncated"] == 0 and concat["documents_split"] >= long_docs
    assert concat["sequences"] == -(-int(lengths.sum()) // 32)


def test_plans_are_deterministic():
    rng = np.random.default_rng(3)
    lengths = random_lengths(rng, 2_000, 128)
    for strategy in STRATEGIES:
        a, b = plan(lengths, 128, strategy), plan(lengths.copy(), 128, strategy)
        for name in ("piece_doc", "piece_start", "piece_end", "seq_offsets"):
            x, y = getattr(a, name), getattr(b, name)
            assert x.dtype == np.int64 and np.array_equal(x, y)


def test_empty_input():
    for strategy in STRATEGIES:
        p = plan(np.array([], dtype=np.int64), 8, strategy)
        assert p.sequences == 0 and p.stats(np.array([], dtype=np.int64))["utilization"] == 0.0
        out, cu = materialize(p, lambda d: pytest.fail("no document to read"), 0, np.uint16)
        assert out.shape == (0, 8) and cu == []


def test_materialize_reads_each_document_once_and_checks_it():
    lengths = np.array([5, 30, 0, 12])
    docs = encoded(lengths)
    calls = []

    def tokens_of(d):
        calls.append(d)
        return docs[d]

    materialize(plan(lengths, 8, "best_fit"), tokens_of, PAD, np.int64)
    assert calls == [0, 1, 3]
    p = plan(lengths, 8, "concat")
    with pytest.raises(ConfigError, match=r"tokens_of\(1\) returned shape \(29,\), but the plan places 30"):
        materialize(p, lambda d: docs[d][:-1] if d == 1 else docs[d], PAD, np.int64)
    with pytest.raises(ConfigError, match=r"token ids in \[1000000, 1000029\].*do not fit uint16"):
        materialize(p, docs.__getitem__, 0, np.uint16)
    with pytest.raises(ConfigError, match=r"pad_id=-1 is not allowed: must be a whole number in \[0, 65535\]"):
        materialize(p, docs.__getitem__, -1, np.uint16)
    # pad reads the whole document but places only seq_len of it
    out, _ = materialize(plan(lengths, 8, "pad"), docs.__getitem__, PAD, np.int64)
    assert out[1].tolist() == (POS + np.arange(8)).tolist()


def test_bad_config_names_the_value():
    with pytest.raises(ConfigError, match=r"packing.strategy='foo' is not allowed: must be one of pad, concat, best_fit"):
        plan(np.array([3]), 8, "foo")
    for bad in (1, 0, -4, 2.5, True, "2048"):
        with pytest.raises(ConfigError, match=rf"packing.seq_len={bad!r} is not allowed: must be a whole number >= 2"):
            plan(np.array([3]), bad, "pad")
    with pytest.raises(ConfigError, match=r"lengths\[1\]=-2 is not allowed"):
        plan(np.array([3, -2]), 8, "concat")
    with pytest.raises(ConfigError, match="lengths of dtype float64"):
        plan(np.array([3.0]), 8, "concat")
    with pytest.raises(ConfigError, match="lengths has 2 documents, but this plan was made for 1"):
        plan(np.array([3]), 8, "concat").stats(np.array([3, 4]))


class _CountingWords(list):
    reads = 0

    def __getitem__(self, i):
        _CountingWords.reads += 1
        return super().__getitem__(i)


@pytest.mark.parametrize("seq_len, depth", [(2048, 2), (1 << 16, 3)])
def test_best_fit_does_log_seq_len_work_per_piece(monkeypatch, seq_len, depth):
    # The free-room search reads at most 2 words per tree level per lookup, 1 per level per
    # add/discard: <= 4 * depth word reads per piece, whatever the number of open sequences
    # (a scan over open sequences would read thousands per piece here).
    class CountingRooms(lab.tokens.pack._Rooms):
        def __init__(self, size):
            super().__init__(size)
            assert len(self.levels) == depth
            self.levels = [_CountingWords(w) for w in self.levels]

    monkeypatch.setattr(lab.tokens.pack, "_Rooms", CountingRooms)
    rng = np.random.default_rng(4)
    lengths = np.maximum(1, rng.lognormal(np.log(seq_len / 2) - 0.5, 1.0, 20_000).astype(np.int64))
    _CountingWords.reads = 0
    p = plan(lengths, seq_len, "best_fit")
    assert p.sequences > 5_000
    assert 0 < _CountingWords.reads <= 4 * depth * len(p.piece_doc)


def test_best_fit_plans_200k_documents():
    rng = np.random.default_rng(5)
    lengths = np.maximum(1, rng.lognormal(np.log(1000) - 0.5, 1.0, 200_000).astype(np.int64))
    p = plan(lengths, 2048, "best_fit")
    fill = np.bincount(p.piece_seq, weights=p.piece_len, minlength=p.sequences)
    assert fill.max() <= 2048 and fill.sum() == lengths.sum()
    st = p.stats(lengths)
    assert st["documents_split"] == int((lengths > 2048).sum()) and st["utilization"] > 0.99


def test_module_doctests():
    assert doctest.testmod(lab.tokens.pack).failed == 0


def test_best_fit_shards_are_not_a_length_curriculum():
    # in the order sequences are opened the first hold one long document each and the last many short
    # ones; with a seed (as materialized) position and length are uncorrelated, the packing the same
    rng = np.random.default_rng(3)
    lengths = np.minimum(rng.lognormal(5.5, 1.0, 5000).astype(np.int64) + 1, 6000)

    def first_length_rank_corr(p):
        first = np.array([p.pieces(s)[0][2] - p.pieces(s)[0][1] for s in range(p.sequences)], dtype=float)
        pos = np.arange(p.sequences, dtype=float)
        r = np.argsort(np.argsort(first)).astype(float)
        return np.corrcoef(pos, r)[0, 1]

    opened, shuffled = plan(lengths, 2048, "best_fit"), plan(lengths, 2048, "best_fit", seed=0)
    assert first_length_rank_corr(opened) < -0.8
    assert abs(first_length_rank_corr(shuffled)) < 0.1
    assert sorted(map(tuple, (map(tuple, shuffled.pieces(s)) for s in range(shuffled.sequences)))) == \
        sorted(map(tuple, (map(tuple, opened.pieces(s)) for s in range(opened.sequences))))
    assert shuffled.stats(lengths) == opened.stats(lengths)
    again = plan(lengths, 2048, "best_fit", seed=0)
    assert (again.piece_doc == shuffled.piece_doc).all() and (again.piece_start == shuffled.piece_start).all()
