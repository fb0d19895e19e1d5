"""What the golden tests of every architecture share: the official weights a golden
file was recorded with, a model's logits on its images, which of a model's values
stand for each official parameter, a smoke-size training through the command; and the
staged models' (PiT, Swin, T2T) and CaiT's checks against their golden files."""
import json
import re
import sys

import keras
import numpy as np
import pytest
from omegaconf import OmegaConf
from scipy import stats

from ablation.model import build_model, load_model
from ablation.model.official_weights import keras_weights, load_official_weights
from ablation.model.saved import save_trained
from tests.helpers.commands import run_cli, smoke_overrides
from tests.helpers.config import compose
from tests.helpers.paths import ROOT

sys.path.insert(0, str(ROOT / "tools"))
from official_golden import golden_weights  # noqa: E402

P_FLOOR = 1e-4  # a two-sample test's p-value below this says: not the official law
# the official create_model's two sizes: CIFAR (32 px), Tiny-ImageNet (64 px), the presets'
# patches following them
STAGED_EXPERIMENTS = {32: ("experiment=paper_cifar100",), 64: ("experiment=paper_tiny_imagenet",)}
# the image side over the patch side (16 unless named): CaiT's patch is 4 at 32 px and 8 at
# 64 (create_model), T2T's soft splits reduce the image by 8
PATCH_DIVISORS = {"cait": 8, "t2t": 8}


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


def drawn_errors(name: str, mine: np.ndarray, mean: float, std: float,
                 sample: np.ndarray) -> list[str]:
    """How the values ``mine`` are not drawn as official values of moments ``mean``
    and ``std`` (one draw, whose spread is as noisy as ours: that counts for a small
    tensor), and, given a ``sample`` of those, of their law."""
    spread = (mine.std() + std) / 2
    checks = {"mean": abs(mine.mean() - mean) <= 5 * spread * np.sqrt(2 / len(mine)),
              "std": abs(mine.std() - std) <= 5 * spread / np.sqrt(len(mine)),
              "law": not len(sample) or stats.ks_2samp(mine, sample).pvalue > P_FLOOR}
    return [f"{name}: {check} (ours {mine.mean():.4g} +- {mine.std():.4g}, official "
            f"{mean:.4g} +- {std:.4g})" for check, ok in checks.items() if not ok]


def init_law_errors(model, golden, label: str) -> list[str]:
    """How ``model``'s initial values are not drawn as the official fresh model's
    recorded under ``label``: every official parameter's counterpart must have its
    mean and spread (constants exactly), the sampled ones its law too; and so must
    every kind of parameter, its blocks' pooled (the same name but for its indices,
    the same shape: CaiT's 4 x 4 talking heads say little one by one)."""
    names = json.loads(str(golden[f"{label}_init_names"]))
    shapes = {n: tuple(s) for n, s in json.loads(str(golden[f"{label}_names"]))}
    ours = official_counterparts(model, list(shapes.items()))
    wrong = [] if set(ours) == set(names) else [f"parameters {sorted(set(ours) ^ set(names))}"]
    moments = dict(zip(names, golden[f"{label}_init_moments"]))
    samples = {n: s[~np.isnan(s)] for n, s in zip(names, golden[f"{label}_init_samples"])}
    kinds: dict = {}
    for name in names:
        (mean, std), mine = moments[name], ours.get(name, np.zeros(1))
        if std == 0:   # LayerNorm, biases, the temperature, LayerScale
            wrong += [] if np.allclose(mine, mean, rtol=1e-6, atol=0) else [f"{name}: constant"]
            continue
        wrong += drawn_errors(name, mine, mean, std, samples[name])
        kinds.setdefault((re.sub(r"(?<=\.)\d+(?=\.)", "#", name), shapes[name]), []).append(name)
    for (kind, _), members in kinds.items():
        if len(members) > 1:   # equal sizes: the pooled moments from each one's
            means, stds = np.array([moments[n] for n in members]).T
            mean = means.mean()
            wrong += drawn_errors(
                f"{kind} (pooled)", np.concatenate([ours.get(n, np.zeros(1)) for n in members]),
                mean, np.sqrt(np.mean(stds ** 2 + means ** 2) - mean ** 2),
                np.concatenate([samples[n] for n in members]))
    return wrong


