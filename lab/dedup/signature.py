"""signature: one document's MinHash signature, computed without per-shingle Python.

- ``normalize``: NFKD with accents stripped, lowercased, digits -> ``0``, punctuation -> space,
  whitespace collapsed.
- Words (``shingle_text``): the normalized text split at spaces; for Chinese, Japanese, Thai, Lao, Khmer
  and Burmese, the document's word split (``lab.text.segment.document_words``), each word normalized.
- Shingles: every run of ``ngram`` consecutive words (fewer words: one shingle; none: no shingle). Each
  shingle's 32-bit hash comes from a 64-bit polynomial hash of its UTF-8 bytes, by numpy prefix sums.
- The signature applies datasketch's ``affine32`` permutations and keeps the minimum per permutation:
  equal to ``datasketch.MinHash`` on the same shingles, value for value (a test holds them equal).
- ``bands`` x ``rows`` = ``num_perm``: band ``j`` hashes values ``j*rows .. (j+1)*rows-1``.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from typing import Protocol

import numpy as np

_MARKS = re.compile(r"[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]+")
_DIGITS = re.compile(r"\d")
_PUNCT = re.compile(r"[^\w\s]|_")
# ASCII: digits -> 0, everything neither alphanumeric nor whitespace -> space (what the regexes do)
_ASCII = str.maketrans({chr(c): ("0" if chr(c).isdigit() else " ") for c in range(128)
                        if not (chr(c).isalpha() or chr(c).isspace())})
_P = np.uint64(0x100000001B3)  # odd multiplier of the polynomial hash (FNV-1a 64-bit prime)
_MAX = np.uint32(0xFFFFFFFF)


class SignatureParams(Protocol):
    """What a signature depends on (the near_dedup stage's config has these)."""

    ngram: int
    seed: int

    @property
    def num_perm(self) -> int: ...


def normalize(text: str) -> str:
    """
    >>> normalize("Crème brûlée: 2 Eggs, 100g_sugar!")
    'creme brulee 0 eggs 000g sugar'
    """
    if text.isascii():  # the common case, same result: one table lookup per character
        return " ".join(text.lower().translate(_ASCII).split())
    t = _MARKS.sub("", unicodedata.normalize("NFKD", text)).lower()
    return " ".join(t.translate(_UNICODE).split())


class _Table(dict):
    """``str.translate``'s table for any text: what ``_DIGITS`` then ``_PUNCT`` do to a character (a
    Unicode digit -> 0; neither a word character nor whitespace, or ``_`` -> space), worked out the
    first time the character is seen (one pass in C instead of two regex passes)."""

    def __missing__(self, code: int) -> str:
        ch = chr(code)
        out = "0" if _DIGITS.match(ch) else " " if _PUNCT.match(ch) else ch
        self[code] = out
        return out


_UNICODE = _Table(_ASCII)


@lru_cache(maxsize=4)
def _powers(n: int) -> tuple[np.ndarray, np.ndarray]:
    """P^i and P^-i mod 2^64 for i < n (P is odd, so it has an inverse mod 2^64)."""
    inv = pow(int(_P), -1, 1 << 64)
    with np.errstate(over="ignore"):
        p = np.full(n, _P, dtype=np.uint64)
        p[0] = 1
        q = np.full(n, np.uint64(inv), dtype=np.uint64)
        q[0] = 1
        return np.cumprod(p, dtype=np.uint64), np.cumprod(q, dtype=np.uint64)


def _table(n: int) -> tuple[np.ndarray, np.ndarray]:
    size = 1 << max(16, (n - 1).bit_length())
    return _powers(size)


def shingle_text(text: str) -> str:
    """The normalized text whose space-separated words are shingled: ``normalize(text)`` for a
    language written with spaces; for an unspaced script (``segment.UNSPACED``) the document's words
    (``segment.document_words``) joined by spaces, then normalized.

    >>> shingle_text("The Cat, the hat.")
    'the cat the hat'
    >>> shingle_text("我们今天去北京大学参观。我们明天去上海。")
    '我们 今天 去 北京 大学 参观 我们 明天 去 上海'
    """
    from lab.text import langid, segment

    lang = langid.detect(text)[0]
    if lang not in segment.UNSPACED:
        return normalize(text)
    return normalize(" ".join(segment.words(text, lang)))


def shingle_hash(shingle: bytes) -> int:
    """The 32-bit hash of one shingle's UTF-8 bytes (the scalar reference of ``shingle_hashes``)."""
    h = 0
    p = 1
    for c in shingle:
        h = (h + c * p) % (1 << 64)
        p = (p * int(_P)) % (1 << 64)
    return h >> 32


def shingles(normalized: str, ngram: int) -> list[bytes]:
    """The shingles of a normalized text as bytes (the reference path; signatures use ``shingle_hashes``)."""
    words = normalized.split(" ") if normalized else []
    if not words:
        return []
    if len(words) <= ngram:
        return [" ".join(words).encode()]
    return [" ".join(words[i:i + ngram]).encode() for i in range(len(words) - ngram + 1)]


def ngram_hashes(normalized: str, ngram: int, *, whole_if_short: bool = True) -> np.ndarray:
    """uint64 polynomial hashes of the word ``ngram``-grams of a normalized text (single spaces), one per
    position, in order. A text with fewer words is one n-gram of all of them (``whole_if_short``) or none.

    >>> h = ngram_hashes("a b c a b", 2)
    >>> h.size, bool(h[0] == h[3]), ngram_hashes("a b", 3, whole_if_short=False).size
    (4, True, 0)
    """
    if not normalized:
        return np.zeros(0, dtype=np.uint64)
    b = np.frombuffer(normalized.encode("utf-8", "surrogatepass"), dtype=np.uint8)
    n = b.size
    spaces = np.flatnonzero(b == 32)
    if spaces.size + 1 < ngram and not whole_if_short:
        return np.zeros(0, dtype=np.uint64)
    pw, inv = _table(n + 1)
    starts = np.concatenate(([0], spaces + 1))
    ends = np.concatenate((spaces, [n]))
    with np.errstate(over="ignore"):
        prefix = np.zeros(n + 1, dtype=np.uint64)
        np.cumsum(b.astype(np.uint64) * pw[:n], out=prefix[1:])
        if starts.size <= ngram:
            s, e = starts[:1], ends[-1:]
        else:
            s, e = starts[: starts.size - ngram + 1], ends[ngram - 1:]
        return (prefix[e] - prefix[s]) * inv[s]


def shingle_hashes(normalized: str, ngram: int) -> np.ndarray:
    """uint32 hashes of every shingle of a normalized text (single spaces), duplicates removed."""
    return np.unique((ngram_hashes(normalized, ngram) >> np.uint64(32)).astype(np.uint32))


@lru_cache(maxsize=8)
def permutations(num_perm: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """datasketch's affine32 permutation parameters ``(a, b)`` for ``num_perm`` and ``seed``: its draws
    (``MinHash._init_permutations``), made here because importing datasketch costs each worker process
    0.7 s; tests/test_near_dedup.py holds them equal to ``MinHash(scheme="affine32").permutations``."""
    gen = np.random.RandomState(seed)
    a = gen.randint(0, 1 << 31, num_perm, dtype=np.uint32) * np.uint32(2) + np.uint32(1)  # odd: a bijection
    b = gen.randint(0, 1 << 32, num_perm, dtype=np.uint32)
    return a, b


def _fmix32(h: np.ndarray) -> np.ndarray:
    h = h ^ (h >> np.uint32(16))
    h = h * np.uint32(0x85EBCA6B)
    h = h ^ (h >> np.uint32(13))
    h = h * np.uint32(0xC2B2AE35)
    return h ^ (h >> np.uint32(16))


_CHUNK = 1024  # shingles per block: the (block x num_perm) matrix stays in cache


def minhash(hashes: np.ndarray, num_perm: int, seed: int) -> np.ndarray:
    """uint32[num_perm]: per permutation the minimum over the shingle hashes (all 0xFFFFFFFF if none)."""
    a, b = permutations(num_perm, seed)
    out = np.full(num_perm, _MAX, dtype=np.uint32)
    if hashes.size == 0:
        return out
    mixed = _fmix32(hashes.astype(np.uint32, copy=False))
    block = np.empty((min(_CHUNK, mixed.size), num_perm), dtype=np.uint32)
    for i in range(0, mixed.size, _CHUNK):
        m = mixed[i:i + _CHUNK]
        v = block[: m.size]
        np.multiply(m[:, None], a[None, :], out=v)
        v += b
        np.minimum(out, v.min(axis=0), out=out)
    return out


def signature(text: str, cfg: SignatureParams) -> tuple[np.ndarray, np.ndarray]:
    """(signature uint32[num_perm], distinct shingle hashes uint32[]) of one document's text."""
    h = shingle_hashes(shingle_text(text), cfg.ngram)
    return minhash(h, cfg.num_perm, cfg.seed), h


def band_hashes(signatures: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """uint64[n, bands]: a 64-bit hash of each band's ``rows`` values (equal bands, equal hashes)."""
    sig = np.ascontiguousarray(signatures, dtype=np.uint32).reshape(len(signatures), bands, rows).astype(np.uint64)
    h = np.full(sig.shape[:2], np.uint64(0xCBF29CE484222325), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for r in range(rows):
            h = (h ^ sig[:, :, r]) * np.uint64(0x100000001B3)
            h ^= h >> np.uint64(29)
    return h
