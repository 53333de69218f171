"""near_dedup: MinHash signatures of word 5-gram shingles; one document kept per near-duplicate cluster.

Signal side (here, one document at a time):

- ``normalize``: NFKD with combining marks removed (accents stripped), lowercased, digits -> ``0``,
  punctuation -> space, whitespace collapsed.
- Shingles: every run of ``ngram`` consecutive words of the normalized text (a document with
  fewer words is one shingle; an empty one has none and never joins a cluster).
- Each shingle's 32-bit hash is the top half of a 64-bit polynomial hash of its UTF-8 bytes,
  computed for all shingles of a document at once from prefix sums (numpy, no per-shingle Python).
- The signature applies datasketch's ``affine32`` permutations (MurmurHash3 finalizer, then
  ``a*h + b`` mod 2^32 with datasketch's seeded ``a, b``) to those hashes and keeps the minimum per
  permutation. It equals ``datasketch.MinHash(num_perm, seed, hashfunc=shingle_hash).update_batch``
  on the same shingles value for value (a test holds them equal), so ``LeanMinHash`` reads it.
- ``bands`` x ``rows`` = ``num_perm``: band ``j`` hashes values ``j*rows .. (j+1)*rows-1``; two
  documents become a candidate pair when any band is equal (LSH; ``s_curve``).

Decision side (``lab.dedup`` builds candidate edges and clusters; ``lab.query`` applies the rule):
a near-duplicate group is a connected component of the candidate edges with Jaccard >= ``threshold``
among the documents that passed every earlier stage; one member per group is kept, chosen by
``keep``. Documents with equal ``content_hash`` share one node (their signatures are equal).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pyarrow as pa

from lab.rules import Rule
from lab.stages.fields import knob

NAME = "near_dedup"
VERSION = 1  # bump when signals() (or what it reads: word lists, models) gives other values
SOURCE = "MinHash LSH (FineWeb/datatrove: word 5-grams, 14 bands x 8 rows)"
GRID = tuple(round(0.50 + 0.05 * i, 2) for i in range(10))  # thresholds with precomputed clusters
KEEP = ("lowest_id", "longest", "best_signal")

_MARKS = re.compile(r"[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]+")
_DIGITS = re.compile(r"\d")
_PUNCT = re.compile(r"[^\w\s]|_")
# ASCII: digits -> 0, everything neither alphanumeric nor whitespace -> space (what the regexes do)
_ASCII = str.maketrans({chr(c): ("0" if chr(c).isdigit() else " ") for c in range(128)
                        if not (chr(c).isalpha() or chr(c).isspace())})
_P = np.uint64(0x100000001B3)  # odd multiplier of the polynomial hash (FNV-1a 64-bit prime)
_MAX = np.uint32(0xFFFFFFFF)


@dataclass(frozen=True)
class Config:
    enabled: bool = knob(True, unit="on/off",
                         help="On: a kept document is the one member kept of its group of near-duplicate survivors; "
                              "off: near-duplicates are all kept.")
    threshold: float = knob(0.8, unit="Jaccard",
                            help="Survivors linked by a word 5-gram Jaccard at or above this form a group, of which "
                                 "one member is kept.",
                            source="MinHash LSH candidates as FineWeb/datatrove make them; the 0.8 cut on their "
                                   "Jaccard is corpus-lab's")
    keep: str = knob("lowest_id", unit="policy",
                     help="The member kept of each near-duplicate group: the lowest doc_id, the longest (bytes), or "
                          "the highest keep_signal.",
                     source="corpus-lab (lowest_id: deterministic)")
    keep_signal: str = "fw_line_punct_ratio"  # best_signal: the numeric signal whose highest value wins
    # signature parameters: changing any of these recomputes signatures (they are part of the signals hash)
    ngram: int = 5  # words per shingle
    bands: int = 14  # LSH bands
    rows: int = 8  # values per band; num_perm = bands * rows
    seed: int = 1  # seed of datasketch's permutations
    # store shingle sets (about half the size of the text) and give every candidate pair its exact
    # Jaccard; false: the signature's estimate (saves the space, costs precision near the threshold)
    exact_jaccard: bool = True
    max_group_pairs: int = 100  # a band bucket with more members links them in a chain (all pairs otherwise)
    shuffle_buckets: int = 0  # LSH shuffle: reduce tasks; 0 = one per partition (memory per task bounded)

    def __post_init__(self) -> None:
        from lab.config import check

        check("threshold", self.threshold, any(abs(self.threshold - g) < 1e-9 for g in GRID),
              "one of the precomputed grid " + ", ".join(f"{g:.2f}" for g in GRID))
        check("keep", self.keep, self.keep in KEEP, "one of " + ", ".join(KEEP))
        if self.keep == "best_signal":
            from lab.io.schema import numeric_signals

            check("keep_signal", self.keep_signal, self.keep_signal in numeric_signals(),
                  "a numeric signal: " + ", ".join(numeric_signals()))
        check("ngram", self.ngram, 1 <= self.ngram <= 32, "a whole number of words in 1..32")
        check("bands", self.bands, 1 <= self.bands <= 255, "1..255")
        check("rows", self.rows, 1 <= self.rows <= 64, "1..64")
        check("max_group_pairs", self.max_group_pairs, self.max_group_pairs >= 2, ">= 2")
        check("shuffle_buckets", self.shuffle_buckets, 0 <= self.shuffle_buckets <= 65535,
              "0 (one per partition) or a count in 1..65535")

    @property
    def num_perm(self) -> int:
        return self.bands * self.rows

    def signature_params(self) -> dict:
        """What signatures and the shuffle's files depend on (part of the run's signals hash)."""
        return {"ngram": self.ngram, "bands": self.bands, "rows": self.rows, "seed": self.seed,
                "exact_jaccard": self.exact_jaccard, "shuffle_buckets": self.shuffle_buckets}


def signal_params(cfg: Config) -> dict:
    """What the signals and the signatures depend on besides ``VERSION``."""
    return cfg.signature_params()


SIGNALS = {"nd_shingles": pa.int32()}  # distinct shingles; 0 = no words (never a near-duplicate)


def rules(cfg: Config) -> list[Rule]:
    # value: (threshold, keep, keep_signal); lab.query and lab.select.python_funnel decide it over
    # the surviving documents' candidate edges
    return [Rule(NAME, "content_hash", "first_in_cluster", (cfg.threshold, cfg.keep, cfg.keep_signal),
                 "near_duplicate")]


def normalize(text: str) -> str:
    """
    >>> normalize("Crème brûlée: 2 Eggs, 100g_sugar!")
    'creme brulee 0 eggs 000g sugar'
    """
    if text.isascii():  # the common case, same result: one table lookup per character
        return " ".join(text.lower().translate(_ASCII).split())
    t = _MARKS.sub("", unicodedata.normalize("NFKD", text)).lower()
    return " ".join(_PUNCT.sub(" ", _DIGITS.sub("0", t)).split())


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


def shingle_hashes(normalized: str, ngram: int) -> np.ndarray:
    """uint32 hashes of every shingle of a normalized text (single spaces), duplicates removed."""
    if not normalized:
        return np.zeros(0, dtype=np.uint32)
    b = np.frombuffer(normalized.encode("utf-8", "surrogatepass"), dtype=np.uint8)
    n = b.size
    pw, inv = _table(n + 1)
    spaces = np.flatnonzero(b == 32)
    starts = np.concatenate(([0], spaces + 1))
    ends = np.concatenate((spaces, [n]))
    with np.errstate(over="ignore"):
        prefix = np.zeros(n + 1, dtype=np.uint64)
        np.cumsum(b.astype(np.uint64) * pw[:n], out=prefix[1:])
        if starts.size <= ngram:
            s, e = starts[:1], ends[-1:]
        else:
            s, e = starts[: starts.size - ngram + 1], ends[ngram - 1:]
        h = (prefix[e] - prefix[s]) * inv[s]
    return np.unique((h >> np.uint64(32)).astype(np.uint32))


@lru_cache(maxsize=8)
def permutations(num_perm: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """datasketch's affine32 permutation parameters ``(a, b)`` for ``num_perm`` and ``seed``."""
    from datasketch import MinHash

    a, b = MinHash(num_perm=num_perm, seed=seed, scheme="affine32").permutations
    return np.asarray(a, dtype=np.uint32), np.asarray(b, dtype=np.uint32)


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


def signature(text: str, cfg: Config) -> tuple[np.ndarray, np.ndarray]:
    """(signature uint32[num_perm], distinct shingle hashes uint32[]) of one document's text."""
    h = shingle_hashes(normalize(text), cfg.ngram)
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


def s_curve(s: np.ndarray | float, bands: int, rows: int) -> np.ndarray | float:
    """P(two documents of Jaccard s become a candidate pair) = 1 - (1 - s^rows)^bands."""
    return 1.0 - (1.0 - np.power(s, rows)) ** bands
