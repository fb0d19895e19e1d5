"""The paper's CaiT (``model=cait``) against the official code's own outputs, recorded by
``tools/official_golden.py --cait`` into tests/data/official_golden_cait.npz: parameter
counts for every spt/lsa combination at 32 and 64 px (patch 4 and 8, as the official
``create_model``), the logits for fixed weights (plain, SPT + LSA as published, SPT + LSA
with a real mask), LayerScale's initial values, and a fresh model's parameters (the laws
they are drawn from: xavier-normal Linear layers with k and v fused, standard normal
class token, position embedding and talking heads, LayerScale's constants)."""
import keras
import numpy as np
import pytest

from ablation.model import attention_layers, build_model, load_model
from ablation.model.build import model_arguments
from ablation.model.official_weights import load_official_weights
from ablation.model.saved import save_trained
from ablation.train.locality_probe import blocks
from tests.helpers.golden import (
    logits_of,
    official_checks,
    official_weights,
    smoke_trains,
    staged,
    staged_config,
)
from tests.helpers.paths import ROOT

GOLDEN = np.load(ROOT / "tests" / "data" / "official_golden_cait.npz")
# a CaiT of seconds per epoch on a CPU (16 px digits)
TINY = ("model.image_size=16", "model.patch_size=4", "model.dim=32", "model.depth=2", "model.class_depth=1",
        "model.num_heads=2", "model.key_dim=16", "model.mlp_hidden_units=[64]",
        "model.drop_path=0.0")


# each recording's model: the plain CaiT, the published SL-CaiT (its -1e-9 "mask"), the
# suite's default SL-CaiT (a real mask after the head mixing: the official forward so rewritten)
MASKS = {"cait": ("model.official_cait_mask=false",),
         "slcait": ("model.official_cait_mask=true",),
         "slcait_masked": ("model.official_cait_mask=false",)}


def cait(spt: bool, lsa: bool, *overrides, size=32, classes=100):
    return staged("cait", spt, lsa, *overrides, size=size, classes=classes)


def tiny_cait(spt: bool, lsa: bool, *overrides):
    cfg = staged_config("cait", f"spt={spt}", f"lsa={lsa}", *TINY, *overrides)
    return build_model(cfg, 10, (16, 16, 3))


# against the official recordings (the laws sampled outside the patch stage: embeddings,
# class token, class-attention blocks, head; and in its first block)
(test_parameter_counts_are_the_official_ones, test_official_weights_give_the_official_logits,
 test_every_initial_parameter_is_drawn_as_the_official) = official_checks("cait", GOLDEN, MASKS)


def test_the_default_mask_is_not_the_official_one():
    """The official -1e-9 leaves the self-logit in (about 0): its logits differ from a
    real mask's, and from no mask's, by far more than rounding."""
    official, masked = GOLDEN["slcait_logits"], GOLDEN["slcait_masked_logits"]
    scale = np.abs(official).max()
    assert np.abs(official - masked).max() > 1e-2 * scale
    model = load_official_weights(cait(True, True), official_weights("slcait", GOLDEN))
    assert np.abs(logits_of(model, GOLDEN) - official).max() > 1e-2 * scale
    for layer in attention_layers(model):   # no mask at all is not the official -1e-9 either
        layer.mask_diagonal = False
    assert np.abs(logits_of(model, GOLDEN) - official).max() > 1e-3 * scale


def test_layer_scale_starts_as_the_official_by_position_in_its_stack():
    model = cait(True, True)
    ours = [[float(np.asarray(w)[0]) for w in block.branch_scales]
            for block in model.layers if hasattr(block, "branch_scales")]
    np.testing.assert_allclose(ours, GOLDEN["layer_scale_init"], rtol=1e-6)
    assert {b.name for b in model.layers if getattr(b, "class_attention", False)} == {
        "class_block_0", "class_block_1"}


@pytest.mark.jax_backend
@pytest.mark.parametrize("official_mask", [False, True])
def test_the_lsa_mask_removes_self_attention_in_the_patch_stage_only(official_mask):
    model = tiny_cait(False, True, f"model.official_cait_mask={official_mask}")
    x = np.random.default_rng(0).uniform(0, 255, (2, 16, 16, 3)).astype("float32")
    patch_blocks = blocks(model)                       # the probe's: the patch stage
    assert [b.name for b in patch_blocks] == ["block_0", "block_1"]
    probe = keras.Model(model.input, patch_blocks[0].input)
    tokens = probe(x)
    block = patch_blocks[0]
    weights = keras.ops.convert_to_numpy(
        block.attention.attention_weights(block.attention_norm(tokens)))
    diagonal = np.abs(np.diagonal(weights, axis1=-2, axis2=-1))
    assert (diagonal.max() > 1e-3) if official_mask else (diagonal.max() == 0.0)
    # class attention: the class token reads every patch (key 0 included), one output
    cls = model.get_layer("class_token")(tokens)
    head = model.get_layer("class_block_0")
    out = head(cls, context=tokens)
    assert tuple(out.shape) == (2, 1, 32)
    weights = keras.ops.convert_to_numpy(head.attention.attention_weights(
        head.attention_norm(cls), context=tokens))
    assert weights.shape == (2, 2, 1, 16) and np.abs(weights[..., 0]).min() > 0


def test_a_trained_cait_saves_and_loads_with_the_same_outputs(tmp_path):
    model = tiny_cait(True, True)
    x = np.random.default_rng(1).uniform(0, 255, (3, 16, 16, 3)).astype("float32")
    save_trained(model, tmp_path / "model.keras")
    loaded = load_model(tmp_path, compile=False)
    np.testing.assert_allclose(logits_of_x(loaded, x), logits_of_x(model, x), rtol=1e-5,
                               atol=1e-6)


def logits_of_x(model, x):
    return keras.ops.convert_to_numpy(model(x, training=False))


def test_each_architecture_reads_only_its_keys():
    vit = staged_config("tiny")["model"]
    assert model_arguments(vit)[0] == "vit" and "class_depth" not in model_arguments(vit)[1]
    with pytest.raises(ValueError, match="model.class_depth is a setting of architecture=cait"):
        model_arguments({**vit, "class_depth": 2})
    architecture, kwargs = model_arguments(staged_config("cait")["model"])
    assert architecture == "cait" and kwargs["class_depth"] == 2
    assert kwargs["official_cait_mask"] is False


@pytest.mark.slow
def test_a_smoke_cait_trains_through_the_command(tmp_path):
    smoke_trains(tmp_path, "cait_tiny")
