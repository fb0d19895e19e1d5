"""What the golden tests of every architecture share: the official weights a golden
file was recorded with, a model's logits on its images, which of a model's values
stand for each official parameter, and a smoke-size training through the command."""
import json
import sys

import keras
import numpy as np
import pytest

from ablation.model.official_weights import keras_weights
from tests.helpers.commands import run_cli, smoke_overrides
from tests.helpers.paths import ROOT

sys.path.insert(0, str(ROOT / "tools"))
from official_golden import golden_weights  # noqa: E402

P_FLOOR = 1e-4  # a two-sample test's p-value below this says: not the official law


def official_weights(label: str, golden) -> dict:
    names = json.loads(str(golden[f"{label}_names"]))
    weights = golden_weights([(n, tuple(s)) for n, s in names], seed=1)
    assert sum(float(v.sum()) for v in weights.values()) == pytest.approx(
        float(golden[f"{label}_checksum"]), rel=1e-9)   # the same draws as the recording
    return weights


def logits_of(model, golden) -> np.ndarray:
    # raw pixels in: the model normalises with the official constants (augmentation=paper)
    return np.asarray(keras.ops.convert_to_numpy(
        model(golden["images"].astype(np.float32), training=False)))


def official_counterparts(model, names_shapes) -> dict:
    """Official parameter name -> the model's values that are its counterpart
    (through :func:`keras_weights`, so transposes, the q/k/v split and the SPT
    order are those of the weight loader)."""
    tags = {name: np.full(shape, i, np.int64) for i, (name, shape) in enumerate(names_shapes)}
    mapped = keras_weights(tags)
    values = {v.path: np.asarray(v, np.float64) for v in model.weights}
    out = {}
    for path, tag in mapped.items():
        index = int(np.unique(tag).item())
        out.setdefault(names_shapes[index][0], []).append(values[path].reshape(-1))
    return {name: np.concatenate(parts) for name, parts in out.items()}


def smoke_trains(tmp_path, model: str, *small: str) -> None:
    """``experiment=smoke model=<model>``, made ``small``, trains through the command
    and beats chance. Few overrides: they name the job's folder (at most 200 characters)."""
    done = run_cli(*smoke_overrides(tmp_path, f"model={model}", *small, "wandb.mode=disabled"))
    assert done.returncode == 0, done.stderr[-3000:]
    (record,) = tmp_path.glob("smoke/*/run.json")
    data = json.loads(record.read_text())
    assert data["model"] == model and data["metrics"]["test_top1"] > 0.1
