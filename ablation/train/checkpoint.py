"""End-of-epoch checkpoints, so a killed run resumes where it stopped.

A checkpoint is ``checkpoint/model-<epoch>.keras`` (weights and optimizer
state: the step counter, hence the learning-rate schedule's position) plus
``checkpoint/state.json`` (epoch, metrics so far, training seconds so far and
the epochs each attempt started from, the layers' random-generator states,
W&B run id, config), written last and atomically: whatever moment a run is
killed, ``state.json`` names a model file that is complete. Temporary files
get unique names, so no two processes can ever write the same one.

Keras saves the seed-generator variables of dropout and augmentation layers
but does not restore them on loading (layers built without a seed even draw a
new one), so their states travel in ``state.json`` and are assigned back.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import keras
import numpy as np

# registers the classes a saved model names (its layers, its optimizer's
# schedule), so that load_model finds them whoever imported this module
import ablation.model  # noqa: F401
import ablation.train.schedules  # noqa: F401
from ablation.runs.files import atomic_write, unique_tmp
from ablation.runs.record import STATE_FILE, read_state
from ablation.train.epoch_metrics import EpochMetrics


@contextlib.contextmanager
def _unique_tmp(directory: Path, prefix: str, suffix: str) -> Iterator[Path]:
    """A temporary file name in ``directory`` that no other process can pick
    (``mkstemp``), with the mode of every other output (not 0600); removed if it
    was not renamed into place."""
    fd, name = unique_tmp(directory, prefix, suffix)
    os.close(fd)
    try:
        yield name
    finally:
        name.unlink(missing_ok=True)


@dataclass
class Checkpoint:
    model: keras.Model
    state: dict

    @property
    def epoch(self) -> int:
        return int(self.state["epoch"])


def seed_states(model: keras.Model) -> list:
    """The model's random-generator state variables (dropout, augmentation), in order."""
    return [v for v in model.variables if v.path.endswith("seed_generator_state")]


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
        with _unique_tmp(self.directory, f".tmp-model-{epoch + 1}-", ".keras") as tmp:
            self.model.save(tmp)
            os.replace(tmp, model_file)
        state = {"epoch": epoch + 1, "model": model_file.name, **self.metrics.state(),
                 "seed_states": [keras.ops.convert_to_numpy(v).tolist()
                                 for v in seed_states(self.model)], **self.extra}
        atomic_write(self.directory / STATE_FILE, json.dumps(state, default=str), fsync=False)
        for old in self.directory.glob("model-*.keras"):
            if old != model_file:
                old.unlink(missing_ok=True)


def load_checkpoint(directory: str | Path, seed: int) -> Checkpoint | None:
    """The model (compiled, with its optimizer and random-generator states) and
    state of the last epoch; ``seed`` makes what is not in the checkpoint
    (the data order from here on) reproducible."""
    state = read_state(directory)
    if state is None:
        return None
    keras.utils.set_random_seed(seed * 100_003 + int(state["epoch"]))
    model = keras.saving.load_model(Path(directory) / state["model"])
    variables, saved = seed_states(model), state.get("seed_states") or []
    if len(saved) == len(variables):
        for variable, value in zip(variables, saved):
            variable.assign(np.asarray(value, dtype=variable.dtype))
    return Checkpoint(model, state)


def remove(directory: str | Path) -> None:
    shutil.rmtree(directory, ignore_errors=True)
