"""AutoAugment's CIFAR-10 policy, from Keras 3's own image layers, per image; and
:func:`layer_seed`, each random layer's own seed."""
from __future__ import annotations

import zlib

import keras
import numpy as np
from keras import layers, ops

# AutoAugment, CIFAR-10 policy (Cubuk et al. 2019; the table the official code's
# CIFAR10Policy implements): 25 sub-policies of two (operation, probability, magnitude 0-9).
CIFAR10_POLICY = [
    (("invert", 0.1, 7), ("contrast", 0.2, 6)),
    (("rotate", 0.7, 2), ("translate_x", 0.3, 9)),
    (("sharpness", 0.8, 1), ("sharpness", 0.9, 3)),
    (("shear_y", 0.5, 8), ("translate_y", 0.7, 9)),
    (("autocontrast", 0.5, 8), ("equalize", 0.9, 2)),
    (("shear_y", 0.2, 7), ("posterize", 0.3, 7)),
    (("color", 0.4, 3), ("brightness", 0.6, 7)),
    (("sharpness", 0.3, 9), ("brightness", 0.7, 9)),
    (("equalize", 0.6, 5), ("equalize", 0.5, 1)),
    (("contrast", 0.6, 7), ("sharpness", 0.6, 5)),
    (("color", 0.7, 7), ("translate_x", 0.5, 8)),
    (("equalize", 0.3, 7), ("autocontrast", 0.4, 8)),
    (("translate_y", 0.4, 3), ("sharpness", 0.2, 6)),
    (("brightness", 0.9, 6), ("color", 0.2, 8)),
    (("solarize", 0.5, 2), ("invert", 0.0, 3)),
    (("equalize", 0.2, 0), ("autocontrast", 0.6, 0)),
    (("equalize", 0.2, 8), ("equalize", 0.6, 4)),
    (("color", 0.9, 9), ("equalize", 0.6, 6)),
    (("autocontrast", 0.8, 4), ("solarize", 0.2, 8)),
    (("brightness", 0.1, 3), ("color", 0.7, 0)),
    (("solarize", 0.4, 5), ("autocontrast", 0.9, 3)),
    (("translate_y", 0.9, 9), ("translate_y", 0.7, 9)),
    (("autocontrast", 0.9, 2), ("solarize", 0.8, 3)),
    (("equalize", 0.8, 8), ("invert", 0.1, 3)),
    (("translate_y", 0.7, 9), ("autocontrast", 0.9, 1)),
]

RANGE = (0, 255)
GREY = 128.0  # the official code fills shifted-in pixels with (128, 128, 128)


def layer_seed(seed: int | None, name: str) -> int | None:
    """A seed for the random layer ``name`` of a run seeded with ``seed`` (None stays None).

    Keras layers given the same integer seed draw the same uniforms at each
    step (a flip would decide the sign of every rotation): deriving each
    layer's seed from its name keeps them independent and runs reproducible.
    """
    if seed is None:
        return None
    return (int(seed) * 1_000_003 + zlib.crc32(name.encode())) % (2**31 - 1)


