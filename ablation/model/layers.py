"""The ViT's building blocks but the switched ones (:mod:`ablation.model.tokenizer`,
:mod:`ablation.model.attention`), each a Keras layer with one job, in ``keras.ops`` only."""
from __future__ import annotations

import keras
from keras import layers, ops

from ablation.model.attention import MultiHeadSelfAttention
from ablation.model.regularization import Configured, DropPath, FastDropout

LAYER_NORM_EPSILON = 1e-6


@keras.saving.register_keras_serializable(package="ablation")
class ClassToken(layers.Layer):
    """Prepend one learned token whose final state is the image's summary."""

    def build(self, input_shape):
        self.token = self.add_weight(shape=(1, 1, input_shape[-1]), initializer="zeros",
                                     name="token")

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
    ``attention`` and ``mlp`` are the keyword arguments of the two layers."""

    def __init__(self, attention: dict, mlp: dict, drop_path: float = 0.0,
                 epsilon: float = LAYER_NORM_EPSILON, **kwargs):
        super().__init__(**kwargs)
        self.epsilon = float(epsilon)
        self.attention_config = dict(attention)
        self.mlp_config = dict(mlp)
        self.drop_path_rate = float(drop_path)
        self.drop_path = DropPath(self.drop_path_rate, name="drop_path")
        self.attention_norm = layers.LayerNormalization(epsilon=self.epsilon,
                                                        name="attention_norm")
        self.attention = MultiHeadSelfAttention(**self.attention_config, name="attention")
        self.mlp_norm = layers.LayerNormalization(epsilon=self.epsilon, name="mlp_norm")
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
                "mlp": self.mlp_config, "drop_path": self.drop_path_rate,
                "epsilon": self.epsilon}
