"""Random regularisers of the ViT, each a Keras layer: dropout and stochastic depth;
and :class:`Configured`, the model's layers' shared ``get_config``."""
from __future__ import annotations

import sys

import keras
import numpy as np
from keras import layers, ops


class Configured:
    """A layer mixin: ``get_config`` is Keras's plus the attributes named in ``CONFIG``."""

    CONFIG: tuple[str, ...] = ()

    def get_config(self):
        return {**super().get_config(), **{k: getattr(self, k) for k in self.CONFIG}}


def keep_mask(shape, rate: float, seed_generator):
    """A boolean mask, True with probability 1 - ``rate``, for dropout.

    Random draws dominate dropout's cost on a CPU, so each 31-bit random
    integer decides two neighbouring elements: viewed as two int16 halves,
    the low one uniform over 2**16 values, the high one over 2**15, each
    compared with ``rate`` scaled to its range. The drop probability is
    ``rate`` rounded to a multiple of 2**-16 (even positions of the last
    axis) or 2**-15 (odd ones), capped just below 1; the elements stay
    independent. The last axis must have a static size.
    """
    shape = tuple(shape)
    last = shape[-1]
    if not isinstance(last, int):
        raise ValueError(f"keep_mask needs a static size for the last axis, got shape {shape}")
    half = (last + 1) // 2
    bits = keras.random.randint(shape[:-1] + (half,), 0, 2**31 - 1, dtype="int32",
                                seed=seed_generator)
    halves = ops.view(bits, "int16")  # (..., 2 * half), each draw's halves side by side
    cap = 2**15 - 1  # the largest int16
    low, high = min(round(rate * 2**16) - 2**15, cap), min(round(rate * 2**15), cap)
    pair = [low, high] if sys.byteorder == "little" else [high, low]
    keep = ops.greater_equal(halves, np.tile(np.array(pair, "int16"), half))
    return keep if 2 * half == last else keep[..., :last]


@keras.saving.register_keras_serializable(package="ablation")
class FastDropout(Configured, layers.Layer):
    """``keras.layers.Dropout`` with half the random draws (see :func:`keep_mask`),
    applied as one multiplication by a float mask (so the backward pass is one too)."""

    CONFIG = ("rate", "seed")

    def __init__(self, rate: float, seed: int | None = None, **kwargs):
        super().__init__(**kwargs)
        if not 0.0 <= float(rate) < 1.0:
            raise ValueError(f"dropout rate must be in [0, 1), got {rate!r}")
        self.rate = float(rate)
        self.seed = seed
        self.supports_masking = True
        # as keras.layers.Dropout: a generator (checkpointed state) only when it draws
        self.seed_generator = keras.random.SeedGenerator(seed) if self.rate > 0 else None
        # built now, as Keras's Dropout: left unbuilt in a block, it would make JAX's
        # predict_on_batch (the locality probe) run the model eagerly, op by op
        self.built = True

    def call(self, x, training=None):
        if not training or self.rate == 0.0:
            return x
        keep = keep_mask(ops.shape(x), self.rate, self.seed_generator)
        return x * ops.cast(ops.where(keep, 1.0 / (1.0 - self.rate), 0.0), x.dtype)

    def compute_output_shape(self, input_shape):
        return input_shape


@keras.saving.register_keras_serializable(package="ablation")
class DropPath(Configured, layers.Layer):
    """Stochastic depth (timm's ``DropPath``, the official code's): in training, each
    sample's branch output is zeroed with probability ``rate``, the rest scaled by
    1 / (1 - rate)."""

    CONFIG = ("rate", "seed")

    def __init__(self, rate: float = 0.0, seed: int | None = None, **kwargs):
        super().__init__(**kwargs)
        if not 0.0 <= float(rate) < 1.0:
            raise ValueError(f"drop path rate must be in [0, 1), got {rate!r}")
        self.rate = float(rate)
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)
        self.built = True  # nothing to build (see FastDropout)

    def call(self, x, training=None):
        if not training or self.rate == 0.0:
            return x
        keep = 1.0 - self.rate
        shape = (ops.shape(x)[0],) + (1,) * (len(x.shape) - 1)
        # in float32 whatever the compute dtype: in bfloat16 the draw and 1/keep are biased
        draw = keras.random.uniform(shape, seed=self.seed_generator, dtype="float32")
        mask = ops.floor(keep + draw) / keep  # floor(keep + U) is 1 with prob. keep
        return ops.cast(ops.cast(x, "float32") * mask, x.dtype)

    def compute_output_shape(self, input_shape):
        return input_shape
