"""Attention with dropout in one JAX Pallas kernel (``model.attention_kernel=pallas``).

``keras.ops.dot_product_attention`` has no dropout on the attention weights,
so the ``keras_io`` preset (attention dropout 0.1) cannot take the fused
route; its explicit route writes the (batch, heads, tokens, tokens) logits,
weights and dropout mask to memory and reads them back in the backward pass.
This kernel computes the same function block by block without storing any
of them: a FlashAttention-style forward pass (an online softmax over blocks
of keys) and a backward pass that recomputes the weights from the saved
log-sum-exp, with

- the LSA diagonal mask and the padding of the token axis to a whole number
  of blocks as index comparisons inside the kernel;
- the temperature folded into the query before the kernel, as the fused
  route does, so its gradient is ordinary JAX autodiff;
- dropout decided by a counter-based hash of (seed, batch, head, query, key)
  (:func:`keep`), so the backward pass regenerates the forward pass's mask
  instead of storing it. Its drop probability is ``rate`` to within 2**-32.

The kernel is JAX only, written for Pallas's Triton backend. Off a GPU it runs
in Pallas's interpreter, which is exact and slow: that is how the tests tie it
to the explicit route on the CPU (:func:`reference` applies the same keep mask
to the plain softmax), and they also lower it for a CUDA device, which needs
none. The plain Keras route stays the reference everywhere and the only route
on the other backends.
"""
from __future__ import annotations

import functools
import logging

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pl_triton

from ablation.config.validate import fits_gpu

__all__ = ["attention", "keep", "reference", "BLOCK"]

BLOCK = 16  # tokens per block: the smallest tile of a GPU matrix instruction, untuned
# The LSA mask's logit: its exp is 0 next to any real logit, and a row whose only
# key it masks (one token) still has a finite maximum, as in the explicit route.
_MASKED = -0.7 * float(jnp.finfo(jnp.float32).max)
_log = logging.getLogger(__name__)


def _triton_params():
    """Triton's compiler settings (those of JAX's own Triton attention kernel).

    Naming them also picks Pallas's Triton backend on a GPU: without them JAX
    0.10 lowers to Mosaic GPU, which refuses the kernel's 4-byte seed block.
    Older JAX calls the class ``TritonCompilerParams``."""
    params = getattr(pl_triton, "CompilerParams", None) or pl_triton.TritonCompilerParams
    return params(num_warps=4, num_stages=2)


def _mix32(x):
    """A bijective 32-bit integer hash (``lowbias32``): every output bit depends
    on every input bit, so neighbouring counters give unrelated numbers."""
    x = x ^ (x >> 16)
    x = x * jnp.uint32(0x7FEB352D)
    x = x ^ (x >> 15)
    x = x * jnp.uint32(0x846CA68B)
    return x ^ (x >> 16)


def keep(seed, batch, head, rows, cols, *, n_tokens: int, num_heads: int, rate: float):
    """The dropout keep mask of one batch element and head, for query positions
    ``rows`` and key positions ``cols`` (arrays broadcast together, e.g. a
    column and a row): True with probability 1 - ``rate`` (to within 2**-32),
    independently per element.

    The counter is the element's flat index in (batch, head, query, key) over
    the real token count, so a mask does not depend on the blocking; ``seed``
    (an int32 scalar) picks the stream. The same function runs inside the
    kernel and in :func:`reference`.
    """
    counter = ((batch * num_heads + head) * n_tokens + rows) * n_tokens + cols
    stream = _mix32(jnp.asarray(seed).astype(jnp.uint32) ^ jnp.uint32(0x9E3779B9))
    bits = _mix32(counter.astype(jnp.uint32) ^ stream)
    return bits >= jnp.uint32(min(round(rate * 2**32), 2**32 - 1))


