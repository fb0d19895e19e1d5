"""The fused attention route (``keras.ops.dot_product_attention``) computes the
explicit one, outputs and gradients, and the choice of route is explicit: the
``model.attention_kernel`` key, its refusals, and what ``auto`` picks here."""
import keras
import numpy as np
import pytest
from omegaconf import OmegaConf

from ablation.config import ConfigError, validate
from ablation.model.attention import MultiHeadSelfAttention
from ablation.model.fused_attention import fused_attention
from tests.helpers.attention import DIM, HEADS, KEY_DIM, TOKENS, gradients, random_layer
from tests.helpers.commands import run_in_process, run_on_jax
from tests.helpers.config import compose
from tests.helpers.refusals import assert_refused


def cases():
    """lsa x learnable temperature x per head x form (qkv biases on), and two without biases."""
    for mask in (True, False):
        for learnable in (True, False):
            for per_head in (True, False):
                for form in ("divide", "multiply"):
                    yield mask, learnable, per_head, form, True
    yield True, True, True, "multiply", False
    yield False, False, False, "divide", False


@pytest.mark.parametrize("mask, learnable, per_head, form, bias", list(cases()))
def test_fused_route_computes_the_explicit_one(mask, learnable, per_head, form, bias):
    """Outputs and gradients (tokens, projections, temperature) match the
    spelled-out route, mix(attention_weights), to float32 rounding."""
    layer, tokens, probe = random_layer(mask, learnable, per_head, form, bias)
    assert layer.route(TOKENS, DIM) == "fused"
    fused = keras.ops.convert_to_numpy(fused_attention(layer, tokens))
    explicit = keras.ops.convert_to_numpy(layer.mix(layer.attention_weights(tokens), tokens))
    np.testing.assert_allclose(fused, explicit, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(layer(tokens)), explicit,
                               rtol=1e-5, atol=1e-5)  # call() takes it
    names = ["tokens", *(w.path for w in layer.trainable_weights)]
    assert any("temperature" in n for n in names) == learnable
    got = gradients(layer, lambda x: fused_attention(layer, x), tokens, probe)
    want = gradients(layer, lambda x: layer.mix(layer.attention_weights(x), x), tokens, probe)
    for name, g, w in zip(names, got, want):
        assert np.abs(w).max() > 0 or name.endswith("key/bias"), name  # a real gradient
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5 * max(1.0, np.abs(w).max()),
                                   err_msg=name)


def test_fused_route_runs_in_bfloat16():
    """Under mixed_bfloat16 (the GPU's precision) the route computes in bfloat16,
    the mask bias cast to it, and stays within bfloat16 rounding of the explicit one."""
    rng = np.random.default_rng(3)
    tokens = rng.normal(size=(2, TOKENS, DIM)).astype("float32")
    saved = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("mixed_bfloat16")  # as a job sets it
    try:
        layer = MultiHeadSelfAttention(HEADS, KEY_DIM, mask_diagonal=True,
                                       learnable_temperature=True, temperature_per_head=True,
                                       temperature_form="multiply", attention_kernel="fused")
        fused = layer(tokens)
        explicit = layer.mix(layer.attention_weights(tokens), tokens)
    finally:
        keras.mixed_precision.set_global_policy(saved)
    assert "bfloat16" in str(fused.dtype)
    fused, explicit = (keras.ops.convert_to_numpy(keras.ops.cast(t, "float32"))
                       for t in (fused, explicit))
    assert np.abs(explicit).max() > 0.1
    np.testing.assert_allclose(fused, explicit, atol=0.03 * np.abs(explicit).max())


def test_routes_follow_the_key_and_the_config_round_trips():
    """explicit keeps the spelled-out routes; auto never picks fused on the CPU
    or TensorFlow; fused is refused with attention dropout; get_config keeps it."""
    for kernel in ("explicit", "auto"):
        layer, _, _ = random_layer(True, True, False, "divide", True, kernel=kernel)
        assert layer.route(TOKENS, DIM) == "plain" and layer.route(TOKENS, KEY_DIM) == "folded"
    layer, _, _ = random_layer(True, True, True, "multiply", False, kernel="fused")
    clone = MultiHeadSelfAttention.from_config(layer.get_config())
    assert clone.attention_kernel == "fused" and clone.get_config() == layer.get_config()
    with pytest.raises(ValueError, match="attention_kernel='fused' needs dropout=0"):
        MultiHeadSelfAttention(2, 4, dropout=0.1, attention_kernel="fused")
    with pytest.raises(ValueError, match="attention_kernel must be one of"):
        MultiHeadSelfAttention(2, 4, attention_kernel="flash")


