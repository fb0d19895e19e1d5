"""Benchmarks that print figures (never timed unit tests), behind one entry point.

    python -m benchmarks report --records 10000
    python -m benchmarks train model=keras_io spt=true lsa=true \
        --baseline ../shared/reference/keras_io_vit_small_ds.py
    python -m benchmarks train model=keras_io trainer.precision=mixed_bfloat16 \
        --concurrent 4 --steps 1000
    python -m benchmarks augment model=keras_io
    python -m benchmarks sweep --against /tmp/old-checkout
    python -m benchmarks jobs experiment=smoke wandb.mode=disabled --jobs 8
    python -m benchmarks diagnostics --model keras_io --steps 5
    python -m benchmarks pipeline --batch-size 128
    python -m benchmarks phases --cache both --jobs-at-once 1,4
    python -m benchmarks peer --official ../SPT_LSA_ViT --peer-python ../torch/bin/python

``report``: the reporter on synthetic records (:mod:`benchmarks.report`).
``train``, ``augment``: training throughput of the model a run config
describes, on random data of the dataset's shape, optionally alternating
with a baseline in fresh processes (:mod:`benchmarks.train`).
``sweep``, ``jobs``: a whole multirun's overhead, and N jobs in one process
(:mod:`benchmarks.sweep`). ``diagnostics``: what the per-epoch locality
probe costs against an epoch (:mod:`benchmarks.diagnostics`).
``pipeline``: the input pipeline against the model's training speed
(:mod:`benchmarks.pipeline`). ``phases``: a whole sweep, command to report,
split into start-up, compilation, training, evaluation, diagnostics and the
report, cold and warm compilation cache, one job at a time and side by side
(:mod:`benchmarks.phases`). ``peer``: the official PyTorch code's training
step against ``model=paper``, alternating (:mod:`benchmarks.peer`).

Run from the repository root. The package sits beside ``ablation``, not in it:
nothing in the product imports it and the wheel does not ship it. Each module
gives its subcommand's ``add_arguments(parser)`` and ``run(args)``.
"""
from __future__ import annotations

import argparse
import importlib
import os

# subcommand -> (module, its add_arguments, its run, one line of help)
COMMANDS = {
    "report": ("report", "add_arguments", "run", "reporter speed on synthetic records"),
    "train": ("train", "add_arguments", "run",
              "training throughput, optionally against a baseline"),
    "augment": ("augment", "add_arguments", "run",
                "the augmentation alone, fused vs keras_layers"),
    "sweep": ("sweep", "add_arguments", "run", "a whole multirun: wall time minus training time"),
    "jobs": ("sweep", "add_job_arguments", "run_jobs",
             "N jobs in one process: fixed cost and memory per job"),
    "diagnostics": ("diagnostics", "add_arguments", "run",
                    "the locality probe's cost against a training epoch"),
    "pipeline": ("pipeline", "add_arguments", "run",
                 "the input pipeline's images/s against the model's training"),
    "phases": ("phases", "add_arguments", "run",
               "a whole sweep, command to report, split into where its time went"),
    "peer": ("peer", "add_arguments", "run",
             "the official PyTorch code's training step against model=paper"),
}


def _module(name: str):
    return importlib.import_module(f"benchmarks.{name}")


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="python -m benchmarks",
                                  description=__doc__.splitlines()[0])
    sub = top.add_subparsers(dest="what", required=True)
    for what, (module, add, _, help_text) in COMMANDS.items():
        getattr(_module(module), add)(sub.add_parser(what, help=help_text))
    return top


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    module, _, run, _ = COMMANDS[args.what]
    getattr(_module(module), run)(args)


if __name__ == "__main__":
    main()
