"""Record the official code's outputs for the golden tests (not run by CI).

Runs the official PyTorch code (github.com/aanna0701/SPT_LSA_ViT) on fixed
inputs and writes ``tests/data/official_golden.npz``, which
``tests/test_golden.py`` reads with neither PyTorch nor the official code:

- forward logits of the official ViT and SL-ViT (CIFAR-100 settings) with
  weights drawn by :func:`golden_weights` (numpy, seeded, in the official
  ``state_dict`` order: the test draws the same ones and copies them in);
- the initial statistics of a freshly built official model (its own init);
- every AutoAugment operation of the CIFAR-10 policy (both signs where it
  takes one) on fixed images, the policy's table with its magnitudes;
- statistics of the official CutMix box and random-erasing box draws.

Usage, in an environment with torch, einops, pillow and numpy::

    git clone https://github.com/aanna0701/SPT_LSA_ViT /tmp/SPT_LSA_ViT
    python tools/official_golden.py /tmp/SPT_LSA_ViT
"""
from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "official_golden.npz"
CIFAR100_STAT = ((0.5070, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762))


def golden_images(n: int = 2, side: int = 32, seed: int = 0) -> np.ndarray:
    """Smooth colour fields with noise, uint8 (n, side, side, 3), from numpy alone."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        coarse = rng.integers(0, 256, (4, 4, 3)).astype(np.float64)
        idx = (np.arange(side) + 0.5) * 4 / side - 0.5
        i0 = np.clip(np.floor(idx).astype(int), 0, 3)
        i1 = np.clip(i0 + 1, 0, 3)
        t = np.clip(idx - i0, 0, 1)
        rows = coarse[i0] * (1 - t)[:, None, None] + coarse[i1] * t[:, None, None]
        image = rows[:, i0] * (1 - t)[None, :, None] + rows[:, i1] * t[None, :, None]
        out.append(np.clip(image + rng.normal(0, 20, image.shape), 0, 255).astype(np.uint8))
    return np.stack(out)


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
        elif name in ("pos_embedding", "cls_token"):
            values[name] = 0.5 * rng.standard_normal(shape)
        else:
            values[name] = 0.05 * rng.standard_normal(shape)
        values[name] = values[name].astype(np.float32)
    return values


def main(repo: str) -> None:
    sys.path.insert(0, repo)
    np.int = int  # the official tables use the alias numpy removed
    import types
    if "torchvision" not in sys.modules:  # random_erasing.py star-imports it, uses none of it
        sys.modules["torchvision"] = types.ModuleType("torchvision")
        sys.modules["torchvision.transforms"] = types.ModuleType("torchvision.transforms")
    import torch
    from models.vit import ViT
    from PIL import Image
    from utils.autoaug import CIFAR10Policy
    from utils.mix import rand_bbox
    from utils.random_erasing import RandomErasing

    record = {}
    images = golden_images()
    record["images"] = images
    mean, std = (np.array(s, np.float32) for s in CIFAR100_STAT)
    x = ((images / np.float32(255) - mean) / std).astype(np.float32)
    record["normalised"] = x
    for label, flag in (("vit", False), ("slvit", True)):
        torch.manual_seed(0)
        model = ViT(img_size=32, patch_size=4, num_classes=100, dim=192, mlp_dim_ratio=2,
                    depth=9, heads=12, dim_head=16, stochastic_depth=0.1,
                    is_SPT=flag, is_LSA=flag).eval()
        state = model.state_dict()
        if not flag:  # the official model's own initial statistics
            qkv = state["transformer.layers.0.0.fn.to_qkv.weight"].numpy()
            record["init_stats"] = np.array([
                state["pos_embedding"].numpy().std(), state["cls_token"].numpy().std(),
                qkv.var(), state["transformer.layers.0.1.fn.net.0.weight"].numpy().var(),
                model.transformer.layers[0][0].norm.eps], np.float64)
        names = [(k, tuple(v.shape)) for k, v in state.items() if v.dtype.is_floating_point]
        weights = golden_weights(names, seed=1)
        model.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()},
                              strict=False)
        with torch.no_grad():
            logits = model(torch.from_numpy(x.transpose(0, 3, 1, 2))).numpy()
        record[f"{label}_logits"] = logits
        record[f"{label}_names"] = np.array(json.dumps([[n, list(s)] for n, s in names]))
        record[f"{label}_checksum"] = np.float64(sum(float(v.sum()) for v in weights.values()))

    policy = CIFAR10Policy().policies
    table, ops, keys = [], [], []
    for sub in policy:
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
                ops.append(np.stack(outs))
        table.append(row)
    record["policy"] = np.array(json.dumps(table))
    record["op_keys"] = np.array(json.dumps(keys))
    record["op_outputs"] = np.stack(ops).astype(np.uint8)

    np.random.seed(0)
    random.seed(0)
    shares = []
    for _ in range(20000):
        lam = np.random.beta(1.0, 1.0)
        x1, y1, x2, y2 = rand_bbox((128, 3, 32, 32), lam)
        shares.append((x2 - x1) * (y2 - y1) / 1024)
    eraser = RandomErasing(probability=1.0, mean=list(CIFAR100_STAT[0]))
    aspects, areas = [], []
    for _ in range(4000):
        img = torch.zeros(3, 32, 32)
        out = eraser(img)
        mask = (out[0] != 0).numpy()
        rows, cols = mask.any(axis=1).sum(), mask.any(axis=0).sum()
        if rows:
            aspects.append(rows / cols)
            areas.append(rows * cols / 1024)
    record["cutmix_share"] = np.array([np.mean(shares), np.median(shares)])
    record["erasing"] = np.array([np.median(aspects), np.mean(areas), len(aspects) / 4000])
    OUT.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(OUT, **record)
    print(f"wrote {OUT} ({OUT.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/SPT_LSA_ViT")
