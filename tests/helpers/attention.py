"""A random attention layer and its gradients, for the tests that compare the
layer's two routes (the fast one training takes against the explicit one)."""
import keras
import numpy as np

from ablation.model.attention import MultiHeadSelfAttention

HEADS, KEY_DIM, DIM, TOKENS = 2, 4, 6, 9


def random_layer(mask, learnable, per_head, form, bias, dim=DIM, seed=11):
    """A built layer with every weight random (the temperature positive, off its start),
    for tokens of width ``dim`` (``KEY_DIM``: the folded route; ``DIM``: the plain one)."""
    rng = np.random.default_rng(seed)
    tokens = rng.normal(size=(3, TOKENS, dim)).astype("float32")
    layer = MultiHeadSelfAttention(HEADS, KEY_DIM, mask_diagonal=mask,
                                   learnable_temperature=learnable, temperature_per_head=per_head,
                                   temperature_form=form, qkv_bias=bias)
    layer(tokens)
    for weight in layer.trainable_weights:
        value = rng.normal(0.0, 0.5, weight.shape)
        if "temperature" in weight.path:
            value = keras.ops.convert_to_numpy(weight) * rng.uniform(0.5, 2.0, weight.shape)
        weight.assign(value.astype("float32"))
    return layer, tokens, rng.normal(size=(3, TOKENS, dim)).astype("float32")


def gradients(layer, route, tokens, probe):
    """d sum(route(tokens) * probe) / d (tokens, every trainable weight), as numpy."""
    weights = layer.trainable_weights
    if keras.backend.backend() == "jax":
        import jax

        def loss(values, x):
            with keras.StatelessScope(state_mapping=list(zip(weights, values))):
                return keras.ops.sum(route(x) * probe)

        by_weight, by_tokens = jax.grad(loss, argnums=(0, 1))([w.value for w in weights], tokens)
        found = [by_tokens, *by_weight]
    elif keras.backend.backend() == "torch":
        import torch

        x = torch.tensor(np.asarray(tokens), requires_grad=True)
        loss = keras.ops.sum(keras.ops.multiply(route(x), probe))
        found = torch.autograd.grad(loss, [x, *(w.value for w in weights)])
    else:
        import tensorflow as tf

        x = tf.convert_to_tensor(tokens)
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(route(x) * probe)
        found = tape.gradient(loss, [x, *weights])
    return [np.asarray(keras.ops.convert_to_numpy(g)) for g in found]
