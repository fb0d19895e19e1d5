"""The official code's training step, timed: run by the peer python (with torch
and einops), never imported by the product. It imports neither ablation nor keras.

    /path/to/python benchmarks/peer_worker.py --official /path/to/SPT_LSA_ViT \
        [--device cuda] [--batch 128] [--steps 50] [--warmup 5] [--compile] [--bf16]

Builds the official ``--model`` (vit, cait, pit, swin or t2t) as its ``create_model``
does for a 32 px dataset (SPT and LSA on, stochastic depth 0.1, CIFAR-100's 100
classes; tools/official_golden.py's stand-in for timm), its loss (label smoothing
0.1) and its optimizer (AdamW, lr 1e-3, weight decay 0.05), then times forward,
backward and the optimizer step on one batch of random data, with the device
synchronised around the timed window. Prints one JSON line.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--official", required=True, help="checkout of aanna0701/SPT_LSA_ViT")
    p.add_argument("--model", default="vit", help="the official create_model's --model")
    p.add_argument("--device", default="cuda")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--compile", action="store_true", help="torch.compile the model")
    p.add_argument("--bf16", action="store_true", help="bf16 autocast around forward and loss")
    args = p.parse_args(argv)

    # this file's folder holds the bench's own modules: keep them off the import path
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [d for d in sys.path if os.path.abspath(d or ".") != here]
    sys.path[:0] = [os.path.abspath(args.official), os.path.join(here, "..", "tools")]
    import torch
    from official_golden import _create, _timm_stand_in  # create_model, as the golden tests
    from utils.losses import LabelSmoothingCrossEntropy

    device = torch.device(args.device)
    torch.manual_seed(0)
    _timm_stand_in()
    model = _create(args.model, 32, 100, True, True).to(device)
    params = sum(t.numel() for t in model.parameters())
    criterion = LabelSmoothingCrossEntropy(smoothing=0.1).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=5e-2)
    step_model = torch.compile(model) if args.compile else model
    model.train()
    # CIFAR-normalised inputs: random data of the batch's shape, on the device already
    images = torch.randn(args.batch, 3, 32, 32, device=device)
    target = torch.randint(0, 100, (args.batch,), device=device)

    def step() -> None:
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16,
                            enabled=args.bf16):
            loss = criterion(step_model(images), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    compile_s = time.perf_counter()
    for _ in range(args.warmup):
        step()
    sync()
    compile_s = time.perf_counter() - compile_s
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(args.steps):
        step()
    sync()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    images_done = args.batch * args.steps
    name = (torch.cuda.get_device_name(device) if device.type == "cuda" else device.type)
    print(json.dumps({
        "which": "official", "params": int(params),
        "train_images_per_s": images_done / wall, "cpu_ms_per_image": 1000 * cpu / images_done,
        "warmup_s": compile_s, "torch": torch.__version__, "device": name,
        "precision": "bf16_autocast" if args.bf16 else "float32",
        "compiled": bool(args.compile), "batch_size": args.batch,
        "tf32": bool(torch.backends.cuda.matmul.allow_tf32) if device.type == "cuda" else None,
    }))


if __name__ == "__main__":
    main()
