"""The ViT's building blocks, each a Keras layer with one job.

Two of the three ablation switches live here, each in exactly one layer:

- ``spt``: :class:`PatchTokenizer` (``shifted=True``),
- ``lsa`` and ``learnable_temperature``: :class:`MultiHeadSelfAttention`
  (``mask_diagonal=True`` and ``learnable_temperature=True``).

Everything uses ``keras.ops`` only, so the same code runs on the TensorFlow,
JAX and PyTorch backends, and nothing touches private ``MultiHeadAttention``
methods (the keras.io example's override of ``_compute_attention`` broke when
its signature changed in Keras 3.9).

Training takes faster routes that compute the same function (tests tie each
to the plain one, on TensorFlow and JAX; BENCHMARKS.md has the measurements):
attention folds its key and output projections into weight products when a
head is as wide as a token (:meth:`MultiHeadSelfAttention.folded_call`), and
every dropout draws half the random numbers (:class:`FastDropout`).
"""
from __future__ import annotations

import functools
import math

import keras
import numpy as np
from keras import layers, ops

LAYER_NORM_EPSILON = 1e-6

# Order of the four diagonal shifts concatenated after the original image, as
# (rows, cols) offsets read from the source: shifted[i, j] = image[i + dy, j + dx].
# "left-up" moves the picture towards the top-left corner, and so on.
SHIFTS = {
    "left-up": (1, 1),
    "left-down": (-1, 1),
    "right-up": (1, -1),
    "right-down": (-1, -1),
}


@keras.saving.register_keras_serializable(package="ablation")
class PatchTokenizer(layers.Layer):
    """Cut an image into non-overlapping patches and project each to a token.

    With ``shifted=True`` this is the paper's Shifted Patch Tokenization: the
    image is concatenated (on channels) with four copies shifted diagonally by
    half a patch and zero padded, so every token also sees its neighbours'
    pixels; the flattened patches are layer-normalised before the projection.
    With ``shifted=False`` it is the plain ViT patch embedding (patches, Dense).

    Args:
        patch_size: side of a square patch, in pixels.
        dim: width of the output tokens.
        shifted: turn on Shifted Patch Tokenization (the ``spt`` switch).
    """

    def __init__(self, patch_size: int, dim: int, shifted: bool = False, **kwargs):
        super().__init__(**kwargs)
        self.patch_size = int(patch_size)
        self.dim = int(dim)
        self.shifted = bool(shifted)
        self.norm = (
            layers.LayerNormalization(epsilon=LAYER_NORM_EPSILON, name="norm")
            if self.shifted
            else None
        )
        self.projection = layers.Dense(self.dim, name="projection")

    def build(self, input_shape):
        height, width, channels = input_shape[1:]
        if height % self.patch_size or width % self.patch_size:
            raise ValueError(
                f"patch_size {self.patch_size} does not divide the image size "
                f"{height}x{width}"
            )
        if self.shifted:
            channels *= 1 + len(SHIFTS)
        patch_dim = self.patch_size * self.patch_size * channels
        if self.norm is not None:
            self.norm.build((None, None, patch_dim))
        self.projection.build((None, None, patch_dim))

    def shift_and_stack(self, images):
        """The image and its four half-patch diagonal shifts, on channels."""
        half = self.patch_size // 2
        height, width = images.shape[1], images.shape[2]
        padded = ops.pad(images, [[0, 0], [half, half], [half, half], [0, 0]])
        views = [images]
        for dy, dx in SHIFTS.values():
            top, left = half + dy * half, half + dx * half
            views.append(padded[:, top : top + height, left : left + width, :])
        return ops.concatenate(views, axis=-1)

    def patchify(self, images):
        """(batch, H, W, C) -> (batch, patches, p*p*C), rows then columns.

        Each patch is flattened row by row, channels last, as
        ``tf.image.extract_patches`` does, but with a reshape and a transpose
        that every backend has.
        """
        p = self.patch_size
        _, height, width, channels = images.shape
        rows, cols = height // p, width // p
        x = ops.reshape(images, (-1, rows, p, cols, p, channels))
        x = ops.transpose(x, (0, 1, 3, 2, 4, 5))
        return ops.reshape(x, (-1, rows * cols, p * p * channels))

    def call(self, images):
        if self.shifted:
            images = self.shift_and_stack(images)
        patches = self.patchify(images)
        if self.norm is not None:
            patches = self.norm(patches)
        return self.projection(patches)

    def compute_output_shape(self, input_shape):
        rows = input_shape[1] // self.patch_size
        cols = input_shape[2] // self.patch_size
        return (input_shape[0], rows * cols, self.dim)

    def get_config(self):
        return {
            **super().get_config(),
            "patch_size": self.patch_size,
            "dim": self.dim,
            "shifted": self.shifted,
        }


