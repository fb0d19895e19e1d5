"""Swin (Liu et al. 2021) as the paper's official code builds it, with the three switches.

``build_swin`` is the official ``models/swin.py`` (aanna0701/SPT_LSA_ViT) in the
suite's shared layers; only what is Swin's own is here:

- no class token: the patch tokens (layer-normalised when plain) get a position
  embedding; a final LayerNorm, then the mean token into the head;
- stages of ``depth[s]`` :class:`SwinBlock`: attention within windows of
  ``window_size`` x ``window_size`` tokens with a learned relative position
  bias, every odd block of a stage on the grid rolled by half a window; a grid
  no larger than a window is one window, never rolled;
- between two stages a :class:`PatchMerging`: the grid halved, every width
  doubled (tokens, heads, MLP units; ``key_dim`` stays);
- stochastic depth rising linearly from 0 in the first block to ``drop_path``
  in the last.

The switches: ``spt`` is Shifted Patch Tokenization in place of the patch
embedding and of every merging, as the official code places it; ``lsa`` masks
the diagonal of every window's logits (after the bias and the roll's mask);
``learnable_temperature`` makes every block's scale a per-head variable.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import keras
import numpy as np
from keras import layers, ops

from ablation.augment.normalization import ChannelStatistics
from ablation.config.validate import SWIN_WINDOW
from ablation.model.init import initialise
from ablation.model.layers import LAYER_NORM_EPSILON, TransformerBlock, classifier_head
from ablation.model.regularization import Configured
from ablation.model.tokenizer import PatchTokenizer
from ablation.model.vit import embedded_patches

# the official logit between two tokens that a roll brings into one window from apart
ROLL_MASK = -100.0
# (batch, window row, row in it, window column, column in it, c) <-> windows, then rows in them
_SWAP = (0, 1, 3, 2, 4, 5)


def relative_index(window: int) -> np.ndarray:
    """(n, n), n = window**2: the bias table's row for each (query, key) of a window,
    their offset (dy, dx) as (dy + window - 1) * (2 window - 1) + dx + window - 1."""
    rows, cols = np.divmod(np.arange(window * window), window)
    dy = rows[:, None] - rows[None, :] + window - 1
    return dy * (2 * window - 1) + cols[:, None] - cols[None, :] + window - 1


def roll_mask(side: int, window: int, shift: int) -> np.ndarray:
    """(windows, n, n): :data:`ROLL_MASK` between two tokens of a window of the grid
    rolled by ``shift`` that come from different regions of the grid (the official
    three bands per axis), else 0; (1, n, n) zeros without a roll."""
    n, k = window * window, side // window
    if not shift:
        return np.zeros((1, n, n), "float32")
    band = np.digitize(np.arange(side), [side - window, side - shift])
    region = (3 * band[:, None] + band[None, :]).reshape(k, window, k, window)
    region = region.transpose(0, 2, 1, 3).reshape(k * k, n)
    return np.where(region[:, :, None] != region[:, None, :], ROLL_MASK, 0.0).astype("float32")


@keras.saving.register_keras_serializable(package="ablation")
class SwinBlock(TransformerBlock):
    """A :class:`TransformerBlock` over a square grid of tokens whose attention works
    within windows of ``window`` x ``window`` tokens, with a learned relative position
    bias per head; ``shift`` > 0: on the grid rolled back by ``shift`` tokens on both
    axes (the official shifted windows), rolled forward again after."""

    def __init__(self, attention: dict, mlp: dict, window: int, shift: int = 0, **kwargs):
        super().__init__(attention, mlp, **kwargs)
        self.window, self.shift = int(window), int(shift)

    def build(self, tokens_shape, context_shape=None):
        super().build(tokens_shape)
        self.side = math.isqrt(tokens_shape[1])
        if self.side ** 2 != tokens_shape[1] or self.side % self.window or not (
                0 <= self.shift < self.window):
            raise ValueError(f"{self.name}: {tokens_shape[1]} tokens are no square grid of "
                             f"{self.window} x {self.window} windows rolled by {self.shift}")
        self.relative_position_bias = self.add_weight(
            shape=((2 * self.window - 1) ** 2, self.attention.num_heads),
            initializer=keras.initializers.TruncatedNormal(stddev=0.02),
            name="relative_position_bias")
        self.mask = roll_mask(self.side, self.window, self.shift)[:, None]

    def window_bias(self):
        """(windows, heads, n, n): the relative position bias plus the roll's mask."""
        n = self.window * self.window
        bias = ops.take(self.relative_position_bias, relative_index(self.window).reshape(-1),
                        axis=0)
        # ops.add, not +: a PyTorch tensor plus a numpy array asks numpy to convert it
        return ops.add(ops.transpose(ops.reshape(bias, (n, n, -1)), (2, 0, 1))[None], self.mask)

    def _rolled(self, grid, sign: int):
        """``grid`` (batch, side, side, dim) rolled by ``sign * shift`` on both axes."""
        if not self.shift:
            return grid
        return ops.roll(ops.roll(grid, sign * self.shift, axis=1), sign * self.shift, axis=2)

    def windows(self, tokens):
        """(batch * windows, n, dim): the windows of each image's rolled grid in turn."""
        w, k, dim = self.window, self.side // self.window, tokens.shape[-1]
        grid = self._rolled(ops.reshape(tokens, (-1, self.side, self.side, dim)), -1)
        return ops.reshape(ops.transpose(ops.reshape(grid, (-1, k, w, k, w, dim)), _SWAP),
                           (-1, w * w, dim))

    def attend(self, tokens, context=None, training=None):
        """Attention within the windows, the outputs put back on the grid."""
        w, k, dim = self.window, self.side // self.window, tokens.shape[-1]
        out = self.attention(self.windows(tokens), training=training, bias=self.window_bias())
        grid = ops.reshape(ops.transpose(ops.reshape(out, (-1, k, k, w, w, dim)), _SWAP),
                           (-1, self.side, self.side, dim))
        return ops.reshape(self._rolled(grid, 1), (-1, self.side * self.side, dim))

    def get_config(self):
        return {**super().get_config(), "window": self.window, "shift": self.shift}


