"""Record the official code's outputs for the golden tests (not run by CI).

Runs the official PyTorch code (github.com/aanna0701/SPT_LSA_ViT) on fixed
inputs and writes ``tests/data/official_golden.npz``, which
``tests/test_golden.py`` reads with neither PyTorch nor the official code:

- forward logits of the official ViT and SL-ViT (CIFAR-100 settings) with
  weights drawn by :func:`golden_weights` (numpy, seeded, in the official
  ``state_dict`` order: the test draws the same ones and loads them with
  ``ablation.model.official_weights``);
- every parameter of a freshly built official ViT and SL-ViT (its own init):
  mean, standard deviation and a fixed sample of its values;
- every AutoAugment operation of the CIFAR-10 policy (both signs where it
  takes one) on the :func:`golden_images` (a digest per output image, and the
  first two images' outputs whole), the policy's table with its magnitudes;
- draws of the official CutMix box (``rand_bbox`` with its Beta draw) and of
  random erasing (``RandomErasing``: whether, and where);
- ``torch.optim.AdamW``'s trajectory on fixed gradients of several scales.

``--cait`` writes ``tests/data/official_golden_cait.npz`` instead (read by
``tests/model/test_cait.py``), from the official ``create_model`` (``--model cait``,
``--sd 0.1``): the CaiT's logits (32 px, CIFAR-100) for :func:`golden_weights`
plain, SPT + LSA as published (its -1e-9 diagonal) and SPT + LSA with a real
mask (the official forward with the diagonal set to -inf after the
pre-softmax head mixing: the suite's default), the parameter counts of every
spt/lsa combination at 32 px (100 classes) and 64 px (200 classes), a fresh
model's LayerScale values, and a fresh model's parameters plain and SPT + LSA
(as the PiT's below; a sample of those outside the patch stage and of its
first block).

``--pit`` writes ``tests/data/official_golden_pit.npz`` (read by
``tests/model/test_pit.py``) likewise for the PiT (``--model pit``): the logits
plain and SPT + LSA, the parameter counts, and a fresh model's parameters
(moments of every one, a sample of those outside the transformer blocks);
``--swin`` ``tests/data/official_golden_swin.npz`` for the Swin (``--model swin``,
read by ``tests/model/test_swin.py``), the first block sampled too; ``--t2t``
``tests/data/official_golden_t2t.npz`` for the T2T-ViT (``--model t2t``, read by
``tests/model/test_t2t.py``), its fixed ``pos_embed`` left as built.

Usage, in an environment with torch, einops, pillow and numpy::

    git clone https://github.com/aanna0701/SPT_LSA_ViT /tmp/SPT_LSA_ViT
    python tools/official_golden.py /tmp/SPT_LSA_ViT
    python tools/official_golden.py /tmp/SPT_LSA_ViT --cait    # or --pit, --swin, --t2t
"""
from __future__ import annotations

import hashlib
import json
import random
import sys
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "official_golden.npz"
OUT_CAIT = OUT.with_name("official_golden_cait.npz")
OUT_PIT = OUT.with_name("official_golden_pit.npz")
OUT_SWIN = OUT.with_name("official_golden_swin.npz")
OUT_T2T = OUT.with_name("official_golden_t2t.npz")
CIFAR100_STAT = ((0.5070, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762))
LOGIT_IMAGES = 8          # the first images, fed to the official models
INIT_SAMPLE = 2000        # values kept per parameter
ADAMW = dict(lr=1e-3, weight_decay=0.05, steps=30, scales=(1e-9, 1e-7, 1e-5, 1e-3, 1.0))


def _smooth(rng, side):
    coarse = rng.integers(0, 256, (4, 4, 3)).astype(np.float64)
    idx = (np.arange(side) + 0.5) * 4 / side - 0.5
    i0 = np.clip(np.floor(idx).astype(int), 0, 3)
    i1 = np.clip(i0 + 1, 0, 3)
    t = np.clip(idx - i0, 0, 1)
    rows = coarse[i0] * (1 - t)[:, None, None] + coarse[i1] * t[:, None, None]
    return rows[:, i0] * (1 - t)[None, :, None] + rows[:, i1] * t[None, :, None]


