"""The optimizer: AdamW, with its epsilon where Keras or where PyTorch adds it.

Keras's AdamW divides by ``sqrt(v) + epsilon`` and folds the second moment's
bias correction into the step size; ``torch.optim.AdamW`` (the official
code's) divides by ``sqrt(v) / sqrt(1 - beta_2^t) + epsilon``, which early in
training and for small gradients weighs epsilon less. ``trainer.epsilon_form``
chooses (:class:`AdamW`, :class:`TorchFormAdamW`); both compute what depends
only on the step once per step (:class:`OncePerStep`), not once per variable.
"""
from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping

import keras
from keras import ops


class OncePerStep:
    """An optimizer mixin: within one :meth:`apply` (one training step, where the
    iteration counter does not move), a value that depends only on the step, the
    learning rate among them, is computed at its first use and reused."""

    _step_values: dict | None = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.amsgrad:
            raise ValueError(f"{type(self).__name__} has no amsgrad")

    def apply(self, grads, trainable_variables=None):
        self._step_values = {}
        try:
            return super().apply(grads, trainable_variables)
        finally:
            self._step_values = None

    def once_per_step(self, key: Hashable, compute: Callable):
        """``compute()``, computed once per step for each ``key``."""
        if self._step_values is None:  # outside apply: nothing to share
            return compute()
        if key not in self._step_values:
            self._step_values[key] = compute()
        return self._step_values[key]

    @property
    def learning_rate(self):
        return self.once_per_step("learning_rate",
                                  lambda: super(OncePerStep, self).learning_rate)

    @learning_rate.setter
    def learning_rate(self, value):
        keras.optimizers.Optimizer.learning_rate.fset(self, value)

    def _moments(self, gradient, variable):
        """The gradient in the variable's dtype and the updated (m, v)."""
        gradient = ops.cast(gradient, variable.dtype)
        m = self._momentums[self._get_variable_index(variable)]
        v = self._velocities[self._get_variable_index(variable)]
        self.assign_add(m, ops.multiply(ops.subtract(gradient, m), 1 - self.beta_1))
        self.assign_add(v, ops.multiply(ops.subtract(ops.square(gradient), v), 1 - self.beta_2))
        return m, v

    def _bias_powers(self, dtype):
        """``(beta_1^t, beta_2^t)`` at this step ``t``, as Keras's Adam computes them."""
        step = ops.cast(self.iterations + 1, dtype)
        return (ops.power(ops.cast(self.beta_1, dtype), step),
                ops.power(ops.cast(self.beta_2, dtype), step))


@keras.saving.register_keras_serializable(package="ablation")
class AdamW(OncePerStep, keras.optimizers.AdamW):
    """``keras.optimizers.AdamW``'s update, its step-only values computed once per
    step: ``variable -= lr * sqrt(1 - beta_2^t) / (1 - beta_1^t) * m / (sqrt(v) +
    epsilon)`` after the decoupled weight decay. No ``amsgrad``."""

    def update_step(self, gradient, variable, learning_rate):
        dtype = variable.dtype

        def step_size():  # Keras's Adam's alpha, operation for operation
            lr = ops.cast(learning_rate, dtype)
            beta_1_power, beta_2_power = self._bias_powers(dtype)
            return lr * ops.sqrt(1 - beta_2_power) / (1 - beta_1_power)

        alpha = self.once_per_step(("alpha", dtype), step_size)
        m, v = self._moments(gradient, variable)
        self.assign_sub(variable, ops.divide(ops.multiply(m, alpha),
                                             ops.add(ops.sqrt(v), self.epsilon)))


@keras.saving.register_keras_serializable(package="ablation")
class TorchFormAdamW(OncePerStep, keras.optimizers.AdamW):
    """``keras.optimizers.AdamW`` computing ``torch.optim.AdamW``'s update:
    ``variable -= lr / (1 - beta_1^t) * m / (sqrt(v) / sqrt(1 - beta_2^t) + epsilon)``
    after the decoupled weight decay ``variable -= lr * weight_decay * variable``
    (Keras's AdamW applies the decay the same way). No ``amsgrad``."""

    def update_step(self, gradient, variable, learning_rate):
        dtype = variable.dtype

        def corrections():
            lr = ops.cast(learning_rate, dtype)
            beta_1_power, beta_2_power = self._bias_powers(dtype)
            return ops.divide(lr, 1 - beta_1_power), ops.sqrt(1 - beta_2_power)

        step_size, root_correction_2 = self.once_per_step(("corrections", dtype), corrections)
        m, v = self._moments(gradient, variable)
        denominator = ops.add(ops.divide(ops.sqrt(v), root_correction_2), self.epsilon)
        self.assign_sub(variable, ops.multiply(step_size, ops.divide(m, denominator)))


def build_optimizer(trainer: Mapping, learning_rate) -> keras.optimizers.Optimizer:
    """AdamW on ``learning_rate`` (a value or schedule) with the trainer's weight
    decay, ``optimizer_epsilon`` and ``epsilon_form`` (``keras`` or ``torch``: the schema's)."""
    kind = TorchFormAdamW if trainer["epsilon_form"] == "torch" else AdamW
    if kind is AdamW and keras.backend.backend() == "torch":
        kind = keras.optimizers.AdamW  # Keras's torch AdamW updates every variable in one pass
    return kind(learning_rate=learning_rate, weight_decay=float(trainer["weight_decay"]),
                epsilon=float(trainer["optimizer_epsilon"]))
