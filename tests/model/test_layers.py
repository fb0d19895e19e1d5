"""The three switches do exactly what the paper says, on the public Keras API (the
``jax_backend`` tests again on JAX: tests/test_jax_backend.py)."""
import math

import keras
import numpy as np
import pytest

from ablation.model.attention import MultiHeadSelfAttention
from ablation.model.folded_attention import folded_attention
from ablation.augment.normalization import AdaptedNormalization
from ablation.model.tokenizer import SHIFTS, PatchTokenizer
from ablation.model.regularization import FastDropout


def shifted_by_hand(image, dy, dx):
    """shifted[i, j] = image[i + dy, j + dx], zero outside the image."""
    out = np.zeros_like(image)
    h, w = image.shape[:2]
    for i in range(h):
        for j in range(w):
            if 0 <= i + dy < h and 0 <= j + dx < w:
                out[i, j] = image[i + dy, j + dx]
    return out


def test_spt_stacks_the_image_and_four_half_patch_diagonal_shifts():
    rng = np.random.default_rng(0)
    images = rng.normal(size=(2, 8, 8, 3)).astype("float32")
    tokenizer = PatchTokenizer(patch_size=4, dim=5, shifted=True)
    stacked = keras.ops.convert_to_numpy(tokenizer.shift_and_stack(images))
    assert stacked.shape == (2, 8, 8, 15)
    half = 2
    # order: original, left-up, left-down, right-up, right-down
    expected_moves = [(0, 0), (half, half), (-half, half), (half, -half), (-half, -half)]
    assert [tuple(half * s for s in v) for v in SHIFTS.values()] == expected_moves[1:]
    for b in range(2):
        for k, (dy, dx) in enumerate(expected_moves):
            np.testing.assert_array_equal(stacked[b, ..., 3 * k: 3 * k + 3],
                                          shifted_by_hand(images[b], dy, dx))
    # left-up really moves content up and left: the bottom-right corner is padding
    assert np.all(stacked[:, -half:, :, 3:6] == 0) and np.all(stacked[:, :, -half:, 3:6] == 0)


def test_patchify_cuts_row_major_patches_like_extract_patches():
    rng = np.random.default_rng(1)
    images = rng.normal(size=(2, 12, 12, 2)).astype("float32")
    p = 4
    patches = keras.ops.convert_to_numpy(PatchTokenizer(p, 8).patchify(images))
    assert patches.shape == (2, 9, p * p * 2)
    for r in range(3):
        for c in range(3):
            block = images[:, r * p:(r + 1) * p, c * p:(c + 1) * p, :].reshape(2, -1)
            np.testing.assert_array_equal(patches[:, 3 * r + c], block)


@pytest.mark.parametrize("shifted, patch_dim", [(True, 4 * 4 * 15), (False, 4 * 4 * 3)])
def test_tokenizer_weights(shifted, patch_dim):
    tokenizer = PatchTokenizer(patch_size=4, dim=16, shifted=shifted)
    out = tokenizer(np.zeros((1, 8, 8, 3), "float32"))
    assert out.shape == (1, 4, 16)
    assert tokenizer.projection.kernel.shape == (patch_dim, 16)
    assert (tokenizer.norm is not None) == shifted


def attention(tokens, **kwargs):
    layer = MultiHeadSelfAttention(num_heads=2, key_dim=4, **kwargs)
    layer(tokens)
    return layer


def test_lsa_masks_exactly_the_diagonal():
    tokens = np.random.default_rng(2).normal(size=(3, 7, 8)).astype("float32")
    masked = keras.ops.convert_to_numpy(
        attention(tokens, mask_diagonal=True).attention_weights(tokens))
    plain = keras.ops.convert_to_numpy(attention(tokens).attention_weights(tokens))
    diagonal = np.eye(7, dtype=bool)
    assert np.all(masked[..., diagonal] == 0.0)
    assert np.all(masked[..., ~diagonal] > 0)
    np.testing.assert_allclose(masked.sum(-1), 1.0, rtol=1e-5)
    assert np.all(plain[..., diagonal] > 0)


