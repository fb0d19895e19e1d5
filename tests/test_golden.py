"""The recipe against the official code's own outputs, recorded by tools/official_golden.py.

The file holds, from the official PyTorch code run on the CPU: the ViT's and
SL-ViT's logits for fixed weights and images; every parameter of the freshly
built official models (moments and a fixed sample); every AutoAugment
operation's output on 54 varied images; 20,000 CutMix boxes and 8,000
random-erasing draws; and ``torch.optim.AdamW``'s trajectory on fixed
gradients. These tests need neither PyTorch nor the official code.

Distributions are compared whole (chi-squared, Kolmogorov-Smirnov, Fisher),
on fixed seeds, so each test is deterministic; the thresholds are far in the
tails, and ``tools/mutations.py`` checks that they catch recipe bugs.
"""
import json
import sys
from pathlib import Path

import keras
import numpy as np
import pytest
from tests.helpers.config import compose
from omegaconf import OmegaConf
from scipy import stats

from ablation.augment.normalization import normalization_statistics
from ablation.augment.official import CIFAR10_POLICY, apply_operation, from_config, magnitude
from ablation.data.batches import Mixer
from ablation.model import build_model
from ablation.model.official_weights import load_official_weights
from tests.helpers.golden import P_FLOOR, official_counterparts

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
from official_golden import ADAMW, CIFAR100_STAT, adamw_problem, digest, golden_weights  # noqa: E402

GOLDEN = np.load(ROOT / "tests" / "data" / "official_golden.npz")
# far in the tails: a fixed-seed comparison of two draws of one law passes it


def paper_config(*overrides):
    return OmegaConf.to_container(compose("experiment=paper_cifar100", *overrides), resolve=True)


def paper_model(spt: bool, seed: int = 0):
    return build_model(paper_config(f"spt={spt}", f"lsa={spt}", f"seed={seed}"), 100, (32, 32, 3))


def homogeneous(a, b, bins=None) -> float:
    """p-value of a chi-squared test that two samples of integers share one law
    (cells pooled until each expects at least 5 of either sample)."""
    values = np.union1d(a, b) if bins is None else bins
    counts = np.array([[np.sum(a == v) for v in values], [np.sum(b == v) for v in values]],
                      dtype=np.float64)
    pooled, current = [], np.zeros(2)
    for column in counts.T:
        current = current + column
        expected = current.sum() * counts.sum(axis=1) / counts.sum()
        if expected.min() >= 5:
            pooled.append(current)
            current = np.zeros(2)
    if current.sum():
        if pooled:
            pooled[-1] = pooled[-1] + current
        else:
            pooled.append(current)
    table = np.array(pooled).T
    if table.shape[1] < 2:
        return 1.0
    return float(stats.chi2_contingency(table)[1])


# --------------------------------------------------------------------- AutoAugment

def test_policy_table_and_magnitudes_are_the_official_ones():
    table = json.loads(str(GOLDEN["policy"]))
    assert len(table) == len(CIFAR10_POLICY) == 25
    for ours, theirs in zip(CIFAR10_POLICY, table):
        for (name, p, index), (o_name, o_p, o_m) in zip(ours, theirs):
            assert (name, p) == (o_name, pytest.approx(o_p))
            assert magnitude(name, index) == pytest.approx(o_m)


def test_every_operation_is_pixel_exact_on_every_golden_image():
    keys = json.loads(str(GOLDEN["op_keys"]))
    images = GOLDEN["images"]
    assert len(keys) == 53 and len(images) >= 50   # every (operation, magnitude, sign) case
    wrong = []
    for (name, value, sign), digests, whole in zip(keys, GOLDEN["op_digests"], GOLDEN["op_outputs"]):
        outputs = [apply_operation(image, name, value, sign) for image in images]
        bad = [i for i, (out, want) in enumerate(zip(outputs, digests))
               if not np.array_equal(digest(out), want)]
        if bad:
            worst = max(int(np.abs(outputs[i].astype(int) - whole[i].astype(int)).max())
                        for i in range(len(whole)))
            wrong.append(f"{name} {value:.3f} sign {sign:+d}: {len(bad)} of {len(images)} "
                         f"images differ (largest difference on the first two: {worst})")
    assert not wrong, "\n".join(wrong)


# --------------------------------------------------------------------- mixing and erasing

