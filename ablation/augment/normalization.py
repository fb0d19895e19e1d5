"""Normalisation with adapted statistics, the first step of the augmentation chain."""
from __future__ import annotations

import keras
from keras import layers, ops


@keras.saving.register_keras_serializable(package="ablation")
class AdaptedNormalization(layers.Normalization):
    """``keras.layers.Normalization`` that reads its adapted statistics from its
    weights when called.

    Keras's layer turns the adapted mean and variance into constant tensors,
    which a compiled train step then holds as constants: two jobs whose
    training splits differ (another seed) compile two different programs,
    and XLA's compilation cache (``gpu.compilation_cache``) cannot give one
    the other's. Read from the weights, the statistics are inputs of one
    program. The weights, the function and the config are the keras
    layer's (saved under this class's name); statistics given to the
    constructor stay constants, as there. Unlike the keras layer it runs on
    the model's backend only (never inside a tf.data pipeline).
    """

    def call(self, inputs):
        if self.input_mean is not None or self.invert or tuple(self.axis) != (-1,):
            return super().call(inputs)
        inputs = ops.convert_to_tensor(inputs, dtype=self.compute_dtype)
        mean = ops.cast(self.adapt_mean, self.compute_dtype)
        std = ops.sqrt(ops.cast(self.adapt_variance, self.compute_dtype))
        return ops.divide(ops.subtract(inputs, mean), ops.maximum(std, keras.config.epsilon()))
