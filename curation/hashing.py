"""Small hashing pieces shared by the kernels (numpy only: the loader imports this too)."""

from __future__ import annotations

import numpy as np

U64 = np.uint64


def mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser on a uint64 array, in place: a bijection in which every output bit
    depends on every input bit (wrap-around is the modulus)."""
    with np.errstate(over="ignore"):
        x ^= x >> U64(30)
        x *= U64(0xBF58476D1CE4E5B9)
        x ^= x >> U64(27)
        x *= U64(0x94D049BB133111EB)
        x ^= x >> U64(31)
    return x
