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
from ablation.data import Dataset, load_dataset_cached
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
    """Linear warm-up over ``warmup_fraction`` of the steps, then cosine to 0.

    The keras.io example builds this schedule and never hands it to the
    optimizer; here it is applied.
    """
    total = int(trainer["epochs"]) * steps_per_epoch
    warmup = int(total * float(trainer["warmup_fraction"]))
    peak = float(trainer["learning_rate"])
    if warmup == 0:
        return keras.optimizers.schedules.CosineDecay(peak, decay_steps=total)
    return keras.optimizers.schedules.CosineDecay(
        0.0, decay_steps=max(total - warmup, 1), warmup_target=peak, warmup_steps=warmup)


def compile_model(model: keras.Model, trainer: Mapping, steps_per_epoch: int,
                  num_classes: int) -> keras.Model:
    model.compile(
        optimizer=keras.optimizers.AdamW(
            learning_rate=learning_rate_schedule(trainer, steps_per_epoch),
            weight_decay=float(trainer["weight_decay"])),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=[
            keras.metrics.SparseCategoricalAccuracy(name="top1"),
            keras.metrics.SparseTopKCategoricalAccuracy(k=min(5, num_classes), name="top5"),
        ],
    )
    return model


def train(config: Mapping, data: Dataset, tracker: Tracker, checkpoint_dir: Path,
          resume_from: Checkpoint | None = None) -> dict:
    """Train and evaluate one configuration; returns the measured part of a record.

    With ``resume_from``, training continues after its epoch with its weights,
    optimizer state (so the schedule continues too) and the layers' random
    states; the data order is reseeded from the seed and that epoch, so a
    resumed run is reproducible, though not bit-identical to an unbroken one.
    """
    trainer = config["trainer"]
    seed = int(config["seed"])
    batch = int(trainer["batch_size"])
    epochs = EpochMetrics(tracker)
    # Per job: a sweep's jobs in one process may ask for different precisions.
    keras.mixed_precision.set_global_policy(str(trainer.get("precision", "float32")))
    if resume_from is None:
        keras.utils.set_random_seed(seed)
        model = build_model(config, data.num_classes, data.input_shape,
                            normalization_data=data.x_train)
        steps_per_epoch = math.ceil(len(data.x_train) / batch)
        compile_model(model, trainer, steps_per_epoch, data.num_classes)
        initial_epoch = 0
    else:
        model, initial_epoch = resume_from.model, resume_from.epoch  # reseeded by the loader
        epochs.history = list(resume_from.state["history"])
        log.info("resuming from the end of epoch %d", initial_epoch)
    params = int(model.count_params())
    log.info("%s: %d train / %d val / %d test images %s, %s classes, %s parameters",
             data.name, len(data.x_train), len(data.x_val), len(data.x_test),
             data.input_shape, data.num_classes, f"{params:,}")

    callbacks = [epochs, keras.callbacks.TerminateOnNaN()]
    if trainer.get("checkpoint", True):
        callbacks.append(EpochCheckpoint(checkpoint_dir, epochs, extra={
            "wandb_id": tracker.info()["id"], "config": redact(dict(config))}))
    started = time.perf_counter()
    model.fit(
        data.x_train, data.y_train,
        validation_data=(data.x_val, data.y_val),
        epochs=int(trainer["epochs"]), initial_epoch=initial_epoch,
        batch_size=batch, shuffle=True, callbacks=callbacks,
        verbose=trainer.get("verbose", "auto"),
    )
    train_seconds = time.perf_counter() - started
    losses = [row.get("train/loss", math.nan) for row in epochs.history]
    if not epochs.history or not all(math.isfinite(v) for v in losses):
        raise TrainingDiverged(
            f"training loss became {losses[-1] if losses else 'undefined'} at epoch "
            f"{len(epochs.history)}; lower trainer.learning_rate")

    test = model.evaluate(data.x_test, data.y_test, batch_size=batch, verbose=0,
                          return_dict=True)
    val_top1 = [row["val/top1"] for row in epochs.history if "val/top1" in row]
    measured = {
        "metrics": {
            "test_top1": float(test["top1"]),
            "test_top5": float(test["top5"]),
            "test_loss": float(test["loss"]),
            "best_val_top1": max(val_top1) if val_top1 else None,
            "final_val_top1": val_top1[-1] if val_top1 else None,
        },
        "history": epochs.history,
        "params": params,
        "epochs_completed": len(epochs.history),
        "resumed_from_epoch": initial_epoch or None,
        "train_seconds": train_seconds,
        "train_images_per_s": epochs.images_per_second(len(data.x_train)),
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
        "train_seconds": train_seconds,
        "train_images_per_s": measured["train_images_per_s"],
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
    data = load_dataset_cached(config["dataset"], int(config["seed"]))
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
