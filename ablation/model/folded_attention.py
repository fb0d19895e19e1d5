"""The attention layer's training route with the key and output projections folded
into the per-head products Wq Wk^T and Wv Wo (dim x dim: small when ``key_dim >= dim``)."""
from __future__ import annotations

from keras import ops

from ablation.model.regularization import keep_mask


def folded_weights(layer, dtype, dropout_scale: float):
    """The folded weights, formed in float32 and cast to ``dtype``: (A, c) for the
    logits and (B, d) for the values. Per head h: A_h = s_h Wq_h Wk_h^T,
    c_h = s_h bq_h Wk_h^T (s_h the logits' scale), B_h = Wv_h Wo_h and
    d_h = bv_h Wo_h, times ``dropout_scale``.

    The key bias adds only logit terms constant along the softmax axis: it
    enters d times 0, so that it has its zero gradient rather than none
    (which Keras would warn about at every trace).
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
    """The layer's function (``mix(attention_weights)``) with half the projections:

    - logits: q_i.k_j = x_i (Wq Wk^T) x_j + bq Wk^T x_j + (terms constant
      in j, which the softmax cancels): the queries are x A + c, the keys
      the tokens themselves;
    - output: sum_h P_h (x Wv_h + bv_h) Wo_h + bo = [P_1 .. P_H] @
      stack_h(x B_h + d_h) + bo, one matmul.

    The maps are laid out (batch, query, head, key), so no big tensor is
    transposed; the dropout's 1/(1 - rate) rides on B and d.
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
