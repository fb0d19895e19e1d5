"""The per-image augmentation chain that runs inside the model, in training only.

It lives inside the model so it runs on the accelerator with the rest of the
step, and the data can stay plain numpy.
"""
from __future__ import annotations

import keras
import numpy as np
from keras import layers

from ablation.augment.affine import AffineAugmentation
from ablation.augment.normalization import AdaptedNormalization, ChannelStatistics
from ablation.augment.recipe import recipe_layers
from ablation.augment.seeding import layer_seed
from ablation.config.choices import AUGMENTATION_IMPLEMENTATIONS


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

    ``statistics`` are the normalisation's
    (:mod:`ablation.augment.normalization`), or the training images to compute
    them from exactly; None leaves mean 0 and variance 1 until weights are loaded.
    ``implementation="fused"`` does resize, flip, rotation and zoom as one
    affine resample (:class:`ablation.augment.affine.AffineAugmentation`, fast on every
    backend); ``"keras_layers"`` chains the keras.io example's four layers;
    ``"official"`` leaves only normalisation and resizing here, the per-image
    recipe running in the input pipeline (:mod:`ablation.augment.official`).
    Under ``fused``/``keras_layers``, the official recipe's steps (``crop_padding``,
    ``policy``, ``random_erasing``; off by default) are built from Keras' own layers by
    :func:`ablation.augment.recipe.recipe_layers` around the steps here: an
    approximation of the official recipe, not the recipe (see docs/paper-recipe.md);
    ``input_size`` is the side of the images fed in (before resizing), which
    the padded crop is relative to. Every random layer gets its own seed
    derived from ``seed`` (:func:`ablation.augment.seeding.layer_seed`).
    ``pipeline``: the augmentation config's keys the input pipeline reads
    (``mixing``, ``normalization``), ignored here.
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
