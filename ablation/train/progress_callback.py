"""The Keras callback that prints :mod:`ablation.train.progress`'s line each epoch."""
from __future__ import annotations

import time

import keras

from ablation.runtime.sweep_context import current
from ablation.train.progress import progress_line


class ProgressLine(keras.callbacks.Callback):
    """Print one line at the end of every epoch: the job, the epoch, its loss and
    evaluation top-1, its seconds, and the sweep's share done and time left.

    An epoch's seconds run from the end of the one before (the first: from the
    start of ``fit``), so they include validation and whatever the callbacks
    listed before this one do at the epoch's end.
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
