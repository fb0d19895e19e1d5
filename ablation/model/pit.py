"""PiT (Heo et al. 2021) as the paper's official code builds it, with the three switches.

``build_pit`` is the official ``models/pit.py`` (aanna0701/SPT_LSA_ViT) in the
suite's shared layers; only what is PiT's own is here:

- stages of ``depth[s]`` blocks (``depth`` is a list), a class token and a
  position embedding over the first stage's patch grid;
- between two stages a :class:`Pool`: the patch grid halved, every width
  doubled (tokens, heads, MLP units; ``key_dim`` stays), the class token
  through its own Dense; the head reads the class token.

The switches: ``spt`` is Shifted Patch Tokenization in place of the patch
embedding and of every pooling, as the official code places it; ``lsa``
masks the diagonal of every stage's logits (class token included);
``learnable_temperature`` makes every block's scale a per-head variable.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import keras
import numpy as np
from keras import layers, ops

from ablation.augment.normalization import ChannelStatistics
from ablation.model.init import initialise
from ablation.model.layers import LAYER_NORM_EPSILON, TransformerBlock, classifier_head
from ablation.model.regularization import Configured
from ablation.model.tokenizer import PatchTokenizer
from ablation.model.vit import embedded_patches


@keras.saving.register_keras_serializable(package="ablation")
class Pool(Configured, layers.Layer):
    """PiT's pooling: (class token, grid of side s) tokens of width ``dim / 2`` to
    (class token, grid of side ceil(s / 2)) tokens of width ``dim``.

    The class token goes through a Dense. The grid (row-major after the class
    token, as the patch tokens are): ``shifted=False``, the official ``Pool``, a
    3x3 depthwise convolution of stride 2 and padding 1 giving each channel two
    outputs, then a pointwise (1x1) one; ``shifted=True`` (the ``spt`` switch),
    Shifted Patch Tokenization of the grid with 2x2 patches (:class:`PatchTokenizer`).
    """

    CONFIG = ("dim", "shifted", "epsilon")

    def __init__(self, dim: int, shifted: bool = False, epsilon: float = LAYER_NORM_EPSILON,
                 **kwargs):
        super().__init__(**kwargs)
        self.dim, self.shifted, self.epsilon = int(dim), bool(shifted), float(epsilon)
        self.class_projection = layers.Dense(self.dim, name="class_projection")
        if self.shifted:
            self.tokenizer = PatchTokenizer(2, self.dim, shifted=True, epsilon=self.epsilon,
                                            name="shifted_tokenizer")
        else:
            self.depthwise = layers.DepthwiseConv2D(3, strides=2, depth_multiplier=2,
                                                    name="depthwise")
            self.pointwise = layers.Dense(self.dim, name="pointwise")

    def _side(self, tokens_shape) -> int:
        side = math.isqrt(tokens_shape[1] - 1)
        if side * side != tokens_shape[1] - 1 or 2 * tokens_shape[2] != self.dim:
            raise ValueError(f"{self.name}: tokens {tuple(tokens_shape)} are no class token "
                             f"and square grid of width {self.dim // 2}")
        return side

    def build(self, tokens_shape):
        side, width = self._side(tokens_shape), tokens_shape[2]
        self.class_projection.build((None, 1, width))
        if self.shifted:
            self.tokenizer.build((None, side, side, width))
        else:
            self.depthwise.build((None, side + 2, side + 2, width))
            self.pointwise.build((None, None, self.dim))

    def call(self, tokens):
        side, width = self._side(tokens.shape), tokens.shape[2]
        grid = ops.reshape(tokens[:, 1:], (-1, side, side, width))
        if self.shifted:
            grid = self.tokenizer(grid)
        else:
            grid = self.depthwise(ops.pad(grid, [[0, 0], [1, 1], [1, 1], [0, 0]]))
            grid = self.pointwise(ops.reshape(grid, (-1, grid.shape[1] * grid.shape[2], self.dim)))
        return ops.concatenate([self.class_projection(tokens[:, :1]), grid], axis=1)

    def compute_output_shape(self, tokens_shape):
        side = (self._side(tokens_shape) + 1) // 2
        return (tokens_shape[0], side * side + 1, self.dim)


def build_pit(
    num_classes: int, input_shape: Sequence[int], *, spt: bool, lsa: bool,
    learnable_temperature: bool, image_size: int, patch_size: int, dim: int,
    depth: Sequence[int], num_heads: int, key_dim: int | None,
    mlp_hidden_units: Sequence[int], mlp_output_units: int | None, dropout: float = 0.0,
    attention_dropout: float = 0.0, embedding_dropout: float = 0.0,
    pooling: str = "class_token", head_units: Sequence[int] = (), head_dropout: float = 0.0,
    temperature_per_head: bool = True, temperature_form: str = "multiply",
    qkv_bias: bool = False, drop_path: float = 0.0, init: str = "official",
    layer_norm_epsilon: float = LAYER_NORM_EPSILON, augmentation: Mapping | None = None,
    normalization: ChannelStatistics | np.ndarray | None = None, seed: int | None = None,
    name: str = "pit",
) -> keras.Model:
    """A PiT for ``input_shape`` images and ``num_classes`` classes (the module's
    note): ``depth`` blocks per stage; ``dim``, ``num_heads`` and the MLP units
    are the first stage's. The other arguments mean what they mean in
    :func:`ablation.model.vit.build_vit`; ``pooling`` must be ``class_token``."""
    if pooling != "class_token":
        raise ValueError(f"PiT reads its class token: model.pooling must be class_token, "
                         f"got {pooling!r}")
    inputs, tokens = embedded_patches(input_shape, image_size, patch_size, dim, spt, True,
                                      embedding_dropout, layer_norm_epsilon, augmentation,
                                      normalization, seed)
    attention = dict(key_dim=key_dim if key_dim is not None else dim // num_heads,
                     dropout=attention_dropout, mask_diagonal=lsa,
                     learnable_temperature=learnable_temperature,
                     temperature_per_head=temperature_per_head,
                     temperature_form=temperature_form, qkv_bias=qkv_bias)
    block = 0
    for stage, blocks in enumerate(depth):   # widths double at every pooling
        if stage:
            tokens = Pool(dim << stage, shifted=spt, epsilon=layer_norm_epsilon,
                          name=f"pool_{stage}")(tokens)
        mlp = dict(hidden_units=[u << stage for u in mlp_hidden_units], dropout=dropout,
                   output_units=None if mlp_output_units is None else mlp_output_units << stage)
        for _ in range(blocks):
            tokens = TransformerBlock(dict(attention, num_heads=num_heads << stage), mlp,
                                      drop_path=drop_path, epsilon=layer_norm_epsilon,
                                      name=f"block_{block}")(tokens)
            block += 1
    token = layers.LayerNormalization(epsilon=layer_norm_epsilon, name="final_norm")(tokens[:, 0])
    model = keras.Model(inputs, classifier_head(token, num_classes, head_units, head_dropout),
                        name=name)
    # the official plain patch embedding is a Conv2d: its fan-out counts the kernel's positions
    initialise(model, init, seed, patch_kernel=1 if spt else patch_size)
    return model
