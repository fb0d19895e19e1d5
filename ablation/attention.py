"""Multi-head self-attention, with the paper's Locality Self-Attention switches.

Two of the three ablation switches live here, in one layer:
``lsa`` (``mask_diagonal=True``) and ``learnable_temperature``
(``learnable_temperature=True``) of :class:`MultiHeadSelfAttention`.

Training takes a faster route that computes the same function (tests tie it
to the explicit one, on TensorFlow and JAX; BENCHMARKS.md has the
measurements): the key and output projections are folded into weight
products when a head is as wide as a token
(:meth:`MultiHeadSelfAttention.folded_call`). Only public ``keras.ops`` are
used, and nothing touches private ``MultiHeadAttention`` methods (the keras.io
example's override of ``_compute_attention`` broke when its signature changed
in Keras 3.9).
"""
from __future__ import annotations

import functools
import math

import keras
import numpy as np
from keras import layers, ops

from ablation.regularization import FastDropout, keep_mask


def _large_negative(dtype) -> float:
    """A logit that softmax turns into exactly 0 without overflowing the dtype."""
    return -3e4 if "float16" in str(dtype) and "bfloat" not in str(dtype) else -1e9


@functools.lru_cache(maxsize=16)
def _diagonal_bias(n: int, dtype: str) -> np.ndarray:
    """(1, 1, n, n) constant, built once: a large negative logit on the diagonal, else 0."""
    bias = np.where(np.eye(n, dtype=bool), _large_negative(dtype), 0.0).astype("float32")
    bias.flags.writeable = False
    return bias[None, None]


