"""The ViT's building blocks but the switched ones (:mod:`ablation.model.tokenizer`,
:mod:`ablation.model.attention`), each a Keras layer with one job, in ``keras.ops`` only."""
from __future__ import annotations

import keras
from keras import layers, ops

from ablation.model.attention import MultiHeadSelfAttention
from ablation.model.regularization import Configured, DropPath, FastDropout

LAYER_NORM_EPSILON = 1e-6


@keras.saving.register_keras_serializable(package="ablation")
class ClassToken(Configured, layers.Layer):
    """Prepend one learned token whose final state is the image's summary;
    ``concatenate=False``: the token alone, one per image (CaiT, whose class
    token joins only the class-attention stage, reading the patch tokens)."""

    CONFIG = ("concatenate",)

    def __init__(self, concatenate: bool = True, **kwargs):
        super().__init__(**kwargs)
        self.concatenate = bool(concatenate)

    def build(self, input_shape):
        self.token = self.add_weight(shape=(1, 1, input_shape[-1]), initializer="zeros",
                                     name="token")

    def call(self, tokens):
        batch = ops.shape(tokens)[0]
        token = ops.broadcast_to(ops.cast(self.token, tokens.dtype),
                                 (batch, 1, tokens.shape[-1]))
        return ops.concatenate([token, tokens], axis=1) if self.concatenate else token

    def compute_output_shape(self, input_shape):
        count = input_shape[1] + 1 if self.concatenate else 1
        return (input_shape[0], count, input_shape[2])


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
class FeedForward(Configured, layers.Layer):
    """GELU MLP with dropout after every layer (the block's and the head's MLP);
    ``output_units``: a final linear layer's width, None to end on a GELU layer."""

    CONFIG = ("hidden_units", "output_units", "dropout")

    def __init__(self, hidden_units, output_units=None, dropout: float = 0.0, **kwargs):
        super().__init__(**kwargs)
        self.hidden_units = [int(u) for u in hidden_units]
        self.output_units = None if output_units is None else int(output_units)
        self.dropout = float(dropout)
        self.dense_layers = [layers.Dense(u, activation="gelu", name=f"dense_{i}")
                             for i, u in enumerate(self.hidden_units)]
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


@keras.saving.register_keras_serializable(package="ablation")
class TransformerBlock(layers.Layer):
    """Pre-norm encoder block: x + attention(norm(x)), then x + mlp(norm(x));
    ``attention`` and ``mlp`` are the keyword arguments of the two layers.

    CaiT's blocks (Touvron et al. 2021, as the official code builds them):

    - ``layer_scale``: each branch's output is multiplied by a learned
      per-channel vector starting at this value (LayerScale); None: no scale.
    - ``class_attention``: the block is called with a ``context`` (the patch
      tokens) and its tokens (the class token) attend to the context only;
      the context enters as it is (not normalised) and is not updated.
    """

    def __init__(self, attention: dict, mlp: dict, drop_path: float = 0.0,
                 epsilon: float = LAYER_NORM_EPSILON, layer_scale: float | None = None,
                 class_attention: bool = False, **kwargs):
        super().__init__(**kwargs)
        self.epsilon = float(epsilon)
        self.layer_scale = None if layer_scale is None else float(layer_scale)
        self.class_attention = bool(class_attention)
        self.attention_config = dict(attention)
        self.mlp_config = dict(mlp)
        self.drop_path_rate = float(drop_path)
        self.drop_path = DropPath(self.drop_path_rate, name="drop_path")
        self.attention_norm = layers.LayerNormalization(epsilon=self.epsilon,
                                                        name="attention_norm")
        self.attention = MultiHeadSelfAttention(**self.attention_config, name="attention")
        self.mlp_norm = layers.LayerNormalization(epsilon=self.epsilon, name="mlp_norm")
        self.mlp = FeedForward(**self.mlp_config, name="mlp")

    def build(self, tokens_shape, context_shape=None):
        for layer in (self.attention_norm, self.attention, self.mlp_norm, self.mlp):
            layer.build(tokens_shape)
        self.branch_scales = None
        if self.layer_scale is not None:
            self.branch_scales = [self.add_weight(
                shape=(tokens_shape[-1],), initializer=keras.initializers.Constant(self.layer_scale),
                name=name) for name in ("attention_scale", "mlp_scale")]

    def _scaled(self, branch, which: int):
        if self.branch_scales is None:
            return branch
        return branch * ops.cast(self.branch_scales[which], branch.dtype)

    def call(self, tokens, context=None, training=None):
        if (context is not None) != self.class_attention:
            raise ValueError(f"{self.name}: a context is needed exactly when class_attention=True")
        branch = self.attend(self.attention_norm(tokens), context, training)
        tokens = tokens + self.drop_path(self._scaled(branch, 0), training=training)
        branch = self.mlp(self.mlp_norm(tokens), training=training)
        return tokens + self.drop_path(self._scaled(branch, 1), training=training)

    def attend(self, tokens, context=None, training=None):
        """The attention branch on the normalised tokens (a subclass may window it)."""
        return self.attention(tokens, context=context, training=training)

    def compute_output_shape(self, tokens_shape, context_shape=None):
        return tokens_shape

    def get_config(self):
        return {**super().get_config(), "attention": self.attention_config,
                "mlp": self.mlp_config, "drop_path": self.drop_path_rate,
                "epsilon": self.epsilon, "layer_scale": self.layer_scale,
                "class_attention": self.class_attention}


def classifier_head(features, num_classes: int, head_units=(), head_dropout: float = 0.0):
    """The logits from pooled ``features`` (a symbolic tensor): dropout, an optional
    GELU MLP, and a float32 Dense (exact loss and softmax under mixed precision)."""
    if head_dropout:
        features = FastDropout(head_dropout, name="head_dropout")(features)
    if head_units:
        features = FeedForward(list(head_units), dropout=head_dropout, name="head_mlp")(features)
    return layers.Dense(num_classes, dtype="float32", name="logits")(features)
