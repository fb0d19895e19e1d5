"""CaiT (Touvron et al. 2021) as the paper's official code builds it, with the three switches.

``build_cait`` is the official ``models/cait.py`` (aanna0701/SPT_LSA_ViT) in
the suite's shared layers; only what is CaiT's own is here:

- a patch stage of ``depth`` self-attention blocks over the patch tokens
  (position embedding on the patches; no class token among them);
- a class-attention stage of ``class_depth`` blocks in which a class token,
  alone, attends to the patch tokens (queries from the class token, keys and
  values from the patches as the patch stage leaves them, not normalised);
  the head reads the class token (LayerNorm, Dense);
- in every block: LayerScale, initialised by the block's position in its
  stack (:func:`layer_scale_init`), and talking heads (mixing matrices across
  heads before and after the softmax); q without bias, k and v fused
  (``init=official`` draws them so).

The switches: ``spt`` is the tokenizer's (Shifted Patch Tokenization replaces
the patch embedding); ``lsa`` masks the diagonal of the patch stage's logits
(the class token is not among its own keys, so the class stage has nothing
to mask); ``learnable_temperature`` makes every block's scale, both stages,
a per-head variable. ``official_cait_mask=true`` reproduces the official
code's "mask" instead: -1e-9 written on the diagonal before the head mixing,
which leaves the self-logit at about zero (in effect no mask).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import keras
import numpy as np
from keras import layers

from ablation.augment.normalization import ChannelStatistics
from ablation.model.init import initialise
from ablation.model.layers import (
    LAYER_NORM_EPSILON,
    ClassToken,
    TransformerBlock,
    classifier_head,
)
from ablation.model.vit import embedded_patches

# The official CaiT's q is its own Linear, k and v one fused Linear (to_q, to_kv).
QKV_FUSED = (1, 2, 2)


def layer_scale_init(index: int) -> float:
    """LayerScale's initial value for the block at 1-based ``index`` in its stack,
    as the official code (``LayerScale(dim, ..., depth=ind + 1)``): 0.1 up to 18,
    1e-5 up to 24, 1e-6 beyond. (The CaiT paper picks it by the network's depth.)"""
    if index <= 18:
        return 0.1
    return 1e-5 if index <= 24 else 1e-6


def build_cait(
    num_classes: int,
    input_shape: Sequence[int],
    *,
    spt: bool,
    lsa: bool,
    learnable_temperature: bool,
    official_cait_mask: bool,
    image_size: int,
    patch_size: int,
    dim: int,
    depth: int,
    class_depth: int,
    num_heads: int,
    key_dim: int | None,
    mlp_hidden_units: Sequence[int],
    mlp_output_units: int | None,
    dropout: float = 0.0,
    attention_dropout: float = 0.0,
    embedding_dropout: float = 0.0,
    pooling: str = "class_token",
    head_units: Sequence[int] = (),
    head_dropout: float = 0.0,
    temperature_per_head: bool = True,
    temperature_form: str = "multiply",
    qkv_bias: bool = False,
    drop_path: float = 0.0,
    init: str = "official",
    layer_norm_epsilon: float = LAYER_NORM_EPSILON,
    augmentation: Mapping | None = None,
    normalization: ChannelStatistics | np.ndarray | None = None,
    seed: int | None = None,
    name: str = "cait",
) -> keras.Model:
    """A CaiT for ``input_shape`` images and ``num_classes`` classes (the module's
    note); the arguments shared with :func:`ablation.model.vit.build_vit` mean
    the same. ``pooling`` must be ``class_token``: CaiT reads its class token."""
    if pooling != "class_token":
        raise ValueError(f"CaiT reads its class token: model.pooling must be class_token, "
                         f"got {pooling!r}")
    if class_depth is None or official_cait_mask is None:
        raise ValueError("CaiT needs model.class_depth and model.official_cait_mask")
    inputs, patches = embedded_patches(input_shape, image_size, patch_size, dim, spt, False,
                                       embedding_dropout, layer_norm_epsilon, augmentation,
                                       normalization, seed)
    attention = dict(
        num_heads=num_heads,
        key_dim=key_dim if key_dim is not None else dim // num_heads,
        dropout=attention_dropout,
        mask_diagonal=lsa,
        learnable_temperature=learnable_temperature,
        temperature_per_head=temperature_per_head,
        temperature_form=temperature_form,
        qkv_bias=qkv_bias,
        talking_heads=True,
        official_cait_mask=official_cait_mask,
    )
    mlp = dict(hidden_units=list(mlp_hidden_units), output_units=mlp_output_units,
               dropout=dropout)
    block = dict(drop_path=drop_path, epsilon=layer_norm_epsilon)
    for i in range(depth):
        patches = TransformerBlock(attention, mlp, layer_scale=layer_scale_init(i + 1),
                                   name=f"block_{i}", **block)(patches)
    token = ClassToken(concatenate=False, name="class_token")(patches)
    for i in range(class_depth):
        token = TransformerBlock(attention, mlp, layer_scale=layer_scale_init(i + 1),
                                 class_attention=True, name=f"class_block_{i}",
                                 **block)(token, context=patches)
    token = layers.LayerNormalization(epsilon=layer_norm_epsilon, name="final_norm")(token)
    logits = classifier_head(token[:, 0], num_classes, head_units, head_dropout)
    model = keras.Model(inputs, logits, name=name)
    initialise(model, init, seed, qkv_fused=QKV_FUSED)
    return model
