"""The per-image augmentation chain inside the model (so it runs on the accelerator
with the rest of the step, and the data stays plain numpy), in training only."""
from __future__ import annotations

import zlib

import keras
import numpy as np
from keras import layers

from ablation.augment.affine import AffineAugmentation
from ablation.augment.normalization import AdaptedNormalization, ChannelStatistics
from ablation.config.choices import AUGMENTATION_IMPLEMENTATIONS

RANGE = (0, 255)  # the raw pixels the recipe's layers see


def layer_seed(seed: int | None, name: str) -> int | None:
    """A seed for the random layer ``name`` of a run seeded with ``seed`` (None stays None).

    Keras layers given the same integer seed draw the same uniforms at each
    step (a flip would decide the sign of every rotation): deriving each
    layer's seed from its name keeps them independent and runs reproducible.
    """
    if seed is None:
        return None
    return (int(seed) * 1_000_003 + zlib.crc32(name.encode())) % (2**31 - 1)


def recipe_layers(crop_padding: int, policy: str | None, random_erasing: float,
                  seed: int | None = None, input_size: int | None = None
                  ) -> tuple[list[layers.Layer], list[layers.Layer]]:
    """The official recipe's steps from Keras' own layers, (before normalisation, after
    it): ``crop_padding`` (a random crop of the zero-padded image; 0: none), ``policy``
    (``randaugment`` or None; AutoAugment runs only in the input pipeline), ``random_erasing``
    (a probability; 0: none). Mixup/CutMix need labels: :mod:`ablation.data.batches`.
    """
    before, after = [], []
    padding = int(crop_padding)
    if padding:
        # pad and crop = a whole-pixel shift with zero fill, relative to the side fed in:
        # uniform in +-(padding + 0.5) px, rounded, each of the 2 * padding + 1 offsets
        # is equally likely, as the official crop
        side = float(input_size or 32)
        factor = (padding + 0.5) / side
        before.append(layers.RandomTranslation(factor, factor,
                                               fill_mode="constant", fill_value=0.0,
                                               interpolation="nearest",
                                               seed=layer_seed(seed, "random_crop"),
                                               name="random_crop"))
    if policy == "randaugment":
        before.append(layers.RandAugment(value_range=RANGE,
                                         seed=layer_seed(seed, "randaugment"),
                                         name="randaugment"))
    elif policy:
        raise ValueError(f"augmentation.policy={policy!r} inside the model: use randaugment or "
                         f"null (autoaugment: augmentation.implementation=official)")
    erasing = float(random_erasing)
    if erasing:
        # on normalised pixels: erase 2-40 % of the image (official sl, sh) with 0, the mean
        after.append(layers.RandomErasing(factor=(erasing, erasing), scale=(0.02, 0.4),
                                          value_range=(-1e3, 1e3), fill_value=0.0,
                                          seed=layer_seed(seed, "random_erasing"),
                                          name="random_erasing"))
    return before, after


def build_augmentation(
    image_size: int,
    statistics: ChannelStatistics | np.ndarray | None,
    horizontal_flip: bool = True,
    rotation: float = 0.0,
    zoom: float = 0.0,
    seed: int | None = None,
    implementation: str = "fused",
    input_size: int | None = None,
    crop_padding: int = 0,
    policy: str | None = None,
    random_erasing: float = 0.0,
    **pipeline,
) -> keras.Sequential:
    """Normalise, resize, then random flip/rotate/zoom (active in training only).

    ``statistics`` are the normalisation's, or the training images to compute
    them from; None leaves mean 0 and variance 1 until weights are loaded.
    ``implementation``: ``fused`` (one affine resample,
    :class:`ablation.augment.affine.AffineAugmentation`), ``keras_layers`` (the
    keras.io example's four layers) or ``official`` (normalise and resize only:
    the recipe runs in the input pipeline, :mod:`ablation.augment.official`).
    Otherwise the recipe's steps are Keras layers around these
    (:func:`recipe_layers`: an approximation, see docs/paper-recipe.md), the
    crop relative to ``input_size``, the side fed in. ``pipeline``: keys the
    input pipeline reads, ignored here.
    """
    if implementation not in AUGMENTATION_IMPLEMENTATIONS:  # also checked by ablation.config.validate
        raise ValueError(f"augmentation.implementation must be one of "
                         f"{', '.join(AUGMENTATION_IMPLEMENTATIONS)}, got {implementation!r}")
    normalization = AdaptedNormalization(name="normalization")
    if isinstance(statistics, ChannelStatistics):
        normalization.set_statistics(statistics)
    elif statistics is not None:
        normalization.adapt(np.asarray(statistics))
    if implementation == "official":
        # flip, crop, AutoAugment, erasing and mixing run in the input pipeline
        # (ablation.augment.official, ablation.data.batches); the model normalises
        # and resizes only, the same in training and at inference
        if rotation or zoom:
            raise ValueError("augmentation.implementation=official has no rotation or zoom "
                             "(the official recipe): set them to 0")
        return keras.Sequential([normalization, AffineAugmentation(image_size, name="resize")],
                                name="augmentation")
    before, after = recipe_layers(crop_padding, policy, random_erasing, seed=seed,
                                  input_size=input_size)
    if implementation == "fused":
        resample = AffineAugmentation(image_size, horizontal_flip=horizontal_flip,
                                      rotation=rotation, zoom=zoom,
                                      seed=layer_seed(seed, "resample"), name="resample")
        return keras.Sequential([*before, normalization, resample, *after], name="augmentation")
    steps = [normalization, layers.Resizing(image_size, image_size, name="resize")]
    if horizontal_flip:
        steps.append(layers.RandomFlip("horizontal", seed=layer_seed(seed, "flip"), name="flip"))
    if rotation:
        steps.append(layers.RandomRotation(rotation, seed=layer_seed(seed, "rotation"),
                                           name="rotation"))
    if zoom:
        steps.append(layers.RandomZoom(zoom, zoom, seed=layer_seed(seed, "zoom"), name="zoom"))
    return keras.Sequential([*before, *steps, *after], name="augmentation")
