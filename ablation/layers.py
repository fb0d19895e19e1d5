"""The ViT's building blocks, each a Keras layer with one job.

The three ablation switches each live in exactly one layer:

- ``spt``: :class:`PatchTokenizer` (``shifted=True``), here;
- ``lsa`` and ``learnable_temperature``:
  :class:`ablation.attention.MultiHeadSelfAttention` (``mask_diagonal=True``
  and ``learnable_temperature=True``).

Dropout and stochastic depth are in :mod:`ablation.regularization`.
Everything uses ``keras.ops`` only, so the same code runs on the TensorFlow,
JAX and PyTorch backends.
"""
from __future__ import annotations

import keras
from keras import layers, ops

from ablation.attention import MultiHeadSelfAttention
from ablation.regularization import DropPath, FastDropout

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


@keras.saving.register_keras_serializable(package="ablation")
class AdaptedNormalization(layers.Normalization):
    """``keras.layers.Normalization`` that reads its adapted statistics from its
    weights when called.

    Keras's layer turns the adapted mean and variance into constant tensors,
    which a compiled train step then holds as constants: two jobs whose
    training splits differ (another seed) compile two different programs,
    and XLA's compilation cache (``gpu.compilation_cache``) cannot give one
    the other's. Read from the weights, the statistics are inputs of one
    program. The weights, the function and the config are the keras
    layer's (saved under this class's name); statistics given to the
    constructor stay constants, as there. Unlike the keras layer it runs on
    the model's backend only (never inside a tf.data pipeline).
    """

    def call(self, inputs):
        if self.input_mean is not None or self.invert or tuple(self.axis) != (-1,):
            return super().call(inputs)
        inputs = ops.convert_to_tensor(inputs, dtype=self.compute_dtype)
        mean = ops.cast(self.adapt_mean, self.compute_dtype)
        std = ops.sqrt(ops.cast(self.adapt_variance, self.compute_dtype))
        return ops.divide(ops.subtract(inputs, mean), ops.maximum(std, keras.config.epsilon()))
