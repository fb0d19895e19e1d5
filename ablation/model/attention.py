"""Multi-head self-attention with the paper's Locality Self-Attention switches
(``lsa`` and ``learnable_temperature``), in public ``keras.ops`` only; CaiT's
talking heads and class attention (queries from some tokens, keys from others)."""
from __future__ import annotations

import functools
import math

import keras
import numpy as np
from keras import layers, ops

from ablation.model.folded_attention import folded_attention
from ablation.model.regularization import Configured, FastDropout


# The diagonal value the official CaiT writes for its "mask" (models/cait.py):
# the self-logit becomes about 0 instead of being removed.
OFFICIAL_CAIT_DIAGONAL = -1e-9


def _large_negative(dtype) -> float:
    """A logit that softmax turns into exactly 0 without overflowing the dtype."""
    return -3e4 if "float16" in str(dtype) and "bfloat" not in str(dtype) else -1e9


@functools.lru_cache(maxsize=16)
def diagonal_bias(n: int, dtype: str) -> np.ndarray:
    """(1, 1, n, n) constant, built once: a large negative logit on the diagonal, else 0."""
    bias = np.where(np.eye(n, dtype=bool), _large_negative(dtype), 0.0).astype("float32")
    bias.flags.writeable = False
    return bias[None, None]


