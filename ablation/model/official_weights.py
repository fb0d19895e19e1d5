"""An official ``SPT_LSA_ViT`` state dict loaded into ``model=paper``, ``cait``, ``pit``,
``swin`` or ``t2t``.

The official ViT (aanna0701/SPT_LSA_ViT, ``models/vit.py``) and ``model=paper``
compute the same function with differently laid out weights:

- PyTorch's ``Linear`` stores (out, in); a Keras ``Dense`` kernel is (in, out).
- The official q/k/v is one ``Linear(dim, 3 * inner)``; here three Dense layers.
- SPT stacks the image and its four shifted copies in the order
  (x, left-up, right-up, left-bottom, right-bottom); here
  (x, (+1, +1), (-1, +1), (+1, -1), (-1, -1)) in (row, column) shifts. The
  tokenizer's LayerNorm and projection see the patch features in that order,
  so their rows are permuted (:data:`SPT_ORDER`).
- ``is_LSA`` is one flag there: the diagonal mask and a learnable per-head
  scale. A state dict with ``scale`` entries needs ``lsa=true
  learnable_temperature=true``; the mask itself has no weight to check.

The official CaiT (``models/cait.py``) is read the same way (:func:`cait_weights`):
its ``to_q`` and fused ``to_kv``, LayerScale ``scale`` (1, 1, dim), talking
heads ``mix_heads_pre_attn`` / ``mix_heads_post_attn`` (used as (heads, heads)
as they are), ``patch_transformer`` to ``block_<i>``, ``cls_transformer`` to
``class_block_<i>``.

The official PiT (``models/pit.py``) too (:func:`pit_weights`): ``layers.<2s>``
is stage s, its blocks laid out as the ViT's, numbered on across stages;
``layers.<2s-1>`` the pooling before it (``pool_<s>``): a depthwise Conv2d
(2 dim, 1, 3, 3) whose output 2c + m reads channel c, then a 1x1 Conv2d, or
with SPT ``class_linear`` and ``merging`` as the patch embedding's. Its plain
patch embedding is a Conv2d (dim, 3, p, p): the Linear over (row, column,
channel) patch features it equals.

The official T2T (``models/t2t.py``) too (:func:`t2t_weights`): its blocks
(``blocks.<i>``) and token transformers (``tokens_to_token.attention<j>``, here
``token_transformer_<j-1>``) named as the ViT's blocks; with SPT the first
one's input features in this order of the shifted copies. Its fixed sinusoid
``pos_embed`` is no weight here.

The official Swin (``models/swin.py``) too (:func:`swin_weights`):
``layers.<s>.blocks.<i>`` is stage s's block i (numbered on across stages),
its names read as the ViT block's (:data:`TIMM_BLOCK`), its q/k/v with biases,
its ``relative_position_bias_table`` as it is; ``layers.<s>.downsample`` the
merging after stage s (``merge_<s+1>``): LayerNorm and ``reduction``, or SPT's
``merging``; ``patch_embed`` a Conv2d and LayerNorm, or SPT's. The buffers
(``relative_position_index``, ``attn_mask``) are the model's own constants.

The official model is fed ``Normalize``-d tensors; ``model=paper`` normalises
inside the model, so with the official constants (``augmentation=paper``) it
takes raw pixels and gives the official logits.
"""
from __future__ import annotations

import re
from collections.abc import Mapping

import keras
import numpy as np

from ablation.model.vit import attention_layers

# Project copy g of the shifted stack is official copy SPT_ORDER[g].
SPT_ORDER = (0, 4, 2, 3, 1)
# The timm-style block names of the official Swin and T2T -> the official ViT block's,
# which _block reads.
TIMM_BLOCK = {"norm1.": "0.norm.", "attn.qkv.": "0.fn.to_qkv.", "attn.proj.": "0.fn.to_out.0.",
              "attn.scale": "0.fn.scale", "norm2.": "1.norm.", "mlp.fc1.": "1.fn.net.0.",
              "mlp.fc2.": "1.fn.net.3."}