@keras.saving.register_keras_serializable(package="ablation")
class PatchMerging(Configured, layers.Layer):
    """Swin's plain patch merging: a (batch, h, w, c) grid to (batch, h/2 * w/2, ``dim``)
    tokens, each 2x2 neighbourhood's 4c values in the official order (offsets (0, 0),
    (1, 0), (0, 1), (1, 1)) layer-normalised, then a Dense without bias."""

    CONFIG = ("dim", "epsilon")

    def __init__(self, dim: int, epsilon: float = LAYER_NORM_EPSILON, **kwargs):
        super().__init__(**kwargs)
        self.dim, self.epsilon = int(dim), float(epsilon)
        self.norm = layers.LayerNormalization(epsilon=self.epsilon, name="norm")
        self.reduction = layers.Dense(self.dim, use_bias=False, name="reduction")

    def build(self, grid_shape):
        self.norm.build((None, None, 4 * grid_shape[-1]))
        self.reduction.build((None, None, 4 * grid_shape[-1]))

    def call(self, grid):
        _, h, w, c = grid.shape
        x = ops.transpose(ops.reshape(grid, (-1, h // 2, 2, w // 2, 2, c)), (0, 1, 3, 4, 2, 5))
        return self.reduction(self.norm(ops.reshape(x, (-1, (h // 2) * (w // 2), 4 * c))))

    def compute_output_shape(self, grid_shape):
        return (grid_shape[0], (grid_shape[1] // 2) * (grid_shape[2] // 2), self.dim)


def build_swin(
    num_classes: int, input_shape: Sequence[int], *, spt: bool, lsa: bool,
    learnable_temperature: bool, image_size: int, patch_size: int, dim: int,
    depth: Sequence[int], num_heads: int, key_dim: int | None,
    mlp_hidden_units: Sequence[int], mlp_output_units: int | None, dropout: float = 0.0,
    attention_dropout: float = 0.0, embedding_dropout: float = 0.0, pooling: str = "mean",
    head_units: Sequence[int] = (), head_dropout: float = 0.0,
    temperature_per_head: bool = True, temperature_form: str = "multiply",
    qkv_bias: bool = True, drop_path: float = 0.0, init: str = "official",
    layer_norm_epsilon: float = LAYER_NORM_EPSILON, augmentation: Mapping | None = None,
    normalization: ChannelStatistics | np.ndarray | None = None, seed: int | None = None,
    window_size: int = SWIN_WINDOW, name: str = "swin",
) -> keras.Model:
    """A Swin for ``input_shape`` images and ``num_classes`` classes (the module's
    note): ``depth`` blocks per stage; ``dim``, ``num_heads`` and the MLP units are
    the first stage's; ``window_size`` the official 4. The other arguments mean what
    they mean in :func:`ablation.model.vit.build_vit`; ``pooling`` must be ``mean``."""
    if pooling != "mean":
        raise ValueError(f"Swin has no class token: model.pooling must be mean, got {pooling!r}")
    inputs, tokens = embedded_patches(input_shape, image_size, patch_size, dim, spt, False,
                                      embedding_dropout, layer_norm_epsilon, augmentation,
                                      normalization, seed, patch_norm=not spt)
    attention = dict(key_dim=key_dim if key_dim is not None else dim // num_heads,
                     dropout=attention_dropout, mask_diagonal=lsa,
                     learnable_temperature=learnable_temperature,
                     temperature_per_head=temperature_per_head,
                     temperature_form=temperature_form, qkv_bias=qkv_bias)
    rates, block = np.linspace(0.0, drop_path, sum(depth)), 0
    for stage, blocks in enumerate(depth):   # widths double at every merging
        side = math.isqrt(tokens.shape[1])
        if stage:
            grid, side = ops.reshape(tokens, (-1, side, side, tokens.shape[2])), side // 2
            tokens = (PatchTokenizer(2, dim << stage, shifted=True, epsilon=layer_norm_epsilon,
                                     name=f"merge_{stage}") if spt else
                      PatchMerging(dim << stage, layer_norm_epsilon, name=f"merge_{stage}"))(grid)
        mlp = dict(hidden_units=[u << stage for u in mlp_hidden_units], dropout=dropout,
                   output_units=None if mlp_output_units is None else mlp_output_units << stage)
        window = min(window_size, side)
        for i in range(blocks):
            tokens = SwinBlock(dict(attention, num_heads=num_heads << stage), mlp, window,
                               window // 2 if i % 2 and side > window_size else 0,
                               drop_path=float(rates[block]), epsilon=layer_norm_epsilon,
                               name=f"block_{block}")(tokens)
            block += 1
    tokens = layers.LayerNormalization(epsilon=layer_norm_epsilon, name="final_norm")(tokens)
    features = layers.GlobalAveragePooling1D(name="mean_pool")(tokens)
    model = keras.Model(inputs, classifier_head(features, num_classes, head_units, head_dropout),
                        name=name)
    initialise(model, init, seed, torch_layers=True)   # the official Swin keeps torch's draws
    return model