@keras.saving.register_keras_serializable(package="ablation")
class MultiHeadSelfAttention(layers.Layer):
    """Multi-head self-attention with the paper's two Locality Self-Attention parts.

    ``mask_diagonal`` (the ``lsa`` switch) removes each token's attention to
    itself, pushing weight onto the other tokens. ``learnable_temperature``
    makes the softmax temperature a trained variable, so a layer can learn
    sharper attention; off, the scale is the fixed 1/sqrt(key_dim).
    ``temperature_per_head`` gives each head its own value (as in the paper's
    official code) instead of one per layer.

    The two published codes learn the temperature in different forms, both
    starting from the standard scale, and the form changes how gradient steps
    move it, so it is a choice (``temperature_form``):

    - ``"divide"`` (keras.io example, the paper's equation): a variable T
      initialised to sqrt(key_dim), logits = q.k / T;
    - ``"multiply"`` (official code): a variable s initialised to
      key_dim**-0.5, logits = q.k * s.

    :meth:`effective_temperature` gives T in both forms (1/s for ``multiply``),
    so records and plots compare across forms.

    Three routes compute the same function: :meth:`attention_weights` and
    :meth:`mix` spell it out (tests and locality diagnostics use them);
    training calls :meth:`folded_call` when ``key_dim >= dim`` and otherwise
    the plain route with the scale folded into the queries and a constant
    mask bias (:meth:`fast_attention_logits`).

    With ``qkv_bias=True`` the q, k, v and output projections all have biases,
    as ``keras.layers.MultiHeadAttention`` (the keras.io example), so parameter
    counts compare directly; the official code's q/k/v projection has none
    (``qkv_bias=False``; the output projection keeps its bias).

    Args:
        num_heads: number of attention heads.
        key_dim: width of each head's queries, keys and values.
        dropout: dropout rate on the attention weights.
        mask_diagonal: mask the diagonal of the attention logits (``lsa``).
        learnable_temperature: train the softmax temperature.
        temperature_per_head: one temperature per head rather than per layer.
        temperature_form: ``"divide"`` or ``"multiply"`` (see above).
        qkv_bias: give the query, key and value projections a bias.
    """

    TEMPERATURE_FORMS = ("divide", "multiply")

    def __init__(
        self,
        num_heads: int,
        key_dim: int,
        dropout: float = 0.0,
        mask_diagonal: bool = False,
        learnable_temperature: bool = False,
        temperature_per_head: bool = False,
        temperature_form: str = "divide",
        qkv_bias: bool = True,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if temperature_form not in self.TEMPERATURE_FORMS:
            raise ValueError(f"temperature_form must be one of {self.TEMPERATURE_FORMS}, "
                             f"got {temperature_form!r}")
        self.num_heads = int(num_heads)
        self.key_dim = int(key_dim)
        self.dropout = float(dropout)
        self.mask_diagonal = bool(mask_diagonal)
        self.learnable_temperature = bool(learnable_temperature)
        self.temperature_per_head = bool(temperature_per_head)
        self.temperature_form = str(temperature_form)
        self.qkv_bias = bool(qkv_bias)
        inner = self.num_heads * self.key_dim
        self.query = layers.Dense(inner, use_bias=self.qkv_bias, name="query")
        self.key = layers.Dense(inner, use_bias=self.qkv_bias, name="key")
        self.value = layers.Dense(inner, use_bias=self.qkv_bias, name="value")
        self.output_dense = None  # width known at build time
        self.attention_dropout = FastDropout(self.dropout)

    def build(self, input_shape):
        dim = input_shape[-1]
        for dense in (self.query, self.key, self.value):
            dense.build(input_shape)
        self.output_dense = layers.Dense(dim, name="output")
        self.output_dense.build((None, None, self.num_heads * self.key_dim))
        if self.learnable_temperature:
            shape = (self.num_heads,) if self.temperature_per_head else ()
            initial = (math.sqrt(self.key_dim) if self.temperature_form == "divide"
                       else 1.0 / math.sqrt(self.key_dim))
            self.temperature = self.add_weight(
                shape=shape,
                initializer=keras.initializers.Constant(initial),
                name="temperature",
            )
        else:
            self.temperature = None

    def _split_heads(self, x):
        x = ops.reshape(x, (-1, x.shape[1], self.num_heads, self.key_dim))
        return ops.transpose(x, (0, 2, 1, 3))  # (batch, heads, tokens, key_dim)

    def attention_logits(self, tokens):
        """Scaled, masked query-key logits, (batch, heads, tokens, tokens)."""
        q = self._split_heads(self.query(tokens))
        k = self._split_heads(self.key(tokens))
        logits = ops.matmul(q, ops.transpose(k, (0, 1, 3, 2)))
        if self.temperature is None:
            logits = logits * (1.0 / math.sqrt(self.key_dim))
        else:
            temperature = ops.cast(self.temperature, logits.dtype)
            if self.temperature_per_head:
                temperature = ops.reshape(temperature, (1, self.num_heads, 1, 1))
            if self.temperature_form == "divide":
                logits = logits / temperature
            else:
                logits = logits * temperature
        if self.mask_diagonal:
            n = tokens.shape[1]
            diagonal = ops.eye(n, dtype="bool")[None, None]
            logits = ops.where(diagonal, _large_negative(logits.dtype), logits)
        return logits

    def effective_temperature(self):
        """The learnable temperature as the divisor T of the logits (numpy), or None.

        In the ``multiply`` form the variable is the scale s = 1/T.
        """
        if self.temperature is None:
            return None
        value = np.asarray(keras.ops.convert_to_numpy(self.temperature), dtype="float64")
        return value if self.temperature_form == "divide" else 1.0 / value

    def attention_weights(self, tokens):
        """The softmax attention weights, for tests and locality diagnostics."""
        return ops.softmax(self.attention_logits(tokens), axis=-1)

    def _scaled_query(self, q):
        """The query with the logits' scale (fixed or learned) folded in.

        Scaling q (tokens x key_dim per head) instead of the logits (tokens x
        tokens) moves the multiply and, for a learned temperature, its
        gradient onto a tensor 2.25x smaller in the keras_io model.
        """
        if self.temperature is None:
            return q * (1.0 / math.sqrt(self.key_dim))
        temperature = ops.cast(self.temperature, q.dtype)
        if self.temperature_per_head:
            temperature = ops.reshape(temperature, (1, self.num_heads, 1, 1))
        return q / temperature if self.temperature_form == "divide" else q * temperature

    def fast_attention_logits(self, tokens):
        """:meth:`attention_logits` computed faster (what training uses).

        The same function up to float rounding (tests tie the two): the scale
        folded into the query, and the diagonal mask added as a constant bias
        built once per token count instead of a boolean select per call.
        """
        q = self._scaled_query(self._split_heads(self.query(tokens)))
        k = self._split_heads(self.key(tokens))
        logits = ops.matmul(q, ops.transpose(k, (0, 1, 3, 2)))
        if self.mask_diagonal:
            logits = logits + ops.cast(_diagonal_bias(tokens.shape[1], str(logits.dtype)),
                                       logits.dtype)
        return logits

    def mix(self, weights, tokens):
        """Attention weights (after dropout) applied to the values, projected out."""
        v = self._split_heads(self.value(tokens))
        mixed = ops.transpose(ops.matmul(weights, v), (0, 2, 1, 3))
        mixed = ops.reshape(mixed, (-1, tokens.shape[1], self.num_heads * self.key_dim))
        return self.output_dense(mixed)

    def folds_projections(self, dim: int) -> bool:
        """Whether training uses :meth:`folded_call` for tokens of width ``dim``.

        Folding replaces the key and output projections by products of weight
        matrices (dim x dim per head). That is cheaper only when a head is at
        least as wide as a token (``key_dim >= dim``, the keras.io model's 64
        and 64); the paper's model (dim 192, key_dim 64) keeps the plain path.
        """
        return self.key_dim >= dim

    def _logit_scale(self):
        """The factor on q.k: 1/sqrt(key_dim), 1/T or s; shape () or (heads,)."""
        if self.temperature is None:
            return ops.convert_to_tensor(1.0 / math.sqrt(self.key_dim), "float32")
        temperature = ops.cast(self.temperature, "float32")
        return 1.0 / temperature if self.temperature_form == "divide" else temperature

    def _folded_weights(self, dtype, dropout_scale: float):
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
        heads, key_dim = self.num_heads, self.key_dim
        dim = self.output_dense.kernel.shape[-1]
        wq = ops.reshape(ops.cast(self.query.kernel, "float32"), (dim, heads, key_dim))
        wk = ops.reshape(ops.cast(self.key.kernel, "float32"), (dim, heads, key_dim))
        wv = ops.reshape(ops.cast(self.value.kernel, "float32"), (dim, heads, key_dim))
        wo = ops.reshape(ops.cast(self.output_dense.kernel, "float32"), (heads, key_dim, dim))
        scale = ops.reshape(self._logit_scale(), (-1,))  # (1,) or (heads,)
        a = ops.einsum("dhk,ehk->dhe", wq, wk) * ops.reshape(scale, (1, -1, 1))
        b = ops.einsum("dhk,hke->dhe", wv, wo) * dropout_scale
        if self.qkv_bias:
            bq = ops.reshape(ops.cast(self.query.bias, "float32"), (heads, key_dim))
            bv = ops.reshape(ops.cast(self.value.bias, "float32"), (heads, key_dim))
            c = ops.einsum("hk,ehk->he", bq, wk) * ops.reshape(scale, (-1, 1))
            d = ops.einsum("hk,hke->he", bv, wo) * dropout_scale
            d = d + 0.0 * ops.sum(ops.cast(self.key.bias, "float32"))
        else:
            c = d = ops.zeros((heads, dim), "float32")
        flat = (dim, heads * dim)
        return [ops.cast(t, dtype) for t in (ops.reshape(a, flat), ops.reshape(c, (-1,)),
                                              ops.reshape(b, flat), ops.reshape(d, (-1,)))]

    def folded_call(self, tokens, training=None):
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
        heads = self.num_heads
        rate = self.dropout if training else 0.0
        a, c, b, d = self._folded_weights(tokens.dtype, 1.0 / (1.0 - rate))
        # ops.add, not +: a rank-1 addend becomes TensorFlow's BiasAdd, whose
        # gradient kernel is faster than the broadcasting add's Sum (~3 % of the layer)
        queries = ops.reshape(ops.add(ops.matmul(tokens, a), c), (-1, n * heads, dim))
        logits = ops.reshape(ops.matmul(queries, ops.transpose(tokens, (0, 2, 1))),
                             (-1, n, heads, n))
        if self.mask_diagonal:
            bias = ops.reshape(_diagonal_bias(n, str(logits.dtype)), (n, 1, n))
            logits = logits + ops.cast(bias, logits.dtype)
        weights = ops.softmax(logits, axis=-1)
        if rate > 0.0:
            keep = keep_mask(ops.shape(weights), rate, self.attention_dropout.seed_generator)
            weights = ops.where(keep, weights, 0.0)
        values = ops.reshape(ops.add(ops.matmul(tokens, b), d), (-1, n, heads, dim))
        values = ops.reshape(ops.transpose(values, (0, 2, 1, 3)), (-1, heads * n, dim))
        mixed = ops.matmul(ops.reshape(weights, (-1, n, heads * n)), values)
        return ops.add(mixed, ops.cast(self.output_dense.bias, mixed.dtype))

    def call(self, tokens, training=None):
        if self.folds_projections(tokens.shape[-1]):
            return self.folded_call(tokens, training=training)
        weights = ops.softmax(self.fast_attention_logits(tokens), axis=-1)
        weights = self.attention_dropout(weights, training=training)
        return self.mix(weights, tokens)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {
            **super().get_config(),
            "num_heads": self.num_heads,
            "key_dim": self.key_dim,
            "dropout": self.dropout,
            "mask_diagonal": self.mask_diagonal,
            "learnable_temperature": self.learnable_temperature,
            "temperature_per_head": self.temperature_per_head,
            "temperature_form": self.temperature_form,
            "qkv_bias": self.qkv_bias,
        }
