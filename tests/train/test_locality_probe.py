"""Locality diagnostics against answers worked out independently."""
import itertools
import json
import math

import numpy as np
import pytest

from ablation.train.locality_probe import (LocalityProbe, patch_distances, per_head_means, probe_indices,
                                  query_sums, record_entry)


def measure(weights, k, patch, prefix=0, masked=False):
    """Per-head means of hand-made (batch, heads, N, N) weights over a k x k grid."""
    sums = query_sums(np.asarray(weights, "float32"), patch_distances(k, k, patch), prefix,
                      masked)
    sums = {q: np.asarray(v) for q, v in sums.items()}
    return per_head_means(sums, num_tokens=np.shape(weights)[-1], num_patches=k * k)


def brute_force_mean_distance(k, patch):
    """Mean over all (query, key) pairs of the centre distance, by enumeration."""
    cells = list(itertools.product(range(k), range(k)))
    total = sum(patch * math.hypot(a[0] - b[0], a[1] - b[1]) for a in cells for b in cells)
    return total / len(cells) ** 2


@pytest.mark.parametrize("k,patch", [(2, 4), (3, 6), (4, 4)])
def test_uniform_attention_gives_the_mean_pair_distance_and_entropy_one(k, patch):
    n = k * k
    values = measure(np.full((2, 3, n, n), 1 / n), k, patch)
    assert values["mean_distance_px"] == pytest.approx([brute_force_mean_distance(k, patch)] * 3,
                                                       rel=1e-5)
    assert values["normalized_entropy"] == pytest.approx([1.0] * 3, rel=1e-5)
    assert values["entropy"] == pytest.approx([math.log(n)] * 3, rel=1e-5)
    assert values["self_attention"] == pytest.approx([1 / n] * 3, rel=1e-5)
    # 2 x 2 grid of 4 px patches: each patch sees itself (0), two at 4 px, one at 4*sqrt(2)
    if (k, patch) == (2, 4):
        assert values["mean_distance_px"][0] == pytest.approx((0 + 4 + 4 + 4 * 2 ** 0.5) / 4)


def test_self_only_attention_gives_distance_and_entropy_zero():
    k = 3
    values = measure(np.broadcast_to(np.eye(k * k), (2, 2, k * k, k * k)), k, 4)
    assert values["mean_distance_px"] == [0.0, 0.0]
    assert values["entropy"] == [0.0, 0.0] and values["normalized_entropy"] == [0.0, 0.0]
    assert values["self_attention"] == [1.0, 1.0]


def test_masked_uniform_attention_is_normalised_by_the_keys_it_may_attend():
    n = 9
    weights = (np.ones((n, n)) - np.eye(n)) / (n - 1)
    values = measure(weights[None, None], 3, 2, masked=True)
    assert values["normalized_entropy"] == pytest.approx([1.0], rel=1e-5)
    assert values["self_attention"] == [0.0]


def test_class_token_is_left_out_and_the_rest_renormalised():
    # 2 x 2 grid with 4 px patches, plus a class token in front (N = 5).
    # Every query puts 0.5 on the class token and 0.5 on the patch to its right
    # (or left): renormalised, all weight is on a neighbour 4 px away.
    w = np.zeros((1, 1, 5, 5))
    w[0, 0, 0, 0] = 1.0  # the class token's own query (not a patch query)
    neighbour = {1: 2, 2: 1, 3: 4, 4: 3}
    for q, key in neighbour.items():
        w[0, 0, q, 0] = 0.5
        w[0, 0, q, key] = 0.5
    values = measure(w, 2, 4, prefix=1)
    assert values["mean_distance_px"] == pytest.approx([4.0])
    # entropy over all five queries: ln 2 for the four patch queries, 0 for the class token
    assert values["entropy"] == pytest.approx([4 * math.log(2) / 5])