def smoke_trains(tmp_path, model: str, *small: str) -> None:
    """``experiment=smoke model=<model>``, made ``small``, trains through the command
    and beats chance. Few overrides: they name the job's folder (at most 200 characters)."""
    done = run_cli(*smoke_overrides(tmp_path, f"model={model}", *small, "wandb.mode=disabled"))
    assert done.returncode == 0, done.stderr[-3000:]
    (record,) = tmp_path.glob("smoke/*/run.json")
    data = json.loads(record.read_text())
    assert data["model"] == model and data["metrics"]["test_top1"] > 0.1


def staged_config(model: str, *overrides: str, size: int = 32) -> dict:
    return OmegaConf.to_container(
        compose(*STAGED_EXPERIMENTS[size], f"model={model}", *overrides), resolve=True)


def staged(model: str, spt: bool, lsa: bool, *overrides: str, size: int = 32,
           classes: int = 100):
    """``model=<model>`` (cait, pit, swin or t2t) as the official ``create_model`` builds it."""
    cfg = staged_config(model, f"spt={spt}", f"lsa={lsa}", *overrides, size=size)
    assert cfg["model"]["patch_size"] == size // PATCH_DIVISORS.get(model, 16)
    return build_model(cfg, classes, (size, size, 3))


def official_checks(model: str, golden, logit_overrides: dict | None = None):
    """A staged model's (or CaiT's) checks against its golden file, for its test module
    to bind to test names: the parameter counts of every spt/lsa combination at 32 and
    64 px, the logits for the official weights (plain, SPT + LSA) and every initial
    parameter's law (:func:`init_law_errors`). ``logit_overrides``: label -> the
    overrides the model for its logits is built with; a label beyond the two is one
    more SPT + LSA recording (CaiT's: the published -1e-9 mask and a real one)."""
    variants = [(model, False), (f"sl{model}", True)]
    logit_overrides = dict(logit_overrides or {})
    recorded = variants + [(label, True) for label in logit_overrides
                           if label not in dict(variants)]

    @pytest.mark.parametrize("row", golden["param_counts"].tolist(),
                             ids=lambda row: "-".join(map(str, row)))
    def counts(row):
        size, classes, spt, lsa, count = row   # image size, classes, the switches, the count
        built = staged(model, bool(spt), bool(lsa), size=size, classes=classes)
        assert sum(int(np.prod(w.shape)) for w in built.trainable_weights) == count

    @pytest.mark.jax_backend
    @pytest.mark.parametrize("label, switches", recorded)
    def logits(label, switches):
        built = load_official_weights(
            staged(model, switches, switches, *logit_overrides.get(label, ())),
            official_weights(label, golden))
        ours, expected = logits_of(built, golden), golden[f"{label}_logits"]
        assert np.abs(ours - expected).max() <= 1e-5 * max(1.0, np.abs(expected).max())
        assert (ours.argmax(axis=1) == expected.argmax(axis=1)).all()

    @pytest.mark.parametrize("label, switches", variants)
    def laws(label, switches):
        wrong = init_law_errors(staged(model, switches, switches), golden, label)
        assert not wrong, "\n".join(wrong)

    return counts, logits, laws


def block_inputs(model, count: int) -> list:
    """(block, its input tokens) for ``block_0`` to ``block_<count - 1>`` of ``model``
    on two random 16 px images."""
    x = np.random.default_rng(0).uniform(0, 255, (2, 16, 16, 3)).astype("float32")
    found = [model.get_layer(f"block_{i}") for i in range(count)]
    return list(zip(found, keras.Model(model.input, [b.input for b in found])(x)))


def round_trips(build, tmp_path) -> None:
    """``build(spt)``'s model, spt off and on, saved and loaded, gives the same outputs."""
    x = np.random.default_rng(1).uniform(0, 255, (3, 16, 16, 3)).astype("float32")
    for spt in (False, True):
        model, folder = build(spt), tmp_path / f"spt_{spt}"
        folder.mkdir()
        save_trained(model, folder / "model.keras")
        loaded = load_model(folder, compile=False)
        np.testing.assert_allclose(keras.ops.convert_to_numpy(loaded(x, training=False)),
                                   keras.ops.convert_to_numpy(model(x, training=False)),
                                   rtol=1e-5, atol=1e-6)
