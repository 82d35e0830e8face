"""Float32 arithmetic done exactly in rationals, for tests that pin the contract's roundings independently."""

from fractions import Fraction

import numpy as np


def fma32(a, b, c) -> np.float32:
    """a * b + c for float32 a, b, c, rounded once to float32 (to nearest, ties to even)."""
    exact = Fraction(float(np.float32(a))) * Fraction(float(np.float32(b))) + Fraction(float(np.float32(c)))
    near = np.float32(float(exact))
    candidates = [near, np.nextafter(near, np.float32(-np.inf)), np.nextafter(near, np.float32(np.inf))]
    distance = [abs(Fraction(float(v)) - exact) for v in candidates]
    best = min(distance)
    ties = [v for v, d in zip(candidates, distance) if d == best]
    return min(ties, key=lambda v: int(v.view(np.uint32)) & 1)  # even last bit on a tie
