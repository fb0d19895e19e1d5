"""Multi-head self-attention with the paper's Locality Self-Attention switches
(``lsa`` and ``learnable_temperature``), in public ``keras.ops`` only."""
from __future__ import annotations

import functools
import math

import keras
import numpy as np
from keras import layers, ops

from ablation.model.folded_attention import folded_attention
from ablation.model.regularization import Configured, FastDropout


def _large_negative(dtype) -> float:
    """A logit that softmax turns into exactly 0 without overflowing the dtype."""
    return -3e4 if "float16" in str(dtype) and "bfloat" not in str(dtype) else -1e9


@functools.lru_cache(maxsize=16)
def diagonal_bias(n: int, dtype: str) -> np.ndarray:
    """(1, 1, n, n) constant, built once: a large negative logit on the diagonal, else 0."""
    bias = np.where(np.eye(n, dtype=bool), _large_negative(dtype), 0.0).astype("float32")
    bias.flags.writeable = False
    return bias[None, None]


@keras.saving.register_keras_serializable(package="ablation")
class MultiHeadSelfAttention(Configured, layers.Layer):
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

    :meth:`effective_temperature` gives T in both forms, so runs compare.

    Two routes compute the same function (tests tie them, outputs and
    gradients): :meth:`attention_weights` and :meth:`mix` spell it out (tests,
    locality diagnostics); :meth:`call`, what training runs, takes
    :meth:`folded_call` when ``key_dim >= dim``, else the scale folded into the
    queries and a constant mask bias (:meth:`fast_attention_logits`).

    ``qkv_bias=True``: the q, k and v projections have biases, as
    ``keras.layers.MultiHeadAttention`` (keras.io); the official code's have
    none. The output projection always has one.
    """

    TEMPERATURE_FORMS = ("divide", "multiply")
    CONFIG = ("num_heads", "key_dim", "dropout", "mask_diagonal", "learnable_temperature",
              "temperature_per_head", "temperature_form", "qkv_bias")

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
        # Models saved while the route was a choice carry ``attention_kernel``;
        # every choice computed this same function.
        kwargs.pop("attention_kernel", None)
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

    def _scaled(self, x):
        """``x`` (heads on axis 1) times the logits' scale, fixed or learned."""
        if self.temperature is None:
            return x * (1.0 / math.sqrt(self.key_dim))
        temperature = ops.cast(self.temperature, x.dtype)
        if self.temperature_per_head:
            temperature = ops.reshape(temperature, (1, self.num_heads, 1, 1))
        return x / temperature if self.temperature_form == "divide" else x * temperature

    def attention_logits(self, tokens):
        """Scaled, masked query-key logits, (batch, heads, tokens, tokens)."""
        q = self._split_heads(self.query(tokens))
        k = self._split_heads(self.key(tokens))
        logits = self._scaled(ops.matmul(q, ops.transpose(k, (0, 1, 3, 2))))
        if self.mask_diagonal:
            n = tokens.shape[1]
            diagonal = ops.eye(n, dtype="bool")[None, None]
            logits = ops.where(diagonal, _large_negative(logits.dtype), logits)
        return logits

    def effective_temperature(self):
        """The learnable temperature as the divisor T of the logits (numpy), or None."""
        if self.temperature is None:
            return None
        value = np.asarray(keras.ops.convert_to_numpy(self.temperature), dtype="float64")
        return value if self.temperature_form == "divide" else 1.0 / value

    def attention_weights(self, tokens):
        """The softmax attention weights, for tests and locality diagnostics."""
        return ops.softmax(self.attention_logits(tokens), axis=-1)

    def fast_attention_logits(self, tokens):
        """:meth:`attention_logits` up to rounding, faster: the scale on the
        (smaller) queries, the diagonal mask a constant bias."""
        q = self._scaled(self._split_heads(self.query(tokens)))
        k = self._split_heads(self.key(tokens))
        logits = ops.matmul(q, ops.transpose(k, (0, 1, 3, 2)))
        bias = self.mask_bias(tokens.shape[1], logits.dtype)
        if bias is not None:
            logits = logits + bias
        return logits

    def mask_bias(self, n: int, dtype):
        """The LSA mask as an additive (1, 1, n, n) constant in ``dtype``, or None."""
        if not self.mask_diagonal:
            return None
        return ops.cast(diagonal_bias(n, str(dtype)), dtype)

    def mix(self, weights, tokens):
        """Attention weights (after dropout) applied to the values, projected out."""
        v = self._split_heads(self.value(tokens))
        mixed = ops.transpose(ops.matmul(weights, v), (0, 2, 1, 3))
        mixed = ops.reshape(mixed, (-1, tokens.shape[1], self.num_heads * self.key_dim))
        return self.output_dense(mixed)

    def folds_projections(self, dim: int) -> bool:
        """Whether training uses :meth:`folded_call` for tokens of width ``dim``:
        the folded weights (dim x dim per head) are cheaper only when a head is
        at least as wide as a token."""
        return self.key_dim >= dim

    def logit_scale(self):
        """The factor on q.k: 1/sqrt(key_dim), 1/T or s; shape () or (heads,)."""
        if self.temperature is None:
            return ops.convert_to_tensor(1.0 / math.sqrt(self.key_dim), "float32")
        temperature = ops.cast(self.temperature, "float32")
        return 1.0 / temperature if self.temperature_form == "divide" else temperature

    def folded_call(self, tokens, training=None):
        """The layer's function with the key and output projections folded into
        weight products (:func:`ablation.model.folded_attention.folded_attention`)."""
        return folded_attention(self, tokens, training=training)

    def call(self, tokens, training=None):
        if self.folds_projections(tokens.shape[-1]):
            return self.folded_call(tokens, training=training)
        weights = ops.softmax(self.fast_attention_logits(tokens), axis=-1)
        weights = self.attention_dropout(weights, training=training)
        return self.mix(weights, tokens)

    def compute_output_shape(self, input_shape):
        return input_shape
