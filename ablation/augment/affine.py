"""Resize + random flip + rotation + zoom as one affine resample (``augmentation.implementation=fused``).

The keras.io example chains ``Resizing``, ``RandomFlip``, ``RandomRotation``
and ``RandomZoom``: three bilinear resamples. :class:`AffineAugmentation`
composes the four maps into one coordinate transform per image and samples
the input once, with ``keras.ops`` gathers only: the same random laws (edges
reflected as the Keras layers do), one interpolation instead of three, fast
on every backend. Without randomness it is exactly ``Resizing`` (bilinear,
half-pixel centres).
"""
from __future__ import annotations

import math

import keras
from keras import layers, ops


def _reflect(coord, size: int):
    """Mirror a pixel coordinate into [-0.5, size - 0.5] (Keras' ``reflect`` fill)."""
    period = 2.0 * size
    folded = ops.mod(coord + 0.5, period)
    return ops.where(folded >= size, period - folded, folded) - 0.5


@keras.saving.register_keras_serializable(package="ablation")
class AffineAugmentation(layers.Layer):
    """Resize to ``size`` x ``size`` and, in training, randomly flip, rotate and zoom:
    ``rotation`` and ``zoom`` as ``RandomRotation(rotation)`` and ``RandomZoom(zoom, zoom)``."""

    def __init__(self, size: int, horizontal_flip: bool = False, rotation: float = 0.0,
                 zoom: float = 0.0, seed: int | None = None, **kwargs):
        super().__init__(**kwargs)
        self.size = int(size)
        self.horizontal_flip = bool(horizontal_flip)
        self.rotation = float(rotation)
        self.zoom = float(zoom)
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)

    def _output_coordinates(self, batch, training):
        """Source (row, col) in the resized image for every output pixel, (B, S, S)."""
        s = self.size
        grid = ops.arange(s, dtype="float32")
        rows = ops.broadcast_to(ops.reshape(grid, (1, s, 1)), (1, s, s))
        cols = ops.broadcast_to(ops.reshape(grid, (1, 1, s)), (1, s, s))
        if not training:
            return rows, cols
        centre = (s - 1) / 2.0
        shape = (batch, 1, 1)
        # Inverse maps, applied from the output back to the input, in the
        # chained layers' reverse order: zoom, rotation, flip.
        if self.zoom:
            zoom_x = keras.random.uniform(shape, 1.0 - self.zoom, 1.0 + self.zoom,
                                          seed=self.seed_generator)
            zoom_y = keras.random.uniform(shape, 1.0 - self.zoom, 1.0 + self.zoom,
                                          seed=self.seed_generator)
            cols = _reflect(zoom_x * (cols - centre) + centre, s)
            rows = _reflect(zoom_y * (rows - centre) + centre, s)
        if self.rotation:
            limit = self.rotation * 2.0 * math.pi
            angle = keras.random.uniform(shape, -limit, limit, seed=self.seed_generator)
            cos, sin = ops.cos(angle), ops.sin(angle)
            x, y = cols - centre, rows - centre
            cols = _reflect(cos * x - sin * y + centre, s)
            rows = _reflect(sin * x + cos * y + centre, s)
        if self.horizontal_flip:
            flip = keras.random.uniform(shape, seed=self.seed_generator) < 0.5
            cols = ops.where(flip, (s - 1) - cols, cols)
        return rows, cols

    def call(self, images, training=None):
        batch = ops.shape(images)[0]
        height, width, channels = images.shape[1], images.shape[2], images.shape[3]
        rows, cols = self._output_coordinates(batch, bool(training))
        # Resizing with half-pixel centres, clamped at the edges as tf.image.resize.
        v = ops.clip((rows + 0.5) * (height / self.size) - 0.5, 0.0, height - 1.0)
        u = ops.clip((cols + 0.5) * (width / self.size) - 0.5, 0.0, width - 1.0)
        v0, u0 = ops.floor(v), ops.floor(u)
        wy = ops.expand_dims(ops.cast(v - v0, images.dtype), -1)
        wx = ops.expand_dims(ops.cast(u - u0, images.dtype), -1)
        v0, u0 = ops.cast(v0, "int32"), ops.cast(u0, "int32")
        v1, u1 = ops.minimum(v0 + 1, height - 1), ops.minimum(u0 + 1, width - 1)
        base = ops.reshape(ops.arange(batch, dtype="int32") * (height * width), (-1, 1, 1))
        flat = ops.reshape(images, (-1, channels))

        def pixels(r, c):
            index = ops.broadcast_to(base + r * width + c, (batch, self.size, self.size))
            return ops.take(flat, index, axis=0)

        top = pixels(v0, u0) * (1 - wx) + pixels(v0, u1) * wx
        bottom = pixels(v1, u0) * (1 - wx) + pixels(v1, u1) * wx
        return top * (1 - wy) + bottom * wy

    def compute_output_shape(self, input_shape):
        return (input_shape[0], self.size, self.size, input_shape[3])

    def get_config(self):
        return {**super().get_config(), "size": self.size,
                "horizontal_flip": self.horizontal_flip, "rotation": self.rotation,
                "zoom": self.zoom, "seed": self.seed}
