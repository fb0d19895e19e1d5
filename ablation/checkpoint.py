"""End-of-epoch checkpoints, so a killed run resumes where it stopped.

A checkpoint is ``checkpoint/model-<epoch>.keras`` (weights and optimizer
state: the step counter, hence the learning-rate schedule's position) plus
``checkpoint/state.json`` (epoch, metrics so far, W&B run id, config), written
last and atomically: whatever moment a run is killed, ``state.json`` names a
model file that is complete.
"""
from __future__ import annotations

import json
import math
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import keras

from ablation.callbacks import EpochMetrics
from ablation.records import STATE_FILE, read_state



@dataclass
class Checkpoint:
    model: keras.Model
    state: dict

    @property
    def epoch(self) -> int:
        return int(self.state["epoch"])


class EpochCheckpoint(keras.callbacks.Callback):
    """Save the model and the run's state after every epoch (after ``EpochMetrics``)."""

    def __init__(self, directory: str | Path, metrics: EpochMetrics, extra: dict):
        super().__init__()
        self.directory = Path(directory)
        self.metrics = metrics
        self.extra = extra

    def on_epoch_end(self, epoch, logs=None):
        loss = (logs or {}).get("loss")
        if loss is None or not math.isfinite(float(loss)):
            return  # never checkpoint diverged weights: a rerun resumes from the last good epoch
        self.directory.mkdir(parents=True, exist_ok=True)
        model_file = self.directory / f"model-{epoch + 1}.keras"
        tmp = self.directory / f".tmp-model-{epoch + 1}.keras"
        self.model.save(tmp)
        os.replace(tmp, model_file)
        state = {"epoch": epoch + 1, "model": model_file.name,
                 "history": self.metrics.history,
                 "train_phase_seconds": self.metrics.train_phase_seconds, **self.extra}
        tmp_state = self.directory / f".{STATE_FILE}.tmp"
        tmp_state.write_text(json.dumps(state, default=str))
        os.replace(tmp_state, self.directory / STATE_FILE)
        for old in self.directory.glob("model-*.keras"):
            if old != model_file:
                old.unlink(missing_ok=True)


def load_checkpoint(directory: str | Path) -> Checkpoint | None:
    """The model (compiled, with its optimizer state) and state of the last epoch."""
    state = read_state(directory)
    if state is None:
        return None
    model = keras.saving.load_model(Path(directory) / state["model"])
    return Checkpoint(model, state)


def remove(directory: str | Path) -> None:
    shutil.rmtree(directory, ignore_errors=True)
