"""The official recipe's per-image augmentation, from Keras 3's own image layers.

Random crop with padding, AutoAugment's CIFAR-10 policy (or ``RandAugment``)
and random erasing, as Keras layers that run inside the model in training
only. :func:`ablation.augment.chain.build_augmentation` places them around its
own steps: the ``before`` layers see raw pixels (0-255, what the colour
operations expect), the ``after`` layers the normalised image (where the
official code erases).

Mixup/CutMix are not here: they need labels, so they belong to the input
pipeline (:mod:`ablation.data.batches`).
"""
from __future__ import annotations

from keras import layers

from ablation.augment.autoaugment import RANGE, AutoAugment
from ablation.augment.seeding import layer_seed


def recipe_layers(crop_padding: int, policy: str | None, random_erasing: float,
                  seed: int | None = None, input_size: int | None = None
                  ) -> tuple[list[layers.Layer], list[layers.Layer]]:
    """(before normalisation, after normalisation) layers for the recipe's steps:
    ``crop_padding`` (pixels: a random crop of the original size from the
    zero-padded image; 0: none), ``policy`` (``autoaugment`` = the CIFAR-10
    policy, ``randaugment``, or None), ``random_erasing`` (probability; 0: none).
    """
    before, after = [], []
    padding = int(crop_padding)
    if padding:
        # shift by up to `padding` whole pixels with zero fill = pad, then crop the
        # original size at a random offset; the identity at inference. It runs on the
        # images as fed (before resizing), so the shift is relative to their side;
        # a shift uniform in +-(padding + 0.5) px rounded to the nearest pixel makes
        # each of the 2 * padding + 1 offsets equally likely, as the official crop.
        side = float(input_size or 32)
        factor = (padding + 0.5) / side
        before.append(layers.RandomTranslation(factor, factor,
                                               fill_mode="constant", fill_value=0.0,
                                               interpolation="nearest",
                                               seed=layer_seed(seed, "random_crop"),
                                               name="random_crop"))
    if policy == "autoaugment":
        before.append(AutoAugment("cifar10", seed=seed, name="autoaugment"))  # seeds its parts
    elif policy == "randaugment":
        before.append(layers.RandAugment(value_range=RANGE,
                                         seed=layer_seed(seed, "randaugment"),
                                         name="randaugment"))
    elif policy:
        raise ValueError(f"augmentation.policy={policy!r}: use autoaugment, randaugment or null")
    erasing = float(random_erasing)
    if erasing:
        # on normalised pixels: erase 2-40 % of the image (official sl, sh) with 0, the
        # mean colour
        after.append(layers.RandomErasing(factor=(erasing, erasing), scale=(0.02, 0.4),
                                          value_range=(-1e3, 1e3), fill_value=0.0,
                                          seed=layer_seed(seed, "random_erasing"),
                                          name="random_erasing"))
    return before, after
