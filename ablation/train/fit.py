"""The training loop of one job: build, compile, fit, evaluate, measure (the job's
lifecycle around it is :mod:`ablation.job.lifecycle`)."""
from __future__ import annotations

import logging
import math
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import keras
import numpy as np

from ablation.augment.normalization import model_statistics, normalization_statistics
from ablation.data import Dataset
from ablation.data.formats import one_line
from ablation.model.saved import MODEL_FILENAME, save_trained
from ablation.runs.tracking import Tracker
from ablation.runtime.provenance import UNKNOWN_CODE, code_history
from ablation.runtime.signals import pending_stop
from ablation.runtime.sweep_context import current
from ablation.train import locality_probe
from ablation.train.checkpoint import Checkpoint, EpochCheckpoint
from ablation.train.compile import compiled_model, pad_batches, use_precision, with_optimizer_state
from ablation.train.epoch_metrics import EpochMetrics
from ablation.train.inputs import Feed, evaluation_split, protocol_data, training_inputs
from ablation.train.progress import progress_line, prints_lines
from ablation.train.timings import Phases

log = logging.getLogger(__name__)


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite."""


class StopWhenAsked(keras.callbacks.Callback):
    """Raise again a stop (SIGTERM, Ctrl-C) that something swallowed while
    training went on (:func:`ablation.runtime.signals.pending_stop`).

    Checked after each training batch and each epoch, not after evaluation
    batches: a callback on those makes Keras wait for the device after every
    one, and the epoch's end follows the evaluation."""

    def _check(self, *args, **kwargs) -> None:
        stop = pending_stop()
        if stop is not None:
            raise stop

    on_train_batch_end = on_epoch_end = _check


class ProgressLine(keras.callbacks.Callback):
    """Print :func:`ablation.train.progress.progress_line` at the end of every epoch.

    An epoch's seconds run from the end of the one before (the first: from the
    start of ``fit``), so they include validation and the callbacks listed before.
    """

    def __init__(self, run_name: str, epochs: int, validation_name: str = "val"):
        super().__init__()
        self.run_name, self.epochs, self.validation_name = run_name, epochs, validation_name
        self.position = current().position()
        self.epoch_seconds: list[float] = []
        self._last = None

    def on_train_begin(self, logs=None):
        self._last = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        now = time.perf_counter()
        self.epoch_seconds.append(now - (self._last or now))
        self._last = now
        print(progress_line(self.run_name, epoch + 1, self.epochs, self.epoch_seconds,
                            dict(logs or {}), self.position, self.validation_name), flush=True)


def keras_verbosity(value) -> int | str:
    """``trainer.verbose``: ``auto`` is Keras's bar on a terminal, else silent Keras
    and :class:`ProgressLine` (the bar's frames would fill a log file)."""
    if value == "auto":
        return 1 if sys.stdout.isatty() else 0
    return value


def trainable_count(model: keras.Model) -> int:
    """Trainable parameters (not the normalisation statistics or other state)."""
    return int(sum(np.prod(w.shape) for w in model.trainable_weights))


