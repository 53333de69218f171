"""hashing: the seeded 64-bit mixes a run's deterministic choices are made from (never Python's ``hash()``).

splitmix64's finalizer (Steele, Lea and Flood 2014) on Python ints and on uint64 arrays, and ``keyed``: a
document id mixed with a seed and a salt, which orders the global shuffle, draws the validation and test
documents and a mixture's fractional epoch (each with its own salt, so the draws are independent).
"""

from __future__ import annotations

import numpy as np

GOLDEN = 0x9E3779B97F4A7C15  # 2**64 / the golden ratio, odd
_C1, _C2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
M64 = (1 << 64) - 1
_U1, _U2 = np.uint64(_C1), np.uint64(_C2)
_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)


def splitmix64(x: int) -> int:
    """splitmix64's finalizer on a Python int (mod 2**64).

    >>> splitmix64(0), splitmix64(1) != splitmix64(2)
    (0, True)
    """
    x &= M64
    x = ((x ^ (x >> 30)) * _C1) & M64
    x = ((x ^ (x >> 27)) * _C2) & M64
    return x ^ (x >> 31)


def splitmix64_array(x: np.ndarray) -> np.ndarray:
    """``splitmix64`` elementwise, in place, on a uint64 array (wrapping multiplication); returns ``x``.

    >>> splitmix64_array(np.array([0, 1], dtype=np.uint64)).tolist() == [splitmix64(0), splitmix64(1)]
    True
    """
    t = x >> _S30
    x ^= t
    x *= _U1
    np.right_shift(x, _S27, out=t)
    x ^= t
    x *= _U2
    np.right_shift(x, _S31, out=t)
    x ^= t
    return x


def keyed(x: np.ndarray, seed: int, salt: int) -> np.ndarray:
    """uint64 keys of int64 ``x``: splitmix64 of ``x`` xor a constant of ``seed`` and ``salt``, plus GOLDEN.

    >>> k = keyed(np.array([7, 8]), 0, 1); k.dtype.name, bool(k[0] != k[1])
    ('uint64', True)
    """
    with np.errstate(over="ignore"):
        z = x.astype(np.int64).view(np.uint64) ^ np.uint64((seed * GOLDEN + salt) % 2**64)
        z = z + np.uint64(GOLDEN)
    return splitmix64_array(z)
