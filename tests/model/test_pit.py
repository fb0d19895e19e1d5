"""The paper's PiT (``model=pit``) against the official code's own outputs, recorded by
``tools/official_golden.py --pit`` into tests/data/official_golden_pit.npz: parameter
counts for every spt/lsa combination at 32 and 64 px, the logits for fixed weights
(plain, SPT + LSA), and a fresh model's parameters (the laws they are drawn from)."""
import keras
import numpy as np
import pytest
from omegaconf import OmegaConf

from ablation.model import build_model
from ablation.model.build import model_arguments
from tests.helpers.config import compose
from tests.helpers.golden import (assert_official_logits, assert_saves_and_loads,
                                  initial_law_errors, smoke_trains)
from tests.helpers.paths import ROOT

GOLDEN = np.load(ROOT / "tests" / "data" / "official_golden_pit.npz")
# the official create_model's two sizes: CIFAR (32 px, patch 2), Tiny-ImageNet (64 px, patch 4)
EXPERIMENTS = {32: ("experiment=paper_cifar100",),
               64: ("experiment=paper_tiny_imagenet", "model.patch_size=4")}
# a PiT of seconds per epoch on a CPU (16 px, three stages of one block)
TINY = ("model.image_size=16", "model.patch_size=2", "model.dim=16", "model.depth=[1,1,1]", "model.key_dim=8",
        "model.mlp_hidden_units=[32]", "model.drop_path=0.0")


def pit_config(*overrides, model="pit", size=32):
    return OmegaConf.to_container(
        compose(*EXPERIMENTS[size], f"model={model}", *overrides), resolve=True)


def pit(spt: bool, lsa: bool, *overrides, size=32, classes=100):
    cfg = pit_config(f"spt={spt}", f"lsa={lsa}", *overrides, size=size)
    assert cfg["model"]["patch_size"] == size // 16
    return build_model(cfg, classes, (size, size, 3))


def tiny_pit(spt: bool, lsa: bool):
    return build_model(pit_config(f"spt={spt}", f"lsa={lsa}", *TINY), 10, (16, 16, 3))


@pytest.mark.parametrize("row", GOLDEN["param_counts"].tolist(),
                         ids=lambda row: "-".join(map(str, row)))
def test_parameter_counts_are_the_official_ones(row):
    size, classes, spt, lsa, count = row   # image size, classes, the switches, the count
    model = pit(bool(spt), bool(lsa), size=size, classes=classes)
    assert sum(int(np.prod(w.shape)) for w in model.trainable_weights) == count


@pytest.mark.jax_backend
@pytest.mark.parametrize("label, switches", [("pit", False), ("slpit", True)])
def test_official_weights_give_the_official_logits(label, switches):
    assert_official_logits(pit(switches, switches), label, GOLDEN)


@pytest.mark.parametrize("label, switches", [("pit", False), ("slpit", True)])
def test_every_initial_parameter_is_drawn_as_the_official(label, switches):
    """Every official parameter's counterpart has its mean and spread (constants
    exactly); those outside the blocks (embeddings, pooling, head) its law too."""
    wrong = initial_law_errors(pit(switches, switches), label, GOLDEN)
    assert not wrong, "\n".join(wrong)


@pytest.mark.jax_backend
def test_the_lsa_mask_removes_self_attention_in_every_stage():
    model = tiny_pit(True, True)
    x = np.random.default_rng(0).uniform(0, 255, (2, 16, 16, 3)).astype("float32")
    blocks = [model.get_layer(f"block_{i}") for i in range(3)]
    probe = keras.Model(model.input, [b.input for b in blocks])
    widths = []
    for block, tokens in zip(blocks, probe(x)):
        weights = keras.ops.convert_to_numpy(
            block.attention.attention_weights(block.attention_norm(tokens)))
        assert np.abs(np.diagonal(weights, axis1=-2, axis2=-1)).max() == 0.0, block.name
        widths.append((tokens.shape[1], tokens.shape[2], weights.shape[1]))
    # 8 x 8 patches and a class token, pooled to 4 x 4 and 2 x 2; widths and heads double
    assert widths == [(65, 16, 2), (17, 32, 4), (5, 64, 8)]


def test_a_trained_pit_saves_and_loads_with_the_same_outputs(tmp_path):
    x = np.random.default_rng(1).uniform(0, 255, (3, 16, 16, 3)).astype("float32")
    for spt in (False, True):   # both poolings
        assert_saves_and_loads(tiny_pit(spt, True), tmp_path / f"spt_{spt}", x)


def test_depth_is_a_list_of_stages_for_pit_only():
    architecture, kwargs = model_arguments(pit_config()["model"])
    assert architecture == "pit" and kwargs["depth"] == [2, 6, 4]
    with pytest.raises(ValueError, match=r"model.depth=12: a list \(blocks per stage\)"):
        model_arguments({**pit_config()["model"], "depth": 12})
    with pytest.raises(ValueError, match="a number of blocks otherwise"):
        model_arguments({**pit_config(model="paper")["model"], "depth": [2, 6, 4]})


@pytest.mark.slow
def test_a_smoke_pit_trains_through_the_command(tmp_path):
    smoke_trains(tmp_path, "pit_tiny")
