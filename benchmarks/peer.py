"""The official PyTorch code's training step against this project's, for one of the
paper's architectures: ``python -m benchmarks peer [--model vit|cait|pit|swin|t2t]``.

Alternates, one fresh process each, (a) the official model's training step (SPT and
LSA on, its AdamW and label-smoothed loss, random CIFAR-100-shaped batches), run
by another python that has torch and einops (:mod:`benchmarks.peer_worker`,
which imports neither ablation nor keras), and (b) this project's preset of that
architecture (``model=paper`` for ViT) with the same batch through the ``bench train``
worker. Prints images/s for each, the ratio of the medians (project over official),
then one JSON line.

``--bf16`` sets bf16 autocast on the official side and
``trainer.precision=mixed_bfloat16`` on the project's; ``--compile`` wraps the
official model in ``torch.compile``. The project's backend is ``KERAS_BACKEND``'s.
Both sides time the step alone: the project's side runs with ``augmentation=none``
unless the extra overrides name another.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

from benchmarks.common import alternate, run_worker
from ablation.config import SWITCHES

WORKER = Path(__file__).with_name("peer_worker.py")
# The project's side: the paper's model and training settings on CIFAR-100's shape.
PROJECT_OVERRIDES = ["trainer=paper", "dataset=cifar100", "augmentation=none",
                     *(f"{key}=true" for key in SWITCHES)]
PRESETS = {"vit": "paper", "cait": "cait", "pit": "pit", "swin": "swin", "t2t": "t2t"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("overrides", nargs="*", help="extra Hydra overrides for the project's side")
    p.add_argument("--official", required=True, help="checkout of aanna0701/SPT_LSA_ViT")
    p.add_argument("--model", default="vit", choices=list(PRESETS),
                   help="the architecture: the official create_model's --model")
    p.add_argument("--peer-python", required=True,
                   help="a python with torch and einops, which runs the official code")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"],
                   help="the official side's torch device")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--steps", type=int, default=50, help="timed steps per process")
    p.add_argument("--warmup", type=int, default=5,
                   help="untimed steps first (tracing, torch.compile)")
    p.add_argument("--rounds", type=int, default=3, help="fresh processes of each side")
    p.add_argument("--compile", action="store_true", help="torch.compile the official model")
    p.add_argument("--bf16", action="store_true",
                   help="bf16 on both sides: autocast there, mixed_bfloat16 here")


def check_arguments(args) -> str | None:
    """The first thing wrong with the arguments, in one line, or None."""
    for name in ("batch", "steps", "warmup", "rounds"):
        if getattr(args, name) < 1:
            return f"--{name} must be >= 1"
    official = Path(args.official)
    if not (official / "models" / "vit.py").is_file() or not (
            official / "utils" / "losses.py").is_file():
        return (f"--official {args.official}: not a checkout of aanna0701/SPT_LSA_ViT "
                "(no models/vit.py and utils/losses.py)")
    peer = Path(args.peer_python)
    if not peer.is_file() or not os.access(peer, os.X_OK):
        return f"--peer-python {args.peer_python}: no such executable"
    return None


def project_overrides(args) -> list[str]:
    precision = "mixed_bfloat16" if args.bf16 else "float32"
    return [f"model={PRESETS[args.model]}", *PROJECT_OVERRIDES,
            f"trainer.batch_size={args.batch}",
            f"trainer.precision={precision}", *args.overrides]


def official_command(args) -> list[str]:
    cmd = [args.peer_python, str(WORKER), "--official", str(Path(args.official).resolve()),
           "--model", args.model, "--device", args.device, "--batch", str(args.batch),
           "--steps", str(args.steps), "--warmup", str(args.warmup)]
    return cmd + ["--compile"] * args.compile + ["--bf16"] * args.bf16


def project_command(args) -> list[str]:
    return [sys.executable, "-m", "benchmarks", "train", "--worker", "project",
            "--steps", str(args.steps), "--warmup", str(args.warmup), *project_overrides(args)]


def summarise(runs: dict[str, list[dict]]) -> dict:
    """Medians of each side's images/s, their ratio (project over official), and
    the round-by-round ratios (each pair ran back to back)."""
    project = [r["train_images_per_s"] for r in runs["project"]]
    official = [r["train_images_per_s"] for r in runs["official"]]
    if not project or len(project) != len(official):
        raise ValueError("bench peer: each round needs one run of each side")
    return {"project_images_per_s": statistics.median(project),
            "official_images_per_s": statistics.median(official),
            "ratio_of_medians": statistics.median(project) / statistics.median(official),
            "round_ratios": [a / b for a, b in zip(project, official)]}


def run(args) -> None:
    problem = check_arguments(args)
    if problem:
        print(f"bench peer: {problem}", file=sys.stderr)
        raise SystemExit(2)
    from ablation.config import ConfigError, validate
    from ablation.config.compose import compose_config

    try:  # bad overrides fail here, in one line, before any process starts
        validate(compose_config(project_overrides(args)))
    except ConfigError as e:
        print(f"bench peer: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    commands = {"official": official_command(args), "project": project_command(args)}
    runs, _ = alternate(
        ["official", "project"], args.rounds, lambda side: run_worker("bench peer", side, commands[side]),
        lambda res: (f"{res['train_images_per_s']:9.1f} images/s "
                     f"{res['cpu_ms_per_image']:6.2f} CPU ms/image, "
                     f"{res['params']:,} params, {res['precision']} on {res['device']}"))
    out = summarise(runs)
    official, project = runs["official"][0], runs["project"][0]
    out.update({
        "batch_size": args.batch, "steps": args.steps, "warmup": args.warmup,
        "rounds": args.rounds, "compile": args.compile, "bf16": args.bf16, "model": args.model,
        "official_params": official["params"], "project_params": project["params"],
        "official_device": official["device"], "official_precision": official["precision"],
        "torch": official["torch"], "project_backend": project["backend"],
        "project_device": project["device"], "project_precision": project["precision"],
        "project_overrides": project_overrides(args)})
    print(f"\nofficial {out['official_images_per_s']:.1f} images/s "
          f"(torch {out['torch']} on {out['official_device']}, {out['official_precision']}"
          f"{', compiled' if args.compile else ''}); project model={PRESETS[args.model]} "
          f"{out['project_images_per_s']:.1f} images/s ({out['project_backend']} on "
          f"{out['project_device']}, {out['project_precision']}); ratio of medians "
          f"{out['ratio_of_medians']:.2f}, batch {args.batch}, {args.rounds} rounds of "
          f"{args.steps} steps (fresh process each)")
    print(json.dumps(out))