def test_cutmix_boxes_are_distributed_as_the_official():
    official = GOLDEN["cutmix_boxes"].astype(int)        # x1, y1, x2, y2 (rows, then columns)
    rng = np.random.default_rng(0)
    ours = []
    for _ in range(len(official)):
        ours.append(Mixer.cutmix_box(32, 32, rng.beta(1.0, 1.0), rng))
    ours = np.array(ours)                                 # top, left, bottom, right
    for axis, name in ((0, "rows"), (1, "columns")):
        start, stop = ours[:, axis], ours[:, axis + 2]
        o_start, o_stop = official[:, axis], official[:, axis + 2]
        assert homogeneous(start, o_start) > P_FLOOR, f"box start along {name}"
        assert homogeneous(stop, o_stop) > P_FLOOR, f"box end along {name}"
        assert homogeneous(stop - start, o_stop - o_start) > P_FLOOR, f"box side along {name}"
    share = (ours[:, 2] - ours[:, 0]) * (ours[:, 3] - ours[:, 1]) / 1024
    o_share = (official[:, 2] - official[:, 0]) * (official[:, 3] - official[:, 1]) / 1024
    assert stats.ks_2samp(share, o_share).pvalue > P_FLOOR


@pytest.fixture(scope="module")
def erased():
    """8,000 black images through the paper preset's pipeline with only erasing on:
    (the pipeline, its statistics, the outputs)."""
    cfg = paper_config("augmentation.horizontal_flip=false", "augmentation.crop_padding=0",
                       "augmentation.policy=null")
    statistics = normalization_statistics(cfg, None)
    pipeline = from_config(cfg["augmentation"], statistics)
    images = np.zeros((len(GOLDEN["erasing_draws"]), 32, 32, 3), np.float32)
    return pipeline, statistics, pipeline(images, np.random.default_rng(0))


def test_random_erasing_draws_are_distributed_as_the_official(erased):
    _, _, outputs = erased
    official = GOLDEN["erasing_draws"].astype(int)        # erased, top, left, h, w
    ours = []
    for out in outputs:
        mask = (out != 0).any(axis=-1)
        rows, cols = np.flatnonzero(mask.any(axis=1)), np.flatnonzero(mask.any(axis=0))
        if len(rows):
            assert mask[rows[0]:rows[-1] + 1, cols[0]:cols[-1] + 1].all()  # one box
            ours.append((1, rows[0], cols[0], len(rows), len(cols)))
        else:
            ours.append((0, -1, -1, 0, 0))
    ours = np.array(ours)
    table = [[ours[:, 0].sum(), len(ours) - ours[:, 0].sum()],
             [official[:, 0].sum(), len(official) - official[:, 0].sum()]]
    assert stats.fisher_exact(table).pvalue > P_FLOOR, "erasing probability"
    mine, theirs = ours[ours[:, 0] == 1], official[official[:, 0] == 1]
    for column, name in ((1, "top"), (2, "left"), (3, "height"), (4, "width")):
        assert homogeneous(mine[:, column], theirs[:, column]) > P_FLOOR, name
    aspect = np.log(mine[:, 3] / mine[:, 4])
    assert stats.ks_2samp(aspect, np.log(theirs[:, 3] / theirs[:, 4])).pvalue > P_FLOOR
    area = mine[:, 3] * mine[:, 4]
    assert stats.ks_2samp(area, theirs[:, 3] * theirs[:, 4]).pvalue > P_FLOOR


def test_the_erased_box_normalises_to_the_official_fill(erased):
    _, statistics, outputs = erased
    boxes = outputs[(outputs != 0).any(axis=-1)]
    assert len(boxes) > 1000
    normalised = (boxes - statistics.mean) / statistics.std
    # RandomErasing(mean=stat[0]) writes the channel means into the normalised tensor
    assert np.allclose(normalised, CIFAR100_STAT[0], atol=1e-5)


