"""The locality probe on T2T, CaiT, PiT and Swin at the sizes users run (the ``*_tiny``
presets, plain; the CIFAR presets, SPT + LSA): every block on its own grid, Swin within
its windows, against grids and answers worked out here from the presets alone."""
import math

import keras
import numpy as np
import pytest
from omegaconf import OmegaConf

from ablation.model import build_model
from ablation.train.locality_probe import BlockStatistics, LocalityProbe, plan, record_entry
from tests.helpers.config import compose

ARCHITECTURES = ("t2t", "cait", "pit", "swin")
SIZES = {"tiny": ("experiment=smoke", "spt=false", "lsa=false"),
         "cifar": ("experiment=paper_cifar100", "spt=true", "lsa=true")}
WINDOW = 4   # Swin's


def preset(architecture, size):
    name = f"{architecture}_tiny" if size == "tiny" else architecture
    cfg = OmegaConf.to_container(compose(*SIZES[size], f"model={name}"), resolve=True)
    keras.utils.set_random_seed(0)
    side = cfg["model"]["image_size"]
    return cfg, build_model(cfg, 10, (side, side, 3))


def expected_layers(cfg):
    """(side, pitch, class tokens, window, roll) per measured layer, from the preset:
    every pooling or merging halves the grid's side (rounding up) and doubles the
    pitch; T2T's token transformers follow its blocks, split i's of pitch 2 ** i."""
    m = cfg["model"]
    side, patch, arch = m["image_size"] // m["patch_size"], m["patch_size"], m["architecture"]
    if arch in ("pit", "swin"):
        out = []
        for stage, depth in enumerate(m["depth"]):
            s = -(-side >> stage)
            window = min(WINDOW, s) if arch == "swin" else s
            out += [(s, patch << stage, int(arch == "pit"), window,
                     window // 2 if arch == "swin" and i % 2 and s > WINDOW else 0)
                    for i in range(depth)]
        return out
    out = [(side, patch, int(arch == "t2t"), side, 0)] * m["depth"]
    splits = int(math.log2(patch))
    return out + [(m["image_size"] >> i, 1 << i, 0, m["image_size"] >> i, 0)
                  for i in range(1, splits)] * (arch == "t2t")


def allowed(side, window, roll, lsa):
    """(P, P): which keys each query of a side x side grid may attend: those in its
    window of the grid shifted by ``roll`` (a band cut off by the shift is a window of
    its own: the roll's mask), itself not with LSA. Row-major, real positions."""
    r, c = np.divmod(np.arange(side * side), side)
    group = ((r - roll) // window) * (side + 1) + (c - roll) // window
    same = group[:, None] == group[None, :]
    return same & ~np.eye(side * side, dtype=bool) if lsa else same


def uniform_answers(side, pitch, prefix, window, roll, lsa):
    """Mean distance (input px) and self-attention of attention uniform over the allowed
    keys (a class token among them: left out of the distance)."""
    r, c = np.divmod(np.arange(side * side), side)
    distance = pitch * np.hypot(r[:, None] - r[None, :], c[:, None] - c[None, :])
    keys = allowed(side, window, roll, lsa)
    return (((keys * distance).sum(1) / keys.sum(1)).mean(),
            0.0 if lsa else np.mean(1 / (keys.sum(1) + prefix)))


def make_uniform(model):
    """Every measured attention uniform over its keys: no query, no position bias."""
    for block in (m.block for m in plan(model)[0]):
        for weight in (block.attention.query.kernel, block.attention.query.bias,
                       getattr(block, "relative_position_bias", None)):
            if weight is not None:
                weight.assign(np.zeros(weight.shape, "float32"))


@pytest.mark.parametrize("size", [pytest.param("tiny"), pytest.param("cifar", marks=pytest.mark.slow)])
@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_every_block_is_measured_on_its_grid(architecture, size):
    cfg, model = preset(architecture, size)
    lsa, side = cfg["lsa"], cfg["model"]["image_size"]
    expected = expected_layers(cfg)
    found, left_out = plan(model)
    assert [(m.rows, m.cols, m.pitch, m.prefix) for m in found] == [
        (s, s, pitch, prefix) for s, pitch, prefix, _, _ in expected]
    assert left_out == ({"class_attention": cfg["model"]["class_depth"]}
                        if architecture == "cait" else {})
    images = np.random.default_rng(0).uniform(0, 255, (3, side, side, 3)).astype("float32")
    probe = LocalityProbe(images, np.arange(3), batch_size=2, attention_maps=1)
    entry = record_entry(probe.measure(model))
    assert len(entry["layers"]) == len(expected) and entry.get("left_out") == (left_out or None)
    for layer in entry["layers"]:
        assert all(np.isfinite(layer[q]).all() for q in layer if q != "layer"), layer
        assert (max(layer["self_attention"]) == 0.0) if lsa else (min(layer["self_attention"]) > 0)

    make_uniform(model)
    measured = probe.measure(model, maps=True)
    for layer, (s, pitch, prefix, window, roll) in zip(measured["layers"], expected):
        distance, self_weight = uniform_answers(s, pitch, prefix, window, roll, lsa)
        assert layer["normalized_entropy"] == pytest.approx([1.0] * len(layer["entropy"]), rel=1e-5)
        assert layer["mean_distance_px"] == pytest.approx([distance] * len(layer["entropy"]), rel=1e-5)
        assert layer["self_attention"] == pytest.approx([self_weight] * len(layer["entropy"]),
                                                        abs=1e-7)
    # the centre patch's map: uniform over the keys it may attend (Swin: in its window)
    for i, maps in measured["maps"].items():
        s, _, _, window, roll = expected[i]
        centre = (s // 2) * s + s // 2
        keys = allowed(s, window, roll, lsa)[centre]
        np.testing.assert_allclose(maps[0].reshape(-1), keys / keys.sum(), atol=1e-6)


def test_swins_windows_keep_their_tokens_real_places_on_the_rolled_grid():
    """The second block's windows are on the grid rolled by 2: its last window holds the
    grid's corners, whose distances are across the image, not between neighbours."""
    cfg, model = preset("swin", "tiny")
    measured = plan(model)[0][1]
    assert (measured.block.shift, measured.rows, measured.pitch) == (2, 8, 2)
    # window (wr, wc), its token (i, j): rolled place (4 wr + i, 4 wc + j), real one 2 further on
    wr, wc, i, j = np.meshgrid(range(2), range(2), range(4), range(4), indexing="ij")
    rows, cols = ((4 * wr + i + 2) % 8).reshape(4, 16), ((4 * wc + j + 2) % 8).reshape(4, 16)
    expected = 2 * np.hypot(rows[:, :, None] - rows[:, None, :], cols[:, :, None] - cols[:, None, :])
    np.testing.assert_allclose(BlockStatistics(measured, False).distances[:, 0], expected,
                               rtol=1e-6)
