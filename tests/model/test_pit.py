"""The paper's PiT (``model=pit``) against the official code's own outputs, recorded by
``tools/official_golden.py --pit`` into tests/data/official_golden_pit.npz: parameter
counts for every spt/lsa combination at 32 and 64 px, the logits for fixed weights
(plain, SPT + LSA), and a fresh model's parameters (the laws they are drawn from)."""
import keras
import numpy as np
import pytest

from ablation.model import build_model
from ablation.model.build import model_arguments
from tests.helpers.golden import (
    block_inputs,
    official_checks,
    round_trips,
    smoke_trains,
    staged_config,
)
from tests.helpers.paths import ROOT

GOLDEN = np.load(ROOT / "tests" / "data" / "official_golden_pit.npz")
# a PiT of seconds per epoch on a CPU (16 px, three stages of one block)
TINY = ("model.image_size=16", "model.patch_size=2", "model.dim=16", "model.depth=[1,1,1]", "model.key_dim=8",
        "model.mlp_hidden_units=[32]", "model.drop_path=0.0")

# against the official recordings (the laws sampled outside the blocks: embeddings,
# pooling, head)
(test_parameter_counts_are_the_official_ones, test_official_weights_give_the_official_logits,
 test_every_initial_parameter_is_drawn_as_the_official) = official_checks("pit", GOLDEN)


def tiny_pit(spt: bool, lsa: bool):
    return build_model(staged_config("pit", f"spt={spt}", f"lsa={lsa}", *TINY), 10, (16, 16, 3))


@pytest.mark.jax_backend
def test_the_lsa_mask_removes_self_attention_in_every_stage():
    widths = []
    for block, tokens in block_inputs(tiny_pit(True, True), 3):
        weights = keras.ops.convert_to_numpy(
            block.attention.attention_weights(block.attention_norm(tokens)))
        assert np.abs(np.diagonal(weights, axis1=-2, axis2=-1)).max() == 0.0, block.name
        widths.append((tokens.shape[1], tokens.shape[2], weights.shape[1]))
    # 8 x 8 patches and a class token, pooled to 4 x 4 and 2 x 2; widths and heads double
    assert widths == [(65, 16, 2), (17, 32, 4), (5, 64, 8)]


def test_a_trained_pit_saves_and_loads_with_the_same_outputs(tmp_path):
    round_trips(lambda spt: tiny_pit(spt, True), tmp_path)   # both poolings


def test_depth_is_a_list_of_stages_for_pit_only():
    architecture, kwargs = model_arguments(staged_config("pit")["model"])
    assert architecture == "pit" and kwargs["depth"] == [2, 6, 4]
    with pytest.raises(ValueError, match=r"model.depth=12: a list \(blocks per stage\)"):
        model_arguments({**staged_config("pit")["model"], "depth": 12})
    with pytest.raises(ValueError, match="a number of blocks otherwise"):
        model_arguments({**staged_config("paper")["model"], "depth": [2, 6, 4]})


@pytest.mark.slow
def test_a_smoke_pit_trains_through_the_command(tmp_path):
    smoke_trains(tmp_path, "pit_tiny")