def test_flip_and_padded_crop_follow_the_official_laws():
    cfg = paper_config("augmentation.policy=null", "augmentation.random_erasing=0")
    padding = cfg["augmentation"]["crop_padding"]
    pipeline = from_config(cfg["augmentation"], normalization_statistics(cfg, None))
    image = GOLDEN["images"][1]                         # noise: every crop distinct
    candidates = {}
    for flipped in (False, True):
        source = np.pad(image[:, ::-1] if flipped else image, ((padding,) * 2, (padding,) * 2, (0, 0)))
        for top in range(2 * padding + 1):
            for left in range(2 * padding + 1):
                crop = source[top:top + 32, left:left + 32].astype(np.float32)
                candidates[crop.tobytes()] = (flipped, top, left)
    assert len(candidates) == 2 * (2 * padding + 1) ** 2
    outputs = pipeline(np.repeat(image[None], 8100, axis=0), np.random.default_rng(0))
    found = [candidates.get(out.tobytes()) for out in outputs]
    assert None not in found, "an output is no zero-padded crop of the image or its mirror"
    flips = sum(f for f, _, _ in found)
    assert stats.binomtest(flips, len(found), 0.5).pvalue > P_FLOOR, "flip probability"
    offsets = np.array([top * (2 * padding + 1) + left for _, top, left in found])
    counts = np.bincount(offsets, minlength=(2 * padding + 1) ** 2)
    assert stats.chisquare(counts).pvalue > P_FLOOR, "crop offsets"
    pairs = np.array([[f, top] for f, top, _ in found])   # flip and offset independent
    assert homogeneous(pairs[pairs[:, 0] == 0, 1], pairs[pairs[:, 0] == 1, 1]) > P_FLOOR


# --------------------------------------------------------------------- the model

@pytest.mark.parametrize("label, spt", [("vit", False), ("slvit", True)])
def test_official_weights_load_and_give_the_official_logits(label, spt):
    names = json.loads(str(GOLDEN[f"{label}_names"]))
    official = golden_weights([(n, tuple(s)) for n, s in names], seed=1)
    assert sum(float(v.sum()) for v in official.values()) == pytest.approx(
        float(GOLDEN[f"{label}_checksum"]), rel=1e-9)   # the same draws as the recording
    model = load_official_weights(paper_model(spt), official)
    # raw pixels in: the model normalises with the official constants (augmentation=paper)
    pixels = GOLDEN["images"][:len(GOLDEN["normalised"])].astype(np.float32)
    logits = np.asarray(model(pixels, training=False))
    expected = GOLDEN[f"{label}_logits"]
    assert np.abs(logits - expected).max() <= 1e-5 * max(1.0, np.abs(expected).max())
    assert (logits.argmax(axis=1) == expected.argmax(axis=1)).all()


def test_official_weights_for_other_switches_are_refused_before_anything_is_set():
    names = json.loads(str(GOLDEN["slvit_names"]))
    official = golden_weights([(n, tuple(s)) for n, s in names], seed=1)
    model = paper_model(False)
    before = [np.array(v) for v in model.weights]
    with pytest.raises(ValueError, match="check spt, lsa"):
        load_official_weights(model, official)
    assert all(np.array_equal(a, np.asarray(v)) for a, v in zip(before, model.weights))
    with pytest.raises(ValueError, match="not an SPT_LSA_ViT"):
        load_official_weights(model, {"pos_embedding": np.zeros((1, 65, 192))})
    with pytest.raises(ValueError, match="has no 'cls_token'"):
        load_official_weights(model, {k: v for k, v in official.items() if k != "cls_token"})
    for bad, says in [(None, "a mapping of parameter names"), ({1: np.zeros(3)}, "a mapping"),
                      ({**official, "pos_embedding": "abc"}, "'pos_embedding' is not an array"),
                      ({**official, "cls_token": np.full((1, 1, 192), np.nan)}, "not finite"),
                      ({**official, "transformer.layers.x.y": np.zeros(2)}, "a block number")]:
        with pytest.raises(ValueError, match=says):
            load_official_weights(model, bad)
    vit = golden_weights([(n, tuple(s)) for n, s in json.loads(str(GOLDEN["vit_names"]))], seed=1)
    transposed = {**vit, "to_patch_embedding.1.weight": vit["to_patch_embedding.1.weight"].T}
    with pytest.raises(ValueError, match=r"has shape \(192, 48\), the model's is \(48, 192\)"):
        load_official_weights(model, transposed)
    assert all(np.array_equal(a, np.asarray(v)) for a, v in zip(before, model.weights))
    divide = build_model(paper_config("spt=true", "lsa=true", "model.temperature_form=divide"),
                         100, (32, 32, 3))
    with pytest.raises(ValueError, match="per-head multiplier"):
        load_official_weights(divide, official)


