"""What the golden tests of every architecture share: the official weights a golden
file was recorded with, a model's logits on its images, which of a model's values
stand for each official parameter, the checks of logits, initial laws and a save and
load against the official, and a smoke-size training through the command."""
import json
import sys

import keras
import numpy as np
import pytest
from scipy import stats

from ablation.model import load_model
from ablation.model.official_weights import keras_weights, load_official_weights
from ablation.model.saved import save_trained
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


def assert_official_logits(model, label: str, golden) -> None:
    """``model`` with the golden weights ``label`` gives the official eval logits (to
    1e-5 of their scale) and classes."""
    logits = logits_of(load_official_weights(model, official_weights(label, golden)), golden)
    expected = golden[f"{label}_logits"]
    assert np.abs(logits - expected).max() <= 1e-5 * max(1.0, np.abs(expected).max())
    assert (logits.argmax(axis=1) == expected.argmax(axis=1)).all()


def initial_law_errors(model, label: str, golden) -> list[str]:
    """Where a fresh ``model`` is not drawn as the official one recorded under ``label``:
    every official parameter's counterpart needs its mean and spread (constants
    exactly), and those the golden file samples their law too."""
    names = json.loads(str(golden[f"{label}_init_names"]))
    shapes = [(n, tuple(s)) for n, s in json.loads(str(golden[f"{label}_names"]))]
    ours = official_counterparts(model, shapes)
    assert set(ours) == set(names)
    wrong = []
    for name, (mean, std), sample in zip(names, golden[f"{label}_init_moments"],
                                         golden[f"{label}_init_samples"]):
        mine, sample = ours[name], sample[~np.isnan(sample)]
        if std == 0:   # LayerNorm, biases, the temperature
            wrong += [] if np.allclose(mine, mean, rtol=1e-6, atol=0) else [f"{name}: constant"]
            continue
        checks = {"mean": abs(mine.mean() - mean) <= 5 * std * np.sqrt(2 / len(mine)),
                  "std": abs(mine.std() / std - 1) <= 5 / np.sqrt(len(mine)),
                  "law": not len(sample) or stats.ks_2samp(mine, sample).pvalue > P_FLOOR}
        wrong += [f"{name}: {check} (ours {mine.mean():.4g} +- {mine.std():.4g}, official "
                  f"{mean:.4g} +- {std:.4g})" for check, ok in checks.items() if not ok]
    return wrong


def assert_saves_and_loads(model, folder, x) -> None:
    """``model``, saved into job folder ``folder`` as a job saves it and loaded back,
    gives the same outputs on ``x``."""
    folder.mkdir()
    save_trained(model, folder / "model.keras")
    loaded = load_model(folder, compile=False)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(loaded(x, training=False)),
                               keras.ops.convert_to_numpy(model(x, training=False)),
                               rtol=1e-5, atol=1e-6)


def smoke_trains(tmp_path, model: str, *small: str) -> None:
    """``experiment=smoke model=<model>``, made ``small``, trains through the command
    and beats chance. Few overrides: they name the job's folder (at most 200 characters)."""
    done = run_cli(*smoke_overrides(tmp_path, f"model={model}", *small, "wandb.mode=disabled"))
    assert done.returncode == 0, done.stderr[-3000:]
    (record,) = tmp_path.glob("smoke/*/run.json")
    data = json.loads(record.read_text())
    assert data["model"] == model and data["metrics"]["test_top1"] > 0.1