def train(config: Mapping, data: Dataset, tracker: Tracker, checkpoint_dir: Path,
          resume_from: Checkpoint | None = None, progress: EpochMetrics | None = None,
          state_extra: Mapping | None = None) -> dict:
    """Train and evaluate one configuration; returns the measured part of a record.

    With ``resume_from``, training continues after its epoch with its weights,
    optimizer and random states and its bookkeeping; the data order is
    reseeded from the seed and that epoch. ``progress`` (the per-epoch
    bookkeeping) may be passed in to read what was done should training raise;
    ``state_extra`` goes into every checkpoint's state.
    """
    trainer = config["trainer"]
    protocol = trainer["protocol"]
    data = protocol_data(data, protocol)
    official = protocol == "official"
    epochs = progress if progress is not None else EpochMetrics()
    probe = _bookkeeping(epochs, tracker, config, data, official)
    use_precision(trainer)  # per job: a sweep's jobs in one process may differ
    phases = Phases()
    model, initial_epoch, statistics = _build_or_resume(config, data, resume_from, epochs, phases)
    if probe is not None and not locality_probe.blocks(model):   # nothing it can measure
        probe, epochs.extras = None, []
    codes = code_history(resume_from.state.get("code_history", [UNKNOWN_CODE])
                         if resume_from else None)
    params, trainable_params = int(model.count_params()), trainable_count(model)
    log.info("%s: %d train / %d val / %d test images %s, %s classes, %s parameters",
             data.name, len(data.x_train), len(data.x_val), len(data.x_test),
             data.input_shape, data.num_classes, f"{params:,}")

    pad = pad_batches(trainer, model)
    evaluation = (evaluation_split(config, data, pad, data.x_test, data.y_test) if official
                  else evaluation_split(config, data, pad, data.x_val, data.y_val))
    model.fit(
        **training_inputs(config, data, pad, initial_epoch, statistics),
        validation_data=evaluation, validation_batch_size=int(trainer["batch_size"]),
        epochs=int(trainer["epochs"]), initial_epoch=initial_epoch,
        callbacks=_callbacks(config, epochs, tracker, checkpoint_dir,
                             {"code_history": codes, **(state_extra or {})}),
        verbose=keras_verbosity(trainer["verbose"]),
    )
    train_seconds = epochs.fit_seconds()  # every attempt's, when resumed
    _check_finite(epochs)

    # the official protocol evaluated the test split every epoch; it is tested again
    test = evaluation if official else evaluation_split(config, data, pad, data.x_test, data.y_test)
    with phases("test"):
        metrics = _test_metrics(model, test, epochs, int(trainer["batch_size"]), pad, official)
    measured = {
        "metrics": metrics,
        "protocol": protocol,
        "trainable_params": trainable_params,
        "history": epochs.history,
        "params": params,
        "epochs_completed": len(epochs.history),
        "resumed_from_epoch": initial_epoch or None,
        "resumed_from_epochs": epochs.resumed_from_epochs,
        "train_seconds": train_seconds,
        "train_images_per_s": epochs.images_per_second(
            Feed.of(config).images_per_epoch(len(data.x_train))),
        "normalization": statistics.as_record(),
        "code_history": codes,
        "data": {"train": len(data.x_train), "val": len(data.x_val),
                 "test": len(data.x_test), "input_shape": list(data.input_shape),
                 "num_classes": data.num_classes},
    }
    if probe is not None:  # locality of the final model
        with phases("diagnostics"):
            measured["diagnostics"] = probe.final(model, checkpoint_dir.parent)
        tracker.summarize(locality_probe.summary_metrics(measured["diagnostics"]))
        tracker.table("locality/heads", *locality_probe.rows_table(measured["diagnostics"]),
                      step=len(epochs.history))
    # last, so a model file beside a record always comes from the run it describes; a
    # save that fails (a full disk) loses none of the numbers measured before it
    try:
        measured["model_file"] = _save_model(config, model, checkpoint_dir.parent, tracker,
                                             phases)
    except Exception as e:  # noqa: BLE001 - any reason a save fails; a stop is no Exception
        measured["model_file"], measured["model_error"] = None, one_line(e)
        log.warning("the trained model was not saved (%s); the run's numbers are kept",
                    measured["model_error"])
    measured["timings"] = phases.summary(epochs)
    tracker.summarize({
        "test/top1": metrics["test_top1"],
        "test/top5": metrics["test_top5"],
        "test/loss": metrics["test_loss"],
        "best_val/top1": metrics["best_val_top1"],
        "final_val/top1": metrics["final_val_top1"],  # a tuned sweep's trial objective
        "params": params,
        "trainable_params": trainable_params,
        "train_seconds": train_seconds,
        "train_images_per_s": measured["train_images_per_s"],
        **({"best_test/top1": metrics["best_test_top1"]} if official else {}),
    })
    return measured