def logits_by_hand(layer, tokens, temperature):
    weights = {w.path.split("/")[-2] + "/" + w.path.split("/")[-1]: keras.ops.convert_to_numpy(w)
               for w in layer.weights}
    q = tokens @ weights["query/kernel"] + weights.get("query/bias", 0.0)
    k = tokens @ weights["key/kernel"] + weights.get("key/bias", 0.0)
    q = q.reshape(*q.shape[:2], 2, 4).transpose(0, 2, 1, 3)
    k = k.reshape(*k.shape[:2], 2, 4).transpose(0, 2, 1, 3)
    return q @ k.transpose(0, 1, 3, 2) / np.reshape(temperature, (1, -1, 1, 1))


def test_fixed_temperature_is_the_standard_scale_and_has_no_weight():
    tokens = np.random.default_rng(3).normal(size=(2, 5, 8)).astype("float32")
    layer = attention(tokens)
    assert layer.temperature is None
    assert not any("temperature" in w.path for w in layer.weights)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(layer.attention_logits(tokens)),
                               logits_by_hand(layer, tokens, math.sqrt(4)), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("per_head", [False, True])
def test_learnable_temperature_divides_the_logits_and_learns(per_head):
    tokens = np.random.default_rng(4).normal(size=(16, 5, 8)).astype("float32")
    inputs = keras.Input((5, 8))
    layer = MultiHeadSelfAttention(num_heads=2, key_dim=4, learnable_temperature=True,
                                   temperature_per_head=per_head)
    model = keras.Model(inputs, keras.layers.Dense(1)(keras.layers.Flatten()(layer(inputs))))
    assert layer.temperature.trainable
    assert layer.temperature in model.trainable_weights
    assert tuple(layer.temperature.shape) == ((2,) if per_head else ())
    np.testing.assert_allclose(keras.ops.convert_to_numpy(layer.temperature), 2.0)  # sqrt(4)

    new = np.array([1.5, 3.0], "float32") if per_head else np.float32(1.5)
    layer.temperature.assign(new)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(layer.attention_logits(tokens)),
                               logits_by_hand(layer, tokens, new), rtol=1e-5, atol=1e-5)

    # A nonzero gradient reaches it: one SGD step moves it.
    before = keras.ops.convert_to_numpy(layer.temperature).copy()
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    model.fit(tokens, np.ones((16, 1), "float32"), batch_size=16, epochs=1, verbose=0)
    after = keras.ops.convert_to_numpy(layer.temperature)
    assert np.all(np.abs(after - before) > 1e-7)


@pytest.mark.parametrize("per_head", [False, True])
def test_multiply_form_scales_the_logits_from_the_standard_scale(per_head):
    # The official code: logits * s, s a per-head variable initialised to key_dim**-0.5.
    tokens = np.random.default_rng(6).normal(size=(2, 5, 8)).astype("float32")
    layer = attention(tokens, learnable_temperature=True, temperature_per_head=per_head,
                      temperature_form="multiply", qkv_bias=False)
    assert not any("bias" in w.path for w in (layer.query.weights + layer.key.weights
                                              + layer.value.weights))
    assert layer.output_dense.use_bias
    np.testing.assert_allclose(keras.ops.convert_to_numpy(layer.temperature), 0.5)  # 4**-0.5
    np.testing.assert_allclose(layer.effective_temperature(), 2.0)
    scale = np.array([0.25, 1.0], "float32") if per_head else np.float32(0.25)
    layer.temperature.assign(scale)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(layer.attention_logits(tokens)),
                               logits_by_hand(layer, tokens, 1.0 / scale), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(layer.effective_temperature(), 1.0 / scale, rtol=1e-6)


def test_unknown_temperature_form_is_refused():
    with pytest.raises(ValueError, match="temperature_form"):
        MultiHeadSelfAttention(2, 4, temperature_form="add")


def test_layers_round_trip_their_config():
    for layer in (PatchTokenizer(4, 8, shifted=True, name="t"),
                  MultiHeadSelfAttention(3, 5, dropout=0.1, mask_diagonal=True,
                                         learnable_temperature=True, temperature_per_head=True,
                                         temperature_form="multiply", qkv_bias=False)):
        clone = type(layer).from_config(layer.get_config())
        assert clone.get_config() == layer.get_config()


