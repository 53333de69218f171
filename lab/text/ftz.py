"""ftz: fastText's supervised prediction for a quantized model (``.ftz``), in numpy, bit for bit.

The language stage classifies every document with ``lid.176.ftz``. fastText's own ``predict`` spends
most of its time building a string per character n-gram of every word; this module reads the same
model file and computes the same thing from whole arrays. A word's input rows are computed once per
distinct word (all the new words of a text at once) and kept; the hidden vector and the hierarchical
softmax follow fastText's float operations step by step, rounded to float32 where fastText's are. The
labels and probabilities equal fastText's ``predict(text, k=1)`` exactly (``tests/text/test_ftz.py``).
Only what lid.176 uses is supported (a quantized input matrix, character n-grams, hierarchical softmax);
``Model`` refuses any other model (``UnsupportedModel``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import math
import struct
from itertools import compress, repeat
from operator import is_
from pathlib import Path

import numpy as np

_MAGIC = 793712314
_VERSION = 12
_LOSS_HS = 1
_MODEL_SUP = 3
_EOS = b"</s>"
_LABEL = b"__label__"
_FNV_OFFSET = 2166136261
_FNV_PRIME = 16777619
_PRUNED = 0xFFFF  # an n-gram bucket the model dropped
_CACHE_WORDS = 200_000
_BATCH_WORDS = 1024  # new words whose n-grams are hashed together (fastest from ~500 to ~2,000 here)  # distinct words whose input rows are kept (~40 MB); cleared when full


class UnsupportedModel(ValueError):
    pass


def _libm_expf():
    path = ctypes.util.find_library("m") or "libm.so.6"
    fn = ctypes.CDLL(path).expf
    fn.restype = ctypes.c_float
    fn.argtypes = [ctypes.c_float]
    return fn


_expf = _libm_expf()
_f32 = struct.Struct("f")
_f32x2 = struct.Struct("ff")


def _r32(x: float) -> float:
    """``x`` rounded to the nearest float32 (as C's conversion of a double to float)."""
    return _f32.unpack(_f32.pack(x))[0]


def _r32x2(x: float, y: float) -> tuple[float, float]:
    return _f32x2.unpack(_f32x2.pack(x, y))


class _Reader:
    def __init__(self, data: bytes):
        self.data, self.at = data, 0

    def take(self, fmt: str):
        out = struct.unpack_from("<" + fmt, self.data, self.at)
        self.at += struct.calcsize("<" + fmt)
        return out

    def array(self, dtype: str, count: int) -> np.ndarray:
        out = np.frombuffer(self.data, dtype=dtype, count=count, offset=self.at)
        self.at += out.nbytes
        return out

    def cstring(self) -> bytes:
        end = self.data.index(b"\0", self.at)
        out = self.data[self.at:end]
        self.at = end + 1
        return out


class Model:
    """A supervised fastText model (quantized input, hierarchical softmax), ready to predict."""

    def __init__(self, path: str | Path):
        r = _Reader(Path(path).read_bytes())
        magic, version = r.take("ii")
        if magic != _MAGIC or version != _VERSION:
            raise UnsupportedModel(f"{path}: not a fastText model of format {_VERSION} (magic {magic}, "
                                   f"version {version})")
        (dim, _ws, _epoch, _min_count, _neg, word_ngrams, loss, model, bucket, minn, maxn,
         _lr_rate) = r.take("12i")
        r.take("d")
        size, nwords, nlabels = r.take("3i")
        _ntokens, prune_size = r.take("2q")
        words: dict[bytes, int] = {}
        counts = []
        for i in range(size):
            word = r.cstring()
            count, kind = r.take("qb")
            words[word] = i
            if kind == 1:
                counts.append(count)
        pairs = r.array("<i4", 2 * max(prune_size, 0)).reshape(-1, 2)
        (quant_input,) = r.take("?")
        if not quant_input:
            raise UnsupportedModel(f"{path}: the input matrix is not quantized (a .bin model); only .ftz is supported")
        (qnorm,) = r.take("?")
        rows, cols = r.take("2q")
        (codesize,) = r.take("i")
        codes = r.array("u1", codesize)
        pq_dim, nsubq, dsub, lastdsub = r.take("4i")
        centroids = r.array("<f4", pq_dim * 256)
        norms = np.ones(rows, dtype=np.float32)
        if qnorm:
            norm_codes = r.array("u1", rows)
            r.take("4i")
            norms = r.array("<f4", 256)[norm_codes]
        (qout,) = r.take("?")
        problems = [name for name, bad in (
            ("model is not supervised", model != _MODEL_SUP), ("loss is not hierarchical softmax", loss != _LOSS_HS),
            ("word n-grams", word_ngrams > 1), ("no character n-grams", maxn <= 0 or minn <= 0),
            ("quantized output matrix", qout), ("unpruned n-gram buckets", prune_size <= 0),
            ("uneven subquantizers", dsub * nsubq != dim or lastdsub != dsub or cols != dim),
        ) if bad]
        if problems:
            raise UnsupportedModel(f"{path}: {', '.join(problems)}: not supported by lab.text.ftz")
        out_rows, out_cols = r.take("2q")
        output = r.array("<f4", out_rows * out_cols).reshape(out_rows, out_cols)
        if r.at != len(r.data):
            raise UnsupportedModel(f"{path}: {len(r.data) - r.at} bytes after the output matrix")

        # Row r of the input matrix as fastText adds it: float32(norm[r] * centroid[j]).
        cents = centroids.reshape(nsubq, 256, dsub)
        deq = cents[np.arange(nsubq)[None, :], codes.reshape(rows, nsubq)].reshape(rows, dim)
        self._rows = (norms[:, None] * deq).astype(np.float32)
        if len(pairs) >= _PRUNED:
            raise UnsupportedModel(f"{path}: {len(pairs)} n-gram rows; lab.text.ftz reads at most {_PRUNED - 1}")
        self._prune = np.full(bucket, _PRUNED, dtype=np.uint16)  # n-gram bucket -> its row after the words
        self._prune[pairs[:, 0]] = pairs[:, 1]  # (a 4 MB table: uint16 keeps more of it in the CPU's caches)
        self._words, self._nwords = words, nwords
        self._labels = [w for w, i in sorted(words.items(), key=lambda kv: kv[1])][nwords:]
        self._minn, self._maxn, self._bucket = minn, maxn, bucket
        self._output_t = np.ascontiguousarray(output[: nlabels - 1].T)  # internal node n: output row n - nlabels
        self._tree = _huffman(counts)
        self._min_score = _r32(math.log(0.0 + 1e-5))  # std_log(threshold = 0)
        self._eos = struct.pack("<i", words[_EOS])
        self._inputs: dict[bytes, bytes] = {_EOS: self._eos}  # word -> its input rows (int32 bytes)

    def forget(self) -> None:
        """Drop the words' input rows kept so far (the next texts compute them again, as a new process would)."""
        self._inputs = {_EOS: self._eos}

    # -- input rows ------------------------------------------------------------------------------
    def _compute(self, tokens: list[bytes]) -> dict[bytes, bytes]:
        """The input rows (int32 bytes) of each of these distinct words: its id if the model knows it,
        then its kept character n-grams, by start then length (fastText's ``computeSubwords``)."""
        out: dict[bytes, bytes] = {}
        ascii_ = [t for t in tokens if t.isascii()]
        other = [t for t in tokens if not t.isascii()]
        for words, grams in ((ascii_, self._grams_ascii), (other, self._grams_utf8)):
            for at in range(0, len(words), _BATCH_WORDS):  # arrays that stay in the CPU's caches
                out.update(self._rows_of_words(words[at: at + _BATCH_WORDS], grams))
        return out

    def _rows_of_words(self, group: list[bytes], grams) -> dict[bytes, bytes]:
        framed = [b"<" + t + b">" for t in group]
        lens = np.fromiter(map(len, framed), dtype=np.intp, count=len(framed))
        wids = np.fromiter(map(self._words.get, group, repeat(-1)), dtype=np.int64, count=len(group))
        ids, owner = grams(np.frombuffer(b"".join(framed), dtype=np.uint8), lens, wids)
        ends = (4 * np.cumsum(np.bincount(owner, minlength=len(group)))).tolist()
        raw = ids.astype("<i4").tobytes()
        return dict(zip(group, map(raw.__getitem__, map(slice, [0] + ends[:-1], ends))))

    def _rows_of(self, hashes: np.ndarray, use: np.ndarray, wids: np.ndarray, word_of_start: np.ndarray,
                 first: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Input rows in fastText's order from, per character start: the FNV hashes of its n-grams
        (n = minn..maxn; ``use``: that n-gram exists and counts), the word's id before its first
        character's n-grams (``first``); with the word each row belongs to."""
        kept = self._prune[hashes % np.uint32(self._bucket)].astype(np.int32)
        table = np.empty((len(first), 1 + hashes.shape[1]), dtype=np.int32)
        table[:, 0] = np.where(first, wids[word_of_start], -1)
        table[:, 1:] = np.where(use & (kept != _PRUNED), kept + self._nwords, -1)
        flat = table.ravel()
        keep = flat >= 0
        return flat[keep], np.repeat(word_of_start, table.shape[1])[keep]

    def _grams_ascii(self, buf: np.ndarray, lens: np.ndarray, wids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Rows of framed ASCII words (one byte per character) and the word of each."""
        size, maxn = len(buf), self._maxn
        word_of_byte = np.repeat(np.arange(len(lens)), lens)
        left = np.cumsum(lens)[word_of_byte] - np.arange(size)  # characters from each one to its word's end
        first = left == lens[word_of_byte]
        b = np.zeros(size + maxn, dtype=np.uint32)  # the bytes, then zeros past the last word
        b[:size] = buf
        prime = np.uint32(_FNV_PRIME)
        minn = self._minn
        hashes = np.empty((size, maxn - minn + 1), dtype=np.uint32)  # of the n-grams n = minn..maxn
        h = np.full(size, _FNV_OFFSET, dtype=np.uint32)
        for n in range(1, maxn + 1):
            h = (h ^ b[n - 1: n - 1 + size]) * prime
            if n >= minn:
                hashes[:, n - minn] = h
        use = left[:, None] >= np.arange(minn, maxn + 1)
        if minn == 1:
            use[:, 0] &= (left > 1) & ~first  # no 1-gram of '<' or '>'
        return self._rows_of(hashes, use, wids, word_of_byte, first)

    def _grams_utf8(self, buf: np.ndarray, lens: np.ndarray, wids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The same for words with multi-byte characters (a character: its lead byte and continuations)."""
        maxn = self._maxn
        word_of_byte = np.repeat(np.arange(len(lens)), lens)
        starts = np.flatnonzero((buf & 0xC0) != 0x80)  # first byte of each character
        ends = np.append(starts[1:], len(buf))  # words are back to back: a word's end is the next one's start
        word_of_char = word_of_byte[starts]
        nchar = np.bincount(word_of_char, minlength=len(lens))
        char_pos = np.arange(len(starts)) - (np.cumsum(nchar) - nchar)[word_of_char]
        left = nchar[word_of_char] - char_pos  # characters from this one to its word's end
        signed = buf.astype(np.int8).astype(np.uint32)  # fastText hashes each byte as int8
        prime = np.uint32(_FNV_PRIME)
        minn = self._minn
        hashes = np.empty((len(starts), maxn - minn + 1), dtype=np.uint32)
        h = np.full(len(starts), _FNV_OFFSET, dtype=np.uint32)  # FNV-1a of the n-gram starting at each character
        last = len(starts) - 1
        for n in range(1, maxn + 1):
            alive = left >= n
            char = np.minimum(np.arange(len(starts)) + (n - 1), last)  # the n-gram's n-th character
            first_byte, stop = starts[char], ends[char]
            for b in range(4):  # its bytes (UTF-8: at most 4)
                step = alive & (first_byte + b < stop)
                if not step.any():
                    break
                h = np.where(step, (h ^ signed[np.minimum(first_byte + b, len(buf) - 1)]) * prime, h)
            if n >= minn:
                hashes[:, n - minn] = h
        use = left[:, None] >= np.arange(minn, maxn + 1)
        if minn == 1:
            use[:, 0] &= (left > 1) & (char_pos > 0)  # no 1-gram of '<' or '>'
        return self._rows_of(hashes, use, wids, word_of_char, char_pos == 0)

    def _tokens(self, text: str) -> list[bytes]:
        """The words fastText reads from one line of text, then its end-of-line word."""
        if "\n" in text:
            raise ValueError("fastText predicts one line of text at a time: remove the '\\n'")
        data = text.encode("utf-8")
        if b"\0" in data:
            data = data.replace(b"\0", b" ")
        tokens = data.split()  # fastText's separators: ASCII space, \t \n \v \f \r, and \0
        if _EOS in tokens:
            tokens = tokens[: tokens.index(_EOS)]  # fastText stops reading the line at "</s>"
        if _LABEL in data:
            tokens = [t for t in tokens if not t.startswith(_LABEL)]  # labels are not inputs
        tokens.append(_EOS)
        return tokens

    def input_ids(self, texts: list[str]) -> list[np.ndarray]:
        """The model's input rows of each line of text, in fastText's order; the rows of the words not
        seen before are computed for all the texts at once."""
        lines = [self._tokens(t) for t in texts]
        inputs = self._inputs
        parts = [list(map(inputs.get, tokens)) for tokens in lines]
        if any(None in p for p in parts):
            new = set()
            for tokens, p in zip(lines, parts):
                new.update(compress(tokens, map(is_, p, repeat(None))))
            computed = self._compute(list(new))
            if len(inputs) + len(computed) > _CACHE_WORDS:  # start over with these texts' words
                inputs = {t: r for tokens, p in zip(lines, parts) for t, r in zip(tokens, p) if r is not None}
                self._inputs = inputs
            inputs.update(computed)
            parts = [list(map(inputs.__getitem__, tokens)) for tokens in lines]
        return [np.frombuffer(b"".join(p), dtype="<i4") for p in parts]

    # -- prediction ------------------------------------------------------------------------------
    def hidden(self, ids: np.ndarray) -> np.ndarray:
        """The average of the input rows, summed in order in float32 as fastText sums them."""
        total = np.add.reduce(self._rows[ids], axis=0, dtype=np.float32)
        return total * np.float32(1.0 / len(ids))

    def predict(self, text: str) -> tuple[str, float] | None:
        """The most likely label of one line of text (no ``"\\n"``) and its probability: what fastText's
        ``predict(text, k=1)`` returns, to the bit (None where fastText returns no label: every label's
        probability under 1e-5, which a 176-label model cannot give)."""
        return self.predict_many([text])[0]

    def predict_many(self, texts: list[str]) -> list[tuple[str, float] | None]:
        """``predict`` of each text; the words seen for the first time are looked at once for all."""
        return [self._best(self.hidden(ids)) for ids in self.input_ids(texts)]

    def _best(self, hidden: np.ndarray) -> tuple[str, float] | None:
        """fastText's depth-first search of the label tree for the best label (k = 1, threshold 0)."""
        products = self._output_t * hidden[:, None]  # float32 products, one row per dimension
        dots = np.add.reduce(products, axis=0, dtype=np.float32).tolist()  # row after row, as fastText's dotRow
        left, right, nlabels = self._tree
        best, best_score = -1, -math.inf
        min_score = self._min_score
        stack = [(2 * nlabels - 2, 0.0)]
        while stack:
            node, score = stack.pop()
            if score < min_score or (best >= 0 and score < best_score):
                continue
            if node < nlabels:
                best, best_score = node, score  # a later leaf of equal score replaces the kept one
                continue
            f = _r32(1.0 / _r32(1.0 + _expf(-dots[node - nlabels])))
            log_left, log_right = _r32x2(math.log(_r32(1.0 - f) + 1e-5), math.log(f + 1e-5))
            go_left, go_right = _r32x2(score + log_left, score + log_right)
            stack.append((right[node], go_right))
            stack.append((left[node], go_left))
        if best < 0:
            return None
        return self._labels[best].decode(), _expf(best_score)


def _huffman(counts: list[int]) -> tuple[list[int], list[int], int]:
    """fastText's hierarchical softmax tree over labels of these counts (``buildTree``): children of
    each node; leaves are the labels 0..n-1, the root is node 2n-2."""
    n = len(counts)
    count = list(counts) + [10**15] * (n - 1)
    left = [-1] * (2 * n - 1)
    right = [-1] * (2 * n - 1)
    leaf, node = n - 1, n
    for i in range(n, 2 * n - 1):
        mini = []
        for _ in range(2):
            if leaf >= 0 and count[leaf] < count[node]:
                mini.append(leaf)
                leaf -= 1
            else:
                mini.append(node)
                node += 1
        left[i], right[i] = mini
        count[i] = count[mini[0]] + count[mini[1]]
    return left, right, n
