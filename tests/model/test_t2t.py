"""The paper's T2T-ViT (``model=t2t``) against the official code's own outputs, recorded by
``tools/official_golden.py --t2t`` into tests/data/official_golden_t2t.npz: parameter
counts for every spt/lsa combination at 32 and 64 px, the logits for fixed weights
(plain, SPT + LSA), and a fresh model's parameters (the laws they are drawn from)."""
import keras
import numpy as np
import pytest

from ablation.model import build_model
from ablation.train.locality_probe import LocalityProbe, blocks
from tests.helpers.golden import (official_checks, round_trips, smoke_trains, staged,
                                  staged_config)
from tests.helpers.paths import ROOT

GOLDEN = np.load(ROOT / "tests" / "data" / "official_golden_t2t.npz")
# a T2T of seconds per epoch on a CPU (16 px: 8 x 8 tokens, then 4 x 4, two blocks)
TINY = ("model.image_size=16", "model.patch_size=4", "model.dim=16", "model.depth=2",
        "model.key_dim=8", "model.mlp_hidden_units=[32]")


def tiny_t2t(spt: bool, lsa: bool):
    return build_model(staged_config("t2t", f"spt={spt}", f"lsa={lsa}", *TINY), 10,
                       (16, 16, 3))


# against the official recordings (the laws sampled outside the blocks: tokens-to-token,
# class token, head)
(test_parameter_counts_are_the_official_ones, test_official_weights_give_the_official_logits,
 test_every_initial_parameter_is_drawn_as_the_official) = official_checks("t2t", GOLDEN)


@pytest.mark.jax_backend
@pytest.mark.parametrize("size", [32, 64])
def test_the_lsa_mask_removes_self_attention_in_every_attention(size):
    """The token transformers' (one at 32 px, two at 64) and the blocks'."""
    model = staged("t2t", True, True, "model.depth=2", size=size)
    token_transformers = model.get_layer("patch_tokenizer").token_transformers
    shapes = [((size >> i + 1) ** 2, block.attention_norm.gamma.shape[0])   # the grid's tokens
              for i, block in enumerate(token_transformers)]
    backbone = [model.get_layer(f"block_{i}") for i in range(2)]
    shapes += [tuple(block.input.shape[1:]) for block in backbone]
    rng, found = np.random.default_rng(0), []
    for block, (count, width) in zip(token_transformers + backbone, shapes):
        weights = keras.ops.convert_to_numpy(block.attention.attention_weights(
            keras.ops.convert_to_tensor(rng.normal(size=(2, count, width)), "float32")))
        assert np.abs(np.diagonal(weights, axis1=-2, axis2=-1)).max() == 0.0, block.name
        found.append((count, width, weights.shape[1]))
    first = 9 * 3 * 5   # the first soft split of the image and its four shifted copies
    assert found == ([(256, first, 1)] if size == 32 else [(1024, first, 1), (256, 576, 1)]) + [
        (65, 256, 4)] * 2


def test_the_blocks_drop_paths_rise_linearly_and_the_probe_reads_every_attention():
    model = tiny_t2t(False, True)
    found = blocks(model)   # the backbone's (4 x 4 tokens and a class token), then the tokenizer's
    assert [b.name for b in found] == ["block_0", "block_1", "token_transformer_0"]
    assert [b.drop_path_rate for b in found[:2]] == pytest.approx([0.0, 0.1])
    x = np.random.default_rng(2).uniform(0, 255, (3, 16, 16, 3)).astype("float32")
    measured = LocalityProbe(x, np.arange(3), batch_size=3, attention_maps=1).measure(model)
    assert measured["geometry"] == {"rows": 4, "cols": 4, "patch_size": 4}
    assert [np.asarray(layer["self_attention"]).max() for layer in measured["layers"]] == [0] * 3


def test_a_trained_t2t_saves_and_loads_with_the_same_outputs(tmp_path):
    round_trips(lambda spt: tiny_t2t(spt, True), tmp_path)


@pytest.mark.slow
def test_a_smoke_t2t_trains_through_the_command(tmp_path):
    smoke_trains(tmp_path, "t2t_tiny")
