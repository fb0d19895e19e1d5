"""The learning-rate schedule: linear warm-up, then cosine decay, without a branch
(Keras's ``CosineDecay`` picks the phase with ``ops.cond``, a longer trace)."""
from __future__ import annotations

import math

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="ablation")
class WarmupCosineDecay(keras.optimizers.schedules.CosineDecay):
    """``keras.optimizers.schedules.CosineDecay`` with ``warmup_steps > 0``, branch-free:
    the same arguments, configuration and values (bit-identical in a compiled step;
    JAX op by op may differ by an ulp)."""

    def __init__(self, initial_learning_rate, decay_steps, warmup_target, warmup_steps,
                 alpha=0.0, name="WarmupCosineDecay"):
        if warmup_target is None or not warmup_steps > 0:
            raise ValueError(f"WarmupCosineDecay needs a warmup_target and warmup_steps > 0 "
                             f"(else use CosineDecay), got {warmup_target!r} and "
                             f"{warmup_steps!r}")
        super().__init__(initial_learning_rate, decay_steps, alpha=alpha, name=name,
                         warmup_target=warmup_target, warmup_steps=warmup_steps)

    def __call__(self, step):
        # the operations, and their order, of CosineDecay.__call__ with a warm-up
        with keras.name_scope(self.name):
            initial = ops.convert_to_tensor(self.initial_learning_rate)
            dtype = initial.dtype
            decay_steps = ops.cast(self.decay_steps, dtype)
            target = ops.cast(self.warmup_target, dtype)
            warmup_steps = ops.cast(self.warmup_steps, dtype)
            step = ops.minimum(ops.cast(step, dtype), decay_steps + warmup_steps)
            warming = (target - initial) * (step / warmup_steps) + initial
            fraction = ops.divide(step - warmup_steps, decay_steps)
            cosine = 0.5 * (1.0 + ops.cos(ops.multiply(ops.array(math.pi, dtype=dtype),
                                                        fraction)))
            decaying = ops.multiply(target, (1 - self.alpha) * cosine + self.alpha)
            return ops.where(step < warmup_steps, warming, decaying)
