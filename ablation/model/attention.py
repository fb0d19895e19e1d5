"""Multi-head self-attention, with the paper's Locality Self-Attention switches.

Two of the three ablation switches live here, in one layer:
``lsa`` (``mask_diagonal=True``) and ``learnable_temperature``
(``learnable_temperature=True``) of :class:`MultiHeadSelfAttention`.

Two routes compute the same function: the explicit one, spelled out for tests
and the locality diagnostics, and the fast one training takes (tests tie it to
the explicit one, outputs and gradients, on TensorFlow and JAX;
docs/performance.md has the measurements): the key and output projections
folded into weight products when a head is as wide as a token
(:mod:`ablation.model.folded_attention`), else the scale folded into the
queries and the LSA mask a constant bias. Only public ``keras.ops`` are used,
and nothing touches private ``MultiHeadAttention`` methods (whose signatures
change between Keras versions).
"""
from __future__ import annotations

import functools
import math

import keras
import numpy as np
from keras import layers, ops

from ablation.model.folded_attention import folded_attention
from ablation.model.regularization import FastDropout


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

    Two routes compute the same function: :meth:`attention_weights` and
    :meth:`mix` spell it out (tests and locality diagnostics use them);
    :meth:`call`, what training runs, takes :meth:`folded_call` when
    ``key_dim >= dim`` and otherwise the scale folded into the queries and a
    constant mask bias (:meth:`fast_attention_logits`).

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

    def _scaled_query(self, q, head_axis: int = 1):
        """The query, heads on ``head_axis``, with the logits' scale (fixed or
        learned) folded in. Scaling q (tokens x key_dim per head) instead of
        the logits (tokens x tokens) moves the multiply and, for a learned
        temperature, its gradient onto a smaller tensor (144 x 64 against
        144 x 144 per head in the keras_io model)."""
        if self.temperature is None:
            return q * (1.0 / math.sqrt(self.key_dim))
        temperature = ops.cast(self.temperature, q.dtype)
        if self.temperature_per_head:
            shape = [1, 1, 1, 1]
            shape[head_axis] = self.num_heads
            temperature = ops.reshape(temperature, tuple(shape))
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
        bias = self.mask_bias(tokens.shape[1], logits.dtype)
        if bias is not None:
            logits = logits + bias
        return logits

    def mask_bias(self, n: int, dtype):
        """The LSA mask as an additive constant of shape (1, 1, n, n) in ``dtype``:
        a large negative logit on the diagonal, 0 elsewhere; None when the
        diagonal is not masked. Built once per token count."""
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
        """Whether training uses :meth:`folded_call` for tokens of width ``dim``.

        Folding replaces the key and output projections by products of weight
        matrices (dim x dim per head). That is cheaper only when a head is at
        least as wide as a token (``key_dim >= dim``, the keras.io model's 64
        and 64); the paper's model (dim 192, key_dim 64) keeps the plain path.
        """
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
