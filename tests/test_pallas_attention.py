"""The Pallas attention kernel (``model.attention_kernel=pallas``): its outputs and
gradients are the explicit route's with the same dropout keep mask, that mask
drops at the rate asked, independently per element, and the route is taken on
JAX only (refused in one line for a job on another backend).

The kernel runs in Pallas's interpreter here (no GPU): the same program the GPU
compiles, evaluated operation by operation."""
import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="the test extra installs jax")
import jax.numpy as jnp  # noqa: E402

from ablation.model import pallas_attention as pa  # noqa: E402
from tests.helpers.commands import run_in_process, run_on_jax  # noqa: E402
from tests.helpers.refusals import assert_refused  # noqa: E402


def qkv(batch, tokens, heads, dim, dtype="float32", seed=0):
    rng = np.random.default_rng(seed)
    return [jnp.asarray(rng.normal(size=(batch, tokens, heads, dim)), dtype) for _ in range(4)]


@pytest.mark.slow   # Pallas's interpreter: 5-11 s a case on a 2-core CPU
@pytest.mark.parametrize("batch, tokens, heads, dim, rate, mask, dtype", [
    (2, 9, 2, 8, 0.0, False, "float32"),   # one block, padded 9 -> 16
    (2, 9, 2, 8, 0.3, True, "float32"),
    (2, 36, 3, 16, 0.1, True, "float32"),  # three blocks, the last one part padding
    (1, 33, 1, 16, 0.5, False, "float32"),  # the last block one real token
    (1, 32, 1, 16, 0.9, True, "float32"),   # two whole blocks, no padding
    (2, 20, 2, 16, 0.1, True, "bfloat16"),
])
def test_kernel_computes_the_reference(batch, tokens, heads, dim, rate, mask, dtype):
    """Outputs and gradients in q, k, v equal the plain softmax route's with the
    same keep mask (:func:`pa.reference`), to float rounding."""
    q, k, v, probe = qkv(batch, tokens, heads, dim, dtype)
    seed = jnp.array([1234], jnp.int32)
    options = dict(rate=rate, mask_diagonal=mask)
    got = pa.attention(q, k, v, seed, **options)
    want = pa.reference(q, k, v, seed, **options)
    assert got.dtype == q.dtype and got.shape == q.shape
    tolerance = 2e-2 if dtype == "bfloat16" else 2e-5
    np.testing.assert_allclose(np.float32(got), np.float32(want), atol=tolerance, rtol=tolerance)
    if rate:  # the mask does something, and the output differs without it
        undropped = pa.reference(q, k, v, seed, mask_diagonal=mask)
        assert np.abs(np.float32(want) - np.float32(undropped)).max() > 0.1

    def loss(function):
        return lambda *x: jnp.sum((function(*x, seed, **options) * probe).astype("float32"))

    got = jax.grad(loss(pa.attention), (0, 1, 2))(q, k, v)
    want = jax.grad(loss(pa.reference), (0, 1, 2))(q, k, v)
    for name, g, w in zip("qkv", got, want):
        w = np.float32(w)
        assert np.abs(w).max() > 0, name
        np.testing.assert_allclose(np.float32(g), w, atol=tolerance * max(1.0, np.abs(w).max()),
                                   rtol=tolerance, err_msg=name)


def test_one_token_under_the_lsa_mask_attends_to_itself():
    """A row whose only key is masked keeps it (a finite logit, as the explicit
    route's), where the padding of its block counts for nothing."""
    q, k, v, _ = qkv(2, 1, 2, 16)
    seed = jnp.array([5], jnp.int32)
    got = pa.attention(q, k, v, seed, rate=0.0, mask_diagonal=True)
    np.testing.assert_allclose(np.asarray(got), np.asarray(v), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(got),
                               np.asarray(pa.reference(q, k, v, seed, mask_diagonal=True)),
                               rtol=1e-6)


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_kernel_lowers_to_triton_for_a_cuda_gpu(dtype):
    """At keras_io's shape (4 heads of 64, 144 tokens), forward and backward
    lower for a CUDA device through Pallas's Triton backend, with no GPU here;
    a head width the GPU kernel cannot tile is refused in one line."""
    shape = jax.ShapeDtypeStruct((8, 144, 4, 64), dtype)
    seed = jax.ShapeDtypeStruct((1,), "int32")

    def forward(q, k, v, s):
        return pa.attention(q, k, v, s, rate=0.1, mask_diagonal=True, interpret=False)

    def backward(q, k, v, s):
        return jax.grad(lambda *x: forward(*x, s).astype("float32").sum(), (0, 1, 2))(q, k, v)

    for function, calls in ((forward, 1), (backward, 2)):
        lowered = jax.jit(function).trace(shape, shape, shape, seed).lower(
            lowering_platforms=("cuda",)).as_text()
        assert lowered.count("__gpu$xla.gpu.triton") == calls
    narrow = jax.ShapeDtypeStruct((8, 144, 4, 12), dtype)
    with pytest.raises(ValueError, match="powers of 2, at least 16, on a GPU, got key_dim 12"):
        jax.jit(forward).trace(narrow, narrow, narrow, seed).lower(lowering_platforms=("cuda",))


