"""End-of-epoch checkpoints, so a killed run resumes where it stopped.

A checkpoint is ``checkpoint/model-<epoch>.keras`` (weights and optimizer
state) plus ``checkpoint/state-<epoch>.json`` (epoch, bookkeeping, the layers'
random-generator states, which Keras does not restore, W&B run id, config);
the newest state is also ``checkpoint/state.json`` (read without Keras).

Each file is written atomically, the model before its state, so a state
file names a complete model file. The two newest checkpoints are kept. On
resume, a checkpoint that does not load is set aside in ``<job>/.replaced/``
with one line, and the job resumes from the newest one that loads, or
starts over saying so.
"""
from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass
from pathlib import Path

import keras
import numpy as np

# registers the classes a saved model names (its layers, its optimizer and
# its schedule), so that load_model finds them whoever imported this module
import ablation.model  # noqa: F401
import ablation.train.optimizer  # noqa: F401
import ablation.train.schedules  # noqa: F401
from ablation.data.formats import one_line
from ablation.files import (UnsafeFile, atomic_write, entries, fsync_path, is_folder,
                            is_regular, make_folder, remove_empty_folder, remove_file,
                            replaced_folder, save_with, set_aside)
from ablation.runs.record import STATE_FILE, checkpoint_states, epoch_of
from ablation.runtime.signals import stop_behind
from ablation.train.epoch_metrics import EpochMetrics

log = logging.getLogger(__name__)


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
        make_folder(self.directory)
        number = epoch + 1
        model_file = save_with(self.directory / f"model-{number}.keras", self.model.save)
        state = {"epoch": number, "model": model_file.name, **self.metrics.state(),
                 "seed_states": [keras.ops.convert_to_numpy(v).tolist()
                                 for v in seed_states(self.model)], **self.extra}
        text = json.dumps(state, default=str)
        atomic_write(self.directory / f"state-{number}.json", text)
        atomic_write(self.directory / STATE_FILE, text)
        fsync_path(self.directory)  # the renames themselves
        for old in entries(self.directory, "*-*.*"):
            if epoch_of(old) is not None and epoch_of(old) < number - 1:
                remove_file(old)


def _set_aside(directory: Path, files: list[Path], why: str, then: str) -> None:
    target = replaced_folder(directory.parent) / directory.name
    set_aside(files, target)
    log.warning("%s: set aside in %s; %s", why, target, then)


def load_checkpoint(directory: str | Path, seed: int, epochs: int | None = None
                    ) -> Checkpoint | None:
    """The newest checkpoint that loads: the model (compiled, with its optimizer
    and random-generator states) and state; None if there is none. Damaged
    files, and states that cannot be this run's, are set aside with one line
    each; ``seed`` makes what the checkpoint does not hold reproducible."""
    directory = Path(directory)
    states, damaged = checkpoint_states(directory, epochs)
    for path, reason in damaged:
        _set_aside(directory, [path], f"{directory.name}/{path.name} is unreadable ({reason})",
                   "the other checkpoint files are used")
    for n, state in enumerate(states):
        model_file = directory / str(state.get("model", ""))
        try:
            if not is_regular(model_file):  # a link is never loaded: it may point anywhere
                raise UnsafeFile(f"{model_file.name} is not a regular file")
            keras.utils.set_random_seed(seed * 100_003 + int(state["epoch"]))
            model = keras.saving.load_model(model_file)
            variables = seed_states(model)
            if len(state["seed_states"]) != len(variables):
                raise ValueError(f"its state holds {len(state['seed_states'])} random-generator "
                                 f"states for the model's {len(variables)}")
            for variable, value in zip(variables, state["seed_states"]):
                variable.assign(np.asarray(value, dtype=variable.dtype))
        except Exception as e:  # noqa: BLE001 - any reason a saved model does not load
            if stop_behind(e) is not e:  # a stop while Keras built the model: not damage
                raise
            older = states[n + 1:]
            then = (f"resuming from epoch {older[0]['epoch']}" if older
                    else "no complete checkpoint is left: the job starts over")
            files = [model_file, *entries(directory, f"state-{state['epoch']}.json")]
            if n == 0:
                files.append(directory / STATE_FILE)
            _set_aside(directory, [f for f in files if f.name != ""],
                       f"{directory.name}/{model_file.name} does not load ({one_line(e)})", then)
            continue
        return Checkpoint(model, state)
    return None


def remove(directory: str | Path) -> None:
    """Remove the checkpoint files a run wrote (models, states, their temporary
    files), then the folder if that leaves it empty: anything else stays."""
    for entry in entries(directory, "*"):
        ours = (epoch_of(entry) is not None or entry.name == STATE_FILE
                or entry.name.startswith((".model-", ".state-", f".{STATE_FILE}.")))
        if ours and not is_folder(entry):
            remove_file(entry)
    remove_empty_folder(directory)