# The official CaiT's block names (LayerScale around each PreNorm) -> the official ViT block's.
CAIT_BLOCK = {"0.fn.norm.": "0.norm.", "0.fn.fn.": "0.fn.", "1.fn.norm.": "1.norm.",
              "1.fn.fn.": "1.fn."}
_CHECK = ("check spt, lsa, learnable_temperature, the classes and model=paper, cait, pit, swin "
          "or t2t")


def _array(key, value) -> np.ndarray:
    """A state dict's value (a numpy array, or a torch tensor) as a finite float
    array of at least one dimension; anything else is a ValueError naming it."""
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"the state dict's {key!r} is not an array of numbers") from None
    if array.ndim == 0 or not np.isfinite(array).all():
        raise ValueError(f"the state dict's {key!r} is {'a scalar' if array.ndim == 0 else 'not finite'}")
    return array


def _state(state) -> dict[str, np.ndarray]:
    """The official state dict (or the official checkpoint holding it) as arrays."""
    if isinstance(state, Mapping) and "model_state_dict" in state:
        state = state["model_state_dict"]  # the official best.pth / checkpoint.pth wrap it
    if not isinstance(state, Mapping) or not all(isinstance(k, str) for k in state):
        raise ValueError("not an SPT_LSA_ViT ViT state dict: a mapping of parameter names "
                         "to arrays is needed")
    return {k: _array(k, v) for k, v in state.items()}


class _Official(dict):
    """The state dict's arrays; a missing entry is a ValueError naming it."""

    def __missing__(self, key):
        raise ValueError(f"not an SPT_LSA_ViT ViT state dict: it has no {key!r}")


def _depth(state: Mapping, stack: str = "transformer", inner: str = "layers") -> int:
    at = stack.count(".") + 2   # the block number's place in a dotted name
    parts = [k.split(".") for k in state if k.startswith(f"{stack}.{inner}.")]
    if not all(len(p) > at + 1 and p[at].isdigit() for p in parts):
        raise ValueError("not an SPT_LSA_ViT ViT state dict: transformer.layers.<i>.… "
                         "entries need a block number")
    blocks = {int(p[at]) for p in parts}
    if not blocks or blocks != set(range(max(blocks) + 1)):
        raise ValueError(f"not an SPT_LSA_ViT ViT state dict: no {stack}.{inner}.<i> entries")
    return max(blocks) + 1


def _norm(official: Mapping, o: str, k: str) -> dict[str, np.ndarray]:
    """The official LayerNorm with prefix ``o`` under layer path ``k``."""
    return {k + "gamma": official[o + "weight"], k + "beta": official[o + "bias"]}


def _dense(official: Mapping, o: str, k: str) -> dict[str, np.ndarray]:
    """The official Linear with prefix ``o`` as the Dense layer at path ``k``."""
    return {k + "kernel": official[o + "weight"].T, k + "bias": official[o + "bias"]}


def _renamed(official: Mapping, names: Mapping[str, str]) -> _Official:
    """``official`` with every ``.<part>`` of a name that ``names`` holds written as
    ``.<names[part]>``."""
    renamed = _Official()
    for name, value in official.items():
        for part, vit in names.items():
            name = name.replace(f".{part}", f".{vit}")
        renamed[name] = value
    return renamed


def _common(official: Mapping, tokenizer: str) -> dict[str, np.ndarray]:
    """Embeddings, head and tokenizer (``tokenizer``: the official module's prefix
    whose ``merging`` is SPT's, or whose ``1`` is the plain patch embedding)."""
    w = {"position_embedding/embedding": official["pos_embedding"][0],
         "class_token/token": official["cls_token"],
         **_norm(official, "mlp_head.0.", "final_norm/"),
         **_dense(official, "mlp_head.1.", "logits/")}
    if f"{tokenizer}merging.2.weight" in official:
        w.update(_shifted(official, tokenizer, "patch_tokenizer/"))
    else:
        w.update(_dense(official, "to_patch_embedding.1.", "patch_tokenizer/projection/"))
    return w