def _kinds(rng, side):
    """One image of each kind a histogram or a resampling can tell apart."""
    yy, xx = np.mgrid[0:side, 0:side] / (side - 1)
    colour = lambda: rng.integers(0, 256, 3)  # noqa: E731
    cells = int(rng.integers(2, 9))
    checker = ((np.mgrid[0:side, 0:side] * cells // side).sum(axis=0) % 2)[..., None]
    boxes = np.full((side, side, 3), colour(), np.float64)
    for _ in range(4):
        top, left = rng.integers(0, side - 4, 2)
        h, w = rng.integers(3, side // 2, 2)
        boxes[top:top + h, left:left + w] = colour()
    return {
        "smooth": np.clip(_smooth(rng, side) + rng.normal(0, 20, (side, side, 3)), 0, 255),
        "noise": rng.integers(0, 256, (side, side, 3)),
        "flat": np.broadcast_to(colour(), (side, side, 3)),
        "gradient_x": xx[..., None] * colour() + (1 - xx[..., None]) * colour(),
        "gradient_y": yy[..., None] * colour() + (1 - yy[..., None]) * colour(),
        "checker": checker * colour() + (1 - checker) * colour(),
        "boxes": boxes,
        "low_contrast": 120 + rng.integers(0, 12, (side, side, 3)),
        "binary": rng.integers(0, 2, (side, side, 1)) * 255 * np.ones(3),
        "grey": np.repeat(np.clip(_smooth(rng, side)[..., :1] + rng.normal(0, 30, (side, side, 1)),
                                  0, 255), 3, axis=2),
        "dark": rng.integers(0, 40, (side, side, 3)),
        "bright": rng.integers(215, 256, (side, side, 3)),
        "saturated": (_smooth(rng, side) > 127) * 255,
    }


def golden_images(n: int = 54, side: int = 32, seed: int = 0) -> np.ndarray:
    """``n`` varied uint8 images (n, side, side, 3), the kinds of :func:`_kinds` in turn
    (smooth fields with noise, noise, flat, gradients, edges, low contrast, binary,
    grey, dark, bright, saturated), from numpy alone."""
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < n:
        out.extend(np.clip(np.rint(v), 0, 255).astype(np.uint8)
                   for v in _kinds(rng, side).values())
    return np.stack(out[:n])


def golden_weights(names_shapes, seed: int) -> dict:
    """Seeded weights for every official parameter, drawn in the given order."""
    rng = np.random.default_rng(seed)
    values = {}
    for name, shape in names_shapes:
        if name.endswith("scale"):
            values[name] = 0.25 * (1 + 0.2 * rng.standard_normal(shape))
        elif "norm" in name or name.startswith("mlp_head.0") or "merging.1" in name:
            base = 1.0 if name.endswith("weight") else 0.0
            values[name] = base + 0.1 * rng.standard_normal(shape)
        elif "mix_heads" in name:  # CaiT's talking heads: as their randn init
            values[name] = rng.standard_normal(shape)
        elif name in ("pos_embedding", "cls_token"):
            values[name] = 0.5 * rng.standard_normal(shape)
        else:
            values[name] = 0.05 * rng.standard_normal(shape)
        values[name] = values[name].astype(np.float32)
    return values


def digest(image: np.ndarray) -> np.ndarray:
    """A 20-byte digest of a uint8 image (shape and values)."""
    image = np.ascontiguousarray(image, np.uint8)
    return np.frombuffer(hashlib.sha1(repr(image.shape).encode() + image.tobytes()).digest(),
                         np.uint8)


def init_sample(values: np.ndarray) -> np.ndarray:
    """The first :data:`INIT_SAMPLE` values in a fixed pseudo-random order."""
    flat = np.asarray(values, np.float64).reshape(-1)
    order = np.random.default_rng(0).permutation(len(flat))[:INIT_SAMPLE]
    return flat[order]


def adamw_problem():
    """Initial parameters and a gradient per step, at several magnitudes."""
    rng = np.random.default_rng(7)
    scales = np.repeat(np.array(ADAMW["scales"]), 8)
    start = rng.standard_normal(len(scales)) * 0.1
    grads = rng.standard_normal((ADAMW["steps"], len(scales))) * scales
    return start.astype(np.float32), grads.astype(np.float32)


def _official_models(repo):
    from models.vit import ViT
    return lambda flag: ViT(img_size=32, patch_size=4, num_classes=100, dim=192, mlp_dim_ratio=2,
                            depth=9, heads=12, dim_head=16, stochastic_depth=0.1,
                            is_SPT=flag, is_LSA=flag).eval()


def normalised(images: np.ndarray) -> np.ndarray:
    """The first :data:`LOGIT_IMAGES` images as the official CIFAR-100 ``Normalize`` gives them."""
    mean, std = (np.array(s, np.float32) for s in CIFAR100_STAT)
    return ((images[:LOGIT_IMAGES] / np.float32(255) - mean) / std).astype(np.float32)


def record_init(record: dict, label: str, state, sampled=lambda name: True) -> None:
    """A fresh model's parameters (its ``state_dict``): names, every one's mean and
    standard deviation, and a sample of each ``sampled`` one (else NaN)."""
    names = [k for k, v in state.items() if v.dtype.is_floating_point]
    record[f"{label}_init_names"] = np.array(json.dumps(names))
    record[f"{label}_init_moments"] = np.array(
        [[state[n].double().mean().item(), state[n].double().std(unbiased=False).item()]
         for n in names])
    record[f"{label}_init_samples"] = np.stack(
        [np.pad(s, (0, INIT_SAMPLE - len(s)), constant_values=np.nan)
         for s in (init_sample(state[n].numpy()) if sampled(n) else np.empty(0)
                   for n in names)])


def record_logits(record: dict, label: str, model, x: np.ndarray, fixed=()) -> None:
    """``model``'s eval logits on ``x`` (NHWC) with :func:`golden_weights` (seed 1)
    for its parameters (not its buffers: Swin's constant masks; not the ``fixed``
    ones: T2T's sinusoid table), their names and shapes, and the weights' checksum."""
    import torch

    parameters = dict(model.named_parameters())
    names = [(k, tuple(v.shape)) for k, v in model.state_dict().items()
             if k in parameters and k not in fixed]
    weights = golden_weights(names, seed=1)
    model.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()}, strict=False)
    with torch.no_grad():
        record[f"{label}_logits"] = model.eval()(torch.from_numpy(x.transpose(0, 3, 1, 2))).numpy()
    record[f"{label}_names"] = np.array(json.dumps([[n, list(s)] for n, s in names]))
    record[f"{label}_checksum"] = np.float64(sum(float(v.sum()) for v in weights.values()))


def record_models(record: dict, images: np.ndarray, make) -> None:
    import torch

    record["normalised"] = x = normalised(images)
    for label, flag in (("vit", False), ("slvit", True)):
        torch.manual_seed(0)
        model = make(flag)
        record_init(record, label, model.state_dict())
        record["layer_norm_eps"] = np.float64(model.transformer.layers[0][0].norm.eps)
        record_logits(record, label, model, x)


def record_policy(record: dict, images: np.ndarray) -> None:
    from PIL import Image
    from utils.autoaug import CIFAR10Policy

    table, keys, digests, whole = [], [], [], []
    for sub in CIFAR10Policy().policies:
        row = []
        for p, op, m in ((sub.p1, sub.operation1, sub.magnitude1),
                         (sub.p2, sub.operation2, sub.magnitude2)):
            name = type(op).__name__
            name = {"ShearX": "shear_x", "ShearY": "shear_y", "TranslateX": "translate_x",
                    "TranslateY": "translate_y"}.get(name, name.lower())
            row.append([name, float(p), float(m)])
            signed = name in ("shear_x", "shear_y", "translate_x", "translate_y",
                              "color", "contrast", "sharpness", "brightness")
            for sign in (1, -1) if signed else (1,):
                key = (name, float(m), sign)
                if key in keys:
                    continue
                original = random.choice
                random.choice = lambda seq, s=sign: s
                try:
                    outs = [np.asarray(op(Image.fromarray(im), m)) for im in images]
                finally:
                    random.choice = original
                keys.append(key)
                digests.append(np.stack([digest(o) for o in outs]))
                whole.append(np.stack(outs[:2]))
        table.append(row)
    record["policy"] = np.array(json.dumps(table))
    record["op_keys"] = np.array(json.dumps(keys))
    record["op_digests"] = np.stack(digests)
    record["op_outputs"] = np.stack(whole).astype(np.uint8)


def record_boxes(record: dict) -> None:
    import torch
    from utils.mix import rand_bbox
    from utils.random_erasing import RandomErasing

    np.random.seed(0)
    boxes = []
    for _ in range(20000):
        lam = np.random.beta(1.0, 1.0)
        boxes.append(rand_bbox((128, 3, 32, 32), lam))
    record["cutmix_boxes"] = np.array(boxes, np.int16)  # x1, y1, x2, y2
    random.seed(0)
    eraser = RandomErasing(probability=0.25, mean=list(CIFAR100_STAT[0]))
    draws = []
    for _ in range(8000):
        out = eraser(torch.zeros(3, 32, 32))
        mask = (out[0] != 0).numpy()
        rows, cols = np.flatnonzero(mask.any(axis=1)), np.flatnonzero(mask.any(axis=0))
        if len(rows):
            draws.append((1, rows[0], cols[0], len(rows), len(cols)))
            assert np.allclose(out[:, mask].numpy().T, CIFAR100_STAT[0])
        else:
            draws.append((0, -1, -1, 0, 0))
    record["erasing_draws"] = np.array(draws, np.int16)  # erased, top, left, h, w


def record_adamw(record: dict) -> None:
    import torch

    start, grads = adamw_problem()
    param = torch.nn.Parameter(torch.from_numpy(start.copy()))
    optimizer = torch.optim.AdamW([param], lr=ADAMW["lr"], weight_decay=ADAMW["weight_decay"])
    trajectory = []
    for g in grads:
        param.grad = torch.from_numpy(g.copy())
        optimizer.step()
        trajectory.append(param.detach().numpy().copy())
    record["adamw_trajectory"] = np.stack(trajectory)


def _timm_stand_in() -> None:
    """``timm.models.layers`` as the official models use it (``create_model`` imports
    Swin and T2T, which take ``to_2tuple``, ``trunc_normal_`` and ``DropPath`` from it)."""
    import types

    import torch
    from utils.drop_path import DropPath

    layers = types.ModuleType("timm.models.layers")
    layers.to_2tuple = lambda x: x if isinstance(x, tuple) else (x, x)
    layers.trunc_normal_ = torch.nn.init.trunc_normal_
    layers.DropPath = DropPath
    sys.modules.setdefault("timm", types.ModuleType("timm"))
    sys.modules.setdefault("timm.models", types.ModuleType("timm.models"))
    sys.modules.setdefault("timm.models.layers", layers)


def _create(model: str, size: int, classes: int, spt: bool, lsa: bool):
    """The official ``create_model``'s ``model`` (``--sd 0.1``)."""
    import argparse

    from models.create_model import create_model
    return create_model(size, classes, argparse.Namespace(model=model, sd=0.1, is_SPT=spt,
                                                          is_LSA=lsa))


def _cait(size: int, classes: int, spt: bool, lsa: bool):
    return _create("cait", size, classes, spt, lsa)


def parameter_counts(model: str) -> np.ndarray:
    """Rows (image size, classes, spt, lsa, trainable parameters) of the official
    ``model`` at 32 px (100 classes) and 64 px (200 classes)."""
    return np.array([[size, classes, spt, lsa, sum(
        p.numel() for p in _create(model, size, classes, spt, lsa).parameters() if p.requires_grad)]
        for size, classes in ((32, 100), (64, 200)) for spt in (0, 1) for lsa in (0, 1)], np.int64)


def _masked_forward(self, x, context=None):
    """The official CaiT ``Attention.forward`` with a real diagonal mask: -inf after
    the pre-softmax head mixing (the official code writes -1e-9 before it)."""
    import torch
    from einops import rearrange
    from torch import einsum

    h = self.heads
    context = x if context is None else context
    qkv = (self.to_q(x), *self.to_kv(context).chunk(2, dim=-1))
    q, k, v = map(lambda t: rearrange(t, "b n (h d) -> b h n d", h=h), qkv)
    scale = self.scale.view(1, h, 1, 1) if self.is_LSA else self.scale
    dots = einsum("b h i d, b h j d -> b h i j", q, k) * scale
    dots = einsum("b h i j, h g -> b g i j", dots, self.mix_heads_pre_attn)
    if self.is_LSA and self.if_patch_attn:
        eye = torch.eye(dots.shape[-1], dtype=torch.bool)
        dots = dots.masked_fill(eye, float("-inf"))
    attn = einsum("b h i j, h g -> b g i j", self.attend(dots), self.mix_heads_post_attn)
    out = rearrange(einsum("b h i j, b h j d -> b h i d", attn, v), "b h n d -> b n (h d)")
    return self.to_out(out)


# CaiT's record: a sample of what is its own (embeddings, class token, the class-attention
# blocks, head) and of the patch stage's first block, not of its 23 others
CAIT_SAMPLED = (lambda name: not name.startswith("patch_transformer.")
                or name.startswith("patch_transformer.layers.0."))


def record_cait(record: dict, images: np.ndarray) -> None:
    import torch
    from models import cait

    record["param_counts"] = parameter_counts("cait")
    torch.manual_seed(0)
    fresh = _cait(32, 100, True, True)
    record["layer_scale_init"] = np.array(
        [[float(layer[j].scale.detach().flatten()[0]) for j in (0, 1)]
         for stack in (fresh.patch_transformer, fresh.cls_transformer) for layer in stack.layers])
    record["images"], record["normalised"] = images[:LOGIT_IMAGES], normalised(images)
    x = record["normalised"]
    official_forward = cait.Attention.forward
    for label, flag, forward in (("cait", False, official_forward),
                                 ("slcait", True, official_forward),
                                 ("slcait_masked", True, _masked_forward)):
        torch.manual_seed(0)
        official = _cait(32, 100, flag, flag)
        if forward is official_forward:   # the fresh model's laws (the mask draws nothing)
            record_init(record, label, {k: v.detach() for k, v in official.named_parameters()},
                        CAIT_SAMPLED)
        cait.Attention.forward = forward
        try:
            record_logits(record, label, official, x)
        finally:
            cait.Attention.forward = official_forward


def record_staged(record: dict, images: np.ndarray, model: str, sampled, fixed=()) -> None:
    """The official PiT's, Swin's or T2T's (``model``) parameter counts, a fresh model's
    parameters (:func:`record_init`: a sample of each ``sampled`` one) and the
    logits, plain (label ``model``) and SPT + LSA (``sl<model>``); the ``fixed``
    parameters left as built."""
    import torch

    record["param_counts"] = parameter_counts(model)
    record["images"], record["normalised"] = images[:LOGIT_IMAGES], normalised(images)
    for label, flag in ((model, False), (f"sl{model}", True)):
        torch.manual_seed(0)
        official = _create(model, 32, 100, flag, flag)
        record_init(record, label, {k: v.detach() for k, v in official.named_parameters()
                                    if k not in fixed}, sampled)
        record_logits(record, label, official, record["normalised"], fixed)


# the staged models' records: a sample of what is their own (embeddings, pooling or
# merging, head), not of every block's ViT layers (Swin's first block whole)
# (T2T's: its tokens-to-token, class token and head)
STAGED = {"--pit": (OUT_PIT, "pit", lambda name: ".layers." not in name, ()),
          "--swin": (OUT_SWIN, "swin", lambda name: ".blocks." not in name
                     or name.startswith("layers.0.blocks.0."), ()),
          "--t2t": (OUT_T2T, "t2t", lambda name: not name.startswith("blocks."), ("pos_embed",))}


def main_official(repo: str, which: str) -> None:
    """``--cait``, ``--pit``, ``--swin`` or ``--t2t``: that model's golden file."""
    sys.path.insert(0, repo)
    _timm_stand_in()
    record, images = {}, golden_images()
    if which == "--cait":
        out = OUT_CAIT
        record_cait(record, images)
    else:
        out, model, sampled, fixed = STAGED[which]
        record_staged(record, images, model, sampled, fixed)
    np.savez_compressed(out, **record)
    print(f"wrote {out} ({out.stat().st_size:,} bytes)")


def main(repo: str) -> None:
    sys.path.insert(0, repo)
    np.int = int  # the official tables use the alias numpy removed
    import types
    if "torchvision" not in sys.modules:  # random_erasing.py star-imports it, uses none of it
        sys.modules["torchvision"] = types.ModuleType("torchvision")
        sys.modules["torchvision.transforms"] = types.ModuleType("torchvision.transforms")

    record = {}
    images = golden_images()
    record["images"] = images
    record_models(record, images, _official_models(repo))
    record_policy(record, images)
    record_boxes(record)
    record_adamw(record)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(OUT, **record)
    print(f"wrote {OUT} ({OUT.stat().st_size:,} bytes)")


if __name__ == "__main__":
    flags = [a for a in sys.argv[1:] if a in ("--cait", "--pit", "--swin", "--t2t")]
    arguments = [a for a in sys.argv[1:] if a not in flags]
    repository = arguments[0] if arguments else "/tmp/SPT_LSA_ViT"
    if flags:
        main_official(repository, flags[0])
    else:
        main(repository)
