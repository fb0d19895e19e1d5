"""One seed per random layer, derived from the run's seed and the layer's name.

Keras' random layers each start their own ``SeedGenerator`` from the integer
seed they are given. Two layers given the same integer draw the same uniforms
at the same step: with one seed for all, a flip would decide the sign of every
rotation and half the augmentation's support would never be produced. Deriving
each layer's seed from the run's seed and the layer's name keeps runs
reproducible and the layers independent.
"""
from __future__ import annotations

import zlib


def layer_seed(seed: int | None, name: str) -> int | None:
    """A seed for the layer ``name`` of a run seeded with ``seed`` (None stays None)."""
    if seed is None:
        return None
    return (int(seed) * 1_000_003 + zlib.crc32(name.encode())) % (2**31 - 1)
