"""One job: load data, build the model, train, evaluate, record, track.

``run_job(cfg, output_dir)`` is the whole job and is what ``run_sweep.py``
calls; it always leaves a ``run.json`` (``completed`` or ``failed``) and
finishes its W&B run, so one bad job never leaks into the next.
"""
from __future__ import annotations

import gc
import logging
import math
import platform
import time
import traceback
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path

import keras
from omegaconf import DictConfig, OmegaConf

from ablation.callbacks import EpochMetrics
from ablation.checkpoint import Checkpoint, EpochCheckpoint, load_checkpoint
from ablation.checkpoint import remove as remove_checkpoint
from ablation.config import check_same_config, redact, switches, validate, variant_name
from ablation.data import Dataset, load_dataset
from ablation.model import build_model
from ablation.records import (CHECKPOINT_DIR, RECORD_FILENAME, SCHEMA_VERSION, earlier_run,
                              write_record)
from ablation.tracking import Tracker, tracked_run

log = logging.getLogger(__name__)


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite."""


def plain_config(cfg) -> dict:
    """A resolved, plain-dict copy of the config (what records and W&B store)."""
    if isinstance(cfg, DictConfig):
        return OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)
    return dict(cfg)


def learning_rate_schedule(trainer: Mapping, steps_per_epoch: int):
    """Linear warm-up, then per-step cosine from the peak down to ``min_learning_rate``.

    The warm-up is ``warmup_epochs`` epochs when set (the official code: 10),
    else ``warmup_fraction`` of all steps. The keras.io example builds this
    schedule and never hands it to the optimizer; here it is applied.
    """
    total = int(trainer["epochs"]) * steps_per_epoch
    if trainer.get("warmup_epochs") is not None:
        warmup = min(int(trainer["warmup_epochs"]) * steps_per_epoch, total - 1)
    else:
        warmup = int(total * float(trainer["warmup_fraction"]))
    peak = float(trainer["learning_rate"])
    alpha = float(trainer.get("min_learning_rate") or 0.0) / peak  # floor, as a share of peak
    if warmup == 0:
        return keras.optimizers.schedules.CosineDecay(peak, decay_steps=total, alpha=alpha)
    # the warm-up rises linearly from the floor (0 by default; the official code: 1e-6)
    return keras.optimizers.schedules.CosineDecay(
        float(trainer.get("min_learning_rate") or 0.0), decay_steps=max(total - warmup, 1),
        warmup_target=peak, warmup_steps=warmup, alpha=alpha)


def compile_model(model: keras.Model, trainer: Mapping, steps_per_epoch: int,
                  num_classes: int, soft_targets: bool = False) -> keras.Model:
    """AdamW on the schedule; with ``soft_targets`` (label smoothing, Mixup/CutMix)
    the loss and metrics take one-hot/soft target rows instead of class ids."""
    k = min(5, num_classes)
    if soft_targets:
        loss = keras.losses.CategoricalCrossentropy(
            from_logits=True, label_smoothing=float(trainer.get("label_smoothing", 0.0)))
        metrics = [keras.metrics.CategoricalAccuracy(name="top1"),
                   keras.metrics.TopKCategoricalAccuracy(k=k, name="top5")]
    else:
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        metrics = [keras.metrics.SparseCategoricalAccuracy(name="top1"),
                   keras.metrics.SparseTopKCategoricalAccuracy(k=k, name="top5")]
    model.compile(
        optimizer=keras.optimizers.AdamW(
            learning_rate=learning_rate_schedule(trainer, steps_per_epoch),
            weight_decay=float(trainer["weight_decay"])),
        loss=loss, metrics=metrics)
    return model


def trainable_count(model: keras.Model) -> int:
    """Trainable parameters (not the normalisation statistics or other state)."""
    import numpy as np

    return int(sum(np.prod(w.shape) for w in model.trainable_weights))


def protocol_data(data: Dataset, protocol: str) -> Dataset:
    """``official``: train on the whole training set (the validation split goes
    back in) and evaluate the test set every epoch; ``holdout``: unchanged."""
    import numpy as np

    if protocol == "holdout":
        return data
    if protocol != "official":
        raise ValueError(f"trainer.protocol={protocol!r} is not one of holdout, official")
    return Dataset(data.name, np.concatenate([data.x_train, data.x_val]),
                   np.concatenate([data.y_train, data.y_val]),
                   data.x_val[:0], data.y_val[:0], data.x_test, data.y_test, data.class_names)


def train(config: Mapping, data: Dataset, tracker: Tracker, checkpoint_dir: Path,
          resume_from: Checkpoint | None = None) -> dict:
    """Train and evaluate one configuration; returns the measured part of a record.

    With ``resume_from``, training continues after its epoch with its weights,
    optimizer state (so the schedule continues too) and the layers' random
    states; the data order is reseeded from the seed and that epoch, so a
    resumed run is reproducible, though not bit-identical to an unbroken one.
    """
    from ablation.pipeline import needs_pipeline, one_hot, soft_targets, training_batches

    trainer = config["trainer"]
    seed = int(config["seed"])
    batch = int(trainer["batch_size"])
    protocol = trainer.get("protocol", "holdout")
    data = protocol_data(data, protocol)
    official = protocol == "official"
    soft = soft_targets(trainer, config.get("augmentation") or {})
    epochs = EpochMetrics(tracker, validation_name="test" if official else "val")
    if resume_from is None:
        keras.utils.set_random_seed(seed)
        model = build_model(config, data.num_classes, data.input_shape,
                            normalization_data=data.x_train)
        passes = int(trainer.get("passes_per_epoch", 1))
        steps_per_epoch = math.ceil(len(data.x_train) * passes / batch)
        compile_model(model, trainer, steps_per_epoch, data.num_classes, soft_targets=soft)
        initial_epoch = 0
    else:
        model, initial_epoch = resume_from.model, resume_from.epoch  # reseeded by the loader
        epochs.history = list(resume_from.state["history"])
        log.info("resuming from the end of epoch %d", initial_epoch)
    params = int(model.count_params())
    trainable_params = trainable_count(model)
    log.info("%s: %d train / %d val / %d test images %s, %s classes, %s parameters",
             data.name, len(data.x_train), len(data.x_val), len(data.x_test),
             data.input_shape, data.num_classes, f"{params:,}")

    callbacks = [epochs, keras.callbacks.TerminateOnNaN()]
    if trainer.get("checkpoint", True):
        callbacks.append(EpochCheckpoint(checkpoint_dir, epochs, extra={
            "wandb_id": tracker.info()["id"], "config": redact(dict(config))}))
    targets = (lambda y: one_hot(y, data.num_classes)) if soft else (lambda y: y)  # noqa: E731
    evaluation = (data.x_test, targets(data.y_test)) if official else (
        data.x_val, targets(data.y_val))
    if needs_pipeline(trainer, config.get("augmentation") or {}):
        # repeated passes, Mixup/CutMix and soft targets: ablation.pipeline
        inputs = dict(x=training_batches(data.x_train, data.y_train, data.num_classes, trainer,
                                         config.get("augmentation") or {}, seed,
                                         initial_epoch=initial_epoch))
    else:
        inputs = dict(x=data.x_train, y=data.y_train, batch_size=batch, shuffle=True)
    started = time.perf_counter()
    model.fit(
        **inputs,
        validation_data=evaluation, validation_batch_size=batch,
        epochs=int(trainer["epochs"]), initial_epoch=initial_epoch,
        callbacks=callbacks,
        verbose=trainer.get("verbose", "auto"),
    )
    train_seconds = time.perf_counter() - started
    losses = [row.get("train/loss", math.nan) for row in epochs.history]
    if not epochs.history or not all(math.isfinite(v) for v in losses):
        raise TrainingDiverged(
            f"training loss became {losses[-1] if losses else 'undefined'} at epoch "
            f"{len(epochs.history)}; lower trainer.learning_rate")

    test = model.evaluate(data.x_test, targets(data.y_test), batch_size=batch, verbose=0,
                          return_dict=True)
    val_top1 = [row["val/top1"] for row in epochs.history if "val/top1" in row]
    metrics = {
        "test_top1": float(test["top1"]),
        "test_top5": float(test["top5"]),
        "test_loss": float(test["loss"]),
        "best_val_top1": max(val_top1) if val_top1 else None,
        "final_val_top1": val_top1[-1] if val_top1 else None,
    }
    if official:  # the official code reports the best epoch's test accuracy
        rows = [row for row in epochs.history if "test/top1" in row]
        best = max(rows, key=lambda row: row["test/top1"]) if rows else {}
        metrics.update(best_test_top1=best.get("test/top1"), best_test_top5=best.get("test/top5"),
                       best_test_epoch=best.get("epoch"))
    measured = {
        "metrics": metrics,
        "protocol": protocol,
        "trainable_params": trainable_params,
        "history": epochs.history,
        "params": params,
        "epochs_completed": len(epochs.history),
        "resumed_from_epoch": initial_epoch or None,
        "train_seconds": train_seconds,
        "train_images_per_s": epochs.images_per_second(
            len(data.x_train) * int(trainer.get("passes_per_epoch", 1))),
        "data": {"train": len(data.x_train), "val": len(data.x_val),
                 "test": len(data.x_test), "input_shape": list(data.input_shape),
                 "num_classes": data.num_classes},
    }
    tracker.summarize({
        "test/top1": measured["metrics"]["test_top1"],
        "test/top5": measured["metrics"]["test_top5"],
        "test/loss": measured["metrics"]["test_loss"],
        "best_val/top1": measured["metrics"]["best_val_top1"],
        "params": params,
        "trainable_params": trainable_params,
        "train_seconds": train_seconds,
        "train_images_per_s": measured["train_images_per_s"],
        **({"best_test/top1": metrics["best_test_top1"]} if official else {}),
    })
    return measured


def base_record(config: Mapping) -> dict:
    """What a run is, before it has measured anything."""
    flags = switches(config)
    return {
        "schema": SCHEMA_VERSION,
        "status": "running",
        "run_name": config.get("run_name") or f"{variant_name(**flags)}-s{config['seed']}",
        "variant": variant_name(**flags),
        "switches": flags,
        "dataset": config["dataset"]["name"],
        "model": config["model"]["name"],
        "seed": int(config["seed"]),
        "metrics": {},
        "history": [],
        "params": None,
        "resumed_from_epoch": None,
        "train_seconds": None,
        "train_images_per_s": None,
        "wandb": {"id": None, "dir": None, "mode": config["wandb"]["mode"]},
        "environment": {
            "backend": keras.backend.backend(),
            "keras": keras.__version__,
            "python": platform.python_version(),
            "host": platform.node(),
        },
        "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "finished_at": None,
        "config": redact(dict(config)),
        "error": None,
    }


def write_failure(cfg, output_dir: str | Path, error: BaseException) -> dict:
    """A ``failed`` record for a job that failed before writing its own."""
    record = base_record(plain_config(cfg))
    record.update(status="failed", error=f"{type(error).__name__}: {error}",
                  traceback="".join(traceback.format_exception(error)),
                  finished_at=datetime.now(timezone.utc).isoformat(timespec="seconds"))
    write_record(output_dir, record)
    return record


def run_tags(config: Mapping) -> list[str]:
    flags = switches(config)
    return [variant_name(**flags), *(f"{k}={'on' if v else 'off'}" for k, v in flags.items()),
            config["dataset"]["name"], config["model"]["name"]]


def set_aside(output_dir: Path) -> None:
    """``resume=false``: move an earlier run's outputs to ``.replaced/<time>/``."""
    old = [output_dir / n for n in (RECORD_FILENAME, CHECKPOINT_DIR, "wandb")
           if (output_dir / n).exists()]
    if old:
        target = output_dir / ".replaced" / datetime.now().strftime("%Y%m%d-%H%M%S-%f")
        target.mkdir(parents=True)
        for path in old:
            path.rename(target / path.name)
        log.info("earlier outputs moved to %s", target)


