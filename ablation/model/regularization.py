"""Random regularisers of the ViT, each a Keras layer: dropout and stochastic depth.

:class:`FastDropout` is ``keras.layers.Dropout`` with half the random draws
(:func:`keep_mask`), used for every dropout of the model; :class:`DropPath`
drops a whole residual branch per sample (the official recipe).
"""
from __future__ import annotations

import sys

import keras
import numpy as np
from keras import layers, ops


def keep_mask(shape, rate: float, seed_generator):
    """A boolean mask, True with probability 1 - ``rate``, for dropout.

    Random number generation dominates dropout's cost on a CPU (TensorFlow's
    Philox makes one 32-bit draw per element), so each
    31-bit random integer decides two neighbouring elements. Viewed as two
    signed 16-bit numbers (a view, no copy), its low half is uniform over
    2**16 values and its high half below 2**15; each is compared with
    ``rate`` scaled to its range, in one pass over the mask. The drop
    probability of an element is therefore ``rate`` rounded to a multiple of
    2**-16 (even positions of the last axis) or 2**-15 (odd ones): 0.1
    becomes 0.1000061 and 0.1000061, 0.3 becomes 0.3000031 and 0.2999878,
    0.5 stays exact; a float32 uniform draw rounds to 2**-23. The elements
    stay independent. A rate within 2**-16 of 1 is capped: one element in
    2**15 or 2**16 is kept. The last axis must have a static size.
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
class FastDropout(layers.Layer):
    """``keras.layers.Dropout`` with half the random draws (see :func:`keep_mask`).

    In training each element is zeroed with probability ``rate`` (up to
    2**-15) and the others scaled by 1 / (1 - rate); at inference it is the
    identity. The scale and the mask are applied as one multiplication by a
    float mask, so the backward pass is one multiplication too.

    Args:
        rate: probability of zeroing an element, in [0, 1).
        seed: seed of the layer's random generator.
    """

    def __init__(self, rate: float, seed: int | None = None, **kwargs):
        super().__init__(**kwargs)
        if not 0.0 <= float(rate) < 1.0:
            raise ValueError(f"dropout rate must be in [0, 1), got {rate!r}")
        self.rate = float(rate)
        self.seed = seed
        self.supports_masking = True
        # as keras.layers.Dropout: a generator (checkpointed state) only when it draws
        self.seed_generator = keras.random.SeedGenerator(seed) if self.rate > 0 else None
        # Nothing to build: built now, as Keras's own Dropout is. Nested in a
        # block and left unbuilt, it would make JAX's predict_on_batch (the
        # locality probe) run the whole model eagerly first, compiling every
        # operation on its own.
        self.built = True

    def call(self, x, training=None):
        if not training or self.rate == 0.0:
            return x
        keep = keep_mask(ops.shape(x), self.rate, self.seed_generator)
        return x * ops.cast(ops.where(keep, 1.0 / (1.0 - self.rate), 0.0), x.dtype)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "rate": self.rate, "seed": self.seed}


@keras.saving.register_keras_serializable(package="ablation")
class DropPath(layers.Layer):
    """Stochastic depth: in training, drop a whole residual branch per sample.

    Each sample's branch output is zeroed with probability ``rate`` and the
    kept ones are scaled by 1 / (1 - rate), so the expected output is
    unchanged (as timm's ``DropPath``, which the official code uses with rate
    0.1 in every branch of every block). At inference it is the identity.

    Args:
        rate: probability of dropping the branch for a sample.
        seed: seed of the layer's random generator.
    """

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
        # in float32 whatever the compute dtype: a bfloat16 draw and 1/keep would
        # bias the kept share and the scale (0.8977 kept, x1.109 at rate 0.1)
        draw = keras.random.uniform(shape, seed=self.seed_generator, dtype="float32")
        mask = ops.floor(keep + draw) / keep  # floor(keep + U) is 1 with prob. keep
        return ops.cast(ops.cast(x, "float32") * mask, x.dtype)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "rate": self.rate, "seed": self.seed}