def _biased(logits, bias):
    """``logits`` (batch, heads, n, n) plus ``bias`` (groups, heads, n, n), or as they
    are for None: batch entry b takes group b % groups (windowed attention: the windows
    of each image in turn, each with its own bias)."""
    if bias is None:
        return logits
    grouped = ops.reshape(logits, (-1, *bias.shape))
    return ops.reshape(grouped + ops.cast(bias, logits.dtype), (-1, *logits.shape[1:]))


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
    locality diagnostics); :meth:`call`, what training runs, takes the key and
    output projections folded into weight products
    (:func:`~ablation.model.folded_attention.folded_attention`) when ``key_dim >= dim``,
    else the scale folded into the queries and a constant mask bias
    (:meth:`fast_attention_logits`).

    ``qkv_bias=True``: the q, k and v projections have biases, as
    ``keras.layers.MultiHeadAttention`` (keras.io); the official code's have
    none. The output projection always has one.

    A ``bias`` in the call (Swin's windows, ``ablation.model.swin``): an additive
    (groups, heads, n, n) term on the scaled logits before the diagonal mask
    (:func:`_biased`); it takes the explicit or the bias route, never the folded one.

    CaiT's attention (``ablation.model.cait``):

    - ``talking_heads`` (Shazeer et al. 2020): two learned (heads, heads)
      matrices mix the heads' logits before the softmax and their weights
      after it. The diagonal mask goes on the mixed logits, just before the
      softmax: written before the mixing, a large negative logit would be
      mixed into every head's logits with either sign.
    - a ``context`` in the call: the queries come from the tokens, the keys
      and values from the context (CaiT's class attention: the class token
      reads the patches). The queries' own tokens are not among the keys
      then, so there is no diagonal to mask; the temperature applies.
    - ``official_cait_mask`` (with ``mask_diagonal``): instead of the mask,
      write -1e-9 on the diagonal of the scaled logits before the head
      mixing, as the official CaiT does: the self-logit becomes about zero,
      which removes nothing. For reproducing the official numbers only.

    The official T2T's attention: ``output_dim`` projects the output to that
    width instead of the tokens' (its token transformers narrow the tokens);
    ``scale_dim`` takes the scale (and the multiplicative temperature's start)
    from that width instead of ``key_dim`` (there, the tokens' width per head).
    """

    TEMPERATURE_FORMS = ("divide", "multiply")
    CONFIG = ("num_heads", "key_dim", "dropout", "mask_diagonal", "learnable_temperature",
              "temperature_per_head", "temperature_form", "qkv_bias", "talking_heads",
              "official_cait_mask", "output_dim", "scale_dim")

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
        talking_heads: bool = False,
        official_cait_mask: bool = False,
        output_dim: int | None = None,
        scale_dim: int | None = None,
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
        self.talking_heads = bool(talking_heads)
        self.official_cait_mask = bool(official_cait_mask)
        self.output_dim = None if output_dim is None else int(output_dim)
        self.scale_dim = None if scale_dim is None else int(scale_dim)
        self._scale_width = self.scale_dim or self.key_dim
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
        self.output_dense = layers.Dense(self.output_dim or dim, name="output")
        self.output_dense.build((None, None, self.num_heads * self.key_dim))
        if self.learnable_temperature:
            shape = (self.num_heads,) if self.temperature_per_head else ()
            initial = (math.sqrt(self._scale_width) if self.temperature_form == "divide"
                       else 1.0 / math.sqrt(self._scale_width))
            self.temperature = self.add_weight(
                shape=shape,
                initializer=keras.initializers.Constant(initial),
                name="temperature",
            )
        else:
            self.temperature = None
        self.head_mixing = None
        if self.talking_heads:  # official: torch.randn(heads, heads), before and after the softmax
            self.head_mixing = [self.add_weight(
                shape=(self.num_heads, self.num_heads),
                initializer=keras.initializers.RandomNormal(stddev=1.0), name=name)
                for name in ("pre_softmax_mixing", "post_softmax_mixing")]

    def _split_heads(self, x):
        x = ops.reshape(x, (-1, x.shape[1], self.num_heads, self.key_dim))
        return ops.transpose(x, (0, 2, 1, 3))  # (batch, heads, tokens, key_dim)

    def _scaled(self, x):
        """``x`` (heads on axis 1) times the logits' scale, fixed or learned."""
        if self.temperature is None:
            return x * (1.0 / math.sqrt(self._scale_width))
        temperature = ops.cast(self.temperature, x.dtype)
        if self.temperature_per_head:
            temperature = ops.reshape(temperature, (1, self.num_heads, 1, 1))
        return x / temperature if self.temperature_form == "divide" else x * temperature

    def _mix_heads(self, x, which: int):
        """Talking heads: (batch, heads, i, j) mixed over heads by matrix ``which``
        (0 before the softmax, 1 after), as the official einsum ``bhij,hg->bgij``."""
        return ops.einsum("bhij,hg->bgij", x, ops.cast(self.head_mixing[which], x.dtype))

    def attention_logits(self, tokens, context=None, bias=None):
        """Scaled, biased, masked query-key logits, (batch, heads, queries, keys): the
        queries from ``tokens``, the keys from ``context`` (default: ``tokens``)."""
        q = self._split_heads(self.query(tokens))
        k = self._split_heads(self.key(tokens if context is None else context))
        logits = _biased(self._scaled(ops.matmul(q, ops.transpose(k, (0, 1, 3, 2)))), bias)
        # with a context the queries' own tokens are not among the keys: no diagonal
        masked = self.mask_diagonal and context is None
        diagonal = ops.eye(tokens.shape[1], dtype="bool")[None, None] if masked else None
        if masked and self.official_cait_mask:
            logits = ops.where(diagonal, OFFICIAL_CAIT_DIAGONAL, logits)
        if self.talking_heads:
            logits = self._mix_heads(logits, 0)
        if masked and not self.official_cait_mask:
            logits = ops.where(diagonal, _large_negative(logits.dtype), logits)
        return logits

    def effective_temperature(self):
        """The learnable temperature as the divisor T of the logits (numpy), or None."""
        if self.temperature is None:
            return None
        value = np.asarray(keras.ops.convert_to_numpy(self.temperature), dtype="float64")
        return value if self.temperature_form == "divide" else 1.0 / value

    def attention_weights(self, tokens, context=None, bias=None):
        """The weights applied to the values (the softmax, head-mixed after it with
        talking heads), for tests and locality diagnostics."""
        weights = ops.softmax(self.attention_logits(tokens, context, bias), axis=-1)
        return self._mix_heads(weights, 1) if self.talking_heads else weights

    def fast_attention_logits(self, tokens, bias=None):
        """:meth:`attention_logits` up to rounding, faster: the scale on the
        (smaller) queries, the diagonal mask a constant bias."""
        q = self._scaled(self._split_heads(self.query(tokens)))
        k = self._split_heads(self.key(tokens))
        logits = _biased(ops.matmul(q, ops.transpose(k, (0, 1, 3, 2))), bias)
        bias = self.mask_bias(tokens.shape[1], logits.dtype)
        if bias is not None:
            logits = logits + bias
        return logits

    def mask_bias(self, n: int, dtype):
        """The LSA mask as an additive (1, 1, n, n) constant in ``dtype``, or None."""
        if not self.mask_diagonal:
            return None
        return ops.cast(diagonal_bias(n, str(dtype)), dtype)

    def mix(self, weights, tokens, context=None):
        """Attention weights (after dropout) applied to the values (of ``context``
        where given, else ``tokens``), projected out: one output per query."""
        v = self._split_heads(self.value(tokens if context is None else context))
        mixed = ops.transpose(ops.matmul(weights, v), (0, 2, 1, 3))
        mixed = ops.reshape(mixed, (-1, weights.shape[2], self.num_heads * self.key_dim))
        return self.output_dense(mixed)

    def folds_projections(self, dim: int) -> bool:
        """Whether training uses the folded route for tokens of width ``dim``:
        the folded weights (dim x dim per head) are cheaper only when a head is
        at least as wide as a token (and the output as the input)."""
        return self.key_dim >= dim and self.output_dim in (None, dim)

    def logit_scale(self):
        """The factor on q.k: 1/sqrt(key_dim), 1/T or s; shape () or (heads,)."""
        if self.temperature is None:
            return ops.convert_to_tensor(1.0 / math.sqrt(self._scale_width), "float32")
        temperature = ops.cast(self.temperature, "float32")
        return 1.0 / temperature if self.temperature_form == "divide" else temperature

    def call(self, tokens, context=None, training=None, bias=None):
        if context is not None or self.talking_heads or self.official_cait_mask:
            # CaiT's attention: the explicit route (the fast ones assume neither)
            weights = self.attention_weights(tokens, context, bias)
        elif bias is None and self.folds_projections(tokens.shape[-1]):
            return folded_attention(self, tokens, training=training)
        else:
            weights = ops.softmax(self.fast_attention_logits(tokens, bias), axis=-1)
        weights = self.attention_dropout(weights, training=training)
        return self.mix(weights, tokens, context)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.output_dim or input_shape[-1],)
