"""The optimizer: AdamW, with its epsilon where Keras or where PyTorch adds it.

Keras's AdamW divides by ``sqrt(v) + epsilon`` and folds the second moment's
bias correction into the step size; ``torch.optim.AdamW`` (the official
code's) divides by ``sqrt(v) / sqrt(1 - beta_2^t) + epsilon``. The two agree
once the correction is near 1, but early in training and for parameters whose
gradients are small, Keras's epsilon weighs up to ``1 / sqrt(1 - beta_2)``
(about 32 at beta_2 = 0.999) times more. ``trainer.epsilon_form=torch``
computes PyTorch's form, step for step (:class:`TorchFormAdamW`).
"""
from __future__ import annotations

from collections.abc import Mapping

import keras
from keras import ops

from ablation.config.choices import EPSILON_FORMS



@keras.saving.register_keras_serializable(package="ablation")
class TorchFormAdamW(keras.optimizers.AdamW):
    """``keras.optimizers.AdamW`` computing ``torch.optim.AdamW``'s update:
    ``variable -= lr / (1 - beta_1^t) * m / (sqrt(v) / sqrt(1 - beta_2^t) + epsilon)``
    after the decoupled weight decay ``variable -= lr * weight_decay * variable``
    (Keras's AdamW applies the decay the same way). No ``amsgrad``."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.amsgrad:
            raise ValueError("TorchFormAdamW has no amsgrad")

    def update_step(self, gradient, variable, learning_rate):
        lr = ops.cast(learning_rate, variable.dtype)
        gradient = ops.cast(gradient, variable.dtype)
        step = ops.cast(self.iterations + 1, variable.dtype)
        correction_1 = 1 - ops.power(ops.cast(self.beta_1, variable.dtype), step)
        correction_2 = 1 - ops.power(ops.cast(self.beta_2, variable.dtype), step)
        m = self._momentums[self._get_variable_index(variable)]
        v = self._velocities[self._get_variable_index(variable)]
        self.assign_add(m, ops.multiply(ops.subtract(gradient, m), 1 - self.beta_1))
        self.assign_add(v, ops.multiply(ops.subtract(ops.square(gradient), v), 1 - self.beta_2))
        denominator = ops.add(ops.divide(ops.sqrt(v), ops.sqrt(correction_2)), self.epsilon)
        self.assign_sub(variable, ops.multiply(ops.divide(lr, correction_1),
                                               ops.divide(m, denominator)))


def build_optimizer(trainer: Mapping, learning_rate) -> keras.optimizers.Optimizer:
    """AdamW on ``learning_rate`` (a value or schedule) with the trainer's weight
    decay, ``optimizer_epsilon`` and ``epsilon_form`` (``keras`` or ``torch``)."""
    form = trainer.get("epsilon_form", "keras")
    if form not in EPSILON_FORMS:
        raise ValueError(f"trainer.epsilon_form={form!r}: use keras or torch")
    kind = TorchFormAdamW if form == "torch" else keras.optimizers.AdamW
    return kind(learning_rate=learning_rate, weight_decay=float(trainer["weight_decay"]),
                epsilon=float(trainer.get("optimizer_epsilon", 1e-7)))
