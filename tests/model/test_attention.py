"""The attention layer's fast route (what training runs: the key and output
projections folded away when a head is as wide as a token, else the scale in
the queries and the LSA mask a constant bias) computes the explicit one, the
route the locality diagnostics read: outputs and gradients, in float32 and
bfloat16, on TensorFlow and JAX (the ``jax_backend`` tests run again on JAX:
tests/test_jax_backend.py)."""
import keras
import numpy as np
import pytest

from ablation.model.attention import MultiHeadSelfAttention
from tests.helpers.attention import DIM, HEADS, KEY_DIM, TOKENS, gradients, random_layer


def cases():
    """lsa x learnable temperature x per head x form (qkv biases on), two without
    biases, each for tokens wider than a head (plain) and as wide (folded)."""
    for dim in (DIM, KEY_DIM):
        for mask in (True, False):
            for learnable in (True, False):
                for per_head in (True, False):
                    for form in ("divide", "multiply"):
                        yield mask, learnable, per_head, form, True, dim
        yield True, True, True, "multiply", False, dim
        yield False, False, False, "divide", False, dim


def explicit(layer, x):
    return layer.mix(layer.attention_weights(x), x)


@pytest.mark.jax_backend
@pytest.mark.parametrize("mask, learnable, per_head, form, bias, dim", list(cases()))
def test_fast_route_computes_the_explicit_one(mask, learnable, per_head, form, bias, dim):
    """Outputs and gradients (tokens, projections, temperature) match the
    spelled-out route, mix(attention_weights), to float32 rounding."""
    layer, tokens, probe = random_layer(mask, learnable, per_head, form, bias, dim=dim)
    assert layer.folds_projections(dim) == (dim == KEY_DIM)
    want = keras.ops.convert_to_numpy(explicit(layer, tokens))
    np.testing.assert_allclose(keras.ops.convert_to_numpy(layer(tokens)), want,
                               rtol=1e-5, atol=1e-5)
    names = ["tokens", *(w.path for w in layer.trainable_weights)]
    assert any("temperature" in n for n in names) == learnable
    got = gradients(layer, lambda x: layer(x), tokens, probe)
    wanted = gradients(layer, lambda x: explicit(layer, x), tokens, probe)
    for name, g, w in zip(names, got, wanted):
        assert np.abs(w).max() > 0 or name.endswith("key/bias"), name  # a real gradient
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5 * max(1.0, np.abs(w).max()),
                                   err_msg=name)


@pytest.mark.jax_backend
@pytest.mark.parametrize("dim", [DIM, KEY_DIM])
def test_fast_route_runs_in_bfloat16(dim):
    """Under mixed_bfloat16 (the GPU's precision) the route computes in bfloat16,
    the mask bias cast to it, and stays within bfloat16 rounding of the explicit one."""
    rng = np.random.default_rng(3)
    tokens = rng.normal(size=(2, TOKENS, dim)).astype("float32")
    saved = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("mixed_bfloat16")  # as a job sets it
    try:
        layer = MultiHeadSelfAttention(HEADS, KEY_DIM, mask_diagonal=True,
                                       learnable_temperature=True, temperature_per_head=True,
                                       temperature_form="multiply")
        fast, want = layer(tokens), explicit(layer, tokens)
    finally:
        keras.mixed_precision.set_global_policy(saved)
    assert "bfloat16" in str(fast.dtype)
    fast, want = (keras.ops.convert_to_numpy(keras.ops.cast(t, "float32")) for t in (fast, want))
    assert np.abs(want).max() > 0.1
    np.testing.assert_allclose(fast, want, atol=0.03 * np.abs(want).max())


def test_the_config_round_trips_and_a_saved_kernel_choice_still_loads():
    layer, _, _ = random_layer(True, True, True, "multiply", False)
    clone = MultiHeadSelfAttention.from_config(layer.get_config())
    assert clone.get_config() == layer.get_config()
    assert "attention_kernel" not in layer.get_config()
    older = {**layer.get_config(), "attention_kernel": "fused"}
    assert MultiHeadSelfAttention.from_config(older).get_config() == layer.get_config()