def attention_cases():
    """Both training paths: plain (key_dim < dim) and folded (key_dim >= dim)."""
    for dim, key_dim, bias in [(8, 4, True), (4, 4, True), (4, 4, False), (3, 5, True)]:
        for form in ("divide", "multiply"):
            for mask, learnable, per_head in [(True, True, False), (True, True, True),
                                              (False, False, False), (True, False, False)]:
                yield dim, key_dim, bias, form, mask, learnable, per_head


def random_attention(dim, key_dim, bias, form, mask, learnable, per_head, seed=7):
    """A built layer with every weight random (biases and temperature too)."""
    rng = np.random.default_rng(seed)
    tokens = rng.normal(size=(3, 9, dim)).astype("float32")
    layer = MultiHeadSelfAttention(num_heads=2, key_dim=key_dim, mask_diagonal=mask,
                                   learnable_temperature=learnable, dropout=0.3,
                                   temperature_per_head=per_head, temperature_form=form,
                                   qkv_bias=bias)
    layer(tokens)
    for weight in layer.trainable_weights:
        value = rng.normal(0.0, 0.5, weight.shape)
        if "temperature" in weight.path:  # keep it positive, off its initial value
            value = np.asarray(keras.ops.convert_to_numpy(weight)) * rng.uniform(0.5, 2.0, weight.shape)
        weight.assign(value.astype("float32"))
    return layer, tokens


@pytest.mark.jax_backend
@pytest.mark.parametrize("dim, key_dim, bias, form, mask, learnable, per_head",
                         list(attention_cases()))
def test_fast_attention_paths_compute_the_explicit_one(dim, key_dim, bias, form, mask,
                                                      learnable, per_head):
    """call() == the explicit path (mix(attention_weights)), in inference."""
    layer, tokens = random_attention(dim, key_dim, bias, form, mask, learnable, per_head)
    assert layer.folds_projections(dim) == (key_dim >= dim)
    explicit = keras.ops.convert_to_numpy(layer.mix(layer.attention_weights(tokens), tokens))
    if not layer.folds_projections(dim):
        fast_logits = keras.ops.convert_to_numpy(layer.fast_attention_logits(tokens))
        plain_logits = keras.ops.convert_to_numpy(layer.attention_logits(tokens))
        off_diagonal = ~np.eye(9, dtype=bool)
        np.testing.assert_allclose(fast_logits[..., off_diagonal],
                                   plain_logits[..., off_diagonal], rtol=1e-5, atol=1e-5)
    else:  # the route itself, not only call()
        np.testing.assert_allclose(keras.ops.convert_to_numpy(folded_attention(layer, tokens)),
                                   explicit, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(layer(tokens)), explicit,
                               rtol=1e-5, atol=1e-5)


@pytest.mark.jax_backend
@pytest.mark.parametrize("dim, key_dim", [(8, 4), (4, 4)])
def test_attention_dropout_keeps_the_expected_output(dim, key_dim):
    """In training each path drops weights (outputs vary) but averages to the
    inference output: the 1/(1 - rate) scale is applied exactly once."""
    layer, tokens = random_attention(dim, key_dim, True, "divide", True, True, False)
    copies = np.repeat(tokens[:1], 4000, axis=0)
    trained = keras.ops.convert_to_numpy(layer(copies, training=True))
    expected = keras.ops.convert_to_numpy(layer(tokens[:1]))[0]
    assert trained.std(axis=0).mean() > 0.05 * np.abs(expected).mean()  # dropout is on
    error = np.abs(trained.mean(axis=0) - expected)
    assert error.max() < 6 * trained.std(axis=0).max() / np.sqrt(len(copies))


