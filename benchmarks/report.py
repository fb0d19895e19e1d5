"""The reporter on N synthetic records shaped like real ones (50-epoch
histories with per-layer temperatures), against a baseline in the same run:
reading and parsing the same files with ``json`` alone, the floor any
reporter pays. Prints seconds per stage and the ratio to the baseline.

    python -m benchmarks report --records 10000
"""
from __future__ import annotations

import json
import tempfile
import time
from itertools import product
from pathlib import Path

import numpy as np

from ablation.config import SWITCHES
from ablation.files import read_bytes
from ablation.runs.record import MAX_RECORD_BYTES, find_records, write_record


def make_records(root: Path, count: int, epochs: int = 50, layers: int = 8) -> int:
    """``count`` records over 5 datasets x 2 models x 8 variants x seeds."""
    rng = np.random.default_rng(0)
    blocks = list(product(["cifar10", "cifar100", "fashion_mnist", "mnist", "digits"],
                          ["keras_io", "paper"]))
    variants = list(product([False, True], repeat=len(SWITCHES)))
    seeds = -(-count // (len(blocks) * len(variants)))
    written = 0
    for (dataset, model), variant, seed in product(blocks, variants, range(seeds)):
        if written == count:
            break
        flags = dict(zip(SWITCHES, variant))
        top1 = 0.5 + 0.02 * sum(variant) + rng.normal(0, 0.01)
        history = [{"epoch": e, "train/loss": 2.0 / e, "train/top1": top1 * e / epochs,
                    "train/top5": 0.8, "val/loss": 2.1 / e, "val/top1": top1 * e / epochs,
                    "val/top5": 0.8, "lr": 1e-3, "epoch_seconds": 30.0,
                    **({f"temperature/block_{i}": 8.0 for i in range(layers)}
                      if any(variant) else {})}
                   for e in range(1, epochs + 1)]
        config = {"dataset": {"name": dataset}, "model": {"name": model, "depth": layers},
                  "trainer": {"epochs": epochs, "learning_rate": 0.001},
                  **flags, "seed": seed,
                  "wandb": {"mode": "disabled"}}
        write_record(root / f"{dataset}-{model}-{''.join(str(int(v)) for v in variant)}-s{seed}", {
            "schema": 1, "status": "completed", "variant": "x", "switches": flags,
            "dataset": dataset, "model": model, "seed": seed, "config": config,
            "metrics": {"test_top1": top1, "test_top5": top1 + 0.2, "best_val_top1": top1},
            "history": history, "params": 21_787_755, "train_seconds": 1500.0,
            "train_images_per_s": 300.0, "wandb": {"mode": "disabled"},
            "finished_at": "2026-11-22T00:00:00+00:00"})
        written += 1
    return written


def bench_report(count: int, plots: bool) -> None:
    from ablation.report import comparison, factorial, load_runs, write_report

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        t = time.perf_counter()
        make_records(root, count)
        size = sum(p.stat().st_size for p in find_records(root))
        print(f"{count} records, {size / 1e6:.1f} MB, made in {time.perf_counter() - t:.1f} s")

        cpu, t = time.process_time(), time.perf_counter()
        for p in find_records(root):
            json.loads(read_bytes(p, MAX_RECORD_BYTES))
        baseline = time.perf_counter() - t
        print(f"baseline, find + json.loads every file: {baseline:6.2f} s "
              f"({time.process_time() - cpu:.2f} CPU s)")

        stages = {}
        cpu, t = time.process_time(), time.perf_counter()
        runs = load_runs(root)
        stages["load_runs"] = time.perf_counter() - t
        t = time.perf_counter()
        comparison(runs)
        factorial(runs)
        stages["comparison + factorial"] = time.perf_counter() - t
        for name, seconds in stages.items():
            print(f"{name:>38}: {seconds:6.2f} s")
        cpu_stages = time.process_time() - cpu
        t = time.perf_counter()
        write_report(root, make_plots=plots, wandb_settings={"mode": "disabled"})
        total = time.perf_counter() - t
        label = "write_report (all outputs" + (", plots)" if plots else ", no plots)")
        print(f"{label:>38}: {total:6.2f} s")
        print(f"read and tabulate: {sum(stages.values()):.2f} s ({cpu_stages:.2f} CPU s), "
              f"{sum(stages.values()) / baseline:.1f}x the json-only baseline; "
              f"target < 10 s on the 2-core machine")


def add_arguments(parser) -> None:
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--plots", action="store_true", help="include the PNG figures")


def run(args) -> None:
    bench_report(args.records, args.plots)