def run_job(cfg, output_dir: str | Path) -> dict:
    """Validate, train, evaluate, and leave ``output_dir/run.json``; returns the record.

    Bad config values and unloadable data raise before anything is written.
    A run already completed here with the same configuration is not run again
    (its record is returned); an interrupted one resumes from its checkpoint;
    ``resume=false`` sets earlier outputs aside and starts over.
    A failure inside training is written to the record (``status: failed``,
    ``error``, ``traceback``), marks the W&B run failed, and is re-raised so
    the launcher counts it.
    """
    config = plain_config(cfg)
    validate(config)
    output_dir = Path(output_dir)
    if config.get("resume", True):
        previous = earlier_run(output_dir)
        check_same_config(previous, config, output_dir)
        if previous is not None and previous.get("status") == "completed":
            log.info("%s already completed here: skipped", previous.get("run_name"))
            return previous
    else:
        set_aside(output_dir)
    # Data problems (no network, a bad path) surface here, before any record
    # or W&B run exists.
    data = load_dataset(config["dataset"], int(config["seed"]))
    record = base_record(config)
    keras.backend.clear_session(free_memory=True)
    checkpoint_dir = output_dir / CHECKPOINT_DIR
    try:
        resume_from = (load_checkpoint(checkpoint_dir, int(config["seed"]))
                       if config.get("resume", True) else None)
        with tracked_run(config["wandb"], name=record["run_name"], config=redact(config),
                         tags=run_tags(config), output_dir=output_dir,
                         run_id=resume_from.state.get("wandb_id") if resume_from else None
                         ) as tracker:
            record["wandb"] = tracker.info()  # its mode may be offline after a fallback
            record.update(train(config, data, tracker, checkpoint_dir, resume_from))
            record["status"] = "completed"
    except BaseException as e:
        record["status"] = "failed"
        record["error"] = f"{type(e).__name__}: {e}"
        record["traceback"] = traceback.format_exc()
        raise
    finally:
        record["finished_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
        write_record(output_dir, record)
        if record["status"] == "completed":
            remove_checkpoint(checkpoint_dir)
        keras.backend.clear_session(free_memory=True)
        gc.collect()
    return record