@pytest.mark.jax_backend
@pytest.mark.parametrize("rate", [0.1, 0.5])
def test_fast_dropout_drops_independently_at_its_rate(rate):
    """Zeroed share = rate, kept values scaled by 1/(1 - rate), and the two
    elements that share one random integer (2i and 2i + 1) independent."""
    x = np.ones((60000, 7), "float32")
    layer = FastDropout(rate, seed=3)
    out = keras.ops.convert_to_numpy(layer(x, training=True))
    dropped = out == 0
    np.testing.assert_allclose(out[~dropped], 1.0 / (1.0 - rate), rtol=1e-6)
    tolerance = 5 * np.sqrt(rate * (1 - rate) / dropped.size)
    assert abs(dropped.mean() - rate) < tolerance
    for column in range(7):  # the odd last one too
        assert abs(dropped[:, column].mean() - rate) < 5 * np.sqrt(rate * (1 - rate) / len(x))
    both = (dropped[:, 2] & dropped[:, 3]).mean()
    assert abs(both - rate**2) < 5 * np.sqrt(rate**2 * (1 - rate**2) / len(x))
    second = keras.ops.convert_to_numpy(layer(x, training=True)) == 0
    assert (second != dropped).any()  # a new mask every call
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(layer(x)), x)  # inference


def test_fast_dropout_caps_a_rate_next_to_1():
    """Thresholds past the 16-bit range are capped (no overflow, no wrap-around
    that would keep everything): almost every element is dropped."""
    x = np.ones((2000, 8), "float32")
    out = keras.ops.convert_to_numpy(FastDropout(1 - 1e-7, seed=0)(x, training=True))
    assert (out == 0).mean() > 0.999


def test_fast_dropout_refuses_a_rate_outside_0_1():
    with pytest.raises(ValueError, match="dropout rate"):
        FastDropout(1.0)
    clone = FastDropout.from_config(FastDropout(0.2, seed=1).get_config())
    assert (clone.rate, clone.seed) == (0.2, 1)



def test_adapted_normalization_is_kerass_reading_its_statistics_from_its_weights(tmp_path):
    """The same function and weights as keras.layers.Normalization, but the
    statistics are read when called (so compiled steps take them as inputs
    and do not differ between training splits), and it saves and loads."""
    rng = np.random.default_rng(0)
    data = rng.normal(3.0, 2.0, (50, 4, 4, 3)).astype("float32")
    ours, theirs = AdaptedNormalization(), keras.layers.Normalization()
    ours.adapt(data)
    theirs.adapt(data)
    assert [w.shape for w in ours.weights] == [w.shape for w in theirs.weights]
    np.testing.assert_allclose(keras.ops.convert_to_numpy(ours(data)),
                               keras.ops.convert_to_numpy(theirs(data)), rtol=1e-5, atol=1e-5)
    ours.adapt_mean.assign(np.array([1.0, 2.0, 3.0], "float32"))
    ours.adapt_variance.assign(np.array([4.0, 1.0, 0.25], "float32"))
    expected = (data - [1.0, 2.0, 3.0]) / np.array([2.0, 1.0, 0.5], "float32")
    np.testing.assert_allclose(keras.ops.convert_to_numpy(ours(data)), expected, rtol=1e-5)
    path = tmp_path / "model.keras"
    keras.Sequential([keras.Input((4, 4, 3)), ours]).save(path)
    loaded = keras.saving.load_model(path)
    assert isinstance(loaded.layers[0], AdaptedNormalization)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(loaded(data)), expected, rtol=1e-5)
    half, keras_half = (AdaptedNormalization(dtype="mixed_bfloat16"),
                        keras.layers.Normalization(dtype="mixed_bfloat16"))
    half.adapt(data)
    keras_half.adapt(data)
    out = keras.ops.convert_to_numpy(keras.ops.cast(half(data), "float32"))
    np.testing.assert_array_equal(
        out, keras.ops.convert_to_numpy(keras.ops.cast(keras_half(data), "float32")))


def test_every_layer_of_the_model_is_built():
    """JAX's predict_on_batch (the locality probe) runs the whole model eagerly
    first when any layer is unbuilt (the check below is Keras's own): with the
    dropout layers nested in the blocks unbuilt, that compiled ~180 one-op
    programs (12 s on an H100)."""
    from ablation.model import build_model
    from tests.helpers.config import compose
    from omegaconf import OmegaConf

    config = OmegaConf.to_container(compose("experiment=smoke", "model.dropout=0.1",
                                            "model.attention_dropout=0.1",
                                            "model.drop_path=0.1"), resolve=True)
    model = build_model(config, 10, (8, 8, 1), normalization_data=np.ones((4, 8, 8, 1)))
    unbuilt = [type(layer).__name__ for layer in model._flatten_layers() if not layer.built]
    assert unbuilt == []