def _scores(q, k, rows, cols, *, n_tokens: int, mask_diagonal: bool):
    """q.k for a block of queries and keys in float32, masked where a key is
    (LSA) the query's own token, and -inf where it is padding (every block has
    a real key, so every row keeps a finite maximum)."""
    s = jax.lax.dot_general(q, k, (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32)
    if mask_diagonal:
        s = jnp.where(rows[:, None] == cols[None, :], _MASKED, s)
    return jnp.where(cols[None, :] >= n_tokens, -jnp.inf, s)


def _dot(a, b):
    return jax.lax.dot_general(a, b, (((1,), (0,)), ((), ())), preferred_element_type=jnp.float32)


def _forward_kernel(seed_ref, q_ref, k_ref, v_ref, o_ref, lse_ref, *, n_tokens, num_heads,
                    rate, mask_diagonal, block):
    row_block, batch, head = pl.program_id(0), pl.program_id(1), pl.program_id(2)
    rows = row_block * block + jnp.arange(block)
    q = q_ref[...]
    seed = seed_ref[0]

    def over_key_blocks(col_block, carry):
        o, m, total = carry
        cols = col_block * block + jnp.arange(block)
        k = k_ref[pl.ds(col_block * block, block), :]
        v = v_ref[pl.ds(col_block * block, block), :]
        s = _scores(q, k, rows, cols, n_tokens=n_tokens, mask_diagonal=mask_diagonal)
        m_next = jnp.maximum(m, jnp.max(s, axis=1))
        correction = jnp.exp(m - m_next)
        p = jnp.exp(s - m_next[:, None])
        total = total * correction + jnp.sum(p, axis=1)  # the softmax's sum: undropped weights
        if rate > 0.0:
            kept = keep(seed, batch, head, rows[:, None], cols[None, :], n_tokens=n_tokens,
                        num_heads=num_heads, rate=rate)
            p = jnp.where(kept, p * (1.0 / (1.0 - rate)), 0.0)
        o = o * correction[:, None] + _dot(p.astype(v.dtype), v)
        return o, m_next, total

    start = (jnp.zeros((block, q.shape[1]), jnp.float32),
             jnp.full((block,), -jnp.inf, jnp.float32), jnp.zeros((block,), jnp.float32))
    o, m, total = jax.lax.fori_loop(0, k_ref.shape[0] // block, over_key_blocks, start)
    o_ref[...] = (o / total[:, None]).astype(o_ref.dtype)
    lse_ref[...] = m + jnp.log(total)


def _backward_kernel(seed_ref, q_ref, k_ref, v_ref, do_ref, lse_ref, delta_ref,
                     dq_ref, dk_ref, dv_ref, *, n_tokens, num_heads, rate, mask_diagonal, block):
    batch, head, index = pl.program_id(0), pl.program_id(1), pl.program_id(2)
    seed = seed_ref[0]
    n_blocks = q_ref.shape[0] // block

    def score_gradient(q, k, v, do, lse, delta, rows, cols):
        """(dropped weights, d logits) for one block of queries and keys."""
        p = jnp.exp(_scores(q, k, rows, cols, n_tokens=n_tokens, mask_diagonal=mask_diagonal)
                    - lse[:, None])
        dp = jax.lax.dot_general(do, v, (((1,), (1,)), ((), ())),
                                 preferred_element_type=jnp.float32)
        dropped = p
        if rate > 0.0:
            kept = keep(seed, batch, head, rows[:, None], cols[None, :], n_tokens=n_tokens,
                        num_heads=num_heads, rate=rate)
            dropped = jnp.where(kept, p * (1.0 / (1.0 - rate)), 0.0)
            dp = jnp.where(kept, dp * (1.0 / (1.0 - rate)), 0.0)
        return dropped, p * (dp - delta[:, None])

    # d keys and d values of key block `index`, summed over every query block
    cols = index * block + jnp.arange(block)
    k = k_ref[pl.ds(index * block, block), :]
    v = v_ref[pl.ds(index * block, block), :]

    def over_query_blocks(row_block, carry):
        dk, dv = carry
        span = pl.ds(row_block * block, block)
        q, do = q_ref[span, :], do_ref[span, :]
        rows = row_block * block + jnp.arange(block)
        dropped, ds = score_gradient(q, k, v, do, lse_ref[span], delta_ref[span], rows, cols)
        dv = dv + _dot(dropped.T.astype(do.dtype), do)
        dk = dk + _dot(ds.T.astype(q.dtype), q)
        return dk, dv

    zeros = jnp.zeros((block, k.shape[1]), jnp.float32)
    dk, dv = jax.lax.fori_loop(0, n_blocks, over_query_blocks, (zeros, zeros))
    dk_ref[...] = dk.astype(dk_ref.dtype)
    dv_ref[...] = dv.astype(dv_ref.dtype)

    # d queries of query block `index`, summed over every key block
    span = pl.ds(index * block, block)
    q, do = q_ref[span, :], do_ref[span, :]
    lse, delta = lse_ref[span], delta_ref[span]
    rows = index * block + jnp.arange(block)

    def over_key_blocks(col_block, dq):
        keys = pl.ds(col_block * block, block)
        k, v = k_ref[keys, :], v_ref[keys, :]
        cols = col_block * block + jnp.arange(block)
        _, ds = score_gradient(q, k, v, do, lse, delta, rows, cols)
        return dq + _dot(ds.astype(k.dtype), k)

    dq = jax.lax.fori_loop(0, n_blocks, over_key_blocks, jnp.zeros_like(zeros))
    dq_ref[...] = dq.astype(dq_ref.dtype)


def _pad(x, n_padded):
    return jnp.pad(x, ((0, 0), (0, n_padded - x.shape[1]), (0, 0), (0, 0)))


@functools.partial(jax.custom_vjp, nondiff_argnums=(4, 5, 6, 7))
def _attention(seed, q, k, v, rate, mask_diagonal, block, interpret):
    return _forward(seed, q, k, v, rate, mask_diagonal, block, interpret)[0]


def _forward(seed, q, k, v, rate, mask_diagonal, block, interpret):
    batch, n_tokens, num_heads, dim = q.shape
    n_padded = pl.cdiv(n_tokens, block) * block
    padded = [_pad(x, n_padded) for x in (q, k, v)]
    whole = pl.BlockSpec((None, n_padded, None, dim), lambda i, b, h: (b, 0, h, 0))
    kernel = functools.partial(_forward_kernel, n_tokens=n_tokens, num_heads=num_heads,
                               rate=rate, mask_diagonal=mask_diagonal, block=block)
    o, lse = pl.pallas_call(
        kernel,
        grid=(n_padded // block, batch, num_heads),
        in_specs=[pl.BlockSpec((1,), lambda i, b, h: (0,)),
                  pl.BlockSpec((None, block, None, dim), lambda i, b, h: (b, i, h, 0)),
                  whole, whole],
        out_specs=[pl.BlockSpec((None, block, None, dim), lambda i, b, h: (b, i, h, 0)),
                   pl.BlockSpec((None, None, block), lambda i, b, h: (b, h, i))],
        out_shape=[jax.ShapeDtypeStruct(padded[0].shape, q.dtype),
                   jax.ShapeDtypeStruct((batch, num_heads, n_padded), jnp.float32)],
        interpret=interpret,
        compiler_params=None if interpret else _triton_params(),
        name="lsa_attention_forward",
    )(seed, *padded)
    return o[:, :n_tokens], (seed, *padded, o, lse)


def _backward(rate, mask_diagonal, block, interpret, residuals, do):
    seed, q, k, v, o, lse = residuals
    batch, n_padded, num_heads, dim = q.shape
    n_tokens = do.shape[1]
    do = _pad(do, n_padded)
    # rowsum(o * do) = rowsum(p * dp) with or without dropout: the softmax's
    # backward term, computed once per query rather than per key block
    delta = jnp.einsum("bnhd,bnhd->bhn", o.astype(jnp.float32), do.astype(jnp.float32))
    whole = pl.BlockSpec((None, n_padded, None, dim), lambda b, h, i: (b, 0, h, 0))
    stats = pl.BlockSpec((None, None, n_padded), lambda b, h, i: (b, h, 0))
    part = pl.BlockSpec((None, block, None, dim), lambda b, h, i: (b, i, h, 0))
    kernel = functools.partial(_backward_kernel, n_tokens=n_tokens, num_heads=num_heads,
                               rate=rate, mask_diagonal=mask_diagonal, block=block)
    dq, dk, dv = pl.pallas_call(
        kernel,
        grid=(batch, num_heads, n_padded // block),
        in_specs=[pl.BlockSpec((1,), lambda b, h, i: (0,)), whole, whole, whole, whole,
                  stats, stats],
        out_specs=[part, part, part],
        out_shape=[jax.ShapeDtypeStruct(x.shape, x.dtype) for x in (q, k, v)],
        interpret=interpret,
        compiler_params=None if interpret else _triton_params(),
        name="lsa_attention_backward",
    )(seed, q, k, v, do.astype(q.dtype), lse, delta)
    return None, dq[:, :n_tokens], dk[:, :n_tokens], dv[:, :n_tokens]


_attention.defvjp(_forward, _backward)


@functools.lru_cache(maxsize=1)
def _warn_interpreted():
    _log.warning("model.attention_kernel=pallas: no GPU, so the kernel runs in Pallas's "
                 "interpreter, exact but several times slower than the explicit route "
                 "(model.attention_kernel=auto)")


def attention(q, k, v, seed, *, rate: float = 0.0, mask_diagonal: bool = False,
              block: int = BLOCK, interpret: bool | None = None):
    """softmax(q.k + LSA mask) with dropout at ``rate``, applied to v.

    ``q``, ``k``, ``v``: (batch, token, head, key_dim), the query already
    scaled; ``seed``: int32 of shape (1,), the dropout stream (ignored at rate
    0). ``interpret`` defaults to True off a GPU. Differentiable in q, k, v.
    """
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"dropout rate must be in [0, 1), got {rate!r}")
    if interpret is None:
        interpret = jax.devices()[0].platform != "gpu"
        if interpret:
            _warn_interpreted()
    dim = q.shape[-1]
    if not interpret and not (fits_gpu(dim) and fits_gpu(block)):
        raise ValueError(f"the Pallas attention kernel needs a head width and block that are "
                         f"powers of 2, at least 16, on a GPU, got key_dim {dim}, block "
                         f"{block}: use model.attention_kernel=auto")
    seed = jnp.asarray(seed, jnp.int32).reshape((1,))
    return _attention(seed, q, k, v, float(rate), bool(mask_diagonal), int(block),
                      bool(interpret))


def reference(q, k, v, seed, *, rate: float = 0.0, mask_diagonal: bool = False):
    """:func:`attention` in plain JAX operations, with the same keep mask."""
    batch, n_tokens, num_heads, _ = q.shape
    logits = jnp.einsum("bqhd,bkhd->bhqk", q, k, preferred_element_type=jnp.float32)
    if mask_diagonal:
        logits = jnp.where(jnp.eye(n_tokens, dtype=bool), _MASKED, logits)
    weights = jax.nn.softmax(logits, axis=-1)
    if rate > 0.0:
        index = jnp.arange(n_tokens)
        seed = jnp.asarray(seed, jnp.int32).reshape(())
        kept = keep(seed, jnp.arange(batch)[:, None, None, None],
                    jnp.arange(num_heads)[None, :, None, None], index[:, None], index[None, :],
                    n_tokens=n_tokens, num_heads=num_heads, rate=rate)
        weights = jnp.where(kept, weights / (1.0 - rate), 0.0)
    return jnp.einsum("bhqk,bkhd->bqhd", weights.astype(v.dtype), v,
                      preferred_element_type=jnp.float32).astype(q.dtype)
