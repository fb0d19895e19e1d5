"""The attention layer's fused routes, and the choice of route
(``model.attention_kernel``): ``keras.ops.dot_product_attention`` (``fused``)
and a JAX Pallas kernel with attention dropout (``pallas``).

``keras.ops.dot_product_attention`` computes softmax(q.k * scale + bias) v in one
call, which JAX and PyTorch hand to a fused kernel on a GPU (cuDNN's flash
attention; PyTorch's scaled-dot-product kernels). It has no dropout on the
attention weights, so the route is only for layers whose attention dropout is 0
(the ``paper`` and ``tiny`` presets). The layer's two Locality Self-Attention
parts enter as follows:

- the temperature (fixed or learnable, per layer or per head, ``divide`` or
  ``multiply``) is folded into the query, as :meth:`MultiHeadSelfAttention._scaled_query`
  does, and the call's ``scale`` is 1; the fixed 1/sqrt(key_dim) is passed as
  ``scale`` instead, a plain number that every backend's kernel takes;
- the LSA diagonal mask is the layer's constant additive bias
  (:meth:`MultiHeadSelfAttention.mask_bias`), what cuDNN and PyTorch turn a
  boolean mask into anyway.

Queries, keys and values stay in the (batch, token, head, key_dim) layout the
projections give, which is the call's own, so nothing is transposed around it.
Tests tie the route to the explicit one (outputs and gradients, on TensorFlow
and JAX).

``pallas`` (:mod:`ablation.model.pallas_attention`) takes the same query, keys
and values into one kernel that also applies attention dropout, for the
``keras_io`` preset's 0.1. It is JAX only and chosen by name, never by
``auto``: on another backend the layer keeps its explicit route, so a model
trained with it loads and runs anywhere.
"""
from __future__ import annotations

import keras
from keras import ops

from ablation.config.choices import ATTENTION_KERNELS

__all__ = ["ATTENTION_KERNELS", "fused_attention", "fused_pays_off", "on_gpu",
           "pallas_attention"]


def on_gpu() -> bool:
    """Whether the backend computes on a GPU."""
    from ablation.runtime.accelerator import device_platform

    return device_platform() == "gpu"


def fused_pays_off(layer, n_tokens: int, backend: str | None = None,
                   gpu: bool | None = None) -> bool:
    """Whether ``attention_kernel="auto"`` takes the fused route for ``n_tokens``
    on ``backend`` (default: Keras's), on a GPU or not (default: :func:`on_gpu`).

    Only where a fused kernel can run: attention dropout 0 and a GPU under JAX
    or PyTorch. On JAX, Keras uses cuDNN's kernel only for 16-bit floats
    (``trainer.precision=mixed_bfloat16``) and head widths that are multiples of
    8 up to 128; otherwise it computes the same function with XLA's ordinary
    operations, no different in kind from the explicit route, so that route is
    kept. cuDNN also refuses a bias (the LSA mask) in training when the token
    count is odd (the ``paper`` model's 64 patches and class token); an odd
    count keeps the explicit route whether the mask is on or not, so the
    variants of one sweep, which differ in ``lsa``, share one route.
    Everywhere else (TensorFlow, the CPU) the explicit route is kept
    (docs/performance.md).
    """
    backend = backend or keras.backend.backend()
    if layer.dropout > 0.0 or backend not in ("jax", "torch"):
        return False
    if not (on_gpu() if gpu is None else gpu):
        return False
    if backend == "torch":
        return True
    return (str(layer.compute_dtype) in ("float16", "bfloat16")
            and layer.key_dim % 8 == 0 and layer.key_dim <= 128 and n_tokens % 2 == 0)


def scaled_projections(layer, tokens):
    """The layer's queries (a learned temperature folded in), keys and values in
    the (batch, token, head, key_dim) layout, and the scale left to apply to q.k
    (the fixed 1/sqrt(key_dim), or 1 with a learned temperature)."""
    shape = (-1, tokens.shape[1], layer.num_heads, layer.key_dim)
    q = ops.reshape(layer.query(tokens), shape)
    k = ops.reshape(layer.key(tokens), shape)
    v = ops.reshape(layer.value(tokens), shape)
    if layer.temperature is None:
        return q, k, v, float(layer.key_dim) ** -0.5
    return layer._scaled_query(q, head_axis=2), k, v, 1.0


def merge_heads(layer, mixed):
    """(batch, token, head, key_dim) back to tokens, through the output projection."""
    n = mixed.shape[1]
    return layer.output_dense(ops.reshape(mixed, (-1, n, layer.num_heads * layer.key_dim)))


def fused_attention(layer, tokens):
    """The layer's function through ``keras.ops.dot_product_attention`` (no dropout)."""
    q, k, v, scale = scaled_projections(layer, tokens)
    bias = layer.mask_bias(tokens.shape[1], q.dtype)
    return merge_heads(layer, ops.dot_product_attention(q, k, v, bias=bias, scale=scale))


def pallas_attention(layer, tokens, training=None):
    """The layer's function, attention dropout included, through one JAX Pallas
    kernel (:mod:`ablation.model.pallas_attention`; the JAX backend only)."""
    from ablation.model import pallas_attention as kernel  # loads JAX

    q, k, v, scale = scaled_projections(layer, tokens)
    if scale != 1.0:
        q = q * scale
    rate = layer.dropout if training else 0.0
    seed = (keras.random.randint((1,), 0, 2**31 - 1, dtype="int32",
                                 seed=layer.attention_dropout.seed_generator)
            if rate > 0 else ops.zeros((1,), "int32"))
    mixed = kernel.attention(q, k, v, seed, rate=rate, mask_diagonal=layer.mask_diagonal)
    return merge_heads(layer, mixed)
