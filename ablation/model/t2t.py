"""T2T-ViT (Yuan et al. 2021) as the paper's official code builds it, with the three switches.

``build_t2t`` is the official ``models/t2t.py`` (aanna0701/SPT_LSA_ViT) in the
suite's shared layers; only what is T2T's own is here: the tokenizer
(:class:`TokensToToken`: soft splits and token transformers), the official
blocks (:class:`T2TBlock`), a fixed sinusoid position table.

The switches: ``spt`` stacks the image with its four copies shifted one pixel
diagonally (the official ``PatchShifting(2)``: SPT's shift, no patches) before
the first soft split, which sees five times the channels; ``lsa`` masks the
diagonal in every token transformer and every block; ``learnable_temperature``
makes all their scales per-head variables. The locality probe measures the
backbone's blocks and the token transformers, each on its grid; the token
transformers, inside the tokenizer, are not among
:func:`~ablation.model.vit.temperatures`.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import keras
import numpy as np
from keras import layers, ops

from ablation.augment.normalization import ChannelStatistics
from ablation.model.init import initialise
from ablation.model.layers import LAYER_NORM_EPSILON, TransformerBlock, classifier_head
from ablation.model.regularization import Configured
from ablation.model.tokenizer import SHIFTS, shift_and_stack
from ablation.model.vit import embedded_patches

def soft_split(grid):
    """torch's ``Unfold(3, stride=2, padding=1)`` on a (batch, H, W, C) grid: (batch,
    ceil(H/2) ceil(W/2), 9 C), each window's features channel-major as torch's."""
    rows, cols, channels = (grid.shape[1] + 1) // 2, (grid.shape[2] + 1) // 2, grid.shape[3]
    padded = ops.pad(grid, [[0, 0], [1, 1], [1, 1], [0, 0]])
    windows = [padded[:, i:i + 2 * rows - 1:2, j:j + 2 * cols - 1:2]
               for i in range(3) for j in range(3)]
    return ops.reshape(ops.stack(windows, axis=-1), (-1, rows * cols, 9 * channels))


@keras.saving.register_keras_serializable(package="ablation")
class T2TBlock(TransformerBlock):
    """The official T2T's block. Its attention adds a skip of its own: with one head
    its values, else its normalised input. A token transformer (its attention
    narrows the tokens to ``output_dim``) has no skip around the attention."""

    def build(self, tokens_shape):
        narrowed = self.attention.compute_output_shape(tokens_shape)
        for layer, shape in ((self.attention_norm, tokens_shape), (self.attention, tokens_shape),
                             (self.mlp_norm, narrowed), (self.mlp, narrowed)):
            layer.build(shape)

    def call(self, tokens, training=None):
        normed = self.attention_norm(tokens)
        # as the official Attention: v.squeeze(1) + x if num_heads == 1 else x + residual
        skip = self.attention.value(normed) if self.attention.num_heads == 1 else normed
        branch = self.attention(normed, training=training) + skip
        tokens = (branch if branch.shape[-1] != tokens.shape[-1]
                  else tokens + self.drop_path(branch, training=training))
        return tokens + self.drop_path(self.mlp(self.mlp_norm(tokens), training=training),
                                       training=training)

    def compute_output_shape(self, tokens_shape):
        return self.attention.compute_output_shape(tokens_shape)


@keras.saving.register_keras_serializable(package="ablation")
class TokensToToken(Configured, layers.Layer):
    """The official ``T2T_module``: images (batch, H, W, C) to tokens (batch, (H/p)
    (W/p), ``dim``), p = ``patch_size`` = 2 ** the soft splits (two at 32 px, three
    at 64). A token transformer (one head of ``token_dim``, MLP ratio 1, no dropout,
    the scale from its input width) follows each split but the last, the next split
    reading its tokens as a grid; a Linear takes the last split's to ``dim``.
    ``shifted``: ``spt`` (the module's note); ``attention``: the switches."""

    CONFIG = ("patch_size", "dim", "token_dim", "shifted", "attention", "epsilon")

    def __init__(self, patch_size: int, dim: int, token_dim: int = 64, shifted: bool = False,
                 attention: Mapping | None = None, epsilon: float = LAYER_NORM_EPSILON,
                 **kwargs):
        super().__init__(**kwargs)
        self.patch_size, self.dim, self.token_dim = int(patch_size), int(dim), int(token_dim)
        self.shifted, self.attention = bool(shifted), dict(attention or {})
        self.epsilon = float(epsilon)
        self.splits = self.patch_size.bit_length() - 1
        if self.splits < 2 or 1 << self.splits != self.patch_size:
            raise ValueError(f"T2T's patch_size is its grid's stride, 2 ** its soft splits: "
                             f"4, 8, 16..., got {patch_size}")
        # the official module's LayerNorm, which its forward never applies: here for its
        # parameters and state dict (a zero gradient reaches it, see call)
        self.norm = layers.LayerNormalization(epsilon=self.epsilon, name="norm")
        self.projection = layers.Dense(self.dim, name="projection")
        self.token_transformers = []

    def build(self, images_shape):
        height, width, channels = images_shape[1:]
        if height % self.patch_size or width % self.patch_size:
            raise ValueError(f"patch_size {self.patch_size} does not divide the image size "
                             f"{height}x{width}")
        features = 9 * channels * (1 + len(SHIFTS) if self.shifted else 1)
        for i in range(self.splits - 1):
            block = T2TBlock(dict(self.attention, num_heads=1, key_dim=self.token_dim,
                                  output_dim=self.token_dim, scale_dim=features),
                             dict(hidden_units=[self.token_dim], output_units=self.token_dim),
                             epsilon=self.epsilon, name=f"token_transformer_{i}")
            block.build((None, None, features))
            self.token_transformers.append(block)
            features = 9 * self.token_dim
        self.norm.build((None, None, features))
        self.projection.build((None, None, features))

    def levels(self, images, training=None):
        """(the soft split each token transformer reads, in order; the grid the last
        split reads)."""
        grid, splits = shift_and_stack(images, 1) if self.shifted else images, []
        for block in self.token_transformers:
            rows, cols = (grid.shape[1] + 1) // 2, (grid.shape[2] + 1) // 2
            splits.append(soft_split(grid))
            grid = ops.reshape(block(splits[-1], training=training),
                               (-1, rows, cols, self.token_dim))
        return splits, grid

    def call(self, images, training=None):
        grid = self.levels(images, training)[1]
        unused = ops.sum(self.norm.gamma) + ops.sum(self.norm.beta)
        tokens = self.projection(soft_split(grid))
        return tokens + ops.cast(0.0 * unused, tokens.dtype)

    def compute_output_shape(self, images_shape):
        count = (images_shape[1] // self.patch_size) * (images_shape[2] // self.patch_size)
        return (images_shape[0], count, self.dim)


@keras.saving.register_keras_serializable(package="ablation")
class SinusoidPositions(layers.Layer):
    """Add the official T2T's fixed position table (``get_sinusoid_encoding``): at
    position n, feature j, sin (j even) or cos (j odd) of n / 10000 ** (2 (j // 2) / width)."""

    def build(self, tokens_shape):
        count, width = tokens_shape[1], tokens_shape[2]
        angles = np.arange(count)[:, None] / np.power(10000, 2 * (np.arange(width) // 2) / width)
        self.table = np.where(np.arange(width) % 2, np.cos(angles), np.sin(angles))

    def call(self, tokens):
        return tokens + ops.cast(self.table.astype("float32"), tokens.dtype)[None]


def build_t2t(
    num_classes: int, input_shape: Sequence[int], *, spt: bool, lsa: bool,
    learnable_temperature: bool, image_size: int, patch_size: int, dim: int, depth: int,
    num_heads: int, key_dim: int | None, mlp_hidden_units: Sequence[int],
    mlp_output_units: int | None, dropout: float = 0.0, attention_dropout: float = 0.0,
    embedding_dropout: float = 0.0, pooling: str = "class_token",
    head_units: Sequence[int] = (), head_dropout: float = 0.0,
    temperature_per_head: bool = True, temperature_form: str = "multiply",
    qkv_bias: bool = False, drop_path: float = 0.0, init: str = "official",
    layer_norm_epsilon: float = LAYER_NORM_EPSILON, augmentation: Mapping | None = None,
    normalization: ChannelStatistics | np.ndarray | None = None, seed: int | None = None,
    token_dim: int = 64, name: str = "t2t",
) -> keras.Model:
    """A T2T-ViT for ``input_shape`` images and ``num_classes`` classes (the module's
    note): ``depth`` blocks of ``dim``, their stochastic depth rising linearly from 0
    to ``drop_path`` as the official; ``token_dim``: the official default. The rest
    as in :func:`ablation.model.vit.build_vit`; ``pooling`` must be ``class_token``."""
    if pooling != "class_token":
        raise ValueError(f"T2T reads its class token: model.pooling must be class_token, "
                         f"got {pooling!r}")
    switches = dict(mask_diagonal=lsa, learnable_temperature=learnable_temperature,
                    temperature_per_head=temperature_per_head,
                    temperature_form=temperature_form, qkv_bias=qkv_bias)
    tokenizer = TokensToToken(patch_size, dim, token_dim, shifted=spt, attention=switches,
                              epsilon=layer_norm_epsilon, name="patch_tokenizer")
    inputs, tokens = embedded_patches(
        input_shape, image_size, patch_size, dim, spt, True, embedding_dropout,
        layer_norm_epsilon, augmentation, normalization, seed, tokenizer=tokenizer,
        positions=SinusoidPositions(name="position_embedding"))
    attention = dict(switches, num_heads=num_heads, dropout=attention_dropout,
                     key_dim=key_dim if key_dim is not None else dim // num_heads)
    mlp = dict(hidden_units=list(mlp_hidden_units), output_units=mlp_output_units,
               dropout=dropout)
    for i in range(depth):
        tokens = T2TBlock(attention, mlp, drop_path=drop_path * i / max(depth - 1, 1),
                          epsilon=layer_norm_epsilon, name=f"block_{i}")(tokens)
    token = layers.LayerNormalization(epsilon=layer_norm_epsilon, name="final_norm")(tokens[:, 0])
    model = keras.Model(inputs, classifier_head(token, num_classes, head_units, head_dropout),
                        name=name)
    initialise(model, init, seed, normal_std=0.02)   # official: trunc_normal_(std=.02)
    return model
