"""The recipe against the official code's own outputs, recorded by tools/official_golden.py.

The file holds the official ViT's and SL-ViT's logits for fixed weights and
images, the official model's initial statistics, every AutoAugment operation's
output on fixed images, and statistics of the official CutMix and erasing
boxes; these tests need neither PyTorch nor the official code.
"""
import json
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import compose

from ablation.augment.autoaugment import CIFAR10_POLICY
from ablation.augment.official import apply_operation, erase_box, magnitude
from ablation.data.batches import Mixer

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
from official_golden import golden_weights

GOLDEN = np.load(ROOT / "tests" / "data" / "official_golden.npz")
# the project's SPT stacks its shifted copies in another order than the official
# (x, left-up, right-up, left-bottom, right-bottom): project group g is official SPT_ORDER[g]
SPT_ORDER = [0, 4, 2, 3, 1]


def test_policy_table_and_magnitudes_are_the_official_ones():
    table = json.loads(str(GOLDEN["policy"]))
    assert len(table) == len(CIFAR10_POLICY) == 25
    for ours, theirs in zip(CIFAR10_POLICY, table):
        for (name, p, index), (o_name, o_p, o_m) in zip(ours, theirs):
            assert (name, p) == (o_name, pytest.approx(o_p))
            assert magnitude(name, index) == pytest.approx(o_m)


def test_every_operation_matches_the_official_output():
    keys = json.loads(str(GOLDEN["op_keys"]))
    assert len(keys) > 30
    for (name, value, sign), expected in zip(keys, GOLDEN["op_outputs"]):
        for image, want in zip(GOLDEN["images"], expected):
            got = apply_operation(image, name, value, sign).astype(int)
            diff = np.abs(got - want.astype(int)).max()
            assert diff <= (1 if name.startswith("shear") else 0), (name, value, sign, diff)


def test_cutmix_box_and_erasing_box_are_distributed_as_the_official():
    rng = np.random.default_rng(0)
    shares = []
    for _ in range(20000):
        top, left, bottom, right = Mixer.cutmix_box(32, 32, rng.beta(1, 1), rng)
        shares.append((bottom - top) * (right - left) / 1024)
    official_mean, _ = GOLDEN["cutmix_share"]
    assert np.mean(shares) == pytest.approx(official_mean, abs=0.01)  # clipped: about 0.30
    boxes = [erase_box(32, 32, rng) for _ in range(4000)]
    aspects = [h / w for _, _, h, w in boxes if h and w]
    median_aspect, mean_area, _ = GOLDEN["erasing"]
    assert np.median(aspects) == pytest.approx(median_aspect, rel=0.06)  # tall: about 1.75
    assert np.mean([h * w / 1024 for _, _, h, w in boxes]) == pytest.approx(mean_area, rel=0.05)


def paper_model(spt: bool):
    from omegaconf import OmegaConf

    from ablation.model import build_model

    cfg = OmegaConf.to_container(compose("model=paper", f"spt={spt}", f"lsa={spt}"),
                                 resolve=True)
    return build_model(cfg, 100, (32, 32, 3))