def full_mask(seed, rate, batch=4, heads=4, tokens=144):
    index = np.arange(tokens)
    return np.asarray(pa.keep(
        jnp.int32(seed), jnp.arange(batch)[:, None, None, None],
        jnp.arange(heads)[None, :, None, None], index[:, None], index[None, :],
        n_tokens=tokens, num_heads=heads, rate=rate))


@pytest.mark.parametrize("rate", [0.1, 0.5])
def test_keep_mask_drops_at_the_rate_independently(rate):
    """Over keras_io's (4 heads, 144 tokens) maps: the dropped fraction, the
    fraction of dropped neighbour pairs (along either axis), and the agreement
    of two seeds, two images and two heads are those of independent draws, to
    within 5 standard errors."""
    kept = full_mask(7, rate)
    n = kept.size

    def near(observed, p, count):
        assert abs(observed - p) < 5 * np.sqrt(p * (1 - p) / count), (observed, p)

    near(1 - kept.mean(), rate, n)
    for pairs in ((~kept[..., :-1] & ~kept[..., 1:]), (~kept[..., :-1, :] & ~kept[..., 1:, :])):
        near(pairs.mean(), rate**2, pairs.size)
    agree = rate**2 + (1 - rate)**2
    near((kept == full_mask(8, rate)).mean(), agree, n)
    near((kept[:-1] == kept[1:]).mean(), agree, kept[1:].size)
    near((kept[:, :-1] == kept[:, 1:]).mean(), agree, kept[:, 1:].size)
    assert full_mask(7, 0.0).all()


