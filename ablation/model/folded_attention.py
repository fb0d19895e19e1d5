"""The attention layer's training route with the key and output projections folded away.

When a head is at least as wide as a token (``key_dim >= dim``: the keras.io
model's 64 and 64), the products Wq Wk^T and Wv Wo per head are small
(dim x dim), and computing with them instead of the four projections does
less work per step. The function is the layer's own (tests tie the two on
every backend the suite runs); only public ``keras.ops`` are used.
"""
from __future__ import annotations

from keras import ops

from ablation.model.regularization import keep_mask


def folded_weights(layer, dtype, dropout_scale: float):
    """The folded weights: (A, c) for the logits and (B, d) for the values.

    Per head h: A_h = s_h Wq_h Wk_h^T and c_h = s_h bq_h Wk_h^T, where s_h
    is the logits' scale (1/T); B_h = Wv_h Wo_h and d_h = bv_h Wo_h, times
    the attention dropout's 1/(1 - rate) in training. The products are
    formed in float32 from the weights as the layer reads them (already in
    the compute dtype under mixed precision), then cast to the compute
    dtype; they are dim x heads x dim numbers, negligible next to the
    activations.

    The key bias only adds logit terms constant along the softmax axis,
    so its gradient is exactly zero: it enters d times 0, so that it has
    that zero gradient (as on the explicit path, up to rounding) rather
    than none, which Keras would warn about at every trace.
    """
    heads, key_dim = layer.num_heads, layer.key_dim
    dim = layer.output_dense.kernel.shape[-1]
    wq = ops.reshape(ops.cast(layer.query.kernel, "float32"), (dim, heads, key_dim))
    wk = ops.reshape(ops.cast(layer.key.kernel, "float32"), (dim, heads, key_dim))
    wv = ops.reshape(ops.cast(layer.value.kernel, "float32"), (dim, heads, key_dim))
    wo = ops.reshape(ops.cast(layer.output_dense.kernel, "float32"), (heads, key_dim, dim))
    scale = ops.reshape(layer.logit_scale(), (-1,))  # (1,) or (heads,)
    a = ops.einsum("dhk,ehk->dhe", wq, wk) * ops.reshape(scale, (1, -1, 1))
    b = ops.einsum("dhk,hke->dhe", wv, wo) * dropout_scale
    if layer.qkv_bias:
        bq = ops.reshape(ops.cast(layer.query.bias, "float32"), (heads, key_dim))
        bv = ops.reshape(ops.cast(layer.value.bias, "float32"), (heads, key_dim))
        c = ops.einsum("hk,ehk->he", bq, wk) * ops.reshape(scale, (-1, 1))
        d = ops.einsum("hk,hke->he", bv, wo) * dropout_scale
        d = d + 0.0 * ops.sum(ops.cast(layer.key.bias, "float32"))
    else:
        c = d = ops.zeros((heads, dim), "float32")
    flat = (dim, heads * dim)
    return [ops.cast(t, dtype) for t in (ops.reshape(a, flat), ops.reshape(c, (-1,)),
                                          ops.reshape(b, flat), ops.reshape(d, (-1,)))]


def folded_attention(layer, tokens, training=None):
    """The layer's function with the key and output projections folded away.

    The same function as the explicit path (``mix(attention_weights)``; a
    test ties them on every backend the suite runs), computed with half the
    projections:

    - logits: q_i.k_j = x_i (Wq Wk^T) x_j + bq Wk^T x_j + (terms constant
      in j, which the softmax over j cancels), so the queries become
      x A + c and the keys are the tokens themselves;
    - output: sum_h P_h (x Wv_h + bv_h) Wo_h + bo = [P_1 .. P_H] @
      stack_h(x B_h + d_h) + bo: one matmul with an inner size of
      heads x tokens instead of a matmul per head, a transpose of the
      result and the output projection.

    The attention maps are laid out (batch, query, head, key), so no big
    tensor is transposed; the diagonal mask is a constant bias, and the
    dropout's 1/(1 - rate) rides on B and d instead of the maps.
    """
    n, dim = tokens.shape[1], tokens.shape[2]
    heads = layer.num_heads
    rate = layer.dropout if training else 0.0
    a, c, b, d = folded_weights(layer, tokens.dtype, 1.0 / (1.0 - rate))
    # ops.add, not +: a rank-1 addend becomes TensorFlow's BiasAdd, whose
    # gradient kernel is faster than the broadcasting add's Sum
    queries = ops.reshape(ops.add(ops.matmul(tokens, a), c), (-1, n * heads, dim))
    logits = ops.reshape(ops.matmul(queries, ops.transpose(tokens, (0, 2, 1))),
                         (-1, n, heads, n))
    bias = layer.mask_bias(n, logits.dtype)  # the LSA mask, None when off
    if bias is not None:
        logits = logits + ops.reshape(bias, (n, 1, n))
    weights = ops.softmax(logits, axis=-1)
    if rate > 0.0:
        keep = keep_mask(ops.shape(weights), rate, layer.attention_dropout.seed_generator)
        weights = ops.where(keep, weights, 0.0)
    values = ops.reshape(ops.add(ops.matmul(tokens, b), d), (-1, n, heads, dim))
    values = ops.reshape(ops.transpose(values, (0, 2, 1, 3)), (-1, heads * n, dim))
    mixed = ops.matmul(ops.reshape(weights, (-1, n, heads * n)), values)
    return ops.add(mixed, ops.cast(layer.output_dense.bias, mixed.dtype))
