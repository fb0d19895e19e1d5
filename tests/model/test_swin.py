"""The paper's Swin (``model=swin``): checked against the official code's recordings
(``tools/official_golden.py --swin``: tests/data/official_golden_swin.npz) as PiT is,
and in what is Swin's own: the windows' LSA mask in every stage, the linear stochastic
depth, a save and load, a training through the command."""
import keras
import numpy as np
import pytest

from ablation.model import build_model
from ablation.model.build import model_arguments
from ablation.train.locality_probe import blocks
from tests.helpers.golden import (
    block_inputs,
    official_checks,
    round_trips,
    smoke_trains,
    staged,
    staged_config,
)
from tests.helpers.paths import ROOT

# the laws sampled outside the blocks (embeddings, mergings, head) and in the first one
(test_parameter_counts_are_the_official_ones, test_official_weights_give_the_official_logits,
 test_every_initial_parameter_is_drawn_as_the_official) = official_checks(
    "swin", np.load(ROOT / "tests" / "data" / "official_golden_swin.npz"))


def tiny_swin(spt: bool, lsa: bool):
    """Seconds per epoch on a CPU: 16 px, grids of 8, 4 and 2 tokens a side, the first
    stage's second block on the rolled grid."""
    tiny = ("model.image_size=16", "model.patch_size=2", "model.dim=16", "model.depth=[2,1,1]", "model.key_dim=8",
            "model.mlp_hidden_units=[32]", "model.drop_path=0.0", f"spt={spt}", f"lsa={lsa}")
    return build_model(staged_config("swin", *tiny), 10, (16, 16, 3))


@pytest.mark.jax_backend
def test_the_lsa_mask_removes_each_windows_diagonal_in_every_stage():
    seen = []
    for block, tokens in block_inputs(tiny_swin(True, True), 4):
        windows, bias = block.windows(block.attention_norm(tokens)), block.window_bias()
        weights = keras.ops.convert_to_numpy(block.attention.attention_weights(windows, bias=bias))
        assert np.abs(np.diagonal(weights, axis1=-2, axis2=-1)).max() == 0.0, block.name
        # the training route (the bias on the scaled queries' logits) gives the same output
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(block.attention(windows, bias=bias)),
            keras.ops.convert_to_numpy(block.attention.mix(weights, windows)), atol=1e-5)
        seen.append((tokens.shape[1], len(windows) // len(tokens), weights.shape[1], block.shift))
    # tokens, windows per image, heads, roll: 8 x 8 tokens in 4 windows (the second block's
    # rolled), merged to 4 x 4 and 2 x 2, each one window; widths and heads double
    assert seen == [(64, 4, 3, 0), (64, 4, 3, 2), (16, 1, 6, 0), (4, 1, 12, 0)]


def test_a_trained_swin_saves_and_loads_with_the_same_outputs(tmp_path):
    round_trips(lambda spt: tiny_swin(spt, True), tmp_path)   # both mergings


def test_depth_lists_stages_and_the_head_reads_the_mean_token():
    architecture, kwargs = model_arguments(staged_config("swin")["model"])
    assert architecture == "swin" and kwargs["depth"] == [2, 6, 4]
    with pytest.raises(ValueError, match=r"a list \(blocks per stage\) for architecture=pit "
                                         "or swin"):
        model_arguments({**staged_config("swin")["model"], "depth": 12})
    with pytest.raises(ValueError, match="Swin has no class token"):
        staged("swin", False, False, "model.pooling=class_token")


def test_stochastic_depth_rises_linearly_over_the_blocks():
    """As the official ``torch.linspace(0, sd, blocks)``: 0 in the first block, 0.1 in
    the last, across the stages."""
    model = staged("swin", True, True)
    rates = [model.get_layer(f"block_{i}").drop_path_rate for i in range(12)]
    np.testing.assert_allclose(rates, np.linspace(0.0, 0.1, 12), rtol=1e-6)


def test_the_locality_probe_measures_every_windowed_block():
    assert [b.name for b in blocks(tiny_swin(False, True))] == [f"block_{i}" for i in range(4)]


@pytest.mark.slow
def test_a_smoke_swin_trains_through_the_command(tmp_path):
    smoke_trains(tmp_path, "swin_tiny")