def _shifted(official: Mapping, prefix: str, layer: str, channels: int = 3
             ) -> dict[str, np.ndarray]:
    """SPT's LayerNorm and projection (``<prefix>merging.1`` and ``.2``) under the
    paths of ``layer``, a shifted :class:`~ablation.model.tokenizer.PatchTokenizer`
    of ``channels`` per copy: their rows in this order of the copies (:data:`SPT_ORDER`)."""
    features = official[prefix + "merging.1.weight"].shape[0]
    copies = channels * len(SPT_ORDER)
    patch = int(round((features // copies) ** 0.5))
    if patch * patch * copies != features:
        raise ValueError(f"SPT features {features} are not patch x patch x {copies}")
    order = np.arange(features).reshape(patch, patch, len(SPT_ORDER), channels)
    order = order[:, :, list(SPT_ORDER)].reshape(-1)
    return {layer + "norm/gamma": official[prefix + "merging.1.weight"][order],
            layer + "norm/beta": official[prefix + "merging.1.bias"][order],
            layer + "projection/kernel": official[prefix + "merging.2.weight"].T[order],
            layer + "projection/bias": official[prefix + "merging.2.bias"]}


def keras_weights(state: Mapping) -> dict[str, np.ndarray]:
    """The official ``state_dict``'s values (or the official checkpoint's) under
    ``model=paper``'s weight paths (a CaiT's under ``model=cait``'s:
    :func:`cait_weights`, a PiT's under ``model=pit``'s: :func:`pit_weights`, a
    Swin's under ``model=swin``'s: :func:`swin_weights`; T2T's under ``model=t2t``'s:
    :func:`t2t_weights`); ValueError for anything that is not one."""
    official = _Official(_state(state))
    if any(k.startswith("patch_transformer.") for k in official):
        return cait_weights(official)
    if "absolute_pos_embed" in official:
        return swin_weights(official)
    if any(k.startswith("layers.") for k in official):
        return pit_weights(official)
    if any(k.startswith("tokens_to_token.") for k in official):
        return t2t_weights(official)
    w = _common(official, "to_patch_embedding.")
    for i in range(_depth(official)):
        w.update(_block(official, f"transformer.layers.{i}.", f"block_{i}/"))
    return w


def _block(official: Mapping, o: str, k: str) -> dict[str, np.ndarray]:
    """The official ViT's block with prefix ``o`` (and every other's, renamed as
    it) under block path ``k``: its two LayerNorms, q/k/v, output and MLP."""
    q, key, v = np.split(official[o + "0.fn.to_qkv.weight"], 3)
    w = {k + "attention/query/kernel": q.T, k + "attention/key/kernel": key.T,
         k + "attention/value/kernel": v.T,
         **_dense(official, o + "0.fn.to_out.0.", k + "attention/output/"),
         **_norm(official, o + "0.norm.", k + "attention_norm/"),
         **_norm(official, o + "1.norm.", k + "mlp_norm/"),
         **_dense(official, o + "1.fn.net.0.", k + "mlp/dense_0/"),
         **_dense(official, o + "1.fn.net.3.", k + "mlp/output/")}
    if o + "0.fn.scale" in official:
        w[k + "attention/temperature"] = official[o + "0.fn.scale"]
    if o + "0.fn.to_qkv.bias" in official:   # Swin's
        w.update({f"{k}attention/{part}/bias": bias for part, bias in zip(
            ("query", "key", "value"), np.split(official[o + "0.fn.to_qkv.bias"], 3))})
    return w


def cait_weights(official: Mapping) -> dict[str, np.ndarray]:
    """An official CaiT's state dict (arrays) under ``model=cait``'s weight paths."""
    official = _renamed(official, CAIT_BLOCK)
    w = _common(official, "to_patch_embedding.0.")
    for stack, name in (("patch_transformer", "block_"), ("cls_transformer", "class_block_")):
        for i in range(_depth(official, stack)):
            o, k = f"{stack}.layers.{i}.", f"{name}{i}/"
            a = o + "0.fn."   # its q and fused k, v stacked as the ViT's fused q/k/v
            official[a + "to_qkv.weight"] = np.concatenate(
                [official[a + "to_q.weight"], official[a + "to_kv.weight"]])
            w.update({**_block(official, o, k),
                      k + "attention/pre_softmax_mixing": official[a + "mix_heads_pre_attn"],
                      k + "attention/post_softmax_mixing": official[a + "mix_heads_post_attn"],
                      k + "attention_scale": official[o + "0.scale"],
                      k + "mlp_scale": official[o + "1.scale"]})
    return w


def pit_weights(official: Mapping) -> dict[str, np.ndarray]:
    """An official PiT's state dict (arrays) under ``model=pit``'s weight paths."""
    official = _Official(official)
    conv = official.get("to_patch_embedding.0.weight")
    if conv is not None:   # (dim, channels, p, p) as the Linear over (p, p, channels) features
        official = _Official({**official, "to_patch_embedding.1.bias":
                              official["to_patch_embedding.0.bias"],
                              "to_patch_embedding.1.weight": _conv_as_linear(conv)})
    w = _common(official, "to_patch_embedding.")
    block, stage = 0, 0
    while any(k.startswith(f"layers.{2 * stage}.layers.") for k in official):
        if stage:
            w.update(_pool(official, f"layers.{2 * stage - 1}.", f"pool_{stage}/"))
        for i in range(_depth(official, f"layers.{2 * stage}")):
            w.update(_block(official, f"layers.{2 * stage}.layers.{i}.", f"block_{block}/"))
            block += 1
        stage += 1
    return w


def _pool(official: Mapping, o: str, k: str) -> dict[str, np.ndarray]:
    """The official PiT's pooling with prefix ``o`` under path ``k``: the class
    token's Linear, then SPT's ``merging`` or the depthwise and 1x1 Conv2d."""
    spt = o + "class_linear.weight" in official
    linear = o + ("class_linear." if spt else "cls_ff.")
    dim = official[linear + "weight"].shape[1]
    w = _dense(official, linear, k + "class_projection/")
    if spt:
        return {**w, **_shifted(official, o, k + "shifted_tokenizer/", dim)}
    conv = o + "downsample.net."
    return {**w, k + "depthwise/kernel":  # (2 dim, 1, 3, 3) to (3, 3, dim, 2)
            official[conv + "0.weight"].reshape(dim, -1, 3, 3).transpose(2, 3, 0, 1),
            k + "depthwise/bias": official[conv + "0.bias"],
            k + "pointwise/kernel": official[conv + "1.weight"][:, :, 0, 0].T,
            k + "pointwise/bias": official[conv + "1.bias"]}


def t2t_weights(official: Mapping) -> dict[str, np.ndarray]:
    """An official T2T's state dict (arrays) under ``model=t2t``'s weight paths."""
    official = _Official(official)
    renamed = _renamed({re.sub(r"^tokens_to_token\.attention(\d+)\.",   # numbered from 1 there
                               lambda m: f"tokens_to_token.layers.{int(m[1]) - 1}.",
                               re.sub(r"^blocks\.", "transformer.layers.", name)): value
                        for name, value in official.items()}, TIMM_BLOCK)
    t = "tokens_to_token."
    w = {"class_token/token": official["cls_token"],
         **_norm(official, "norm.", "final_norm/"), **_dense(official, "head.", "logits/"),
         **_norm(official, t + "norm.", "patch_tokenizer/norm/"),
         **_dense(official, t + "project.", "patch_tokenizer/projection/")}
    for i in range(_depth(renamed)):
        w.update(_block(renamed, f"transformer.layers.{i}.", f"block_{i}/"))
    for j in range(_depth(renamed, "tokens_to_token")):
        w.update(_block(renamed, f"{t}layers.{j}.", f"patch_tokenizer/token_transformer_{j}/"))
    first = "patch_tokenizer/token_transformer_0/"
    features = len(w[first + "attention_norm/gamma"])
    if features == 9 * 3 * len(SPT_ORDER):   # SPT: (copy, channel, window position)
        order = np.arange(features).reshape(len(SPT_ORDER), 3, 9)[list(SPT_ORDER)].reshape(-1)
        for part in ("attention_norm/gamma", "attention_norm/beta", "attention/query/kernel",
                     "attention/key/kernel", "attention/value/kernel"):
            w[first + part] = w[first + part][order]
    return w


def _conv_as_linear(conv: np.ndarray) -> np.ndarray:
    """A patch embedding's Conv2d weight (dim, channels, p, p) as the Linear weight
    over (row, column, channel) patch features that it equals."""
    return conv.transpose(0, 2, 3, 1).reshape(len(conv), -1)


def swin_weights(official: Mapping) -> dict[str, np.ndarray]:
    """An official Swin's state dict (arrays) under ``model=swin``'s weight paths."""
    official = _renamed(official, TIMM_BLOCK)
    w = {"position_embedding/embedding": official["absolute_pos_embed"][0],
         **_norm(official, "norm.", "final_norm/"), **_dense(official, "head.", "logits/")}
    if "patch_embed.merging.2.weight" in official:
        w.update(_shifted(official, "patch_embed.", "patch_tokenizer/"))
    else:
        w.update({"patch_tokenizer/projection/kernel":
                  _conv_as_linear(official["patch_embed.proj.weight"]).T,
                  "patch_tokenizer/projection/bias": official["patch_embed.proj.bias"],
                  **_norm(official, "patch_embed.norm.", "patch_norm/")})
    block, stage = 0, 0
    while any(k.startswith(f"layers.{stage}.blocks.") for k in official):
        if stage:
            w.update(_merging(official, f"layers.{stage - 1}.", f"merge_{stage}/"))
        for i in range(_depth(official, f"layers.{stage}", "blocks")):
            o, k = f"layers.{stage}.blocks.{i}.", f"block_{block}/"
            w.update(_block(official, o, k))
            w[k + "relative_position_bias"] = official[o + "attn.relative_position_bias_table"]
            block += 1
        stage += 1
    return w


def _merging(official: Mapping, o: str, k: str) -> dict[str, np.ndarray]:
    """The official Swin's merging after the stage of prefix ``o`` under path ``k``:
    SPT's ``merging`` over the stage's width, or the LayerNorm and ``reduction``."""
    if o + "downsample.merging.2.weight" in official:
        width = official[o + "blocks.0.0.norm.weight"].shape[0]
        return _shifted(official, o + "downsample.", k, width)
    return {**_norm(official, o + "downsample.norm.", k + "norm/"),
            k + "reduction/kernel": official[o + "downsample.reduction.weight"].T}


def load_official_weights(model: keras.Model, state: Mapping) -> keras.Model:
    """Copy an official ``SPT_LSA_ViT`` ViT, CaiT, PiT, Swin or T2T state dict into ``model``
    (``model=paper``, ``cait``, ``pit``, ``swin`` or ``t2t`` with matching switches, classes, sizes);
    every trainable weight is set.
    ``state`` may be the official checkpoint itself (its ``model_state_dict``).

    Raises ValueError naming the first weight that has no counterpart or the
    wrong shape, before anything is assigned.
    """
    values = keras_weights(state)
    for layer in attention_layers(model):
        if layer.learnable_temperature and not (
                layer.temperature_form == "multiply" and layer.temperature_per_head):
            raise ValueError(f"{layer.name} learns its temperature as temperature_form="
                             f"{layer.temperature_form!r}, per_head={layer.temperature_per_head}: "
                             f"the official scale is a per-head multiplier ({_CHECK})")
    plan = []
    for variable in model.weights:
        if variable.path not in values:
            continue
        value = values.pop(variable.path)
        # the same shape up to axes of length 1 (a transposed matrix is refused)
        if [d for d in value.shape if d != 1] != [d for d in variable.shape if d != 1]:
            raise ValueError(f"official weight for {variable.path} has shape {value.shape}, "
                             f"the model's is {tuple(variable.shape)} ({_CHECK})")
        plan.append((variable, np.reshape(value, variable.shape)))
    if values:
        raise ValueError(f"the model has no weight for {sorted(values)[0]} ({_CHECK})")
    assigned = {variable.path for variable, _ in plan}
    missing = [v.path for v in model.trainable_weights if v.path not in assigned]
    if missing:
        raise ValueError(f"the state dict has no value for {missing[0]} ({_CHECK})")
    for variable, value in plan:
        variable.assign(value.astype(variable.dtype))
    return model
