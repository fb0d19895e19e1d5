"""The official code's per-image training augmentation, in its order, in the input pipeline.

The official ``main.py`` transforms each training image: random horizontal
flip, ``RandomCrop(size, padding=4)`` (zero padding), AutoAugment's
``CIFAR10Policy`` on the PIL image, ``Normalize``, then random erasing;
Mixup/CutMix follow on the batch (:mod:`ablation.data.batches`). The policy's
operations are integer image processing that Keras' layers only approximate
(:mod:`ablation.augment.pil_ops`), cheap in numpy on the CPU beside the
accelerator.

Normalisation stays in the model, so this pipeline ends in raw pixels: the
official order all the same, as a per-channel affine map commutes with Mixup
and CutMix, and the erasing fill is the official normalised fill (the
channel means in [0, 1]) given in raw pixels, ``mean + std * fill``.
"""
from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from ablation.augment import pil_ops
from ablation.augment.normalization import PIXEL_RANGE, ChannelStatistics

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

# The official SubPolicy's magnitude tables (index 0-9).
RANGES = {
    "shear_x": np.linspace(0, 0.3, 10), "shear_y": np.linspace(0, 0.3, 10),
    "translate_x": np.linspace(0, 150 / 331, 10), "translate_y": np.linspace(0, 150 / 331, 10),
    "rotate": np.linspace(0, 30, 10),
    "color": np.linspace(0.0, 0.9, 10), "contrast": np.linspace(0.0, 0.9, 10),
    "sharpness": np.linspace(0.0, 0.9, 10), "brightness": np.linspace(0.0, 0.9, 10),
    "posterize": np.round(np.linspace(8, 4, 10), 0).astype(int),
    "solarize": np.linspace(256, 0, 10),
}
# Operations whose magnitude the official code applies with a random sign.
SIGNED = ("shear_x", "shear_y", "translate_x", "translate_y",
          "color", "contrast", "sharpness", "brightness")
# Operations that take 1 + the value (PIL's enhancement factors), and those that take none.
ENHANCE = ("color", "contrast", "sharpness", "brightness")
PLAIN = ("autocontrast", "equalize", "invert")


def magnitude(name: str, index: int) -> float:
    """The official value of ``name`` at magnitude index ``index`` (unsigned)."""
    return float(RANGES[name][index]) if name in RANGES else 0.0


def apply_operation(image: np.ndarray, name: str, value: float, sign: int = 1) -> np.ndarray:
    """One policy operation at the official ``value`` with ``sign`` (+1/-1) where it takes one."""
    v = value * sign if name in SIGNED else value
    if name in PLAIN:
        return getattr(pil_ops, name)(image)
    if name not in RANGES:
        raise ValueError(f"unknown AutoAugment operation {name!r}")
    if name in ENHANCE:
        v = 1.0 + v
    elif name in ("translate_x", "translate_y"):   # a fraction of the image's width or height
        v = v * image.shape[1 if name == "translate_x" else 0]
    return getattr(pil_ops, name)(image, v)   # shear_*, rotate, posterize, solarize: v itself


def autoaugment(image: np.ndarray, rng: np.random.Generator, policy=CIFAR10_POLICY):
    """``CIFAR10Policy``: one sub-policy uniformly, each of its two operations with
    its probability, at its fixed magnitude with a random sign."""
    sub = policy[int(rng.integers(len(policy)))]
    for name, probability, index in sub:
        if rng.random() < probability:
            sign = 1 if rng.random() < 0.5 else -1
            image = apply_operation(image, name, magnitude(name, index), sign)
    return image


def random_crop(image: np.ndarray, padding: int, rng: np.random.Generator) -> np.ndarray:
    """``RandomCrop(size, padding)``: zero-pad, crop the original size at a uniform offset."""
    h, w = image.shape[:2]
    padded = np.pad(image, ((padding, padding), (padding, padding), (0, 0)))
    top, left = rng.integers(0, 2 * padding + 1, size=2)
    return padded[top:top + h, left:left + w]


def erase_box(height: int, width: int, rng: np.random.Generator, area=(0.02, 0.4),
              ratio: float = 0.3):
    """The official ``RandomErasing`` box (top, left, h, w), or None after 100 misses.

    Area uniform in ``area`` of the image, aspect ``h / w`` uniform in
    [ratio, 1 / ratio] (so tall boxes are the likelier), sides rounded
    half to even as Python's ``round``.
    """
    for _ in range(100):
        target = rng.uniform(*area) * height * width
        aspect = rng.uniform(ratio, 1.0 / ratio)
        h = round(math.sqrt(target * aspect))
        w = round(math.sqrt(target / aspect))
        if w < width and h < height:
            top = int(rng.integers(0, height - h + 1))
            left = int(rng.integers(0, width - w + 1))
            return top, left, h, w
    return None


class OfficialAugment:
    """Flip, padded crop, AutoAugment, then random erasing, per image, as the official
    code; ``fill``: the erasing fill in raw pixels per channel."""

    def __init__(self, fill, horizontal_flip: bool = True, crop_padding: int = 4,
                 policy: str | None = "autoaugment", random_erasing: float = 0.25):
        if policy not in ("autoaugment", None):
            raise ValueError(f"augmentation.policy={policy!r}: the official pipeline "
                             f"implements autoaugment or null")
        self.fill = np.asarray(fill, dtype=np.float32).reshape(-1)
        self.horizontal_flip = bool(horizontal_flip)
        self.crop_padding = int(crop_padding or 0)
        self.policy = policy
        self.random_erasing = float(random_erasing or 0.0)

    def image(self, image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """One uint8 (H, W, C) image -> augmented float32 raw pixels."""
        if self.horizontal_flip and rng.random() < 0.5:
            image = image[:, ::-1]
        if self.crop_padding:
            image = random_crop(image, self.crop_padding, rng)
        if self.policy == "autoaugment":
            image = autoaugment(np.ascontiguousarray(image), rng)
        out = image.astype(np.float32)
        if self.random_erasing and rng.random() < self.random_erasing:
            box = erase_box(*image.shape[:2], rng)
            if box is not None:
                top, left, h, w = box
                out[top:top + h, left:left + w] = self.fill
        return out

    def __call__(self, images: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """A batch of raw-pixel images (0-255) -> float32, each augmented on its own."""
        pixels = np.clip(np.rint(images), 0, 255).astype(np.uint8)
        return np.stack([self.image(im, rng) for im in pixels])


def erasing_fill(statistics: ChannelStatistics) -> np.ndarray:
    """Raw-pixel fill equal to the official normalised fill (the channel means in [0, 1])."""
    fill = statistics.mean + statistics.std * statistics.mean / PIXEL_RANGE
    return fill.astype(np.float32)


def from_config(augmentation: Mapping, statistics: ChannelStatistics) -> OfficialAugment:
    """The pipeline ``augmentation.implementation=official`` describes, for a model
    that normalises with ``statistics``."""
    return OfficialAugment(erasing_fill(statistics),
                           horizontal_flip=bool(augmentation["horizontal_flip"]),
                           crop_padding=int(augmentation["crop_padding"]),
                           policy=augmentation["policy"],
                           random_erasing=float(augmentation["random_erasing"]))
