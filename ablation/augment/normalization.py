"""Normalisation, the first step of the augmentation chain, and its statistics.

The statistics are per channel, in raw pixel units (0-255), and exact at any
size: :func:`channel_statistics` sums in float64 (the float32 mean of
``keras.layers.Normalization.adapt`` comes out far too low on a whole CIFAR
split). ``augmentation.normalization`` chooses them, read in one place
(:func:`normalization_statistics`): ``adapted`` (the training split's own) or
``official`` (``dataset.official_statistics``).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import keras
import numpy as np
from keras import layers, ops

# Rows summed at a time: a float64 copy of a chunk, not of the data.
_CHUNK = 4096
PIXEL_RANGE = 255.0


@dataclass(frozen=True)
class ChannelStatistics:
    """Per-channel mean and standard deviation in raw pixel units, and where they came from."""

    mean: np.ndarray
    std: np.ndarray
    source: str = "adapted"

    def as_record(self) -> dict:
        """The statistics as a run record states them (fractions of the pixel range)."""
        return {"source": self.source,
                "mean": [round(float(v) / PIXEL_RANGE, 6) for v in self.mean],
                "std": [round(float(v) / PIXEL_RANGE, 6) for v in self.std]}


def channel_statistics(images: np.ndarray) -> ChannelStatistics:
    """The exact mean and (population) standard deviation of each channel of
    ``images`` (..., C), in float64, two passes over chunks of rows."""
    images = np.asarray(images)
    if images.ndim < 2 or images.size == 0:
        raise ValueError(f"normalisation statistics need a non-empty (N, ..., C) array, "
                         f"got shape {images.shape}")
    channels = images.shape[-1]
    rows = images.reshape(len(images), -1, channels)
    count = rows.shape[0] * rows.shape[1]
    total = np.zeros(channels)
    for start in range(0, len(rows), _CHUNK):
        total += np.asarray(rows[start:start + _CHUNK], np.float64).sum(axis=(0, 1))
    mean = total / count
    squares = np.zeros(channels)
    for start in range(0, len(rows), _CHUNK):
        centred = np.asarray(rows[start:start + _CHUNK], np.float64) - mean
        squares += (centred * centred).sum(axis=(0, 1))
    return ChannelStatistics(mean, np.sqrt(squares / count), "adapted")


def official_statistics(dataset: Mapping) -> ChannelStatistics:
    """``dataset.official_statistics`` (fractions of the range) in raw pixel units
    (a config asking for them without them is refused: :mod:`ablation.config.validate`)."""
    given = dataset["official_statistics"]
    return ChannelStatistics(np.asarray(given["mean"], np.float64) * PIXEL_RANGE,
                             np.asarray(given["std"], np.float64) * PIXEL_RANGE, "official")


def normalization_statistics(config: Mapping, x_train: np.ndarray | None
                             ) -> ChannelStatistics | None:
    """The statistics a run config asks for: the official constants, or the
    training images' own (None when neither is given)."""
    choice = config["augmentation"]["normalization"]
    if choice == "official":
        statistics = official_statistics(config["dataset"])
        if x_train is not None and len(statistics.mean) != np.shape(x_train)[-1]:
            raise ValueError(f"dataset.official_statistics has {len(statistics.mean)} "
                             f"channels, the images {np.shape(x_train)[-1]}")
        return statistics
    return None if x_train is None else channel_statistics(x_train)


def model_statistics(model: keras.Model, expected: ChannelStatistics | None
                     ) -> ChannelStatistics | None:
    """The statistics ``model`` normalises with: ``expected`` when its layer holds
    them, else the layer's own (source ``checkpoint``: a model restored from a
    checkpoint written with other statistics keeps them)."""
    try:
        layer = model.get_layer("augmentation").get_layer("normalization")
    except ValueError:
        return expected
    mean = np.asarray(layer.adapt_mean, np.float64).reshape(-1)
    std = np.sqrt(np.asarray(layer.adapt_variance, np.float64)).reshape(-1)
    if expected is not None and np.allclose(mean, expected.mean, rtol=1e-6) \
            and np.allclose(std, expected.std, rtol=1e-6):
        return expected
    return ChannelStatistics(mean, std, "checkpoint")


@keras.saving.register_keras_serializable(package="ablation")
class AdaptedNormalization(layers.Normalization):
    """``keras.layers.Normalization`` with exact statistics (:func:`channel_statistics`,
    or given ones: :meth:`set_statistics`), read from its weights when called.

    Keras's layer holds the adapted statistics as constants of the compiled
    step, so two jobs with other training splits compile two programs (and
    XLA's compilation cache cannot share them); read from the weights, they
    are inputs of one. Weights and config are the keras layer's. It runs on
    the model's backend only (never inside a tf.data pipeline).
    """

    def adapt(self, data):
        if not isinstance(data, np.ndarray) or tuple(self.axis) != (-1,):
            return super().adapt(data)
        self.set_statistics(channel_statistics(data), input_shape=data.shape)

    def set_statistics(self, statistics: ChannelStatistics, input_shape=None) -> None:
        """Normalise with ``statistics`` (per channel, the layer's input units)."""
        if not self.built:
            channels = len(statistics.mean)
            self.build(tuple(input_shape) if input_shape is not None
                       else (None, None, None, channels))
        self.adapt_mean.assign(np.asarray(statistics.mean, np.float32))
        self.adapt_variance.assign(np.asarray(statistics.std * statistics.std, np.float32))
        self.finalize_state()

    def call(self, inputs):
        if self.input_mean is not None or self.invert or tuple(self.axis) != (-1,):
            return super().call(inputs)
        inputs = ops.convert_to_tensor(inputs, dtype=self.compute_dtype)
        mean = ops.cast(self.adapt_mean, self.compute_dtype)
        std = ops.sqrt(ops.cast(self.adapt_variance, self.compute_dtype))
        return ops.divide(ops.subtract(inputs, mean), ops.maximum(std, keras.config.epsilon()))
