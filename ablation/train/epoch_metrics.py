"""Per-epoch bookkeeping as plain ``keras.callbacks.Callback`` (any backend).

``EpochMetrics`` builds one row per epoch (train/val loss, top-1, top-5,
learning rate, learnable temperatures, seconds) and hands the same row to the
run record and to the tracker, so the two can never disagree. ``MeanLoss`` is
the loss those rows report: the mean over the weighted samples seen.
"""
from __future__ import annotations

import time

import keras

from ablation.model import temperatures
from ablation.runs.epochs import steady_epochs
from ablation.runs.tracking import Tracker


@keras.saving.register_keras_serializable(package="ablation")
class MeanLoss(keras.metrics.Mean):
    """The epoch's loss as the mean of the per-sample cross-entropy, weighted by sample weight.

    Keras' own epoch loss weighs each batch by its row count, padding rows
    included. Compiled as a weighted metric named ``loss``, this replaces that
    value in the logs (written after the loss tracker's under the same key),
    so ``loss``/``val_loss``, ``TerminateOnNaN`` and ``evaluate`` report the
    mean over the real samples (the model adds no losses of its own).
    """

    def __init__(self, soft: bool = False, label_smoothing: float = 0.0, name: str = "loss",
                 dtype=None):
        super().__init__(name=name, dtype=dtype)
        self.soft = bool(soft)
        self.label_smoothing = float(label_smoothing)

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_pred = keras.ops.cast(y_pred, "float32")
        if self.soft:
            values = keras.losses.categorical_crossentropy(
                y_true, y_pred, from_logits=True, label_smoothing=self.label_smoothing)
        else:
            values = keras.losses.sparse_categorical_crossentropy(y_true, y_pred,
                                                                  from_logits=True)
        return super().update_state(values, sample_weight=sample_weight)

    def get_config(self):
        return {**super().get_config(), "soft": self.soft,
                "label_smoothing": self.label_smoothing}


# Keras log key -> the name used in records and W&B.
METRIC_NAMES = {
    "loss": "train/loss", "top1": "train/top1", "top5": "train/top5",
    "val_loss": "val/loss", "val_top1": "val/top1", "val_top5": "val/top5",
}


class EpochMetrics(keras.callbacks.Callback):
    """Collect a row of metrics per epoch and send it to the tracker.

    Also times the training part of each epoch (up to validation) and ``fit``.
    A resumed run carries on from a checkpoint's state (:meth:`restore`), so
    times and throughput cover the whole training. ``validation_name``:
    ``val``, or ``test`` under the official protocol (its per-epoch evaluation).
    """

    def __init__(self, tracker: Tracker | None = None, validation_name: str = "val",
                 extras=()):
        super().__init__()
        self.tracker = tracker or Tracker()
        self.validation_name = validation_name
        # Callables model -> {name: number} whose values join each row
        # (e.g. the locality diagnostics); timed outside ``epoch_seconds``.
        self.extras = list(extras)
        self.history: list[dict] = []
        self.train_phase_seconds: list[float] = []
        self.attempt_starts: list[int] = []  # epochs done when each fit began: [0, resumes...]
        self.seconds_before = 0.0  # fit seconds of earlier attempts (to their last checkpoint)
        self.extras_seconds = 0.0  # spent in ``extras``, this attempt
        self._epoch_start = self._train_end = self._fit_start = None

    def restore(self, state: dict) -> None:
        """Continue from a checkpoint's state (see :meth:`state`)."""
        self.history = list(state["history"])
        phases = list(state.get("train_phase_seconds") or [])
        phases = phases[max(len(phases) - len(self.history), 0):]
        # checkpoints from before whole-run timing kept the last attempt's phases only
        self.train_phase_seconds = [None] * (len(self.history) - len(phases)) + phases
        self.attempt_starts = list(state.get("attempt_starts") or [0])
        self.seconds_before = float(state.get("fit_seconds") or sum(
            row.get("epoch_seconds", 0.0) for row in self.history))

    def state(self) -> dict:
        """What a checkpoint keeps of this bookkeeping."""
        return {"history": self.history, "train_phase_seconds": self.train_phase_seconds,
                "attempt_starts": self.attempt_starts, "fit_seconds": self.fit_seconds()}

    @property
    def resumed_from_epochs(self) -> list[int]:
        """The epoch each resume started from, in order (every attempt after the first)."""
        return self.attempt_starts[1:]

    def fit_seconds(self) -> float:
        """Wall seconds of ``fit`` so far, earlier attempts included."""
        now = time.perf_counter()
        return self.seconds_before + (now - self._fit_start if self._fit_start else 0.0)

    def on_train_begin(self, logs=None):
        self._fit_start = time.perf_counter()
        self.attempt_starts.append(len(self.history))

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch_start, self._train_end = time.perf_counter(), None

    def on_test_begin(self, logs=None):
        if self._epoch_start is not None and self._train_end is None:
            self._train_end = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        now = time.perf_counter()
        self.train_phase_seconds.append((self._train_end or now) - self._epoch_start)
        row = {"epoch": epoch + 1}
        for key, name in METRIC_NAMES.items():
            if logs and key in logs:
                row[name.replace("val/", f"{self.validation_name}/", 1)] = float(logs[key])
        row["lr"] = float(keras.ops.convert_to_numpy(self.model.optimizer.learning_rate))
        row.update(temperatures(self.model))
        row["epoch_seconds"] = now - self._epoch_start
        started = time.perf_counter()
        for extra in self.extras:
            row.update(extra(self.model))
        self.extras_seconds += time.perf_counter() - started
        self.history.append(row)
        self.tracker.log(row, step=epoch + 1)
        self._epoch_start = None

    def images_per_second(self, images_per_epoch: int) -> float | None:
        """Steady-state training throughput: training phases only, without the first
        epoch of each attempt (tracing and compiling) unless there are no others."""
        steady = set(steady_epochs(len(self.train_phase_seconds), self.attempt_starts))
        known = [(i, s) for i, s in enumerate(self.train_phase_seconds) if s is not None]
        phases = [s for i, s in known if i in steady] or [s for _, s in known]
        return images_per_epoch * len(phases) / sum(phases) if phases and sum(phases) else None