@keras.saving.register_keras_serializable(package="ablation")
class ClassToken(layers.Layer):
    """Prepend one learned token whose final state is the image's summary."""

    def build(self, input_shape):
        self.token = self.add_weight(
            shape=(1, 1, input_shape[-1]), initializer="zeros", name="token"
        )

    def call(self, tokens):
        batch = ops.shape(tokens)[0]
        token = ops.broadcast_to(ops.cast(self.token, tokens.dtype),
                                 (batch, 1, tokens.shape[-1]))
        return ops.concatenate([token, tokens], axis=1)

    def compute_output_shape(self, input_shape):
        return (input_shape[0], input_shape[1] + 1, input_shape[2])


@keras.saving.register_keras_serializable(package="ablation")
class PositionEmbedding(layers.Layer):
    """Add a learned vector per token position (same size as an Embedding)."""

    def build(self, input_shape):
        self.embedding = self.add_weight(
            shape=(input_shape[1], input_shape[2]),
            initializer=keras.initializers.TruncatedNormal(stddev=0.02),
            name="embedding",
        )

    def call(self, tokens):
        return tokens + ops.cast(self.embedding, tokens.dtype)[None]


def keep_mask(shape, rate: float, seed_generator):
    """A boolean mask, True with probability 1 - ``rate``, for dropout.

    Random number generation dominates dropout's cost on a CPU (TensorFlow's
    Philox makes one 32-bit draw per element, ~5 ns each here), so each
    31-bit random integer decides two elements: its low 16 bits and its high
    15 bits are compared with ``rate`` scaled to 2**16 and 2**15. The drop
    probability of an element is therefore ``rate`` rounded to a multiple of
    2**-16 (first half of the last axis) or 2**-15 (second half): 0.1 becomes
    0.1000061 and 0.1000061, 0.3 becomes 0.3000031 and 0.2999878, 0.5 stays
    exact; a float32 uniform draw rounds to 2**-23. The elements stay
    independent. The last axis must have a static size.
    """
    shape = tuple(shape)
    last = shape[-1]
    if not isinstance(last, int):
        raise ValueError(f"keep_mask needs a static size for the last axis, got shape {shape}")
    half = (last + 1) // 2
    bits = keras.random.randint(shape[:-1] + (half,), 0, 2**31 - 1, dtype="int32",
                                seed=seed_generator)
    low_keep = ops.bitwise_and(bits, 0xFFFF) >= round(rate * 2**16)
    high_keep = bits >= round(rate * 2**15) * 2**16  # bits 16-30 (the draw is below 2**31)
    keep = ops.concatenate([low_keep, high_keep], axis=-1)
    return keep if 2 * half == last else keep[..., :last]


@keras.saving.register_keras_serializable(package="ablation")
class FastDropout(layers.Layer):
    """``keras.layers.Dropout`` with half the random draws (see :func:`keep_mask`).

    In training each element is zeroed with probability ``rate`` (up to
    2**-15) and the others scaled by 1 / (1 - rate); at inference it is the
    identity. The scale and the mask are applied as one multiplication by a
    float mask, so the backward pass is one multiplication too.

    Args:
        rate: probability of zeroing an element, in [0, 1).
        seed: seed of the layer's random generator.
    """

    def __init__(self, rate: float, seed: int | None = None, **kwargs):
        super().__init__(**kwargs)
        if not 0.0 <= float(rate) < 1.0:
            raise ValueError(f"dropout rate must be in [0, 1), got {rate!r}")
        self.rate = float(rate)
        self.seed = seed
        self.supports_masking = True
        # as keras.layers.Dropout: a generator (checkpointed state) only when it draws
        self.seed_generator = keras.random.SeedGenerator(seed) if self.rate > 0 else None

    def call(self, x, training=None):
        if not training or self.rate == 0.0:
            return x
        keep = keep_mask(ops.shape(x), self.rate, self.seed_generator)
        return x * ops.cast(ops.where(keep, 1.0 / (1.0 - self.rate), 0.0), x.dtype)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "rate": self.rate, "seed": self.seed}


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