def _bookkeeping(epochs: EpochMetrics, tracker: Tracker, config: Mapping, data: Dataset,
                 official: bool):
    """Point the per-epoch bookkeeping at the tracker and the evaluated split; the
    locality probe (or None) whose per-epoch measures it adds."""
    epochs.tracker = tracker
    epochs.validation_name = "test" if official else "val"
    probe = locality_probe.from_config(config, data.x_test, int(config["trainer"]["batch_size"]))
    every_epoch = probe is not None and config["diagnostics"]["every_epoch"]
    epochs.extras = [probe.epoch_values] if every_epoch else []
    return probe


def _build_or_resume(config: Mapping, data: Dataset, resume_from: Checkpoint | None,
                     epochs: EpochMetrics, phases: Phases):
    """(model, first epoch to train, the normalisation it uses): built and compiled
    from the seed, or the checkpoint's, its bookkeeping restored."""
    statistics = normalization_statistics(config, data.x_train)
    if resume_from is not None:
        epochs.restore(resume_from.state)
        log.info("resuming from the end of epoch %d", resume_from.epoch)
        # reseeded by the loader; a checkpoint written with other statistics keeps them
        return (with_optimizer_state(resume_from.model), resume_from.epoch,
                model_statistics(resume_from.model, statistics))
    with phases("build"):
        model = compiled_model(config, data, statistics)
    return model, 0, statistics


def _callbacks(config: Mapping, epochs: EpochMetrics, tracker: Tracker, checkpoint_dir: Path,
               state_extra: Mapping) -> list:
    """The epoch bookkeeping, the NaN and stop checks, the per-epoch line, the checkpoint."""
    trainer = config["trainer"]
    callbacks = [epochs, keras.callbacks.TerminateOnNaN(), StopWhenAsked()]
    if prints_lines(trainer["verbose"]):  # after EpochMetrics: its time counts
        callbacks.append(ProgressLine(str(config["run_name"]), int(trainer["epochs"]),
                                      epochs.validation_name))
    if trainer["checkpoint"]:
        callbacks.append(EpochCheckpoint(checkpoint_dir, epochs, extra={
            "wandb_id": tracker.info()["id"], "config": dict(config), **state_extra}))
    return callbacks


def _check_finite(epochs: EpochMetrics) -> None:
    losses = [row.get("train/loss", math.nan) for row in epochs.history]
    if not epochs.history or not all(math.isfinite(v) for v in losses):
        raise TrainingDiverged(
            f"training loss became {losses[-1] if losses else 'undefined'} at epoch "
            f"{len(epochs.history)}; lower trainer.learning_rate")


def _test_metrics(model: keras.Model, test, epochs: EpochMetrics, batch: int, pad: bool,
                  official: bool) -> dict:
    """The record's metrics: the test split after the last epoch, the best and the
    last validation top-1, and under the official protocol its best test epoch."""
    test_x, test_y, *test_weights = test
    result = model.evaluate(test_x, test_y, sample_weight=test_weights[0] if pad else None,
                            batch_size=batch, verbose=0, return_dict=True)
    val_top1 = [row["val/top1"] for row in epochs.history if "val/top1" in row]
    metrics = {
        "test_top1": float(result["top1"]),
        "test_top5": float(result["top5"]),
        "test_loss": float(result["loss"]),
        "best_val_top1": max(val_top1) if val_top1 else None,
        "final_val_top1": val_top1[-1] if val_top1 else None,
    }
    if official:  # the official code reports the best epoch's test accuracy
        rows = [row for row in epochs.history if "test/top1" in row]
        best = max(rows, key=lambda row: row["test/top1"]) if rows else {}
        metrics.update(best_test_top1=best.get("test/top1"), best_test_top5=best.get("test/top5"),
                       best_test_epoch=best.get("epoch"))
    return metrics


def _save_model(config: Mapping, model: keras.Model, folder: Path, tracker: Tracker,
                phases: Phases) -> str | None:
    """``model.keras`` beside the record (and as a W&B artifact on request), or None."""
    if not config["trainer"]["save_model"]:
        return None
    with phases("save_model"):
        saved = save_trained(model, folder / MODEL_FILENAME)
    if config["wandb"]["log_model"]:
        tracker.model(saved)
    return saved.name
