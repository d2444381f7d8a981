"""A seeded permutation of [0, n) whose slices are computed without the whole of it.

Sample-level shuffles over a full-size dataset are large (BERT: 500 files x 313,532 samples
= 156.8 M ids, 1.25 GB as int64, plus temporaries, on every rank, every epoch). A rank only
needs its own slice of the global order, so the order is a keyed bijection: a 4-round Feistel
network on the smallest even-bit domain holding n, with cycle walking to stay below n. Any
slice of positions maps to sample ids in O(slice) time and memory, the same on every rank.
"""

from __future__ import annotations

import numpy as np

ROUNDS = 4
_MUL = np.uint64(0x9E3779B97F4A7C15)  # odd 64-bit constant (golden ratio) for mixing


class Permutation:
    """``perm[positions]`` for a fixed seed: a bijection of [0, n)."""

    def __init__(self, n: int, seed: int | list[int]) -> None:
        self.n = n
        bits = max(2, int(n - 1).bit_length())
        self._half = (bits + 1) // 2
        self._mask = np.uint64((1 << self._half) - 1)
        self._keys = np.random.default_rng(seed).integers(0, 2**63, ROUNDS, dtype=np.uint64)

    def _round(self, x: np.ndarray, key: np.uint64) -> np.ndarray:
        mixed = (x ^ key) * _MUL
        mixed ^= mixed >> np.uint64(29)
        mixed *= _MUL
        return (mixed >> np.uint64(64 - self._half)) & self._mask

    def _encrypt(self, x: np.ndarray) -> np.ndarray:
        left, right = x >> np.uint64(self._half), x & self._mask
        for key in self._keys:
            left, right = right, left ^ self._round(right, key)
        return (left << np.uint64(self._half)) | right

    def __getitem__(self, positions: np.ndarray) -> np.ndarray:
        """The permuted values at ``positions`` (each in [0, n)), as int64."""
        out = self._encrypt(np.asarray(positions, dtype=np.uint64))
        limit = np.uint64(self.n)
        outside = np.flatnonzero(out >= limit)
        while outside.size:  # cycle walking: the domain is at most 4n, so this ends fast
            out[outside] = self._encrypt(out[outside])
            outside = outside[out[outside] >= limit]
        return out.astype(np.int64)

    def slice(self, start: int, stop: int) -> np.ndarray:
        """``perm[start:stop]``."""
        return self[np.arange(start, stop, dtype=np.uint64)]