@keras.saving.register_keras_serializable(package="ablation")
class FeedForward(layers.Layer):
    """GELU MLP with dropout after every layer (the block's and the head's MLP).

    Args:
        hidden_units: widths of the GELU layers, in order.
        output_units: width of a final linear layer; ``None`` to end on the last
            GELU layer (as the keras.io example's blocks do).
        dropout: dropout rate after every layer.
    """

    def __init__(self, hidden_units, output_units=None, dropout: float = 0.0, **kwargs):
        super().__init__(**kwargs)
        self.hidden_units = [int(u) for u in hidden_units]
        self.output_units = None if output_units is None else int(output_units)
        self.dropout = float(dropout)
        self.dense_layers = [
            layers.Dense(u, activation="gelu", name=f"dense_{i}")
            for i, u in enumerate(self.hidden_units)
        ]
        if self.output_units is not None:
            self.dense_layers.append(layers.Dense(self.output_units, name="output"))
        self.dropout_layer = FastDropout(self.dropout)

    def build(self, input_shape):
        shape = tuple(input_shape)
        for dense in self.dense_layers:
            dense.build(shape)
            shape = shape[:-1] + (dense.units,)

    def call(self, x, training=None):
        for dense in self.dense_layers:
            x = self.dropout_layer(dense(x), training=training)
        return x

    def compute_output_shape(self, input_shape):
        units = self.dense_layers[-1].units if self.dense_layers else input_shape[-1]
        return tuple(input_shape[:-1]) + (units,)

    def get_config(self):
        return {
            **super().get_config(),
            "hidden_units": self.hidden_units,
            "output_units": self.output_units,
            "dropout": self.dropout,
        }


@keras.saving.register_keras_serializable(package="ablation")
class DropPath(layers.Layer):
    """Stochastic depth: in training, drop a whole residual branch per sample.

    Each sample's branch output is zeroed with probability ``rate`` and the
    kept ones are scaled by 1 / (1 - rate), so the expected output is
    unchanged (as timm's ``DropPath``, which the official code uses with rate
    0.1 in every branch of every block). At inference it is the identity.

    Args:
        rate: probability of dropping the branch for a sample.
        seed: seed of the layer's random generator.
    """

    def __init__(self, rate: float = 0.0, seed: int | None = None, **kwargs):
        super().__init__(**kwargs)
        if not 0.0 <= float(rate) < 1.0:
            raise ValueError(f"drop path rate must be in [0, 1), got {rate!r}")
        self.rate = float(rate)
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)

    def call(self, x, training=None):
        if not training or self.rate == 0.0:
            return x
        keep = 1.0 - self.rate
        shape = (ops.shape(x)[0],) + (1,) * (len(x.shape) - 1)
        # in float32 whatever the compute dtype: a bfloat16 draw and 1/keep would
        # bias the kept share and the scale (0.8977 kept, x1.109 at rate 0.1)
        draw = keras.random.uniform(shape, seed=self.seed_generator, dtype="float32")
        mask = ops.floor(keep + draw) / keep  # floor(keep + U) is 1 with prob. keep
        return ops.cast(ops.cast(x, "float32") * mask, x.dtype)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "rate": self.rate, "seed": self.seed}


@keras.saving.register_keras_serializable(package="ablation")
class TransformerBlock(layers.Layer):
    """Pre-norm encoder block: x + attention(norm(x)), then x + mlp(norm(x)).

    Args:
        attention: keyword arguments of :class:`MultiHeadSelfAttention`.
        mlp: keyword arguments of :class:`FeedForward`.
        drop_path: stochastic-depth rate of both residual branches (:class:`DropPath`).
    """

    def __init__(self, attention: dict, mlp: dict, drop_path: float = 0.0, **kwargs):
        super().__init__(**kwargs)
        self.attention_config = dict(attention)
        self.mlp_config = dict(mlp)
        self.drop_path_rate = float(drop_path)
        self.drop_path = DropPath(self.drop_path_rate, name="drop_path")
        self.attention_norm = layers.LayerNormalization(
            epsilon=LAYER_NORM_EPSILON, name="attention_norm")
        self.attention = MultiHeadSelfAttention(**self.attention_config, name="attention")
        self.mlp_norm = layers.LayerNormalization(epsilon=LAYER_NORM_EPSILON, name="mlp_norm")
        self.mlp = FeedForward(**self.mlp_config, name="mlp")

    def build(self, input_shape):
        for layer in (self.attention_norm, self.attention, self.mlp_norm, self.mlp):
            layer.build(input_shape)

    def call(self, tokens, training=None):
        branch = self.attention(self.attention_norm(tokens), training=training)
        tokens = tokens + self.drop_path(branch, training=training)
        branch = self.mlp(self.mlp_norm(tokens), training=training)
        return tokens + self.drop_path(branch, training=training)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "attention": self.attention_config,
                "mlp": self.mlp_config, "drop_path": self.drop_path_rate}
