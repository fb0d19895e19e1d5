"""A short training run checkpointed as a job checkpoints it, for the checkpoint tests
(the ``trained_checkpoint`` fixture in tests/conftest.py trains it once a session)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

# Three epochs of the smoke model with Keras's augmentation layers (their random
# generators are part of what a checkpoint restores), 128 images in batches of 64.
OVERRIDES = ("experiment=smoke", "augmentation=keras_io", "dataset.limit_train=128")
EPOCHS = 3
REFERENCE = "trained.npz"   # what the model held when training ended, written last


def train_checkpoint(job: Path) -> None:
    """Train into ``job``/checkpoint, then write beside it the model's weights,
    optimizer step and random-generator states as training left them in memory."""
    import keras
    import numpy as np
    from omegaconf import OmegaConf

    from ablation.data import load_dataset
    from ablation.model import build_model
    from ablation.train.checkpoint import EpochCheckpoint, seed_states
    from ablation.train.compile import compile_model
    from ablation.train.epoch_metrics import EpochMetrics
    from tests.helpers.config import compose

    shutil.rmtree(job, ignore_errors=True)   # a run that died part-way
    job.mkdir(parents=True)
    cfg = OmegaConf.to_container(compose(*OVERRIDES), resolve=True)
    data = load_dataset(cfg["dataset"], 0)
    model = build_model(cfg, 10, data.input_shape, normalization_data=data.x_train)
    compile_model(model, cfg["trainer"], 3, 10)
    metrics = EpochMetrics()
    model.fit(data.x_train, data.y_train, batch_size=64, epochs=EPOCHS, verbose=0,
              callbacks=[metrics, EpochCheckpoint(job / "checkpoint", metrics,
                                                  extra={"wandb_id": "x"})])
    arrays = {f"w{i:04d}": keras.ops.convert_to_numpy(w) for i, w in enumerate(model.weights)}
    meta = {"epochs": EPOCHS, "iterations": int(model.optimizer.iterations),
            "seed_states": [keras.ops.convert_to_numpy(v).tolist() for v in seed_states(model)]}
    partial = job / ("partial-" + REFERENCE)
    np.savez(partial, meta=np.array(json.dumps(meta)), **arrays)
    partial.rename(job / REFERENCE)


def trained_reference(job: Path) -> dict:
    """What :func:`train_checkpoint` wrote beside the checkpoint: ``weights`` (in the
    model's order), ``iterations``, ``seed_states`` and ``epochs``."""
    import numpy as np

    with np.load(job / REFERENCE) as saved:
        reference = json.loads(str(saved["meta"]))
        reference["weights"] = [saved[k] for k in sorted(k for k in saved.files if k != "meta")]
    return reference