def operation(name: str, magnitude: int, seed=None) -> layers.Layer:
    """One AutoAugment operation at ``magnitude`` (0-9) as a Keras layer.

    Magnitudes follow the official policy's ranges (shear 0-0.3, translate
    0-150/331 of the side, rotate 0-30 degrees, colour/contrast/sharpness/
    brightness 0-0.9, posterize 8-4 bits, solarize threshold 256-0). Keras'
    layers draw the signed amount uniformly in [-m, m] where the official code
    takes +-m, and brightness adds rather than multiplies (mapped to m/2 of
    the range, about the official change at mid-grey).
    """
    m = magnitude / 9.0
    if name in ("shear_x", "shear_y"):
        amount = 0.3 * m
        return layers.RandomShear(x_factor=amount if name == "shear_x" else 0.0,
                                  y_factor=amount if name == "shear_y" else 0.0,
                                  fill_mode="constant", fill_value=GREY, seed=seed)
    if name in ("translate_x", "translate_y"):
        amount = 150 / 331 * m
        return layers.RandomTranslation(amount if name == "translate_y" else 0.0,
                                        amount if name == "translate_x" else 0.0,
                                        fill_mode="constant", fill_value=GREY, seed=seed)
    if name == "rotate":
        return layers.RandomRotation(30 * m / 360, fill_mode="constant", fill_value=GREY,
                                     seed=seed)
    if name == "color":
        return layers.RandomColorDegeneration(max(0.9 * m, 1e-3), value_range=RANGE, seed=seed)
    if name == "contrast":
        return layers.RandomContrast(max(0.9 * m, 1e-3), value_range=RANGE, seed=seed)
    if name == "sharpness":
        return layers.RandomSharpness(max(0.9 * m, 1e-3), value_range=RANGE, seed=seed)
    if name == "brightness":
        return layers.RandomBrightness(max(0.45 * m, 1e-3), value_range=RANGE, seed=seed)
    if name == "posterize":
        return layers.RandomPosterization(int(round(8 - 4 * m)), value_range=RANGE, seed=seed)
    if name == "solarize":
        threshold = 1.0 - m
        return layers.Solarization(threshold_factor=(threshold, threshold), value_range=RANGE,
                                   seed=seed)
    if name == "autocontrast":
        return layers.AutoContrast(value_range=RANGE)
    if name == "equalize":
        return layers.Equalization(value_range=RANGE)
    if name == "invert":
        return layers.RandomInvert(factor=(1.0, 1.0), value_range=RANGE, seed=seed)
    raise ValueError(f"unknown AutoAugment operation {name!r}")


@keras.saving.register_keras_serializable(package="ablation")
class AutoAugment(layers.Layer):
    """AutoAugment with a fixed policy, per image, in training only.

    Each image draws one sub-policy; each of its two operations is applied
    with the sub-policy's probability. Every distinct (operation, magnitude)
    is one Keras layer run on the batch and kept where an image drew it.
    """

    def __init__(self, policy: str = "cifar10", seed: int | None = None, **kwargs):
        super().__init__(**kwargs)
        if policy != "cifar10":
            raise ValueError(f"AutoAugment policy {policy!r}: only cifar10 is implemented")
        self.policy, self.seed = policy, seed
        self.seed_generator = keras.random.SeedGenerator(layer_seed(seed, "autoaugment"))
        self.table = CIFAR10_POLICY
        self.keys = sorted({(name, magnitude) for sub in self.table
                            for name, _, magnitude in sub})
        # each operation its own seed: one shared integer would make their draws coincide
        self.operations = [operation(name, magnitude, layer_seed(seed, f"autoaugment/{i}/{name}"))
                           for i, (name, magnitude) in enumerate(self.keys)]

    def build(self, input_shape):
        for layer in self.operations:
            layer.build(input_shape)

    def call(self, images, training=None):
        if not training:
            return images
        batch = ops.shape(images)[0]
        count = len(self.table)
        choice = keras.random.randint((batch,), 0, count, seed=self.seed_generator)
        for stage in (0, 1):
            draw = keras.random.uniform((batch,), seed=self.seed_generator)
            probability = ops.take(ops.convert_to_tensor(
                np.array([sub[stage][1] for sub in self.table], dtype="float32")), choice)
            apply = draw < probability
            out = images
            for key, layer in zip(self.keys, self.operations):
                picks = [i for i, sub in enumerate(self.table)
                         if (sub[stage][0], sub[stage][2]) == key]
                if not picks:
                    continue
                chosen = ops.any(ops.stack([choice == i for i in picks]), axis=0) & apply
                done = ops.cast(layer(images, training=True), images.dtype)
                out = ops.where(chosen[:, None, None, None], done, out)
            images = out
        return images

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "policy": self.policy, "seed": self.seed}