def test_the_official_checkpoint_file_loads_as_its_state_dict():
    names = json.loads(str(GOLDEN["vit_names"]))
    official = golden_weights([(n, tuple(s)) for n, s in names], seed=1)
    wrapped = load_official_weights(paper_model(False), {"model_state_dict": official})
    bare = load_official_weights(paper_model(False), official)
    assert all(np.array_equal(a, b) for a, b in zip(wrapped.get_weights(), bare.get_weights()))


def excess_kurtosis(x):
    z = (x - x.mean()) / x.std()
    return float(np.mean(z ** 4) - 3)


@pytest.mark.parametrize("label, spt", [("vit", False), ("slvit", True)])
def test_every_initial_parameter_is_drawn_as_the_official(label, spt):
    names = json.loads(str(GOLDEN[f"{label}_init_names"]))
    shapes = dict((n, tuple(s)) for n, s in json.loads(str(GOLDEN[f"{label}_names"])))
    moments, samples = GOLDEN[f"{label}_init_moments"], GOLDEN[f"{label}_init_samples"]
    model = paper_model(spt)
    ours = official_counterparts(model, [(n, shapes[n]) for n in names])
    assert set(ours) == set(names)                       # every official parameter has one
    wrong = []
    for name, (mean, std), sample in zip(names, moments, samples):
        mine, sample = ours[name], sample[~np.isnan(sample)]
        if std == 0:                                     # constants: LayerNorm, biases, scale
            if not np.allclose(mine, mean, rtol=1e-6, atol=0):
                wrong.append(f"{name}: constant {mean}, ours {mine.min()}..{mine.max()}")
            continue
        n_official = int(np.prod(shapes[name]))
        se_mean = std * np.sqrt(1 / len(mine) + 1 / n_official)
        se_std = np.sqrt(1 / (2 * len(mine)) + 1 / (2 * n_official))
        se_kurtosis = np.sqrt(24 / len(mine) + 24 / len(sample))
        checks = {
            "mean": abs(mine.mean() - mean) <= 5 * se_mean,
            "std": abs(mine.std() / std - 1) <= 5 * se_std,
            "kurtosis": abs(excess_kurtosis(mine) - excess_kurtosis(sample)) <= 5 * se_kurtosis,
            "law": stats.ks_2samp(mine, sample).pvalue > P_FLOOR,
        }
        wrong += [f"{name}: {check} (ours mean {mine.mean():.4g} std {mine.std():.4g}, "
                  f"official {mean:.4g} / {std:.4g})" for check, ok in checks.items() if not ok]
    assert not wrong, "\n".join(wrong)


def test_every_layer_norm_has_the_official_epsilon():
    model = paper_model(True)
    norms = [model.get_layer("patch_tokenizer").norm, model.get_layer("final_norm")]
    norms += [n for block in range(9) for n in (model.get_layer(f"block_{block}").attention_norm,
                                                model.get_layer(f"block_{block}").mlp_norm)]
    assert all(isinstance(n, keras.layers.LayerNormalization) for n in norms)
    assert all(layer.epsilon == pytest.approx(float(GOLDEN["layer_norm_eps"])) for layer in norms)


# --------------------------------------------------------------------- the optimizer

def trajectory(optimizer) -> np.ndarray:
    start, grads = adamw_problem()
    variable = keras.Variable(start)
    out = []
    for g in grads:
        optimizer.apply_gradients([(keras.ops.convert_to_tensor(g), variable)])
        out.append(np.asarray(variable).copy())
    return np.stack(out)


def test_the_paper_presets_adamw_follows_torchs_trajectory():
    from ablation.train.optimizer import build_optimizer

    trainer = paper_config()["trainer"]
    assert (trainer["learning_rate"], trainer["weight_decay"]) == (ADAMW["lr"], ADAMW["weight_decay"])
    official = GOLDEN["adamw_trajectory"]
    ours = trajectory(build_optimizer(trainer, ADAMW["lr"]))
    moved = np.abs(official - adamw_problem()[0]).max(axis=0)
    assert np.all(np.abs(ours - official).max(axis=0) <= 1e-3 * moved + 1e-7)
    # Keras's own epsilon form is measurably off on the smallest gradients,
    # which is what the test above tells apart
    keras_form = trajectory(build_optimizer({**trainer, "epsilon_form": "keras"}, ADAMW["lr"]))
    assert np.abs(keras_form - official).max() > 10 * np.abs(ours - official).max()
