"""Initial weights as the code a model reproduces draws them (``model.init``).

- ``official`` (the official PyTorch ViT): class token and position embedding
  standard normal (``torch.randn``); every Linear layer xavier-normal, i.e.
  normal with variance 2 / (fan_in + fan_out), biases zero. The official q/k/v
  projection is one fused ``Linear(dim, 3 * inner)``: each of the three Dense
  layers here is drawn with the fused matrix's variance. The official CaiT
  fuses only k and v (``to_q``, ``to_kv``: ``qkv_fused=(1, 2, 2)``) and draws
  its talking-heads matrices standard normal. The official PiT's convolutions
  take torch's fans (the kernel's positions count): its plain patch embedding
  (``patch_kernel``: the kernel's side) and its depthwise pooling convolution.
  The official T2T draws every Linear and its class token normal with
  ``normal_std`` (timm's ``trunc_normal_``, cut at +-2: far in the tails).
  The official Swin (``torch_layers``) keeps torch's own Linear and Conv2d
  draws (:func:`torch_default`).
- ``keras_io`` (the keras.io example): Keras' defaults (Glorot-uniform
  kernels, zero biases), and the position embedding as its ``Embedding``
  layer's, uniform in +-0.05.
- ``keras``: as the layers are built (position embedding truncated normal
  0.02, class token zeros, Glorot-uniform kernels).

The draws are numpy's, from the run's seed, assigned after the model is built.
"""
from __future__ import annotations

import numpy as np

from ablation.config.choices import INITIALISATIONS

QKV = ("attention/query/kernel", "attention/key/kernel", "attention/value/kernel")


def _xavier_normal(rng: np.random.Generator, shape, fan_in: int, fan_out: int) -> np.ndarray:
    return rng.normal(0.0, np.sqrt(2.0 / (fan_in + fan_out)), shape)


def initial_values(path: str, shape, scheme: str, rng: np.random.Generator,
                   qkv_fused=(3, 3, 3), patch_kernel: int = 1, normal_std: float | None = None):
    """The initial value of the weight at ``path`` (None: keep the layer's own);
    ``qkv_fused``: how many of q, k, v the official Linear holding each of them fuses;
    ``patch_kernel``: the side of the official patch embedding's convolution (1: a Linear);
    ``normal_std``: every Linear and the class token normal with this spread (T2T)."""
    if scheme == "official" and normal_std is not None:
        if path.endswith("class_token/token") or (path.endswith("/kernel") and len(shape) == 2):
            return rng.normal(0.0, normal_std, shape)
        return None
    if scheme == "official":
        if path.endswith(("class_token/token", "position_embedding/embedding",
                          "attention/pre_softmax_mixing", "attention/post_softmax_mixing")):
            return rng.standard_normal(shape)
        for end, fused in zip(QKV, qkv_fused):  # a part of the fused (dim, n * inner) matrix
            if path.endswith(end):
                return _xavier_normal(rng, shape, shape[0], fused * shape[1])
        if path.endswith("depthwise/kernel"):  # (side, side, channels, outputs per channel)
            area = shape[0] * shape[1]
            return _xavier_normal(rng, shape, area, area * shape[2] * shape[3])
        if path.endswith("/kernel") and len(shape) == 2:
            conv = patch_kernel ** 2 if path == "patch_tokenizer/projection/kernel" else 1
            return _xavier_normal(rng, shape, shape[0], conv * shape[1])
        return None
    if scheme == "keras_io" and path.endswith("position_embedding/embedding"):
        return rng.uniform(-0.05, 0.05, shape)
    return None


def torch_default(path: str, shapes, rng: np.random.Generator):
    """The official Swin's draw of the weight at ``path`` (``shapes``: every weight's
    shape by path), or None: a Dense kernel and its bias uniform in +-1/sqrt(fan_in)
    (torch's Linear and Conv2d); the position embedding and relative position biases
    normal with sd 0.02 (timm's ``trunc_normal_``, whose cut at +-2 is never reached)."""
    if path.endswith(("position_embedding/embedding", "relative_position_bias")):
        return rng.normal(0.0, 0.02, shapes[path])
    layer, _, leaf = path.rpartition("/")
    kernel = shapes.get(layer + "/kernel", ())
    if leaf in ("kernel", "bias") and len(kernel) == 2:
        bound = 1.0 / np.sqrt(kernel[0])
        return rng.uniform(-bound, bound, shapes[path])
    return None


def initialise(model, scheme: str = "keras", seed: int | None = None,
               qkv_fused=(3, 3, 3), patch_kernel: int = 1, normal_std: float | None = None,
               torch_layers: bool = False) -> None:
    """Re-draw ``model``'s weights as ``scheme`` describes (see the module's note)."""
    if scheme not in INITIALISATIONS:
        raise ValueError(f"model.init={scheme!r} is not one of {', '.join(INITIALISATIONS)}")
    if scheme == "keras":
        return
    rng = np.random.default_rng(None if seed is None else [int(seed), 0x1D17])
    shapes = {variable.path: tuple(variable.shape) for variable in model.weights}
    for variable in model.weights:
        value = (torch_default(variable.path, shapes, rng)
                 if torch_layers and scheme == "official" else
                 initial_values(variable.path, tuple(variable.shape), scheme, rng, qkv_fused,
                                patch_kernel, normal_std))
        if value is not None:
            variable.assign(value.astype(variable.dtype))
