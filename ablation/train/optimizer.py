"""The optimizer: AdamW, with its epsilon where Keras or where PyTorch adds it.

Keras's AdamW divides by ``sqrt(v) + epsilon`` and folds the second moment's
bias correction into the step size; ``torch.optim.AdamW`` (the official
code's) divides by ``sqrt(v) / sqrt(1 - beta_2^t) + epsilon``. The two agree
once the correction is near 1, but early in training and for parameters whose
gradients are small, Keras's epsilon weighs up to ``1 / sqrt(1 - beta_2)``
(about 32 at beta_2 = 0.999) times more. ``trainer.epsilon_form=torch``
computes PyTorch's form, step for step (:class:`TorchFormAdamW`).

Both evaluate the learning-rate schedule once per step
(:class:`OneLearningRatePerStep`): Keras evaluates it once for the update and
again for each variable's weight decay, which put a copy of the schedule into
the traced step for every variable of the model.
"""
from __future__ import annotations

from collections.abc import Mapping

import keras
from keras import ops

from ablation.config.choices import EPSILON_FORMS


class OneLearningRatePerStep:
    """An optimizer mixin: within one :meth:`apply` (one training step), every
    read of ``learning_rate`` returns the value computed at the first read.

    The iteration counter moves only at the end of ``apply``, so each read
    within it would compute the same value; reading it once gives the same
    update with one schedule evaluation in the traced step instead of one per
    variable. Outside a step (the logged learning rate, a callback) the
    schedule is evaluated as usual, and setting the rate works as in Keras.
    """

    _step_learning_rate = None
    _in_step = False

    def apply(self, grads, trainable_variables=None):
        self._in_step, self._step_learning_rate = True, None
        try:
            return super().apply(grads, trainable_variables)
        finally:
            self._in_step, self._step_learning_rate = False, None

    @property
    def learning_rate(self):
        if not self._in_step:
            return super().learning_rate
        if self._step_learning_rate is None:
            self._step_learning_rate = super().learning_rate
        return self._step_learning_rate

    @learning_rate.setter
    def learning_rate(self, value):
        keras.optimizers.Optimizer.learning_rate.fset(self, value)


@keras.saving.register_keras_serializable(package="ablation")
class AdamW(OneLearningRatePerStep, keras.optimizers.AdamW):
    """``keras.optimizers.AdamW``, its learning rate evaluated once per step."""


@keras.saving.register_keras_serializable(package="ablation")
class TorchFormAdamW(OneLearningRatePerStep, keras.optimizers.AdamW):
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
    kind = TorchFormAdamW if form == "torch" else AdamW
    return kind(learning_rate=learning_rate, weight_decay=float(trainer["weight_decay"]),
                epsilon=float(trainer.get("optimizer_epsilon", 1e-7)))
