"""What a job trains and evaluates on: the protocol's splits, the training
input (arrays, or the augmentation pipeline of :mod:`ablation.data.batches`),
the evaluated splits with their targets."""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ablation.data import Dataset


def protocol_data(data: Dataset, protocol: str) -> Dataset:
    """``official``: train on the whole training set (the validation split goes
    back in) and evaluate the test set every epoch; ``holdout``: unchanged."""
    if protocol == "holdout":
        return data
    if protocol != "official":
        raise ValueError(f"trainer.protocol={protocol!r} is not one of holdout, official")
    return Dataset(data.name, np.concatenate([data.x_train, data.x_val]),
                   np.concatenate([data.y_train, data.y_val]),
                   data.x_val[:0], data.y_val[:0], data.x_test, data.y_test, data.class_names)


def evaluation_split(config: Mapping, data: Dataset, pad: bool, x, y) -> tuple:
    """An evaluated split as (x, targets[, sample weights]): one-hot rows for soft
    targets, else class ids; with ``pad``, whole batches only."""
    from ablation.data.batches import one_hot, padded, soft_targets

    if soft_targets(config["trainer"], config.get("augmentation") or {}):
        y = one_hot(y, data.num_classes)
    return padded(x, y, int(config["trainer"]["batch_size"])) if pad else (x, y)


def training_inputs(config: Mapping, data: Dataset, pad: bool, initial_epoch: int,
                     statistics) -> dict:
    """``fit``'s training data: the input pipeline (repeated passes, augmentation,
    Mixup/CutMix, soft targets, padding: :mod:`ablation.data.batches`) where the
    config needs it, else the arrays, shuffled by Keras."""
    from ablation.data.batches import needs_pipeline, training_batches

    trainer, augmentation = config["trainer"], config.get("augmentation") or {}
    if pad or needs_pipeline(trainer, augmentation):
        return dict(x=training_batches(data.x_train, data.y_train, data.num_classes, trainer,
                                       augmentation, int(config["seed"]),
                                       initial_epoch=initial_epoch, pad=pad,
                                       statistics=statistics))
    return dict(x=data.x_train, y=data.y_train, batch_size=int(trainer["batch_size"]),
                shuffle=True)