@pytest.mark.parametrize("backend, gpu, precision, key_dim, dropout, tokens, mask, fused", [
    ("jax", True, "mixed_bfloat16", 16, 0.0, 16, True, True),     # model=tiny in bf16
    ("jax", True, "float32", 16, 0.0, 16, True, False),           # no cuDNN kernel in float32
    ("jax", False, "mixed_bfloat16", 16, 0.0, 16, True, False),   # the CPU
    ("jax", True, "mixed_bfloat16", 16, 0.0, 65, True, False),    # model=paper: odd count,
    ("jax", True, "mixed_bfloat16", 16, 0.0, 65, False, False),   # with the mask or not
    ("jax", True, "mixed_bfloat16", 12, 0.0, 16, True, False),    # heads not a multiple of 8
    ("jax", True, "mixed_bfloat16", 256, 0.0, 16, True, False),   # heads too wide
    ("jax", True, "mixed_bfloat16", 64, 0.1, 144, True, False),   # keras_io: attention dropout
    ("torch", True, "float32", 16, 0.0, 65, True, True),
    ("torch", False, "float32", 16, 0.0, 16, True, False),
    ("tensorflow", True, "mixed_bfloat16", 16, 0.0, 16, True, False),
])
def test_auto_takes_the_fused_route_only_where_a_fused_kernel_runs(
        backend, gpu, precision, key_dim, dropout, tokens, mask, fused):
    from ablation.model.fused_attention import fused_pays_off

    layer = MultiHeadSelfAttention(2, key_dim, dropout=dropout, mask_diagonal=mask,
                                   dtype=precision)
    assert fused_pays_off(layer, tokens, backend=backend, gpu=gpu) == fused


def test_tiny_model_gives_the_same_logits_through_either_route():
    """model=tiny (lsa and a learnable temperature on), the same weights: the
    same logits with model.attention_kernel=fused as with explicit."""
    from ablation.model import build_model

    models = {}
    for kernel in ("explicit", "fused"):
        cfg = OmegaConf.to_container(compose("model=tiny", f"model.attention_kernel={kernel}"),
                                     resolve=True)
        assert cfg["lsa"] and cfg["learnable_temperature"]
        keras.utils.set_random_seed(0)
        models[kernel] = build_model(cfg, 10, (16, 16, 3))
    attention = [layer.attention for layer in models["fused"].layers if hasattr(layer, "attention")]
    assert attention and all(a.route(16, 32) == "fused" for a in attention)
    rng = np.random.default_rng(0)
    for weight in models["fused"].weights:  # off the initial values (temperatures included)
        weight.assign(keras.ops.convert_to_numpy(weight) + rng.normal(0, 0.05, weight.shape))
    models["explicit"].set_weights(models["fused"].get_weights())
    images = rng.uniform(0, 255, (4, 16, 16, 3)).astype("float32")
    logits = {k: keras.ops.convert_to_numpy(m(images, training=False)) for k, m in models.items()}
    assert np.abs(logits["explicit"]).max() > 0.1
    np.testing.assert_allclose(logits["fused"], logits["explicit"], rtol=1e-4, atol=1e-4)


def test_fused_with_attention_dropout_is_refused_in_one_line(tmp_path):
    """The schema refuses an unknown kernel; validate refuses fused with dropout
    (keras_io's 0.1), and the command line exits 2 before anything trains."""
    for overrides, words in [
        (["model.attention_kernel=flash"],
         "model.attention_kernel='flash' is not one of auto, explicit, fused, pallas"),
        (["model=keras_io", "model.attention_kernel=fused"],
         "model.attention_kernel=fused needs model.attention_dropout=0, got 0.1"),
    ]:
        with pytest.raises(ConfigError) as error:
            validate(OmegaConf.to_container(compose(*overrides), resolve=True))
        assert words in str(error.value) and "\n" not in str(error.value)
    for kernel in ("auto", "explicit", "fused"):
        validate(OmegaConf.to_container(compose("model=paper", f"model.attention_kernel={kernel}"),
                                        resolve=True))
    result = run_in_process("experiment=smoke", f"results_dir={tmp_path}/results",
                            "model.attention_dropout=0.1", "model.attention_kernel=fused")
    assert_refused(result, "model.attention_kernel=fused needs model.attention_dropout=0",
                   tmp_path)


ON_JAX = r'''
import keras
import test_fused_attention as t
assert keras.backend.backend() == "jax"
for case in t.cases():
    t.test_fused_route_computes_the_explicit_one(*case)
t.test_fused_route_runs_in_bfloat16()
t.test_routes_follow_the_key_and_the_config_round_trips()
print("ok")
'''


@pytest.mark.slow
def test_fused_route_computes_the_explicit_one_on_jax():
    """The layer checks above, again on the JAX backend (one fresh process; the
    whole-model test checks wiring that does not depend on the backend)."""
    assert run_on_jax(ON_JAX).strip().endswith("ok")