def keras_weights(official: dict, depth: int, spt: bool) -> dict:
    """The official state_dict's values under the Keras model's weight paths."""
    w = {"position_embedding/embedding": official["pos_embedding"][0],
         "class_token/token": official["cls_token"],
         "final_norm/gamma": official["mlp_head.0.weight"],
         "final_norm/beta": official["mlp_head.0.bias"],
         "logits/kernel": official["mlp_head.1.weight"].T,
         "logits/bias": official["mlp_head.1.bias"]}
    if spt:
        feature = np.arange(240).reshape(4, 4, 5, 3)[:, :, SPT_ORDER].reshape(-1)
        w["patch_tokenizer/norm/gamma"] = official["to_patch_embedding.merging.1.weight"][feature]
        w["patch_tokenizer/norm/beta"] = official["to_patch_embedding.merging.1.bias"][feature]
        w["patch_tokenizer/projection/kernel"] = \
            official["to_patch_embedding.merging.2.weight"].T[feature]
        w["patch_tokenizer/projection/bias"] = official["to_patch_embedding.merging.2.bias"]
    else:
        w["patch_tokenizer/projection/kernel"] = official["to_patch_embedding.1.weight"].T
        w["patch_tokenizer/projection/bias"] = official["to_patch_embedding.1.bias"]
    for i in range(depth):
        o, k = f"transformer.layers.{i}.", f"block_{i}/"
        q, key, v = np.split(official[o + "0.fn.to_qkv.weight"], 3)
        w.update({k + "attention/query/kernel": q.T, k + "attention/key/kernel": key.T,
                  k + "attention/value/kernel": v.T,
                  k + "attention/output/kernel": official[o + "0.fn.to_out.0.weight"].T,
                  k + "attention/output/bias": official[o + "0.fn.to_out.0.bias"],
                  k + "attention_norm/gamma": official[o + "0.norm.weight"],
                  k + "attention_norm/beta": official[o + "0.norm.bias"],
                  k + "mlp_norm/gamma": official[o + "1.norm.weight"],
                  k + "mlp_norm/beta": official[o + "1.norm.bias"],
                  k + "mlp/dense_0/kernel": official[o + "1.fn.net.0.weight"].T,
                  k + "mlp/dense_0/bias": official[o + "1.fn.net.0.bias"],
                  k + "mlp/output/kernel": official[o + "1.fn.net.3.weight"].T,
                  k + "mlp/output/bias": official[o + "1.fn.net.3.bias"]})
        if spt:
            w[k + "attention/temperature"] = official[o + "0.fn.scale"]
    return w


@pytest.mark.parametrize("label, spt", [("vit", False), ("slvit", True)])
def test_paper_model_gives_the_official_logits_with_the_official_weights(label, spt):
    names = json.loads(str(GOLDEN[f"{label}_names"]))
    official = golden_weights([(n, tuple(s)) for n, s in names], seed=1)
    assert sum(float(v.sum()) for v in official.values()) == pytest.approx(
        float(GOLDEN[f"{label}_checksum"]), rel=1e-9)   # the same draws as the recording
    model = paper_model(spt)
    values = keras_weights(official, 9, spt)
    values.update({"augmentation/normalization/mean": np.zeros(3),
                   "augmentation/normalization/variance": np.ones(3)})  # fed normalised
    assigned = set()
    for variable in model.weights:
        if variable.path in values:
            variable.assign(np.reshape(values[variable.path], variable.shape))
            assigned.add(variable.path)
    assert {v.path for v in model.trainable_weights} <= assigned   # every weight copied
    logits = np.asarray(model(GOLDEN["normalised"], training=False))
    expected = GOLDEN[f"{label}_logits"]
    assert np.abs(logits - expected).max() <= 1e-5 * max(1.0, np.abs(expected).max())
    assert (logits.argmax(axis=1) == expected.argmax(axis=1)).all()


def test_paper_model_initial_statistics_are_the_official_ones():
    pos_std, cls_std, qkv_var, mlp_var, eps = GOLDEN["init_stats"]
    model = paper_model(False)
    weights = {v.path: np.asarray(v) for v in model.weights}
    assert weights["position_embedding/embedding"].std() == pytest.approx(pos_std, rel=0.05)
    assert weights["class_token/token"].std() == pytest.approx(cls_std, rel=0.3)
    qkv = np.concatenate([weights[f"block_0/attention/{n}/kernel"]
                          for n in ("query", "key", "value")], axis=1)
    assert qkv.var() == pytest.approx(qkv_var, rel=0.05)
    assert weights["block_0/mlp/dense_0/kernel"].var() == pytest.approx(mlp_var, rel=0.05)
    norm = model.get_layer("block_0").attention_norm
    assert norm.epsilon == pytest.approx(eps)