def test_probe_set_is_fixed_by_the_probe_seed_not_the_run_seed():
    import keras

    keras.utils.set_random_seed(0)
    first = probe_indices(360, 128, seed=0)
    keras.utils.set_random_seed(1)  # another run seed: numpy's global state moves
    np.random.seed(1)
    assert np.array_equal(first, probe_indices(360, 128, seed=0))
    assert len(set(first)) == 128 and not np.array_equal(first, np.arange(128))
    assert len(probe_indices(100, 512, seed=0)) == 100  # all of a small test split


def _tiny_model(lsa, pooling="flatten"):
    import keras

    from ablation.model import build_vit

    keras.utils.set_random_seed(0)
    return build_vit(10, (8, 8, 1), spt=False, lsa=lsa, learnable_temperature=lsa,
                     image_size=16, patch_size=4, dim=16, depth=3, num_heads=2, key_dim=8,
                     mlp_hidden_units=[16], pooling=pooling, normalization=None)


@pytest.mark.parametrize("pooling", ["flatten", "class_token"])
def test_the_model_own_attention_lsa_mask_gives_self_attention_exactly_zero(pooling, tmp_path):
    images = np.random.default_rng(0).uniform(0, 16, size=(10, 8, 8, 1)).astype("float32")
    probe = LocalityProbe(images, np.arange(10), batch_size=4, attention_maps=2)
    masked = probe.final(_tiny_model(lsa=True, pooling=pooling), tmp_path)
    plain = record_entry(probe.measure(_tiny_model(lsa=False, pooling=pooling)))
    assert masked["probe_images"] == 10 and len(masked["layers"]) == 3
    for layer in masked["layers"]:
        assert layer["self_attention"] == [0.0, 0.0]
        assert all(0 < v <= 1 + 1e-6 for v in layer["normalized_entropy"])
        assert all(0 < v < 16 * 2 ** 0.5 for v in layer["mean_distance_px"])
    assert all(v > 0 for layer in plain["layers"] for v in layer["self_attention"])
    json.dumps(masked)  # plain JSON for the record
    saved = np.load(tmp_path / "attention_maps.npz")
    assert saved["maps"].shape == (2, 3, 4, 4) and list(saved["blocks"]) == [0, 1, 2]
    assert np.allclose(saved["maps"].sum(axis=(2, 3)), 1.0, atol=1e-5)
    assert saved["images"].shape == (2, 8, 8, 1)


def test_statistics_match_attention_weights_computed_layer_by_layer():
    """The sub-model's sums equal those from calling the model's layers one by one."""
    import keras

    from ablation.train.locality_probe import blocks, patch_geometry

    model = _tiny_model(lsa=True, pooling="class_token")
    images = np.random.default_rng(1).uniform(0, 16, size=(6, 8, 8, 1)).astype("float32")
    measured = LocalityProbe(images, np.arange(6), batch_size=4).measure(model)
    rows, cols, patch = patch_geometry(model)
    tokens = keras.Model(model.input, [b.input for b in blocks(model)])(images, training=False)
    for block, x, layer in zip(blocks(model), tokens, measured["layers"]):
        w = block.attention.attention_weights(block.attention_norm(x))
        sums = {q: keras.ops.convert_to_numpy(v) for q, v in query_sums(
            w, patch_distances(rows, cols, patch), 1, True).items()}
        expected = per_head_means(sums, x.shape[1], rows * cols)
        for q, values in expected.items():
            assert layer[q] == pytest.approx(values, rel=1e-4, abs=1e-7)


def test_bad_probe_count_is_refused_before_training():
    from ablation.config import ConfigError, validate
    from tests.helpers.config import compose
    from omegaconf import OmegaConf

    config = OmegaConf.to_container(compose("experiment=smoke", "diagnostics.probe_images=0"),
                                    resolve=True)
    with pytest.raises(ConfigError, match="diagnostics.probe_images=0 must be a positive"):
        validate(config)
    config["diagnostics"]["enabled"] = False
    validate(config)  # off: the count does not matter
