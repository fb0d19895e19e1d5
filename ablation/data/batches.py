"""The training input pipeline: batches, repeated passes, Mixup/CutMix, soft targets.

Mixing needs the labels, so it cannot live in the model with the per-image
augmentation (:mod:`ablation.augment`); it lives here, in a
``keras.utils.PyDataset`` over numpy arrays, so it runs unchanged on the
TensorFlow, JAX and PyTorch backends. The mixing itself is Keras' own
``MixUp`` and ``CutMix`` layers; only CutMix's label weight is recomputed
from the pixels actually pasted (Keras weighs labels by the continuous box
area, which differs from the pasted pixel count by up to a row and a column).

One "epoch" is ``passes`` shuffled passes over the training set (the
official code's repeated-augmentation sampler with ``--ra 3`` and one
repetition lengthens each epoch threefold). Batch order depends only on the
seed and the epoch, so a resumed run sees the same order it would have.
"""
from __future__ import annotations

import math
from collections.abc import Mapping

import keras
import numpy as np
from keras import ops


def one_hot(labels: np.ndarray, num_classes: int) -> np.ndarray:
    """Integer labels -> float32 one-hot rows (the soft-target form every loss here takes)."""
    out = np.zeros((len(labels), num_classes), dtype=np.float32)
    out[np.arange(len(labels)), np.asarray(labels, dtype=np.int64)] = 1.0
    return out


class Mixer:
    """Mixup (Beta(alpha, alpha)) or CutMix (Beta(beta, beta)) on a batch, with probability.

    With probability ``probability`` a batch is mixed, by CutMix or Mixup with
    equal chance (the official recipe: 0.5, alpha = beta = 1); otherwise it
    passes unchanged. Each image is mixed with a partner from a shuffle of the
    batch; its target becomes ``w * own + (1 - w) * partner`` where ``w`` is the
    Mixup weight or the share of its own pixels left after the paste.
    """

    def __init__(self, probability: float = 0.5, mixup_alpha: float = 1.0,
                 cutmix_alpha: float = 1.0, seed: int | None = None):
        if not 0.0 <= float(probability) <= 1.0:
            raise ValueError(f"mixing probability must be in [0, 1], got {probability!r}")
        self.probability = float(probability)
        self.rng = np.random.default_rng(seed)
        self.mixup = (keras.layers.MixUp(alpha=float(mixup_alpha), seed=seed)
                      if mixup_alpha else None)
        # factor=(b, b): Beta(b, b) exactly; a single number would draw the
        # Beta parameter itself uniformly from [0, b].
        self.cutmix = (keras.layers.CutMix(factor=(float(cutmix_alpha), float(cutmix_alpha)),
                                           seed=seed) if cutmix_alpha else None)

    def choose(self, rng: np.random.Generator | None = None) -> str | None:
        """``mixup``, ``cutmix`` or None for the next batch."""
        rng = rng or self.rng
        kinds = [k for k, layer in (("cutmix", self.cutmix), ("mixup", self.mixup)) if layer]
        if not kinds or rng.random() >= self.probability:
            return None
        return kinds[int(rng.integers(len(kinds)))]

    def apply(self, kind: str, images: np.ndarray, targets: np.ndarray,
              seed: int | None = None):
        """Mix one batch with ``kind``; returns numpy (images, targets).

        With ``seed`` the draws depend on it alone (a fresh generator per
        batch), so batches prepared by parallel workers stay reproducible.
        """
        layer = self.cutmix if kind == "cutmix" else self.mixup
        data = {"images": ops.convert_to_tensor(images), "labels": ops.convert_to_tensor(targets)}
        generator = None if seed is None else keras.random.SeedGenerator(seed)
        t = layer.get_random_transformation(data, training=True, seed=generator)
        mixed = layer.transform_images(data["images"], t, training=True)
        order = ops.convert_to_numpy(t["permutation_order"]).astype(np.int64)
        if kind == "cutmix":  # weight = share of own pixels actually left
            pasted = ops.convert_to_numpy(t["batch_masks"]).astype(np.float32)
            weight = 1.0 - pasted.reshape(len(images), -1).mean(axis=1)
        else:
            weight = ops.convert_to_numpy(t["mix_weight"]).astype(np.float32).reshape(-1)
        weight = weight[:, None]
        targets = weight * targets + (1.0 - weight) * targets[order]
        return ops.convert_to_numpy(mixed).astype(np.float32), targets.astype(np.float32)

    def __call__(self, images: np.ndarray, targets: np.ndarray, key: tuple | None = None):
        """Mix (or not) one batch; ``key`` (seed, epoch, batch) makes it reproducible."""
        if key is None:
            kind, seed = self.choose(), None
        else:
            rng = np.random.default_rng(key)
            kind, seed = self.choose(rng), int(rng.integers(2**31 - 1))
        return (images, targets) if kind is None else self.apply(kind, images, targets, seed)


