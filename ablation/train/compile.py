"""How a job's model is built and compiled for training (:func:`compiled_model`):
AdamW on the warm-up cosine schedule, the loss and the top-1/top-5 metrics, all
weighted by sample so that short batches can be padded (:func:`pad_batches`)."""
from __future__ import annotations

import logging
from collections.abc import Mapping

import keras

from ablation.data import Dataset
from ablation.model import build_model
from ablation.train.epoch_metrics import MeanLoss
from ablation.train.inputs import Feed
from ablation.train.optimizer import build_optimizer
from ablation.train.schedules import WarmupCosineDecay

log = logging.getLogger(__name__)


def learning_rate_schedule(trainer: Mapping, steps_per_epoch: int):
    """Linear warm-up (``warmup_epochs``, else ``warmup_fraction`` of all steps), then
    per-step cosine from the peak down to ``min_learning_rate``."""
    total = int(trainer["epochs"]) * steps_per_epoch
    if trainer["warmup_epochs"] is not None:
        warmup = min(int(trainer["warmup_epochs"]) * steps_per_epoch, total - 1)
    else:
        warmup = int(total * float(trainer["warmup_fraction"]))
    peak = float(trainer["learning_rate"])
    floor = float(trainer["min_learning_rate"])
    alpha = floor / peak  # the floor, as a share of the peak
    if warmup == 0:
        return keras.optimizers.schedules.CosineDecay(peak, decay_steps=total, alpha=alpha)
    # the warm-up rises linearly from the floor (keras_io: 0; the official code: 1e-6)
    return WarmupCosineDecay(
        floor, decay_steps=max(total - warmup, 1),
        warmup_target=peak, warmup_steps=warmup, alpha=alpha)


def compile_model(model: keras.Model, trainer: Mapping, steps_per_epoch: int,
                  num_classes: int, soft_targets: bool = False) -> keras.Model:
    """AdamW on the schedule; with ``soft_targets`` (label smoothing, Mixup/CutMix)
    the loss and metrics take one-hot/soft rows instead of class ids.

    Sample weights (0 on padding rows) count everywhere: the loss is the
    weighted mean (``mean_with_sample_weight``), the metrics are
    ``weighted_metrics`` and the epoch's ``loss`` is :class:`MeanLoss`.
    """
    k = min(5, num_classes)
    smoothing = float(trainer["label_smoothing"])
    if soft_targets:
        loss = keras.losses.CategoricalCrossentropy(
            from_logits=True, label_smoothing=smoothing, reduction="mean_with_sample_weight")
        metrics = [keras.metrics.CategoricalAccuracy(name="top1"),
                   keras.metrics.TopKCategoricalAccuracy(k=k, name="top5")]
    else:
        loss = keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, reduction="mean_with_sample_weight")
        metrics = [keras.metrics.SparseCategoricalAccuracy(name="top1"),
                   keras.metrics.SparseTopKCategoricalAccuracy(k=k, name="top5")]
    model.compile(
        optimizer=build_optimizer(trainer, learning_rate_schedule(trainer, steps_per_epoch)),
        loss=loss,
        weighted_metrics=[MeanLoss(soft=soft_targets, label_smoothing=smoothing), *metrics])
    return model


def pad_batches(trainer: Mapping, model: keras.Model) -> bool:
    """``trainer.pad_batches``: fill short batches with weight-0 rows, so XLA compiles
    one program. ``auto`` pads where the model is compiled with XLA. Only for a
    model compiled to weigh samples as :func:`compile_model` does (a checkpoint's
    comes compiled as it was saved).
    """
    setting = trainer["pad_batches"]
    if not (bool(model.jit_compile) if setting == "auto" else setting):
        return False
    config = model.get_compile_config() or {}
    weighted = (getattr(model.loss, "reduction", None) == "mean_with_sample_weight"
                and not config.get("metrics") and bool(config.get("weighted_metrics")))
    if not weighted:
        log.info("the checkpoint's model does not weigh its loss and metrics by sample: "
                 "its batches are not padded")
    return weighted


def use_precision(trainer: Mapping) -> None:
    """``trainer.precision`` as Keras's global dtype policy (``mixed_float16``...)."""
    keras.mixed_precision.set_global_policy(str(trainer["precision"]))


def compiled_model(config: Mapping, data: Dataset, statistics) -> keras.Model:
    """The job's model, built from its seed with the normalisation ``statistics``
    and compiled for its schedule: what training starts from (and what the
    sweep's speed probe times)."""
    feed = Feed.of(config)
    keras.utils.set_random_seed(int(config["seed"]))
    model = build_model(config, data.num_classes, data.input_shape, normalization=statistics)
    model = compile_model(model, config["trainer"], feed.steps_per_epoch(len(data.x_train)),
                          data.num_classes, soft_targets=feed.soft)
    return with_optimizer_state(model)


def with_optimizer_state(model: keras.Model) -> keras.Model:
    """``model`` with its optimizer's variables made (a no-op where they exist):
    made in the first step, they make TensorFlow trace the step twice."""
    if model.optimizer is not None and not model.optimizer.built:
        model.optimizer.build(model.trainable_variables)
    return model