ON_JAX = r'''
import keras, numpy as np, jax
from ablation.model import pallas_attention as pa
from ablation.model.attention import MultiHeadSelfAttention
from ablation.model.fused_attention import merge_heads, scaled_projections
from tests.helpers import attention as t
assert keras.backend.backend() == "jax"
RATE, SEED = 0.3, np.array([99], "int32")

def kernel_route(layer, x):
    q, k, v, scale = scaled_projections(layer, x)
    return merge_heads(layer, pa.attention(q * scale, k, v, SEED, rate=RATE,
                                           mask_diagonal=layer.mask_diagonal))

def explicit_route(layer, x):
    n = x.shape[1]
    i = np.arange(n)
    kept = pa.keep(SEED[0], np.arange(x.shape[0])[:, None, None, None],
                   np.arange(layer.num_heads)[None, :, None, None], i[:, None], i[None, :],
                   n_tokens=n, num_heads=layer.num_heads, rate=RATE)
    weights = keras.ops.where(kept, layer.attention_weights(x) / (1 - RATE), 0.0)
    return layer.mix(weights, x)

# each value of each setting once: lsa on and off, the temperature learnable or
# fixed, per head or per layer, both forms, with and without biases (the
# interpreter is slow; every combination of the folding itself is tested
# through the fused route, which shares it)
CASES = [(True, True, True, "multiply", True), (False, False, False, "divide", False)]
for case in CASES:
    layer, tokens, probe = t.random_layer(*case, kernel="pallas")
    layer.dropout = RATE  # the kernel's rate; the layer's own draws its seed
    assert layer.route(t.TOKENS, t.DIM) == "pallas"
    np.testing.assert_allclose(kernel_route(layer, tokens), explicit_route(layer, tokens),
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(layer(tokens, training=False),  # call() and its scaling
                               layer.mix(layer.attention_weights(tokens), tokens),
                               rtol=1e-5, atol=1e-5)
    names = ["tokens", *(w.path for w in layer.trainable_weights)]
    got = t.gradients(layer, lambda x: kernel_route(layer, x), tokens, probe)
    want = t.gradients(layer, lambda x: explicit_route(layer, x), tokens, probe)
    for name, g, w in zip(names, got, want):
        assert np.abs(w).max() > 0 or name.endswith("key/bias"), name
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5 * max(1.0, np.abs(w).max()),
                                   err_msg=name)

# the layer itself: dropout off at inference (the explicit route's output), a
# fresh keep mask per training call from the layer's seed generator
layer = MultiHeadSelfAttention(2, 4, dropout=0.3, mask_diagonal=True,
                               learnable_temperature=True, attention_kernel="pallas")
tokens = np.random.default_rng(1).normal(size=(3, t.TOKENS, t.DIM)).astype("float32")
inference = layer(tokens, training=False)
np.testing.assert_allclose(inference, layer.mix(layer.attention_weights(tokens), tokens),
                           rtol=1e-5, atol=1e-5)
first, second = layer(tokens, training=True), layer(tokens, training=True)
assert np.abs(first - second).max() > 1e-3 and np.abs(first - inference).max() > 1e-3

# a whole model (model=tiny with attention dropout): the same logits as the
# explicit route from the same weights, and a training step that moves them
from omegaconf import OmegaConf
from tests.helpers.config import compose
from ablation.model import build_model
images = np.random.default_rng(0).uniform(0, 255, (4, 16, 16, 3)).astype("float32")
for switches in (["lsa=true", "learnable_temperature=true"],
                 ["lsa=false", "learnable_temperature=false"]):
    models = {}
    for kernel in ("explicit", "pallas"):
        cfg = OmegaConf.to_container(compose("model=tiny", "model.attention_dropout=0.1",
                                             f"model.attention_kernel={kernel}", *switches),
                                     resolve=True)
        keras.utils.set_random_seed(0)
        models[kernel] = build_model(cfg, 10, (16, 16, 3))
    models["explicit"].set_weights(models["pallas"].get_weights())
    logits = {k: np.asarray(m(images, training=False)) for k, m in models.items()}
    np.testing.assert_allclose(logits["pallas"], logits["explicit"], rtol=1e-4, atol=1e-4)
model = models["pallas"]
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
before = [np.asarray(w) for w in model.trainable_weights]
loss = model.train_on_batch(images, np.arange(4))
assert np.isfinite(loss)
moved = [np.abs(np.asarray(w) - b).max() > 0 for w, b in zip(model.trainable_weights, before)
         if "attention" in w.path and not w.path.endswith("key/bias")]  # softmax ignores it
assert moved and all(moved)
print("pallas on jax: ok")
'''


@pytest.mark.slow   # Pallas's interpreter
def test_kernel_route_computes_the_explicit_one_on_jax():
    """On the JAX backend, with and without each switch: the layer's Pallas route
    equals mix(attention_weights) with the same keep mask, outputs and gradients
    (tokens, projections, temperature); the layer draws a new mask per training
    call and none at inference; a whole model, with and without lsa and the
    learnable temperature, gives the explicit route's logits, and it trains."""
    assert "pallas on jax: ok" in run_on_jax(ON_JAX)


def test_other_backends_keep_the_explicit_route_and_a_job_is_refused(tmp_path):
    """Off JAX the layer computes its explicit route (a model trained with the
    kernel loads anywhere), and a job asking for it there, or with heads the
    GPU kernel cannot tile, is refused in one line before anything is written."""
    import keras

    from ablation.model.attention import MultiHeadSelfAttention

    assert keras.backend.backend() != "jax"
    layer = MultiHeadSelfAttention(2, 4, dropout=0.1, attention_kernel="pallas")
    assert layer.route(9, 6) == "plain" and layer.route(9, 4) == "folded"
    clone = MultiHeadSelfAttention.from_config(layer.get_config())
    assert clone.attention_kernel == "pallas"
    result = run_in_process("experiment=smoke", f"results_dir={tmp_path}/results",
                            "model.attention_kernel=pallas")
    assert_refused(result, "model.attention_kernel=pallas needs the JAX backend", tmp_path)
    result = run_in_process("experiment=smoke", f"results_dir={tmp_path}/results",
                            "model.attention_kernel=pallas", "model.key_dim=12")
    assert_refused(result, "model.attention_kernel=pallas needs a head width that is a power "
                   "of 2, at least 16, got 12", tmp_path)