class TrainingBatches(keras.utils.PyDataset):
    """Shuffled training batches: ``passes`` passes per epoch, optional mixing.

    Targets are one-hot float rows when ``soft`` (needed by label smoothing
    and mixing), else the integer labels. The last batch of an epoch may be
    short (as ``model.fit`` on arrays).
    """

    def __init__(self, x: np.ndarray, y: np.ndarray, num_classes: int, batch_size: int, *,
                 passes: int = 1, soft: bool = False, mixer: Mixer | None = None,
                 seed: int = 0, initial_epoch: int = 0, **kwargs):
        super().__init__(**kwargs)
        if int(passes) < 1:
            raise ValueError(f"passes must be >= 1, got {passes!r}")
        self.x, self.y = x, np.asarray(y)
        self.num_classes = int(num_classes)
        self.batch_size = int(batch_size)
        self.passes = int(passes)
        self.soft = bool(soft or mixer is not None)
        self.mixer = mixer
        self.seed = int(seed)
        self.epoch = int(initial_epoch)
        self._order()

    def _order(self) -> None:
        rng = np.random.default_rng([self.seed, self.epoch])
        self.order = np.concatenate([rng.permutation(len(self.x)) for _ in range(self.passes)])

    def __len__(self) -> int:
        return math.ceil(len(self.order) / self.batch_size)

    def __getitem__(self, index: int):
        rows = self.order[index * self.batch_size:(index + 1) * self.batch_size]
        images = self.x[rows]
        if not self.soft:
            return images, self.y[rows]
        targets = one_hot(self.y[rows], self.num_classes)
        if self.mixer is not None:
            images, targets = self.mixer(images, targets, key=(self.seed, self.epoch, index))
        return images, targets

    def on_epoch_end(self) -> None:
        self.epoch += 1
        self._order()


def needs_pipeline(trainer: Mapping, augmentation: Mapping) -> bool:
    """Whether a run needs :class:`TrainingBatches` (else plain arrays go to ``fit``)."""
    mixing = (augmentation or {}).get("mixing") or {}
    return (int(trainer.get("passes_per_epoch", 1)) > 1
            or float(trainer.get("label_smoothing", 0.0)) > 0
            or float(mixing.get("probability", 0.0)) > 0)


def soft_targets(trainer: Mapping, augmentation: Mapping) -> bool:
    """Label smoothing and mixing train on one-hot/soft targets."""
    mixing = (augmentation or {}).get("mixing") or {}
    return (float(trainer.get("label_smoothing", 0.0)) > 0
            or float(mixing.get("probability", 0.0)) > 0)


def training_batches(x, y, num_classes: int, trainer: Mapping, augmentation: Mapping,
                     seed: int, initial_epoch: int = 0) -> TrainingBatches:
    """The pipeline a run's ``trainer`` and ``augmentation`` config describe.

    ``trainer.data_workers`` > 1 prepares that many batches at once in threads
    (Keras' ``PyDataset`` workers; the mixing's backend ops release the GIL).
    """
    workers = int(trainer.get("data_workers") or 1)
    mixing = dict((augmentation or {}).get("mixing") or {})
    mixer = None
    if float(mixing.get("probability", 0.0)) > 0:
        mixer = Mixer(float(mixing["probability"]), float(mixing.get("mixup_alpha", 1.0)),
                      float(mixing.get("cutmix_alpha", 1.0)), seed=seed)
    return TrainingBatches(x, y, num_classes, int(trainer["batch_size"]),
                           passes=int(trainer.get("passes_per_epoch", 1)),
                           soft=soft_targets(trainer, augmentation), mixer=mixer, seed=seed,
                           initial_epoch=initial_epoch, workers=workers,
                           use_multiprocessing=False)
