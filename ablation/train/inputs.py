"""What a job trains and evaluates on: the protocol's splits, the training
input (the pipeline of :mod:`ablation.data.batches`), the evaluated splits
with their targets. :class:`Feed` reads how training is fed from the run's
config, in one place, for the pipeline, the schedule and the measured speed."""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ablation.data import Dataset


@dataclass(frozen=True)
class Feed:
    """How a run's training is fed: the batch, the passes over the training set per
    epoch, the targets (one-hot/soft for label smoothing and mixing), the mixing,
    the per-image augmentation of the pipeline and its worker threads."""
    batch_size: int
    passes: int
    soft: bool
    mixing: tuple[float, float, float] | None  # (probability, Mixup alpha, CutMix alpha)
    official_augmentation: Mapping | None  # augmentation.implementation=official: its keys
    workers: int

    @classmethod
    def of(cls, config: Mapping) -> Feed:
        """The feed a validated run config describes (``trainer``, ``augmentation``)."""
        trainer, augmentation = config["trainer"], config["augmentation"]
        mixing = augmentation["mixing"]
        mixed = float(mixing["probability"]) > 0
        return cls(batch_size=int(trainer["batch_size"]),
                   passes=int(trainer["passes_per_epoch"]),
                   soft=float(trainer["label_smoothing"]) > 0 or mixed,
                   mixing=(float(mixing["probability"]), float(mixing["mixup_alpha"]),
                           float(mixing["cutmix_alpha"])) if mixed else None,
                   official_augmentation=augmentation
                   if augmentation["implementation"] == "official" else None,
                   workers=int(trainer["data_workers"]))

    def images_per_epoch(self, train_images: int) -> int:
        return int(train_images) * self.passes

    def steps_per_epoch(self, train_images: int) -> int:
        return math.ceil(self.images_per_epoch(train_images) / self.batch_size)

    def pipeline(self, x_train: np.ndarray, statistics) -> dict:
        """The arguments of :func:`ablation.data.batches.training_batches` but the
        seed and the epoch; ``statistics``: the model's normalisation (the official
        erasing fill is given in its units), by default the exact statistics of ``x_train``."""
        from ablation.augment.normalization import channel_statistics
        from ablation.augment.official import from_config as official_augment

        augment = (None if self.official_augmentation is None else official_augment(
            self.official_augmentation, statistics or channel_statistics(x_train)))
        return dict(batch_size=self.batch_size, passes=self.passes, soft=self.soft,
                    mixing=self.mixing, augment=augment, workers=self.workers)


def protocol_data(data: Dataset, protocol: str) -> Dataset:
    """``official``: train on the whole training set (the validation split goes
    back in) and evaluate the test set every epoch; ``holdout``: unchanged."""
    if protocol == "holdout":
        return data
    return Dataset(data.name, np.concatenate([data.x_train, data.x_val]),
                   np.concatenate([data.y_train, data.y_val]),
                   data.x_val[:0], data.y_val[:0], data.x_test, data.y_test, data.class_names)


def evaluation_split(config: Mapping, data: Dataset, pad: bool, x, y) -> tuple:
    """An evaluated split as (x, targets[, sample weights]): one-hot rows for soft
    targets, else class ids; with ``pad``, whole batches only."""
    from ablation.data.batches import one_hot, padded

    feed = Feed.of(config)
    if feed.soft:
        y = one_hot(y, data.num_classes)
    return padded(x, y, feed.batch_size) if pad else (x, y)


def training_inputs(config: Mapping, data: Dataset, pad: bool, initial_epoch: int,
                     statistics) -> dict:
    """``fit``'s training data: the input pipeline of :mod:`ablation.data.batches`, for
    every recipe, so the batch order is drawn from the seed and the epoch alone (Keras'
    shuffle of arrays deals the same order every epoch on TensorFlow)."""
    from ablation.data.batches import training_batches

    return dict(x=training_batches(data.x_train, data.y_train, data.num_classes,
                                   **Feed.of(config).pipeline(data.x_train, statistics),
                                   seed=int(config["seed"]), initial_epoch=initial_epoch, pad=pad))
