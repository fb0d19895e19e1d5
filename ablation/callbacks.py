"""Per-epoch bookkeeping as plain ``keras.callbacks.Callback`` (any backend).

``EpochMetrics`` builds one row per epoch (train/val loss, top-1, top-5,
learning rate, learnable temperatures, seconds) and hands the same row to the
run record and to the tracker, so the two can never disagree.
"""
from __future__ import annotations

import time

import keras

from ablation.model import temperatures
from ablation.tracking import Tracker

# Keras log key -> the name used in records and W&B.
METRIC_NAMES = {
    "loss": "train/loss", "top1": "train/top1", "top5": "train/top5",
    "val_loss": "val/loss", "val_top1": "val/top1", "val_top5": "val/top5",
}


class EpochMetrics(keras.callbacks.Callback):
    """Collect a row of metrics per epoch and send it to the tracker.

    Also times the training part of each epoch (up to the start of
    validation) in ``train_phase_seconds``, so throughput can exclude
    evaluation and the first epoch's graph tracing.
    """

    def __init__(self, tracker: Tracker | None = None, extras=()):
        super().__init__()
        self.tracker = tracker or Tracker()
        # Callables model -> {name: number} whose values join each row
        # (e.g. the locality diagnostics); timed outside ``epoch_seconds``.
        self.extras = list(extras)
        self.history: list[dict] = []
        self.train_phase_seconds: list[float] = []
        self._epoch_start = self._train_end = None

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
                row[name] = float(logs[key])
        row["lr"] = float(keras.ops.convert_to_numpy(self.model.optimizer.learning_rate))
        row.update(temperatures(self.model))
        row["epoch_seconds"] = now - self._epoch_start
        for extra in self.extras:
            row.update(extra(self.model))
        self.history.append(row)
        self.tracker.log(row, step=epoch + 1)
        self._epoch_start = None

    def images_per_second(self, images_per_epoch: int) -> float | None:
        """Steady-state training throughput: epochs after the first, training phase only.

        The first epoch includes tracing and compilation (seconds to minutes),
        which says nothing about the model's speed; with a single epoch it is
        all there is, and is used.
        """
        phases = self.train_phase_seconds[1:] or self.train_phase_seconds
        return images_per_epoch * len(phases) / sum(phases) if phases and sum(phases) else None
