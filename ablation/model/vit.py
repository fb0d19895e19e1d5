"""Build the ViT from keyword arguments (:func:`build_vit`; a run config reaches it
through :func:`ablation.model.build.build_model`), and read its attention layers."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import keras
import numpy as np
from keras import layers

from ablation.augment import build_augmentation
from ablation.augment.normalization import ChannelStatistics
from ablation.model.attention import MultiHeadSelfAttention
from ablation.model.init import initialise
from ablation.model.layers import (
    LAYER_NORM_EPSILON,
    ClassToken,
    PositionEmbedding,
    TransformerBlock,
    classifier_head,
)
from ablation.model.regularization import FastDropout
from ablation.model.tokenizer import PatchTokenizer


def build_vit(
    num_classes: int,
    input_shape: Sequence[int],
    *,
    spt: bool,
    lsa: bool,
    learnable_temperature: bool,
    image_size: int,
    patch_size: int,
    dim: int,
    depth: int,
    num_heads: int,
    key_dim: int | None,
    mlp_hidden_units: Sequence[int],
    mlp_output_units: int | None = None,
    dropout: float = 0.0,
    attention_dropout: float = 0.0,
    embedding_dropout: float = 0.0,
    pooling: str = "flatten",
    head_units: Sequence[int] = (),
    head_dropout: float = 0.0,
    temperature_per_head: bool = False,
    temperature_form: str = "divide",
    qkv_bias: bool = True,
    drop_path: float = 0.0,
    init: str = "keras",
    layer_norm_epsilon: float = LAYER_NORM_EPSILON,
    augmentation: Mapping | None = None,
    normalization: ChannelStatistics | np.ndarray | None = None,
    seed: int | None = None,
    name: str = "vit",
) -> keras.Model:
    """A Vision Transformer for ``input_shape`` images and ``num_classes`` classes.

    ``key_dim=None`` splits ``dim`` evenly over the heads. ``pooling``:
    ``flatten`` (all tokens into the head, keras.io), ``class_token`` (the
    paper's ViT) or ``mean``. ``init``: :mod:`ablation.model.init`.
    ``normalization``: the input normalisation's statistics, or the training
    images to compute them from (:mod:`ablation.augment.normalization`).
    """
    if pooling not in ("flatten", "class_token", "mean"):
        raise ValueError(f"pooling must be flatten, class_token or mean, got {pooling!r}")
    inputs, tokens = embedded_patches(
        input_shape, image_size, patch_size, dim, spt, pooling == "class_token",
        embedding_dropout, layer_norm_epsilon, augmentation, normalization, seed)
    attention = dict(
        num_heads=num_heads,
        key_dim=key_dim if key_dim is not None else dim // num_heads,
        dropout=attention_dropout,
        mask_diagonal=lsa,
        learnable_temperature=learnable_temperature,
        temperature_per_head=temperature_per_head,
        temperature_form=temperature_form,
        qkv_bias=qkv_bias,
    )
    mlp = dict(hidden_units=list(mlp_hidden_units), output_units=mlp_output_units,
               dropout=dropout)
    for i in range(depth):
        tokens = TransformerBlock(attention, mlp, drop_path=drop_path, epsilon=layer_norm_epsilon,
                                  name=f"block_{i}")(tokens)
    tokens = layers.LayerNormalization(epsilon=layer_norm_epsilon, name="final_norm")(tokens)
    if pooling == "flatten":
        features = layers.Flatten(name="flatten")(tokens)
    elif pooling == "class_token":
        features = tokens[:, 0]
    else:
        features = layers.GlobalAveragePooling1D(name="mean_pool")(tokens)
    logits = classifier_head(features, num_classes, head_units, head_dropout)
    model = keras.Model(inputs, logits, name=name)
    initialise(model, init, seed)
    return model


def embedded_patches(input_shape, image_size, patch_size, dim, spt, class_token,
                     embedding_dropout, epsilon, augmentation, normalization, seed,
                     tokenizer=None, positions=None, patch_norm=False):
    """(the model's input, its tokens): the images augmented and normalised
    (:func:`ablation.augment.build_augmentation`), cut into patch tokens
    (``spt``: Shifted Patch Tokenization; ``patch_norm``: a LayerNorm after them),
    a class token first if ``class_token``, a position embedding added, then
    dropout at ``embedding_dropout``; ``tokenizer`` and ``positions``: layers in
    their place (T2T's)."""
    inputs = keras.Input(shape=tuple(input_shape), name="image")
    x = build_augmentation(image_size, normalization, seed=seed,
                           input_size=int(input_shape[0]), **dict(augmentation or {}))(inputs)
    tokens = (tokenizer or PatchTokenizer(patch_size, dim, shifted=spt, epsilon=epsilon,
                                          name="patch_tokenizer"))(x)
    if patch_norm:
        tokens = layers.LayerNormalization(epsilon=epsilon, name="patch_norm")(tokens)
    if class_token:
        tokens = ClassToken(name="class_token")(tokens)
    tokens = (positions or PositionEmbedding(name="position_embedding"))(tokens)
    if embedding_dropout:
        tokens = FastDropout(embedding_dropout, name="embedding_dropout")(tokens)
    return inputs, tokens


def attention_layers(model: keras.Model) -> list[MultiHeadSelfAttention]:
    """The model's attention layers, in depth order."""
    return [layer.attention for layer in model.layers if isinstance(layer, TransformerBlock)]


def temperatures(model: keras.Model) -> dict[str, float]:
    """Current learnable temperatures as the divisor T of the logits, by name:
    ``temperature/block_3``, or ``temperature/block_3/head_0`` per head."""
    values = {}
    for i, attention in enumerate(attention_layers(model)):
        if attention.temperature is None:
            continue
        t = attention.effective_temperature().reshape(-1)
        if attention.temperature_per_head:
            for h, v in enumerate(t):
                values[f"temperature/block_{i}/head_{h}"] = float(v)
        else:
            values[f"temperature/block_{i}"] = float(t[0])
    return values
